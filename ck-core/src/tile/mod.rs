//! Tile windows and distributed tensors (spec §8–§10, §12): CK Tile's data-movement layer.
//!
//! A [`DistributedTensor<D, T>`] is one thread's registers of a tile spread by distribution `D`
//! (`THREAD_BUFFER_SIZE` elements, indexed by D). A [`TileWindow<D, V>`] is a tile-sized window
//! at an origin of a [`View`]; [`TileWindow::load`] visits the thread's Y box, one vector access
//! per `ScalarPerVector` elements along the vector Y dim chosen by
//! [`Encoding::vector_plan`](crate::Encoding::vector_plan) (spec §10.2, no snake: the access
//! order is D order), with the validity of each vector decided at its first element (spec §3.2).
//!
//! A view whose real length along the vector dim (or its row stride) is not a multiple of the
//! vector width is accessed element by element instead — never a vector that starts in bounds
//! and runs into the next row (the padded-row hazard of spec TV7).
//!
//! [`TileWindow::async_load_into`] (CK's `async_load_tile`) copies a window of global memory
//! into a shared-memory window of the same distribution by `cp.async`, each thread its own
//! vectors, for a later plain `load` of the stage (`async_copy.rs`).
//!
//! Distributions are types, so tensors of different distributions cannot be mixed in an
//! elementwise operation: that is a type error, not CK's silent misbehaviour.

use crate::device::buffer_view::{BufferView, Memory, MemoryMut, MemoryOp};
use crate::device::{Atomic, Element, Real};
use crate::distribution::{BufferArray, IndexArray, TileDistribution, VectorPlan};
use crate::{Dims, Index};
use core::marker::PhantomData;

mod async_copy;
mod reduce;
mod tma_box;
pub use reduce::{
    block_reduce_x, broadcast_x, reduce_x_in_warp, welford_x, Reducible, Reduction, RowsOf, Welford,
};
pub use tma_box::TmaBoxView;

/// One thread's registers of a tile distributed by `D`.
pub struct DistributedTensor<D: TileDistribution, T: Copy> {
    /// The registers, in D order.
    pub data: D::Buffer<T>,
}

impl<D: TileDistribution, T: Copy> Clone for DistributedTensor<D, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D: TileDistribution, T: Copy> Copy for DistributedTensor<D, T> {}

impl<D: TileDistribution, T: Copy> DistributedTensor<D, T> {
    /// Every element `v` (CK's `make_static_distributed_tensor` + `set_tile`).
    #[inline(always)]
    pub fn splat(v: T) -> Self {
        DistributedTensor {
            data: D::Buffer::<T>::splat(v),
        }
    }

    /// Register `d`.
    #[inline(always)]
    pub fn get(&self, d: usize) -> T {
        self.data.as_ref()[d]
    }

    /// Sets register `d`.
    #[inline(always)]
    pub fn set(&mut self, d: usize, v: T) {
        self.data.as_mut()[d] = v;
    }

    /// The element at Y index `y`.
    #[inline(always)]
    pub fn at(&self, y: D::Y) -> T {
        self.get(D::d_index(y))
    }

    /// `set_tile`: every element `v`.
    #[inline(always)]
    pub fn fill(&mut self, v: T) {
        D::for_each_y(|_, d| self.set(d, v));
    }

    /// `tile_elementwise_in`: a new tensor of the same distribution, `f` of every element.
    #[inline(always)]
    pub fn map<U: Copy + Default>(&self, mut f: impl FnMut(T) -> U) -> DistributedTensor<D, U> {
        let mut out = DistributedTensor::<D, U>::splat(U::default());
        D::for_each_y(|_, d| out.set(d, f(self.get(d))));
        out
    }

