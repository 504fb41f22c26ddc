//! The device API on NVIDIA GPUs (`nvptx64`): the same names and signatures as the emulator,
//! lowered to PTX special registers, `bar.sync`, `shfl.sync`, `ld/st.global` (vectorised through
//! alignment), `ld/st.shared` on one dynamic `.shared` region, and `atom`.

use super::element::{Atomic, AtomicKind, Element, Element32};
use super::SharedArray;
use core::arch::nvptx;
use core::arch::{asm, global_asm};
use core::marker::PhantomData;

mod cluster;
mod pipeline;
mod sm90;
pub use cluster::{cluster_ctarank, cluster_size, cluster_sync};
pub use pipeline::{
    bulk_commit_group, bulk_wait_group, bulk_wait_group_read, fence_barrier_init,
    named_barrier_arrive, named_barrier_sync, setmaxnreg_dec, setmaxnreg_inc, Tma, TmaMut,
};
pub use sm90::{
    cp_async_16, cp_async_16_unchecked, cp_async_commit, cp_async_wait, fence_proxy_async,
    grid_dependency_wait, launch_dependents, wgmma_commit, wgmma_fence, wgmma_fence_operands,
};

/// A panicking kernel (a failed bounds check or assertion) traps: the launch fails with an error
/// the host reports. Every kernel crate gets this handler through ck-core, so a crate needs no
/// `#[panic_handler]` of its own to be built for nvptx64.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; nothing runs after it.
    unsafe { nvptx::trap() }
}

// One dynamic shared-memory region per kernel, sized at launch (the sum of its `shared!` arrays).
global_asm!(".extern .shared .align 16 .b8 ck_smem[];");

/// Index of this thread in its (1-D) block.
#[inline(always)]
pub fn thread_idx() -> u32 {
    // SAFETY: reads a special register; no memory is touched.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// Index of this block in the (1-D) grid.
#[inline(always)]
pub fn block_idx() -> u32 {
    // SAFETY: reads a special register; no memory is touched.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// Threads per block.
#[inline(always)]
pub fn block_dim() -> u32 {
    // SAFETY: reads a special register; no memory is touched.
    unsafe { nvptx::_block_dim_x() as u32 }
}

/// Blocks in the grid.
#[inline(always)]
pub fn grid_dim() -> u32 {
    // SAFETY: reads a special register; no memory is touched.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// Lane of this thread in its warp.
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_idx() % super::WARP_SIZE
}

/// Warp of this thread in its block.
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx() / super::WARP_SIZE
}

/// `bar.sync 0`.
#[inline(always)]
pub fn block_sync() {
    // SAFETY: a barrier touches no memory; one not every thread reaches hangs or faults the
    // launch (the emulator reports it as `barrier-divergence`), it does not corrupt memory.
    unsafe { nvptx::_syncthreads() }
}

/// `fence.acq_rel.gpu` (`__threadfence`): orders this thread's global-memory accesses before
/// it before those after it, for every block of the grid.
#[inline(always)]
pub fn fence_acq_rel_gpu() {
    // SAFETY: a memory fence; touches no memory.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) }
}

/// `bar.warp.sync` over the full warp.
#[inline(always)]
pub fn warp_sync() {
    // SAFETY: as for `block_sync`, over the warp.
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) }
}

macro_rules! shfl {
    ($name:ident, $mode:literal, $clamp:literal, $doc:literal) => {
        #[doc = $doc]
        #[inline(always)]
        pub fn $name<T: Element32>(v: T, lane_arg: u32) -> T {
            let out: u32;
            // SAFETY: a register exchange within the warp (`nomem`); lanes that do not take
            // part give undefined values, not undefined behaviour.
            unsafe {
                asm!(
                    concat!("shfl.sync.", $mode, ".b32 {o}, {v}, {l}, ", $clamp, ", 0xffffffff;"),
                    o = out(reg32) out,
                    v = in(reg32) v.to_bits(),
                    l = in(reg32) lane_arg,
                    options(nostack, nomem)
                )
            };
            T::from_bits(out)
        }
    };
}

shfl!(shfl_xor, "bfly", "0x1f", "The value of lane `lane ^ mask`.");
shfl!(
    shfl_down,
    "down",
    "0x1f",
    "The value of lane `lane + delta` (own value past the last lane)."
);
shfl!(
    shfl_up,
    "up",
    "0x0",
    "The value of lane `lane − delta` (own value before lane 0)."
);
shfl!(shfl_idx, "idx", "0x1f", "The value of lane `src % 32`.");

