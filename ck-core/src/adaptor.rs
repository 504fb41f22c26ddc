//! Tensor adaptors: DAGs of transforms over numbered *hidden* dimensions (spec §2.1).
//!
//! *Top* dims are the user-facing inputs, *bottom* dims the outputs. Transforms are listed from
//! bottom to top and evaluated in reverse list order: each reads the hidden values of its upper
//! dims and writes those of its lower dims. Example — a 4×6 row-major view read through a merged
//! 1-D index (`merge(4,6)` over `unmerge(4,6)`):
//!
//! ```text
//!   top:  [3]  u (0..24)            transform 1: merge([4,6])    lower [1,2] upper [3]
//!   hid:  [1]  row  [2] col         transform 0: unmerge([4,6])  lower [0]   upper [1,2]
//!   bottom: [0] offset = row·6 + col
//! ```
//! ```
//! use ck_core::{Dims, Transform, TensorAdaptor};
//! let a = TensorAdaptor::new(
//!     &[Transform::unmerge(&[4, 6]).unwrap(), Transform::merge(&[4, 6]).unwrap()],
//!     &[&[0], &[1, 2]],
//!     &[&[1, 2], &[3]],
//!     &[0],
//!     &[3],
//! ).unwrap();
//! assert_eq!(a.calculate_bottom_index(&Dims::from_slice(&[17])).as_slice(), &[17]);
//! assert_eq!(a.top_lengths().as_slice(), &[24]);
//! ```
//!
//! Well-formedness is enforced at construction (the C++ only checks list sizes): id lists match
//! the transforms' arities; every hidden dim is produced by at most one transform and consumed by
//! at most one; every lower dim is a bottom dim or produced by an earlier transform; top and
//! bottom ids are distinct and no top dim is consumed; an upper dim of length > 1 that is neither
//! top nor consumed ("dangling", it would read as 0) is rejected unless its transform ignores it
//! (`replicate`, `insert`).

use crate::dims::{Dims, MAX_DIMS};
use crate::error::{Error, Rule};
use crate::transform::{tri, Transform};
use crate::Index;

/// Most transforms an adaptor can hold (CK: `kMaxNumTransforms = 20`).
pub const MAX_TRANSFORMS: usize = 24;
/// Most hidden dimensions an adaptor can hold.
pub const MAX_HIDDEN: usize = 64;

/// Per-hidden-dimension values (indices, vector guarantees).
pub type Hidden = [Index; MAX_HIDDEN];

/// A checked DAG of transforms. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorAdaptor {
    transforms: [Transform; MAX_TRANSFORMS],
    lower_ids: [Dims; MAX_TRANSFORMS],
    upper_ids: [Dims; MAX_TRANSFORMS],
    ntransform: usize,
    bottom: Dims,
    top: Dims,
    ndim_hidden: usize,
}

const PLACEHOLDER: Transform = Transform::Freeze { value: 0 };

const fn gather(h: &Hidden, ids: &Dims) -> Dims {
    let mut out = Dims::splat(ids.len(), 0);
    let mut i = 0;
    while i < ids.len() {
        out.set(i, h[ids.get(i) as usize]);
        i += 1;
    }
    out
}

const fn scatter(h: &mut Hidden, ids: &Dims, v: &Dims) {
    let mut i = 0;
    while i < ids.len() {
        h[ids.get(i) as usize] = v.get(i);
        i += 1;
    }
}

const fn ids_from(what: &'static str, s: &[Index]) -> Result<Dims, Error> {
    match Dims::try_from_slice(s) {
        Some(d) => {
            let mut i = 0;
            while i < s.len() {
                if s[i] < 0 || s[i] as usize >= MAX_HIDDEN {
                    return Err(Error::new(Rule::IndexOutOfRange, what)
                        .at(i)
                        .values(s[i], MAX_HIDDEN as Index));
                }
                i += 1;
            }
            Ok(d)
        }
        None => {
            Err(Error::new(Rule::CapacityExceeded, what)
                .values(s.len() as Index, MAX_DIMS as Index))
        }
    }
}