    /// Every element rounded to `U` (the values of `self.map(U::from_f32)`), registers `2i` and
    /// `2i + 1` by one [`Real::from_f32_pair`]: a bf16 tile costs half as many conversions, and
    /// where the pair is two neighbouring columns (the usual innermost Y dim) the conversion's
    /// word is the one the window stores.
    #[inline(always)]
    pub fn round_to<U: Real>(&self) -> DistributedTensor<D, U>
    where
        T: Real,
    {
        let mut out = DistributedTensor::<D, U>::splat(U::default());
        let len = self.data.as_ref().len();
        // `for_each_y` is unrolled: `d` is a constant in each copy, so the branches fold away.
        D::for_each_y(|_, d| {
            if d % 2 == 0 && d + 1 < len {
                let [lo, hi] = U::from_f32_pair(self.get(d).to_f32(), self.get(d + 1).to_f32());
                out.set(d, lo);
                out.set(d + 1, hi);
            } else if d % 2 == 0 {
                out.set(d, U::from_f32(self.get(d).to_f32()));
            }
        });
        out
    }

    /// `tile_elementwise_in` over two tensors of the same distribution.
    #[inline(always)]
    pub fn zip_map<U: Copy, R: Copy + Default>(
        &self,
        other: &DistributedTensor<D, U>,
        mut f: impl FnMut(T, U) -> R,
    ) -> DistributedTensor<D, R> {
        let mut out = DistributedTensor::<D, R>::splat(R::default());
        D::for_each_y(|_, d| out.set(d, f(self.get(d), other.get(d))));
        out
    }

    /// `tile_elementwise_inout`: `f` on every element in place.
    #[inline(always)]
    pub fn update(&mut self, mut f: impl FnMut(&mut T)) {
        D::for_each_y(|_, d| f(&mut self.data.as_mut()[d]));
    }

    /// `sweep_tile`: `f(y, value)` in span order (X0 outermost, spec §9).
    #[inline(always)]
    pub fn sweep(&self, mut f: impl FnMut(D::Y, T)) {
        D::sweep(|y, d| f(y, self.get(d)));
    }
}

impl<D: TileDistribution, T: Copy + Default> DistributedTensor<D, T> {
    /// All zeros (`clear_tile`).
    #[inline(always)]
    pub fn zeros() -> Self {
        Self::splat(T::default())
    }
}

/// `cast_tile`: every element converted.
#[inline(always)]
pub fn cast_tile<D: TileDistribution, T: Copy, U: Copy + Default>(
    t: &DistributedTensor<D, T>,
    f: impl FnMut(T) -> U,
) -> DistributedTensor<D, U> {
    t.map(f)
}

/// `shuffle_tile`: the same tile under a distribution that differs only in the order of its Y
/// dims (CK silently does nothing otherwise; here any other difference fails to compile).
#[inline(always)]
pub fn shuffle_tile<A: TileDistribution, B: TileDistribution, T: Copy + Default>(
    t: &DistributedTensor<A, T>,
) -> DistributedTensor<B, T> {
    let () = ShuffleCheck::<A, B>::OK;
    let mut out = DistributedTensor::<B, T>::zeros();
    // For each Y of B, the Y of A that claims the same component.
    B::for_each_y(|yb, db| {
        let mut ya = A::Y::zero();
        for (i, &v) in yb.as_ref().iter().enumerate() {
            ya.as_mut()[ShuffleCheck::<A, B>::MAP[i]] = v;
        }
        out.set(db, t.at(ya));
    });
    out
}

/// The compile-time check behind [`shuffle_tile`]: evaluating `ShuffleCheck::<A, B>::OK` fails
/// the build unless `A` and `B` differ only in the order of their Y dims. `shuffle_tile` evaluates
/// it when instantiated (`cargo build`); a `const _: () = ShuffleCheck::<A, B>::OK;` item also
/// fails `cargo check`.
pub struct ShuffleCheck<A, B>(PhantomData<(A, B)>);

