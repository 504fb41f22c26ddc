//! Coordinate transforms: each maps an *upper* multi-index to a *lower* one (spec §1).
//!
//! CK Tile only ever computes upper → lower. A transform also knows how to update its lower index
//! incrementally when its upper index moves ([`Transform::update`]), whether an upper index maps
//! to a valid lower one ([`Transform::valid`], only pads can say no) and how vector-access
//! guarantees travel upwards through it ([`Transform::safe_vector`]; `-1` = unknown).
//!
//! | transform | lower(up) | up lengths |
//! |---|---|---|
//! | `pass_through(n)` | `[u0]` | `[n]` |
//! | `pad(n, l, r)` | `[u0 − l]`, valid iff `l ≤ u0 < n + l` | `[n + l + r]` |
//! | `left_pad(n, l)` / `right_pad(n, r)` | `[u0 − l]` / `[u0]` | `[n + l]` / `[n + r]` |
//! | `embed(U, C)` | `[Σ u_i·C_i]` | `U` |
//! | `merge(L)` | mixed-radix digits of `u0` (digit 0 not wrapped) | `[Π L]` |
//! | `unmerge(U)` | `[Σ u_i·scan(U)_i]` | `U` |
//! | `replicate(U)` | `[]` | `U` |
//! | `freeze(v)` | `[v]` | `[]` |
//! | `insert(n)` | `[]` | `[n]` |
//! | `slice(n, b, e)` | `[u0 + b]` (never invalid) | `[e − b]` |
//! | `offset(n, o)` | `[u0 + o]` | `[n]` |
//! | `modulo(m, n)` | `[u0 % m]` | `[n]` |
//! | `xor(A, B)` | `[u0, u1 ^ (u0 % B)]`, B a power of two | `[A, B]` |
//!
//! `scan(L)[i] = Π L[i+1..]` (see [`Dims::reverse_exclusive_scan`]).

use crate::dims::{gcd, Dims, MAX_DIMS};
use crate::error::{Error, Rule};
use crate::magic::{magic, magic_div};
use crate::Index;

/// One coordinate transform. Build it with the checked constructors (`Transform::merge`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// `[u0] → [u0]`.
    PassThrough {
        /// Length of the dimension.
        len: Index,
    },
    /// Both-sided pad: `[u0] → [u0 − left]`, valid iff `left ≤ u0 < low_len + left` (or `skip`).
    Pad {
        /// Length of the real (lower) dimension.
        low_len: Index,
        /// Padding before.
        left: Index,
        /// Padding after.
        right: Index,
        /// Skip the validity check.
        skip: bool,
    },
    /// `[u0] → [u0 − left]`, valid iff `u0 ≥ left` (or `skip`).
    LeftPad {
        /// Length of the real dimension.
        low_len: Index,
        /// Padding before.
        left: Index,
        /// Skip the validity check.
        skip: bool,
    },
    /// `[u0] → [u0]`, valid iff `u0 < low_len` (or `skip`).
    RightPad {
        /// Length of the real dimension.
        low_len: Index,
        /// Padding after.
        right: Index,
        /// Skip the validity check.
        skip: bool,
    },
    /// `[u_0..u_n] → [Σ u_i·coefs_i]` (a strided layout).
    Embed {
        /// Upper lengths.
        up_lengths: Dims,
        /// Coefficient (stride) of each upper dim.
        coefs: Dims,
    },
    /// `[u0] → digits of u0` in the mixed radix `low_lengths` (digit 0 most significant and never
    /// reduced: `merge(4,5)` maps 23 to `(4,3)`). Lowered with magic division (exact below 2^31).
    Merge {
        /// Lower lengths (the radices).
        low_lengths: Dims,
        /// Magic multipliers of each radix.
        mults: [u32; MAX_DIMS],
        /// Magic shifts of each radix.
        shifts: [u32; MAX_DIMS],
    },
    /// `[u_0..u_n] → [Σ u_i·scan(up_lengths)_i]` (row-major linearisation).
    Unmerge {
        /// Upper lengths.
        up_lengths: Dims,
    },
    /// `[u_0..u_n] → []`: upper dims that do not affect the lower index (broadcast).
    Replicate {
        /// Upper lengths.
        up_lengths: Dims,
    },
    /// `[] → [value]`.
    Freeze {
        /// The fixed lower index.
        value: Index,
    },
    /// `[u0] → []`: a new upper dim that does not affect the lower index.
    Insert {
        /// Length of the inserted dim.
        len: Index,
    },
    /// `[u0] → [u0 + begin]`, upper length `end − begin`; never reports invalid (as in CK).
    Slice {
        /// Length of the lower dim.
        low_len: Index,
        /// First lower index.
        begin: Index,
        /// One past the last lower index.
        end: Index,
    },
    /// `[u0] → [u0 + offset]`.
    Offset {
        /// Length of the dim.
        low_len: Index,
        /// Added to the index.
        offset: Index,
    },
    /// `[u0] → [u0 % modulus]`.
    Modulo {
        /// The modulus.
        modulus: Index,
        /// Upper length.
        up_len: Index,
    },
    /// `[u0, u1] → [u0, u1 ^ (u0 % lengths[1])]`; a bijection on `[0,A)×[0,B)` since B is a power
    /// of two (checked).
    Xor {
        /// `[A, B]`.
        lengths: [Index; 2],
    },
}

