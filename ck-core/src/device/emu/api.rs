//! The device API as the emulator implements it. Kernels see exactly the same names and
//! signatures on the GPU (`device::ptx`).

use std::prelude::rust_2021::*;

use super::memory::EmuMemory;
use super::state::{Kind, Site};
use super::{abort, buffer_of_launch, ctx, Event, WarpOp};
use crate::device::element::{Atomic, Element, Element32};
use crate::device::SharedArray;
use crate::report::Fault;
use std::marker::PhantomData;
use std::panic::Location;

/// Index of this thread in its (1-D) block.
pub fn thread_idx() -> u32 {
    ctx().tid
}

/// Index of this block in the (1-D) grid.
pub fn block_idx() -> u32 {
    ctx().block
}

/// Threads per block.
pub fn block_dim() -> u32 {
    ctx().block_dim
}

/// Blocks in the grid.
pub fn grid_dim() -> u32 {
    ctx().grid_dim
}

/// Lane of this thread in its warp.
pub fn lane_id() -> u32 {
    ctx().tid % crate::device::WARP_SIZE
}

/// Warp of this thread in its block.
pub fn warp_id() -> u32 {
    ctx().tid / crate::device::WARP_SIZE
}

/// Waits until every thread of the block reaches this barrier (`__syncthreads`); orders shared
/// memory accesses before it with those after it.
#[track_caller]
pub fn block_sync() {
    ctx().suspend(Event::Barrier(Location::caller()));
}

/// `fence.acq_rel.gpu` (`__threadfence`): this thread's global-memory accesses before it are
/// ordered, for every block, before those after it. Two blocks hand data over with it: the
/// writer stores, fences and then bumps a counter with an atomic; the reader that sees the
/// count fences and then loads (`gemm::tma::stream_k`). The emulator's blocks run on parallel
/// OS threads, so this is a real fence there too.
pub fn fence_acq_rel_gpu() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[track_caller]
fn warp_op(op: WarpOp, value: u32) -> u32 {
    let mut payload = [0u32; 10];
    payload[0] = value;
    ctx().suspend(Event::Warp {
        op,
        value: payload,
        site: Location::caller(),
    })[0]
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: D = A·B + C over the warp's
/// fragments (each a pair of bf16 per u32, PTX ISA layouts; see `ldmatrix_x4`).
#[track_caller]
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut p = [0u32; 10];
    p[..4].copy_from_slice(&a);
    p[4..6].copy_from_slice(&b);
    for (i, v) in c.iter().enumerate() {
        p[6 + i] = v.to_bits();
    }
    let r = ctx().suspend(Event::Warp {
        op: WarpOp::MmaBf16,
        value: p,
        site: Location::caller(),
    });
    r.map(f32::from_bits)
}

#[track_caller]
fn ldmatrix<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
    trans: bool,
) -> [u32; 4] {
    let mut p = [0u32; 10];
    p[0] = smem.byte_offset() + elem * T::BYTES;
    ctx().suspend(Event::Warp {
        op: WarpOp::LdMatrix { trans },
        value: p,
        site: Location::caller(),
    })
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: lanes 8j..8j+8 point (by element index into
/// `smem`) at the 8 rows of 8 b16 of matrix j; lane l receives in reg j elements
/// `(l / 4, 2(l % 4) + {0, 1})` of matrix j — exactly an mma A fragment.
#[track_caller]
pub fn ldmatrix_x4<T: Element, const N: usize>(smem: &SharedArray<T, N>, elem: u32) -> [u32; 4] {
    ldmatrix(smem, elem, false)
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`ldmatrix_x4`], transposed: lane l
/// receives elements `(2(l % 4) + {0, 1}, l / 4)` of matrix j — an mma B fragment from a
/// k-major tile.
#[track_caller]
pub fn ldmatrix_x4_trans<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
) -> [u32; 4] {
    ldmatrix(smem, elem, true)
}

/// `x` (on a GPU, a value the optimiser cannot see through, so that what a loop derives from
/// it is computed in the loop rather than held in registers across it).
#[inline(always)]
pub fn opaque(x: u64) -> u64 {
    x
}

/// `stmatrix.sync.aligned.m8n8.x4.shared.b16`: the inverse of [`ldmatrix_x4`] — lanes 8j..8j+8
/// point (by element index into `smem`) at the 8 rows of 8 b16 of matrix j, and `regs[j]` of
/// lane l holds its elements `(l / 4, 2(l % 4) + {0, 1})`, low half first: an mma C fragment
/// rounded to pairs of b16 goes to shared memory in 16-byte rows.
#[track_caller]
pub fn stmatrix_x4<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
    regs: [u32; 4],
) {
    stmatrix(smem, elem, regs, false)
}