impl<A: TileDistribution, B: TileDistribution> ShuffleCheck<A, B> {
    /// `MAP[i]` = the Y of `A` claiming the component `B`'s Y `i` claims.
    const MAP: [usize; crate::dims::MAX_DIMS] = {
        let (a, b) = (A::ENCODING, B::ENCODING);
        let mut map = [0usize; crate::dims::MAX_DIMS];
        assert!(
            a.ny() == b.ny(),
            "error[shuffle-mismatch]: shuffle_tile needs the same number of Y dims"
        );
        let mut i = 0;
        while i < b.ny() {
            let mut j = 0;
            let mut found = false;
            while j < a.ny() {
                if a.y_major().get(j) == b.y_major().get(i)
                    && a.y_minor().get(j) == b.y_minor().get(i)
                {
                    map[i] = j;
                    found = true;
                }
                j += 1;
            }
            assert!(
                found,
                "error[shuffle-mismatch]: the distributions claim different Y components"
            );
            i += 1;
        }
        map
    };
    /// The encodings must agree on R, H and P (only the Y order may differ).
    pub const OK: () = {
        let (a, b) = (A::ENCODING, B::ENCODING);
        assert!(a.same_rhp(&b), "error[shuffle-mismatch]: shuffle_tile needs distributions with identical R, H and P (only the Y order may differ)");
        let _ = Self::MAP;
    };
}

/// A tensor in memory as tile windows see it: element offsets, validity (padding) and the vector
/// guarantee of the last dim.
pub trait View<T: Element> {
    /// Number of dims.
    const RANK: usize;
    /// Guaranteed contiguous vector length along the last dim (−1: none).
    const VECTOR: Index;
    /// The memory.
    type Memory: Memory<T>;
    /// The buffer view (validity fill, `get`/`set`).
    fn buffer(&self) -> &BufferView<Self::Memory, T>;
    /// Element offset of `x`, valid or not (`x` has `RANK` entries).
    fn offset(&self, x: &[Index]) -> Index;
    /// Whether `x` is inside the real tensor (outside is padding: reads give the invalid value,
    /// writes are dropped).
    fn valid(&self, x: &[Index]) -> bool;
    /// Whether vectors of `n` elements along the last dim never straddle a row end or run out of
    /// alignment (so the vector plan may be used as is).
    fn vector_ok(&self, n: Index) -> bool;

    /// `N` elements at element `at` of a tile-window walk's access at `x` (`at` is `offset(x)`
    /// plus the piece's distance into its run), with the run's validity `valid`: invalid reads
    /// give the invalid value. The default goes through the buffer view's checked `get`; a view
    /// that can prove every valid access of a walk inside its memory (the library's `View2` and
    /// `View1`, whose footprint is checked where they are made) overrides it to skip the check.
    ///
    /// # Safety
    /// For callers: `valid` is `self.valid(x)`, and the access belongs to a window walk —
    /// vectors of `N` only where `vector_ok(N)` holds and `x`'s last index is a multiple of `N`,
    /// the piece within its run. Tile windows are the callers.
    #[inline(always)]
    unsafe fn read_walk<const N: usize>(&self, at: Index, valid: bool) -> [T; N] {
        self.buffer().get(at as u32, 0, valid)
    }

    /// Writes like [`View::read_walk`] reads.
    ///
    /// # Safety
    /// As for [`View::read_walk`].
    #[inline(always)]
    unsafe fn write_walk<const N: usize>(&self, at: Index, valid: bool, v: [T; N])
    where
        Self::Memory: MemoryMut<T>,
    {
        self.buffer().set(at as u32, 0, valid, v)
    }
}

/// Whether a row-major view's footprint — `rows` rows of `cols`, `row_stride` apart — fits in a
/// memory of `size` elements.
#[inline(always)]
const fn footprint_fits(rows: u32, cols: u32, row_stride: u32, size: u32) -> bool {
    rows == 0 || cols == 0 || (rows as u64 - 1) * row_stride as u64 + cols as u64 <= size as u64
}