const fn check_positive(what: &'static str, at: usize, v: Index) -> Result<(), Error> {
    if v < 1 {
        return Err(Error::new(Rule::LengthNotPositive, what)
            .at(at)
            .values(v, 0));
    }
    Ok(())
}

const fn check_non_negative(what: &'static str, v: Index) -> Result<(), Error> {
    if v < 0 {
        return Err(Error::new(Rule::NegativeParameter, what).values(v, 0));
    }
    Ok(())
}

const fn check_lengths(what: &'static str, lengths: &[Index], min: usize) -> Result<Dims, Error> {
    if lengths.len() < min {
        return Err(Error::new(Rule::EmptyList, what));
    }
    let d = match Dims::try_from_slice(lengths) {
        Some(d) => d,
        None => {
            return Err(Error::new(Rule::CapacityExceeded, what)
                .values(lengths.len() as Index, MAX_DIMS as Index))
        }
    };
    let mut i = 0;
    let mut product: i64 = 1;
    while i < lengths.len() {
        if let Err(e) = check_positive(what, i, lengths[i]) {
            return Err(e);
        }
        product *= lengths[i] as i64;
        if product > Index::MAX as i64 {
            return Err(Error::new(Rule::IndexOverflow, what).values(Index::MAX, 0));
        }
        i += 1;
    }
    Ok(d)
}

/// `?` is not available in `const fn`; this is its stand-in.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}
pub(crate) use tri;

impl Transform {
    /// `pass_through(len)`.
    pub const fn pass_through(len: Index) -> Result<Transform, Error> {
        tri!(check_positive("pass_through length", 0, len));
        Ok(Transform::PassThrough { len })
    }

    /// `pad(low_len, left, right)` with validity checking.
    pub const fn pad(low_len: Index, left: Index, right: Index) -> Result<Transform, Error> {
        tri!(check_positive("pad length", 0, low_len));
        tri!(check_non_negative("pad left", left));
        tri!(check_non_negative("pad right", right));
        Ok(Transform::Pad {
            low_len,
            left,
            right,
            skip: false,
        })
    }

    /// `left_pad(low_len, left)`.
    pub const fn left_pad(low_len: Index, left: Index) -> Result<Transform, Error> {
        tri!(check_positive("left_pad length", 0, low_len));
        tri!(check_non_negative("left_pad left", left));
        Ok(Transform::LeftPad {
            low_len,
            left,
            skip: false,
        })
    }

    /// `right_pad(low_len, right)`.
    pub const fn right_pad(low_len: Index, right: Index) -> Result<Transform, Error> {
        tri!(check_positive("right_pad length", 0, low_len));
        tri!(check_non_negative("right_pad right", right));
        Ok(Transform::RightPad {
            low_len,
            right,
            skip: false,
        })
    }

    /// The same pad without its validity check (CK's `SkipIsValidCheck`).
    pub const fn skip_validity(self) -> Transform {
        match self {
            Transform::Pad {
                low_len,
                left,
                right,
                ..
            } => Transform::Pad {
                low_len,
                left,
                right,
                skip: true,
            },
            Transform::LeftPad { low_len, left, .. } => Transform::LeftPad {
                low_len,
                left,
                skip: true,
            },
            Transform::RightPad { low_len, right, .. } => Transform::RightPad {
                low_len,
                right,
                skip: true,
            },
            other => other,
        }
    }

