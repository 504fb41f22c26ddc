//! The host side: devices, buffers, launch configuration, launch validation, statistics and
//! errors. `#[tile_kernel]` generates a typed launcher on top of [`launch`].

use std::prelude::rust_2021::*;

pub mod cublas_lt;
mod cuda;
mod external;
pub mod module;
mod tensor_map;
mod workspace;

pub use crate::kernel::{KernelSpec, Module};
pub use crate::report::{Fault, KernelError, LaunchStats};
pub use cuda::CudaDevice;
pub use tensor_map::{TensorMap, TensorMapMut};

use crate::device::emu;
use crate::device::emu::memory::EmuMemory;
use crate::device::Element;
use crate::rules::{self, RuleId};
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
    /// An NVIDIA GPU through the CUDA driver (kernels from the PTX module).
    Cuda(Arc<CudaDevice>),
}

impl Device {
    /// The emulator, one worker per core (counted once per process: the count reads the
    /// cgroup's CPU quota from `/proc`, which cost ~10 µs on every call of a CPU tensor).
    pub fn emulator() -> Device {
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores = CORES.get_or_init(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
        Device::Emulator { workers: *cores }
    }

    /// CUDA device `ordinal`; an error (rule `no-gpu`) where there is no driver or device.
    pub fn cuda(ordinal: usize) -> Result<Device, LaunchError> {
        Ok(Device::Cuda(Arc::new(CudaDevice::open(ordinal)?)))
    }

    /// A short description.
    pub fn name(&self) -> String {
        match self {
            Device::Emulator { workers } => format!("emulator ({workers} workers)"),
            Device::Cuda(d) => format!("CUDA device {} ({})", d.ordinal, d.name),
        }
    }

    /// True for the emulator.
    pub fn is_emulator(&self) -> bool {
        matches!(self, Device::Emulator { .. })
    }

    /// Multiprocessors: the GPU's SM count; the emulator's workers (blocks it runs at once).
    pub fn multiprocessors(&self) -> u32 {
        match self {
            Device::Emulator { workers } => *workers as u32,
            Device::Cuda(d) => d.multiprocessors,
        }
    }

    /// The time per round of `reps` rounds of `f`, which launches kernels on the device it is
    /// given: on a GPU, launches queued back to back on this device's stream (not waited for)
    /// between two CUDA events, so a short kernel is not charged the launch latency of an idle
    /// GPU; on the emulator, wall time. For benchmarks.
    pub fn time_queued(
        &self,
        reps: u32,
        mut f: impl FnMut(&Device) -> Result<(), LaunchError>,
    ) -> Result<Duration, LaunchError> {
        match self {
            Device::Emulator { .. } => {
                let start = Instant::now();
                for _ in 0..reps {
                    f(self)?;
                }
                Ok(start.elapsed() / reps.max(1))
            }
            Device::Cuda(d) => d.time_queued(reps, &mut f),
        }
    }

    /// Shared memory one block may use, in bytes (the H100's 227 KiB, so that what runs on the
    /// emulator fits the GPU).
    pub fn shared_memory_limit(&self) -> usize {
        crate::kernel::MAX_SHARED_BYTES
    }
}

enum Storage {
    Emu(Arc<EmuMemory>),
    Cuda {
        /// Freed on drop unless `borrowed` (then it belongs to another library).
        slice: std::mem::ManuallyDrop<cudarc::driver::CudaSlice<u8>>,
        device: Arc<CudaDevice>,
        borrowed: bool,
    },
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Storage::Cuda {
            slice, borrowed, ..
        } = self
        {
            // SAFETY: `slice` is taken once, here, and not used again.
            let slice = unsafe { std::mem::ManuallyDrop::take(slice) };
            if *borrowed {
                // Releases cudarc's bookkeeping, not the memory.
                slice.leak();
            }
        }
    }
}

/// Bytes of `len` elements of `T`: an error (rule `argument-size`) past the address space.
fn byte_size<T: Element>(len: usize) -> Result<usize, LaunchError> {
    len.checked_mul(T::BYTES as usize)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!(
                    "a buffer of {len} elements of {} is larger than memory",
                    T::NAME
                ),
            )
        })
}

