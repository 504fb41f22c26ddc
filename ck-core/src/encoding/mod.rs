//! Tile-distribution encodings (CK's `tile_distribution_encoding`, spec §4–§5).
//!
//! An encoding says how a tile of `NX` dimensions is spread over the threads of a block and the
//! registers of each thread. Each tile dim `X_x` is a mixed-radix number whose digits are the
//! *H components* `H[x][0..]` (digit 0 most significant). Every digit is *claimed* by exactly one
//! of:
//! * a partition dim `P_p` (thread coordinates: `P = [warp, lane]` or `[lane]`), each of which is
//!   itself a mixed-radix number over the components it lists; `R` components (replication) can
//!   only be claimed by P's: threads that differ only in R digits hold the same data;
//! * a per-thread dim `Y_y`, which claims exactly one H component; the Y box is the thread's
//!   register buffer, laid out row-major in Y order (`D`).
//!
//! A component is addressed as `(major, minor)`: major 0 = `R[minor]`, major `x+1` = `H[x][minor]`.
//!
//! ## Worked example: RMSNorm on NVIDIA (spec TV1c)
//! ```text
//!   H = [[2, 2, 2, 1],  [2, 2, 16, 8]]      X = [8, 512]
//!         Rm Wm Tm Vm    Rn Wn Tn  Vn
//!   P0 (warp) = [Wm, Wn]  P1 (lane) = [Tm, Tn]   Y = [Rm, Vm, Rn, Vn]
//!   m = Rm·4 + Wm·2 + Tm·1 + Vm        (place values scan([2,2,2,1]) = [4,2,1,1])
//!   n = Rn·256 + Wn·128 + Tn·8 + Vn    (place values scan([2,2,16,8]) = [256,128,8,1])
//!   warp 3 = (Wm 1, Wn 1), lane 31 = (Tm 1, Tn 15), y = [1,0,1,7]  →  x = [7, 511]
//! ```
//! ```
//! use ck_core::encoding::{Encoding, Checks};
//! use ck_core::Dims;
//! let e = Encoding::new(
//!     &[],
//!     &[&[2, 2, 2, 1], &[2, 2, 16, 8]],
//!     &[&[1, 2], &[1, 2]],
//!     &[&[1, 1], &[2, 2]],
//!     &[1, 1, 2, 2],
//!     &[0, 3, 0, 3],
//! ).unwrap();
//! assert!(e.first_error(&Checks::warp(32).block(128)).is_none());
//! assert_eq!(e.x_lengths().as_slice(), &[8, 512]);
//! let x = e.x_index(&Dims::from_slice(&[3, 31]), &Dims::from_slice(&[1, 0, 1, 7]));
//! assert_eq!(x.as_slice(), &[7, 511]);
//! // On 64-lane waves P1's 2·16 = 32 lanes are a lane group (below): two per wave, same map.
//! assert!(e.first_error(&Checks::warp(64).block(128)).is_none());
//! // A lane dim that does not divide the warp is rejected.
//! let e = Encoding::new(&[], &[&[2, 24, 2]], &[&[1], &[1]], &[&[0], &[1]], &[1], &[2]).unwrap();
//! assert_eq!(e.first_error(&Checks::warp(32)).unwrap().rule.name(), "warp-size-mismatch");
//! ```
//!
//! ## Lane groups
//!
//! With two P dims the lane dim may span fewer lanes than the warp: a *lane group* of `G`
//! lanes, `G` a divisor of the warp size. The partition index is then `[tid / G, tid % G]`: the
//! warp dim counts lane groups across the block, and every group of `G` consecutive threads acts
//! as a warp of its own. Where `G` is the warp this is `[warp, lane]`, CK's partition index.
//!
//! CK's short-row RMSNorm configurations rely on it (`rmsnorm2d` traits with 8 × 8 and 4 × 16
//! threads, one 64-lane wave). The 8 × 8 one, with `Generic2dBlockShape`'s encoding:
//! ```text
//!   H = [[1, 8, 1, 1],  [1, 1, 8, 8]]      X = [8, 64], block 64
//!         Rm Wm Tm Vm    Rn Wn Tn Vn
//!   P0 (warp) = [Wm, Wn] spans 8    P1 (lane) = [Tm, Tn] spans 8    Y = [Rm, Vm, Rn, Vn]
//!   thread t: P = [t / 8, t % 8]  →  Wm = t / 8, Tn = t % 8  →  m = t / 8, n = 8·(t % 8) + Vn
//! ```
//! What CK's code does with it on a 64-lane wave: `get_partition_index` gives
//! `[warp, lane] = [t / 64, t % 64] = [0, t]`, and P1's merge over `(Tm 1, Tn 8)` splits `t`
//! into `Tn = t % 8` and the top digit `Tm = t / 8` — a merge never reduces its top digit, so
//! `Tm` runs over 0..8 though its length is 1. In X0, `Tm`'s place value (`Vm` = 1) is `Wm`'s
//! too, so `m = t / 8`: the map above. In general CK's overflow lands where the lane-group
//! index would whenever the warp dim's lowest component sits right above the lane dim's top
//! component in H, as `Generic2dBlockShape` lays them out; the replication digits differ only
//! in name (gamma's `R = [Wm 8, Tm 1]`: CK numbers the replicas by the overflowing `Tm`, ck-rs
//! by `Wm`; the same threads share each element). On 32-lane warps CK's code would give the
//! second warp `Wm = 1` and overlap rows; `[tid / G, tid % G]` does not read the hardware warp,
//! so the map is the same for `warp_size: 32` and `64`: four groups per NVIDIA warp, eight per
//! wave. Lane groups are aligned (G divides the warp), so reductions shuffle across a group's
//! lane bits (masks below G) without leaving it, and combine groups through shared memory as
//! they combine warps (`ck_core::tile::block_reduce_x`).
//! ```
//! use ck_core::encoding::{Encoding, Checks};
//! use ck_core::Dims;
//! let e = Encoding::new(
//!     &[],
//!     &[&[1, 8, 1, 1], &[1, 1, 8, 8]],
//!     &[&[1, 2], &[1, 2]],
//!     &[&[1, 1], &[2, 2]],
//!     &[1, 1, 2, 2],
//!     &[0, 3, 0, 3],
//! ).unwrap();
//! for warp in [32, 64] {
//!     assert!(e.first_error(&Checks::warp(warp).block(64)).is_none());
//!     let p = e.partition_index(19, warp); // thread 19: group 2, lane 3
//!     assert_eq!(p.as_slice(), &[2, 3]);
//!     assert_eq!(e.x_index(&p, &Dims::from_slice(&[0, 0, 0, 5])).as_slice(), &[2, 29]);
//! }
//! ```
//!
//! Everything here is `const fn` over fixed-capacity data; the `tile_distribution!` macro calls
//! it at expansion time and never re-derives the math.