    /// `embed(up_lengths, coefs)`: `lower = Σ u_i·coefs_i`.
    ///
    /// ```
    /// use ck_core::{Dims, Transform};
    /// let t = Transform::embed(&[2, 3], &[12, 1]).unwrap();
    /// assert_eq!(t.lower(&Dims::from_slice(&[1, 2])).as_slice(), &[14]);
    /// ```
    pub const fn embed(up_lengths: &[Index], coefs: &[Index]) -> Result<Transform, Error> {
        let up = tri!(check_lengths("embed lengths", up_lengths, 1));
        if coefs.len() != up_lengths.len() {
            return Err(Error::new(Rule::ListLengthMismatch, "embed coefficients")
                .values(coefs.len() as Index, up_lengths.len() as Index));
        }
        Ok(Transform::Embed {
            up_lengths: up,
            coefs: Dims::from_slice(coefs),
        })
    }

    /// `merge(low_lengths)`: splits one upper index into mixed-radix digits.
    ///
    /// Digit 0 is never reduced, so an upper index ≥ Π lengths overflows into it — the reason the
    /// encoding checker insists that P ranges equal merge products.
    ///
    /// ```
    /// use ck_core::{Dims, Transform};
    /// let m = Transform::merge(&[4, 5]).unwrap();
    /// assert_eq!(m.lower(&Dims::from_slice(&[13])).as_slice(), &[2, 3]);
    /// assert_eq!(m.lower(&Dims::from_slice(&[23])).as_slice(), &[4, 3]); // digit 0 not wrapped
    /// let m3 = Transform::merge(&[2, 4, 8]).unwrap();
    /// assert_eq!(m3.lower(&Dims::from_slice(&[45])).as_slice(), &[1, 1, 5]);
    /// ```
    pub const fn merge(low_lengths: &[Index]) -> Result<Transform, Error> {
        let low = tri!(check_lengths("merge lengths", low_lengths, 1));
        let mut mults = [0u32; MAX_DIMS];
        let mut shifts = [0u32; MAX_DIMS];
        let mut i = 0;
        while i < low.len() {
            let (m, s) = magic(low.get(i) as u32);
            mults[i] = m;
            shifts[i] = s;
            i += 1;
        }
        Ok(Transform::Merge {
            low_lengths: low,
            mults,
            shifts,
        })
    }

    /// `unmerge(up_lengths)`: row-major linearisation of the upper digits.
    ///
    /// ```
    /// use ck_core::{Dims, Transform};
    /// let u = Transform::unmerge(&[3, 4, 2]).unwrap(); // place values [8, 2, 1]
    /// assert_eq!(u.lower(&Dims::from_slice(&[1, 3, 0])).as_slice(), &[14]);
    /// ```
    pub const fn unmerge(up_lengths: &[Index]) -> Result<Transform, Error> {
        let up = tri!(check_lengths("unmerge lengths", up_lengths, 1));
        Ok(Transform::Unmerge { up_lengths: up })
    }

    /// `replicate(up_lengths)` (may be empty).
    pub const fn replicate(up_lengths: &[Index]) -> Result<Transform, Error> {
        let up = tri!(check_lengths("replicate lengths", up_lengths, 0));
        Ok(Transform::Replicate { up_lengths: up })
    }

    /// `freeze(value)`.
    pub const fn freeze(value: Index) -> Transform {
        Transform::Freeze { value }
    }

    /// `insert(len)`.
    pub const fn insert(len: Index) -> Result<Transform, Error> {
        tri!(check_positive("insert length", 0, len));
        Ok(Transform::Insert { len })
    }

    /// `slice(low_len, begin, end)`: requires `0 ≤ begin ≤ end ≤ low_len` and `end > begin`.
    pub const fn slice(low_len: Index, begin: Index, end: Index) -> Result<Transform, Error> {
        tri!(check_positive("slice length", 0, low_len));
        if begin < 0 || end > low_len || begin >= end {
            return Err(Error::new(Rule::SliceOutOfRange, "slice").values(begin, end));
        }
        Ok(Transform::Slice {
            low_len,
            begin,
            end,
        })
    }

    /// `offset(low_len, offset)`.
    pub const fn offset(low_len: Index, offset: Index) -> Result<Transform, Error> {
        tri!(check_positive("offset length", 0, low_len));
        tri!(check_non_negative("offset", offset));
        Ok(Transform::Offset { low_len, offset })
    }

    /// `modulo(modulus, up_len)`.
    pub const fn modulo(modulus: Index, up_len: Index) -> Result<Transform, Error> {
        tri!(check_positive("modulo modulus", 0, modulus));
        tri!(check_positive("modulo length", 0, up_len));
        Ok(Transform::Modulo { modulus, up_len })
    }

