//! The inputs of a row backward (`x` and `dy`, and the fused add's `dr`) staged through shared
//! memory a row tile ahead.
//!
//! A block walks row tiles a grid apart. Loaded straight into registers, a tile's reads
//! start only when the last tile's reduction is done, and the registers they land in are taken
//! from the warps that could hide them. Staged, the next tile's `cp.async` copies
//! ([`TileWindow::async_load_into`]) fly while this one is reduced, and land in shared memory:
//!
//! ```text
//! fetch(t₀, 0)
//! for tile t (slot s):  wait · fetch(t + grid, 1 − s) · (x, dy, dr) = load(s) · work
//! ```
//!
//! Each thread reads back only the bytes it copied (the tile's distribution on both sides), so
//! no barrier orders the slots: `wait` (this thread's copies landed) is enough, and a slot is
//! refilled only after the thread has read it. The stage is `[2 slots × inputs × rows, cols]`
//! row-major: a warp's vectors sit side by side, no bank conflict.
//!
//! Whether an instance stages is its own (the instance tables): where the stage's registers
//! and shared memory cost more than the overlap gained, [`inputs`] reads global memory instead.

use ck_core::device::{cp_async_commit, cp_async_wait, Element, Global, SharedArray};
use ck_core::tile::{make_tile_window, DistributedTensor, TileWindow, View2};
use ck_core::TileDistribution;

/// Elements of the stage of tile `D` for `inputs` staged inputs (both slots), or one 16-byte
/// vector where `inputs` is 0 (a kernel that does not stage still declares a stage).
pub(crate) const fn stage_elems<D: TileDistribution<X = [i32; 2]>, T: Element>(
    inputs: usize,
) -> usize {
    let [rows, cols] = D::X_LENGTHS;
    if inputs > 0 {
        2 * inputs * (rows * cols) as usize
    } else {
        16 / T::BYTES as usize
    }
}

/// A window of `D` over an `M × N` input.
pub(crate) type Window<D, T, const VEC: usize> = TileWindow<D, View2<Global<T>, T, VEC>>;

/// The windows over the inputs in global memory: `x`, `dy` and the addend's.
pub(crate) type Windows<'a, D, T, const VEC: usize> = (
    &'a mut Window<D, T, VEC>,
    &'a mut Window<D, T, VEC>,
    Option<&'a mut Window<D, T, VEC>>,
);

/// One row tile of the inputs: `x`, `dy` and the addend where there is one.
pub(crate) type Inputs<D, T> = (
    DistributedTensor<D, T>,
    DistributedTensor<D, T>,
    Option<DistributedTensor<D, T>>,
);

/// The row tiles of `x`, `dy` (and an addend) in flight to shared memory (see the module docs).
pub(crate) struct Stage<D: TileDistribution, T: Element, const VEC: usize, const N: usize> {
    x: Window<D, T, VEC>,
    dy: Window<D, T, VEC>,
    addend: Option<Window<D, T, VEC>>,
    slot: TileWindow<D, View2<SharedArray<T, N>, T, VEC>>,
}

impl<D, T, const VEC: usize, const N: usize> Stage<D, T, VEC, N>
where
    D: TileDistribution<X = [i32; 2]>,
    T: Element,
{
    /// Stages `m × n` row-major `x`, `dy` and `addend` through `smem`.
    #[inline(always)]
    pub fn new(
        (x, dy, addend): (Global<T>, Global<T>, Option<Global<T>>),
        (m, n): (u32, u32),
        smem: SharedArray<T, N>,
    ) -> Self {
        let [rows, cols] = D::X_LENGTHS;
        let inputs = 2 + addend.is_some() as u32;
        let stage = View2::new(smem, 2 * inputs * rows as u32, cols as u32, cols as u32);
        let window = |g| make_tile_window::<D, _>(View2::new(g, m, n, n), [0, 0]);
        Stage {
            x: window(x),
            dy: window(dy),
            addend: addend.map(window),
            slot: make_tile_window::<D, _>(stage, [0, 0]),
        }
    }

    /// Moves the stage's window to input `k` of `slot`.
    #[inline(always)]
    fn place(&mut self, slot: u32, k: u32) {
        let [rows, _] = D::X_LENGTHS;
        let inputs = 2 + self.addend.is_some() as u32;
        self.slot
            .set_origin([((slot * inputs + k) as i32) * rows, 0]);
    }

    /// Starts the copies of row tile `t` into `slot` (0 or 1), as one group.
    #[inline(always)]
    pub fn fetch(&mut self, t: u32, slot: u32) {
        let [rows, _] = D::X_LENGTHS;
        let at = [t as i32 * rows, 0];
        self.place(slot, 0);
        self.x.set_origin(at);
        self.x.async_load_into(&self.slot);
        self.place(slot, 1);
        self.dy.set_origin(at);
        self.dy.async_load_into(&self.slot);
        self.place(slot, 2);
        if let Some(a) = self.addend.as_mut() {
            a.set_origin(at);
            a.async_load_into(&self.slot);
        }
        cp_async_commit();
    }

    /// Waits until every tile fetched so far has landed.
    #[inline(always)]
    pub fn wait(&self) {
        cp_async_wait::<0>();
    }

    /// This thread's inputs of the tile in `slot` (landed: after [`Stage::wait`]).
    #[inline(always)]
    pub fn load(&mut self, slot: u32) -> Inputs<D, T> {
        self.place(slot, 0);
        let x = self.slot.load::<T>();
        self.place(slot, 1);
        let dy = self.slot.load::<T>();
        self.place(slot, 2);
        let addend = if self.addend.is_some() {
            Some(self.slot.load::<T>())
        } else {
            None
        };
        (x, dy, addend)
    }
}

/// This thread's inputs of the tile at `at`: from the stage's `slot` where the kernel stages,
/// else from the windows over global memory. (No closure returns a tile here: one left
/// un-inlined passes its tiles through the stack.)
#[inline(always)]
pub(crate) fn inputs<D, T, const VEC: usize, const N: usize>(
    staged: &mut Option<Stage<D, T, VEC, N>>,
    slot: u32,
    (x, dy, addend): Windows<'_, D, T, VEC>,
    at: [i32; 2],
) -> Inputs<D, T>
where
    D: TileDistribution<X = [i32; 2]>,
    T: Element,
{
    if let Some(staged) = staged.as_mut() {
        return staged.load(slot);
    }
    x.set_origin(at);
    dy.set_origin(at);
    let addend = match addend {
        Some(w) => {
            w.set_origin(at);
            Some(w.load::<T>())
        }
        None => None,
    };
    (x.load::<T>(), dy.load::<T>(), addend)
}
