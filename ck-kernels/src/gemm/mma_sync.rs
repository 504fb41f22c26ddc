//! GEMM `C[M,N] = A[M,K] · B[K,N]` (row-major, f32 accumulation), any M, N, K.
//!
//! `gemm_f32`: the SIMT kernel. A 256-thread block computes a 128 × 128 tile of C; each thread
//! holds 8 × 8 accumulators (distribution [`CTile`]: two 4-row and two 4-column strips 64 apart,
//! so its shared-memory reads are 16-byte vectors of consecutive lanes: conflict-free). K is
//! walked in steps of 16 (`BK`): A's 128 × 16 and B's 16 × 128 slices are loaded with tile windows
//! (distributions [`ASlice`], [`BSlice`]; edges read as zero), stored to shared memory (A
//! transposed, so both are read along M or N), double-buffered: the next slice is loaded into
//! registers while the current one is multiplied, so one barrier per step suffices.
//!
//! `gemm_bf16`: the `mma.sync` tensor-core kernel (any shape; see its documentation). Where N
//! and K are multiples of 8, [`crate::gemm::auto::launch_bf16`] runs a Hopper kernel
//! ([`crate::gemm::wgmma`], 5–6× faster on an H100) instead;
//! [`crate::gemm::choice::Bf16Kernel::for_shape`] says which.

use crate::gemm::epilogue::{CElement, Epilogue};
use ck_core::device::*;
use ck_core::tile::{make_tile_window, unroll, DistributedTensor, View2};
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// C's 128 × 128 tile: thread (warp w, lane l) owns rows {8w + 4(l/16) + 0..4} + {0, 64} and
    /// columns {4(l%16) + 0..4} + {0, 64}.
    pub struct CTile {
        warp_size: 32, block_size: 256,
        h: { m: [rep: 2, warp: 8, lane: 2, vec: 4], n: [rep: 2, lane: 16, vec: 4] },
        p: [[m.warp], [m.lane, n.lane]],
        y: [m.rep, m.vec, n.rep, n.vec],
    }
}

tile_distribution! {
    /// A's 128 × 16 slice: two threads per row, 8 consecutive k each (two 16-byte loads).
    pub struct ASlice {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8, lane: 16], k: [lane: 2, rep: 2, vec: 4] },
        p: [[m.warp], [m.lane, k.lane]],
        y: [k.rep, k.vec],
    }
}

tile_distribution! {
    /// B's 16 × 128 slice: 32 threads per row, 4 consecutive n each, two rows 8 apart.
    pub struct BSlice {
        warp_size: 32, block_size: 256,
        h: { k: [rep: 2, warp: 8], n: [lane: 32, vec: 4] },
        p: [[k.warp], [n.lane]],
        y: [k.rep, n.vec],
    }
}

const BM: i32 = 128;
const BN: i32 = 128;
const BK: i32 = 16;
/// One buffer of A (k-major, 16 × 128) or B (16 × 128).
const SLICE: u32 = (BK * BM) as u32;

/// Stores A's slice transposed (`As[k][m]`) and B's as is (`Bs[k][n]`) into buffer `buf`.
#[inline(always)]
fn stage(
    a: &DistributedTensor<ASlice, f32>,
    b: &DistributedTensor<BSlice, f32>,
    (a_s, b_s): (&SharedArray<f32, 4096>, &SharedArray<f32, 4096>),
    buf: u32,
) {
    let pa = ASlice::partition_index(thread_idx());
    ASlice::for_each_y(|y, d| {
        let [m, k] = ASlice::x_index(pa, y);
        a_s.store(buf * SLICE + k as u32 * BM as u32 + m as u32, a.get(d));
    });
    let pb = BSlice::partition_index(thread_idx());
    unroll::<2>(|r| {
        let [k, n] = BSlice::x_index(pb, [r as i32, 0]);
        let d = BSlice::d_index([r as i32, 0]);
        let v = [b.get(d), b.get(d + 1), b.get(d + 2), b.get(d + 3)];
        b_s.store_vec::<4>(buf * SLICE + k as u32 * BN as u32 + n as u32, v);
    });
}