const fn contains(d: &Dims, v: Index) -> bool {
    let mut i = 0;
    while i < d.len() {
        if d.get(i) == v {
            return true;
        }
        i += 1;
    }
    false
}

impl TensorAdaptor {
    /// Builds and checks an adaptor. `lower_ids[k]` / `upper_ids[k]` are the hidden ids of
    /// transform `k`'s lower / upper dims.
    pub const fn new(
        transforms: &[Transform],
        lower_ids: &[&[Index]],
        upper_ids: &[&[Index]],
        bottom: &[Index],
        top: &[Index],
    ) -> Result<TensorAdaptor, Error> {
        let n = transforms.len();
        if n > MAX_TRANSFORMS {
            return Err(Error::new(Rule::CapacityExceeded, "transforms")
                .values(n as Index, MAX_TRANSFORMS as Index));
        }
        if lower_ids.len() != n {
            return Err(Error::new(Rule::ListLengthMismatch, "lower id lists")
                .values(lower_ids.len() as Index, n as Index));
        }
        if upper_ids.len() != n {
            return Err(Error::new(Rule::ListLengthMismatch, "upper id lists")
                .values(upper_ids.len() as Index, n as Index));
        }
        let mut a = TensorAdaptor {
            transforms: [PLACEHOLDER; MAX_TRANSFORMS],
            lower_ids: [Dims::EMPTY; MAX_TRANSFORMS],
            upper_ids: [Dims::EMPTY; MAX_TRANSFORMS],
            ntransform: n,
            bottom: tri!(ids_from("bottom ids", bottom)),
            top: tri!(ids_from("top ids", top)),
            ndim_hidden: 0,
        };
        let mut k = 0;
        while k < n {
            a.transforms[k] = transforms[k];
            a.lower_ids[k] = tri!(ids_from("lower ids", lower_ids[k]));
            a.upper_ids[k] = tri!(ids_from("upper ids", upper_ids[k]));
            k += 1;
        }
        tri!(a.check());
        Ok(a)
    }

