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
//!
//! A whole window moves the same way with [`TileWindow::async_load_into`] (CK Tile's
//! `async_load_tile`): each of the thread's 16-byte vectors goes to the same place of a
//! shared-memory window of the same distribution, which the thread later reads back with a
//! plain `load` — its own bytes, so no barrier, only `cp_async_wait`. With a row-major stage the
//! vectors of a warp land side by side (lane `l` at bytes `16·l ..`): no bank conflict on
//! either side. A kernel loads the next row tile while it works on this one, with no register
//! held for it:
//!
//! ```text
//! stage 0 ← tile 0; commit
//! for each tile t:   wait(0); v ← load(stage t % 2); stage (t+1) % 2 ← tile t+1; commit; work(v)
//! ```

use super::{Plan, TileWindow, View, View2};
use crate::device::{cp_async_16_unchecked, Element, Global, SharedArray};
use crate::{Index, TileDistribution};

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

impl<D, T, const VEC: usize> TileWindow<D, View2<Global<T>, T, VEC>>
where
    D: TileDistribution<X = [Index; 2]>,
    T: Element,
{
    /// `async_load_tile`: issues this thread's elements of the window as 16-byte `cp.async`
    /// copies to the same places of `stage` (a window of `D` over a shared-memory view; its
    /// origin the tile's place there). Padding (vectors outside the view) lands as zeros, as a
    /// window's `load` reads it. The bytes land at the `cp_async_wait` that retires the group;
    /// then `stage.load()` gives what `self.load()` would have, each thread reading only what it
    /// copied.
    ///
    /// The distribution's vectors must be whole 16-byte copies (checked at compile time). Where
    /// the view's rows are not whole vectors (or the origin is not on one) the thread copies
    /// element by element instead, synchronously ([`View2::copy_16`]).
    #[inline(always)]
    #[track_caller]
    pub fn async_load_into<const N: usize, const SVEC: usize>(
        &self,
        stage: &TileWindow<D, View2<SharedArray<T, N>, T, SVEC>>,
    ) {
        let plan = const {
            let plan = Plan::<D, View2<Global<T>, T, VEC>, T>::PLAN;
            assert!(
                (plan.scalar_per_vector as usize * T::BYTES as usize).is_multiple_of(16),
                "async_load_into: the distribution's vectors (with the view's VEC) are not whole 16-byte copies; give the view a VEC of 16 bytes (8 bf16, 4 f32) or more, or load the window with `load`"
            );
            plan
        };
        let chunk = (16 / T::BYTES) as Index;
        let vdim = plan.vector_dim_y;
        let [rows, cols] = D::X_LENGTHS;
        let [r0, c0] = stage.origin;
        assert!(
            stage.view.vector_ok(chunk) && c0 % chunk == 0,
            "async_load_into: the stage's rows are not whole 16-byte vectors; make its columns, row stride and origin column multiples of 16 bytes"
        );
        assert!(
            r0 >= 0 && c0 >= 0 && r0 + rows <= stage.view.rows && c0 + cols <= stage.view.cols,
            "async_load_into: the window reaches past the stage; size the stage's view for the tile at this origin (rows × columns of the distribution)"
        );
        let vector = self.view.vector_ok(chunk) && self.origin[1] % chunk == 0;
        let smem = stage.view.buffer.memory();
        D::for_each_y(|y, _| {
            if y.as_ref()[vdim] % chunk != 0 {
                return;
            }
            let [r, c] = D::x_index(self.p, y);
            let to = stage.view.offset(&[r0 + r, c0 + c]) as u32;
            let from = [(self.origin[0] + r) as u32, (self.origin[1] + c) as u32];
            if vector {
                self.view.copy_16_async(smem, to, from);
            } else {
                self.view.copy_16(smem, to, from);
            }
        });
    }
}