/// `acc += A_s · B_s` over the 16 k of shared buffer `buf`, both stored k-major (`[k][m]`,
/// `[k][n]`); the thread's tile starts at row `m0`, column `n0` ([`CTile`]).
#[inline(always)]
fn multiply_slice(
    acc: &mut DistributedTensor<CTile, f32>,
    (a_s, b_s): (&SharedArray<f32, 4096>, &SharedArray<f32, 4096>),
    buf: u32,
    (m0, n0): (i32, i32),
) {
    unroll::<16>(|kk| {
        let row = buf * SLICE + kk as u32 * BM as u32;
        let a_lo = a_s.load_vec::<4>(row + m0 as u32);
        let a_hi = a_s.load_vec::<4>(row + m0 as u32 + 64);
        let b_lo = b_s.load_vec::<4>(row + n0 as u32);
        let b_hi = b_s.load_vec::<4>(row + n0 as u32 + 64);
        CTile::for_each_y(|y, d| {
            let av = if y[0] == 0 {
                a_lo[y[1] as usize]
            } else {
                a_hi[y[1] as usize]
            };
            let bv = if y[2] == 0 {
                b_lo[y[3] as usize]
            } else {
                b_hi[y[3] as usize]
            };
            acc.set(d, math::fma(av, bv, acc.get(d)));
        });
    });
}

/// `C = A · B` for f32, 128 × 128 tiles (grid: ⌈N/128⌉ · ⌈M/128⌉ blocks, block-row-major).
/// Launch bounds for two blocks per SM: 128 registers, no spill (143 without; +1–2 %).
#[tile_kernel(
    block = 256,
    min_blocks_per_sm = 2,
    distributions(CTile, ASlice, BSlice)
)]
pub fn gemm_f32(a: Global<f32>, b: Global<f32>, c: GlobalMut<f32>, m: u32, n: u32, k: u32) {
    let a_s = shared!(f32; 4096);
    let b_s = shared!(f32; 4096);
    let tiles_n = n.div_ceil(BN as u32);
    let (bm, bn) = (
        (block_idx() / tiles_n) as i32 * BM,
        (block_idx() % tiles_n) as i32 * BN,
    );
    let mut wa = make_tile_window::<ASlice, _>(View2::<_, f32, 4>::new(a, m, k, k), [bm, 0]);
    let mut wb = make_tile_window::<BSlice, _>(View2::<_, f32, 4>::new(b, k, n, n), [0, bn]);
    let mut acc = DistributedTensor::<CTile, f32>::zeros();
    let [m0, n0] = CTile::x_index(CTile::partition_index(thread_idx()), [0, 0, 0, 0]);
    let steps = k.div_ceil(BK as u32);
    stage(&wa.load::<f32>(), &wb.load::<f32>(), (&a_s, &b_s), 0);
    block_sync();
    for s in 0..steps {
        let buf = s % 2;
        // Prefetch the next slices into registers while this one is multiplied.
        wa.move_by([0, BK]);
        wb.move_by([BK, 0]);
        let (na, nb) = (wa.load::<f32>(), wb.load::<f32>());
        multiply_slice(&mut acc, (&a_s, &b_s), buf, (m0, n0));
        if s + 1 < steps {
            stage(&na, &nb, (&a_s, &b_s), 1 - buf);
        }
        block_sync();
    }
    make_tile_window::<CTile, _>(View2::<_, f32, 4>::new(c, m, n, n), [bm, bn]).store(&acc);
}

tile_distribution! {
    /// The 128 × 16 slice of a bf16 operand stored K-major (`linear`'s X `[M, K]` and W
    /// `[N, K]`): two threads per row, 8 consecutive k each (one 16-byte load where the rows
    /// allow it, else 8 scalar ones).
    pub struct KSlice {
        warp_size: 32, block_size: 256,
        h: { row: [warp: 8, lane: 16], k: [lane: 2, vec: 8] },
        p: [[row.warp], [row.lane, k.lane]],
        y: [k.vec],
    }
}