    /// Enforces the well-formedness rules of the module docs and sets `ndim_hidden`.
    const fn check(&mut self) -> Result<(), Error> {
        const NONE: i16 = -1;
        let mut producer = [NONE; MAX_HIDDEN];
        let mut consumer = [NONE; MAX_HIDDEN];
        let mut max_id: Index = -1;
        let mut k = 0;
        while k < self.ntransform {
            let t = &self.transforms[k];
            let (lo, up) = (&self.lower_ids[k], &self.upper_ids[k]);
            if lo.len() != t.nlow() {
                return Err(Error::new(Rule::AdaptorArity, "lower ids of transform")
                    .at(k)
                    .values(lo.len() as Index, t.nlow() as Index));
            }
            if up.len() != t.nup() {
                return Err(Error::new(Rule::AdaptorArity, "upper ids of transform")
                    .at(k)
                    .values(up.len() as Index, t.nup() as Index));
            }
            let mut i = 0;
            while i < lo.len() {
                let id = lo.get(i);
                let u = id as usize;
                if consumer[u] != NONE {
                    return Err(
                        Error::new(Rule::AdaptorHiddenReused, "lower ids of transform")
                            .at(k)
                            .values(id, consumer[u] as Index),
                    );
                }
                if producer[u] == NONE && !contains(&self.bottom, id) {
                    return Err(Error::new(Rule::AdaptorOrder, "lower ids of transform")
                        .at(k)
                        .values(id, 0));
                }
                consumer[u] = k as i16;
                if id > max_id {
                    max_id = id;
                }
                i += 1;
            }
            i = 0;
            while i < up.len() {
                let id = up.get(i);
                let u = id as usize;
                if producer[u] != NONE || consumer[u] != NONE || contains(&self.bottom, id) {
                    let by = if producer[u] != NONE {
                        producer[u]
                    } else {
                        consumer[u]
                    };
                    return Err(
                        Error::new(Rule::AdaptorHiddenReused, "upper ids of transform")
                            .at(k)
                            .values(id, by as Index),
                    );
                }
                producer[u] = k as i16;
                if id > max_id {
                    max_id = id;
                }
                i += 1;
            }
            k += 1;
        }
        // Top and bottom ids: distinct, and no top dim is consumed by a transform.
        let mut i = 0;
        while i < self.top.len() {
            let id = self.top.get(i);
            let mut j = i + 1;
            while j < self.top.len() {
                if self.top.get(j) == id {
                    return Err(Error::new(Rule::AdaptorTopBottom, "top ids")
                        .at(j)
                        .values(id, 0));
                }
                j += 1;
            }
            if consumer[id as usize] != NONE {
                return Err(Error::new(Rule::AdaptorTopBottom, "top ids")
                    .at(i)
                    .values(id, 0));
            }
            if id > max_id {
                max_id = id;
            }
            i += 1;
        }
        i = 0;
        while i < self.bottom.len() {
            let id = self.bottom.get(i);
            let mut j = i + 1;
            while j < self.bottom.len() {
                if self.bottom.get(j) == id {
                    return Err(Error::new(Rule::AdaptorTopBottom, "bottom ids")
                        .at(j)
                        .values(id, 0));
                }
                j += 1;
            }
            if id > max_id {
                max_id = id;
            }
            i += 1;
        }
        // Dangling upper dims: produced, never consumed, not top, length > 1, and the transform
        // actually reads them.
        k = 0;
        while k < self.ntransform {
            let t = &self.transforms[k];
            let ignores_upper = matches!(t, Transform::Replicate { .. } | Transform::Insert { .. });
            let lens = t.up_lengths();
            let up = &self.upper_ids[k];
            let mut i = 0;
            while i < up.len() {
                let id = up.get(i);
                if !ignores_upper
                    && consumer[id as usize] == NONE
                    && !contains(&self.top, id)
                    && lens.get(i) > 1
                {
                    return Err(Error::new(Rule::AdaptorDangling, "upper ids of transform")
                        .at(k)
                        .values(id, lens.get(i)));
                }
                i += 1;
            }
            k += 1;
        }
        self.ndim_hidden = (max_id + 1) as usize;
        Ok(())
    }

    /// A single-stage adaptor (CK's `make_single_stage_tensor_adaptor`): bottom = `0..nold`,
    /// transform `j` reads old dims `low_old_top_idss[j]` and produces new top dims
    /// `up_new_top_idss[j]` (labels in `0..nnew`).
    pub const fn single_stage(
        transforms: &[Transform],
        low_old_top_idss: &[&[Index]],
        up_new_top_idss: &[&[Index]],
    ) -> Result<TensorAdaptor, Error> {
        let nold = tri!(count_permutation("lower id lists", low_old_top_idss));
        let nnew = tri!(count_permutation("upper id lists", up_new_top_idss));
        let mut bottom = [0 as Index; MAX_DIMS];
        let mut top = [0 as Index; MAX_DIMS];
        if nold > MAX_DIMS || nnew > MAX_DIMS {
            return Err(Error::new(Rule::CapacityExceeded, "top ids").values(
                if nold > nnew { nold } else { nnew } as Index,
                MAX_DIMS as Index,
            ));
        }
        let mut i = 0;
        while i < nold {
            bottom[i] = i as Index;
            i += 1;
        }
        i = 0;
        while i < nnew {
            top[i] = (nold + i) as Index;
            i += 1;
        }
        let mut ups = [Dims::EMPTY; MAX_TRANSFORMS];
        let n = transforms.len();
        if n > MAX_TRANSFORMS || up_new_top_idss.len() != n {
            return Err(Error::new(Rule::ListLengthMismatch, "upper id lists")
                .values(up_new_top_idss.len() as Index, n as Index));
        }
        let mut k = 0;
        while k < n {
            let mut d = Dims::EMPTY;
            let mut j = 0;
            while j < up_new_top_idss[k].len() {
                d = d.push(up_new_top_idss[k][j] + nold as Index);
                j += 1;
            }
            ups[k] = d;
            k += 1;
        }
        let mut ups_s: [&[Index]; MAX_TRANSFORMS] = [&[]; MAX_TRANSFORMS];
        k = 0;
        while k < n {
            ups_s[k] = ups[k].as_slice();
            k += 1;
        }
        TensorAdaptor::new(
            transforms,
            low_old_top_idss,
            ups_s.split_at(n).0,
            bottom.split_at(nold).0,
            top.split_at(nnew).0,
        )
    }