    /// `xor(a, b)`: `[u0, u1] → [u0, u1 ^ (u0 % b)]`; `b` must be a power of two.
    ///
    /// With `b` a power of two the XOR key `u0 % b` only touches the low `log2 b` bits of `u1`,
    /// so each row `u0` is a permutation of `0..b` (TV5 of the spec, row `u0 = 1`):
    /// ```
    /// use ck_core::{Dims, Transform};
    /// let x = Transform::xor(4, 8).unwrap();
    /// let row: Vec<i32> = (0..8).map(|u1| x.lower(&Dims::from_slice(&[1, u1])).get(1)).collect();
    /// assert_eq!(row, [1, 0, 3, 2, 5, 4, 7, 6]);
    /// assert_eq!(Transform::xor(4, 6).unwrap_err().rule.name(), "xor-not-power-of-two");
    /// ```
    pub const fn xor(a: Index, b: Index) -> Result<Transform, Error> {
        tri!(check_positive("xor lengths", 0, a));
        tri!(check_positive("xor lengths", 1, b));
        if b & (b - 1) != 0 {
            return Err(Error::new(Rule::XorNotPowerOfTwo, "xor lengths").values(b, 0));
        }
        Ok(Transform::Xor { lengths: [a, b] })
    }

    /// Number of lower dimensions.
    pub const fn nlow(&self) -> usize {
        match self {
            Transform::Merge { low_lengths, .. } => low_lengths.len(),
            Transform::Xor { .. } => 2,
            Transform::Replicate { .. } | Transform::Insert { .. } => 0,
            _ => 1,
        }
    }

    /// Number of upper dimensions.
    pub const fn nup(&self) -> usize {
        match self {
            Transform::Embed { up_lengths, .. }
            | Transform::Unmerge { up_lengths }
            | Transform::Replicate { up_lengths } => up_lengths.len(),
            Transform::Xor { .. } => 2,
            Transform::Freeze { .. } => 0,
            _ => 1,
        }
    }

    /// Length of each upper dimension.
    pub const fn up_lengths(&self) -> Dims {
        match *self {
            Transform::PassThrough { len } | Transform::Insert { len } => Dims::splat(1, len),
            Transform::Pad {
                low_len,
                left,
                right,
                ..
            } => Dims::splat(1, low_len + left + right),
            Transform::LeftPad { low_len, left, .. } => Dims::splat(1, low_len + left),
            Transform::RightPad { low_len, right, .. } => Dims::splat(1, low_len + right),
            Transform::Embed { up_lengths, .. }
            | Transform::Unmerge { up_lengths }
            | Transform::Replicate { up_lengths } => up_lengths,
            Transform::Merge { low_lengths, .. } => Dims::splat(1, low_lengths.product()),
            Transform::Freeze { .. } => Dims::EMPTY,
            Transform::Slice { begin, end, .. } => Dims::splat(1, end - begin),
            Transform::Offset { low_len, .. } => Dims::splat(1, low_len),
            Transform::Modulo { up_len, .. } => Dims::splat(1, up_len),
            Transform::Xor { lengths } => Dims::EMPTY.push(lengths[0]).push(lengths[1]),
        }
    }

    /// The lower index of an upper index (`up.len() == nup()`).
    pub const fn lower(&self, up: &Dims) -> Dims {
        match *self {
            Transform::PassThrough { .. } | Transform::RightPad { .. } => Dims::splat(1, up.get(0)),
            Transform::Pad { left, .. } | Transform::LeftPad { left, .. } => {
                Dims::splat(1, up.get(0) - left)
            }
            Transform::Embed { coefs, .. } => Dims::splat(1, up.dot(&coefs)),
            Transform::Merge {
                low_lengths,
                mults,
                shifts,
            } => {
                let n = low_lengths.len();
                let mut low = Dims::splat(n, 0);
                let mut t = up.get(0);
                let mut i = n;
                while i > 1 {
                    i -= 1;
                    let q = magic_div(t as u32, (mults[i], shifts[i])) as Index;
                    low.set(i, t - q * low_lengths.get(i));
                    t = q;
                }
                low.set(0, t);
                low
            }
            Transform::Unmerge { up_lengths } => {
                Dims::splat(1, up.dot(&up_lengths.reverse_exclusive_scan()))
            }
            Transform::Replicate { .. } | Transform::Insert { .. } => Dims::EMPTY,
            Transform::Freeze { value } => Dims::splat(1, value),
            Transform::Slice { begin, .. } => Dims::splat(1, up.get(0) + begin),
            Transform::Offset { offset, .. } => Dims::splat(1, up.get(0) + offset),
            Transform::Modulo { modulus, .. } => Dims::splat(1, up.get(0) % modulus),
            Transform::Xor { lengths } => {
                // `xor` checked that lengths[1] is a power of two.
                let s = crate::swizzle::Swizzle::of_columns(lengths[1]);
                Dims::EMPTY
                    .push(up.get(0))
                    .push(s.column(up.get(0), up.get(1)))
            }
        }
    }