/// Stores a [`KSlice`] of bf16 widened and transposed (`s[k][r]`) into buffer `buf`.
#[inline(always)]
fn stage_k_major(t: &DistributedTensor<KSlice, Bf16>, s: &SharedArray<f32, 4096>, buf: u32) {
    let p = KSlice::partition_index(thread_idx());
    KSlice::for_each_y(|y, d| {
        let [r, k] = KSlice::x_index(p, y);
        s.store(
            buf * SLICE + k as u32 * BM as u32 + r as u32,
            t.get(d).to_f32(),
        );
    });
}

/// `C = act(alpha · X·Wᵀ + beta · D + bias)` with X `[m, k]` and W `[n, k]` bf16, on any shape:
/// [`gemm_f32`]'s 128 × 128 tiles and inner loop (f32 FMAs) over slices of both operands loaded
/// along K ([`KSlice`]), then [`Epilogue::apply`] on the accumulators and one store of C. The
/// fallback of `gemm::linear` for rows TMA cannot copy (N or K not a multiple of 8).
#[inline(always)]
fn linear_any_shape<O: CElement>(
    (x, w, c): (Global<Bf16>, Global<Bf16>, GlobalMut<O>),
    epilogue: Epilogue<O>,
    (m, n, k): (u32, u32, u32),
    (x_s, w_s): (&SharedArray<f32, 4096>, &SharedArray<f32, 4096>),
) {
    let tiles_n = n.div_ceil(BN as u32);
    let (bm, bn) = (
        (block_idx() / tiles_n) as i32 * BM,
        (block_idx() % tiles_n) as i32 * BN,
    );
    let mut wx = make_tile_window::<KSlice, _>(View2::<_, Bf16, 8>::new(x, m, k, k), [bm, 0]);
    let mut ww = make_tile_window::<KSlice, _>(View2::<_, Bf16, 8>::new(w, n, k, k), [bn, 0]);
    let mut acc = DistributedTensor::<CTile, f32>::zeros();
    let [m0, n0] = CTile::x_index(CTile::partition_index(thread_idx()), [0, 0, 0, 0]);
    let steps = k.div_ceil(BK as u32);
    stage_k_major(&wx.load::<Bf16>(), x_s, 0);
    stage_k_major(&ww.load::<Bf16>(), w_s, 0);
    block_sync();
    for s in 0..steps {
        let buf = s % 2;
        wx.move_by([0, BK]);
        ww.move_by([0, BK]);
        let (nx, nw) = (wx.load::<Bf16>(), ww.load::<Bf16>());
        multiply_slice(&mut acc, (x_s, w_s), buf, (m0, n0));
        if s + 1 < steps {
            stage_k_major(&nx, x_s, 1 - buf);
            stage_k_major(&nw, w_s, 1 - buf);
        }
        block_sync();
    }
    let (d, bias) = (epilogue.d, epilogue.bias);
    epilogue.apply(
        &mut acc,
        || O::load_f32::<CTile, 4>(d, (m, n, n), [bm, bn]),
        // Every row reads the same n values: a view of stride 0.
        || O::load_f32::<CTile, 4>(bias, (m, n, 0), [bm, bn]),
    );
    O::store_f32::<CTile, 4>(c, (m, n, n), [bm, bn], &acc);
}

