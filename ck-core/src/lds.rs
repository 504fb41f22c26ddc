//! Shared-memory (LDS) layouts of GEMM tiles and their bank behaviour (spec §11, TV8).
//!
//! CK's XOR-preshuffled layout of an `M × K` tile (`KPack` contiguous elements per chunk,
//! `L = MLdsLayer` rows packed into one 128-byte LDS row) is the descriptor chain
//! `naive → xor → unmerge → merge` of spec §11, whose closed form is
//!
//! ```text
//!   m_hi = m / L,  l = m % L,  k0 = k / KPack,  k1 = k % KPack,  K0 = K / KPack
//!   row  = (k0·L + l) XOR (m_hi % (K0·L))
//!   offset(m, k) = row·KPack + m_hi·(K·L) + k1
//! ```
//!
//! The KPack-element chunks of each packed row are permuted by XOR with the row index, so lanes
//! reading one chunk each down a column (`k-read`) hit different banks. The plain layout is
//! `offset = m·K + k`. Both are bijections onto `[0, M·K)`.
//!
//! Bank behaviour is computed with the NVIDIA model of [`crate::bank`], in `const fn`, so a
//! kernel can require a layout to be conflict-free (or at most n-way) for a pattern and fail to
//! compile otherwise:
//!
//! ```
//! use ck_core::lds::{LdsLayout, Pattern};
//! // Spec TV8b: fp16, M = 64, K = 64, KPack = 8 (MLdsLayer = 1).
//! const XOR: LdsLayout = LdsLayout::xor_or_panic(64, 64, 8, 2, None);
//! const _: () = XOR.assert_max_ways(Pattern::KRead, 1);   // compiles: conflict-free
//! assert_eq!(XOR.offset(1, 0), 72); // ((0 XOR 1)·8 + 1·64)
//! assert_eq!(LdsLayout::plain_or_panic(64, 64, 8, 2).pattern_cost(Pattern::KRead).wavefronts, 32);
//! ```
//! ```compile_fail
//! use ck_core::lds::{LdsLayout, Pattern};
//! const PLAIN: LdsLayout = LdsLayout::plain_or_panic(64, 64, 8, 2);
//! const _: () = PLAIN.assert_max_ways(Pattern::KRead, 1); // 8-way: does not compile
//! ```
//!
//! Supported: any parameters that pass the checks (`K % KPack == 0`, `M % MLdsLayer == 0`, the
//! XOR length `K0·L` a power of two); the two warp patterns below. Power-of-two shapes are the
//! case the XOR layout is designed for; other shapes are computed exactly but rarely help.

use crate::bank::{lanes_per_phase, shared_wavefronts, worst_bank, LaneAccess, SharedCost};
use crate::descriptor::TensorDescriptor;
use crate::error::{Error, Rule};
use crate::msg::MsgBuf;
use crate::transform::{tri, Transform};
use crate::Index;

/// A 32-lane access pattern in which each lane moves `KPack · elem_bytes` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Lane `i` accesses `(m = i, k = 0..KPack)`: a column of chunks (the block GEMM's read).
    KRead,
    /// Lane `i` accesses `(m = i / (K/KPack), k = (i mod (K/KPack))·KPack ..)`: rows of chunks
    /// (the store of a row-major DRAM tile).
    KWrite,
}

impl Pattern {
    /// The pattern's name in `ck lds` output.
    pub const fn name(self) -> &'static str {
        match self {
            Pattern::KRead => "k-read",
            Pattern::KWrite => "k-write",
        }
    }
}

/// An LDS tile layout: XOR-swizzled (spec §11) or plain. Made only by the checked constructors
/// ([`LdsLayout::xor`], [`LdsLayout::plain`]), so every layout satisfies their rules (e.g. KPack
/// ≥ 1 divides K); read its parameters through the accessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LdsLayout {
    m_per_block: Index,
    k_per_block: Index,
    k_pack: Index,
    elem_bytes: Index,
    mlds_layer: Index,
    swizzled: bool,
}

const fn check(m: Index, k: Index, k_pack: Index, elem_bytes: Index) -> Result<(), Error> {
    if m < 1 {
        return Err(Error::new(Rule::LengthNotPositive, "m per block").values(m, 0));
    }
    if k < 1 {
        return Err(Error::new(Rule::LengthNotPositive, "k per block").values(k, 0));
    }
    if k_pack < 1 {
        return Err(Error::new(Rule::LengthNotPositive, "k pack").values(k_pack, 0));
    }
    if elem_bytes < 1 {
        return Err(Error::new(Rule::LengthNotPositive, "element bytes").values(elem_bytes, 0));
    }
    if k % k_pack != 0 {
        return Err(Error::new(Rule::LdsKPack, "k pack").values(k, k_pack));
    }
    if (m as i128) * (k as i128) * (elem_bytes as i128) > i32::MAX as i128 {
        return Err(Error::new(Rule::IndexOverflow, "tile").values(Index::MAX, 0));
    }
    Ok(())
}

