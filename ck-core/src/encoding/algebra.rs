//! The encoding algebra (spec §4.4): embedding, reducing, shuffling and slicing encodings.

use super::*;

impl Encoding {
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
        // What the operation built is checked like any other encoding.
        out.unchecked().check()
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
        // What the operation built is checked like any other encoding.
        out.unchecked().check()
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
        // What the operation built is checked like any other encoding.
        out.unchecked().check()
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
        // What the operation built is checked like any other encoding.
        out.unchecked().check()
    }
}
