//! Fixed-capacity multi-indices.
//!
//! CK Tile uses compile-time `sequence<>`s and `array<index_t, N>`s; a Rust `const fn` cannot
//! allocate, so every multi-index here is a [`Dims`]: up to [`MAX_DIMS`] values plus a length.
//! Unused slots are always zero, so the derived equality is equality of the used prefix.

use crate::Index;

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

    /// `n` copies of `value`. Panics (at compile time in const contexts) if `n > MAX_DIMS`.
    pub const fn splat(n: usize, value: Index) -> Dims {
        assert!(n <= MAX_DIMS, "Dims capacity exceeded");
        let mut d = Dims::EMPTY;
        while (d.len as usize) < n {
            d = d.push(value);
        }
        d
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

    /// Entry `i` (panics if out of range).
    pub const fn get(&self, i: usize) -> Index {
        assert!(i < self.len as usize, "Dims index out of range");
        self.v[i]
    }

    /// The last entry (panics if empty).
    pub const fn last(&self) -> Index {
        self.get(self.len as usize - 1)
    }

    /// A copy with entry `i` replaced.
    pub const fn with(mut self, i: usize, value: Index) -> Dims {
        assert!(i < self.len as usize, "Dims index out of range");
        self.v[i] = value;
        self
    }

    /// Sets entry `i`.
    pub const fn set(&mut self, i: usize, value: Index) {
        assert!(i < self.len as usize, "Dims index out of range");
        self.v[i] = value;
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

    /// Product of all entries (1 for the empty index).
    pub const fn product(&self) -> Index {
        let mut p = 1;
        let mut i = 0;
        while i < self.len as usize {
            p *= self.v[i];
            i += 1;
        }
        p
    }

    /// Sum of all entries.
    pub const fn sum(&self) -> Index {
        let mut s = 0;
        let mut i = 0;
        while i < self.len as usize {
            s += self.v[i];
            i += 1;
        }
        s
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

    /// Elementwise sum (lengths must match).
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

    /// Elementwise difference (lengths must match).
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

    /// Dot product (lengths must match).
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
