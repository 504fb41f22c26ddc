//! Hopper's asynchronous-pipeline primitives on the GPU: mbarriers, named barriers, the TMA
//! copy engine and `setmaxnreg`. The emulator's versions (`device::emu::pipeline`) document
//! the semantics and the sanitizer's rules.

use super::{Element, GlobalMut, SharedArray};
use crate::device::Mbarrier;
use core::arch::{asm, nvptx};
use core::marker::PhantomData;

/// Stops the kernel (an index a safe primitive cannot honour).
#[inline(always)]
fn trap() -> ! {
    // SAFETY: `trap` aborts the kernel; nothing runs after it.
    unsafe { nvptx::trap() }
}

impl<const N: usize> SharedArray<Mbarrier, N> {
    /// Shared address of barrier `i`; past the array the kernel traps.
    #[inline(always)]
    pub(super) fn barrier(&self, i: u32) -> u32 {
        if i as usize >= N {
            trap();
        }
        self.base_addr() + 8 * i
    }

    /// `mbarrier.init`: barrier `i` expects `arrivals` arrivals per phase, starting in phase 0.
    #[inline(always)]
    pub fn init(&self, i: u32, arrivals: u32) {
        let a = self.barrier(i);
        // SAFETY: writes the barrier's 8 shared bytes, inside the array (checked above).
        unsafe {
            asm!("mbarrier.init.shared::cta.b64 [{0}], {1};", in(reg32) a, in(reg32) arrivals, options(nostack))
        };
    }

    /// `mbarrier.arrive`: one arrival on barrier `i` (a release of this thread's earlier
    /// memory accesses to whoever waits for the phase).
    #[inline(always)]
    pub fn arrive(&self, i: u32) {
        let a = self.barrier(i);
        // SAFETY: updates the barrier's shared bytes, inside the array.
        unsafe {
            asm!("{{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [{0}]; }}", in(reg32) a, options(nostack))
        };
    }

    /// `mbarrier.arrive.expect_tx`: the phase also waits for `bytes` more bytes of
    /// asynchronous copies (a TMA copy's `complete_tx`), then one arrival.
    #[inline(always)]
    pub fn arrive_expect_tx(&self, i: u32, bytes: u32) {
        let a = self.barrier(i);
        // SAFETY: updates the barrier's shared bytes, inside the array.
        unsafe {
            asm!("{{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [{0}], {1}; }}", in(reg32) a, in(reg32) bytes, options(nostack))
        };
    }

    /// Waits until the phase of barrier `i` whose parity is `parity` (0 or 1) has completed
    /// (`mbarrier.try_wait.parity`, acquire): phase `k` completes when its arrivals and bytes
    /// are all in, and `wait(i, k % 2)` returns once it has.
    #[inline(always)]
    pub fn wait(&self, i: u32, parity: u32) {
        let a = self.barrier(i);
        loop {
            let done: u32;
            // SAFETY: reads the barrier's shared bytes, inside the array.
            unsafe {
                asm!(
                    "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{1}], {2}; selp.u32 {0}, 1, 0, p; }}",
                    out(reg32) done,
                    in(reg32) a,
                    in(reg32) parity,
                    options(nostack)
                )
            };
            if done != 0 {
                break;
            }
        }
    }
}

/// `fence.mbarrier_init.release.cluster`: makes this thread's `init`s visible to the copy
/// engine and to other threads; a [`block_sync`](super::block_sync) follows, before any use.
#[inline(always)]
pub fn fence_barrier_init() {
    // SAFETY: a fence; touches no memory.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
}

/// `barrier.sync id, threads`: waits until `threads` threads (whole warps) have arrived at
/// named barrier `id` (1 to 15; 0 is [`block_sync`](super::block_sync)'s), counting those that
/// [`named_barrier_arrive`]d.
///
/// Not `bar.sync` (= `barrier.sync.aligned`), which requires every thread of a warp to execute
/// the same barrier instruction: LLVM may duplicate a loop's tail so that one lane (a leader
/// that did extra work) reaches the barrier through another copy of it than its warp's other
/// lanes — undefined behaviour with the aligned form, a hang on the H200 (the attention
/// backward at head dim 64).
#[inline(always)]
pub fn named_barrier_sync(id: u32, threads: u32) {
    // SAFETY: a barrier touches no memory (a count no one completes hangs the launch, as a
    // divergent block_sync does; the emulator reports it as a deadlock).
    unsafe { asm!("barrier.sync {0}, {1};", in(reg32) id, in(reg32) threads, options(nostack)) };
}