/// `stmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`stmatrix_x4`], each matrix stored
/// transposed — element `(l / 4, 2(l % 4) + {0, 1})` of matrix j goes to column `l / 4` of its
/// rows `2(l % 4) + {0, 1}`: an mma C fragment of `Xᵀ`, rounded to pairs of b16, lands as X.
#[track_caller]
pub fn stmatrix_x4_trans<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
    regs: [u32; 4],
) {
    stmatrix(smem, elem, regs, true)
}

#[track_caller]
fn stmatrix<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
    regs: [u32; 4],
    trans: bool,
) {
    let mut p = [0u32; 10];
    p[0] = smem.byte_offset() + elem * T::BYTES;
    p[1..5].copy_from_slice(&regs);
    ctx().suspend(Event::Warp {
        op: WarpOp::StMatrix { trans },
        value: p,
        site: Location::caller(),
    });
}

/// Waits for every lane of the warp (`__syncwarp`).
#[track_caller]
pub fn warp_sync() {
    warp_op(WarpOp::Sync, 0);
}

/// The value of lane `lane ^ mask` (butterfly).
#[track_caller]
pub fn shfl_xor<T: Element32>(v: T, mask: u32) -> T {
    T::from_bits(warp_op(WarpOp::ShflXor(mask), v.to_bits()))
}

/// The value of lane `lane + delta` (own value past the last lane).
#[track_caller]
pub fn shfl_down<T: Element32>(v: T, delta: u32) -> T {
    T::from_bits(warp_op(WarpOp::ShflDown(delta), v.to_bits()))
}

/// The value of lane `lane − delta` (own value before lane 0).
#[track_caller]
pub fn shfl_up<T: Element32>(v: T, delta: u32) -> T {
    T::from_bits(warp_op(WarpOp::ShflUp(delta), v.to_bits()))
}

/// The value of lane `src % 32`.
#[track_caller]
pub fn shfl_idx<T: Element32>(v: T, src: u32) -> T {
    T::from_bits(warp_op(WarpOp::ShflIdx(src), v.to_bits()))
}

/// Bit `i` set iff lane `i`'s `pred` is true.
#[track_caller]
pub fn ballot(pred: bool) -> u32 {
    warp_op(WarpOp::Ballot, pred as u32)
}