/// Declares [`linear_any_shape`] writing C of `$o`.
macro_rules! linear_kernel {
    ($(#[$doc:meta])* $name:ident, $o:ty) => {
        $(#[$doc])*
        #[tile_kernel(block = 256, min_blocks_per_sm = 2, distributions(CTile, KSlice))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            x: Global<Bf16>,
            w: Global<Bf16>,
            c: GlobalMut<$o>,
            d: Global<$o>,
            bias: Global<$o>,
            m: u32,
            n: u32,
            k: u32,
            alpha: f32,
            beta: f32,
            flags: u32,
        ) {
            let x_s = shared!(f32; 4096);
            let w_s = shared!(f32; 4096);
            let epilogue = Epilogue::of(alpha, beta, (d, bias), flags);
            linear_any_shape((x, w, c), epilogue, (m, n, k), (&x_s, &w_s));
        }
    };
}
linear_kernel!(
    /// bf16 X `[M, K]` · (bf16 W `[N, K]`)ᵀ → bf16 C with the whole epilogue, any shape.
    linear_simt_bf16, Bf16
);
linear_kernel!(
    /// bf16 X `[M, K]` · (bf16 W `[N, K]`)ᵀ → f32 C with the whole epilogue, any shape.
    linear_simt_f32, f32
);

tile_distribution! {
    /// A's 128 × 32 bf16 slice in the `k-write` pattern (lane → row lane / 4, chunk lane % 4):
    /// conflict-free stores into the XOR layout (spec TV8).
    pub struct AStage {
        warp_size: 32, block_size: 256,
        h: { m: [rep: 2, warp: 8, lane: 8], k: [lane: 4, vec: 8] },
        p: [[m.warp], [m.lane, k.lane]],
        y: [m.rep, k.vec],
    }
}

tile_distribution! {
    /// B's 32 × 128 bf16 slice: 16 lanes × 8 n per row.
    pub struct BStage {
        warp_size: 32, block_size: 256,
        h: { k: [rep: 2, warp: 8, lane: 2], n: [lane: 16, vec: 8] },
        p: [[k.warp], [k.lane, n.lane]],
        y: [k.rep, n.vec],
    }
}

tile_distribution! {
    /// C's 128 × 128 tile in the mma accumulator layout: warp (wm, wn) owns 64 × 32 = 4 × 4
    /// m16n8 tiles; in each, lane (g, t) holds rows {g, g + 8} × cols {2t, 2t + 1} (PTX ISA).
    pub struct CMma {
        warp_size: 32, block_size: 256,
        h: { m: [wm: 2, mt: 4, h: 2, g: 8], n: [wn: 4, nt: 4, t: 4, e: 2] },
        p: [[m.wm, n.wn], [m.g, n.t]],
        y: [m.mt, n.nt, m.h, n.e],
    }
}

/// A's shared layout: spec TV8 (M 128, K 32, KPack 8, MLdsLayer 2).
pub const A_LDS: ck_core::lds::LdsLayout =
    ck_core::lds::LdsLayout::xor_or_panic(128, 32, 8, 2, None);
/// B's shared layout, k-major rows of 128 n, XOR-swizzled by k so `ldmatrix.trans` rows differ.
pub const B_LDS: ck_core::lds::LdsLayout =
    ck_core::lds::LdsLayout::xor_or_panic(32, 128, 8, 2, None);
const _: () = A_LDS.assert_max_ways(ck_core::lds::Pattern::KWrite, 1);

/// The plain layouts of the same tiles (for measuring what the swizzle buys).
pub const A_PLAIN: ck_core::lds::LdsLayout = ck_core::lds::LdsLayout::plain_or_panic(128, 32, 8, 2);
/// B's plain layout.
pub const B_PLAIN: ck_core::lds::LdsLayout = ck_core::lds::LdsLayout::plain_or_panic(32, 128, 8, 2);

/// Shared buffers of one block: A and B, double-buffered.
type Buffers = [SharedArray<Bf16, 4096>; 4];

/// One block's slices, staged into shared buffers.
#[inline(always)]
fn stage_bf16(
    a: &DistributedTensor<AStage, Bf16>,
    b: &DistributedTensor<BStage, Bf16>,
    (a_s, b_s): (SharedArray<Bf16, 4096>, SharedArray<Bf16, 4096>),
    (a_lds, b_lds): (ck_core::lds::LdsLayout, ck_core::lds::LdsLayout),
) {
    use ck_core::tile::LdsView;
    make_tile_window::<AStage, _>(LdsView::<Bf16, 4096, 8>::new(a_s, a_lds), [0, 0]).store(a);
    make_tile_window::<BStage, _>(LdsView::<Bf16, 4096, 8>::new(b_s, b_lds), [0, 0]).store(b);
}

/// `C = A · B` with bf16 A and B and f32 C on the tensor cores: 128 × 128 × 32 block tiles,
/// 8 warps of 64 × 32 (16 `mma.m16n8k16` per k16 step), fragments by `ldmatrix` from the
/// swizzled shared layouts, double-buffered with a register prefetch. Launch bounds for two
/// blocks per SM (128 registers and a 36-byte spill, accepted: 129 vs 57 TFLOP/s at 4096³ on an
/// H100 with one block per SM at 130 registers).
#[tile_kernel(
    block = 256,
    min_blocks_per_sm = 2,
    distributions(CMma, AStage, BStage)
)]
pub fn gemm_bf16(a: Global<Bf16>, b: Global<Bf16>, c: GlobalMut<f32>, m: u32, n: u32, k: u32) {
    let bufs = [
        shared!(Bf16; 4096),
        shared!(Bf16; 4096),
        shared!(Bf16; 4096),
        shared!(Bf16; 4096),
    ];
    gemm_bf16_body(a, b, c, (m, n, k), bufs, (A_LDS, B_LDS));
}