/// Bit `i` set iff lane `i`'s `pred` is true.
#[inline(always)]
pub fn ballot(pred: bool) -> u32 {
    let out: u32;
    // SAFETY: a register vote within the warp (`nomem`).
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {o}, p, 0xffffffff; }}",
            o = out(reg32) out,
            v = in(reg32) pred as u32,
            options(nostack, nomem)
        )
    };
    out
}

#[repr(C, align(4))]
#[derive(Clone, Copy)]
struct A4<X>(X);
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct A8<X>(X);
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct A16<X>(X);

/// Reads `N` elements at `p` as one naturally aligned access (so LLVM emits `ld.v2`/`ld.v4`).
///
/// # Safety
/// `p` points to `N` readable elements, aligned to the access size.
#[inline(always)]
unsafe fn read_vec<T: Element, const N: usize>(p: *const T) -> [T; N] {
    // SAFETY: the caller's promise; the wrappers only raise the alignment LLVM may assume to
    // the access size, which the caller guarantees.
    match T::BYTES as usize * N {
        16 => (p as *const A16<[T; N]>).read().0,
        8 => (p as *const A8<[T; N]>).read().0,
        4 => (p as *const A4<[T; N]>).read().0,
        _ => (p as *const [T; N]).read(),
    }
}

/// Writes `N` elements at `p` as one naturally aligned access.
///
/// # Safety
/// `p` points to `N` writable elements, aligned to the access size.
#[inline(always)]
unsafe fn write_vec<T: Element, const N: usize>(p: *mut T, v: [T; N]) {
    // SAFETY: as for `read_vec`.
    match T::BYTES as usize * N {
        16 => (p as *mut A16<[T; N]>).write(A16(v)),
        8 => (p as *mut A8<[T; N]>).write(A8(v)),
        4 => (p as *mut A4<[T; N]>).write(A4(v)),
        _ => (p as *mut [T; N]).write(v),
    }
}

/// A read-only global buffer of `T` (a kernel argument).
pub struct Global<T> {
    ptr: *const T,
    len: u32,
    _t: PhantomData<T>,
}

/// A writable global buffer of `T` (a kernel argument).
pub struct GlobalMut<T> {
    ptr: *mut T,
    len: u32,
    _t: PhantomData<T>,
}

/// Whether a vector of `N` elements of `T` at element `at` is aligned for one access: those of
/// 4, 8 or 16 bytes must start at a multiple of their size (buffers start 16-byte aligned).
#[inline(always)]
const fn aligned<T: Element, const N: usize>(at: u32) -> bool {
    match T::BYTES as usize * N {
        4 | 8 | 16 => at.is_multiple_of(N as u32),
        _ => true,
    }
}

/// Traps (the launch fails, as a panicking kernel's does) unless the `N` elements from `i` lie
/// in a buffer of `len` and, moved as one access, are aligned to its size: the GPU's
/// counterpart of the emulator's `out-of-bounds` and `misaligned-access` errors, so that no
/// safe access reads or writes memory its buffer does not own.
#[inline(always)]
fn check_access<T: Element, const N: usize>(i: u32, len: u32) {
    let inside = N as u32 <= len && i <= len - N as u32;
    if !inside || !aligned::<T, N>(i) {
        // SAFETY: `trap` aborts the kernel; nothing runs after it.
        unsafe { nvptx::trap() }
    }
}

/// A view whose footprint does not fit its memory: the kernel traps where it is made (the
/// emulator reports `out-of-bounds`).
#[inline(always)]
pub(crate) fn view_outside_memory(_size: u32) -> ! {
    // SAFETY: `trap` aborts the kernel; nothing runs after it.
    unsafe { nvptx::trap() }
}

/// A [`TmaBoxView`](crate::tile::TmaBoxView) whose shape or start does not fit the boxes: the
/// kernel traps where it is made (the emulator reports `misaligned-access`).
#[inline(always)]
pub(crate) fn tma_box_view_unfit(_why: core::fmt::Arguments<'_>) -> ! {
    // SAFETY: `trap` aborts the kernel; nothing runs after it.
    unsafe { nvptx::trap() }
}

