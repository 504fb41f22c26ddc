//! A [`View2`] over global memory as the source of `cp.async` copies into shared memory.
//!
//! The view's footprint was checked once where it was made, so a copy whose 16 bytes lie in the
//! view's `rows × cols` needs no bounds check against the buffer: the per-copy test is the
//! view's own (row and column), which a kernel needs anyway for its edges.
//!
//! ```text
//! View2::new(a, m, k, k)       rows m, cols k, row stride k (checked: (m − 1)·k + k ≤ len)
//! copy_16_async(s, at, [r, c]) valid ⇔ r < m ∧ c + 8 ≤ k    (bf16: 8 elements = 16 bytes)
//!                              valid → 16 bytes from element r·k + c
//!                              else  → 16 zero bytes (padding, like a window's invalid reads)
//! ```

use super::View2;
use crate::device::{cp_async_16_unchecked, Element, Global, SharedArray};

impl<T: Element, const VEC: usize> View2<Global<T>, T, VEC> {
    /// Issues a `cp.async` of the 16 bytes at `[row, col]` (a vector of `16 / size_of::<T>()`
    /// elements along the row) into element `dst_elem` of `dst`. A vector that is not wholly
    /// inside the view is padding: it writes 16 zero bytes and reads nothing. The bytes land at
    /// the `cp_async_wait` that retires the copy's group.
    #[inline(always)]
    #[track_caller]
    pub fn copy_16_async<const N: usize>(
        &self,
        dst: &SharedArray<T, N>,
        dst_elem: u32,
        [row, col]: [u32; 2],
    ) {
        let elems = 16 / T::BYTES;
        let (rows, cols) = (self.rows as u32, self.cols as u32);
        let valid = row < rows && col < cols && cols - col >= elems;
        let at = if valid {
            row * self.row_stride as u32 + col
        } else {
            0
        };
        // SAFETY: a valid copy reads elements `at..at + elems` with `row < rows` and
        // `col + elems ≤ cols`, so `at + elems ≤ (rows − 1)·row_stride + cols`, which
        // `View2::with_invalid_value` checked fits in the memory (the offset fits in u32 as the
        // memory's length does).
        unsafe { cp_async_16_unchecked(dst, dst_elem, self.buffer.memory(), at, valid) }
    }
}