/// A row-major 2-D view `[rows, cols]` with row stride `row_stride` (elements), padded to any
/// tile size: elements outside `rows × cols` read as the invalid value and are never written.
/// Its footprint, `(rows − 1)·row_stride + cols` elements, must fit in the memory: a view
/// larger than its buffer is a kernel error where it is made (the emulator's `out-of-bounds`,
/// a trap on the GPU), so that windows over it need no bounds check per access.
/// `VEC` is the guaranteed vector length of a row (CK's `make_naive_tensor_view(.., number<VEC>,
/// number<1>)`); `1` disables vector accesses.
pub struct View2<M, T, const VEC: usize> {
    buffer: BufferView<M, T>,
    rows: Index,
    cols: Index,
    row_stride: Index,
}

impl<M: Memory<T>, T: Element, const VEC: usize> View2<M, T, VEC> {
    /// A view of `rows × cols` elements, rows `row_stride` apart, invalid elements reading 0.
    #[inline(always)]
    pub fn new(memory: M, rows: u32, cols: u32, row_stride: u32) -> Self {
        Self::with_invalid_value(memory, rows, cols, row_stride, T::default())
    }

    /// The same with invalid elements reading `value`.
    #[inline(always)]
    pub fn with_invalid_value(memory: M, rows: u32, cols: u32, row_stride: u32, value: T) -> Self {
        if !footprint_fits(rows, cols, row_stride, memory.size()) {
            crate::device::view_outside_memory(memory.size());
        }
        View2 {
            buffer: BufferView::with_invalid_value(memory, value),
            rows: rows as Index,
            cols: cols as Index,
            row_stride: row_stride as Index,
        }
    }
}

impl<M: Memory<T>, T: Element, const VEC: usize> View<T> for View2<M, T, VEC> {
    const RANK: usize = 2;
    const VECTOR: Index = VEC as Index;
    type Memory = M;
    #[inline(always)]
    fn buffer(&self) -> &BufferView<M, T> {
        &self.buffer
    }
    #[inline(always)]
    fn offset(&self, x: &[Index]) -> Index {
        x[0] * self.row_stride + x[1]
    }
    #[inline(always)]
    fn valid(&self, x: &[Index]) -> bool {
        (x[0] as u32) < self.rows as u32 && (x[1] as u32) < self.cols as u32
    }
    #[inline(always)]
    fn vector_ok(&self, n: Index) -> bool {
        self.cols % n == 0 && self.row_stride % n == 0
    }
    /// # Safety
    /// As for [`View::read_walk`].
    #[inline(always)]
    unsafe fn read_walk<const N: usize>(&self, at: Index, valid: bool) -> [T; N] {
        // SAFETY: `valid` puts the run's first element in a row `< rows` and a column `< cols`;
        // a walk's vector of `N` starts at a multiple of `N` and `cols` is one (`vector_ok`),
        // so the piece lies in that row's first `cols` elements, at an offset that is a multiple
        // of `N` (so is the row stride); `with_invalid_value` checked that the footprint of
        // those lies inside the memory.
        unsafe { self.buffer.get_in_bounds(at as u32, valid) }
    }
    /// # Safety
    /// As for [`View::write_walk`].
    #[inline(always)]
    unsafe fn write_walk<const N: usize>(&self, at: Index, valid: bool, v: [T; N])
    where
        M: MemoryMut<T>,
    {
        // SAFETY: as in `read_walk`.
        unsafe { self.buffer.set_in_bounds(at as u32, valid, v) }
    }
}

/// A 1-D view of `len` elements (e.g. RMSNorm's gamma), padded like [`View2`]; `len` must not
/// exceed the memory (checked where the view is made, like [`View2`]'s footprint).
pub struct View1<M, T, const VEC: usize> {
    buffer: BufferView<M, T>,
    len: Index,
}

impl<M: Memory<T>, T: Element, const VEC: usize> View1<M, T, VEC> {
    /// A view of `len` elements, invalid elements reading 0.
    #[inline(always)]
    pub fn new(memory: M, len: u32) -> Self {
        if len > memory.size() {
            crate::device::view_outside_memory(memory.size());
        }
        View1 {
            buffer: BufferView::new(memory),
            len: len as Index,
        }
    }
}

