//! Hopper's asynchronous pipeline in the emulator: mbarriers, named barriers, TMA copies and
//! `setmaxnreg`, with the sanitizer's rules.
//!
//! * An **mbarrier** is state beside shared memory, keyed by its byte offset. `init` is a write
//!   of its 8 bytes and every later use a read of them, so a thread that uses a barrier without
//!   being ordered after its `init` (a `block_sync` between) is a `shared-race`. Each phase
//!   completes when its arrivals and its transaction bytes are all in; an arrival *releases*
//!   the arriving thread's accesses into the phase, and a `wait` that returns *acquires* them
//!   (see `clocks`), so what a producer wrote before arriving is ordered before what a consumer
//!   reads after waiting — and nothing else is.
//! * A **TMA copy** reads the tensor when issued and writes its shared bytes when the phase of
//!   the mbarrier it signals completes; until then touching them (any thread) is a
//!   `shared-race` naming the copy, and after it a thread that did not wait for that phase is
//!   unordered with the copy's writes (a `shared-race` too). Issuing a copy over bytes another
//!   thread read is a race unless that read is ordered before the issue — the consumer arrived
//!   at an "empty" barrier the producer waited for.
//! * A **named barrier** (`barrier.sync id, n`) completes when `n` threads have arrived (waiting or
//!   not); its waiters learn what every arriving thread did before arriving.
//! * **setmaxnreg** changes no semantics: registers are not modelled.
//!
//! Misuse is `barrier-misuse`: an mbarrier used before its `init`, more arrivals than a phase
//! expects, a named barrier id outside 1..=15 or a thread count that is not whole warps, two
//! counts for one barrier generation, a TMA destination not aligned as its swizzle needs.

use std::prelude::rust_2021::*;

use super::state::{BlockState, Kind, MbarrierState, PendingChunk, PendingCopy, Site};
use super::{abort, buffer_of_launch, ctx, Event, SharedArray};
use crate::device::{Element, Mbarrier};
use crate::report::Fault;
use crate::tma::TmaGeometry;
use std::marker::PhantomData;
use std::panic::Location;

/// Records `fault` for the current thread and stops it.
pub(super) fn fail(fault: Fault, address: Option<u64>, message: String) -> ! {
    let c = ctx();
    c.state().fault(fault, vec![c.tid], address, message);
    abort()
}

/// The shared byte offset of barrier `i` of `bars` (`out-of-bounds` past the array).
pub(super) fn barrier_offset<const N: usize>(
    bars: &SharedArray<Mbarrier, N>,
    i: u32,
    site: Site,
) -> usize {
    if i as usize >= N {
        let c = ctx();
        c.state().out_of_bounds(
            c.tid,
            site,
            ("shared", Kind::Load),
            (i as u64, 1, "Mbarrier"),
            N as u64,
        );
        abort();
    }
    bars.byte_offset() as usize + 8 * i as usize
}

/// Stops the current thread if `st` (its own block, or a block of its cluster whose shared
/// memory it touched) holds a fault; the fault moves to the thread's own block, whose
/// scheduler reports it.
fn stop_if_faulted(st: &BlockState) {
    let Some(e) = st.error.borrow_mut().take() else {
        return;
    };
    ctx().state().error.borrow_mut().get_or_insert(e);
    abort()
}

/// A use of the initialised barrier at `offset` of block `st` (the current thread's, or a
/// block of its cluster) by the current thread: a read of its bytes (race-checked against the
/// `init`).
fn touch(st: &BlockState, offset: usize, site: Site) {
    let c = ctx();
    let me = c.state().name(c.gid());
    if st.exited.get() {
        fail(
            Fault::BarrierMisuse,
            Some(offset as u64),
            format!("{me} uses the mbarrier at shared byte {offset} of cluster rank {} (at {site}), whose threads have all returned; a cluster_sync before the kernel returns keeps every block of the cluster alive while the others use its shared memory", st.rank),
        );
    }
    if !st.mbarriers.borrow().contains_key(&offset) {
        let whose = if st.rank == c.state().rank {
            String::new()
        } else {
            format!(" of cluster rank {}", st.rank)
        };
        fail(
            Fault::BarrierMisuse,
            Some(offset as u64),
            format!("{me} uses the mbarrier at shared byte {offset}{whose} (at {site}) before any thread initialised it; init it (one thread), then block_sync (cluster_sync where other blocks of the cluster use it)"),
        );
    }
    st.check_race_by(c.gid(), site, Kind::Load, (offset, 8), false);
    stop_if_faulted(st);
}