macro_rules! handle_common {
    ($h:ident, $ptr:ty) => {
        impl<T> Clone for $h<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $h<T> {}

        impl<T: Element> $h<T> {
            /// The handle of a kernel's pointer and length arguments (emitted by
            /// `#[tile_kernel]` for the PTX entry point).
            ///
            /// # Safety
            /// `ptr` must be 16-byte aligned and point to `len` elements of `T` that stay
            /// allocated (and, for a writable handle, are not written by anything but this
            /// kernel) until the kernel ends.
            #[doc(hidden)]
            #[inline(always)]
            pub unsafe fn from_raw(ptr: $ptr, len: u32) -> Self {
                $h {
                    ptr,
                    len,
                    _t: PhantomData,
                }
            }

            /// A handle to no memory: every access is out of bounds (an optional input a
            /// kernel compiled without it never reads).
            #[inline(always)]
            pub fn empty() -> Self {
                $h {
                    ptr: core::ptr::NonNull::dangling().as_ptr(),
                    len: 0,
                    _t: PhantomData,
                }
            }

            /// Elements `start..start + len` as a buffer of their own; the kernel traps
            /// unless the slice lies inside this buffer and starts on a 16-byte boundary.
            #[inline(always)]
            pub fn slice(&self, start: u32, len: u32) -> Self {
                let inside = start as u64 + len as u64 <= self.len as u64;
                if !inside || !(start as u64 * T::BYTES as u64).is_multiple_of(16) {
                    // SAFETY: `trap` aborts the kernel; nothing runs after it.
                    unsafe { nvptx::trap() }
                }
                $h {
                    // SAFETY: `start ≤ self.len`, so the pointer stays inside (or one past)
                    // the allocation `from_raw` vouched for.
                    ptr: unsafe { self.ptr.add(start as usize) },
                    len,
                    _t: PhantomData,
                }
            }

            /// Number of elements.
            #[inline(always)]
            pub fn len(&self) -> u32 {
                self.len
            }

            /// True if the buffer has no elements.
            #[inline(always)]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Element `i`; out of bounds the kernel traps.
            #[inline(always)]
            pub fn load(&self, i: u32) -> T {
                self.load_vec::<1>(i)[0]
            }

            /// `N` consecutive elements from `i` in one access; out of bounds the kernel traps.
            #[inline(always)]
            pub fn load_vec<const N: usize>(&self, i: u32) -> [T; N] {
                check_access::<T, N>(i, self.len);
                // SAFETY: checked just above.
                unsafe { self.load_vec_unchecked(i) }
            }

            /// [`Self::load_vec`] without the bounds check.
            ///
            /// # Safety
            /// `i + N ≤ self.len()`, and `i` a multiple of `N` when the vector is 4, 8 or 16
            /// bytes.
            #[inline(always)]
            pub unsafe fn load_vec_unchecked<const N: usize>(&self, i: u32) -> [T; N] {
                // SAFETY: in bounds and aligned (the caller's promise) in memory `from_raw`
                // vouched for.
                unsafe { read_vec(self.ptr.add(i as usize)) }
            }
        }
    };
}

handle_common!(Global, *const T);
handle_common!(GlobalMut, *mut T);

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
            ptr: self.ptr.cast(),
            len: self.len,
            _t: PhantomData,
        }
    }

    /// Stores element `i`; out of bounds the kernel traps.
    #[inline(always)]
    pub fn store(&self, i: u32, v: T) {
        self.store_vec::<1>(i, [v]);
    }

    /// Stores `N` consecutive elements from `i` in one access; out of bounds the kernel traps.
    #[inline(always)]
    pub fn store_vec<const N: usize>(&self, i: u32, v: [T; N]) {
        check_access::<T, N>(i, self.len);
        // SAFETY: checked just above.
        unsafe { self.store_vec_unchecked(i, v) }
    }

    /// [`Self::store_vec`] without the bounds check.
    ///
    /// # Safety
    /// `i + N ≤ self.len()`, and `i` a multiple of `N` when the vector is 4, 8 or 16 bytes.
    #[inline(always)]
    pub unsafe fn store_vec_unchecked<const N: usize>(&self, i: u32, v: [T; N]) {
        // SAFETY: in bounds (the caller's promise) of writable memory `from_raw` vouched for.
        unsafe { write_vec(self.ptr.add(i as usize), v) }
    }

    /// Read-only view of the same buffer.
    #[inline(always)]
    pub fn as_const(&self) -> Global<T> {
        Global {
            ptr: self.ptr,
            len: self.len,
            _t: PhantomData,
        }
    }
}