impl LdsLayout {
    /// Rows (M per block).
    pub const fn m_per_block(&self) -> Index {
        self.m_per_block
    }

    /// Columns (K per block).
    pub const fn k_per_block(&self) -> Index {
        self.k_per_block
    }

    /// Contiguous elements per chunk (KPack).
    pub const fn k_pack(&self) -> Index {
        self.k_pack
    }

    /// Bytes per element.
    pub const fn elem_bytes(&self) -> Index {
        self.elem_bytes
    }

    /// Rows packed per LDS row (MLdsLayer; 1 for the plain layout).
    pub const fn mlds_layer(&self) -> Index {
        self.mlds_layer
    }

    /// XOR-swizzled (or plain).
    pub const fn swizzled(&self) -> bool {
        self.swizzled
    }

    /// CK's MLdsLayer rule: `max(1, (32·4 / KPerBlock) / sizeof(T))` (integer divisions).
    pub const fn default_mlds_layer(k_per_block: Index, elem_bytes: Index) -> Index {
        let l = (32 * 4 / k_per_block) / elem_bytes;
        if l < 1 {
            1
        } else {
            l
        }
    }

    /// CK's KPack rule (`GetVectorLoadSize`): with `e = M·K / block_size` elements per thread,
    /// the largest of 16, 8, 4 bytes (in elements) that divides `e`, else 1.
    pub const fn default_k_pack(m: Index, k: Index, block_size: Index, elem_bytes: Index) -> Index {
        let e = m * k / block_size;
        let mut bytes = 16;
        while bytes >= 4 {
            let n = bytes / elem_bytes;
            if n >= 1 && e % n == 0 {
                return n;
            }
            bytes /= 2;
        }
        1
    }

    /// The XOR-swizzled layout; `mlds_layer` defaults to CK's rule.
    pub const fn xor(
        m: Index,
        k: Index,
        k_pack: Index,
        elem_bytes: Index,
        mlds_layer: Option<Index>,
    ) -> Result<LdsLayout, Error> {
        tri!(check(m, k, k_pack, elem_bytes));
        let l = match mlds_layer {
            Some(l) => l,
            None => LdsLayout::default_mlds_layer(k, elem_bytes),
        };
        if l < 1 {
            return Err(Error::new(Rule::LengthNotPositive, "mlds layer").values(l, 0));
        }
        if m % l != 0 {
            return Err(Error::new(Rule::LdsLayer, "mlds layer").values(m, l));
        }
        let xor_len = (k / k_pack) * l;
        if xor_len & (xor_len - 1) != 0 {
            return Err(
                Error::new(Rule::XorNotPowerOfTwo, "xor length K0·MLdsLayer").values(xor_len, 0),
            );
        }
        Ok(LdsLayout {
            m_per_block: m,
            k_per_block: k,
            k_pack,
            elem_bytes,
            mlds_layer: l,
            swizzled: true,
        })
    }

    /// The plain layout `offset = m·K + k`.
    pub const fn plain(
        m: Index,
        k: Index,
        k_pack: Index,
        elem_bytes: Index,
    ) -> Result<LdsLayout, Error> {
        tri!(check(m, k, k_pack, elem_bytes));
        Ok(LdsLayout {
            m_per_block: m,
            k_per_block: k,
            k_pack,
            elem_bytes,
            mlds_layer: 1,
            swizzled: false,
        })
    }

    /// [`LdsLayout::xor`] for constants (a compile error names the rule).
    pub const fn xor_or_panic(
        m: Index,
        k: Index,
        k_pack: Index,
        elem_bytes: Index,
        mlds_layer: Option<Index>,
    ) -> LdsLayout {
        match LdsLayout::xor(m, k, k_pack, elem_bytes, mlds_layer) {
            Ok(l) => l,
            Err(e) => panic!("{}", e.rule.name()),
        }
    }

    /// [`LdsLayout::plain`] for constants.
    pub const fn plain_or_panic(m: Index, k: Index, k_pack: Index, elem_bytes: Index) -> LdsLayout {
        match LdsLayout::plain(m, k, k_pack, elem_bytes) {
            Ok(l) => l,
            Err(e) => panic!("{}", e.rule.name()),
        }
    }

    /// Elements the layout occupies (`M·K`: both layouts are bijections onto `[0, M·K)`).
    pub const fn element_space_size(&self) -> Index {
        self.m_per_block * self.k_per_block
    }

    /// Element offset of `(m, k)` (the closed form; equal to [`Self::descriptor`]'s).
    pub const fn offset(&self, m: Index, k: Index) -> Index {
        if !self.swizzled {
            return m * self.k_per_block + k;
        }
        let l = self.mlds_layer;
        let (m_hi, ml) = (m / l, m % l);
        let (k0, k1) = (k / self.k_pack, k % self.k_pack);
        let k0_count = self.k_per_block / self.k_pack;
        // `xor` checked that K0·MLdsLayer is a power of two.
        let row = crate::swizzle::Swizzle::of_columns(k0_count * l).column(m_hi, k0 * l + ml);
        row * self.k_pack + m_hi * (self.k_per_block * l) + k1
    }

