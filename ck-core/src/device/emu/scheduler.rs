//! The scheduler: a grid's clusters on worker threads, each cluster's blocks on one scheduler,
//! each block's threads as coroutines run round-robin until they suspend; then the waits that
//! can end do (mbarrier phases, named barriers, warp rendezvous, the block and cluster
//! barriers), and a round in which nothing moves is a `deadlock`.

use std::prelude::rust_2021::*;

use super::clocks::Clocks;
use super::collectives::{ldmatrix, mma_bf16, stmatrix};
use super::memory::EmuMemory;
use super::state::{BlockState, Site};
use super::{
    install_panic_hook, pipeline, Event, Payload, Reply, ThreadCtx, WarpOp, CURRENT, IN_KERNEL,
    PANIC_SITE,
};
use crate::report::{Fault, KernelError, LaunchStats};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Stack of one emulated thread.
const STACK_BYTES: usize = 256 * 1024;

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
                WarpOp::LdMatrix { trans } | WarpOp::StMatrix { trans } => {
                    if payloads.len() < 32 {
                        return fail(
                            Fault::WarpDivergence,
                            vec![first as u32],
                            format!("{} at {site0} needs a full warp of 32 lanes", op0.name()),
                        );
                    }
                    let done = if matches!(op0, WarpOp::StMatrix { .. }) {
                        stmatrix(state, w as u32, site0, &payloads, trans)
                    } else {
                        ldmatrix(state, w as u32, site0, &payloads, trans)
                    };
                    match done {
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
