//! The SIMT emulator: every thread of a block is a stackful coroutine, run round-robin on one
//! OS thread; blocks run in parallel across cores. The blocks of a cluster
//! (`#[tile_kernel(cluster = N)]`) run together on one OS thread, as the GPU co-schedules them.
//!
//! * `block_sync()` suspends a thread until every live thread of its block waits at the same
//!   barrier; a barrier some threads can never reach (they exited, or wait at another one) is
//!   `barrier-divergence`.
//! * Warp operations (shuffles, ballot, warp sync) are a rendezvous of the warp's live lanes;
//!   lanes at different warp operations, or lanes that exited, are `warp-divergence`.
//! * `cluster_sync()` suspends a thread until every thread of every block of its cluster waits
//!   there (`barrier-divergence` where one exited or waits elsewhere for good).
//! * If no thread can run and no rendezvous can complete, the launch fails with `deadlock`
//!   naming where every thread waits — nothing hangs.
//! * Every global and shared access is bounds-checked (`out-of-bounds`), shared accesses are
//!   race-checked between barriers (`shared-race`), and grouped per warp-level instruction for
//!   the bank-conflict and sector counts of [`crate::bank`].

use std::prelude::rust_2021::*;

mod api;
mod clocks;
mod cluster;
pub(crate) mod memory;
mod pipeline;
mod sm90;
mod state;

pub use api::*;
pub use cluster::{cluster_ctarank, cluster_size, cluster_sync};
pub use pipeline::{
    bulk_commit_group, bulk_wait_group_read, fence_barrier_init, named_barrier_arrive,
    named_barrier_sync, setmaxnreg_dec, setmaxnreg_inc, Tma, TmaMut,
};
pub use sm90::*;

use crate::report::{Fault, KernelError, LaunchStats};
use clocks::Clocks;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use memory::EmuMemory;
use state::{BlockState, Site};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once};

/// Stack of one emulated thread.
const STACK_BYTES: usize = 256 * 1024;

/// A warp-level operation; lanes meeting at a rendezvous must all perform the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WarpOp {
    ShflXor(u32),
    ShflUp(u32),
    ShflDown(u32),
    ShflIdx(u32),
    Ballot,
    Sync,
    /// `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32`.
    MmaBf16,
    /// `ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16`; each lane's shared byte address.
    LdMatrix {
        trans: bool,
    },
}

impl WarpOp {
    fn name(self) -> &'static str {
        match self {
            WarpOp::ShflXor(_) => "shfl_xor",
            WarpOp::ShflUp(_) => "shfl_up",
            WarpOp::ShflDown(_) => "shfl_down",
            WarpOp::ShflIdx(_) => "shfl_idx",
            WarpOp::Ballot => "ballot",
            WarpOp::Sync => "warp_sync",
            WarpOp::MmaBf16 => "mma_m16n8k16_bf16",
            WarpOp::LdMatrix { trans: false } => "ldmatrix_x4",
            WarpOp::LdMatrix { trans: true } => "ldmatrix_x4_trans",
        }
    }

    fn same_kind(self, other: WarpOp) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
    }
}

/// What a lane brings to a warp operation (shuffles use word 0; mma: A 0..4, B 4..6, C 6..10).
pub(crate) type Payload = [u32; 10];
/// What a lane gets back (shuffles: word 0).
pub(crate) type Reply = [u32; 4];

/// Why a thread suspended.
pub(crate) enum Event {
    Barrier(Site),
    Warp {
        op: WarpOp,
        value: Payload,
        site: Site,
    },
    /// Until the mbarrier at shared byte `offset` reaches `phase`.
    Mbarrier {
        offset: usize,
        phase: u32,
        site: Site,
    },
    /// Until named barrier `id` completes `generation`.
    Named {
        id: u32,
        generation: u32,
        site: Site,
    },
    /// Until every thread of the cluster waits at `cluster_sync`.
    Cluster(Site),
}