/// [`gemm_bf16`](GemmBf16) with plain shared layouts (bank conflicts for comparison; same results).
#[tile_kernel(
    block = 256,
    min_blocks_per_sm = 2,
    distributions(CMma, AStage, BStage)
)]
pub fn gemm_bf16_plain(
    a: Global<Bf16>,
    b: Global<Bf16>,
    c: GlobalMut<f32>,
    m: u32,
    n: u32,
    k: u32,
) {
    let bufs = [
        shared!(Bf16; 4096),
        shared!(Bf16; 4096),
        shared!(Bf16; 4096),
        shared!(Bf16; 4096),
    ];
    gemm_bf16_body(a, b, c, (m, n, k), bufs, (A_PLAIN, B_PLAIN));
}

#[inline(always)]
fn gemm_bf16_body(
    a: Global<Bf16>,
    b: Global<Bf16>,
    c: GlobalMut<f32>,
    (m, n, k): (u32, u32, u32),
    [a0, a1, b0, b1]: Buffers,
    (a_lds, b_lds): (ck_core::lds::LdsLayout, ck_core::lds::LdsLayout),
) {
    let tiles_n = n.div_ceil(BN as u32);
    let (bm, bn) = (
        (block_idx() / tiles_n) as i32 * BM,
        (block_idx() % tiles_n) as i32 * BN,
    );
    let mut wa = make_tile_window::<AStage, _>(View2::<_, Bf16, 8>::new(a, m, k, k), [bm, 0]);
    let mut wb = make_tile_window::<BStage, _>(View2::<_, Bf16, 8>::new(b, k, n, n), [0, bn]);
    let mut acc = DistributedTensor::<CMma, f32>::zeros();
    let (warp, lane) = (warp_id() as i32, lane_id() as i32);
    let (m_base, n_base) = ((warp / 4) * 64, (warp % 4) * 32);
    // This lane's ldmatrix row: matrix j = lane / 8, row lane % 8.
    let (j, r) = (lane / 8, lane % 8);
    let steps = k.div_ceil(32);
    stage_bf16(
        &wa.load::<Bf16>(),
        &wb.load::<Bf16>(),
        (a0, b0),
        (a_lds, b_lds),
    );
    block_sync();
    for s in 0..steps {
        let (a_s, b_s) = if s % 2 == 0 { (a0, b0) } else { (a1, b1) };
        wa.move_by([0, 32]);
        wb.move_by([32, 0]);
        let (na, nb) = (wa.load::<Bf16>(), wb.load::<Bf16>());
        // A loop, not `unroll`: the body is too large for LLVM to inline a closure twice,
        // and an outlined closure would pass the accumulators through local memory.
        for kk in 0..2 {
            let k0 = kk * 16;
            let mut af = [[0u32; 4]; 4];
            unroll::<4>(|mt| {
                let row = m_base + mt as i32 * 16 + r + 8 * (j % 2);
                af[mt] = ldmatrix_x4(&a_s, a_lds.offset(row, k0 + 8 * (j / 2)) as u32);
            });
            let mut bfr = [[0u32; 2]; 4];
            unroll::<2>(|pair| {
                let col = n_base + (2 * pair as i32 + j / 2) * 8;
                let q = ldmatrix_x4_trans(&b_s, b_lds.offset(k0 + r + 8 * (j % 2), col) as u32);
                bfr[2 * pair] = [q[0], q[1]];
                bfr[2 * pair + 1] = [q[2], q[3]];
            });
            unroll::<16>(|tile| {
                let (mt, nt) = (tile / 4, tile % 4);
                let d = CMma::d_index([mt as i32, nt as i32, 0, 0]);
                let cfr = [acc.get(d), acc.get(d + 1), acc.get(d + 2), acc.get(d + 3)];
                let out = mma_m16n8k16_bf16(af[mt], bfr[nt], cfr);
                unroll::<4>(|i| acc.set(d + i, out[i]));
            });
        }
        if s + 1 < steps {
            let (a_n, b_n) = if s % 2 == 0 { (a1, b1) } else { (a0, b0) };
            stage_bf16(&na, &nb, (a_n, b_n), (a_lds, b_lds));
        }
        block_sync();
    }
    make_tile_window::<CMma, _>(View2::<_, f32, 4>::new(c, m, n, n), [bm, bn]).store(&acc);
}

