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
mod collectives;
pub(crate) mod memory;
mod pipeline;
mod scheduler;
mod shadow;
mod sm90;
mod state;

use super::SharedArray;
pub use api::*;
pub use cluster::{cluster_ctarank, cluster_size, cluster_sync};
pub use pipeline::{
    bulk_commit_group, bulk_wait_group, bulk_wait_group_read, fence_barrier_init,
    named_barrier_arrive, named_barrier_sync, setmaxnreg_dec, setmaxnreg_inc, Tma, TmaMut,
};
pub(crate) use scheduler::launch;
pub use sm90::*;

use crate::report::Fault;
use corosensei::Yielder;
use memory::EmuMemory;
use state::{BlockState, Site};
use std::cell::Cell;
use std::panic::Location;
use std::sync::Once;

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
    /// `stmatrix.sync.aligned.m8n8.x4(.trans).shared.b16`; each lane's shared byte address,
    /// then its four registers.
    StMatrix {
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
            WarpOp::StMatrix { trans: false } => "stmatrix_x4",
            WarpOp::StMatrix { trans: true } => "stmatrix_x4_trans",
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

/// The memory of global buffer `buffer` (of at least `len` elements), which the running launch
/// must have received; anything else is a `foreign-handle` fault.
///
/// The reference lives as long as the block's state, which the launch keeps until every
/// thread of the block has finished (`ctx`'s lifetime is the kernel's).
#[track_caller]
pub(crate) fn buffer_of_launch(buffer: u64, len: u32) -> &'static EmuMemory {
    let c = ctx();
    let st = c.state();
    match st.buffers.iter().find(|m| m.id == buffer) {
        Some(m) => m,
        None if buffer == u64::MAX => {
            st.fault(
                Fault::OutOfBounds,
                vec![c.tid],
                None,
                format!(
                    "thread {}: an access at {} through an empty handle (`Global::empty()`), which has no elements",
                    c.tid,
                    Location::caller()
                ),
            );
            abort();
        }
        None => {
            st.fault(
                Fault::ForeignHandle,
                vec![c.tid],
                None,
                format!(
                    "thread {}: a global buffer of {len} elements used at {} was not passed to this launch (a handle kept from another launch, or made outside one); pass the buffer as a kernel argument",
                    c.tid,
                    Location::caller()
                ),
            );
            abort();
        }
    }
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
