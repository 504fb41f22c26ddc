//! What a Hopper TMA copy (`cp.async.bulk.tensor`) moves, and where it puts it.
//!
//! A *tensor map* describes a global tensor of rank `R` (1 to 5): its dimensions, innermost
//! first, in elements; the byte stride of each dimension (the innermost one is the element
//! itself); and a *box* of `box[0] × … × box[R−1]` elements. One copy with coordinates `c`
//! (element units, innermost first; negative or past the end allowed) moves the box whose first
//! element is `c` into shared memory:
//!
//! * the box lands densely, innermost dimension fastest: box element `e` at byte
//!   `((e[R−1]·box[R−2] + …)·box[0] + e[0]) · size_of::<T>()` of the destination;
//! * elements outside the tensor (any coordinate `< 0` or `≥ dims`) are written as zeros — the
//!   copy never reads outside the tensor's footprint;
//! * with [`SwizzleMode::B128`], that byte offset goes through [`Swizzle::WGMMA_128B`] (the
//!   16-byte chunk ^= the 128-byte row mod 8): exactly the layout a 128-byte swizzled wgmma
//!   operand is read in, on a destination aligned to 1024 bytes;
//! * the copy counts its full box (zero-filled elements included) as bytes transferred on the
//!   mbarrier it signals.
//!
//! Worked example: a `[rows = 300, cols = 64]` bf16 matrix as rank 2 (`dims = [64, 300]`,
//! `strides = [2, 128]`), box `[64, 128]` (128 rows of 128 bytes), 128-byte swizzle. The copy at
//! `[0, 256]` moves rows 256..384: rows 256..300 from the tensor, rows 300..384 as zeros, 16 KiB
//! in all. Element (row 259, col 10) is box element `[10, 3]`: dense byte `3·128 + 20 = 404`,
//! chunk `404 / 16 = 25` → row 3, chunk 1; swizzled chunk `1 ^ 3 = 2`, so it lands at byte
//! `3·128 + 2·16 + 4 = 420`.
//!
//! ```
//! use ck_core::tma::TmaGeometry;
//! use ck_core::wgmma::SwizzleMode;
//! let g = TmaGeometry::<2>::new([64, 300], [2, 128], [64, 128], 2, SwizzleMode::B128).unwrap();
//! assert_eq!(g.box_bytes(), 16384);
//! assert_eq!(g.shared_byte([10, 3]), 420);
//! assert_eq!(g.global_byte([0, 256], [10, 3]), Some(259 * 128 + 20));
//! assert_eq!(g.global_byte([0, 256], [10, 44]), None); // row 300: zero fill
//! ```

use crate::swizzle::Swizzle;
use crate::wgmma::SwizzleMode;

/// Why a tensor map cannot be made (the host turns it into `error[tensor-map]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaError {
    /// The rank is not 1 to 5.
    Rank(usize),
    /// A dimension (index, length) is 0 or above 2³².
    Dim(usize, u64),
    /// A stride (dimension, bytes) of a dimension after the first is not a multiple of 16
    /// bytes, or ≥ 2⁴⁰.
    Stride(usize, u64),
    /// The innermost stride (bytes) is not the element size (bytes): TMA tensors are dense in
    /// dimension 0.
    InnerStride(u64, u32),
    /// A box dimension (index, length) is 0 or above 256.
    BoxDim(usize, u32),
    /// The box's innermost extent (bytes) is not a multiple of 16 bytes.
    BoxInner(u32),
    /// With the 128-byte swizzle, the box's innermost extent (bytes) is more than 128 bytes.
    SwizzleSpan(u32),
    /// The element size is not 1, 2 or 4 bytes.
    ElemBytes(u32),
}

impl core::fmt::Display for TmaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TmaError::Rank(r) => write!(f, "a tensor map has rank 1 to 5, not {r}"),
            TmaError::Dim(dim, len) => write!(
                f,
                "dimension {dim} has {len} elements; a tensor map's dimensions are 1 to 2^32"
            ),
            TmaError::Stride(dim, bytes) => write!(
                f,
                "the stride of dimension {dim} is {bytes} bytes; TMA strides are multiples of 16 bytes below 2^40 (pad the rows)"
            ),
            TmaError::InnerStride(bytes, elem_bytes) => write!(
                f,
                "the innermost stride is {bytes} bytes but the element has {elem_bytes}; dimension 0 must be contiguous"
            ),
            TmaError::BoxDim(dim, len) => write!(
                f,
                "box dimension {dim} is {len}; a box dimension is 1 to 256 elements"
            ),
            TmaError::BoxInner(bytes) => write!(
                f,
                "the box's innermost extent is {bytes} bytes; it must be a multiple of 16 bytes"
            ),
            TmaError::SwizzleSpan(bytes) => write!(
                f,
                "the box's innermost extent is {bytes} bytes; with the 128-byte swizzle it must be at most 128 (split the box into 128-byte panels)"
            ),
            TmaError::ElemBytes(b) => {
                write!(f, "elements of {b} bytes; TMA copies elements of 1, 2 or 4 bytes")
            }
        }
    }
}

