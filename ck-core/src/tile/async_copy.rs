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
//! copy_16(s, at, [r, c])       the same 16 bytes element by element, synchronously: element
//!                              r·k + c + e if r < m ∧ c + e < k, else zero — for any k
//! ```
//!
//! `cp.async` moves whole, 16-byte-aligned vectors, so `copy_16_async` needs rows of whole
//! vectors (`k` and the row stride multiples of 8 bf16): a partial last vector would be
//! padding, its elements lost. The emulator faults on such a view (`misaligned-access`); a
//! kernel that takes any shape copies those rows with `copy_16` instead (a branch per problem,
//! not per copy, keeps the vector path as it is).

use super::{View, View2};
use crate::device::{cp_async_16_unchecked, Element, Global, SharedArray};
use crate::Index;

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
        #[cfg(not(target_arch = "nvptx64"))]
        if !self.vector_ok(elems as Index) {
            crate::device::copy_16_async_on_partial_vectors(cols, self.row_stride as u32, elems);
        }
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

    /// The 16 bytes at `[row, col]` (as [`View2::copy_16_async`] addresses them) copied element
    /// by element into element `dst_elem` of `dst`: each element inside the view is read, each
    /// outside written as zero; they have landed when the call returns. For views whose rows
    /// are not whole vectors, where `copy_16_async` cannot go.
    #[inline(always)]
    #[track_caller]
    pub fn copy_16<const N: usize>(
        &self,
        dst: &SharedArray<T, N>,
        dst_elem: u32,
        [row, col]: [u32; 2],
    ) {
        let elems = 16 / T::BYTES;
        let (rows, cols) = (self.rows as u32, self.cols as u32);
        let row_start = row.wrapping_mul(self.row_stride as u32);
        for e in 0..elems {
            let valid = row < rows && col < cols && cols - col > e;
            // SAFETY: a valid element has `row < rows` and `col + e < cols`, so its offset is
            // below `(rows − 1)·row_stride + cols`, which `View2::with_invalid_value` checked
            // fits in the memory.
            let [v] = unsafe {
                self.buffer
                    .get_in_bounds::<1>(row_start.wrapping_add(col.wrapping_add(e)), valid)
            };
            dst.store(dst_elem.wrapping_add(e), v);
        }
    }
}
