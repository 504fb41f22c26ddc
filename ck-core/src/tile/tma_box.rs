//! [`TmaBoxView`]: a tile staged in shared memory the way a TMA copy with the 128-byte swizzle
//! lays out its boxes, so that a tile window can write (or read) it and one
//! [`TmaMut::store_from_shared`](crate::device::TmaMut::store_from_shared) per box moves it to
//! global memory.
//!
//! The tile's columns are cut into panels one swizzle row wide (`W = 128 / size_of::<T>()`
//! elements: 64 bf16, 32 f32) and its rows into boxes of `box_rows`; each box is `box_rows`
//! rows of 128 bytes, boxes one after another (row of boxes major), and inside a box the
//! 16-byte chunk `j` of row `r` lies at chunk `j ^ (r % 8)`:
//!
//! ```text
//! byte(r, c) = ((r / box_rows) · (cols / W) + c / W) · box_rows · 128     the box
//!            + (r % box_rows) · 128                                      its row
//!            + (((c % W) · size / 16) ^ (r % 8)) · 16 + (c % W) · size % 16
//! ```
//!
//! Worked example, bf16 (`W = 64`), 128 × 256 tile in boxes of 64 rows: element (9, 70) is in
//! box (0, 1) at byte 1 · 64 · 128 = 8192, row 9 adds 1152, its chunk 140 / 16 = 8 … within the
//! panel column 6 → chunk 0 of the row, swizzled to 0 ^ 1 = 1 (+16), and 12 bytes into it:
//! byte 9372, element 4686. A warp writing the wgmma accumulator layout (8 rows × 4 lanes,
//! 4 bytes each, the same columns) then hits 8 distinct chunks of 4 banks: no conflicts.
//!
//! Runs of consecutive elements a distribution accesses together must stay inside one 16-byte
//! chunk (the view's vector length is one chunk).

use super::View;
use crate::device::buffer_view::BufferView;
use crate::device::{Element, SharedArray};
use crate::Index;

/// Bytes of one swizzle row (and of one box row).
const ROW_BYTES: u32 = 128;

/// A `rows × cols` tile of `T` in `smem` from element `start`, laid out as TMA boxes of
/// `box_rows` rows with the 128-byte swizzle (see the module documentation). `start` must be
/// 1024-byte aligned in shared memory (the swizzle XORs address bits), `cols` a multiple of
/// the panel width and `rows` of `box_rows`; the tile must fit in `smem` — all checked where
/// the view is made.
pub struct TmaBoxView<T, const N: usize> {
    buffer: BufferView<SharedArray<T, N>, T>,
    start: u32,
    rows: u32,
    cols: u32,
    box_rows: u32,
}

impl<T: Element, const N: usize> TmaBoxView<T, N> {
    /// Elements of `T` in one panel row.
    pub const PANEL: u32 = ROW_BYTES / T::BYTES;

    /// The view. A kernel error where it is made (the emulator's `misaligned-access` naming
    /// the fix, a trap on the GPU): a shape that does not cut into whole boxes, a start off a
    /// 1024-byte boundary (the copy engine's swizzle would place the elements elsewhere); the
    /// emulator's `out-of-bounds` (a trap) where the tile does not fit in `smem`.
    #[inline(always)]
    #[track_caller]
    pub fn new(
        smem: SharedArray<T, N>,
        start: u32,
        (rows, cols): (u32, u32),
        box_rows: u32,
    ) -> Self {
        if box_rows == 0 || !rows.is_multiple_of(box_rows) || !cols.is_multiple_of(Self::PANEL) {
            crate::device::tma_box_view_unfit(format_args!(
                "of {rows} × {cols} in boxes of {box_rows} rows: rows must be a positive multiple of the box rows, and cols a multiple of {} (one 128-byte row of {})",
                Self::PANEL,
                T::NAME
            ));
        }
        if !smem.shared_address(start).is_multiple_of(1024) {
            crate::device::tma_box_view_unfit(format_args!(
                "starting at element {start}, shared byte {}: the boxes must start on a 1024-byte boundary (pad the array by 1 KiB and start at the first aligned element)",
                smem.shared_address(start)
            ));
        }
        let bytes = rows as u64 * cols as u64 * T::BYTES as u64;
        if start as u64 * T::BYTES as u64 + bytes > N as u64 * T::BYTES as u64 {
            crate::device::view_outside_memory(N as u32);
        }
        TmaBoxView {
            buffer: BufferView::new(smem),
            start,
            rows,
            cols,
            box_rows,
        }
    }