/// A checked tensor map: the tensor's shape and strides, the box, the swizzle. See the module
/// documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaGeometry<const R: usize> {
    dims: [u64; R],
    strides: [u64; R],
    box_dims: [u32; R],
    elem_bytes: u32,
    swizzle: SwizzleMode,
}

impl<const R: usize> TmaGeometry<R> {
    /// `dims` (elements) and `strides` (bytes; `strides[0]` is the element size) innermost
    /// first, a box of `box_dims` elements, elements of `elem_bytes` bytes, and the swizzle of
    /// the shared destination; every limit of the hardware checked.
    pub const fn new(
        dims: [u64; R],
        strides: [u64; R],
        box_dims: [u32; R],
        elem_bytes: u32,
        swizzle: SwizzleMode,
    ) -> Result<TmaGeometry<R>, TmaError> {
        if R == 0 || R > 5 {
            return Err(TmaError::Rank(R));
        }
        if !matches!(elem_bytes, 1 | 2 | 4) {
            return Err(TmaError::ElemBytes(elem_bytes));
        }
        if strides[0] != elem_bytes as u64 {
            return Err(TmaError::InnerStride(strides[0], elem_bytes));
        }
        let mut d = 0;
        while d < R {
            if dims[d] == 0 || dims[d] > 1 << 32 {
                return Err(TmaError::Dim(d, dims[d]));
            }
            if d > 0 && (!strides[d].is_multiple_of(16) || strides[d] >= 1 << 40) {
                return Err(TmaError::Stride(d, strides[d]));
            }
            if box_dims[d] == 0 || box_dims[d] > 256 {
                return Err(TmaError::BoxDim(d, box_dims[d]));
            }
            d += 1;
        }
        let inner = box_dims[0] * elem_bytes;
        if !inner.is_multiple_of(16) {
            return Err(TmaError::BoxInner(inner));
        }
        if matches!(swizzle, SwizzleMode::B128) && inner > 128 {
            return Err(TmaError::SwizzleSpan(inner));
        }
        Ok(TmaGeometry {
            dims,
            strides,
            box_dims,
            elem_bytes,
            swizzle,
        })
    }

    /// Dimensions in elements, innermost first.
    pub const fn dims(&self) -> [u64; R] {
        self.dims
    }

    /// Byte strides, innermost first (`strides()[0]` is the element size).
    pub const fn strides(&self) -> [u64; R] {
        self.strides
    }

    /// The box in elements, innermost first.
    pub const fn box_dims(&self) -> [u32; R] {
        self.box_dims
    }

    /// Bytes of one element.
    pub const fn elem_bytes(&self) -> u32 {
        self.elem_bytes
    }

    /// The shared destination's swizzle.
    pub const fn swizzle(&self) -> SwizzleMode {
        self.swizzle
    }

    /// Elements in the box.
    pub const fn box_elems(&self) -> u32 {
        let mut n = 1;
        let mut d = 0;
        while d < R {
            n *= self.box_dims[d];
            d += 1;
        }
        n
    }

    /// Bytes one copy writes to shared memory and counts on its mbarrier.
    pub const fn box_bytes(&self) -> u32 {
        self.box_elems() * self.elem_bytes
    }

    /// The alignment the shared destination needs: 1024 bytes under the 128-byte swizzle (so
    /// the swizzle of the address is the swizzle of the offset), else 128.
    pub const fn shared_alignment(&self) -> u32 {
        match self.swizzle {
            SwizzleMode::B128 => 1024,
            SwizzleMode::None => 128,
        }
    }

    /// The smallest buffer (in bytes) that holds every element of the tensor.
    pub const fn footprint_bytes(&self) -> u64 {
        let mut end = self.elem_bytes as u64;
        let mut d = 0;
        while d < R {
            end += (self.dims[d] - 1) * self.strides[d];
            d += 1;
        }
        end
    }