macro_rules! atom {
    ($space:literal, $reg:ident, $op:literal, $addr:expr, $v:expr) => {{
        let old: u32;
        asm!(
            concat!("atom.", $space, ".", $op, " {o}, [{a}], {v};"),
            o = out(reg32) old,
            a = in($reg) $addr,
            v = in(reg32) $v,
            options(nostack)
        );
        old
    }};
}

macro_rules! atomics {
    ($space:literal, $reg:ident, $addr_ty:ty) => {
        /// `atom.add` at `addr`.
        ///
        /// # Safety
        /// `addr` is a `T` in this state space that the kernel may write.
        #[inline(always)]
        pub(super) unsafe fn atomic_add_at<T: Atomic>(addr: $addr_ty, v: T) -> T {
            T::from_bits(match T::KIND {
                AtomicKind::F32 => atom!($space, $reg, "add.f32", addr, v.to_bits()),
                AtomicKind::U32 | AtomicKind::I32 => atom!($space, $reg, "add.u32", addr, v.to_bits()),
            })
        }

        /// `atom.max` at `addr` (a compare-and-swap loop for f32).
        ///
        /// # Safety
        /// As for `atomic_add_at`.
        #[inline(always)]
        pub(super) unsafe fn atomic_max_at<T: Atomic>(addr: $addr_ty, v: T) -> T {
            T::from_bits(match T::KIND {
                AtomicKind::U32 => atom!($space, $reg, "max.u32", addr, v.to_bits()),
                AtomicKind::I32 => atom!($space, $reg, "max.s32", addr, v.to_bits()),
                AtomicKind::F32 => {
                    // No native float max: compare-and-swap until the max is in place.
                    let mut old: u32 = 0;
                    loop {
                        let new = T::max(T::from_bits(old), v).to_bits();
                        let seen: u32;
                        asm!(
                            concat!("atom.", $space, ".cas.b32 {o}, [{a}], {c}, {n};"),
                            o = out(reg32) seen,
                            a = in($reg) addr,
                            c = in(reg32) old,
                            n = in(reg32) new,
                            options(nostack)
                        );
                        if seen == old {
                            break old;
                        }
                        old = seen;
                    }
                }
            })
        }
    };
}

mod global_atomics {
    use super::*;
    atomics!("global", reg64, u64);
}

mod shared_atomics {
    use super::*;
    atomics!("shared", reg32, u32);
}

impl<T: Atomic> GlobalMut<T> {
    /// Atomically adds `v` to element `i`; returns the old value. Out of bounds the kernel
    /// traps.
    #[inline(always)]
    pub fn atomic_add(&self, i: u32, v: T) -> T {
        check_access::<T, 1>(i, self.len);
        // SAFETY: in bounds (checked) of writable memory `from_raw` vouched for.
        unsafe { global_atomics::atomic_add_at(self.ptr.add(i as usize) as u64, v) }
    }

    /// Atomically replaces element `i` by `max(old, v)`; returns the old value. Out of bounds
    /// the kernel traps.
    #[inline(always)]
    pub fn atomic_max(&self, i: u32, v: T) -> T {
        check_access::<T, 1>(i, self.len);
        // SAFETY: in bounds (checked) of writable memory `from_raw` vouched for.
        unsafe { global_atomics::atomic_max_at(self.ptr.add(i as usize) as u64, v) }
    }
}

/// 32-bit shared-window address of the block's dynamic shared memory.
#[inline(always)]
fn smem_base() -> u32 {
    let a: u32;
    // SAFETY: reads a symbol's address; no memory is touched.
    unsafe { asm!("mov.u32 {0}, ck_smem;", out(reg32) a, options(pure, nomem, nostack)) };
    a
}

/// Little-endian bytes of up to 16 bytes of elements, as words.
#[inline(always)]
fn to_words<T: Element, const N: usize>(v: [T; N]) -> [u32; 4] {
    let mut w = [0u32; 4];
    let mut k = 0;
    while k < N {
        let bit = k * T::BYTES as usize * 8;
        w[bit / 32] |= v[k].to_bits() << (bit % 32);
        k += 1;
    }
    w
}

