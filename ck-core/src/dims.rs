//! Fixed-capacity multi-indices.
//!
//! CK Tile uses compile-time `sequence<>`s and `array<index_t, N>`s; a Rust `const fn` cannot
//! allocate, so every multi-index here is a [`Dims`]: up to [`MAX_DIMS`] values plus a length.
//! Unused slots are always zero, so the derived equality is equality of the used prefix.
//!
//! Like slices, the plain methods panic on a misuse (an index out of range, a full `Dims`,
//! lengths that differ, an overflow) — a compile error where they run in const evaluation —
//! and each has a checked form returning `Option` for values not known to be in range.

/// CK's `index_t`: signed (pads produce negative lower indices), 32-bit (cheap on GPUs).
pub type Index = i32;

/// Capacity of a [`Dims`]. CK caps encodings at 10 dims per list (`kMaxNumDim`); a little more
/// room lets adaptors carry a few extra dims.
pub const MAX_DIMS: usize = 12;

/// A multi-index of at most [`MAX_DIMS`] entries.
///
/// ```
/// use ck_core::Dims;
/// let d = Dims::from_slice(&[4, 5, 6]);
/// assert_eq!(d.len(), 3);
/// assert_eq!(d.product(), 120);
/// assert_eq!(d.reverse_exclusive_scan().as_slice(), &[30, 6, 1]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dims {
    len: u8,
    v: [Index; MAX_DIMS],
}

impl Dims {
    /// The empty multi-index.
    pub const EMPTY: Dims = Dims {
        len: 0,
        v: [0; MAX_DIMS],
    };

    /// `n` copies of `value`. Panics if `n > MAX_DIMS`; see [`Dims::try_splat`].
    pub const fn splat(n: usize, value: Index) -> Dims {
        match Dims::try_splat(n, value) {
            Some(d) => d,
            None => panic!("Dims capacity exceeded"),
        }
    }

    /// `n` copies of `value`, or `None` if `n > MAX_DIMS`.
    pub const fn try_splat(n: usize, value: Index) -> Option<Dims> {
        if n > MAX_DIMS {
            return None;
        }
        let mut d = Dims::EMPTY;
        while (d.len as usize) < n {
            d.v[d.len as usize] = value;
            d.len += 1;
        }
        Some(d)
    }

    /// Copies a slice. Panics if it is longer than [`MAX_DIMS`]; see [`Dims::try_from_slice`].
    pub const fn from_slice(s: &[Index]) -> Dims {
        match Dims::try_from_slice(s) {
            Some(d) => d,
            None => panic!("Dims capacity exceeded"),
        }
    }

    /// Copies a slice, or `None` if it is longer than [`MAX_DIMS`].
    pub const fn try_from_slice(s: &[Index]) -> Option<Dims> {
        if s.len() > MAX_DIMS {
            return None;
        }
        let mut d = Dims::EMPTY;
        let mut i = 0;
        while i < s.len() {
            d.v[i] = s[i];
            i += 1;
        }
        d.len = s.len() as u8;
        Some(d)
    }

    /// Number of entries.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// True if there are no entries.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entry `i`. Panics if `i >= len`; see [`Dims::try_get`].
    pub const fn get(&self, i: usize) -> Index {
        match self.try_get(i) {
            Some(v) => v,
            None => panic!("Dims index out of range"),
        }
    }

    /// Entry `i`, or `None` if `i >= len`.
    pub const fn try_get(&self, i: usize) -> Option<Index> {
        if i < self.len as usize {
            Some(self.v[i])
        } else {
            None
        }
    }

    /// The last entry. Panics if empty; see [`Dims::try_last`].
    pub const fn last(&self) -> Index {
        match self.try_last() {
            Some(v) => v,
            None => panic!("Dims index out of range"),
        }
    }

    /// The last entry, or `None` if empty.
    pub const fn try_last(&self) -> Option<Index> {
        match self.len {
            0 => None,
            n => Some(self.v[n as usize - 1]),
        }
    }

    /// A copy with entry `i` replaced. Panics if `i >= len`; see [`Dims::try_with`].
    pub const fn with(self, i: usize, value: Index) -> Dims {
        match self.try_with(i, value) {
            Some(d) => d,
            None => panic!("Dims index out of range"),
        }
    }

    /// A copy with entry `i` replaced, or `None` if `i >= len`.
    pub const fn try_with(mut self, i: usize, value: Index) -> Option<Dims> {
        if i >= self.len as usize {
            return None;
        }
        self.v[i] = value;
        Some(self)
    }

    /// Sets entry `i`. Panics if `i >= len`; see [`Dims::try_with`].
    pub const fn set(&mut self, i: usize, value: Index) {
        *self = self.with(i, value);
    }

    /// A copy with `value` appended. Panics if it already holds [`MAX_DIMS`] entries (a
    /// compile error in const contexts); see [`Dims::try_push`].
    pub const fn push(self, value: Index) -> Dims {
        match self.try_push(value) {
            Some(d) => d,
            None => panic!("Dims capacity exceeded"),
        }
    }

    /// A copy with `value` appended, or `None` if it already holds [`MAX_DIMS`] entries.
    pub const fn try_push(mut self, value: Index) -> Option<Dims> {
        if self.len as usize >= MAX_DIMS {
            return None;
        }
        self.v[self.len as usize] = value;
        self.len += 1;
        Some(self)
    }

    /// The used entries.
    pub const fn as_slice(&self) -> &[Index] {
        self.v.split_at(self.len as usize).0
    }