use crate::adaptor::TensorAdaptor;
use crate::dims::{Dims, MAX_DIMS};
use crate::error::Error;
use crate::magic::magic;
use crate::transform::{tri, Transform};
use crate::Index;
pub use messages::ComponentNames;

/// Most X dims (CK's `kMaxNumDim`).
pub const MAX_X: usize = 10;
/// Most P dims an encoding can hold (the default partition index supports 1 or 2).
pub const MAX_P: usize = 4;
/// Most components per list (CK's `kMaxNumDim`).
pub const MAX_COMPONENTS: usize = 10;

/// A tile-distribution encoding, one-to-one with CK's `tile_distribution_encoding<Rs, Hss,
/// Ps2RHssMajor, Ps2RHssMinor, Ys2RHsMajor, Ys2RHsMinor>`, that breaks no structural rule
/// ([`EncodingRule::is_structural`]): every reference exists, every component of length > 1
/// is claimed exactly once, every length is positive and every product fits an [`Index`]. So
/// its derived tables — lengths, the adaptor, the closed forms — are total. Whether it is a
/// tile distribution for a target (an X and a Y, the warp and block sizes) is
/// [`Encoding::first_error`]'s question; the algebra's results (a reduction's rows, which may
/// have no Y) need not be one.
///
/// Made by [`Encoding::new`] or [`UncheckedEncoding::check`]; the [`UncheckedEncoding`] is what
/// a front end holds while it collects every violation of a definition.
///
/// (Inside this module an `Encoding` value may still be unchecked: [`UncheckedEncoding`] wraps
/// one, and the algebra checks what it builds before returning it.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoding {
    r: Dims,
    h: [Dims; MAX_X],
    nx: usize,
    p_major: [Dims; MAX_P],
    p_minor: [Dims; MAX_P],
    np_major: usize,
    np_minor: usize,
    y_major: Dims,
    y_minor: Dims,
}