/// One vector access of `N` elements of `T` at element `i` of `mem` (which holds `len`
/// elements starting at byte `base`): bounds, alignment, races (shared), profile, data.
#[allow(clippy::too_many_arguments)]
fn access<T: Element, const N: usize>(
    mem: &EmuMemory,
    base: usize,
    len: u32,
    shared: bool,
    i: u32,
    kind: Kind,
    site: Site,
    data: Option<[T; N]>,
) -> [T; N] {
    let c = ctx();
    let st = c.state();
    let space = if shared { "shared" } else { "global" };
    if i as u64 + N as u64 > len as u64 {
        st.out_of_bounds(
            c.tid,
            site,
            (space, kind),
            (i as u64, N as u32, T::NAME),
            len as u64,
        );
        abort();
    }
    let bytes = T::BYTES * N as u32;
    if bytes > 16 || !bytes.is_power_of_two() {
        st.fault(
            Fault::Misaligned,
            vec![c.tid],
            Some(i as u64),
            format!("thread {}: a vector access of {N} × {} = {bytes} bytes (at {site}); vectors are 1, 2, 4, 8 or 16 bytes", c.tid, T::NAME),
        );
        abort();
    }
    let offset = base + i as usize * T::BYTES as usize;
    if !offset.is_multiple_of(bytes as usize) {
        st.fault(
            Fault::Misaligned,
            vec![c.tid],
            Some(i as u64),
            format!(
                "thread {}: {bytes}-byte {space} access at element {i} (byte {offset}) is not {bytes}-byte aligned (at {site})",
                c.tid
            ),
        );
        abort();
    }
    if shared {
        let same = data.is_some_and(|d| {
            d.iter()
                .enumerate()
                .all(|(k, v)| mem.load(offset + k * T::BYTES as usize, T::BYTES) == v.to_bits())
        });
        st.check_race(c.tid, site, kind, offset, bytes, same);
        if st.error.borrow().is_some() {
            abort();
        }
        if kind != Kind::Load {
            st.note_generic_write(c.tid, site, offset, bytes);
        }
    }
    st.profile(c.tid, site, kind, !shared, mem.address(offset), bytes);
    let mut out = [T::default(); N];
    for (k, o) in out.iter_mut().enumerate() {
        let at = offset + k * T::BYTES as usize;
        match data {
            Some(d) => mem.store(at, T::BYTES, d[k].to_bits()),
            None => *o = T::from_bits(mem.load(at, T::BYTES)),
        }
    }
    out
}

fn atomic<T: Atomic>(
    mem: &EmuMemory,
    base: usize,
    len: u32,
    shared: bool,
    i: u32,
    site: Site,
    f: impl Fn(T) -> T,
) -> T {
    let c = ctx();
    let st = c.state();
    if i >= len {
        let space = if shared { "shared" } else { "global" };
        st.out_of_bounds(
            c.tid,
            site,
            (space, Kind::Atomic),
            (i as u64, 1, T::NAME),
            len as u64,
        );
        abort();
    }
    let offset = base + i as usize * 4;
    st.profile(c.tid, site, Kind::Atomic, !shared, mem.address(offset), 4);
    T::from_bits(mem.update(offset, |old| f(T::from_bits(old)).to_bits()))
}

/// Records `fault` for this thread (`message` after "thread N: ") and ends the launch there.
fn fault_here(fault: Fault, message: std::fmt::Arguments<'_>) -> ! {
    let c = ctx();
    c.state().fault(
        fault,
        vec![c.tid],
        None,
        format!("thread {}: {message}", c.tid),
    );
    abort();
}

/// A [`TmaBoxView`](crate::tile::TmaBoxView) whose shape or start does not fit the boxes
/// (`why` says which and what to change): `misaligned-access` where the view is made.
#[track_caller]
pub(crate) fn tma_box_view_unfit(why: std::fmt::Arguments<'_>) -> ! {
    let site = Location::caller();
    fault_here(
        Fault::Misaligned,
        format_args!("a TmaBoxView (made at {site}) {why}"),
    )
}

/// A view whose footprint does not fit its memory: an `out-of-bounds` fault where it is made
/// (a trap on the GPU).
#[track_caller]
pub(crate) fn view_outside_memory(size: u32) -> ! {
    let site = Location::caller();
    fault_here(
        Fault::OutOfBounds,
        format_args!("a view (made at {site}) larger than its memory of {size} elements: its (rows − 1) · row stride + cols (or its length) must fit in the buffer"),
    )
}