#[inline(always)]
fn from_words<T: Element, const N: usize>(w: [u32; 4]) -> [T; N] {
    let mut out = [T::default(); N];
    let mut k = 0;
    while k < N {
        let bit = k * T::BYTES as usize * 8;
        let mask = if T::BYTES == 4 {
            u32::MAX
        } else {
            (1u32 << (T::BYTES * 8)) - 1
        };
        out[k] = T::from_bits((w[bit / 32] >> (bit % 32)) & mask);
        k += 1;
    }
    out
}

impl<T, const N: usize> SharedArray<T, N> {
    /// Shared-window byte address of the array's start.
    #[inline(always)]
    pub(crate) fn base_addr(&self) -> u32 {
        smem_base() + self.offset
    }
}

impl<T: Element, const N: usize> SharedArray<T, N> {
    #[inline(always)]
    fn addr(&self, i: u32) -> u32 {
        smem_base() + self.offset + i * T::BYTES
    }

    /// Element `i`.
    #[inline(always)]
    pub fn load(&self, i: u32) -> T {
        self.load_vec::<1>(i)[0]
    }

    /// `V` consecutive elements from `i` in one `ld.shared`.
    #[inline(always)]
    pub fn load_vec<const V: usize>(&self, i: u32) -> [T; V] {
        let a = self.addr(i);
        let mut w = [0u32; 4];
        // SAFETY: shared memory is outside Rust's memory model here (inline asm on the block's
        // window); an address past the kernel's allocation is a hardware fault that fails the
        // launch ("out of range shared address"), never another block's or Rust's memory.
        unsafe {
            match T::BYTES as usize * V {
                16 => {
                    asm!("ld.shared.v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];", out(reg32) w[0], out(reg32) w[1], out(reg32) w[2], out(reg32) w[3], in(reg32) a, options(nostack, readonly))
                }
                8 => {
                    asm!("ld.shared.v2.b32 {{{0}, {1}}}, [{2}];", out(reg32) w[0], out(reg32) w[1], in(reg32) a, options(nostack, readonly))
                }
                4 => {
                    asm!("ld.shared.b32 {0}, [{1}];", out(reg32) w[0], in(reg32) a, options(nostack, readonly))
                }
                2 => {
                    asm!("ld.shared.u16 {0}, [{1}];", out(reg32) w[0], in(reg32) a, options(nostack, readonly))
                }
                _ => {
                    asm!("ld.shared.u8 {0}, [{1}];", out(reg32) w[0], in(reg32) a, options(nostack, readonly))
                }
            }
        }
        from_words(w)
    }

    /// Stores element `i`.
    #[inline(always)]
    pub fn store(&self, i: u32, v: T) {
        self.store_vec::<1>(i, [v]);
    }

    /// Stores `V` consecutive elements from `i` in one `st.shared`.
    #[inline(always)]
    pub fn store_vec<const V: usize>(&self, i: u32, v: [T; V]) {
        let a = self.addr(i);
        let w = to_words(v);
        // SAFETY: as for `load_vec`: the hardware bounds shared accesses to the allocation.
        unsafe {
            match T::BYTES as usize * V {
                16 => {
                    asm!("st.shared.v4.b32 [{0}], {{{1}, {2}, {3}, {4}}};", in(reg32) a, in(reg32) w[0], in(reg32) w[1], in(reg32) w[2], in(reg32) w[3], options(nostack))
                }
                8 => {
                    asm!("st.shared.v2.b32 [{0}], {{{1}, {2}}};", in(reg32) a, in(reg32) w[0], in(reg32) w[1], options(nostack))
                }
                4 => {
                    asm!("st.shared.b32 [{0}], {1};", in(reg32) a, in(reg32) w[0], options(nostack))
                }
                2 => {
                    asm!("st.shared.u16 [{0}], {1};", in(reg32) a, in(reg32) w[0], options(nostack))
                }
                _ => {
                    asm!("st.shared.u8 [{0}], {1};", in(reg32) a, in(reg32) w[0], options(nostack))
                }
            }
        }
    }
}

impl<T: Atomic, const N: usize> SharedArray<T, N> {
    /// Atomically adds `v` to element `i`; returns the old value.
    #[inline(always)]
    pub fn atomic_add(&self, i: u32, v: T) -> T {
        // SAFETY: as for `load_vec`: the hardware bounds shared accesses to the allocation.
        unsafe { shared_atomics::atomic_add_at(self.addr(i), v) }
    }