    /// The element offset (in `smem`) of the box holding `(row, col)`: where a TMA store of
    /// that box reads from.
    #[inline(always)]
    pub fn box_start(&self, row: u32, col: u32) -> u32 {
        self.start + box_offset::<T>(row, col, (self.cols, self.box_rows))
    }
}

/// Elements from the tile's start to the box holding `(row, col)`.
#[inline(always)]
const fn box_offset<T: Element>(row: u32, col: u32, (cols, box_rows): (u32, u32)) -> u32 {
    let panel = ROW_BYTES / T::BYTES;
    ((row / box_rows) * (cols / panel) + col / panel) * box_rows * panel
}

/// Elements from the tile's start to `(row, col)` (the module documentation's formula).
#[inline(always)]
const fn element_offset<T: Element>(row: u32, col: u32, shape: (u32, u32)) -> u32 {
    let (panel, per_chunk) = (ROW_BYTES / T::BYTES, 16 / T::BYTES);
    let within = col % panel;
    let chunk = (within / per_chunk) ^ (row % 8);
    box_offset::<T>(row, col, shape)
        + (row % shape.1) * panel
        + chunk * per_chunk
        + within % per_chunk
}

impl<T: Element, const N: usize> View<T> for TmaBoxView<T, N> {
    const RANK: usize = 2;
    const VECTOR: Index = (16 / T::BYTES) as Index;
    type Memory = SharedArray<T, N>;
    #[inline(always)]
    fn buffer(&self) -> &BufferView<Self::Memory, T> {
        &self.buffer
    }
    #[inline(always)]
    fn offset(&self, x: &[Index]) -> Index {
        let shape = (self.cols, self.box_rows);
        (self.start + element_offset::<T>(x[0] as u32, x[1] as u32, shape)) as Index
    }
    #[inline(always)]
    fn valid(&self, x: &[Index]) -> bool {
        (x[0] as u32) < self.rows && (x[1] as u32) < self.cols
    }
    #[inline(always)]
    fn vector_ok(&self, n: Index) -> bool {
        n as u32 * T::BYTES <= 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module documentation's formula in bytes, written out independently.
    fn byte(r: u32, c: u32, cols: u32, box_rows: u32, size: u32) -> u32 {
        let w = 128 / size;
        let boxes = (r / box_rows) * (cols / w) + c / w;
        let in_row = (c % w) * size;
        boxes * box_rows * 128
            + (r % box_rows) * 128
            + (((in_row / 16) ^ (r % 8)) * 16)
            + in_row % 16
    }

    #[test]
    fn the_worked_example() {
        assert_eq!(
            element_offset::<crate::device::Bf16>(9, 70, (256, 64)),
            4686
        );
    }

    /// Every element of bf16 and f32 tiles against the formula written in bytes, and against
    /// the TMA model's own placement of a box's elements (`TmaGeometry::shared_byte`).
    #[test]
    fn offsets_are_where_a_tma_box_puts_each_element() {
        use crate::tma::TmaGeometry;
        use crate::wgmma::SwizzleMode;
        fn check<T: Element>(rows: u32, cols: u32, box_rows: u32) {
            let w = 128 / T::BYTES;
            let g = TmaGeometry::<2>::new(
                [cols as u64, rows as u64],
                [T::BYTES as u64, (cols * T::BYTES) as u64],
                [w, box_rows],
                T::BYTES,
                SwizzleMode::B128,
            )
            .unwrap();
            for r in 0..rows {
                for c in 0..cols {
                    let at = element_offset::<T>(r, c, (cols, box_rows)) * T::BYTES;
                    assert_eq!(at, byte(r, c, cols, box_rows, T::BYTES), "({r}, {c})");
                    let in_box = g.shared_byte([c % w, r % box_rows]);
                    assert_eq!(
                        at - box_offset::<T>(r, c, (cols, box_rows)) * T::BYTES,
                        in_box,
                        "({r}, {c})"
                    );
                }
            }
        }
        check::<crate::device::Bf16>(128, 256, 64);
        check::<crate::device::Bf16>(64, 128, 16);
        check::<f32>(32, 96, 8);
    }
}