    /// Byte offset, from the destination, at which box element `within` (innermost first)
    /// lands.
    pub const fn shared_byte(&self, within: [u32; R]) -> u32 {
        let mut dense = 0;
        let mut d = R;
        while d > 0 {
            d -= 1;
            dense = dense * self.box_dims[d] + within[d];
        }
        let dense = dense * self.elem_bytes;
        match self.swizzle {
            SwizzleMode::B128 => Swizzle::WGMMA_128B.apply(dense),
            SwizzleMode::None => dense,
        }
    }

    /// Byte offset in the tensor of box element `within` of the copy at `coords`, or `None`
    /// where that element lies outside the tensor (it is written as zero).
    pub const fn global_byte(&self, coords: [i32; R], within: [u32; R]) -> Option<u64> {
        let mut at = 0u64;
        let mut d = 0;
        while d < R {
            let c = coords[d] as i64 + within[d] as i64;
            if c < 0 || c >= self.dims[d] as i64 {
                return None;
            }
            at += c as u64 * self.strides[d];
            d += 1;
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of a box lands once, at the dense offset permuted within its 1024-byte
    /// atom, and reads the element the coordinates name (row-major arithmetic written out).
    #[test]
    fn a_swizzled_box_is_a_permutation_of_the_dense_box() {
        let g = TmaGeometry::<3>::new(
            [64, 200, 3],
            [2, 128, 200 * 128],
            [64, 128, 1],
            2,
            SwizzleMode::B128,
        )
        .unwrap();
        let mut seen = vec![false; g.box_bytes() as usize / 2];
        for row in 0..128u32 {
            for col in 0..64u32 {
                let at = g.shared_byte([col, row, 0]);
                assert_eq!(at / 1024, (row * 128 + col * 2) / 1024, "stays in its atom");
                assert_eq!(at % 16, col * 2 % 16, "moves whole 16-byte chunks");
                assert_eq!(at / 128, row, "stays in its 128-byte row");
                assert!(!seen[at as usize / 2]);
                seen[at as usize / 2] = true;
                let global = g.global_byte([0, 150, 2], [col, row, 0]);
                let expect =
                    (150 + row < 200).then(|| (2 * 200 + 150 + row) as u64 * 128 + col as u64 * 2);
                assert_eq!(global, expect);
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn negative_coordinates_are_zero_fill() {
        let g = TmaGeometry::<2>::new([16, 4], [4, 64], [8, 2], 4, SwizzleMode::None).unwrap();
        assert_eq!(g.global_byte([-4, 0], [3, 0]), None);
        assert_eq!(g.global_byte([-4, 0], [4, 1]), Some(64));
        assert_eq!(g.shared_byte([4, 1]), (8 + 4) * 4);
        assert_eq!(g.footprint_bytes(), 3 * 64 + 15 * 4 + 4);
    }

    #[test]
    fn hardware_limits_are_errors() {
        let ok = |dims, strides, bx, e, s| TmaGeometry::<2>::new(dims, strides, bx, e, s);
        assert_eq!(
            ok([64, 8], [2, 100], [64, 8], 2, SwizzleMode::None),
            Err(TmaError::Stride(1, 100))
        );
        assert_eq!(
            ok([64, 8], [2, 128], [128, 8], 2, SwizzleMode::B128),
            Err(TmaError::SwizzleSpan(256))
        );
        assert_eq!(
            ok([64, 8], [2, 128], [4, 8], 2, SwizzleMode::None),
            Err(TmaError::BoxInner(8))
        );
        assert_eq!(
            ok([64, 0], [2, 128], [64, 8], 2, SwizzleMode::None),
            Err(TmaError::Dim(1, 0))
        );
        assert_eq!(
            ok([64, 8], [2, 128], [64, 257], 2, SwizzleMode::None),
            Err(TmaError::BoxDim(1, 257))
        );
        assert_eq!(
            ok([64, 8], [4, 128], [64, 8], 2, SwizzleMode::None),
            Err(TmaError::InnerStride(4, 2))
        );
        assert_eq!(
            TmaGeometry::<6>::new(
                [1; 6],
                [4, 16, 16, 16, 16, 16],
                [1; 6],
                4,
                SwizzleMode::None
            ),
            Err(TmaError::Rank(6))
        );
    }
}