/// Completes the barrier's phase if its arrivals and bytes are all in: the TMA bytes land and
/// the phase's released clocks become what a wait on it acquires.
fn complete_if_done(st: &BlockState, b: &mut MbarrierState) {
    if b.pending > 0 || b.tx != 0 {
        return;
    }
    let mut pending = st.async_pending.borrow_mut();
    for copy in b.landing.drain(..) {
        for (i, w) in copy.words.iter().enumerate() {
            st.shared.store(copy.offset + 4 * i, 4, *w);
        }
        pending.remove(&(copy.offset / 16));
    }
    b.completed[(b.phase % 2) as usize] = std::mem::take(&mut b.released);
    b.phase += 1;
    b.pending = b.arrivals;
}

/// One arrival of the current thread on the barrier at `offset` of block `st` (its own, or a
/// block of its cluster), expecting `tx` more bytes.
pub(super) fn arrive_at(st: &BlockState, offset: usize, tx: u32, site: Site) {
    let c = ctx();
    touch(st, offset, site);
    let mut bars = st.mbarriers.borrow_mut();
    let b = bars.get_mut(&offset).expect("touched");
    if b.pending == 0 {
        drop(bars);
        fail(
            Fault::BarrierMisuse,
            Some(offset as u64),
            format!("{} arrives (at {site}) at the mbarrier at shared byte {offset} whose phase already has all its arrivals and waits only for bytes; a phase takes exactly the arrivals its init names", c.state().name(c.gid())),
        );
    }
    b.tx += tx as i64;
    st.clocks.borrow_mut().release(c.gid(), &mut b.released);
    b.pending -= 1;
    complete_if_done(st, b);
}

impl<const N: usize> SharedArray<Mbarrier, N> {
    /// `mbarrier.init`: barrier `i` expects `arrivals` (1 to 2²⁰ − 1) arrivals per phase,
    /// starting in phase 0. One thread initialises; a `block_sync` (after
    /// [`fence_barrier_init`]) must come before any other thread uses it.
    #[track_caller]
    pub fn init(&self, i: u32, arrivals: u32) {
        let site = Location::caller();
        let offset = barrier_offset(self, i, site);
        let c = ctx();
        let st = c.state();
        if arrivals == 0 || arrivals >= 1 << 20 {
            fail(
                Fault::BarrierMisuse,
                Some(offset as u64),
                format!("thread {}: mbarrier init with {arrivals} arrivals (at {site}); a phase expects 1 to 2^20 - 1 arrivals", c.tid),
            );
        }
        st.check_race(c.tid, site, Kind::Store, offset, 8, false);
        if st.error.borrow().is_some() {
            abort();
        }
        st.mbarriers
            .borrow_mut()
            .insert(offset, MbarrierState::new(arrivals));
    }

    /// `mbarrier.arrive`: one arrival on barrier `i`, releasing this thread's earlier accesses
    /// to the threads that wait for the phase.
    #[track_caller]
    pub fn arrive(&self, i: u32) {
        let site = Location::caller();
        arrive_at(ctx().state(), barrier_offset(self, i, site), 0, site);
    }

    /// `mbarrier.arrive.expect_tx`: the phase also waits for `bytes` more bytes of TMA copies,
    /// then one arrival.
    #[track_caller]
    pub fn arrive_expect_tx(&self, i: u32, bytes: u32) {
        let site = Location::caller();
        arrive_at(ctx().state(), barrier_offset(self, i, site), bytes, site);
    }

    /// Waits until the phase of barrier `i` with parity `parity` (0 or 1) has completed, then
    /// acquires what its arrivals released.
    #[track_caller]
    pub fn wait(&self, i: u32, parity: u32) {
        let site = Location::caller();
        let offset = barrier_offset(self, i, site);
        let c = ctx();
        let st = c.state();
        touch(st, offset, site);
        if parity > 1 {
            fail(
                Fault::BarrierMisuse,
                Some(offset as u64),
                format!(
                    "thread {}: mbarrier wait for parity {parity} (at {site}); a parity is 0 or 1",
                    c.tid
                ),
            );
        }
        let phase = st.mbarriers.borrow()[&offset].phase;
        // The phase with this parity: the current one (wait for it), or the one before (done).
        if phase % 2 == parity {
            c.suspend(Event::Mbarrier {
                offset,
                phase: phase + 1,
                site,
            });
        }
        let bars = st.mbarriers.borrow();
        st.clocks
            .borrow_mut()
            .acquire(c.gid(), &bars[&offset].completed[parity as usize]);
    }
}