/// An encoding as written, possibly breaking any rule: [`UncheckedEncoding::errors`] lists
/// every violation (a front end reports them all), [`UncheckedEncoding::check`] makes the
/// [`Encoding`] whose tables can be derived.
///
/// ```
/// use ck_core::encoding::{Checks, UncheckedEncoding};
/// // P0 claims H[0][1], which does not exist; Y claims nothing.
/// let u = UncheckedEncoding::new(&[], &[&[32]], &[&[1]], &[&[1]], &[], &[]).unwrap();
/// let rules: Vec<_> = u.errors(&Checks::warp(32)).iter().map(|v| v.rule.name()).collect();
/// assert_eq!(rules, ["no-y", "index-out-of-range", "unclaimed"]);
/// assert_eq!(u.check().unwrap_err().rule.name(), "index-out-of-range");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UncheckedEncoding(pub(crate) Encoding);

/// The rules an encoding is checked against (spec §4.3, §16). [`EncodingRule::name`] is the
/// stable name used in `error[name]` diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncodingRule {
    /// A length in R or H is ≤ 0.
    LengthNotPositive,
    /// No X dimension.
    EmptyX,
    /// An X dimension without H components.
    EmptyH,
    /// No Y dimension.
    NoY,
    /// Major and minor lists of different lengths.
    ListLengthMismatch,
    /// A (major, minor) reference outside the encoding.
    IndexOutOfRange,
    /// A Y claims an R component.
    YMapsToR,
    /// A P lists no component.
    EmptyP,
    /// NP is not 1 or 2.
    PCount,
    /// A component is claimed twice.
    ClaimedTwice,
    /// An H component of length > 1 is claimed by nobody.
    Unclaimed,
    /// The lane dim spans neither the warp nor a lane group dividing it (one P: exactly the
    /// warp), or the warp size is not 32/64.
    WarpSizeMismatch,
    /// The declared block size does not match the P lengths.
    BlockSizeMismatch,
    /// A declared tile shape does not match the H products.
    ShapeMismatch,
    /// More dims/components than supported.
    CapacityExceeded,
    /// The tile (every R and H length multiplied) has more than `2³¹ − 1` elements: its indices
    /// would overflow CK's 32-bit `index_t`.
    TileTooLarge,
    /// A slice would cut through a P-claimed digit.
    SliceThroughP,
    /// A slice length does not factor through the digits.
    SliceNotFactor,
    /// Warning: an R component of length > 1 is owned by no P.
    RUnowned,
    /// Warning: an H component of length 1 is claimed by nobody.
    UnclaimedUnit,
}