    /// Number of transforms.
    pub const fn num_transforms(&self) -> usize {
        self.ntransform
    }

    /// Transform `k`.
    pub const fn transform_at(&self, k: usize) -> &Transform {
        assert!(k < self.ntransform);
        &self.transforms[k]
    }

    /// Hidden ids of transform `k`'s lower dims.
    pub const fn lower_ids(&self, k: usize) -> &Dims {
        assert!(k < self.ntransform);
        &self.lower_ids[k]
    }

    /// Hidden ids of transform `k`'s upper dims.
    pub const fn upper_ids(&self, k: usize) -> &Dims {
        assert!(k < self.ntransform);
        &self.upper_ids[k]
    }

    /// Hidden ids of the bottom dims.
    pub const fn bottom_ids(&self) -> &Dims {
        &self.bottom
    }

    /// Hidden ids of the top dims.
    pub const fn top_ids(&self) -> &Dims {
        &self.top
    }

    /// Number of hidden dims (ids `0..ndim_hidden`).
    pub const fn ndim_hidden(&self) -> usize {
        self.ndim_hidden
    }

    /// Number of top dims.
    pub const fn ntop(&self) -> usize {
        self.top.len()
    }

    /// Number of bottom dims.
    pub const fn nbottom(&self) -> usize {
        self.bottom.len()
    }

    /// Length of hidden dim `id`: the up length of the transform producing it, or `None` for a
    /// dim no transform produces (bottom dims).
    pub const fn hidden_length(&self, id: Index) -> Option<Index> {
        let mut k = 0;
        while k < self.ntransform {
            let up = &self.upper_ids[k];
            let mut i = 0;
            while i < up.len() {
                if up.get(i) == id {
                    return Some(self.transforms[k].up_lengths().get(i));
                }
                i += 1;
            }
            k += 1;
        }
        None
    }

    /// Lengths of the top dims (a top dim produced by no transform has length 1... or is a
    /// bottom dim, whose length is unknown: reported as -1).
    pub const fn top_lengths(&self) -> Dims {
        let mut out = Dims::splat(self.top.len(), -1);
        let mut i = 0;
        while i < self.top.len() {
            if let Some(l) = self.hidden_length(self.top.get(i)) {
                out.set(i, l);
            }
            i += 1;
        }
        out
    }

    /// Number of top elements (product of top lengths).
    pub const fn element_size(&self) -> Index {
        self.top_lengths().product()
    }

    /// Evaluates every hidden dim from a top index (hidden dims nobody writes stay 0).
    pub const fn calculate_hidden_index(&self, top: &Dims) -> Hidden {
        assert!(
            top.len() == self.top.len(),
            "top index has the wrong number of dims"
        );
        let mut hid = [0 as Index; MAX_HIDDEN];
        scatter(&mut hid, &self.top, top);
        let mut k = self.ntransform;
        while k > 0 {
            k -= 1;
            let low = self.transforms[k].lower(&gather(&hid, &self.upper_ids[k]));
            scatter(&mut hid, &self.lower_ids[k], &low);
        }
        hid
    }