/// `fence.mbarrier_init.release.cluster` (the emulator's `init`s are visible at once; the
/// `block_sync` or `cluster_sync` that must follow orders them).
pub fn fence_barrier_init() {}

/// Checks a named barrier's id and thread count.
fn check_named(id: u32, threads: u32, site: Site) {
    let c = ctx();
    if !(1..=15).contains(&id)
        || threads == 0
        || !threads.is_multiple_of(32)
        || threads > c.block_dim.next_multiple_of(32)
    {
        fail(
            Fault::BarrierMisuse,
            None,
            format!("thread {}: named barrier {id} for {threads} threads (at {site}); ids are 1 to 15 (0 is block_sync's) and the count is whole warps, at most the block's", c.tid),
        );
    }
}

/// Arrives at named barrier `id`; returns the generation arrived at and whether this arrival
/// completed it.
fn named_arrive(id: u32, threads: u32, wait: bool, site: Site) -> (u32, bool) {
    check_named(id, threads, site);
    let c = ctx();
    let st = c.state();
    let mut named = st.named.borrow_mut();
    let nb = &mut named[id as usize];
    if nb.arrived == 0 {
        nb.count = threads;
    } else if nb.count != threads {
        let count = nb.count;
        drop(named);
        fail(
            Fault::BarrierMisuse,
            None,
            format!("thread {}: named barrier {id} for {threads} threads (at {site}) while threads already arrived for {count}; every arrival at one barrier names the same count", c.tid),
        );
    }
    let mut clocks = st.clocks.borrow_mut();
    clocks.release(c.gid(), &mut nb.released);
    nb.arrived += 1;
    if wait {
        nb.waiting.push(c.gid());
    }
    let generation = nb.generation;
    if nb.arrived < nb.count {
        return (generation, false);
    }
    let released = std::mem::take(&mut nb.released);
    for t in nb.waiting.drain(..) {
        clocks.acquire(t, &released);
    }
    nb.arrived = 0;
    nb.generation += 1;
    (generation, true)
}

/// `barrier.sync id, threads`: waits until `threads` threads (whole warps) have arrived at named
/// barrier `id` (1 to 15), counting those that [`named_barrier_arrive`]d; then this thread is
/// ordered after everything they did before arriving.
#[track_caller]
pub fn named_barrier_sync(id: u32, threads: u32) {
    let site = Location::caller();
    let (generation, done) = named_arrive(id, threads, true, site);
    if !done {
        ctx().suspend(Event::Named {
            id,
            generation,
            site,
        });
    }
}

/// `barrier.arrive id, threads`: arrives at named barrier `id` without waiting.
#[track_caller]
pub fn named_barrier_arrive(id: u32, threads: u32) {
    named_arrive(id, threads, false, Location::caller());
}

/// `setmaxnreg.inc` (registers are not modelled: only the count is checked).
pub fn setmaxnreg_inc<const REGS: u32>() {
    const {
        assert!(
            REGS >= 24 && REGS <= 256 && REGS.is_multiple_of(8),
            "error[setmaxnreg]: REGS must be 24 to 256, a multiple of 8"
        )
    };
}

/// `setmaxnreg.dec` (registers are not modelled: only the count is checked).
pub fn setmaxnreg_dec<const REGS: u32>() {
    const {
        assert!(
            REGS >= 24 && REGS <= 256 && REGS.is_multiple_of(8),
            "error[setmaxnreg]: REGS must be 24 to 256, a multiple of 8"
        )
    };
}