impl EncodingRule {
    /// The stable kebab-case name.
    pub const fn name(self) -> &'static str {
        self.id().name()
    }

    /// The rule's identifier in the one vocabulary ([`crate::rules`]): its name, and whether
    /// it only warns.
    pub const fn id(self) -> crate::rules::RuleId {
        match self {
            EncodingRule::LengthNotPositive => crate::rules::LENGTH_NOT_POSITIVE,
            EncodingRule::EmptyX => crate::rules::EMPTY_X,
            EncodingRule::EmptyH => crate::rules::EMPTY_H,
            EncodingRule::NoY => crate::rules::NO_Y,
            EncodingRule::ListLengthMismatch => crate::rules::LIST_LENGTH_MISMATCH,
            EncodingRule::IndexOutOfRange => crate::rules::INDEX_OUT_OF_RANGE,
            EncodingRule::YMapsToR => crate::rules::Y_MAPS_TO_R,
            EncodingRule::EmptyP => crate::rules::EMPTY_P,
            EncodingRule::PCount => crate::rules::P_COUNT,
            EncodingRule::ClaimedTwice => crate::rules::CLAIMED_TWICE,
            EncodingRule::Unclaimed => crate::rules::UNCLAIMED,
            EncodingRule::WarpSizeMismatch => crate::rules::WARP_SIZE_MISMATCH,
            EncodingRule::BlockSizeMismatch => crate::rules::BLOCK_SIZE_MISMATCH,
            EncodingRule::ShapeMismatch => crate::rules::SHAPE_MISMATCH,
            EncodingRule::CapacityExceeded => crate::rules::CAPACITY_EXCEEDED,
            EncodingRule::TileTooLarge => crate::rules::TILE_TOO_LARGE,
            EncodingRule::SliceThroughP => crate::rules::SLICE_THROUGH_P,
            EncodingRule::SliceNotFactor => crate::rules::SLICE_NOT_FACTOR,
            EncodingRule::RUnowned => crate::rules::R_UNOWNED,
            EncodingRule::UnclaimedUnit => crate::rules::UNCLAIMED_UNIT,
        }
    }

    /// True for the rules that only warn (the encoding is still usable): an R component no P
    /// owns, an unclaimed H component of length 1.
    pub const fn is_warning(self) -> bool {
        self.id().is_warning()
    }

    /// True for the rules every [`Encoding`] keeps, which its derived tables need: positive
    /// lengths with products in range, consistent lists, existing references, no Y on an R
    /// component, one or two non-empty P dims, every component of length > 1 claimed once,
    /// capacities. The others are rules for a tile distribution and its target (an X, a Y,
    /// the warp and block sizes, a declared shape) or for the algebra.
    pub const fn is_structural(self) -> bool {
        matches!(
            self,
            EncodingRule::LengthNotPositive
                | EncodingRule::EmptyH
                | EncodingRule::ListLengthMismatch
                | EncodingRule::IndexOutOfRange
                | EncodingRule::YMapsToR
                | EncodingRule::EmptyP
                | EncodingRule::PCount
                | EncodingRule::ClaimedTwice
                | EncodingRule::Unclaimed
                | EncodingRule::CapacityExceeded
                | EncodingRule::TileTooLarge
        )
    }

    /// True for rules that depend on length values (not only on the structure of the lists).
    pub const fn depends_on_lengths(self) -> bool {
        matches!(
            self,
            EncodingRule::LengthNotPositive
                | EncodingRule::TileTooLarge
                | EncodingRule::Unclaimed
                | EncodingRule::WarpSizeMismatch
                | EncodingRule::BlockSizeMismatch
                | EncodingRule::ShapeMismatch
                | EncodingRule::RUnowned
                | EncodingRule::UnclaimedUnit
        )
    }
}

/// Where in the encoding a violation is: the token a diagnostic points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// The whole encoding.
    Whole,
    /// `R[j]`.
    R(u8),
    /// `H[x][j]`.
    H(u8, u8),
    /// The list `H[x]`.
    HList(u8),
    /// The list of H lists.
    HAll,
    /// `p_major[p][k]`.
    PMajor(u8, u8),
    /// `p_minor[p][k]`.
    PMinor(u8, u8),
    /// The list `p_major[p]` (the whole P dim).
    PMajorList(u8),
    /// The list `p_minor[p]`.
    PMinorList(u8),
    /// The list of P dims.
    PMajorAll,
    /// The list of P minor lists.
    PMinorAll,
    /// `y_major[y]`.
    YMajor(u8),
    /// `y_minor[y]`.
    YMinor(u8),
    /// The Y major list.
    YMajorAll,
    /// The Y minor list.
    YMinorAll,
    /// The declared warp size.
    WarpSize,
    /// The declared block size.
    BlockSize,
    /// `shape[x]`.
    Shape(u8),
    /// The declared shape.
    ShapeAll,
}

/// One violated rule: where, and the values its message quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: EncodingRule,
    /// The offending token.
    pub loc: Loc,
    /// For `claimed-twice`: the first claim.
    pub other: Loc,
    /// Values quoted by the message (meaning depends on the rule).
    pub values: [Index; 4],
}

const fn viol(rule: EncodingRule, loc: Loc, a: Index, b: Index, c: Index, d: Index) -> Violation {
    Violation {
        rule,
        loc,
        other: Loc::Whole,
        values: [a, b, c, d],
    }
}

/// What an encoding is checked against besides its own consistency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checks {
    /// Threads per warp: 32 (NVIDIA) or 64 (AMD CDNA).
    pub warp_size: u32,
    /// Threads per block, 0 if not declared.
    pub block_size: u32,
    /// Declared tile shape, empty if not declared.
    pub shape: Dims,
}

impl Checks {
    /// Checks for a warp size, no block size or shape declared.
    pub const fn warp(warp_size: u32) -> Checks {
        Checks {
            warp_size,
            block_size: 0,
            shape: Dims::EMPTY,
        }
    }

