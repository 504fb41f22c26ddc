//! Tensor descriptors: adaptors with one bottom dim, the linear element offset (spec §2.2).
//!
//! A descriptor also carries the *element space size* (how many elements the memory behind it
//! must hold) and per-hidden-dim *guaranteed vector length/stride* (−1 = none), from which
//! [`TensorDescriptor::top_safe_vector`] derives how wide a vector access along each top dim may be.
//!
//! ```
//! use ck_core::{Dims, Transform, TensorDescriptor};
//! // 5×7 rows with stride 8, last dim guaranteed 4-wide contiguous; N right-padded to 8.
//! let d0 = TensorDescriptor::naive(&[5, 7], &[8, 1], 4, 1).unwrap();
//! assert_eq!(d0.element_space_size(), 39);
//! let d1 = d0.transform(
//!     &[Transform::pass_through(5).unwrap(), Transform::right_pad(7, 1).unwrap()],
//!     &[&[0], &[1]],
//!     &[&[0], &[1]],
//! ).unwrap();
//! assert_eq!(d1.lengths().as_slice(), &[5, 8]);
//! let (len, stride) = d1.top_safe_vector();
//! assert_eq!((len.as_slice(), stride.as_slice()), (&[-1, 4][..], &[-1, 1][..]));
//! assert_eq!(d1.calculate_offset(&Dims::from_slice(&[2, 5])), 21);
//! ```

use crate::adaptor::{Hidden, TensorAdaptor, MAX_HIDDEN};
use crate::coordinate::Coordinate;
use crate::dims::{Dims, MAX_DIMS};
use crate::error::{Error, Rule};
use crate::transform::{tri, Transform};
use crate::Index;

/// An adaptor from a top multi-index to one linear offset, plus memory metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorDescriptor {
    adaptor: TensorAdaptor,
    element_space_size: Index,
    guaranteed_lengths: Hidden,
    guaranteed_strides: Hidden,
}

const fn top_ids(first: Index, n: usize) -> Dims {
    let mut d = Dims::EMPTY;
    let mut i = 0;
    while i < n {
        d = d.push(first + i as Index);
        i += 1;
    }
    d
}

const fn space_size(lengths: &[Index], strides: &[Index]) -> Result<Index, Error> {
    let mut s: i64 = 1;
    let mut i = 0;
    while i < lengths.len() {
        s += (lengths[i] as i64 - 1) * strides[i] as i64;
        i += 1;
    }
    if s > Index::MAX as i64 || s < 1 {
        return Err(Error::new(Rule::IndexOverflow, "element space size").values(Index::MAX, 0));
    }
    Ok(s as Index)
}

impl TensorDescriptor {
    /// A descriptor over an adaptor with exactly one bottom dim.
    pub const fn from_adaptor(
        adaptor: TensorAdaptor,
        element_space_size: Index,
    ) -> Result<TensorDescriptor, Error> {
        if adaptor.nbottom() != 1 {
            return Err(Error::new(Rule::DescriptorBottom, "descriptor")
                .values(adaptor.nbottom() as Index, 0));
        }
        Ok(TensorDescriptor {
            adaptor,
            element_space_size,
            guaranteed_lengths: [-1; MAX_HIDDEN],
            guaranteed_strides: [-1; MAX_HIDDEN],
        })
    }

    /// `make_naive_tensor_descriptor(lengths, strides, gvl, gvs)`: one `embed`; the vector
    /// guarantee (−1 = none) applies to the last dim only.
    pub const fn naive(
        lengths: &[Index],
        strides: &[Index],
        guaranteed_vector_length: Index,
        guaranteed_vector_stride: Index,
    ) -> Result<TensorDescriptor, Error> {
        let embed = tri!(Transform::embed(lengths, strides));
        let n = lengths.len();
        let up = top_ids(1, n);
        let adaptor = tri!(TensorAdaptor::new(
            &[embed],
            &[&[0]],
            &[up.as_slice()],
            &[0],
            up.as_slice()
        ));
        let mut d = tri!(TensorDescriptor::from_adaptor(
            adaptor,
            tri!(space_size(lengths, strides))
        ));
        d.guaranteed_lengths[n] = guaranteed_vector_length;
        d.guaranteed_strides[n] = guaranteed_vector_stride;
        Ok(d)
    }

    /// `make_naive_tensor_descriptor_packed(lengths, gvl)`: row-major, contiguous last dim.
    pub const fn naive_packed(
        lengths: &[Index],
        guaranteed_vector_length: Index,
    ) -> Result<TensorDescriptor, Error> {
        let unmerge = tri!(Transform::unmerge(lengths));
        let n = lengths.len();
        let up = top_ids(1, n);
        let adaptor = tri!(TensorAdaptor::new(
            &[unmerge],
            &[&[0]],
            &[up.as_slice()],
            &[0],
            up.as_slice()
        ));
        let mut d = tri!(TensorDescriptor::from_adaptor(
            adaptor,
            unmerge.up_lengths().product()
        ));
        d.guaranteed_lengths[n] = guaranteed_vector_length;
        d.guaranteed_strides[n] = 1;
        Ok(d)
    }

    /// `offset(space, os)` as a first stage, guarantee attached to its upper dim.
    const fn offset_stage(
        space: Index,
        os: Index,
        gvl: Index,
        gvs: Index,
    ) -> Result<TensorDescriptor, Error> {
        let off = tri!(Transform::offset(space, os));
        let adaptor = tri!(TensorAdaptor::new(&[off], &[&[0]], &[&[1]], &[0], &[1]));
        let mut d = tri!(TensorDescriptor::from_adaptor(adaptor, space));
        d.guaranteed_lengths[1] = gvl;
        d.guaranteed_strides[1] = gvs;
        Ok(d)
    }