    /// The bottom index of a top index.
    pub const fn calculate_bottom_index(&self, top: &Dims) -> Dims {
        gather(&self.calculate_hidden_index(top), &self.bottom)
    }

    /// Whether every pad on the path of `hidden` accepts its index (CK's
    /// `is_valid_assuming_top_valid`).
    pub const fn is_valid_hidden(&self, hidden: &Hidden) -> bool {
        let mut k = 0;
        while k < self.ntransform {
            let t = &self.transforms[k];
            if !t.always_valid() && !t.valid(&gather(hidden, &self.upper_ids[k])) {
                return false;
            }
            k += 1;
        }
        true
    }

    /// Propagates per-hidden-dim vector guarantees bottom → top through every transform (spec
    /// §2.2/§10.2): a dim's own guarantee (≠ −1) overrides what its transform propagates.
    /// Returns `(lengths, strides)` for every hidden dim.
    pub const fn propagate_safe_vector(
        &self,
        lengths: &Hidden,
        strides: &Hidden,
    ) -> (Hidden, Hidden) {
        let (mut vl, mut vs) = (*lengths, *strides);
        let mut k = 0;
        while k < self.ntransform {
            let (lo, up) = (&self.lower_ids[k], &self.upper_ids[k]);
            let (ul, us) = self.transforms[k].safe_vector(&gather(&vl, lo), &gather(&vs, lo));
            let mut i = 0;
            while i < up.len() {
                let id = up.get(i) as usize;
                if lengths[id] == -1 {
                    vl[id] = ul.get(i);
                }
                if strides[id] == -1 {
                    vs[id] = us.get(i);
                }
                i += 1;
            }
            k += 1;
        }
        (vl, vs)
    }

    /// CK's `transform_tensor_adaptor`: appends `new_transforms`, transform `j` consuming the
    /// old top dims `low_top_idss[j]` and producing new top dims labelled `up_top_idss[j]`.
    /// The concatenated lower labels must be a permutation of `0..old.ntop()`, the upper labels a
    /// permutation of `0..new_ntop`. Fresh hidden ids are allocated consecutively from
    /// `old.ndim_hidden()`, transform by transform.
    pub const fn transform(
        &self,
        new_transforms: &[Transform],
        low_top_idss: &[&[Index]],
        up_top_idss: &[&[Index]],
    ) -> Result<TensorAdaptor, Error> {
        let n = new_transforms.len();
        if low_top_idss.len() != n || up_top_idss.len() != n {
            return Err(Error::new(
                Rule::ListLengthMismatch,
                "id lists of transform_tensor_adaptor",
            )
            .values(low_top_idss.len() as Index, n as Index));
        }
        let nold = tri!(count_permutation("lower id lists", low_top_idss));
        if nold != self.top.len() {
            return Err(Error::new(Rule::AdaptorIdsNotPermutation, "lower id lists")
                .values(self.top.len() as Index, 0));
        }
        let nnew = tri!(count_permutation("upper id lists", up_top_idss));
        if self.ntransform + n > MAX_TRANSFORMS {
            return Err(Error::new(Rule::CapacityExceeded, "transforms")
                .values((self.ntransform + n) as Index, MAX_TRANSFORMS as Index));
        }
        let mut out = *self;
        let mut next = self.ndim_hidden as Index;
        let mut new_top = Dims::splat(nnew, 0);
        let mut j = 0;
        while j < n {
            let mut lo = Dims::EMPTY;
            let mut i = 0;
            while i < low_top_idss[j].len() {
                lo = lo.push(self.top.get(low_top_idss[j][i] as usize));
                i += 1;
            }
            let mut up = Dims::EMPTY;
            i = 0;
            while i < up_top_idss[j].len() {
                if next as usize >= MAX_HIDDEN {
                    return Err(Error::new(Rule::CapacityExceeded, "hidden dims")
                        .values(next + 1, MAX_HIDDEN as Index));
                }
                up = up.push(next);
                new_top.set(up_top_idss[j][i] as usize, next);
                next += 1;
                i += 1;
            }
            out.transforms[self.ntransform + j] = new_transforms[j];
            out.lower_ids[self.ntransform + j] = lo;
            out.upper_ids[self.ntransform + j] = up;
            j += 1;
        }
        out.ntransform = self.ntransform + n;
        out.top = new_top;
        tri!(out.check());
        Ok(out)
    }