/// A buffer in device memory.
pub struct DeviceBuffer<T> {
    storage: Storage,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

fn to_bytes<T: Element>(data: &[T]) -> Vec<u8> {
    data.iter()
        .flat_map(|v| {
            v.to_bits()
                .to_le_bytes()
                .into_iter()
                .take(T::BYTES as usize)
        })
        .collect()
}

impl<T: Element> DeviceBuffer<T> {
    /// A copy of `data` on `device`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<DeviceBuffer<T>, LaunchError> {
        byte_size::<T>(data.len())?;
        let storage = match device {
            Device::Emulator { .. } => {
                let m = EmuMemory::new(data.len() * T::BYTES as usize);
                m.write_bytes(0, &to_bytes(data));
                Storage::Emu(Arc::new(m))
            }
            Device::Cuda(d) => Storage::Cuda {
                slice: std::mem::ManuallyDrop::new(d.upload(&to_bytes(data))?),
                device: d.clone(),
                borrowed: false,
            },
        };
        Ok(DeviceBuffer {
            storage,
            len: data.len(),
            _t: std::marker::PhantomData,
        })
    }

    /// `len` zeroed elements on `device`.
    pub fn zeros(device: &Device, len: usize) -> Result<DeviceBuffer<T>, LaunchError> {
        let bytes = byte_size::<T>(len)?;
        let storage = match device {
            Device::Emulator { .. } => Storage::Emu(Arc::new(EmuMemory::new(bytes))),
            Device::Cuda(d) => Storage::Cuda {
                slice: std::mem::ManuallyDrop::new(d.alloc(bytes)?),
                device: d.clone(),
                borrowed: false,
            },
        };
        Ok(DeviceBuffer {
            storage,
            len,
            _t: std::marker::PhantomData,
        })
    }

