//! The host side: devices, buffers, launch configuration, launch validation, statistics and
//! errors. `#[tile_kernel]` generates a typed launcher on top of [`launch`].

use std::prelude::rust_2021::*;

use crate::device::emu;
use crate::device::emu::memory::EmuMemory;
use crate::device::Element;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most threads per block (NVIDIA).
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// Where kernels run.
#[derive(Clone, Debug)]
pub enum Device {
    /// The CPU SIMT emulator (sanitizer and profiler).
    Emulator {
        /// OS threads running blocks in parallel.
        workers: usize,
    },
}

impl Device {
    /// The emulator, one worker per core.
    pub fn emulator() -> Device {
        Device::Emulator {
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }

    /// A short description.
    pub fn name(&self) -> String {
        match self {
            Device::Emulator { workers } => format!("emulator ({workers} workers)"),
        }
    }

    /// Shared memory one block may use, in bytes (the H100's 227 KiB, so that what runs on the
    /// emulator fits the GPU).
    pub fn shared_memory_limit(&self) -> usize {
        crate::kernel::MAX_SHARED_BYTES
    }
}

/// A buffer in device memory.
pub struct DeviceBuffer<T> {
    memory: Arc<EmuMemory>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element> DeviceBuffer<T> {
    /// A copy of `data` on `device`.
    pub fn from_slice(device: &Device, data: &[T]) -> DeviceBuffer<T> {
        let b = DeviceBuffer::zeros(device, data.len());
        for (i, v) in data.iter().enumerate() {
            let bits = v.to_bits();
            b.memory.store(i * T::BYTES as usize, T::BYTES, bits);
        }
        b
    }

    /// `len` zeroed elements on `device`.
    pub fn zeros(device: &Device, len: usize) -> DeviceBuffer<T> {
        match device {
            Device::Emulator { .. } => DeviceBuffer {
                memory: Arc::new(EmuMemory::new(len * T::BYTES as usize)),
                len,
                _t: std::marker::PhantomData,
            },
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the buffer back to the host.
    pub fn to_vec(&self) -> Vec<T> {
        (0..self.len)
            .map(|i| T::from_bits(self.memory.load(i * T::BYTES as usize, T::BYTES)))
            .collect()
    }

    /// Checks the buffer can be a kernel argument (element indices are 32-bit).
    #[doc(hidden)]
    pub fn check_argument(&self, name: &str) -> Result<(), LaunchError> {
        if self.len > u32::MAX as usize {
            return Err(LaunchError::invalid(
                "argument-size",
                format!(
                    "buffer `{name}` has {} elements; kernels index buffers with u32 (at most {})",
                    self.len,
                    u32::MAX
                ),
            ));
        }
        Ok(())
    }

    /// The device-side handle (used by generated launchers).
    #[doc(hidden)]
    pub fn global(&self) -> crate::device::Global<T> {
        crate::device::Global::from_emulated(&self.memory, self.len as u32)
    }

    /// The writable device-side handle (used by generated launchers).
    #[doc(hidden)]
    pub fn global_mut(&mut self) -> crate::device::GlobalMut<T> {
        crate::device::GlobalMut::from_emulated(&self.memory, self.len as u32)
    }
}

/// Grid and block size of a 1-D launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads.
    pub const fn new(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig { grid, block }
    }
}

pub use crate::kernel::KernelSpec;

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
}

impl Fault {
    /// Stable rule name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::OutOfBounds => "out-of-bounds",
            Fault::Misaligned => "misaligned-access",
            Fault::SharedRace => "shared-race",
            Fault::BarrierDivergence => "barrier-divergence",
            Fault::WarpDivergence => "warp-divergence",
            Fault::Deadlock => "deadlock",
            Fault::Panic => "kernel-panic",
        }
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

/// Why a launch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// Refused before running (bad configuration or arguments).
    Invalid {
        /// Stable rule name (`block-size`, `shared-memory`, `argument-size`, `grid-size`).
        rule: &'static str,
        /// What is wrong and what to change.
        message: String,
    },
    /// The kernel ran and the sanitizer found a bug.
    Kernel(KernelError),
}

impl LaunchError {
    /// A refused launch.
    pub fn invalid(rule: &'static str, message: String) -> LaunchError {
        LaunchError::Invalid { rule, message }
    }

    /// Stable rule name.
    pub fn rule(&self) -> &'static str {
        match self {
            LaunchError::Invalid { rule, .. } => rule,
            LaunchError::Kernel(e) => e.fault.name(),
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Invalid { rule, message } => write!(f, "error[{rule}]: {message}"),
            LaunchError::Kernel(e) => write!(f, "error[{}]: {e}", e.fault.name()),
        }
    }
}

impl std::error::Error for LaunchError {}

/// Validates a launch of `spec` with `cfg` on `device`.
pub fn validate(device: &Device, spec: &KernelSpec, cfg: LaunchConfig) -> Result<(), LaunchError> {
    if cfg.block == 0 || cfg.block > MAX_BLOCK_THREADS {
        return Err(LaunchError::invalid(
            "block-size",
            format!(
                "kernel `{}`: block of {} threads; it must have 1 to {MAX_BLOCK_THREADS}",
                spec.name, cfg.block
            ),
        ));
    }
    if let Some(b) = spec.block {
        if b != cfg.block {
            return Err(LaunchError::invalid(
                "block-size",
                format!("kernel `{}` is written for blocks of {b} threads (#[tile_kernel(block = {b})]) but is launched with {}", spec.name, cfg.block),
            ));
        }
    }
    if cfg.grid == 0 || cfg.grid > i32::MAX as u32 {
        return Err(LaunchError::invalid(
            "grid-size",
            format!(
                "kernel `{}`: grid of {} blocks; it must have 1 to {}",
                spec.name,
                cfg.grid,
                i32::MAX
            ),
        ));
    }
    let limit = device.shared_memory_limit();
    if spec.shared_bytes > limit {
        return Err(LaunchError::invalid(
            "shared-memory",
            format!("kernel `{}` declares {} bytes of shared memory; the device allows {limit} per block", spec.name, spec.shared_bytes),
        ));
    }
    Ok(())
}

/// Validates and runs a kernel: `body` is what every thread executes.
pub fn launch(
    device: &Device,
    spec: &KernelSpec,
    cfg: LaunchConfig,
    body: &(dyn Fn() + Sync),
) -> Result<LaunchStats, LaunchError> {
    validate(device, spec, cfg)?;
    let start = Instant::now();
    match device {
        Device::Emulator { workers } => {
            let mut st = emu::launch(
                spec.name,
                cfg.grid,
                cfg.block,
                spec.shared_bytes,
                *workers,
                body,
            )
            .map_err(LaunchError::Kernel)?;
            st.elapsed = start.elapsed();
            Ok(st)
        }
    }
}
