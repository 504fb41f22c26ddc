//! Coordinates and incremental movement (spec §2.3).
//!
//! A [`Coordinate`] stores the value of *every* hidden dimension of its adaptor, so moving it by a
//! top-index delta only re-runs the transforms whose upper dims changed, using each transform's
//! incremental update (a delta for linear transforms, a recomputation for merge/xor/modulo). The
//! result always equals a fresh coordinate at the new index:
//!
//! ```
//! use ck_core::{Coordinate, Dims, TensorDescriptor};
//! let d = TensorDescriptor::naive(&[5, 7], &[8, 1], -1, -1).unwrap();
//! let mut c = Coordinate::new(d.adaptor(), &Dims::from_slice(&[2, 5]));
//! assert_eq!(d.offset(&c), 21);
//! let diff = d.adaptor().move_coordinate(&mut c, &Dims::from_slice(&[1, -3]));
//! assert_eq!(diff.as_slice(), &[5]);
//! assert_eq!(c, Coordinate::new(d.adaptor(), &Dims::from_slice(&[3, 2])));
//! ```

use crate::adaptor::{Hidden, TensorAdaptor, MAX_HIDDEN, MAX_TRANSFORMS};
use crate::dims::Dims;
use crate::Index;

/// The hidden-index vector of a point of an adaptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coordinate {
    hidden: Hidden,
}

const fn gather(h: &Hidden, ids: &Dims) -> Dims {
    let mut out = Dims::splat(ids.len(), 0);
    let mut i = 0;
    while i < ids.len() {
        out.set(i, h[ids.get(i) as usize]);
        i += 1;
    }
    out
}

impl Coordinate {
    /// The coordinate of top index `top`.
    pub const fn new(adaptor: &TensorAdaptor, top: &Dims) -> Coordinate {
        Coordinate {
            hidden: adaptor.calculate_hidden_index(top),
        }
    }

    /// Every hidden value.
    pub const fn hidden(&self) -> &Hidden {
        &self.hidden
    }

    /// The top index.
    pub const fn top_index(&self, adaptor: &TensorAdaptor) -> Dims {
        gather(&self.hidden, adaptor.top_ids())
    }

    /// The bottom index.
    pub const fn bottom_index(&self, adaptor: &TensorAdaptor) -> Dims {
        gather(&self.hidden, adaptor.bottom_ids())
    }
}

impl TensorAdaptor {
    /// Moves `coord` by `diff_top` and returns the change of the bottom index. Only transforms
    /// whose upper dims changed are re-evaluated (CK's `JudgeDoTransforms`).
    pub const fn move_coordinate(&self, coord: &mut Coordinate, diff_top: &Dims) -> Dims {
        let top = self.top_ids();
        assert!(
            diff_top.len() == top.len(),
            "diff has the wrong number of dims"
        );
        let n = self.num_transforms();
        let mut changed = [false; MAX_HIDDEN];
        let mut run = [false; MAX_TRANSFORMS];
        let mut i = 0;
        while i < top.len() {
            changed[top.get(i) as usize] = diff_top.get(i) != 0;
            i += 1;
        }
        let mut k = n;
        while k > 0 {
            k -= 1;
            let (up, lo) = (self.upper_ids(k), self.lower_ids(k));
            let mut any = false;
            i = 0;
            while i < up.len() {
                any |= changed[up.get(i) as usize];
                i += 1;
            }
            run[k] = any;
            i = 0;
            while i < lo.len() {
                changed[lo.get(i) as usize] = any;
                i += 1;
            }
        }
        let mut diff: Hidden = [0; MAX_HIDDEN];
        i = 0;
        while i < top.len() {
            let id = top.get(i) as usize;
            diff[id] = diff_top.get(i);
            coord.hidden[id] += diff_top.get(i);
            i += 1;
        }
        k = n;
        while k > 0 {
            k -= 1;
            if !run[k] {
                continue;
            }
            let (up, lo) = (self.upper_ids(k), self.lower_ids(k));
            let (dl, low_new) = self.transform_at(k).update(
                &gather(&diff, up),
                &gather(&coord.hidden, lo),
                &gather(&coord.hidden, up),
            );
            i = 0;
            while i < lo.len() {
                let id = lo.get(i) as usize;
                diff[id] = dl.get(i);
                coord.hidden[id] = low_new.get(i);
                i += 1;
            }
        }
        gather(&diff, self.bottom_ids())
    }

    /// Whether every pad on the coordinate's path accepts it, assuming the top index is in range
    /// (CK's `is_valid_assuming_top_valid`; what tensor views use).
    pub const fn is_valid_assuming_top_valid(&self, coord: &Coordinate) -> bool {
        self.is_valid_hidden(&coord.hidden)
    }

    /// [`Self::is_valid_assuming_top_valid`] and `0 ≤ top_i < len_i` for every top dim.
    pub const fn has_valid_offset(&self, coord: &Coordinate) -> bool {
        let top = coord.top_index(self);
        let lens = self.top_lengths();
        let mut i = 0;
        while i < top.len() {
            let v: Index = top.get(i);
            if v < 0 || (lens.get(i) >= 0 && v >= lens.get(i)) {
                return false;
            }
            i += 1;
        }
        self.is_valid_assuming_top_valid(coord)
    }
}
