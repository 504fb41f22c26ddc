//! [`SharedArray`]: a block's shared-memory array, the part both backends share (its place and
//! the views of its bytes); each backend adds the accesses (`load`, `store`, atomics, copies).

use super::element::Element;
use core::marker::PhantomData;

/// A block's static shared-memory array of `N` elements of `T`, at a byte offset fixed by
/// `#[tile_kernel]` (which sums every `shared!` of a kernel into its shared-memory size).
#[derive(Clone, Copy)]
pub struct SharedArray<T, const N: usize> {
    /// Byte offset of the array in the block's shared memory.
    pub(super) offset: u32,
    _t: PhantomData<T>,
}

impl<T, const N: usize> SharedArray<T, N> {
    /// The array at byte `offset` of the block's shared memory (emitted by `#[tile_kernel]`).
    #[doc(hidden)]
    pub const fn at_offset(offset: usize) -> Self {
        SharedArray {
            offset: offset as u32,
            _t: PhantomData,
        }
    }
}

impl<T: Element, const N: usize> SharedArray<T, N> {
    /// The same shared bytes as `M` elements of `U`, for a later phase of a kernel (a GEMM's
    /// stage buffers reused to stage C). `M` elements of `U` must fit in the array and its
    /// start must be aligned for `U`: compile-time checks.
    pub const fn reinterpret<U: Element, const M: usize>(&self) -> SharedArray<U, M> {
        const {
            assert!(
                M * U::BYTES as usize <= N * T::BYTES as usize,
                "reinterpret: the new array is larger than the shared memory it reuses"
            );
        }
        assert!(
            self.offset.is_multiple_of(U::BYTES),
            "reinterpret: the shared array's start is not aligned for the new element type"
        );
        SharedArray::at_offset(self.offset as usize)
    }

    /// `M` elements of `U` from byte `AT` of the array: one part of a region several buffers
    /// share (e.g. the one 1 KiB alignment pad of a GEMM's rings and C staging). The part must
    /// lie inside the array and start aligned for `U`: compile-time checks.
    pub const fn part<U: Element, const AT: usize, const M: usize>(&self) -> SharedArray<U, M> {
        const {
            assert!(
                AT + M * U::BYTES as usize <= N * T::BYTES as usize,
                "part: the part reaches past the end of the shared array"
            );
            assert!(
                AT.is_multiple_of(U::BYTES as usize),
                "part: the part's start is not aligned for its element type"
            );
        }
        assert!(
            self.offset.is_multiple_of(U::BYTES),
            "part: the shared array's start is not aligned for the part's element type"
        );
        SharedArray::at_offset(self.offset as usize + AT)
    }

    /// Number of elements.
    pub const fn len(&self) -> u32 {
        N as u32
    }

    /// True if `N == 0`.
    pub const fn is_empty(&self) -> bool {
        N == 0
    }
}