    /// `make_naive_tensor_descriptor_with_offset`: every offset is shifted by `os` (not counted
    /// in the element space size). CK quirk kept: `embed` has no safe-vector rule, so this view
    /// loses the vector guarantee entirely.
    pub const fn naive_with_offset(
        lengths: &[Index],
        strides: &[Index],
        os: Index,
        guaranteed_vector_length: Index,
        guaranteed_vector_stride: Index,
    ) -> Result<TensorDescriptor, Error> {
        let embed = tri!(Transform::embed(lengths, strides));
        let space = tri!(space_size(lengths, strides));
        let d0 = tri!(TensorDescriptor::offset_stage(
            space,
            os,
            guaranteed_vector_length,
            guaranteed_vector_stride
        ));
        let up = top_ids(0, lengths.len());
        d0.transform(&[embed], &[&[0]], &[up.as_slice()])
    }

    /// `make_naive_tensor_descriptor_packed_with_offset`: packed, shifted by `os`; keeps the
    /// guarantee (unmerge propagates `gcd(gvl, last length)` with stride 1).
    pub const fn packed_with_offset(
        lengths: &[Index],
        os: Index,
        guaranteed_vector_length: Index,
    ) -> Result<TensorDescriptor, Error> {
        let unmerge = tri!(Transform::unmerge(lengths));
        let d0 = tri!(TensorDescriptor::offset_stage(
            unmerge.up_lengths().product(),
            os,
            guaranteed_vector_length,
            1
        ));
        let up = top_ids(0, lengths.len());
        d0.transform(&[unmerge], &[&[0]], &[up.as_slice()])
    }

    /// `make_naive_tensor_descriptor_aligned(lengths, align)`: the last dim is contiguous and the
    /// second-last stride is `ceil(len_last / align) · align`; earlier dims are packed on top.
    pub const fn naive_aligned(lengths: &[Index], align: Index) -> Result<TensorDescriptor, Error> {
        let n = lengths.len();
        if n == 0 {
            return Err(Error::new(Rule::EmptyList, "lengths"));
        }
        if n > MAX_DIMS {
            return Err(
                Error::new(Rule::CapacityExceeded, "lengths").values(n as Index, MAX_DIMS as Index)
            );
        }
        if align < 1 {
            return Err(Error::new(Rule::LengthNotPositive, "align").values(align, 0));
        }
        let mut strides = [0 as Index; MAX_DIMS];
        strides[n - 1] = 1;
        if n >= 2 {
            // In 64 bits (saturating), so that a stride past `Index::MAX` is an error, not an
            // overflow.
            let last = lengths[n - 1] as i64;
            let mut s = (last + align as i64 - 1) / align as i64 * align as i64;
            let mut i = n - 1;
            loop {
                if s > Index::MAX as i64 || s < Index::MIN as i64 {
                    return Err(Error::new(Rule::IndexOverflow, "strides").values(Index::MAX, 0));
                }
                strides[i - 1] = s as Index;
                i -= 1;
                if i == 0 {
                    break;
                }
                s = s.saturating_mul(lengths[i] as i64);
            }
        }
        TensorDescriptor::naive(lengths, strides.split_at(n).0, -1, -1)
    }

    /// CK's `transform_tensor_descriptor`: [`TensorAdaptor::transform`] keeping the element space
    /// size and the guarantees (new hidden dims get none).
    pub const fn transform(
        &self,
        new_transforms: &[Transform],
        low_top_idss: &[&[Index]],
        up_top_idss: &[&[Index]],
    ) -> Result<TensorDescriptor, Error> {
        let adaptor = tri!(self
            .adaptor
            .transform(new_transforms, low_top_idss, up_top_idss));
        Ok(TensorDescriptor { adaptor, ..*self })
    }

    /// The underlying adaptor.
    pub const fn adaptor(&self) -> &TensorAdaptor {
        &self.adaptor
    }

    /// Number of elements the memory behind the descriptor must hold.
    pub const fn element_space_size(&self) -> Index {
        self.element_space_size
    }

    /// Lengths of the top dims.
    pub const fn lengths(&self) -> Dims {
        self.adaptor.top_lengths()
    }

    /// Linear offset of a top index (`calculate_offset`).
    pub const fn calculate_offset(&self, top: &Dims) -> Index {
        self.adaptor.calculate_bottom_index(top).get(0)
    }

    /// Linear offset of a coordinate.
    pub const fn offset(&self, coord: &Coordinate) -> Index {
        coord.hidden()[self.adaptor.bottom_ids().get(0) as usize]
    }

    /// Per-hidden-dim guarantees `(lengths, strides)` after propagation through every transform.
    pub const fn hidden_safe_vector(&self) -> (Hidden, Hidden) {
        self.adaptor
            .propagate_safe_vector(&self.guaranteed_lengths, &self.guaranteed_strides)
    }

    /// `(vector lengths, vector strides)` guaranteed along each top dim (−1 = none).
    pub const fn top_safe_vector(&self) -> (Dims, Dims) {
        let (vl, vs) = self.hidden_safe_vector();
        let top = self.adaptor.top_ids();
        let mut l = Dims::splat(top.len(), -1);
        let mut s = Dims::splat(top.len(), -1);
        let mut i = 0;
        while i < top.len() {
            l.set(i, vl[top.get(i) as usize]);
            s.set(i, vs[top.get(i) as usize]);
            i += 1;
        }
        (l, s)
    }
}