    /// With a declared block size.
    pub const fn block(mut self, block_size: u32) -> Checks {
        self.block_size = block_size;
        self
    }

    /// With a declared tile shape.
    pub const fn shape(mut self, shape: Dims) -> Checks {
        self.shape = shape;
        self
    }
}

/// The source of one digit of an X coordinate in the closed form `X_x = Σ digit · place`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigitSource {
    /// Nobody claims the component (length 1): the digit is 0.
    Zero,
    /// `y[i]`.
    Y(u8),
    /// A digit of `p[p]`: `(p / divisor) % length`, or `p / divisor` for the most significant
    /// component (`top`), which a merge never reduces.
    P {
        /// Which P dim.
        p: u8,
        /// Place value of the component inside the P dim.
        divisor: Index,
        /// Length of the component.
        length: Index,
        /// True for the P dim's first (most significant) component.
        top: bool,
    },
}

/// One term `digit · place` of an X coordinate's closed form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XTerm {
    /// Where the digit comes from.
    pub source: DigitSource,
    /// Its place value inside X: `scan(H[x])_j`.
    pub place: Index,
}

const fn dims_or_capacity(s: &[Index], loc: Loc) -> Result<Dims, Violation> {
    if s.len() > MAX_COMPONENTS {
        return Err(viol(
            EncodingRule::CapacityExceeded,
            loc,
            s.len() as Index,
            MAX_COMPONENTS as Index,
            0,
            0,
        ));
    }
    Ok(Dims::from_slice(s))
}

macro_rules! tryv {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}

// After `tryv!`, which they use (macros are in scope from their definition on).
mod algebra;
mod checks;
pub use checks::Violations;
mod messages;
mod tables;

impl Encoding {
    /// An encoding from CK's six lists: the first structural violation if there is one
    /// ([`UncheckedEncoding::new`], then [`UncheckedEncoding::check`]).
    pub const fn new(
        r: &[Index],
        h: &[&[Index]],
        p_major: &[&[Index]],
        p_minor: &[&[Index]],
        y_major: &[Index],
        y_minor: &[Index],
    ) -> Result<Encoding, Violation> {
        match UncheckedEncoding::new(r, h, p_major, p_minor, y_major, y_minor) {
            Ok(u) => u.check(),
            Err(v) => Err(v),
        }
    }

    /// The smallest encoding: one X of length 1 whose one component P0 claims, no Y.
    /// `tile_distribution!` gives it to a definition with errors, so that the rest of the crate
    /// still type-checks (and const-evaluates) while the errors are reported.
    pub const UNIT: Encoding = match Encoding::new(&[], &[&[1]], &[&[1]], &[&[0]], &[], &[]) {
        Ok(e) => e,
        Err(_) => panic!("the unit encoding breaks no structural rule"),
    };

    /// The same lists, for the messages of [`Violation::message`].
    pub const fn unchecked(&self) -> UncheckedEncoding {
        UncheckedEncoding(*self)
    }
}

impl UncheckedEncoding {
    /// The six lists as written. Only capacities are checked here (at most [`MAX_X`] X dims,
    /// [`MAX_P`] P dims, [`MAX_COMPONENTS`] entries per list): they are what can be stored.
    pub const fn new(
        r: &[Index],
        h: &[&[Index]],
        p_major: &[&[Index]],
        p_minor: &[&[Index]],
        y_major: &[Index],
        y_minor: &[Index],
    ) -> Result<UncheckedEncoding, Violation> {
        if h.len() > MAX_X {
            return Err(viol(
                EncodingRule::CapacityExceeded,
                Loc::HAll,
                h.len() as Index,
                MAX_X as Index,
                0,
                0,
            ));
        }
        if p_major.len() > MAX_P {
            return Err(viol(
                EncodingRule::PCount,
                Loc::PMajorAll,
                p_major.len() as Index,
                0,
                0,
                0,
            ));
        }
        if p_minor.len() > MAX_P {
            return Err(viol(
                EncodingRule::PCount,
                Loc::PMinorAll,
                p_minor.len() as Index,
                0,
                0,
                0,
            ));
        }
        let mut e = Encoding {
            r: tryv!(dims_or_capacity(r, Loc::Whole)),
            h: [Dims::EMPTY; MAX_X],
            nx: h.len(),
            p_major: [Dims::EMPTY; MAX_P],
            p_minor: [Dims::EMPTY; MAX_P],
            np_major: p_major.len(),
            np_minor: p_minor.len(),
            y_major: tryv!(dims_or_capacity(y_major, Loc::YMajorAll)),
            y_minor: tryv!(dims_or_capacity(y_minor, Loc::YMinorAll)),
        };
        let mut i = 0;
        while i < h.len() {
            e.h[i] = tryv!(dims_or_capacity(h[i], Loc::HList(i as u8)));
            i += 1;
        }
        i = 0;
        while i < p_major.len() {
            e.p_major[i] = tryv!(dims_or_capacity(p_major[i], Loc::PMajorList(i as u8)));
            i += 1;
        }
        i = 0;
        while i < p_minor.len() {
            e.p_minor[i] = tryv!(dims_or_capacity(p_minor[i], Loc::PMinorList(i as u8)));
            i += 1;
        }
        Ok(UncheckedEncoding(e))
    }
}