    /// Incremental update: the upper index moved by `diff_up` and is now `up_new`; the lower
    /// index was `low_old`. Returns `(diff_low, low_new)`.
    ///
    /// Linear transforms use the delta; merge, modulo and xor recompute from `up_new` (CK's
    /// modulo update is buggy; this one is not). Always equal to `lower(up_new)`.
    pub const fn update(&self, diff_up: &Dims, low_old: &Dims, up_new: &Dims) -> (Dims, Dims) {
        match self {
            Transform::Merge { .. } | Transform::Modulo { .. } | Transform::Xor { .. } => {
                let low_new = self.lower(up_new);
                (low_new.sub(low_old), low_new)
            }
            Transform::Replicate { .. } | Transform::Insert { .. } => (Dims::EMPTY, Dims::EMPTY),
            Transform::Freeze { .. } => (Dims::splat(1, 0), *low_old),
            // Every remaining transform is linear: lower(u + du) = lower(u) + lower(du) − lower(0).
            _ => {
                let zero = Dims::splat(diff_up.len(), 0);
                let diff_low = self.lower(diff_up).sub(&self.lower(&zero));
                (diff_low, low_old.add(&diff_low))
            }
        }
    }

    /// True if every in-range upper index maps to a valid lower index (no runtime check needed).
    pub const fn always_valid(&self) -> bool {
        match *self {
            Transform::Pad { skip, .. }
            | Transform::LeftPad { skip, .. }
            | Transform::RightPad { skip, .. } => skip,
            _ => true,
        }
    }

    /// Whether `up` maps to a valid lower index (false only inside a pad's padding).
    ///
    /// ```
    /// use ck_core::{Dims, Transform};
    /// let p = Transform::pad(3, 1, 1).unwrap();
    /// let v: Vec<bool> = (0..5).map(|u| p.valid(&Dims::from_slice(&[u]))).collect();
    /// assert_eq!(v, [false, true, true, true, false]);
    /// ```
    pub const fn valid(&self, up: &Dims) -> bool {
        match *self {
            Transform::Pad {
                low_len,
                left,
                skip,
                ..
            } => skip || (left <= up.get(0) && up.get(0) < low_len + left),
            Transform::LeftPad { left, skip, .. } => skip || up.get(0) >= left,
            Transform::RightPad { low_len, skip, .. } => skip || up.get(0) < low_len,
            _ => true,
        }
    }

    /// Propagates vector-access guarantees from the lower dims to the upper dims:
    /// `(low_vector_lengths, low_vector_strides) → (up_vector_lengths, up_vector_strides)`,
    /// `-1` meaning "no guarantee". Only the rules CK has: pass-through-like transforms and xor
    /// copy, merge takes its last lower dim's, unmerge gives its last upper dim
    /// `gcd(low_len, U_last)`; everything else (including `pad`, which kills vectorisation) gives -1.
    pub const fn safe_vector(&self, low_len: &Dims, low_stride: &Dims) -> (Dims, Dims) {
        let nup = self.nup();
        let none = Dims::splat(nup, -1);
        match *self {
            Transform::PassThrough { .. }
            | Transform::LeftPad { .. }
            | Transform::RightPad { .. }
            | Transform::Xor { .. } => (*low_len, *low_stride),
            Transform::Merge { low_lengths, .. } => {
                let last = low_lengths.len() - 1;
                (
                    Dims::splat(1, low_len.get(last)),
                    Dims::splat(1, low_stride.get(last)),
                )
            }
            Transform::Unmerge { up_lengths } => {
                let l = low_len.get(0);
                let len = if l == -1 {
                    -1
                } else {
                    gcd(l, up_lengths.last())
                };
                (
                    none.with(nup - 1, len),
                    none.with(nup - 1, low_stride.get(0)),
                )
            }
            _ => (none, none),
        }
    }
}