/// Host side: launch and the fp64 reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

    /// The launch configuration of every GEMM kernel: one 256-thread block per 128 × 128 tile.
    pub fn config(m: u32, n: u32) -> LaunchConfig {
        LaunchConfig::new(m.div_ceil(BM as u32) * n.div_ceil(BN as u32), 256)
    }

    /// Launches `gemm_f32` on device buffers.
    pub fn launch_f32(
        device: &Device,
        a: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        c: &mut DeviceBuffer<f32>,
        (m, n, k): (u32, u32, u32),
    ) -> Result<LaunchStats, LaunchError> {
        GemmF32::launch(device, config(m, n), a, b, c, m, n, k)
    }

    /// Launches `gemm_bf16_plain` (plain shared layouts) on device buffers.
    pub fn launch_bf16_plain(
        device: &Device,
        a: &DeviceBuffer<Bf16>,
        b: &DeviceBuffer<Bf16>,
        c: &mut DeviceBuffer<f32>,
        (m, n, k): (u32, u32, u32),
    ) -> Result<LaunchStats, LaunchError> {
        GemmBf16Plain::launch(device, config(m, n), a, b, c, m, n, k)
    }

    /// `shape-mismatch` unless A and B have the elements of an M × K and a K × N matrix.
    pub(crate) fn check_shapes(
        a: &[f32],
        b: &[f32],
        (m, n, k): (u32, u32, u32),
    ) -> Result<(), LaunchError> {
        if a.len() != m as usize * k as usize || b.len() != k as usize * n as usize {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!(
                    "A has {} elements and B {}, but the shapes are {m}×{k} and {k}×{n}",
                    a.len(),
                    b.len()
                ),
            ));
        }
        Ok(())
    }

    /// `A · B` on `device` (f32 in and out).
    pub fn gemm(
        device: &Device,
        a: &[f32],
        b: &[f32],
        shape: (u32, u32, u32),
    ) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
        check_shapes(a, b, shape)?;
        let (ad, bd) = (
            DeviceBuffer::from_slice(device, a)?,
            DeviceBuffer::from_slice(device, b)?,
        );
        let mut cd =
            DeviceBuffer::from_slice(device, &vec![f32::NAN; (shape.0 * shape.1) as usize])?;
        let st = launch_f32(device, &ad, &bd, &mut cd, shape)?;
        Ok((cd.to_vec()?, st))
    }

    /// The fp64 reference.
    pub fn reference(a: &[f32], b: &[f32], (m, n, k): (u32, u32, u32)) -> Vec<f64> {
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for p in 0..k {
                let av = a[i * k + p] as f64;
                for j in 0..n {
                    c[i * n + j] += av * b[p * n + j] as f64;
                }
            }
        }
        c
    }
}