/// The fault of a `copy_16_async` over a view whose rows are not whole 16-byte vectors (`cols`
/// or `row_stride` not a multiple of `elems`): a partial vector would be lost as padding.
#[track_caller]
pub(crate) fn copy_16_async_on_partial_vectors(cols: u32, row_stride: u32, elems: u32) -> ! {
    let site = Location::caller();
    fault_here(
        Fault::Misaligned,
        format_args!("copy_16_async (at {site}) over a view of {cols} columns, row stride {row_stride}: cp.async copies whole vectors of {elems} elements, so the columns and the stride must be multiples of {elems}; copy such rows with View2::copy_16 (element by element), or pad them"),
    )
}

/// Faults unless elements `start..start + len` lie in a buffer of `size` elements and `start`
/// is 16-byte aligned (what [`Global::slice`] needs; a trap on the GPU).
#[track_caller]
fn check_slice<T: Element>(start: u32, len: u32, size: u32) {
    let c = ctx();
    let st = c.state();
    let site = Location::caller();
    if start as u64 + len as u64 > size as u64 {
        st.fault(
            Fault::OutOfBounds,
            vec![c.tid],
            Some(start as u64),
            format!(
                "thread {}: a slice of elements {start}..{} (at {site}) of a buffer of {size} elements; a slice must lie inside its buffer",
                c.tid,
                start as u64 + len as u64
            ),
        );
        abort();
    }
    if !(start as u64 * T::BYTES as u64).is_multiple_of(16) {
        st.fault(
            Fault::Misaligned,
            vec![c.tid],
            Some(start as u64),
            format!(
                "thread {}: a slice starting at element {start} of {} (byte {}, at {site}); a slice must start on a 16-byte boundary",
                c.tid,
                T::NAME,
                start as u64 * T::BYTES as u64
            ),
        );
        abort();
    }
}

/// A read-only global buffer of `T` (a kernel argument).
pub struct Global<T> {
    buffer: u64,
    /// First element (of the buffer's memory) of this handle: non-zero for a slice.
    start: u32,
    len: u32,
    _t: PhantomData<T>,
}

/// A writable global buffer of `T` (a kernel argument).
pub struct GlobalMut<T> {
    buffer: u64,
    /// As for [`Global`].
    start: u32,
    len: u32,
    _t: PhantomData<T>,
}

macro_rules! handle_common {
    ($h:ident) => {
        impl<T> Clone for $h<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $h<T> {}
        impl<T: Element> $h<T> {
            /// A handle naming the emulated buffer `buffer` (its memory's id) of `len`
            /// elements (used by the host launcher; see `DeviceBuffer::global`).
            #[doc(hidden)]
            pub fn from_emulated(buffer: u64, len: u32) -> Self {
                $h {
                    buffer,
                    start: 0,
                    len,
                    _t: PhantomData,
                }
            }

            /// A handle to no memory: every access is out of bounds (an optional input a
            /// kernel compiled without it never reads).
            pub fn empty() -> Self {
                $h {
                    buffer: u64::MAX,
                    start: 0,
                    len: 0,
                    _t: PhantomData,
                }
            }

            /// Elements `start..start + len` of this buffer as a buffer of their own (e.g. one
            /// head of a `[batch, heads, seq, dim]` tensor). The slice must lie inside the
            /// buffer and start on a 16-byte boundary (so its vectors stay aligned); otherwise
            /// the kernel fails here (`out-of-bounds`, `misaligned-access`; a trap on the GPU).
            #[track_caller]
            pub fn slice(&self, start: u32, len: u32) -> Self {
                check_slice::<T>(start, len, self.len);
                $h {
                    buffer: self.buffer,
                    start: self.start + start,
                    len,
                    _t: PhantomData,
                }
            }

            /// Byte offset of this handle's first element in the buffer's memory.
            fn base(&self) -> usize {
                self.start as usize * T::BYTES as usize
            }

            /// The buffer's memory, among those the running launch received.
            #[track_caller]
            fn mem(&self) -> &EmuMemory {
                buffer_of_launch(self.buffer, self.len)
            }

            /// Number of elements.
            pub fn len(&self) -> u32 {
                self.len
            }

            /// True if the buffer has no elements.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Element `i`.
            #[track_caller]
            pub fn load(&self, i: u32) -> T {
                self.load_vec::<1>(i)[0]
            }

            /// The GPU's unchecked load; the emulator checks it anyway (an out-of-bounds
            /// access is reported like [`Self::load_vec`]'s).
            ///
            /// # Safety
            /// `i + N ≤ self.len()` (what the GPU relies on).
            #[track_caller]
            pub unsafe fn load_vec_unchecked<const N: usize>(&self, i: u32) -> [T; N] {
                self.load_vec(i)
            }

            /// `N` consecutive elements from `i` in one access (`N·size_of::<T>()` ∈ {1,2,4,8,16}
            /// bytes, naturally aligned).
            #[track_caller]
            pub fn load_vec<const N: usize>(&self, i: u32) -> [T; N] {
                access::<T, N>(
                    self.mem(),
                    self.base(),
                    self.len,
                    false,
                    i,
                    Kind::Load,
                    Location::caller(),
                    None,
                )
            }
        }
    };
}