    /// Atomically replaces element `i` by `max(old, v)`; returns the old value.
    #[inline(always)]
    pub fn atomic_max(&self, i: u32, v: T) -> T {
        // SAFETY: as for `load_vec`: the hardware bounds shared accesses to the allocation.
        unsafe { shared_atomics::atomic_max_at(self.addr(i), v) }
    }
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (see the emulator's documentation for
/// the fragment layouts).
#[inline(always)]
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut d = [0f32; 4];
    // SAFETY: registers only (`nomem`).
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};",
            out(reg32) d[0], out(reg32) d[1], out(reg32) d[2], out(reg32) d[3],
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1],
            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
            options(pure, nomem, nostack)
        );
    }
    d
}

impl<T: Element, const N: usize> SharedArray<T, N> {
    #[inline(always)]
    fn byte_addr(&self, elem: u32) -> u32 {
        smem_base() + self.offset + elem * T::BYTES
    }
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16` at element `elem` of `smem` (this lane's row).
#[inline(always)]
pub fn ldmatrix_x4<T: Element, const N: usize>(smem: &SharedArray<T, N>, elem: u32) -> [u32; 4] {
    let mut r = [0u32; 4];
    // SAFETY: reads shared memory only, bounded by the hardware like `SharedArray::load_vec`.
    unsafe {
        asm!(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];",
            out(reg32) r[0], out(reg32) r[1], out(reg32) r[2], out(reg32) r[3],
            in(reg32) smem.byte_addr(elem),
            options(nostack, readonly)
        );
    }
    r
}

/// `stmatrix.sync.aligned.m8n8.x4.shared.b16` at element `elem` of `smem` (this lane's row):
/// the inverse of [`ldmatrix_x4`] — lanes 8j..8j+8 give the rows of matrix j, and `regs[j]`
/// of lane l holds its elements `(l / 4, 2(l % 4) + {0, 1})`.
#[inline(always)]
pub fn stmatrix_x4<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
    regs: [u32; 4],
) {
    // SAFETY: writes shared memory only, bounded by the hardware like `SharedArray::store_vec`.
    unsafe {
        asm!(
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [{0}], {{{1}, {2}, {3}, {4}}};",
            in(reg32) smem.byte_addr(elem),
            in(reg32) regs[0], in(reg32) regs[1], in(reg32) regs[2], in(reg32) regs[3],
            options(nostack)
        );
    }
}

/// `x`, as a value the optimiser cannot see through: what a loop derives from it (a wgmma
/// descriptor's k-steps, an address) is computed in the loop, not hoisted before it into
/// registers held across every iteration (which, beside a kernel's accumulators, spill).
#[inline(always)]
pub fn opaque(x: u64) -> u64 {
    let r: u64;
    // SAFETY: a register move; not `pure`, so the compiler keeps it where it is.
    unsafe {
        asm!("mov.b64 {0}, {1};", out(reg64) r, in(reg64) x, options(nostack, nomem));
    }
    r
}

/// `stmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`stmatrix_x4`], each matrix stored
/// transposed — element `(l / 4, 2(l % 4) + {0, 1})` of `regs[j]` goes to column `l / 4` of
/// rows `2(l % 4) + {0, 1}`.
#[inline(always)]
pub fn stmatrix_x4_trans<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
    regs: [u32; 4],
) {
    // SAFETY: as for `stmatrix_x4`.
    unsafe {
        asm!(
            "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [{0}], {{{1}, {2}, {3}, {4}}};",
            in(reg32) smem.byte_addr(elem),
            in(reg32) regs[0], in(reg32) regs[1], in(reg32) regs[2], in(reg32) regs[3],
            options(nostack)
        );
    }
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`.
#[inline(always)]
pub fn ldmatrix_x4_trans<T: Element, const N: usize>(
    smem: &SharedArray<T, N>,
    elem: u32,
) -> [u32; 4] {
    let mut r = [0u32; 4];
    // SAFETY: as for `ldmatrix_x4`.
    unsafe {
        asm!(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];",
            out(reg32) r[0], out(reg32) r[1], out(reg32) r[2], out(reg32) r[3],
            in(reg32) smem.byte_addr(elem),
            options(nostack, readonly)
        );
    }
    r
}