/// `barrier.arrive id, threads`: arrives at named barrier `id` without waiting (not aligned,
/// as [`named_barrier_sync`]).
#[inline(always)]
pub fn named_barrier_arrive(id: u32, threads: u32) {
    // SAFETY: as for `named_barrier_sync`.
    unsafe { asm!("barrier.arrive {0}, {1};", in(reg32) id, in(reg32) threads, options(nostack)) };
}

/// `setmaxnreg.inc.sync.aligned.u32 REGS`: this warpgroup may use up to `REGS` registers per
/// thread (24 to 256, a multiple of 8), taken from those other warpgroups released. Every
/// thread of the warpgroup executes it; the kernel needs launch bounds
/// (`#[tile_kernel(min_blocks_per_sm = 1)]`) for ptxas to honour it.
#[inline(always)]
pub fn setmaxnreg_inc<const REGS: u32>() {
    const {
        assert!(
            REGS >= 24 && REGS <= 256 && REGS.is_multiple_of(8),
            "error[setmaxnreg]: REGS must be 24 to 256, a multiple of 8"
        )
    };
    // SAFETY: changes the register budget of the warpgroup; touches no memory.
    unsafe {
        asm!("setmaxnreg.inc.sync.aligned.u32 {r};", r = const REGS, options(nostack, nomem))
    };
}

/// `setmaxnreg.dec.sync.aligned.u32 REGS`: this warpgroup gives up registers down to `REGS`
/// per thread (see [`setmaxnreg_inc`]).
#[inline(always)]
pub fn setmaxnreg_dec<const REGS: u32>() {
    const {
        assert!(
            REGS >= 24 && REGS <= 256 && REGS.is_multiple_of(8),
            "error[setmaxnreg]: REGS must be 24 to 256, a multiple of 8"
        )
    };
    // SAFETY: changes the register budget of the warpgroup; touches no memory.
    unsafe {
        asm!("setmaxnreg.dec.sync.aligned.u32 {r};", r = const REGS, options(nostack, nomem))
    };
}

