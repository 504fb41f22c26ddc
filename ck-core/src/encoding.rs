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
//! // The same encoding on 64-lane waves is rejected: P1 spans 2·16 = 32 lanes.
//! let v = e.first_error(&Checks::warp(64)).unwrap();
//! assert_eq!(v.rule.name(), "warp-size-mismatch");
//! ```
//!
//! Everything here is `const fn` over fixed-capacity data; the `tile_distribution!` macro calls
//! it at expansion time and never re-derives the math.

use crate::adaptor::TensorAdaptor;
use crate::dims::{Dims, MAX_DIMS};
pub use crate::encoding_msg::ComponentNames;
use crate::error::Error;
use crate::magic::magic;
use crate::transform::{tri, Transform};
use crate::Index;

/// Most X dims (CK's `kMaxNumDim`).
pub const MAX_X: usize = 10;
/// Most P dims an encoding can hold (the default partition index supports 1 or 2).
pub const MAX_P: usize = 4;
/// Most components per list (CK's `kMaxNumDim`).
pub const MAX_COMPONENTS: usize = 10;

/// A tile-distribution encoding, one-to-one with CK's `tile_distribution_encoding<Rs, Hss,
/// Ps2RHssMajor, Ps2RHssMinor, Ys2RHsMajor, Ys2RHsMinor>`. It may be invalid: check it with
/// [`Encoding::first_error`] / [`Encoding::error`] before using the derived tables.
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
    /// The lane dim does not span exactly `warp_size` lanes (or the warp size is not 32/64).
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
        match self {
            EncodingRule::LengthNotPositive => "length-not-positive",
            EncodingRule::EmptyX => "empty-x",
            EncodingRule::EmptyH => "empty-h",
            EncodingRule::NoY => "no-y",
            EncodingRule::ListLengthMismatch => "list-length-mismatch",
            EncodingRule::IndexOutOfRange => "index-out-of-range",
            EncodingRule::YMapsToR => "y-maps-to-r",
            EncodingRule::EmptyP => "empty-p",
            EncodingRule::PCount => "p-count",
            EncodingRule::ClaimedTwice => "claimed-twice",
            EncodingRule::Unclaimed => "unclaimed",
            EncodingRule::WarpSizeMismatch => "warp-size-mismatch",
            EncodingRule::BlockSizeMismatch => "block-size-mismatch",
            EncodingRule::ShapeMismatch => "shape-mismatch",
            EncodingRule::CapacityExceeded => "capacity-exceeded",
            EncodingRule::TileTooLarge => "tile-too-large",
            EncodingRule::SliceThroughP => "slice-through-p",
            EncodingRule::SliceNotFactor => "slice-not-factor",
            EncodingRule::RUnowned => "r-unowned",
            EncodingRule::UnclaimedUnit => "unclaimed-unit",
        }
    }

    /// True for the rules that only warn (the encoding is still usable): an R component no P
    /// owns, an unclaimed H component of length 1.
    pub const fn is_warning(self) -> bool {
        matches!(self, EncodingRule::RUnowned | EncodingRule::UnclaimedUnit)
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

impl Encoding {
    /// An encoding from CK's six lists. Only capacities are checked here (at most
    /// [`MAX_X`] X dims, [`MAX_P`] P dims, [`MAX_COMPONENTS`] entries per list); every other rule
    /// is checked by [`Encoding::error`].
    pub const fn new(
        r: &[Index],
        h: &[&[Index]],
        p_major: &[&[Index]],
        p_minor: &[&[Index]],
        y_major: &[Index],
        y_minor: &[Index],
    ) -> Result<Encoding, Violation> {
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
        Ok(e)
    }

    /// `R` lengths.
    pub const fn r_lengths(&self) -> Dims {
        self.r
    }

    /// `H[x]` lengths.
    pub const fn h_lengths(&self, x: usize) -> Dims {
        assert!(x < self.nx);
        self.h[x]
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

    /// `p_major[p]`.
    pub const fn p_major(&self, p: usize) -> Dims {
        self.p_major[p]
    }

    /// `p_minor[p]`.
    pub const fn p_minor(&self, p: usize) -> Dims {
        self.p_minor[p]
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

    // ----------------------------------------------------------------------------------------
    // Checking

    /// The `n`-th error (0-based) found against `checks`, in a fixed order; `None` past the last.
    /// Host code collects them all; const evaluation takes the first.
    pub const fn error(&self, checks: &Checks, n: usize) -> Option<Violation> {
        self.scan(checks, n, false)
    }

    /// The first error, if any.
    pub const fn first_error(&self, checks: &Checks) -> Option<Violation> {
        self.error(checks, 0)
    }

    /// The `n`-th warning (spec §16's warn list for encodings: `r-unowned`, `unclaimed-unit`).
    pub const fn warning(&self, n: usize) -> Option<Violation> {
        self.scan(&Checks::warp(32), n, true)
    }

    /// Panics (a compile error in const evaluation) with the first error's rule and message.
    pub const fn assert_valid(&self, checks: &Checks) {
        if let Some(v) = self.first_error(checks) {
            let m = crate::msg::MsgBuf::<512>::new()
                .push_str("error[")
                .push_str(v.rule.name())
                .push_str("]: ")
                .push_str(v.message(self).as_str());
            panic!("{}", m.as_str());
        }
    }

    /// Claim of component `(major, minor)`: `Some(loc)` of the first claimant.
    const fn claim_of(&self, major: Index, minor: Index) -> Option<Loc> {
        let mut p = 0;
        while p < self.np_major && p < self.np_minor {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() && k < mi.len() {
                if ma.get(k) == major && mi.get(k) == minor {
                    return Some(Loc::PMinor(p as u8, k as u8));
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.y_major.len() && y < self.y_minor.len() {
            if self.y_major.get(y) == major && self.y_minor.get(y) == minor {
                return Some(Loc::YMinor(y as u8));
            }
            y += 1;
        }
        None
    }

    /// True if every P and Y reference exists and the lists line up.
    const fn references_ok(&self) -> bool {
        if self.np_major != self.np_minor || self.y_major.len() != self.y_minor.len() {
            return false;
        }
        let mut p = 0;
        while p < self.np_major {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            if ma.len() != mi.len() || ma.is_empty() {
                return false;
            }
            let mut k = 0;
            while k < ma.len() {
                if self.component_length(ma.get(k), mi.get(k)).is_none() {
                    return false;
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.y_major.len() {
            if self.y_major.get(y) == 0
                || self
                    .component_length(self.y_major.get(y), self.y_minor.get(y))
                    .is_none()
            {
                return false;
            }
            y += 1;
        }
        true
    }

    /// Product of the lengths of P dim `p`'s components (assumes valid references).
    pub const fn p_length(&self, p: usize) -> Index {
        let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
        let mut prod = 1;
        let mut k = 0;
        while k < ma.len() {
            if let Some(l) = self.component_length(ma.get(k), mi.get(k)) {
                prod *= l;
            }
            k += 1;
        }
        prod
    }

    /// Positive lengths whose products all fit in an `Index`: what the length-dependent checks
    /// and the derived tables need.
    const fn sized(&self) -> bool {
        self.lengths_ok() && self.total_elements() <= Index::MAX as i64
    }

    /// Π of every R and H length, in 64 bits, saturating once past `Index::MAX`.
    const fn total_elements(&self) -> i64 {
        let mut total: i64 = 1;
        let mut j = 0;
        while j < self.r.len() {
            total = saturate(total * self.r.get(j) as i64);
            j += 1;
        }
        let mut x = 0;
        while x < self.nx {
            j = 0;
            while j < self.h[x].len() {
                total = saturate(total * self.h[x].get(j) as i64);
                j += 1;
            }
            x += 1;
        }
        total
    }

    const fn lengths_ok(&self) -> bool {
        let mut j = 0;
        while j < self.r.len() {
            if self.r.get(j) < 1 {
                return false;
            }
            j += 1;
        }
        let mut x = 0;
        while x < self.nx {
            let mut j = 0;
            while j < self.h[x].len() {
                if self.h[x].get(j) < 1 {
                    return false;
                }
                j += 1;
            }
            x += 1;
        }
        true
    }

    #[allow(unused_assignments)] // the last `report!` bumps a counter nobody reads
    const fn scan(&self, checks: &Checks, n: usize, warnings: bool) -> Option<Violation> {
        let mut count = 0usize;
        macro_rules! report {
            ($v:expr) => {{
                if count == n {
                    return Some($v);
                }
                count += 1;
            }};
        }
        use EncodingRule as R;
        if warnings {
            let mut j = 0;
            while j < self.r.len() {
                let l = self.r.get(j);
                if l > 1 && self.claim_of(0, j as Index).is_none() {
                    report!(viol(R::RUnowned, Loc::R(j as u8), l, 0, 0, 0));
                }
                j += 1;
            }
            let mut x = 0;
            while x < self.nx {
                let mut j = 0;
                while j < self.h[x].len() {
                    if self.h[x].get(j) == 1 && self.claim_of(x as Index + 1, j as Index).is_none()
                    {
                        report!(viol(R::UnclaimedUnit, Loc::H(x as u8, j as u8), 1, 0, 0, 0));
                    }
                    j += 1;
                }
                x += 1;
            }
            return None;
        }
        // Shape of the lists.
        if self.nx == 0 {
            report!(viol(R::EmptyX, Loc::HAll, 0, 0, 0, 0));
        }
        let mut x = 0;
        while x < self.nx {
            if self.h[x].is_empty() {
                report!(viol(R::EmptyH, Loc::HList(x as u8), x as Index, 0, 0, 0));
            }
            x += 1;
        }
        let mut j = 0;
        while j < self.r.len() {
            if self.r.get(j) < 1 {
                report!(viol(
                    R::LengthNotPositive,
                    Loc::R(j as u8),
                    self.r.get(j),
                    0,
                    0,
                    0
                ));
            }
            j += 1;
        }
        x = 0;
        while x < self.nx {
            j = 0;
            while j < self.h[x].len() {
                if self.h[x].get(j) < 1 {
                    report!(viol(
                        R::LengthNotPositive,
                        Loc::H(x as u8, j as u8),
                        self.h[x].get(j),
                        0,
                        0,
                        0
                    ));
                }
                j += 1;
            }
            x += 1;
        }
        // Every product the derived tables take (X lengths, P lengths, the block and register
        // counts) divides this one: in range, none of them overflows.
        if self.lengths_ok() && !self.sized() {
            report!(viol(R::TileTooLarge, Loc::Whole, 0, 0, 0, 0));
        }
        if self.np_major != self.np_minor {
            report!(viol(
                R::ListLengthMismatch,
                Loc::PMinorAll,
                self.np_minor as Index,
                self.np_major as Index,
                0,
                0
            ));
        }
        let mut p = 0;
        while p < self.np_major && p < self.np_minor {
            let (a, b) = (self.p_major[p].len(), self.p_minor[p].len());
            if a != b {
                report!(viol(
                    R::ListLengthMismatch,
                    Loc::PMinorList(p as u8),
                    b as Index,
                    a as Index,
                    p as Index,
                    0
                ));
            }
            p += 1;
        }
        if self.y_major.len() != self.y_minor.len() {
            report!(viol(
                R::ListLengthMismatch,
                Loc::YMinorAll,
                self.y_minor.len() as Index,
                self.y_major.len() as Index,
                0,
                0
            ));
        }
        if self.np_major != 1 && self.np_major != 2 {
            report!(viol(
                R::PCount,
                Loc::PMajorAll,
                self.np_major as Index,
                0,
                0,
                0
            ));
        }
        p = 0;
        while p < self.np_major {
            if self.p_major[p].is_empty() {
                report!(viol(
                    R::EmptyP,
                    Loc::PMajorList(p as u8),
                    p as Index,
                    0,
                    0,
                    0
                ));
            }
            p += 1;
        }
        if self.y_major.is_empty() {
            report!(viol(R::NoY, Loc::YMajorAll, 0, 0, 0, 0));
        }
        // References.
        p = 0;
        while p < self.np_major && p < self.np_minor {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() && k < mi.len() {
                let (major, minor) = (ma.get(k), mi.get(k));
                let nmin = self.components(major);
                if nmin < 0 {
                    report!(viol(
                        R::IndexOutOfRange,
                        Loc::PMajor(p as u8, k as u8),
                        major,
                        self.nx as Index,
                        -1,
                        0
                    ));
                } else if minor < 0 || minor >= nmin {
                    report!(viol(
                        R::IndexOutOfRange,
                        Loc::PMinor(p as u8, k as u8),
                        minor,
                        nmin,
                        major,
                        0
                    ));
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.y_major.len() && y < self.y_minor.len() {
            let (major, minor) = (self.y_major.get(y), self.y_minor.get(y));
            let nmin = self.components(major);
            if nmin < 0 {
                report!(viol(
                    R::IndexOutOfRange,
                    Loc::YMajor(y as u8),
                    major,
                    self.nx as Index,
                    -1,
                    0
                ));
            } else if major == 0 {
                report!(viol(R::YMapsToR, Loc::YMajor(y as u8), minor, 0, 0, 0));
            } else if minor < 0 || minor >= nmin {
                report!(viol(
                    R::IndexOutOfRange,
                    Loc::YMinor(y as u8),
                    minor,
                    nmin,
                    major,
                    0
                ));
            }
            y += 1;
        }
        // Claims: in order P0, P1, .., Y; every later claim of a claimed component is reported.
        p = 0;
        while p < self.np_major && p < self.np_minor {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() && k < mi.len() {
                if self.component_length(ma.get(k), mi.get(k)).is_some() {
                    let here = Loc::PMinor(p as u8, k as u8);
                    if let Some(first) = self.claim_of(ma.get(k), mi.get(k)) {
                        if !loc_eq(first, here) {
                            report!(Violation {
                                rule: R::ClaimedTwice,
                                loc: here,
                                other: first,
                                values: [ma.get(k), mi.get(k), 0, 0],
                            });
                        }
                    }
                }
                k += 1;
            }
            p += 1;
        }
        y = 0;
        while y < self.y_major.len() && y < self.y_minor.len() {
            let (major, minor) = (self.y_major.get(y), self.y_minor.get(y));
            if major != 0 && self.component_length(major, minor).is_some() {
                let here = Loc::YMinor(y as u8);
                if let Some(first) = self.claim_of(major, minor) {
                    if !loc_eq(first, here) {
                        report!(Violation {
                            rule: R::ClaimedTwice,
                            loc: here,
                            other: first,
                            values: [major, minor, 0, 0],
                        });
                    }
                }
            }
            y += 1;
        }
        x = 0;
        while x < self.nx && self.sized() {
            j = 0;
            let xlen = self.h[x].product();
            while j < self.h[x].len() {
                let l = self.h[x].get(j);
                if l > 1 && self.claim_of(x as Index + 1, j as Index).is_none() {
                    report!(viol(
                        R::Unclaimed,
                        Loc::H(x as u8, j as u8),
                        l,
                        xlen,
                        xlen - xlen / l,
                        0
                    ));
                }
                j += 1;
            }
            x += 1;
        }
        // Threads.
        let w = checks.warp_size as Index;
        if w != 32 && w != 64 {
            report!(viol(R::WarpSizeMismatch, Loc::WarpSize, w, 0, 0, 1));
        } else if self.references_ok() && self.sized() && (self.np_major == 1 || self.np_major == 2)
        {
            let lane_p = self.np_major - 1;
            let lanes = self.p_length(lane_p);
            if lanes != w {
                report!(viol(
                    R::WarpSizeMismatch,
                    Loc::PMajorList(lane_p as u8),
                    lanes,
                    w,
                    lane_p as Index,
                    0
                ));
            }
            let b = checks.block_size as Index;
            if b != 0 {
                if self.np_major == 2 {
                    let warps = self.p_length(0);
                    if b % w != 0 || warps * w != b {
                        report!(viol(R::BlockSizeMismatch, Loc::BlockSize, b, warps, w, 2));
                    }
                } else if b != lanes {
                    report!(viol(R::BlockSizeMismatch, Loc::BlockSize, b, lanes, w, 1));
                }
            }
        }
        if !checks.shape.is_empty() {
            if checks.shape.len() != self.nx {
                report!(viol(
                    R::ShapeMismatch,
                    Loc::ShapeAll,
                    checks.shape.len() as Index,
                    self.nx as Index,
                    0,
                    1
                ));
            } else if self.sized() {
                x = 0;
                while x < self.nx {
                    if checks.shape.get(x) != self.h[x].product() {
                        report!(viol(
                            R::ShapeMismatch,
                            Loc::Shape(x as u8),
                            checks.shape.get(x),
                            self.h[x].product(),
                            x as Index,
                            0
                        ));
                    }
                    x += 1;
                }
            }
        }
        None
    }

    // ----------------------------------------------------------------------------------------
    // Derived tables (spec §4.2, §5). All assume a valid encoding.

    /// `[Π H[x]]`: the tile's lengths.
    pub const fn x_lengths(&self) -> Dims {
        let mut d = Dims::splat(self.nx, 0);
        let mut x = 0;
        while x < self.nx {
            d.set(x, self.h[x].product());
            x += 1;
        }
        d
    }

    /// Length of each Y dim.
    pub const fn y_lengths(&self) -> Dims {
        let mut d = Dims::splat(self.ny(), 0);
        let mut y = 0;
        while y < self.ny() {
            match self.component_length(self.y_major.get(y), self.y_minor.get(y)) {
                Some(l) => d.set(y, l),
                None => panic!("invalid encoding"),
            }
            y += 1;
        }
        d
    }

    /// Registers per thread: `Π Y lengths`.
    pub const fn thread_buffer_size(&self) -> Index {
        self.y_lengths().product()
    }

    /// Threads per block: `Π P0 · Π P1` (NP = 2) or `Π P0` (NP = 1).
    pub const fn block_size(&self) -> Index {
        let mut b = 1;
        let mut p = 0;
        while p < self.np_major {
            b *= self.p_length(p);
            p += 1;
        }
        b
    }

    /// The partition index of a thread: `[warp, lane]` (NP = 2) or `[lane]` (NP = 1).
    pub const fn partition_index(&self, thread_id: u32, warp_size: u32) -> Dims {
        if self.np_major == 2 {
            Dims::EMPTY
                .push((thread_id / warp_size) as Index)
                .push((thread_id % warp_size) as Index)
        } else {
            Dims::EMPTY.push((thread_id % warp_size) as Index)
        }
    }

    /// `D(y) = Σ y_i · scan(Y lengths)_i`: the register slot of a Y index.
    pub const fn d_index(&self, y: &Dims) -> Index {
        y.dot(&self.y_lengths().reverse_exclusive_scan())
    }

    /// The ps_ys_to_xs adaptor of spec §5.1, with its exact hidden-id numbering: X dims
    /// `0..NX` (bottom), then R components, then the H components of each X, then one id per P;
    /// top = `[P_0 .. P_{NP−1}] ++ [component of Y_0, ..]`.
    pub const fn adaptor(&self) -> Result<TensorAdaptor, Error> {
        let nx = self.nx;
        let nr = self.r.len();
        let np = self.np_major;
        let ntr = 1 + nx + np;
        let mut transforms = [Transform::Freeze { value: 0 }; 1 + MAX_X + MAX_P];
        let mut lower = [Dims::EMPTY; 1 + MAX_X + MAX_P];
        let mut upper = [Dims::EMPTY; 1 + MAX_X + MAX_P];
        // Hidden id of each component: rh_id[major][minor].
        let mut rh_id = [[0 as Index; MAX_COMPONENTS]; MAX_X + 1];
        let mut next = nx as Index;
        transforms[0] = tri!(Transform::replicate(self.r.as_slice()));
        let mut j = 0;
        while j < nr {
            rh_id[0][j] = next;
            upper[0] = upper[0].push(next);
            next += 1;
            j += 1;
        }
        let mut x = 0;
        while x < nx {
            transforms[1 + x] = tri!(Transform::unmerge(self.h[x].as_slice()));
            lower[1 + x] = Dims::splat(1, x as Index);
            j = 0;
            while j < self.h[x].len() {
                rh_id[x + 1][j] = next;
                upper[1 + x] = upper[1 + x].push(next);
                next += 1;
                j += 1;
            }
            x += 1;
        }
        let mut top = Dims::EMPTY;
        let mut p = 0;
        while p < np {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut lens = Dims::EMPTY;
            let mut k = 0;
            while k < ma.len() {
                let (major, minor) = (ma.get(k), mi.get(k));
                lens = lens.push(match self.component_length(major, minor) {
                    Some(l) => l,
                    None => panic!("invalid encoding"),
                });
                lower[1 + nx + p] = lower[1 + nx + p].push(rh_id[major as usize][minor as usize]);
                k += 1;
            }
            transforms[1 + nx + p] = tri!(Transform::merge(lens.as_slice()));
            upper[1 + nx + p] = Dims::splat(1, next);
            top = top.push(next);
            next += 1;
            p += 1;
        }
        let mut y = 0;
        while y < self.ny() {
            top = top.push(rh_id[self.y_major.get(y) as usize][self.y_minor.get(y) as usize]);
            y += 1;
        }
        let mut lo: [&[Index]; 1 + MAX_X + MAX_P] = [&[]; 1 + MAX_X + MAX_P];
        let mut up: [&[Index]; 1 + MAX_X + MAX_P] = [&[]; 1 + MAX_X + MAX_P];
        let mut k = 0;
        while k < ntr {
            lo[k] = lower[k].as_slice();
            up[k] = upper[k].as_slice();
            k += 1;
        }
        let bottom = Dims::splat(0, 0);
        let mut b = bottom;
        x = 0;
        while x < nx {
            b = b.push(x as Index);
            x += 1;
        }
        TensorAdaptor::new(
            transforms.split_at(ntr).0,
            lo.split_at(ntr).0,
            up.split_at(ntr).0,
            b.as_slice(),
            top.as_slice(),
        )
    }

    /// The model: `X(P, Y)` by evaluating the ps_ys_to_xs adaptor (the reference the macro's
    /// straight-line code is tested against).
    pub const fn x_index(&self, p: &Dims, y: &Dims) -> Dims {
        let a = match self.adaptor() {
            Ok(a) => a,
            Err(_) => panic!("invalid encoding"),
        };
        let mut top = *p;
        let mut i = 0;
        while i < y.len() {
            top = top.push(y.get(i));
            i += 1;
        }
        a.calculate_bottom_index(&top)
    }

    /// The R index of a thread: the digits its P values give the R components (0 for R
    /// components no P owns), read off the adaptor's hidden values (spec §5.4).
    pub const fn rs_index(&self, p: &Dims) -> Dims {
        let a = match self.adaptor() {
            Ok(a) => a,
            Err(_) => panic!("invalid encoding"),
        };
        let mut top = *p;
        let mut i = 0;
        while i < self.ny() {
            top = top.push(0);
            i += 1;
        }
        let hid = a.calculate_hidden_index(&top);
        let mut rs = Dims::splat(self.r.len(), 0);
        i = 0;
        while i < self.r.len() {
            rs.set(i, hid[self.nx + i]);
            i += 1;
        }
        rs
    }

    /// Place value of component `k` inside P dim `p`: `Π lengths of the components after it`.
    pub const fn p_place(&self, p: usize, k: usize) -> Index {
        let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
        let mut prod = 1;
        let mut i = k + 1;
        while i < ma.len() {
            if let Some(l) = self.component_length(ma.get(i), mi.get(i)) {
                prod *= l;
            }
            i += 1;
        }
        prod
    }

    /// `ps_over_rs_derivative[p][j]`: the place value of `R[j]` inside `P_p`, 0 if not owned.
    pub const fn ps_over_rs_derivative(&self, p: usize, j: usize) -> Index {
        let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
        let mut k = 0;
        while k < ma.len() {
            if ma.get(k) == 0 && mi.get(k) == j as Index {
                return self.p_place(p, k);
            }
            k += 1;
        }
        0
    }

    /// Where the digit of component `(major, minor)` comes from.
    pub const fn digit_source(&self, major: Index, minor: Index) -> DigitSource {
        let mut p = 0;
        while p < self.np_major {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() {
                if ma.get(k) == major && mi.get(k) == minor {
                    let length = match self.component_length(major, minor) {
                        Some(l) => l,
                        None => panic!("invalid encoding"),
                    };
                    return DigitSource::P {
                        p: p as u8,
                        divisor: self.p_place(p, k),
                        length,
                        top: k == 0,
                    };
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.ny() {
            if self.y_major.get(y) == major && self.y_minor.get(y) == minor {
                return DigitSource::Y(y as u8);
            }
            y += 1;
        }
        DigitSource::Zero
    }

    /// The closed form of `X_x`: one term per H component, `X_x = Σ digit · place`.
    pub const fn x_terms(&self, x: usize) -> [XTerm; MAX_COMPONENTS] {
        let mut out = [XTerm {
            source: DigitSource::Zero,
            place: 0,
        }; MAX_COMPONENTS];
        let places = self.h[x].reverse_exclusive_scan();
        let mut j = 0;
        while j < self.h[x].len() {
            out[j] = XTerm {
                source: self.digit_source(x as Index + 1, j as Index),
                place: places.get(j),
            };
            j += 1;
        }
        out
    }

    /// `X(P, Y)` through the closed form (digit division as a merge does it: by magic numbers).
    pub const fn x_index_closed_form(&self, p: &Dims, y: &Dims) -> Dims {
        let mut out = Dims::splat(self.nx, 0);
        let mut x = 0;
        while x < self.nx {
            let terms = self.x_terms(x);
            let mut sum = 0;
            let mut j = 0;
            while j < self.h[x].len() {
                let t = terms[j];
                let digit = match t.source {
                    DigitSource::Zero => 0,
                    DigitSource::Y(i) => y.get(i as usize),
                    DigitSource::P {
                        p: pi,
                        divisor,
                        length,
                        top,
                    } => {
                        let q = crate::magic::magic_div(
                            p.get(pi as usize) as u32,
                            magic(divisor as u32),
                        ) as Index;
                        if top {
                            q
                        } else {
                            q - crate::magic::magic_div(q as u32, magic(length as u32)) as Index
                                * length
                        }
                    }
                };
                sum += digit * t.place;
                j += 1;
            }
            out.set(x, sum);
            x += 1;
        }
        out
    }

    /// `span(x)`: lengths of X_x's Y-claimed H components in increasing minor order.
    pub const fn span(&self, x: usize) -> Dims {
        let mut d = Dims::EMPTY;
        let mut j = 0;
        while j < self.h[x].len() {
            if let DigitSource::Y(_) = self.digit_source(x as Index + 1, j as Index) {
                d = d.push(self.h[x].get(j));
            }
            j += 1;
        }
        d
    }

    /// `(span_major, span_minor)` of Y dim `y`: its X, and its rank among that X's Y-claimed
    /// components (in minor order).
    pub const fn y_to_span(&self, y: usize) -> (usize, usize) {
        let major = self.y_major.get(y);
        let minor = self.y_minor.get(y);
        let mut rank = 0;
        let mut j = 0;
        while j < minor {
            if let DigitSource::Y(_) = self.digit_source(major, j) {
                rank += 1;
            }
            j += 1;
        }
        (major as usize - 1, rank)
    }

    /// The Y index of a distributed (span) index: `y_i = span_idx[span_major_i][span_minor_i]`.
    /// `span_idx` is the concatenation of every X's span coordinates, X0 first.
    pub const fn y_from_span_index(&self, span_idx: &Dims) -> Dims {
        let mut offsets = [0usize; MAX_X];
        let mut x = 1;
        while x < self.nx {
            offsets[x] = offsets[x - 1] + self.span(x - 1).len();
            x += 1;
        }
        let mut y = Dims::splat(self.ny(), 0);
        let mut i = 0;
        while i < self.ny() {
            let (sx, sm) = self.y_to_span(i);
            y.set(i, span_idx.get(offsets[sx] + sm));
            i += 1;
        }
        y
    }

    /// All span lengths concatenated (X0's first): the box a sweep visits row-major.
    pub const fn span_box(&self) -> Dims {
        let mut d = Dims::EMPTY;
        let mut x = 0;
        while x < self.nx {
            let s = self.span(x);
            let mut j = 0;
            while j < s.len() {
                d = d.push(s.get(j));
                j += 1;
            }
            x += 1;
        }
        d
    }

    // ----------------------------------------------------------------------------------------
    // Encoding algebra (spec §4.4)

    /// `make_embed_tile_distribution_encoding(outer, inner)`: inner digits become less
    /// significant than outer digits of the same X; P and Y lists are concatenated.
    pub const fn embed(&self, inner: &Encoding) -> Result<Encoding, Violation> {
        if self.nx != inner.nx {
            return Err(viol(
                EncodingRule::ListLengthMismatch,
                Loc::HAll,
                inner.nx as Index,
                self.nx as Index,
                0,
                0,
            ));
        }
        if self.np_major + inner.np_major > MAX_P {
            return Err(viol(
                EncodingRule::PCount,
                Loc::PMajorAll,
                (self.np_major + inner.np_major) as Index,
                0,
                0,
                0,
            ));
        }
        let mut out = *self;
        out.r = tryv!(concat(&self.r, &inner.r, Loc::Whole));
        let mut x = 0;
        while x < self.nx {
            out.h[x] = tryv!(concat(&self.h[x], &inner.h[x], Loc::HList(x as u8)));
            x += 1;
        }
        let mut p = 0;
        while p < inner.np_major {
            out.p_major[self.np_major + p] = inner.p_major[p];
            out.p_minor[self.np_major + p] =
                self.shift_minors(&inner.p_major[p], &inner.p_minor[p]);
            p += 1;
        }
        out.np_major = self.np_major + inner.np_major;
        out.np_minor = out.np_major;
        out.y_major = tryv!(concat(&self.y_major, &inner.y_major, Loc::YMajorAll));
        let shifted = self.shift_minors(&inner.y_major, &inner.y_minor);
        out.y_minor = tryv!(concat(&self.y_minor, &shifted, Loc::YMinorAll));
        Ok(out)
    }

    /// Inner minors shifted past this encoding's components of the same major.
    const fn shift_minors(&self, majors: &Dims, minors: &Dims) -> Dims {
        let mut out = *minors;
        let mut i = 0;
        while i < minors.len() {
            out.set(i, minors.get(i) + self.components(majors.get(i)));
            i += 1;
        }
        out
    }

    /// `make_reduce_tile_distribution_encoding(enc, xs)`: drops the X dims in `xs` (a reduction
    /// over them). Their Y's disappear; their H components not claimed by a Y become R
    /// components (in X, then minor order) and P references follow them; surviving X's are
    /// renumbered.
    pub const fn reduce(&self, xs: &[Index]) -> Result<Encoding, Violation> {
        let mut reduced = [false; MAX_X];
        let mut i = 0;
        while i < xs.len() {
            let x = xs[i];
            if x < 0 || x as usize >= self.nx || reduced[x as usize] {
                return Err(viol(
                    EncodingRule::IndexOutOfRange,
                    Loc::HAll,
                    x,
                    self.nx as Index,
                    0,
                    0,
                ));
            }
            reduced[x as usize] = true;
            i += 1;
        }
        // New address of every old component: new_major[old_major], and a minor map.
        let mut new_major = [[0 as Index; MAX_COMPONENTS]; MAX_X + 1];
        let mut new_minor = [[0 as Index; MAX_COMPONENTS]; MAX_X + 1];
        let mut r = self.r;
        let mut j = 0;
        while j < self.r.len() {
            new_major[0][j] = 0;
            new_minor[0][j] = j as Index;
            j += 1;
        }
        let mut out = *self;
        let mut nx_new = 0usize;
        let mut x = 0;
        while x < self.nx {
            j = 0;
            while j < self.h[x].len() {
                if !reduced[x] {
                    new_major[x + 1][j] = nx_new as Index + 1;
                    new_minor[x + 1][j] = j as Index;
                } else if let DigitSource::Y(_) = self.digit_source(x as Index + 1, j as Index) {
                    new_major[x + 1][j] = -1; // disappears
                } else {
                    if r.len() >= MAX_COMPONENTS {
                        return Err(viol(
                            EncodingRule::CapacityExceeded,
                            Loc::Whole,
                            r.len() as Index + 1,
                            MAX_COMPONENTS as Index,
                            0,
                            0,
                        ));
                    }
                    new_major[x + 1][j] = 0;
                    new_minor[x + 1][j] = r.len() as Index;
                    r = r.push(self.h[x].get(j));
                }
                j += 1;
            }
            if !reduced[x] {
                out.h[nx_new] = self.h[x];
                nx_new += 1;
            }
            x += 1;
        }
        while nx_new < MAX_X {
            out.h[nx_new] = Dims::EMPTY;
            nx_new += 1;
        }
        out.nx = self.nx - xs.len();
        out.r = r;
        let mut p = 0;
        while p < self.np_major {
            let mut k = 0;
            while k < self.p_major[p].len() {
                let (ma, mi) = (
                    self.p_major[p].get(k) as usize,
                    self.p_minor[p].get(k) as usize,
                );
                out.p_major[p].set(k, new_major[ma][mi]);
                out.p_minor[p].set(k, new_minor[ma][mi]);
                k += 1;
            }
            p += 1;
        }
        let mut ym = Dims::EMPTY;
        let mut yn = Dims::EMPTY;
        let mut y = 0;
        while y < self.ny() {
            let (ma, mi) = (self.y_major.get(y) as usize, self.y_minor.get(y) as usize);
            if !reduced[ma - 1] {
                ym = ym.push(new_major[ma][mi]);
                yn = yn.push(new_minor[ma][mi]);
            }
            y += 1;
        }
        out.y_major = ym;
        out.y_minor = yn;
        Ok(out)
    }

    /// `tile_distribution_encoding_shuffle_t`: `Y'[i] = Y[perm[i]]` (changes only the D order).
    pub const fn shuffle(&self, perm: &[Index]) -> Result<Encoding, Violation> {
        let d = match Dims::try_from_slice(perm) {
            Some(d) => d,
            None => {
                return Err(viol(
                    EncodingRule::CapacityExceeded,
                    Loc::YMajorAll,
                    perm.len() as Index,
                    MAX_DIMS as Index,
                    0,
                    0,
                ))
            }
        };
        if d.len() != self.ny() || !d.is_permutation() {
            return Err(viol(
                EncodingRule::IndexOutOfRange,
                Loc::YMajorAll,
                d.len() as Index,
                self.ny() as Index,
                0,
                0,
            ));
        }
        let mut out = *self;
        let mut i = 0;
        while i < d.len() {
            out.y_major.set(i, self.y_major.get(d.get(i) as usize));
            out.y_minor.set(i, self.y_minor.get(d.get(i) as usize));
            i += 1;
        }
        Ok(out)
    }

    /// True if `other` is the same encoding: the same R, H, P and Y lists.
    pub const fn same_as(&self, other: &Encoding) -> bool {
        self.same_rhp(other)
            && dims_eq(&self.y_major, &other.y_major)
            && dims_eq(&self.y_minor, &other.y_minor)
    }

    /// True if `other` has the same R, H and P lists (it may order its Y's differently).
    pub const fn same_rhp(&self, other: &Encoding) -> bool {
        if !dims_eq(&self.r, &other.r) || self.nx != other.nx || self.np_major != other.np_major {
            return false;
        }
        let mut x = 0;
        while x < self.nx {
            if !dims_eq(&self.h[x], &other.h[x]) {
                return false;
            }
            x += 1;
        }
        let mut p = 0;
        while p < self.np_major {
            if !dims_eq(&self.p_major[p], &other.p_major[p])
                || !dims_eq(&self.p_minor[p], &other.p_minor[p])
            {
                return false;
            }
            p += 1;
        }
        true
    }

    /// Restricts X dim `x` to `len` elements by shrinking its digits from the most significant
    /// side (CK's `reverse_slice_sequence`): the least significant digits that fit are kept,
    /// the digit where `len` ends is cut to the remaining factor, more significant digits become
    /// length 1. Every digit that changes must be Y-claimed (a P digit cannot be sliced: the
    /// thread count would change), and `len` must factor through the digits.
    pub const fn slice_x(&self, x: usize, len: Index) -> Result<Encoding, Violation> {
        if x >= self.nx {
            return Err(viol(
                EncodingRule::IndexOutOfRange,
                Loc::HAll,
                x as Index,
                self.nx as Index,
                0,
                0,
            ));
        }
        if len < 1 || len > self.h[x].product() {
            return Err(viol(
                EncodingRule::SliceNotFactor,
                Loc::HList(x as u8),
                len,
                self.h[x].product(),
                x as Index,
                0,
            ));
        }
        let mut out = *self;
        let mut remaining = len;
        let mut j = self.h[x].len();
        while j > 0 {
            j -= 1;
            let l = self.h[x].get(j);
            let new_len = if remaining >= l {
                if remaining % l != 0 {
                    return Err(viol(
                        EncodingRule::SliceNotFactor,
                        Loc::H(x as u8, j as u8),
                        len,
                        l,
                        x as Index,
                        0,
                    ));
                }
                remaining /= l;
                l
            } else {
                if l % remaining != 0 {
                    return Err(viol(
                        EncodingRule::SliceNotFactor,
                        Loc::H(x as u8, j as u8),
                        len,
                        l,
                        x as Index,
                        0,
                    ));
                }
                let r = remaining;
                remaining = 1;
                r
            };
            if new_len != l {
                if let DigitSource::Y(_) = self.digit_source(x as Index + 1, j as Index) {
                } else {
                    return Err(viol(
                        EncodingRule::SliceThroughP,
                        Loc::H(x as u8, j as u8),
                        l,
                        new_len,
                        x as Index,
                        0,
                    ));
                }
            }
            out.h[x].set(j, new_len);
        }
        Ok(out)
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