/// Declares a tensor-map handle type (what [`Tma`] and [`TmaMut`] share): in the emulator, the
/// tensor's buffer and the map's checked geometry, `Copy`, made by the host launcher.
macro_rules! tensor_map_handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<T, const R: usize> {
            buffer: u64,
            geometry: TmaGeometry<R>,
            _t: PhantomData<T>,
        }

        impl<T, const R: usize> Clone for $name<T, R> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T, const R: usize> Copy for $name<T, R> {}

        impl<T: Element, const R: usize> $name<T, R> {
            /// The handle of a tensor map over emulated buffer `buffer` (used by the host
            /// launcher).
            #[doc(hidden)]
            pub fn from_emulated(buffer: u64, geometry: TmaGeometry<R>) -> Self {
                $name {
                    buffer,
                    geometry,
                    _t: PhantomData,
                }
            }

            /// Bytes one box moves between the tensor and shared memory (what a copy counts
            /// on its mbarrier).
            pub fn box_bytes(&self) -> u32 {
                self.geometry.box_bytes()
            }

            /// `prefetch.tensormap` (nothing to fetch in the emulator).
            pub fn prefetch(&self) {}
        }
    };
}

tensor_map_handle!(
    /// A global tensor as the TMA copy engine sees it, rank `R` (a kernel argument made from a
    /// host `TensorMap`).
    Tma
);

tensor_map_handle!(
    /// A global tensor the TMA copy engine writes, rank `R` (a kernel argument made from a host
    /// `TensorMapMut`).
    TmaMut
);

impl<T: Element, const R: usize> Tma<T, R> {
    /// `cp.async.bulk.tensor`: copies the box at `coords` (elements, innermost first; outside
    /// the tensor reads as zeros) into `dst` from element `dst_elem`, and completes its
    /// [`Self::box_bytes`] on barrier `bar` of `bars` (see the module documentation).
    #[track_caller]
    pub fn copy_to_shared<const N: usize, const B: usize>(
        &self,
        coords: [i32; R],
        dst: &SharedArray<T, N>,
        dst_elem: u32,
        bars: &SharedArray<Mbarrier, B>,
        bar: u32,
    ) {
        let site = Location::caller();
        self.copy_to_blocks(coords, (dst, dst_elem), (bars, bar), &[ctx().state()], site);
    }