/// Declares a tensor-map handle type (what [`Tma`] and [`TmaMut`] share): the address of a
/// 128-byte tensor map in global memory and the bytes of one box, `Copy`, made by `from_raw`.
macro_rules! tensor_map_handle {
    ($(#[$doc:meta])* $name:ident, safety: $safety:literal) => {
        $(#[$doc])*
        pub struct $name<T, const R: usize> {
            map: *const u8,
            box_bytes: u32,
            _t: PhantomData<T>,
        }

        impl<T, const R: usize> Clone for $name<T, R> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T, const R: usize> Copy for $name<T, R> {}

        impl<T: Element, const R: usize> $name<T, R> {
            /// The handle of the tensor map at `map` whose box is `box_bytes` bytes.
            ///
            /// # Safety
            #[doc = $safety]
            #[inline(always)]
            pub unsafe fn from_raw(map: *const u8, box_bytes: u32) -> Self {
                $name {
                    map,
                    box_bytes,
                    _t: PhantomData,
                }
            }

            /// Bytes one box moves between the tensor and shared memory (what a copy counts
            /// on its mbarrier).
            #[inline(always)]
            pub fn box_bytes(&self) -> u32 {
                self.box_bytes
            }

            /// The tensor map's address.
            #[inline(always)]
            pub(super) fn map(&self) -> *const u8 {
                self.map
            }

            /// `prefetch.tensormap`: fetches the tensor map into the cache ahead of the first
            /// copy.
            #[inline(always)]
            pub fn prefetch(&self) {
                // SAFETY: a prefetch of the map's (valid) address; no architectural effect.
                unsafe { asm!("prefetch.tensormap [{0}];", in(reg64) self.map, options(nostack)) };
            }
        }
    };
}

tensor_map_handle!(
    /// A global tensor as the TMA copy engine sees it, rank `R` (a kernel argument made from a
    /// host `TensorMap`): the address of its 128-byte tensor map in global memory, and the
    /// bytes one copy moves.
    Tma,
    safety: "`map` is the device address of a tensor map of rank `R` and element `T`, encoded by the driver, whose box has `box_bytes` bytes and whose tensor stays allocated while the kernel runs (the generated entry point's contract: the launcher passes a host `TensorMap`'s)."
);

tensor_map_handle!(
    /// A global tensor the TMA copy engine writes, rank `R` (a kernel argument made from a host
    /// `TensorMapMut`): the address of its 128-byte tensor map and the bytes one store moves.
    TmaMut,
    safety: "As for [`Tma::from_raw`], and no other argument of the launch reaches the tensor's memory (the launcher passes a host `TensorMapMut`'s, which borrows its buffer mutably)."
);

impl<T: Element, const R: usize> Tma<T, R> {
    /// `cp.async.bulk.tensor.Rd.shared::cluster.global.mbarrier::complete_tx::bytes`: copies the
    /// box at `coords` (elements, innermost first; outside the tensor reads as zeros) into
    /// `dst` from element `dst_elem`, and completes its [`Self::box_bytes`] on barrier `bar`
    /// of `bars`. A box that does not fit in `dst` from `dst_elem`, or a barrier past `bars`,
    /// traps. The destination must be aligned to 128 bytes (1024 with the 128-byte swizzle).
    #[inline(always)]
    pub fn copy_to_shared<const N: usize, const B: usize>(
        &self,
        coords: [i32; R],
        dst: &SharedArray<T, N>,
        dst_elem: u32,
        bars: &SharedArray<Mbarrier, B>,
        bar: u32,
    ) {
        if dst_elem as u64 * T::BYTES as u64 + self.box_bytes as u64 > N as u64 * T::BYTES as u64 {
            trap();
        }
        let (d, b, m) = (
            dst.base_addr() + dst_elem * T::BYTES,
            bars.barrier(bar),
            self.map,
        );
        let c = |k: usize| if k < R { coords[k] } else { 0 };
        // SAFETY: the copy engine reads the tensor through the map (inside the tensor's
        // footprint, which the host checked against its buffer; outside reads as zeros) and
        // writes `box_bytes` bytes of shared memory from `d`, inside `dst` (checked above).
        unsafe {
            match R {
                1 => {
                    asm!("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}}}], [{3}];", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) b, options(nostack))
                }
                2 => {
                    asm!("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}}}], [{4}];", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) b, options(nostack))
                }
                3 => {
                    asm!("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}, {4}}}], [{5}];", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) b, options(nostack))
                }
                4 => {
                    asm!("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}, {4}, {5}}}], [{6}];", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) c(3), in(reg32) b, options(nostack))
                }
                _ => {
                    asm!("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}, {4}, {5}, {6}}}], [{7}];", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) c(3), in(reg32) c(4), in(reg32) b, options(nostack))
                }
            }
        }
    }
}

