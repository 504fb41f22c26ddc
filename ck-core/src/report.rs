//! What a launch reports: its counters ([`LaunchStats`]) and the kernel bugs the emulator finds
//! ([`Fault`], [`KernelError`]). A leaf module: the emulator (`device::emu`) fills these in and
//! the host (`host`, which drives the emulator) returns them, so neither imports the other's
//! types and the dependency between them points one way, host → device.

use std::prelude::rust_2021::*;

use crate::rules::{self, RuleId};
use core::fmt;
use core::time::Duration;

/// Counters of one launch, by the models of [`crate::bank`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchStats {
    /// Shared-load wavefronts.
    pub shared_load_wavefronts: u64,
    /// Extra shared-load wavefronts from bank conflicts.
    pub shared_load_conflicts: u64,
    /// Warp-level shared loads.
    pub shared_load_requests: u64,
    /// Shared-store wavefronts.
    pub shared_store_wavefronts: u64,
    /// Extra shared-store wavefronts from bank conflicts.
    pub shared_store_conflicts: u64,
    /// Warp-level shared stores.
    pub shared_store_requests: u64,
    /// Warp-level shared atomics.
    pub shared_atomic_requests: u64,
    /// 32-byte sectors read from global memory.
    pub global_load_sectors: u64,
    /// Warp-level global loads.
    pub global_load_requests: u64,
    /// 32-byte sectors written to global memory.
    pub global_store_sectors: u64,
    /// Warp-level global stores.
    pub global_store_requests: u64,
    /// Warp-level global atomics.
    pub global_atomic_requests: u64,
    /// Wall time of the launch.
    pub elapsed: Duration,
}

impl LaunchStats {
    /// Adds another block's counters.
    pub fn add(&mut self, o: &LaunchStats) {
        self.shared_load_wavefronts += o.shared_load_wavefronts;
        self.shared_load_conflicts += o.shared_load_conflicts;
        self.shared_load_requests += o.shared_load_requests;
        self.shared_store_wavefronts += o.shared_store_wavefronts;
        self.shared_store_conflicts += o.shared_store_conflicts;
        self.shared_store_requests += o.shared_store_requests;
        self.shared_atomic_requests += o.shared_atomic_requests;
        self.global_load_sectors += o.global_load_sectors;
        self.global_load_requests += o.global_load_requests;
        self.global_store_sectors += o.global_store_sectors;
        self.global_store_requests += o.global_store_requests;
        self.global_atomic_requests += o.global_atomic_requests;
    }
}

/// The kind of kernel bug the emulator found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A global or shared access outside its array.
    OutOfBounds,
    /// A vector access not aligned to its size.
    Misaligned,
    /// Two threads touch the same shared byte between barriers, at least one writing.
    SharedRace,
    /// A barrier not every thread reaches (or threads at different barriers).
    BarrierDivergence,
    /// Lanes of a warp at different warp operations, or some exited.
    WarpDivergence,
    /// No thread can make progress.
    Deadlock,
    /// The kernel panicked.
    Panic,
    /// A global-memory handle used in a launch that did not receive its buffer (kept from an
    /// earlier launch, or made outside one): the emulator would otherwise read memory the
    /// launch does not own.
    ForeignHandle,
    /// The kernel uses a hardware mode the emulator does not model (it would compute something
    /// the GPU does not): e.g. a 32- or 64-byte wgmma swizzle.
    Unmodelled,
    /// A barrier used against its contract: an mbarrier used before its `init`, a named
    /// barrier id outside 1..=15 or a thread count that is not whole warps, arrivals at one
    /// named barrier naming different counts, a TMA copy into a misaligned destination.
    BarrierMisuse,
}

impl Fault {
    /// The fault's identifier in the one vocabulary ([`crate::rules`]).
    pub fn id(self) -> RuleId {
        match self {
            Fault::OutOfBounds => rules::OUT_OF_BOUNDS,
            Fault::Misaligned => rules::MISALIGNED_ACCESS,
            Fault::SharedRace => rules::SHARED_RACE,
            Fault::BarrierDivergence => rules::BARRIER_DIVERGENCE,
            Fault::WarpDivergence => rules::WARP_DIVERGENCE,
            Fault::Deadlock => rules::DEADLOCK,
            Fault::Panic => rules::KERNEL_PANIC,
            Fault::ForeignHandle => rules::FOREIGN_HANDLE,
            Fault::Unmodelled => rules::EMULATOR_UNMODELLED,
            Fault::BarrierMisuse => rules::BARRIER_MISUSE,
        }
    }

    /// Stable rule name.
    pub fn name(self) -> &'static str {
        self.id().name()
    }
}

/// A kernel bug found by the emulator: what, where (kernel, block, threads, address), why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelError {
    /// The kind of bug.
    pub fault: Fault,
    /// Kernel name.
    pub kernel: String,
    /// Block index.
    pub block: u32,
    /// Threads involved (in the block).
    pub threads: Vec<u32>,
    /// Element index or shared byte involved, if any.
    pub address: Option<u64>,
    /// The full diagnosis.
    pub message: String,
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in kernel `{}`, block {}: {}",
            self.fault.name(),
            self.kernel,
            self.block,
            self.message
        )
    }
}

impl std::error::Error for KernelError {}