impl<M: Memory<T>, T: Element, const VEC: usize> View<T> for View1<M, T, VEC> {
    const RANK: usize = 1;
    const VECTOR: Index = VEC as Index;
    type Memory = M;
    #[inline(always)]
    fn buffer(&self) -> &BufferView<M, T> {
        &self.buffer
    }
    #[inline(always)]
    fn offset(&self, x: &[Index]) -> Index {
        x[0]
    }
    #[inline(always)]
    fn valid(&self, x: &[Index]) -> bool {
        (x[0] as u32) < self.len as u32
    }
    #[inline(always)]
    fn vector_ok(&self, n: Index) -> bool {
        self.len % n == 0
    }
    /// # Safety
    /// As for [`View::read_walk`].
    #[inline(always)]
    unsafe fn read_walk<const N: usize>(&self, at: Index, valid: bool) -> [T; N] {
        // SAFETY: as for `View2`: the run starts below `len` at a multiple of `N`, `len` is one,
        // and `new` checked that the `len` elements lie inside the memory.
        unsafe { self.buffer.get_in_bounds(at as u32, valid) }
    }
    /// # Safety
    /// As for [`View::write_walk`].
    #[inline(always)]
    unsafe fn write_walk<const N: usize>(&self, at: Index, valid: bool, v: [T; N])
    where
        M: MemoryMut<T>,
    {
        // SAFETY: as in `read_walk`.
        unsafe { self.buffer.set_in_bounds(at as u32, valid, v) }
    }
}

/// A view of a block's shared-memory tile laid out by an [`LdsLayout`](crate::lds::LdsLayout)
/// (XOR-swizzled or plain): windows over it read and write the layout's offsets. `VEC` is the
/// vector guarantee along K (at most the layout's KPack, which must be a multiple of it).
pub struct LdsView<T, const N: usize, const VEC: usize> {
    buffer: BufferView<crate::device::SharedArray<T, N>, T>,
    layout: crate::lds::LdsLayout,
}

impl<T: Element, const N: usize, const VEC: usize> LdsView<T, N, VEC> {
    /// The tile of `smem` laid out by `layout`.
    #[inline(always)]
    pub fn new(smem: crate::device::SharedArray<T, N>, layout: crate::lds::LdsLayout) -> Self {
        assert!(
            layout.element_space_size() as usize <= N,
            "the shared array is smaller than the layout"
        );
        assert!(
            layout.k_pack() % VEC as Index == 0,
            "VEC must divide the layout's KPack"
        );
        LdsView {
            buffer: BufferView::new(smem),
            layout,
        }
    }
}

impl<T: Element, const N: usize, const VEC: usize> View<T> for LdsView<T, N, VEC> {
    const RANK: usize = 2;
    const VECTOR: Index = VEC as Index;
    type Memory = crate::device::SharedArray<T, N>;
    #[inline(always)]
    fn buffer(&self) -> &BufferView<Self::Memory, T> {
        &self.buffer
    }
    #[inline(always)]
    fn offset(&self, x: &[Index]) -> Index {
        self.layout.offset(x[0], x[1])
    }
    #[inline(always)]
    fn valid(&self, x: &[Index]) -> bool {
        (x[0] as u32) < self.layout.m_per_block() as u32
            && (x[1] as u32) < self.layout.k_per_block() as u32
    }
    #[inline(always)]
    fn vector_ok(&self, n: Index) -> bool {
        self.layout.k_pack() % n == 0
    }
}

/// The vector plan of distribution `D` over view `V` of `T` (spec §10.2).
pub struct Plan<D, V, T>(PhantomData<(D, V, T)>);

impl<D: TileDistribution, T: Element, V: View<T>> Plan<D, V, T> {
    /// Vector dim, scalars per vector, accesses: computed at compile time.
    pub const PLAN: VectorPlan = {
        let nx = D::ENCODING.nx();
        assert!(
            nx == V::RANK,
            "error[window-rank]: the distribution and the view have different numbers of dims"
        );
        let mut len = Dims::splat(nx, -1);
        let mut stride = Dims::splat(nx, -1);
        if V::VECTOR > 1 {
            len.set(nx - 1, V::VECTOR);
            stride.set(nx - 1, 1);
        }
        D::ENCODING.vector_plan(&len, &stride)
    };
}