    /// Zeros elements `range`, queued on `device`'s stream like a launch (a memset node in a
    /// captured CUDA graph): a kernel launched after it on that stream finds them zero.
    pub fn zero_range(
        &mut self,
        device: &Device,
        range: std::ops::Range<usize>,
    ) -> Result<(), LaunchError> {
        if range.start > range.end || range.end > self.len {
            return Err(LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!(
                    "elements {range:?} of a buffer of {} cannot be zeroed; give a range inside 0..{}",
                    self.len, self.len
                ),
            ));
        }
        let bytes = range.start * T::BYTES as usize..range.end * T::BYTES as usize;
        if bytes.is_empty() {
            return Ok(());
        }
        match (&mut self.storage, device) {
            (Storage::Emu(m), Device::Emulator { .. }) => {
                m.write_bytes(bytes.start, &vec![0u8; bytes.len()]);
                Ok(())
            }
            (Storage::Cuda { slice, .. }, Device::Cuda(d)) => d.zero(slice, bytes),
            _ => Err(LaunchError::invalid(
                rules::ARGUMENT_DEVICE,
                format!(
                    "a buffer of another device than {} cannot be zeroed there; zero it on the device that allocated it",
                    device.name()
                ),
            )),
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
    pub fn to_vec(&self) -> Result<Vec<T>, LaunchError> {
        let bytes = match &self.storage {
            Storage::Emu(m) => {
                let mut b = vec![0u8; self.len * T::BYTES as usize];
                m.read_bytes(0, &mut b);
                b
            }
            Storage::Cuda { slice, device, .. } => {
                device.download(slice, self.len * T::BYTES as usize)?
            }
        };
        Ok(bytes
            .chunks(T::BYTES as usize)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                T::from_bits(u32::from_le_bytes(w))
            })
            .collect())
    }

    /// Copies `src` (same length, same device) into this buffer on the device; returns the time
    /// the copy took (CUDA events on a GPU: the driver's device-to-device copy).
    pub fn copy_from(&mut self, src: &DeviceBuffer<T>) -> Result<Duration, LaunchError> {
        if src.len != self.len {
            return Err(LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!("copy of {} elements into {}", src.len, self.len),
            ));
        }
        match (&mut self.storage, &src.storage) {
            (Storage::Emu(dst), Storage::Emu(from)) => {
                let start = Instant::now();
                let mut bytes = vec![0u8; self.len * T::BYTES as usize];
                from.read_bytes(0, &mut bytes);
                dst.write_bytes(0, &bytes);
                Ok(start.elapsed())
            }
            (
                Storage::Cuda {
                    slice: dst, device, ..
                },
                Storage::Cuda { slice: from, .. },
            ) => device.copy(from, dst),
            _ => Err(LaunchError::invalid(
                rules::ARGUMENT_DEVICE,
                "buffers of different devices".into(),
            )),
        }
    }

    /// Checks the buffer can be a kernel argument (element indices are 32-bit).
    #[doc(hidden)]
    pub fn check_argument(&self, name: &str) -> Result<(), LaunchError> {
        if self.len > u32::MAX as usize {
            return Err(LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!(
                    "buffer `{name}` has {} elements; kernels index buffers with u32 (at most {})",
                    self.len,
                    u32::MAX
                ),
            ));
        }
        Ok(())
    }

    /// The emulator's device-side handle (used by generated launchers). It names the buffer
    /// without owning or pointing into it: every access looks the buffer up among those the
    /// running launch received, so a handle kept past its launch (or a CUDA buffer's, which no
    /// emulator launch receives) is a `foreign-handle` kernel error, never a dangling read.
    #[doc(hidden)]
    pub fn global(&self) -> crate::device::Global<T> {
        crate::device::Global::from_emulated(self.emulated_id(), self.len as u32)
    }

    /// The writable emulator handle (see [`DeviceBuffer::global`]).
    #[doc(hidden)]
    pub fn global_mut(&self) -> crate::device::GlobalMut<T> {
        crate::device::GlobalMut::from_emulated(self.emulated_id(), self.len as u32)
    }

    /// The emulated memory's id; 0 (which no memory has) for a CUDA buffer.
    fn emulated_id(&self) -> u64 {
        match &self.storage {
            Storage::Emu(m) => m.id,
            Storage::Cuda { .. } => 0,
        }
    }

    /// This buffer as a kernel argument (a pointer and a length).
    #[doc(hidden)]
    pub fn arg(&self) -> KernelArg<'_> {
        KernelArg::Buffer {
            buffer: self.raw(),
            len: self.len as u32,
        }
    }

    fn raw(&self) -> RawBuffer<'_> {
        match &self.storage {
            Storage::Emu(m) => RawBuffer::Emu(m),
            Storage::Cuda { slice, .. } => RawBuffer::Cuda(slice),
        }
    }
}

/// Which memory a buffer argument lives in.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum RawBuffer<'a> {
    Emu(&'a Arc<EmuMemory>),
    Cuda(&'a cudarc::driver::CudaSlice<u8>),
}

impl<'a> RawBuffer<'a> {
    fn cuda_slice(&self) -> Option<&'a cudarc::driver::CudaSlice<u8>> {
        match self {
            RawBuffer::Cuda(s) => Some(s),
            RawBuffer::Emu(_) => None,
        }
    }
}

/// One kernel argument as the GPU receives it (generated launchers build the list).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum KernelArg<'a> {
    Buffer {
        buffer: RawBuffer<'a>,
        len: u32,
    },
    /// A [`TensorMap`]: its tensor's memory, and on a GPU the encoded map (passed as its
    /// address and the box's bytes).
    TensorMap {
        buffer: RawBuffer<'a>,
        map: Option<&'a cudarc::driver::CudaSlice<u8>>,
        box_bytes: u32,
    },
    U32(u32),
    I32(i32),
    F32(f32),
    U64(u64),
    I64(i64),
    F64(f64),
}