    /// CK's `chain_tensor_adaptors(a0, a1)`: `a1`'s bottom dims are `a0`'s top dims; the result
    /// maps `a1`'s top to `a0`'s bottom.
    pub const fn chain(&self, a1: &TensorAdaptor) -> Result<TensorAdaptor, Error> {
        if self.top.len() != a1.bottom.len() {
            return Err(Error::new(Rule::ChainMismatch, "chain_tensor_adaptors")
                .values(self.top.len() as Index, a1.bottom.len() as Index));
        }
        if self.ntransform + a1.ntransform > MAX_TRANSFORMS {
            return Err(Error::new(Rule::CapacityExceeded, "transforms").values(
                (self.ntransform + a1.ntransform) as Index,
                MAX_TRANSFORMS as Index,
            ));
        }
        // a1's hidden id h maps to: a0's top id if h is a1 bottom i, else h - min_nonbottom + base.
        let mut map = [-1 as Index; MAX_HIDDEN];
        let mut i = 0;
        while i < a1.bottom.len() {
            map[a1.bottom.get(i) as usize] = self.top.get(i);
            i += 1;
        }
        let mut next = self.ndim_hidden as Index;
        let mut h = 0;
        while h < a1.ndim_hidden {
            if map[h] == -1 {
                if next as usize >= MAX_HIDDEN {
                    return Err(Error::new(Rule::CapacityExceeded, "hidden dims")
                        .values(next + 1, MAX_HIDDEN as Index));
                }
                map[h] = next;
                next += 1;
            }
            h += 1;
        }
        let mut out = *self;
        let mut k = 0;
        while k < a1.ntransform {
            out.transforms[self.ntransform + k] = a1.transforms[k];
            out.lower_ids[self.ntransform + k] = remap(&a1.lower_ids[k], &map);
            out.upper_ids[self.ntransform + k] = remap(&a1.upper_ids[k], &map);
            k += 1;
        }
        out.ntransform = self.ntransform + a1.ntransform;
        out.top = remap(&a1.top, &map);
        tri!(out.check());
        Ok(out)
    }
}

const fn remap(ids: &Dims, map: &Hidden) -> Dims {
    let mut out = *ids;
    let mut i = 0;
    while i < ids.len() {
        out.set(i, map[ids.get(i) as usize]);
        i += 1;
    }
    out
}

/// Checks that the concatenated lists are a permutation of `0..count` and returns `count`.
const fn count_permutation(what: &'static str, lists: &[&[Index]]) -> Result<usize, Error> {
    let mut seen = [false; MAX_HIDDEN];
    let mut count = 0usize;
    let mut j = 0;
    while j < lists.len() {
        let mut i = 0;
        while i < lists[j].len() {
            let v = lists[j][i];
            if v < 0 || v as usize >= MAX_HIDDEN || seen[v as usize] {
                return Err(Error::new(Rule::AdaptorIdsNotPermutation, what)
                    .at(j)
                    .values(v, 0));
            }
            seen[v as usize] = true;
            count += 1;
            i += 1;
        }
        j += 1;
    }
    let mut v = 0;
    while v < count {
        if !seen[v] {
            return Err(Error::new(Rule::AdaptorIdsNotPermutation, what).values(count as Index, 0));
        }
        v += 1;
    }
    Ok(count)
}