/// A window of `D`'s tile at `origin` of a view, for this thread (CK's `tile_window` with a
/// distribution; the window lengths are `D::X_LENGTHS`).
pub struct TileWindow<D: TileDistribution, V> {
    /// The view.
    pub view: V,
    /// Top-left corner in the view.
    pub origin: D::X,
    p: D::P,
}

/// `make_tile_window(view, origin, dstr)` for the calling thread.
#[inline(always)]
pub fn make_tile_window<D: TileDistribution, V>(view: V, origin: D::X) -> TileWindow<D, V> {
    TileWindow {
        view,
        origin,
        p: D::partition_index(crate::device::thread_idx()),
    }
}

/// One vector access of a window (for traces and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access<Y, X> {
    /// Y of the first element.
    pub y: Y,
    /// Tile index of the first element (origin included).
    pub x: X,
    /// Element offset in the view.
    pub offset: Index,
    /// Register slot of the first element.
    pub d: usize,
    /// Whether the access reads/writes memory (the first element's validity).
    pub valid: bool,
    /// Elements moved.
    pub len: Index,
}

impl<D: TileDistribution, V> TileWindow<D, V> {
    /// A window for thread partition `p` (tests and host-side traces).
    pub fn for_partition(view: V, origin: D::X, p: D::P) -> Self {
        TileWindow { view, origin, p }
    }

    /// `move_tile_window`: shifts the origin by `step`.
    #[inline(always)]
    pub fn move_by(&mut self, step: D::X) {
        for (o, s) in self.origin.as_mut().iter_mut().zip(step.as_ref()) {
            *o += s;
        }
    }

    /// `set_window_origin`.
    #[inline(always)]
    pub fn set_origin(&mut self, origin: D::X) {
        self.origin = origin;
    }

    /// Visits this thread's accesses in order (D order = the non-snake identity curve over the
    /// Y box): one per `spv` elements along the vector Y dim, or one per element when the view
    /// refuses vectors of that width.
    #[inline(always)]
    fn for_each_access<T: Element>(&self, mut f: impl FnMut(Access<D::Y, D::X>))
    where
        V: View<T>,
    {
        let plan = Plan::<D, V, T>::PLAN;
        let spv = plan.scalar_per_vector;
        let origin = self.origin.as_ref();
        // Vectors where the view allows them and the origin is aligned to them (a vector of
        // the walk then starts at a multiple of its length); elements one by one otherwise.
        let vector = spv > 1 && self.view.vector_ok(spv) && origin[origin.len() - 1] % spv == 0;
        let vdim = plan.vector_dim_y;
        // Two inlined copies of the walk, each with a constant vector width, so that every
        // register index folds to a constant.
        if vector {
            self.walk(vdim, spv, &mut f);
        } else {
            self.walk(vdim, 1, &mut f);
        }
    }

    #[inline(always)]
    fn walk<T: Element, F: FnMut(Access<D::Y, D::X>)>(&self, vdim: usize, spv: Index, f: &mut F)
    where
        V: View<T>,
    {
        D::for_each_y(|y, d| {
            if y.as_ref()[vdim] % spv != 0 {
                return;
            }
            let mut x = D::x_index(self.p, y);
            for (xi, o) in x.as_mut().iter_mut().zip(self.origin.as_ref()) {
                *xi += o;
            }
            let (offset, valid) = (self.view.offset(x.as_ref()), self.view.valid(x.as_ref()));
            f(Access {
                y,
                x,
                offset,
                d,
                valid,
                len: spv,
            });
        })
    }