/// Identity and context of the emulated thread running on this OS thread.
pub(crate) struct ThreadCtx {
    pub tid: u32,
    pub block: u32,
    pub block_dim: u32,
    pub grid_dim: u32,
    yielder: Cell<*const Yielder<Reply, Event>>,
    pub state: *const BlockState,
    /// The blocks of this thread's cluster, by rank (`state` is one of them).
    cluster: *const [BlockState],
}

impl ThreadCtx {
    pub fn state(&self) -> &BlockState {
        // SAFETY: the block state outlives every coroutine of the block (run_cluster owns both).
        unsafe { &*self.state }
    }

    /// This thread's cluster id (its index among the cluster's threads).
    pub fn gid(&self) -> u32 {
        self.state().cluster_id(self.tid)
    }

    /// The block of rank `rank` in this thread's cluster.
    pub fn peer(&self, rank: u32) -> Option<&BlockState> {
        // SAFETY: as for `state`: run_cluster owns the cluster's block states for as long as
        // its coroutines run.
        unsafe { (&*self.cluster).get(rank as usize) }
    }

    pub fn suspend(&self, e: Event) -> Reply {
        // SAFETY: set by the coroutine itself before any user code runs; valid while it runs.
        unsafe { (*self.yielder.get()).suspend(e) }
    }
}

thread_local! {
    static CURRENT: Cell<*const ThreadCtx> = const { Cell::new(std::ptr::null()) };
    static IN_KERNEL: Cell<bool> = const { Cell::new(false) };
    static PANIC_SITE: Cell<Option<String>> = const { Cell::new(None) };
}

/// The emulated thread running now. Panics outside a kernel launch.
///
/// The `'static` is the crate's promise, not the reference's: the context (and the block state
/// it points to) lives while the block runs, and the device functions that call this use it
/// within their own call, never keeping it (or anything borrowed from it) past their return.
/// It is `pub(crate)` so that no code outside this crate can keep it longer.
pub(crate) fn ctx() -> &'static ThreadCtx {
    let p = CURRENT.with(Cell::get);
    assert!(
        !p.is_null(),
        "ck_core device functions can only be called inside a kernel launched on a Device"
    );
    // SAFETY: set by the scheduler to a ThreadCtx that outlives the resume call.
    unsafe { &*p }
}

/// Stops the current emulated thread after a fault was recorded (no panic message printed).
pub(crate) fn abort() -> ! {
    std::panic::resume_unwind(Box::new(Aborted))
}

struct Aborted;

/// Kernel panics are reported as `kernel-panic` errors; keep the default hook quiet for them.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_KERNEL.with(Cell::get) {
                PANIC_SITE.with(|s| s.set(info.location().map(|l| l.to_string())));
            } else {
                previous(info);
            }
        }));
    });
}

#[derive(Clone, Copy)]
enum TState {
    Runnable(Reply),
    AtBarrier(Site),
    AtWarp {
        op: WarpOp,
        value: Payload,
        site: Site,
    },
    AtMbarrier {
        offset: usize,
        phase: u32,
        site: Site,
    },
    AtNamed {
        id: u32,
        generation: u32,
        site: Site,
    },
    AtCluster(Site),
    Done,
}