macro_rules! scalar_arg {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for KernelArg<'_> {
            fn from(x: $t) -> Self {
                KernelArg::$v(x.into())
            }
        }
    )*};
}
scalar_arg!(u32 => U32, i32 => I32, f32 => F32, u64 => U64, i64 => I64, f64 => F64, u16 => U32, i16 => I32, u8 => U32, i8 => I32);

impl From<bool> for KernelArg<'_> {
    fn from(x: bool) -> Self {
        KernelArg::U32(x as u32)
    }
}

/// Grid and block size of a 1-D launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// Launched to overlap the previous kernel of the stream ([`LaunchConfig::overlapping`]).
    pub overlap: bool,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads.
    pub const fn new(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            overlap: false,
        }
    }

    /// This launch overlapping the previous kernel of the stream (CUDA's programmatic
    /// dependent launch): its blocks may start while that kernel still runs — once each of
    /// its blocks has called [`launch_dependents`](crate::device::launch_dependents) or
    /// exited — so that its launch and its blocks' start hide behind the other's last wave.
    /// The kernel must call [`grid_dependency_wait`](crate::device::grid_dependency_wait)
    /// in every thread before it reads anything the previous kernel wrote, or writes what that
    /// kernel reads. The emulator runs launches one after the other.
    pub const fn overlapping(self) -> LaunchConfig {
        LaunchConfig {
            overlap: true,
            ..self
        }
    }
}

/// Why a launch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// Refused or failed outside the kernel (bad configuration or arguments, no GPU, a driver
    /// error).
    Invalid {
        /// The rule (`block-size`, `shared-memory`, `argument-size`, `argument-device`,
        /// `grid-size`, `no-gpu`, `ptx-module`, `cuda`, …).
        rule: RuleId,
        /// What is wrong and what to change.
        message: String,
    },
    /// The kernel ran and the sanitizer found a bug.
    Kernel(KernelError),
}

impl LaunchError {
    /// A refused launch.
    pub fn invalid(rule: RuleId, message: String) -> LaunchError {
        LaunchError::Invalid { rule, message }
    }

    /// The rule.
    pub fn rule(&self) -> RuleId {
        match self {
            LaunchError::Invalid { rule, .. } => *rule,
            LaunchError::Kernel(e) => e.fault.id(),
        }
    }

    /// What went wrong and what to change, without the `error[rule]: ` frame (printers add
    /// it from [`LaunchError::rule`]).
    pub fn message(&self) -> String {
        match self {
            LaunchError::Invalid { message, .. } => message.clone(),
            LaunchError::Kernel(e) => e.to_string(),
        }
    }
}

/// [`LaunchError::message`]: what went wrong and what to change. Like every error of ck-rs it
/// leaves the `error[rule]` frame to the printer: `eprintln!("{}: {e}", e.rule())`.
impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for LaunchError {}

/// Validates a launch of `spec` with `cfg` on `device`.
pub fn validate(device: &Device, spec: &KernelSpec, cfg: LaunchConfig) -> Result<(), LaunchError> {
    if cfg.block == 0 || cfg.block > MAX_BLOCK_THREADS {
        return Err(LaunchError::invalid(
            rules::BLOCK_SIZE,
            format!(
                "kernel `{}`: block of {} threads; it must have 1 to {MAX_BLOCK_THREADS}",
                spec.name, cfg.block
            ),
        ));
    }
    if let Some(b) = spec.block {
        if b != cfg.block {
            return Err(LaunchError::invalid(
                rules::BLOCK_SIZE,
                format!("kernel `{}` is written for blocks of {b} threads (#[tile_kernel(block = {b})]) but is launched with {}", spec.name, cfg.block),
            ));
        }
    }
    if cfg.grid == 0 || cfg.grid > i32::MAX as u32 {
        return Err(LaunchError::invalid(
            rules::GRID_SIZE,
            format!(
                "kernel `{}`: grid of {} blocks; it must have 1 to {}",
                spec.name,
                cfg.grid,
                i32::MAX
            ),
        ));
    }
    if let Some(c) = spec.cluster {
        if !(1..=crate::kernel::MAX_CLUSTER_BLOCKS).contains(&c) {
            return Err(LaunchError::invalid(
                rules::GRID_SIZE,
                format!("kernel `{}` declares clusters of {c} blocks; a cluster has 1 to {} (#[tile_kernel(cluster = N)] checks this; a hand-made KernelSpec must too)", spec.name, crate::kernel::MAX_CLUSTER_BLOCKS),
            ));
        }
        if !cfg.grid.is_multiple_of(c) {
            return Err(LaunchError::invalid(
                rules::GRID_SIZE,
                format!("kernel `{}` runs in clusters of {c} blocks (#[tile_kernel(cluster = {c})]); its grid of {} blocks must be a multiple of {c}", spec.name, cfg.grid),
            ));
        }
    }
    let limit = device.shared_memory_limit();
    if spec.shared_bytes > limit {
        return Err(LaunchError::invalid(
            rules::SHARED_MEMORY,
            format!("kernel `{}` declares {} bytes of shared memory; the device allows {limit} per block", spec.name, spec.shared_bytes),
        ));
    }
    Ok(())
}