impl<T: Element, const R: usize> TmaMut<T, R> {
    /// `cp.async.bulk.tensor.Rd.global.shared::cta.bulk_group`: writes the box at `coords`
    /// (elements, innermost first; what lies outside the tensor is not written) from `src`
    /// at element `src_elem`, laid out as the map's swizzle says. The copy engine reads the
    /// shared bytes after this returns: they may be written again only after
    /// [`bulk_commit_group`] and a [`bulk_wait_group_read`] that retires the group (and the
    /// block must not exit before then). Shared-memory writes of other threads must be
    /// ordered before the store by [`fence_proxy_async`](super::fence_proxy_async) and a
    /// barrier. A box that does not fit in `src` from `src_elem` traps; the source must be
    /// aligned to 128 bytes (1024 with the 128-byte swizzle).
    #[inline(always)]
    pub fn store_from_shared<const N: usize>(
        &self,
        coords: [i32; R],
        src: &SharedArray<T, N>,
        src_elem: u32,
    ) {
        if src_elem as u64 * T::BYTES as u64 + self.box_bytes as u64 > N as u64 * T::BYTES as u64 {
            trap();
        }
        let (s, m) = (src.base_addr() + src_elem * T::BYTES, self.map);
        let c = |k: usize| if k < R { coords[k] } else { 0 };
        // SAFETY: the copy engine reads `box_bytes` bytes of shared memory from `s`, inside
        // `src` (checked above), and writes the tensor through the map (clipped to the tensor,
        // whose footprint the host checked against its buffer, which no other argument
        // reaches).
        unsafe {
            match R {
                1 => {
                    asm!("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [{0}, {{{1}}}], [{2}];", in(reg64) m, in(reg32) c(0), in(reg32) s, options(nostack))
                }
                2 => {
                    asm!("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{0}, {{{1}, {2}}}], [{3}];", in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) s, options(nostack))
                }
                3 => {
                    asm!("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [{0}, {{{1}, {2}, {3}}}], [{4}];", in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) s, options(nostack))
                }
                4 => {
                    asm!("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [{0}, {{{1}, {2}, {3}, {4}}}], [{5}];", in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) c(3), in(reg32) s, options(nostack))
                }
                _ => {
                    asm!("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [{0}, {{{1}, {2}, {3}, {4}, {5}}}], [{6}];", in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) c(3), in(reg32) c(4), in(reg32) s, options(nostack))
                }
            }
        }
    }
}

impl GlobalMut<f32> {
    /// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32`: adds `elems` floats of
    /// `src` from element `src_elem` to this buffer from element `at`, in the copy engine (each
    /// element atomically, at L2; one instruction for the whole run, where per-element atomics
    /// take one per thread and element). Like [`TmaMut::store_from_shared`]: the shared bytes
    /// are read after this returns, so they may be written again only after
    /// [`bulk_commit_group`] and a [`bulk_wait_group_read`] that retires the group (or
    /// [`bulk_wait_group`], after which the additions are also done); other threads' writes to
    /// them must be ordered before it by [`fence_proxy_async`](super::fence_proxy_async) and a
    /// barrier. Both runs must lie inside their buffers and start on 16-byte boundaries, and
    /// `elems` be a multiple of 4; otherwise the kernel traps.
    #[inline(always)]
    pub fn bulk_add_from_shared<const N: usize>(
        &self,
        at: u32,
        src: &SharedArray<f32, N>,
        src_elem: u32,
        elems: u32,
    ) {
        let (s, g) = (
            src.base_addr() + src_elem * 4,
            self.ptr as u64 + at as u64 * 4,
        );
        let inside = at as u64 + elems as u64 <= self.len as u64
            && src_elem as u64 + elems as u64 <= N as u64;
        if !inside || !elems.is_multiple_of(4) || s % 16 != 0 || g % 16 != 0 {
            trap();
        }
        // SAFETY: the copy engine reads `4 · elems` bytes of shared memory from `s`, inside
        // `src`, and adds them to as many bytes of global memory from `g`, inside this
        // writable buffer (both checked above).
        unsafe {
            asm!(
                "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{0}], [{1}], {2};",
                in(reg64) g,
                in(reg32) s,
                in(reg32) elems * 4,
                options(nostack)
            )
        };
    }
}

/// `cp.async.bulk.commit_group`: this thread's TMA stores since its last commit form one group.
#[inline(always)]
pub fn bulk_commit_group() {
    // SAFETY: groups the thread's issued stores; touches no memory.
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) };
}

/// `cp.async.bulk.wait_group PENDING`: waits until all but this thread's `PENDING` most recent
/// store groups are complete — their shared memory read and their global writes done (e.g. a
/// bulk addition another block will read once this thread signals it).
#[inline(always)]
pub fn bulk_wait_group<const PENDING: u32>() {
    // SAFETY: waits; touches no memory.
    unsafe { asm!("cp.async.bulk.wait_group {n};", n = const PENDING, options(nostack)) };
}

/// `cp.async.bulk.wait_group.read PENDING`: waits until the copy engine has read the shared
/// memory of all but this thread's `PENDING` most recent store groups (their global writes may
/// still be under way), so those bytes may be written again.
#[inline(always)]
pub fn bulk_wait_group_read<const PENDING: u32>() {
    // SAFETY: waits; touches no memory.
    unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const PENDING, options(nostack)) };
}