    /// The layout as CK builds it: for XOR, `naive → xor → unmerge → merge` (spec §11); plain,
    /// a naive `[M, K]` view. Top dims `[m, k]`; the K pack is the guaranteed vector.
    pub const fn descriptor(&self) -> Result<TensorDescriptor, Error> {
        let (m, k, kp, l) = (
            self.m_per_block,
            self.k_per_block,
            self.k_pack,
            self.mlds_layer,
        );
        if !self.swizzled {
            return TensorDescriptor::naive(&[m, k], &[k, 1], kp, 1);
        }
        let k0 = k / kp;
        let d0 = tri!(TensorDescriptor::naive(
            &[k0 * l, m / l, kp],
            &[kp, k * l, 1],
            kp,
            1
        ));
        let d1 = tri!(d0.transform(
            &[
                tri!(Transform::xor(m / l, k0 * l)),
                tri!(Transform::pass_through(kp))
            ],
            &[&[1, 0], &[2]],
            &[&[1, 0], &[2]],
        ));
        let d2 = tri!(d1.transform(
            &[
                tri!(Transform::unmerge(&[k0, l])),
                tri!(Transform::pass_through(m / l)),
                tri!(Transform::pass_through(kp))
            ],
            &[&[0], &[1], &[2]],
            &[&[0, 2], &[1], &[3]],
        ));
        d2.transform(
            &[
                tri!(Transform::merge(&[m / l, l])),
                tri!(Transform::merge(&[k0, kp])),
            ],
            &[&[1, 2], &[0, 3]],
            &[&[0], &[1]],
        )
    }

    /// `(m, k)` of lane `lane`'s first element under `pattern`, or `None` if the lane falls
    /// outside the tile.
    pub const fn pattern_lane(&self, pattern: Pattern, lane: Index) -> Option<(Index, Index)> {
        let (m, k) = match pattern {
            Pattern::KRead => (lane, 0),
            Pattern::KWrite => {
                let per_row = self.k_per_block / self.k_pack;
                (lane / per_row, (lane % per_row) * self.k_pack)
            }
        };
        if m < self.m_per_block {
            Some((m, k))
        } else {
            None
        }
    }

    /// The 32 lanes' accesses of `pattern` (bytes: `KPack · elem_bytes` each) and how many there
    /// are.
    pub const fn pattern_accesses(&self, pattern: Pattern) -> ([LaneAccess; 32], usize) {
        let mut out = [LaneAccess {
            lane: 0,
            byte_address: 0,
            bytes: 0,
        }; 32];
        let mut n = 0;
        let mut lane = 0;
        while lane < 32 {
            if let Some((m, k)) = self.pattern_lane(pattern, lane) {
                out[n] = LaneAccess {
                    lane: lane as u32,
                    byte_address: (self.offset(m, k) * self.elem_bytes) as u64,
                    bytes: (self.k_pack * self.elem_bytes) as u32,
                };
                n += 1;
            }
            lane += 1;
        }
        (out, n)
    }

    /// Wavefronts and phases of `pattern`.
    pub const fn pattern_cost(&self, pattern: Pattern) -> SharedCost {
        let (acc, n) = self.pattern_accesses(pattern);
        shared_wavefronts(acc.split_at(n).0)
    }

    /// Panics (a compile error in a `const`) if some phase of `pattern` costs more than
    /// `max_ways` wavefronts, naming the pattern, the bank and the colliding lanes.
    pub const fn assert_max_ways(&self, pattern: Pattern, max_ways: u32) {
        let (acc, n) = self.pattern_accesses(pattern);
        let accesses = acc.split_at(n).0;
        let per_phase = lanes_per_phase(if n > 0 { acc[0].bytes } else { 4 });
        let mut phase = 0;
        while phase < 32 / per_phase {
            let p = worst_bank(accesses, phase, per_phase);
            if p.ways > max_ways {
                let mut m = MsgBuf::<400>::new()
                    .push_str("error[lds-bank-conflict]: pattern ")
                    .push_str(pattern.name())
                    .push_str(" is ")
                    .push_int(p.ways as i64)
                    .push_str("-way in phase ")
                    .push_int(phase as i64)
                    .push_str(": lanes ");
                let mut j = 0;
                while j < p.ways as usize {
                    if j > 0 {
                        m = m.push_str(", ");
                    }
                    m = m.push_int(p.lanes[j] as i64);
                    j += 1;
                }
                m = m
                    .push_str(" hit bank ")
                    .push_int(p.bank as i64)
                    .push_str(" in different words; at most ")
                    .push_int(max_ways as i64)
                    .push_str("-way is allowed — use the XOR layout or change KPack/MLdsLayer");
                panic!("{}", m.as_str());
            }
            phase += 1;
        }
    }
}