/// Runs a whole grid in clusters of `cluster` blocks (1: none; `grid` is a multiple of it),
/// clusters in parallel on `workers` OS threads. Returns the summed stats, or the fault of the
/// lowest-numbered failing block.
pub(crate) fn launch(
    kernel: &str,
    (grid, block_dim, cluster): (u32, u32, u32),
    shared_bytes: usize,
    buffers: Arc<[Arc<EmuMemory>]>,
    workers: usize,
    body: &(dyn Fn() + Sync),
) -> Result<LaunchStats, KernelError> {
    install_panic_hook();
    let clusters = grid / cluster;
    let next = AtomicU32::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<(LaunchStats, Option<KernelError>)> =
        Mutex::new((LaunchStats::default(), None));
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, clusters.max(1) as usize) {
            s.spawn(|| {
                let mut stacks = Vec::new();
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let c = next.fetch_add(1, Ordering::Relaxed);
                    if c >= clusters {
                        break;
                    }
                    let shape = (c * cluster, cluster, grid, block_dim, shared_bytes);
                    let r = run_cluster(kernel, shape, &buffers, body, &mut stacks);
                    let mut res = results.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok(st) => res.0.add(&st),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            if res.1.as_ref().is_none_or(|old| e.block < old.block) {
                                res.1 = Some(e);
                            }
                        }
                    }
                }
            });
        }
    });
    let (stats, err) = results.into_inner().unwrap_or_else(|e| e.into_inner());
    match err {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

fn ranges(tids: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tids.len() {
        let mut j = i;
        while j + 1 < tids.len() && tids[j + 1] == tids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            tids[i].to_string()
        } else {
            format!("{}..={}", tids[i], tids[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// One cluster's blocks `first..first + cluster`, their threads' coroutines and scheduler states.
struct Block {
    ctxs: Vec<ThreadCtx>,
    coros: Vec<Coroutine<Reply, Event, (), DefaultStack>>,
    ts: Vec<TState>,
}

fn run_cluster(
    kernel: &str,
    (first, cluster, grid, n, shared_bytes): (u32, u32, u32, u32, usize),
    buffers: &Arc<[Arc<EmuMemory>]>,
    body: &(dyn Fn() + Sync),
    stacks: &mut Vec<DefaultStack>,
) -> Result<LaunchStats, KernelError> {
    let clocks = Rc::new(RefCell::new(Clocks::new((cluster * n) as usize)));
    let states: Vec<BlockState> = (0..cluster)
        .map(|rank| {
            BlockState::new(
                kernel,
                (first + rank, n),
                (cluster, rank, Rc::clone(&clocks)),
                shared_bytes,
                Arc::clone(buffers),
            )
        })
        .collect();
    let peers: *const [BlockState] = states.as_slice();
    let mut blocks = Vec::with_capacity(cluster as usize);
    for state in &states {
        let ctxs: Vec<ThreadCtx> = (0..n)
            .map(|tid| ThreadCtx {
                tid,
                block: state.block,
                block_dim: n,
                grid_dim: grid,
                yielder: Cell::new(std::ptr::null()),
                state,
                cluster: peers,
            })
            .collect();
        blocks.push(Block {
            ctxs,
            coros: Vec::with_capacity(n as usize),
            ts: vec![TState::Runnable([0; 4]); n as usize],
        });
    }
    for b in &mut blocks {
        for c in &b.ctxs {
            let stack = match stacks.pop() {
                Some(s) => s,
                None => DefaultStack::new(STACK_BYTES).map_err(|e| KernelError {
                    fault: Fault::Panic,
                    kernel: kernel.to_string(),
                    block: c.block,
                    threads: vec![c.tid],
                    address: None,
                    message: format!("cannot allocate a thread stack: {e}"),
                })?,
            };
            let cp: *const ThreadCtx = c;
            // SAFETY: every coroutine is driven to completion or dropped before `blocks`,
            // `states` and `body` go out of scope (all live until the end of this function);
            // the contexts do not move (their vector is not resized).
            let co = unsafe {
                Coroutine::with_stack_unchecked(
                    stack,
                    move |y: &Yielder<Reply, Event>, _: Reply| {
                        (*cp).yielder.set(y);
                        body();
                    },
                )
            };
            b.coros.push(co);
        }
    }
    let result = drive(&states, &mut blocks).and_then(|()| {
        for state in &states {
            // Shared memory goes with the block: no TMA store may still be reading it.
            if let Some((issuer, site)) = pipeline::bulk_store_in_flight(state) {
                state.fault(
                    Fault::SharedRace,
                    vec![issuer],
                    None,
                    format!("the block ended while the TMA store thread {issuer} issued (at {site}) may still read its shared memory; bulk_commit_group and bulk_wait_group_read::<0>() before the kernel returns"),
                );
                return Err(state.error.borrow_mut().take().expect("fault recorded"));
            }
        }
        Ok(())
    });
    // Reclaim stacks of finished coroutines; unfinished ones (after a fault) are unwound on drop.
    for b in blocks {
        for co in b.coros {
            if co.done() {
                stacks.push(co.into_stack());
            }
        }
    }
    result.map(|()| {
        let mut st = LaunchStats::default();
        for state in &states {
            st.add(&state.stats());
        }
        st
    })
}

/// Runs a cluster's blocks to the end: each block's scheduler in turn, the cluster barrier
/// across them, and `deadlock` when none of them can move.
fn drive(states: &[BlockState], blocks: &mut [Block]) -> Result<(), KernelError> {
    let take_error = |states: &[BlockState]| {
        states
            .iter()
            .find_map(|s| s.error.borrow_mut().take())
            .map_or(Ok(()), Err)
    };
    loop {
        let mut progressed = false;
        for (state, b) in states.iter().zip(blocks.iter_mut()) {
            if state.exited.get() {
                continue;
            }
            let r = step(state, &b.ctxs, &mut b.coros, &mut b.ts);
            // A thread's access to another block records its fault there.
            take_error(states)?;
            progressed |= r?;
            if b.ts.iter().all(|s| matches!(s, TState::Done)) {
                state.exited.set(true);
            }
        }
        if states.iter().all(|s| s.exited.get()) {
            return Ok(());
        }
        progressed |= cluster_barrier(states, blocks)?;
        if !progressed {
            let state = &states[0];
            let waits: Vec<String> = states
                .iter()
                .zip(blocks.iter())
                .map(|(s, b)| {
                    let w = describe_waits(s, &b.ts);
                    if states.len() == 1 {
                        w
                    } else {
                        format!("cluster rank {}: {w}", s.rank)
                    }
                })
                .collect();
            state.fault(
                Fault::Deadlock,
                (0..blocks[0].ts.len() as u32).collect(),
                None,
                format!("no thread can make progress: {}", waits.join("; ")),
            );
            return Err(state.error.borrow_mut().take().expect("fault recorded"));
        }
    }
}

/// Releases the cluster barrier once every thread of the cluster waits at it; a thread that
/// exited, or waits at another `cluster_sync`, while all others wait is `barrier-divergence`.
fn cluster_barrier(states: &[BlockState], blocks: &mut [Block]) -> Result<bool, KernelError> {
    let mut first: Option<(Site, u32)> = None;
    for (st, b) in states.iter().zip(blocks.iter()) {
        for (t, s) in b.ts.iter().enumerate() {
            match *s {
                TState::AtCluster(site) => {
                    first.get_or_insert((site, st.cluster_id(t as u32)));
                }
                TState::Done => {}
                _ => return Ok(false),
            }
        }
    }
    let Some((site0, first)) = first else {
        return Ok(false);
    };
    let state = &states[0];
    for (st, b) in states.iter().zip(blocks.iter()) {
        let exited: Vec<u32> = (0..b.ts.len())
            .filter(|&t| matches!(b.ts[t], TState::Done))
            .map(|t| t as u32)
            .collect();
        if !exited.is_empty() {
            st.fault(
                Fault::BarrierDivergence,
                exited.clone(),
                None,
                format!(
                    "threads {} of cluster rank {} exited without reaching the cluster_sync at {site0} that the rest of the cluster waits at; every thread of every block of the cluster must reach it",
                    ranges(&exited),
                    st.rank
                ),
            );
            return Err(st.error.borrow_mut().take().expect("fault recorded"));
        }
        if let Some(t) =
            b.ts.iter()
                .position(|s| !matches!(s, TState::AtCluster(x) if *x == site0))
        {
            let TState::AtCluster(site) = b.ts[t] else {
                unreachable!()
            };
            st.fault(
                Fault::BarrierDivergence,
                vec![t as u32],
                None,
                format!(
                    "threads wait at different cluster_sync calls: {} at {site0}, {} at {site}",
                    state.name(first),
                    st.name(st.cluster_id(t as u32))
                ),
            );
            return Err(st.error.borrow_mut().take().expect("fault recorded"));
        }
    }
    let all: Vec<u32> = (0..state.cluster * state.block_dim).collect();
    state.clocks.borrow_mut().rendezvous(&all);
    for (st, b) in states.iter().zip(blocks.iter_mut()) {
        for s in b.ts.iter_mut() {
            *s = TState::Runnable([0; 4]);
        }
        for e in st.warp_epoch.borrow_mut().iter_mut() {
            *e += 1;
        }
    }
    Ok(true)
}

/// One round of a block's scheduler: every runnable thread runs until it suspends, then the
/// waits that can end (mbarrier phases, named barriers, warp rendezvous, the block barrier) do.
/// Returns whether anything moved.
fn step(
    state: &BlockState,
    ctxs: &[ThreadCtx],
    coros: &mut [Coroutine<Reply, Event, (), DefaultStack>],
    ts: &mut [TState],
) -> Result<bool, KernelError> {
    let n = ts.len();
    let fail = |fault: Fault, threads: Vec<u32>, message: String| -> Result<bool, KernelError> {
        state.fault(fault, threads, None, message);
        Err(state.error.borrow_mut().take().expect("fault recorded"))
    };
    {
        let mut progressed = false;
        for t in 0..n {
            let TState::Runnable(input) = ts[t] else {
                continue;
            };
            progressed = true;
            CURRENT.with(|c| c.set(&ctxs[t]));
            IN_KERNEL.with(|k| k.set(true));
            let r = catch_unwind(AssertUnwindSafe(|| coros[t].resume(input)));
            IN_KERNEL.with(|k| k.set(false));
            CURRENT.with(|c| c.set(std::ptr::null()));
            ts[t] = match r {
                Ok(CoroutineResult::Yield(Event::Barrier(site))) => TState::AtBarrier(site),
                Ok(CoroutineResult::Yield(Event::Warp { op, value, site })) => {
                    TState::AtWarp { op, value, site }
                }
                Ok(CoroutineResult::Yield(Event::Mbarrier {
                    offset,
                    phase,
                    site,
                })) => TState::AtMbarrier {
                    offset,
                    phase,
                    site,
                },
                Ok(CoroutineResult::Yield(Event::Named {
                    id,
                    generation,
                    site,
                })) => TState::AtNamed {
                    id,
                    generation,
                    site,
                },
                Ok(CoroutineResult::Yield(Event::Cluster(site))) => TState::AtCluster(site),
                Ok(CoroutineResult::Return(())) => TState::Done,
                Err(payload) => {
                    if let Some(e) = state.error.borrow_mut().take() {
                        return Err(e);
                    }
                    let msg = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into());
                    let at = PANIC_SITE
                        .with(|s| s.take())
                        .map(|s| format!(" (at {s})"))
                        .unwrap_or_default();
                    return fail(
                        Fault::Panic,
                        vec![t as u32],
                        format!("thread {t} panicked: {msg}{at}"),
                    );
                }
            };
            if let Some(e) = state.error.borrow_mut().take() {
                return Err(e);
            }
        }
        // Threads whose mbarrier phase or named barrier has completed.
        for s in ts.iter_mut() {
            let go = match *s {
                TState::AtMbarrier { offset, phase, .. } => {
                    pipeline::mbarrier_reached(state, offset, phase)
                }
                TState::AtNamed { id, generation, .. } => {
                    pipeline::named_passed(state, id, generation)
                }
                _ => false,
            };
            if go {
                *s = TState::Runnable([0; 4]);
                progressed = true;
            }
        }
        // Warp rendezvous.
        for w in 0..n.div_ceil(32) {
            let lanes = w * 32..(w * 32 + 32).min(n);
            let live: Vec<usize> = lanes
                .clone()
                .filter(|&t| !matches!(ts[t], TState::Done))
                .collect();
            let Some(&first) = live.first() else { continue };
            let TState::AtWarp {
                op: op0,
                site: site0,
                ..
            } = ts[first]
            else {
                continue;
            };
            if !live.iter().all(|&t| matches!(ts[t], TState::AtWarp { .. })) {
                continue;
            }
            for &t in &live {
                if let TState::AtWarp { op, site, .. } = ts[t] {
                    if !op.same_kind(op0) || site != site0 {
                        return fail(
                            Fault::WarpDivergence,
                            vec![first as u32, t as u32],
                            format!(
                                "lanes of warp {w} meet at different warp operations: thread {first} at {} ({site0}), \
                                 thread {t} at {} ({site})",
                                op0.name(),
                                op.name()
                            ),
                        );
                    }
                }
            }
            if live.len() < lanes.len() {
                let exited: Vec<u32> = lanes
                    .clone()
                    .filter(|t| !live.contains(t))
                    .map(|t| t as u32)
                    .collect();
                return fail(
                    Fault::WarpDivergence,
                    exited.clone(),
                    format!(
                        "threads {} exited before the warp's {} at {site0}; every lane of the warp must take part",
                        ranges(&exited),
                        op0.name()
                    ),
                );
            }
            let payloads: Vec<Payload> = lanes
                .clone()
                .map(|t| {
                    if let TState::AtWarp { value, .. } = ts[t] {
                        value
                    } else {
                        [0; 10]
                    }
                })
                .collect();
            let replies = match op0 {
                WarpOp::MmaBf16 => {
                    if payloads.len() < 32 {
                        return fail(
                            Fault::WarpDivergence,
                            vec![first as u32],
                            format!("{} at {site0} needs a full warp of 32 lanes", op0.name()),
                        );
                    }
                    mma_bf16(&payloads)
                }
                WarpOp::LdMatrix { trans } => {
                    if payloads.len() < 32 {
                        return fail(
                            Fault::WarpDivergence,
                            vec![first as u32],
                            format!("{} at {site0} needs a full warp of 32 lanes", op0.name()),
                        );
                    }
                    match ldmatrix(state, w as u32, site0, &payloads, trans) {
                        Ok(r) => r,
                        Err(()) => {
                            return Err(state.error.borrow_mut().take().expect("fault recorded"))
                        }
                    }
                }
                _ => {
                    let values: Vec<u32> = payloads.iter().map(|p| p[0]).collect();
                    let count = values.len() as u32;
                    (0..values.len())
                        .map(|lane| {
                            let lane = lane as u32;
                            let from = |src: u32| {
                                if src < count {
                                    values[src as usize]
                                } else {
                                    values[lane as usize]
                                }
                            };
                            let r = match op0 {
                                WarpOp::ShflXor(_)
                                | WarpOp::ShflDown(_)
                                | WarpOp::ShflUp(_)
                                | WarpOp::ShflIdx(_) => {
                                    // Each lane's own operand (masks and deltas may differ per lane).
                                    let TState::AtWarp { op, .. } = ts[w * 32 + lane as usize]
                                    else {
                                        unreachable!()
                                    };
                                    match op {
                                        WarpOp::ShflXor(m) => from(lane ^ (m & 31)),
                                        WarpOp::ShflDown(d) => {
                                            from(if lane + d < 32 { lane + d } else { lane })
                                        }
                                        WarpOp::ShflUp(d) => {
                                            from(if lane >= d { lane - d } else { lane })
                                        }
                                        WarpOp::ShflIdx(s) => from(s % 32),
                                        _ => unreachable!(),
                                    }
                                }
                                WarpOp::Ballot => values
                                    .iter()
                                    .enumerate()
                                    .fold(0, |acc, (i, &v)| acc | (((v != 0) as u32) << i)),
                                _ => 0,
                            };
                            [r, 0, 0, 0]
                        })
                        .collect()
                }
            };
            for (i, t) in lanes.clone().enumerate() {
                ts[t] = TState::Runnable(replies[i]);
            }
            let lane_ids: Vec<u32> = lanes.clone().map(|t| state.cluster_id(t as u32)).collect();
            state.clocks.borrow_mut().rendezvous(&lane_ids);
            state.warp_epoch.borrow_mut()[w] += 1;
            progressed = true;
        }
        // Block barrier.
        let waiting: Vec<usize> = (0..n)
            .filter(|&t| matches!(ts[t], TState::AtBarrier(_)))
            .collect();
        let live = (0..n).filter(|&t| !matches!(ts[t], TState::Done)).count();
        if !waiting.is_empty() && waiting.len() == live {
            let TState::AtBarrier(site0) = ts[waiting[0]] else {
                unreachable!()
            };
            if let Some(&t) = waiting
                .iter()
                .find(|&&t| !matches!(ts[t], TState::AtBarrier(s) if s == site0))
            {
                let TState::AtBarrier(site) = ts[t] else {
                    unreachable!()
                };
                return fail(
                    Fault::BarrierDivergence,
                    vec![waiting[0] as u32, t as u32],
                    format!(
                        "threads wait at different block_sync calls: thread {} at {site0}, thread {t} at {site}",
                        waiting[0]
                    ),
                );
            }
            if live < n {
                let exited: Vec<u32> = (0..n)
                    .filter(|&t| matches!(ts[t], TState::Done))
                    .map(|t| t as u32)
                    .collect();
                return fail(
                    Fault::BarrierDivergence,
                    exited.clone(),
                    format!(
                        "threads {} exited without reaching the block_sync at {site0} that threads {} wait at; \
                         a barrier must be reached by every thread of the block",
                        ranges(&exited),
                        ranges(&waiting.iter().map(|&t| t as u32).collect::<Vec<_>>())
                    ),
                );
            }
            for &t in &waiting {
                ts[t] = TState::Runnable([0; 4]);
            }
            let all: Vec<u32> = (0..n as u32).map(|t| state.cluster_id(t)).collect();
            state.clocks.borrow_mut().rendezvous(&all);
            for e in state.warp_epoch.borrow_mut().iter_mut() {
                *e += 1;
            }
            progressed = true;
        }
        Ok(progressed)
    }
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` over a warp's fragments (PTX ISA
/// layouts; g = lane / 4, t = lane % 4): A regs hold rows {g, g + 8} × cols {2t, 2t + 1} and
/// {2t + 8, 2t + 9}; B regs k {2t, 2t + 1} and {2t + 8, 2t + 9} × col g; C/D rows {g, g + 8} ×
/// cols {2t, 2t + 1}. Products of bf16 are exact in f32; the sum is formed in f64 and rounded
/// once (the tensor core's own order differs by a few ulps).
fn mma_bf16(p: &[Payload]) -> Vec<Reply> {
    let bf = |bits: u32, hi: bool| {
        f32::from_bits(if hi { bits & 0xffff_0000 } else { bits << 16 }) as f64
    };
    let (mut a, mut b, mut c) = ([[0f64; 16]; 16], [[0f64; 8]; 16], [[0f64; 8]; 16]);
    for (lane, v) in p.iter().enumerate().take(32) {
        let (g, t) = (lane / 4, lane % 4);
        for (r, (row, col)) in [
            (g, 2 * t),
            (g + 8, 2 * t),
            (g, 2 * t + 8),
            (g + 8, 2 * t + 8),
        ]
        .into_iter()
        .enumerate()
        {
            a[row][col] = bf(v[r], false);
            a[row][col + 1] = bf(v[r], true);
        }
        for (r, k) in [2 * t, 2 * t + 8].into_iter().enumerate() {
            b[k][g] = bf(v[4 + r], false);
            b[k + 1][g] = bf(v[4 + r], true);
        }
        for (r, (row, col)) in [
            (g, 2 * t),
            (g, 2 * t + 1),
            (g + 8, 2 * t),
            (g + 8, 2 * t + 1),
        ]
        .into_iter()
        .enumerate()
        {
            c[row][col] = f32::from_bits(v[6 + r]) as f64;
        }
    }
    (0..32)
        .map(|lane| {
            let (g, t) = (lane / 4, lane % 4);
            let d = |row: usize, col: usize| {
                let s: f64 = (0..16).map(|k| a[row][k] * b[k][col]).sum::<f64>() + c[row][col];
                (s as f32).to_bits()
            };
            [
                d(g, 2 * t),
                d(g, 2 * t + 1),
                d(g + 8, 2 * t),
                d(g + 8, 2 * t + 1),
            ]
        })
        .collect()
}

/// `ldmatrix.x4` (`trans`: `.trans`): lanes 8j..8j+8 give the shared byte addresses of the 8
/// rows (16 bytes each) of matrix j; lane l gets, in reg j, elements (l / 4, 2(l % 4) + {0, 1})
/// of matrix j, or with `.trans` elements (2(l % 4) + {0, 1}, l / 4).
fn ldmatrix(
    st: &BlockState,
    warp: u32,
    site: Site,
    p: &[Payload],
    trans: bool,
) -> Result<Vec<Reply>, ()> {
    let size = st.shared.bytes();
    for (lane, v) in p.iter().enumerate().take(32) {
        let tid = warp * 32 + lane as u32;
        let addr = v[0] as usize;
        if !addr.is_multiple_of(16) || addr + 16 > size {
            st.fault(
                Fault::OutOfBounds,
                vec![tid],
                Some(addr as u64),
                format!("thread {tid}: ldmatrix row at shared byte {addr} (at {site}) is not a 16-byte aligned row inside the {size} bytes of shared memory"),
            );
            return Err(());
        }
        st.check_race(tid, site, state::Kind::Load, addr, 16, false);
        if st.error.borrow().is_some() {
            return Err(());
        }
        st.profile(
            tid,
            site,
            state::Kind::Load,
            false,
            st.shared.address(addr),
            16,
        );
    }
    let elem = |matrix: usize, row: usize, col: usize| {
        st.shared.load(p[8 * matrix + row][0] as usize + 2 * col, 2)
    };
    Ok((0..32)
        .map(|lane| {
            let (g, t) = (lane / 4, lane % 4);
            let mut r = [0u32; 4];
            for (j, reg) in r.iter_mut().enumerate() {
                *reg = if trans {
                    elem(j, 2 * t, g) | (elem(j, 2 * t + 1, g) << 16)
                } else {
                    elem(j, g, 2 * t) | (elem(j, g, 2 * t + 1) << 16)
                };
            }
            r
        })
        .collect())
}

/// "threads 0..=31 wait in shfl_xor at a.rs:3:5; threads 32..=63 wait at block_sync at a.rs:9:5"
/// (one block's).
fn describe_waits(state: &BlockState, ts: &[TState]) -> String {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for (t, s) in ts.iter().enumerate() {
        let what = match s {
            TState::AtBarrier(site) => format!("wait at block_sync at {site}"),
            TState::AtWarp { op, site, .. } => format!("wait in {} at {site}", op.name()),
            TState::AtMbarrier { offset, site, .. } => format!(
                "wait for the {} at {site}",
                pipeline::describe_mbarrier(state, *offset)
            ),
            TState::AtNamed { id, site, .. } => {
                let nb = &state.named.borrow()[*id as usize];
                format!(
                    "wait at named barrier {id} at {site} ({} of {} threads arrived)",
                    nb.arrived, nb.count
                )
            }
            TState::AtCluster(site) => format!("wait at cluster_sync at {site}"),
            TState::Done => "exited".to_string(),
            TState::Runnable(_) => "are runnable".to_string(),
        };
        match groups.iter_mut().find(|g| g.0 == what) {
            Some(g) => g.1.push(t as u32),
            None => groups.push((what, vec![t as u32])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(w, t)| {
            let who = if t.len() == 1 { "thread" } else { "threads" };
            let w = if t.len() == 1 {
                w.replacen("wait", "waits", 1)
                    .replacen("are runnable", "is runnable", 1)
            } else {
                w.clone()
            };
            format!("{who} {} {w}", ranges(t))
        })
        .collect();
    parts.join("; ")
}