    /// Which of this thread's elements lie inside the view (padding: `false`), by register: for
    /// reductions that must leave the padding out (a mean, a variance).
    #[inline(always)]
    pub fn valid_mask<T: Element>(&self) -> DistributedTensor<D, bool>
    where
        V: View<T>,
    {
        let mut mask = DistributedTensor::<D, bool>::splat(false);
        D::for_each_y(|y, d| {
            let mut x = D::x_index(self.p, y);
            for (xi, o) in x.as_mut().iter_mut().zip(self.origin.as_ref()) {
                *xi += o;
            }
            mask.set(d, self.view.valid(x.as_ref()));
        });
        mask
    }

    /// Calls `f` with each of this thread's accesses, in order (the TV7 trace).
    pub fn trace<T: Element>(&self, f: impl FnMut(Access<D::Y, D::X>))
    where
        V: View<T>,
    {
        self.for_each_access::<T>(f)
    }

    /// `load_tile`: this thread's elements of the window (padding reads the invalid value).
    #[inline(always)]
    pub fn load<T: Element>(&self) -> DistributedTensor<D, T>
    where
        V: View<T>,
    {
        let mut out = DistributedTensor::<D, T>::zeros();
        let stride = Plan::<D, V, T>::PLAN.d_stride as usize;
        let view = &self.view;
        self.for_each_access::<T>(|a| {
            let (at, regs) = (
                Run {
                    offset: a.offset,
                    valid: a.valid,
                },
                &mut out.data,
            );
            match a.len {
                16 => load_run::<T, V, _, 16>(view, at, regs, a.d, stride),
                8 => load_run::<T, V, _, 8>(view, at, regs, a.d, stride),
                4 => load_run::<T, V, _, 4>(view, at, regs, a.d, stride),
                2 => load_run::<T, V, _, 2>(view, at, regs, a.d, stride),
                _ => load_run::<T, V, _, 1>(view, at, regs, a.d, stride),
            }
        });
        out
    }

    /// `store_tile`: writes this thread's elements (padding is dropped; replicated threads write
    /// identical values).
    #[inline(always)]
    pub fn store<T: Element>(&self, t: &DistributedTensor<D, T>)
    where
        V: View<T>,
        V::Memory: MemoryMut<T>,
    {
        let stride = Plan::<D, V, T>::PLAN.d_stride as usize;
        let view = &self.view;
        let regs = t.data.as_ref();
        self.for_each_access::<T>(|a| {
            let at = Run {
                offset: a.offset,
                valid: a.valid,
            };
            match a.len {
                16 => store_run::<T, V, 16>(view, at, regs, a.d, stride),
                8 => store_run::<T, V, 8>(view, at, regs, a.d, stride),
                4 => store_run::<T, V, 4>(view, at, regs, a.d, stride),
                2 => store_run::<T, V, 2>(view, at, regs, a.d, stride),
                _ => store_run::<T, V, 1>(view, at, regs, a.d, stride),
            }
        });
    }
}

impl<D: TileDistribution, V> TileWindow<D, V> {
    /// `update_tile`: combines this thread's elements into memory with `op` (set, add, atomic
    /// add, atomic max), element by element.
    #[inline(always)]
    pub fn update<T: Atomic>(&self, t: &DistributedTensor<D, T>, op: MemoryOp)
    where
        V: View<T, Memory = crate::device::GlobalMut<T>>,
    {
        let stride = Plan::<D, V, T>::PLAN.d_stride as usize;
        let buf = self.view.buffer();
        self.for_each_access::<T>(|a| {
            unroll::<16>(|j| {
                if (j as Index) < a.len {
                    buf.update::<1>(
                        op,
                        a.offset as u32 + j as u32,
                        0,
                        a.valid,
                        [t.get(a.d + j * stride)],
                    );
                }
            })
        });
    }
}

/// Calls `f(0), f(1), .., f(N − 1)` as straight-line code (every index a constant after
/// inlining, so register arrays stay in registers). `N ≤ 32`.
#[inline(always)]
pub fn unroll<const N: usize>(mut f: impl FnMut(usize)) {
    const { assert!(N <= 32, "unroll supports at most 32 copies") };
    macro_rules! step {
        ($($i:literal)*) => {$(
            if $i < N {
                f($i);
            }
        )*};
    }
    step!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
}