    /// Product of all entries (1 for the empty index). Overflow panics in debug builds and
    /// wraps in release builds, as `*` does; see [`Dims::checked_product`].
    pub const fn product(&self) -> Index {
        let mut p = 1;
        let mut i = 0;
        while i < self.len as usize {
            p *= self.v[i];
            i += 1;
        }
        p
    }

    /// Product of all entries, or `None` on overflow.
    pub const fn checked_product(&self) -> Option<Index> {
        let mut p: Index = 1;
        let mut i = 0;
        while i < self.len as usize {
            p = match p.checked_mul(self.v[i]) {
                Some(p) => p,
                None => return None,
            };
            i += 1;
        }
        Some(p)
    }

    /// Sum of all entries (overflow as for [`Dims::product`]; see [`Dims::checked_sum`]).
    pub const fn sum(&self) -> Index {
        let mut s = 0;
        let mut i = 0;
        while i < self.len as usize {
            s += self.v[i];
            i += 1;
        }
        s
    }

    /// Sum of all entries, or `None` on overflow.
    pub const fn checked_sum(&self) -> Option<Index> {
        let mut s: Index = 0;
        let mut i = 0;
        while i < self.len as usize {
            s = match s.checked_add(self.v[i]) {
                Some(s) => s,
                None => return None,
            };
            i += 1;
        }
        Some(s)
    }

    /// CK's reverse exclusive scan: `scan[i] = Π self[i+1..]`, `scan[last] = 1`. These are the
    /// place values of a mixed-radix number whose digits have these lengths (digit 0 most
    /// significant).
    pub const fn reverse_exclusive_scan(&self) -> Dims {
        let mut out = Dims::splat(self.len as usize, 1);
        let mut i = self.len as usize;
        let mut acc = 1;
        while i > 0 {
            i -= 1;
            out.v[i] = acc;
            acc *= self.v[i];
        }
        out
    }

    /// Elementwise sum. Panics if the lengths differ; see [`Dims::checked_add`].
    pub const fn add(&self, other: &Dims) -> Dims {
        assert!(self.len == other.len, "Dims length mismatch");
        let mut out = *self;
        let mut i = 0;
        while i < self.len as usize {
            out.v[i] += other.v[i];
            i += 1;
        }
        out
    }

    /// Elementwise sum, or `None` if the lengths differ or an entry overflows.
    pub const fn checked_add(&self, other: &Dims) -> Option<Dims> {
        if self.len != other.len {
            return None;
        }
        let mut out = *self;
        let mut i = 0;
        while i < self.len as usize {
            out.v[i] = match self.v[i].checked_add(other.v[i]) {
                Some(v) => v,
                None => return None,
            };
            i += 1;
        }
        Some(out)
    }

    /// Elementwise difference. Panics if the lengths differ; see [`Dims::checked_sub`].
    pub const fn sub(&self, other: &Dims) -> Dims {
        assert!(self.len == other.len, "Dims length mismatch");
        let mut out = *self;
        let mut i = 0;
        while i < self.len as usize {
            out.v[i] -= other.v[i];
            i += 1;
        }
        out
    }

    /// Elementwise difference, or `None` if the lengths differ or an entry overflows.
    pub const fn checked_sub(&self, other: &Dims) -> Option<Dims> {
        if self.len != other.len {
            return None;
        }
        let mut out = *self;
        let mut i = 0;
        while i < self.len as usize {
            out.v[i] = match self.v[i].checked_sub(other.v[i]) {
                Some(v) => v,
                None => return None,
            };
            i += 1;
        }
        Some(out)
    }

    /// Dot product. Panics if the lengths differ; see [`Dims::checked_dot`].
    pub const fn dot(&self, other: &Dims) -> Index {
        assert!(self.len == other.len, "Dims length mismatch");
        let mut s = 0;
        let mut i = 0;
        while i < self.len as usize {
            s += self.v[i] * other.v[i];
            i += 1;
        }
        s
    }

    /// Dot product, or `None` if the lengths differ or a term or the sum overflows.
    pub const fn checked_dot(&self, other: &Dims) -> Option<Index> {
        if self.len != other.len {
            return None;
        }
        let mut s: Index = 0;
        let mut i = 0;
        while i < self.len as usize {
            let term = match self.v[i].checked_mul(other.v[i]) {
                Some(t) => t,
                None => return None,
            };
            s = match s.checked_add(term) {
                Some(s) => s,
                None => return None,
            };
            i += 1;
        }
        Some(s)
    }

    /// True if every entry is zero.
    pub const fn is_zero(&self) -> bool {
        let mut i = 0;
        while i < self.len as usize {
            if self.v[i] != 0 {
                return false;
            }
            i += 1;
        }
        true
    }

    /// True if the entries are a permutation of `0..len`.
    pub const fn is_permutation(&self) -> bool {
        let n = self.len as usize;
        let mut seen = [false; MAX_DIMS];
        let mut i = 0;
        while i < n {
            let v = self.v[i];
            if v < 0 || v as usize >= n || seen[v as usize] {
                return false;
            }
            seen[v as usize] = true;
            i += 1;
        }
        true
    }
}

impl core::fmt::Debug for Dims {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl core::ops::Index<usize> for Dims {
    type Output = Index;
    fn index(&self, i: usize) -> &Index {
        &self.as_slice()[i]
    }
}

impl<'a> IntoIterator for &'a Dims {
    type Item = &'a Index;
    type IntoIter = core::slice::Iter<'a, Index>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

/// Greatest common divisor of two non-negative numbers (`gcd(0, b) = b`).
pub const fn gcd(a: Index, b: Index) -> Index {
    let (mut a, mut b) = (a, b);
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}