    /// The copy of [`Self::copy_to_shared`] into the same place of each of `blocks` (the
    /// current thread's, or blocks of its cluster: a multicast), completing on the barrier at
    /// the same place in each.
    pub(super) fn copy_to_blocks<const N: usize, const B: usize>(
        &self,
        coords: [i32; R],
        (dst, dst_elem): (&SharedArray<T, N>, u32),
        (bars, bar): (&SharedArray<Mbarrier, B>, u32),
        blocks: &[&BlockState],
        site: Site,
    ) {
        let bar = barrier_offset(bars, bar, site);
        let c = ctx();
        for st in blocks {
            touch(st, bar, site);
        }
        let g = &self.geometry;
        let start = box_in_shared::<T, R>(g, (dst.byte_offset(), dst_elem, N), Kind::Store, site);
        let src = buffer_of_launch(self.buffer, 0);
        // The box as it will lie in shared memory: every element read (or zero) now.
        let mut image = vec![0u8; g.box_bytes() as usize];
        let e = T::BYTES as usize;
        for_each_in_tensor(g, coords, src, site, |at, to| {
            let bits = src.load(at, T::BYTES).to_le_bytes();
            image[to..to + e].copy_from_slice(&bits[..e]);
        });
        let chunks: Vec<PendingCopy> = image
            .chunks(16)
            .enumerate()
            .map(|(q, bytes)| {
                let mut words = [0u32; 4];
                for (w, b) in words.iter_mut().zip(bytes.chunks(4)) {
                    *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                PendingCopy {
                    offset: start + 16 * q,
                    words,
                }
            })
            .collect();
        for st in blocks {
            // The copy may write any time after it is issued: it races with unordered accesses
            // now.
            for chunk in &chunks {
                st.check_race_by(c.gid(), site, Kind::Store, (chunk.offset, 16), false);
                stop_if_faulted(st);
            }
            let mut pending = st.async_pending.borrow_mut();
            for chunk in &chunks {
                pending.insert(
                    chunk.offset / 16,
                    PendingChunk {
                        writer: c.gid(),
                        site,
                        via: Some(bar),
                    },
                );
            }
            drop(pending);
            let mut bars = st.mbarriers.borrow_mut();
            let b = bars.get_mut(&bar).expect("touched");
            // The copy's completion releases the issuer's view (its writes are stamped with it).
            st.clocks.borrow_mut().release(c.gid(), &mut b.released);
            b.tx -= g.box_bytes() as i64;
            b.landing.extend(chunks.iter().cloned());
            complete_if_done(st, b);
        }
    }
}

/// Calls `f(global byte, shared byte)` for every element of the box at `coords` that lies
/// inside the tensor (offsets in the tensor's buffer and in the box's shared image);
/// `out-of-bounds` where the map reaches past its buffer.
fn for_each_in_tensor<const R: usize>(
    g: &TmaGeometry<R>,
    coords: [i32; R],
    buffer: &super::memory::EmuMemory,
    site: Site,
    mut f: impl FnMut(usize, usize),
) {
    let bd = g.box_dims();
    let e = g.elem_bytes() as usize;
    for k in 0..g.box_elems() {
        let mut within = [0u32; R];
        let mut rest = k;
        for (w, &d) in within.iter_mut().zip(&bd) {
            *w = rest % d;
            rest /= d;
        }
        if let Some(at) = g.global_byte(coords, within) {
            if at as usize + e > buffer.bytes() {
                fail(
                    Fault::OutOfBounds,
                    Some(at / e as u64),
                    format!("thread {}: TMA copy (at {site}) reaches byte {at} of a tensor of {} bytes; the tensor map is larger than its buffer", ctx().tid, buffer.bytes()),
                );
            }
            f(at as usize, g.shared_byte(within) as usize);
        }
    }
}

/// Checks that the box of `g` at shared element `elem` of an array of `n` elements of `T`
/// lies inside it, aligned as its swizzle needs; returns its first shared byte.
fn box_in_shared<T: Element, const R: usize>(
    g: &TmaGeometry<R>,
    (offset, elem, n): (u32, u32, usize),
    kind: Kind,
    site: Site,
) -> usize {
    let c = ctx();
    if elem as u64 + g.box_elems() as u64 > n as u64 {
        c.state().out_of_bounds(
            c.tid,
            site,
            ("shared", kind),
            (elem as u64, g.box_elems(), T::NAME),
            n as u64,
        );
        abort();
    }
    let start = (offset + elem * T::BYTES) as usize;
    if !start.is_multiple_of(g.shared_alignment() as usize) {
        fail(
            Fault::Misaligned,
            Some(elem as u64),
            format!("thread {}: TMA copy at shared byte {start} (at {site}); its shared box must be {}-byte aligned ({:?} swizzle)", c.tid, g.shared_alignment(), g.swizzle()),
        );
    }
    start
}

impl<T: Element, const R: usize> TmaMut<T, R> {
    /// `cp.async.bulk.tensor` to global memory: writes the box at `coords` (elements,
    /// innermost first; what lies outside the tensor is not written) from `src` at element
    /// `src_elem`. The emulator reads the shared bytes and writes the tensor at once; the
    /// sanitizer then treats the bytes as still being read until the issuing thread's
    /// [`bulk_wait_group_read`] retires the store: a write to them before that (by any thread),
    /// a block that ends before it, a store issued before the writers of the bytes are
    /// ordered before the issuer, or before they executed a `fence_proxy_async` after their
    /// writes, is a `shared-race`.
    #[track_caller]
    pub fn store_from_shared<const N: usize>(
        &self,
        coords: [i32; R],
        src: &SharedArray<T, N>,
        src_elem: u32,
    ) {
        let site = Location::caller();
        let c = ctx();
        let st = c.state();
        let g = &self.geometry;
        let start = box_in_shared::<T, R>(g, (src.byte_offset(), src_elem, N), Kind::Load, site);
        let chunks = start / 16..(start + g.box_bytes() as usize).div_ceil(16);
        engine_may_read(st, (c.tid, site), chunks.clone(), "TMA store");
        let dst = buffer_of_launch(self.buffer, 0);
        for_each_in_tensor(g, coords, dst, site, |at, from| {
            dst.store(at, T::BYTES, st.shared.load(start + from, T::BYTES));
        });
        engine_reads(st, (c.tid, site), chunks);
    }
}

/// The 16-byte shared chunks `chunks` are what a bulk operation (`what`) issued by thread `tid`
/// at `site` reads: every writer of them must be ordered before the issue and have fenced for
/// the async proxy after its write (`shared-race` otherwise).
pub(crate) fn engine_may_read(
    st: &BlockState,
    (tid, site): (u32, Site),
    chunks: std::ops::Range<usize>,
    what: &str,
) {
    for chunk in chunks {
        if let Some(w) = st.unfenced_write(chunk) {
            st.fault(
                Fault::SharedRace,
                if w.tid == tid { vec![tid] } else { vec![tid, w.tid] },
                Some(16 * chunk as u64),
                format!("thread {tid}: {what} at {site} reads shared byte {} that thread {} wrote at {} and has not fenced since: the copy engine may read the old bytes (the writer calls fence_proxy_async() after its writes, then a barrier orders it before the {what})", 16 * chunk, w.tid, w.site),
            );
            abort();
        }
        st.check_race(tid, site, Kind::Load, 16 * chunk, 16, false);
        if st.error.borrow().is_some() {
            abort();
        }
    }
}

/// The chunks count as read by thread `tid`'s open bulk group until a
/// [`bulk_wait_group_read`] retires it.
pub(crate) fn engine_reads(
    st: &BlockState,
    (tid, site): (u32, Site),
    chunks: std::ops::Range<usize>,
) {
    let mut reading = st.bulk_reading.borrow_mut();
    for chunk in chunks.clone() {
        reading.insert(chunk, (tid, site));
    }
    st.bulk_stores.borrow_mut()[tid as usize]
        .open
        .extend(chunks);
}

/// `cp.async.bulk.commit_group`: this thread's TMA stores since its last commit form one group.
pub fn bulk_commit_group() {
    let c = ctx();
    let mut stores = c.state().bulk_stores.borrow_mut();
    let mine = &mut stores[c.tid as usize];
    let group = std::mem::take(&mut mine.open);
    mine.committed.push_back(group);
}

/// `cp.async.bulk.wait_group.read PENDING`: retires this thread's oldest committed store groups
/// until at most `PENDING` remain; their shared bytes count as read by this thread here, so a
/// later write by another thread must be ordered after this wait.
#[track_caller]
pub fn bulk_wait_group_read<const PENDING: u32>() {
    let site = Location::caller();
    let c = ctx();
    let st = c.state();
    loop {
        let group = {
            let mut stores = st.bulk_stores.borrow_mut();
            let mine = &mut stores[c.tid as usize];
            if mine.committed.len() <= PENDING as usize {
                return;
            }
            mine.committed.pop_front().unwrap_or_default()
        };
        for chunk in group {
            st.bulk_reading.borrow_mut().remove(&chunk);
            st.check_race(c.tid, site, Kind::Load, 16 * chunk, 16, false);
            if st.error.borrow().is_some() {
                abort();
            }
        }
    }
}

/// `cp.async.bulk.wait_group PENDING`: as [`bulk_wait_group_read`] (the emulator's global
/// writes and additions are done when they are issued).
#[track_caller]
pub fn bulk_wait_group<const PENDING: u32>() {
    bulk_wait_group_read::<PENDING>()
}

/// The first TMA store still reading shared memory when the block ends: its issuer and site.
pub(crate) fn bulk_store_in_flight(st: &BlockState) -> Option<(u32, Site)> {
    st.bulk_reading.borrow().values().next().copied()
}

/// What a thread suspended at an mbarrier needs to go on: the barrier's phase has reached
/// `phase`.
pub(crate) fn mbarrier_reached(st: &BlockState, offset: usize, phase: u32) -> bool {
    st.mbarriers
        .borrow()
        .get(&offset)
        .is_some_and(|b| b.phase >= phase)
}

/// A description of the barrier at `offset` for a deadlock report.
pub(crate) fn describe_mbarrier(st: &BlockState, offset: usize) -> String {
    match st.mbarriers.borrow().get(&offset) {
        Some(b) => format!(
            "mbarrier at shared byte {offset} (phase {}: {} of {} arrivals and {} bytes still due)",
            b.phase, b.pending, b.arrivals, b.tx
        ),
        None => format!("mbarrier at shared byte {offset}"),
    }
}

/// Whether named barrier `id` has completed `generation`.
pub(crate) fn named_passed(st: &BlockState, id: u32, generation: u32) -> bool {
    st.named.borrow()[id as usize].generation > generation
}