/// Elements of `T` in one 16-byte access.
const fn chunk_elems<T: Element>() -> usize {
    16 / T::BYTES as usize
}

/// One run of a window walk: its first element's offset and validity.
#[derive(Clone, Copy)]
struct Run {
    offset: Index,
    valid: bool,
}

/// `N` elements of run `r`, `along` into it.
#[inline(always)]
fn read_piece<T: Element, V: View<T>, const N: usize>(view: &V, r: Run, along: Index) -> [T; N] {
    // SAFETY: `r` is an access of `for_each_access`'s walk (its offset and `valid(x)`), and the
    // piece lies within the run: `read_walk`'s contract.
    unsafe { view.read_walk(r.offset.wrapping_add(along), r.valid) }
}

/// Writes `N` elements like [`read_piece`] reads them.
#[inline(always)]
fn write_piece<T: Element, V: View<T>, const N: usize>(view: &V, r: Run, along: Index, v: [T; N])
where
    V::Memory: MemoryMut<T>,
{
    // SAFETY: as in `read_piece`.
    unsafe { view.write_walk(r.offset.wrapping_add(along), r.valid, v) }
}

/// Loads run `r` of `N` elements (in accesses of at most 16 bytes, all with the first element's
/// validity) into registers `d, d + stride, ..`.
#[inline(always)]
fn load_run<T: Element, V: View<T>, B: AsMut<[T]>, const N: usize>(
    view: &V,
    r: Run,
    regs: &mut B,
    d: usize,
    stride: usize,
) {
    if N <= chunk_elems::<T>() {
        let v: [T; N] = read_piece(view, r, 0);
        unroll::<N>(|j| regs.as_mut()[d + j * stride] = v[j]);
    } else {
        // N f32 > 16 bytes: 16-byte pieces (chunk_elems elements each).
        unroll::<N>(|j| {
            if j % chunk_elems::<T>() == 0 {
                let (along, d) = (j as Index, d + j * stride);
                match T::BYTES {
                    4 => {
                        let v: [T; 4] = read_piece(view, r, along);
                        unroll::<4>(|k| regs.as_mut()[d + k * stride] = v[k]);
                    }
                    2 => {
                        let v: [T; 8] = read_piece(view, r, along);
                        unroll::<8>(|k| regs.as_mut()[d + k * stride] = v[k]);
                    }
                    _ => {
                        let v: [T; 16] = read_piece(view, r, along);
                        unroll::<16>(|k| regs.as_mut()[d + k * stride] = v[k]);
                    }
                }
            }
        });
    }
}

/// Stores registers `d, d + stride, ..` as run `r` of `N` elements (like [`load_run`]).
#[inline(always)]
fn store_run<T: Element, V: View<T>, const N: usize>(
    view: &V,
    r: Run,
    regs: &[T],
    d: usize,
    stride: usize,
) where
    V::Memory: MemoryMut<T>,
{
    if N <= chunk_elems::<T>() {
        let v: [T; N] = core::array::from_fn(|j| regs[d + j * stride]);
        write_piece(view, r, 0, v);
    } else {
        unroll::<N>(|j| {
            if j % chunk_elems::<T>() == 0 {
                let (along, d) = (j as Index, d + j * stride);
                match T::BYTES {
                    4 => write_piece::<T, V, 4>(
                        view,
                        r,
                        along,
                        core::array::from_fn(|k| regs[d + k * stride]),
                    ),
                    2 => write_piece::<T, V, 8>(
                        view,
                        r,
                        along,
                        core::array::from_fn(|k| regs[d + k * stride]),
                    ),
                    _ => write_piece::<T, V, 16>(
                        view,
                        r,
                        along,
                        core::array::from_fn(|k| regs[d + k * stride]),
                    ),
                }
            }
        });
    }
}