/// Validates and runs a kernel. `args` are its arguments as the GPU receives them; `body` is
/// what every emulated thread executes. Generated launchers (`#[tile_kernel]`) call it; a
/// configuration can be checked without running anything with [`validate`].
///
/// # Safety
/// `spec` names a kernel whose PTX entry takes exactly `args` (each buffer as its pointer and
/// length, each tensor map as its map's address and box bytes, each scalar by value, in this
/// order) and whose body is `body` over the same arguments — what `#[tile_kernel]` generates
/// from one signature. On a GPU the arguments are passed to the entry unchecked, so any other
/// list would let the kernel read or write memory it was not given.
pub unsafe fn launch(
    device: &Device,
    spec: &KernelSpec,
    cfg: LaunchConfig,
    args: &[KernelArg<'_>],
    body: &(dyn Fn() + Sync),
) -> Result<LaunchStats, LaunchError> {
    validate(device, spec, cfg)?;
    let foreign = args.iter().any(|a| match a {
        KernelArg::Buffer { buffer, .. } | KernelArg::TensorMap { buffer, .. } => {
            matches!(buffer, RawBuffer::Emu(_)) != device.is_emulator()
        }
        _ => false,
    });
    if foreign {
        return Err(LaunchError::invalid(
            rules::ARGUMENT_DEVICE,
            format!(
                "kernel `{}`: a buffer was allocated on another device than {}",
                spec.name,
                device.name()
            ),
        ));
    }
    match device {
        Device::Emulator { workers } => {
            let start = Instant::now();
            // The launch owns a reference to every buffer it received: handles resolve
            // through these, so a buffer cannot be freed while a kernel reads it.
            let buffers: Arc<[Arc<EmuMemory>]> = args
                .iter()
                .filter_map(|a| a.emulated().map(Arc::clone))
                .collect();
            let mut st = emu::launch(
                spec.name,
                (cfg.grid, cfg.block, spec.cluster.unwrap_or(1)),
                spec.shared_bytes,
                buffers,
                *workers,
                body,
            )
            .map_err(LaunchError::Kernel)?;
            st.elapsed = start.elapsed();
            Ok(st)
        }
        Device::Cuda(d) => d.launch(spec, cfg, args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `zero_range` zeros exactly its elements; a range past the buffer is an `argument-size`
    /// error that leaves the buffer as it was.
    #[test]
    fn zero_range_zeros_its_elements_only() {
        let device = Device::emulator();
        let mut b = DeviceBuffer::from_slice(&device, &[1u32, 2, 3, 4, 5]).unwrap();
        b.zero_range(&device, 1..3).unwrap();
        assert_eq!(b.to_vec().unwrap(), [1, 0, 0, 4, 5]);
        let err = b.zero_range(&device, 4..6).unwrap_err();
        assert_eq!(err.rule().name(), "argument-size");
        assert_eq!(b.to_vec().unwrap(), [1, 0, 0, 4, 5]);
    }
}