handle_common!(Global);
handle_common!(GlobalMut);

impl<T: Element> GlobalMut<T> {
    /// The same elements read as `U`, an element type of the same size (their bits): a u32
    /// counter kept in an f32 scratch.
    #[inline(always)]
    pub fn cast<U: Element>(self) -> GlobalMut<U> {
        const {
            assert!(
                T::BYTES == U::BYTES,
                "cast between element types of one size"
            )
        };
        GlobalMut {
            buffer: self.buffer,
            start: self.start,
            len: self.len,
            _t: PhantomData,
        }
    }

    /// Stores element `i`.
    #[track_caller]
    pub fn store(&self, i: u32, v: T) {
        self.store_vec::<1>(i, [v]);
    }

    /// Stores `N` consecutive elements from `i` in one access.
    #[track_caller]
    pub fn store_vec<const N: usize>(&self, i: u32, v: [T; N]) {
        access::<T, N>(
            self.mem(),
            self.base(),
            self.len,
            false,
            i,
            Kind::Store,
            Location::caller(),
            Some(v),
        );
    }

    /// The GPU's unchecked store; the emulator checks it anyway.
    ///
    /// # Safety
    /// `i + N ≤ self.len()` (what the GPU relies on).
    #[track_caller]
    pub unsafe fn store_vec_unchecked<const N: usize>(&self, i: u32, v: [T; N]) {
        self.store_vec(i, v);
    }

    /// Read-only view of the same buffer.
    pub fn as_const(&self) -> Global<T> {
        Global {
            buffer: self.buffer,
            start: self.start,
            len: self.len,
            _t: PhantomData,
        }
    }
}

impl<T: Atomic> GlobalMut<T> {
    /// Atomically adds `v` to element `i`; returns the old value.
    #[track_caller]
    pub fn atomic_add(&self, i: u32, v: T) -> T {
        atomic(
            self.mem(),
            self.base(),
            self.len,
            false,
            i,
            Location::caller(),
            |old| T::add(old, v),
        )
    }

    /// Atomically replaces element `i` by `max(old, v)`; returns the old value.
    #[track_caller]
    pub fn atomic_max(&self, i: u32, v: T) -> T {
        atomic(
            self.mem(),
            self.base(),
            self.len,
            false,
            i,
            Location::caller(),
            |old| T::max(old, v),
        )
    }
}