impl Encoding {
    /// `R` lengths.
    pub const fn r_lengths(&self) -> Dims {
        self.r
    }

    /// `H[x]` lengths (empty past the last X).
    pub const fn h_lengths(&self, x: usize) -> Dims {
        if x < self.nx {
            self.h[x]
        } else {
            Dims::EMPTY
        }
    }

    /// Number of X dims.
    pub const fn nx(&self) -> usize {
        self.nx
    }

    /// Number of P dims.
    pub const fn np(&self) -> usize {
        self.np_major
    }

    /// Number of Y dims.
    pub const fn ny(&self) -> usize {
        self.y_major.len()
    }

    /// Number of R components.
    pub const fn nr(&self) -> usize {
        self.r.len()
    }

    /// `p_major[p]` (empty past the last P).
    pub const fn p_major(&self, p: usize) -> Dims {
        if p < self.np_major {
            self.p_major[p]
        } else {
            Dims::EMPTY
        }
    }

    /// `p_minor[p]` (empty past the last P).
    pub const fn p_minor(&self, p: usize) -> Dims {
        if p < self.np_minor {
            self.p_minor[p]
        } else {
            Dims::EMPTY
        }
    }

    /// `y_major`.
    pub const fn y_major(&self) -> Dims {
        self.y_major
    }

    /// `y_minor`.
    pub const fn y_minor(&self) -> Dims {
        self.y_minor
    }

    /// Number of components under `major` (NR for 0, |H[major−1]| otherwise), or −1 if the
    /// major is out of range.
    pub const fn components(&self, major: Index) -> Index {
        if major == 0 {
            self.r.len() as Index
        } else if major >= 1 && (major as usize) <= self.nx {
            self.h[major as usize - 1].len() as Index
        } else {
            -1
        }
    }

    /// Length of component `(major, minor)`, or `None` if it does not exist.
    pub const fn component_length(&self, major: Index, minor: Index) -> Option<Index> {
        let n = self.components(major);
        if n < 0 || minor < 0 || minor >= n {
            return None;
        }
        if major == 0 {
            Some(self.r.get(minor as usize))
        } else {
            Some(self.h[major as usize - 1].get(minor as usize))
        }
    }
}

/// `v`, or `Index::MAX + 1` once past `Index::MAX` (so products of lengths ≤ `Index::MAX` never
/// overflow i64).
const fn saturate(v: i64) -> i64 {
    if v > Index::MAX as i64 {
        Index::MAX as i64 + 1
    } else {
        v
    }
}

const fn dims_eq(a: &Dims, b: &Dims) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a.get(i) != b.get(i) {
            return false;
        }
        i += 1;
    }
    true
}

const fn loc_eq(a: Loc, b: Loc) -> bool {
    match (a, b) {
        (Loc::PMinor(p, k), Loc::PMinor(q, l)) => p == q && k == l,
        (Loc::YMinor(y), Loc::YMinor(z)) => y == z,
        _ => false,
    }
}

const fn concat(a: &Dims, b: &Dims, loc: Loc) -> Result<Dims, Violation> {
    if a.len() + b.len() > MAX_COMPONENTS {
        return Err(viol(
            EncodingRule::CapacityExceeded,
            loc,
            (a.len() + b.len()) as Index,
            MAX_COMPONENTS as Index,
            0,
            0,
        ));
    }
    let mut out = *a;
    let mut i = 0;
    while i < b.len() {
        out = out.push(b.get(i));
        i += 1;
    }
    Ok(out)
}