impl GlobalMut<f32> {
    /// `cp.reduce.async.bulk … .add.f32`: adds `elems` floats of `src` from element `src_elem`
    /// to this buffer from element `at`. The emulator reads the shared bytes and adds them (each
    /// an atomic addition) at once; the sanitizer treats the bytes as still being read until
    /// the issuing thread's [`bulk_wait_group_read`](super::pipeline::bulk_wait_group_read)
    /// (or `bulk_wait_group`) retires the group, as for a TMA store. Runs outside their
    /// buffers, not on 16-byte boundaries, or of a length that is not a multiple of 4 are
    /// faults, as they trap on the GPU.
    #[track_caller]
    pub fn bulk_add_from_shared<const N: usize>(
        &self,
        at: u32,
        src: &SharedArray<f32, N>,
        src_elem: u32,
        elems: u32,
    ) {
        let site = Location::caller();
        let c = ctx();
        let st = c.state();
        let fail = |fault: Fault, message: String| {
            st.fault(fault, vec![c.tid], None, message);
            abort()
        };
        if at as u64 + elems as u64 > self.len as u64 || src_elem as u64 + elems as u64 > N as u64 {
            fail(
                Fault::OutOfBounds,
                format!("thread {}: bulk addition at {site} of {elems} floats from shared element {src_elem} (of {N}) to element {at} (of {})", c.tid, self.len),
            );
        }
        let start = src.byte_offset() as usize + src_elem as usize * 4;
        let global = (self.start as usize + at as usize) * 4;
        if !elems.is_multiple_of(4) || !start.is_multiple_of(16) || !global.is_multiple_of(16) {
            fail(
                Fault::Misaligned,
                format!("thread {}: bulk addition at {site} of {elems} floats from shared byte {start} to global byte {global}: both must be 16-byte aligned, the length a multiple of 16 bytes", c.tid),
            );
        }
        let chunks = start / 16..(start + 4 * elems as usize) / 16;
        super::pipeline::engine_may_read(st, (c.tid, site), chunks.clone(), "bulk addition");
        for k in 0..elems {
            let v = f32::from_bits(st.shared.load(start + 4 * k as usize, 4));
            atomic(
                self.mem(),
                self.base(),
                self.len,
                false,
                at + k,
                site,
                |old: f32| old + v,
            );
        }
        super::pipeline::engine_reads(st, (c.tid, site), chunks);
    }
}

impl<T, const N: usize> SharedArray<T, N> {
    /// Byte offset of the array in the block's shared memory.
    pub(crate) fn byte_offset(&self) -> u32 {
        self.offset
    }
}

impl<T: Element, const N: usize> SharedArray<T, N> {
    fn mem(&self) -> &EmuMemory {
        &ctx().state().shared
    }

    /// Element `i`.
    #[track_caller]
    pub fn load(&self, i: u32) -> T {
        self.load_vec::<1>(i)[0]
    }

    /// `V` consecutive elements from `i` in one access.
    #[track_caller]
    pub fn load_vec<const V: usize>(&self, i: u32) -> [T; V] {
        access::<T, V>(
            self.mem(),
            self.offset as usize,
            N as u32,
            true,
            i,
            Kind::Load,
            Location::caller(),
            None,
        )
    }

    /// Stores element `i`.
    #[track_caller]
    pub fn store(&self, i: u32, v: T) {
        self.store_vec::<1>(i, [v]);
    }

    /// Stores `V` consecutive elements from `i` in one access.
    #[track_caller]
    pub fn store_vec<const V: usize>(&self, i: u32, v: [T; V]) {
        access::<T, V>(
            self.mem(),
            self.offset as usize,
            N as u32,
            true,
            i,
            Kind::Store,
            Location::caller(),
            Some(v),
        );
    }
}

impl<T: Atomic, const N: usize> SharedArray<T, N> {
    /// Atomically adds `v` to element `i`; returns the old value.
    #[track_caller]
    pub fn atomic_add(&self, i: u32, v: T) -> T {
        atomic(
            self.mem(),
            self.offset as usize,
            N as u32,
            true,
            i,
            Location::caller(),
            |old| T::add(old, v),
        )
    }

    /// Atomically replaces element `i` by `max(old, v)`; returns the old value.
    #[track_caller]
    pub fn atomic_max(&self, i: u32, v: T) -> T {
        atomic(
            self.mem(),
            self.offset as usize,
            N as u32,
            true,
            i,
            Location::caller(),
            |old| T::max(old, v),
        )
    }
}
