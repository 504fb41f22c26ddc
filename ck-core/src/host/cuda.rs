//! The NVIDIA backend of the host API: one CUDA context and stream per [`Device::Cuda`], each
//! kernel crate's PTX module loaded once, when its first kernel is launched (where modules are
//! found: [`super::module`]), launches timed with CUDA events — or, on a stream borrowed from
//! another library ([`Device::on_cuda_stream`](super::Device::on_cuda_stream)), queued on it
//! without waiting.

use super::{KernelArg, KernelSpec, LaunchConfig, LaunchError, LaunchStats, Module};
use crate::rules;
use core::ffi::c_void;
use core::ptr::null_mut;
use cudarc::driver::sys::{
    cuLaunchKernelEx, CUfunction_attribute_enum, CUlaunchAttribute, CUlaunchAttributeID,
    CUlaunchAttributeValue, CUlaunchConfig,
};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::prelude::rust_2021::*;

/// Loaded modules by crate name; a failure is kept too, so later launches report it without
/// searching again.
type Modules = Mutex<HashMap<&'static str, Result<Arc<CudaModule>, LaunchError>>>;
type Functions = Mutex<HashMap<(&'static str, &'static str), CudaFunction>>;
/// Tensor maps in device memory by their 128 encoded bytes, shared by every view of the device
/// (its own stream and the streams it borrows). A map is a function of its tensor's address
/// and geometry alone, so an equal map is the same map: launches that pass the same tensors
/// again upload nothing (an upload is a copy between two kernels).
///
/// A map enters the cache through a stream of the cache's own, and the host waits for that
/// copy, so a cached map is in device memory before any launch on any stream can name it (no
/// ordering between streams is needed, and a stream handle reused after its stream was
/// destroyed cannot see a copy in flight). Cached maps live as long as the device, since a
/// kernel queued on some stream may still read one; past [`MAPS_KEPT`] of them each launch
/// uploads its own on its stream, freed in stream order after it.
///
/// A launch captured into a CUDA graph must find its map cached: its replays read the map long
/// after the capture, and no upload may run while a stream is captured. The launch made before
/// the capture (the warm-up `torch.cuda.graph` asks for) caches it, hence a cache large enough
/// that a process does not fill it (256 maps did: a graph captured after them read a freed map).
struct MapCache {
    maps: Mutex<HashMap<[u8; 128], Arc<CudaSlice<u8>>>>,
    uploads: Arc<CudaStream>,
}

/// The workspaces of every borrowed stream of a device, by stream handle.
struct StreamWorkspaces {
    by_stream: Mutex<HashMap<usize, Arc<super::workspace::Workspaces>>>,
    ctx: Arc<CudaContext>,
}

impl Drop for StreamWorkspaces {
    fn drop(&mut self) {
        // They are freed on the device's own stream, which does not follow the borrowed
        // streams: kernels queued there may still use them.
        let _ = self.ctx.synchronize();
    }
}

impl Drop for MapCache {
    fn drop(&mut self) {
        // Kernels queued on borrowed streams may still read the maps freed after this.
        let _ = self.uploads.context().synchronize();
    }
}

/// Maps kept in the cache (128 bytes each: 8 MiB).
const MAPS_KEPT: usize = 1 << 16;

/// A CUDA device with its stream and the kernels' module.
pub struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) name: String,
    pub(crate) multiprocessors: u32,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// Launches wait for the kernel and time it (the device's own stream); on a borrowed
    /// stream they are only queued.
    timed: bool,
    /// Shared with the views of this device on other streams.
    modules: Arc<Modules>,
    functions: Arc<Functions>,
    /// Shared with the views of this device on other streams.
    maps: Arc<MapCache>,
    /// Kernels' workspaces on this device's stream, by name (`Device::take_workspace`): the
    /// device's own, shared with the view that queues launches for timing there; a view on a
    /// borrowed stream has that stream's, shared by every view on it.
    pub(crate) workspaces: Option<Arc<super::workspace::Workspaces>>,
    /// The workspaces of every borrowed stream, by stream handle (shared with the views).
    stream_workspaces: Arc<StreamWorkspaces>,
    /// The device's own stream, which outlives every view: views allocate their workspaces
    /// there.
    pub(crate) own_stream: Arc<CudaStream>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({}, {})", self.ordinal, self.name)
    }
}

fn backend(e: impl std::fmt::Display) -> LaunchError {
    LaunchError::invalid(rules::CUDA, format!("CUDA driver error: {e}"))
}

impl CudaDevice {
    pub(crate) fn open(ordinal: usize) -> Result<CudaDevice, LaunchError> {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(LaunchError::invalid(
                rules::NO_GPU,
                "no CUDA driver library (libcuda.so) on this machine; use the emulator (--backend emu)".into(),
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            LaunchError::invalid(
                rules::NO_GPU,
                format!("cannot open CUDA device {ordinal}: {e}"),
            )
        })?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let multiprocessors = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute_enum::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(backend)?
            .max(1) as u32;
        // SAFETY: cudarc's per-buffer events order uses across streams. They are not needed:
        // launches on the device's own stream wait for their kernel before returning, so no
        // buffer is freed or reused while a kernel uses it; buffers on a borrowed stream are
        // ordered by the stream's owner (`on_stream`'s contract). Without them a launch costs
        // no event calls per argument.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let maps = Arc::new(MapCache {
            maps: Mutex::default(),
            uploads: ctx.new_stream().map_err(backend)?,
        });
        let stream_workspaces = Arc::new(StreamWorkspaces {
            by_stream: Mutex::default(),
            ctx: ctx.clone(),
        });
        Ok(CudaDevice {
            ordinal,
            name,
            multiprocessors,
            ctx,
            timed: true,
            modules: Arc::default(),
            functions: Arc::default(),
            maps,
            workspaces: Some(Arc::default()),
            stream_workspaces,
            own_stream: stream.clone(),
            stream,
        })
    }

    /// This device on `stream`, a stream of its context owned by another library: launches are
    /// queued there without waiting (the owner orders them with its own work), and modules are
    /// shared with `self`.
    ///
    /// # Safety
    /// `stream` is a live stream of this device's context and outlives the returned device.
    pub(crate) unsafe fn on_stream(&self, stream: u64) -> CudaDevice {
        let workspaces = self
            .stream_workspaces
            .by_stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(stream as usize)
            .or_default()
            .clone();
        CudaDevice {
            ordinal: self.ordinal,
            name: self.name.clone(),
            multiprocessors: self.multiprocessors,
            ctx: self.ctx.clone(),
            // SAFETY: the caller's promise.
            stream: unsafe {
                self.ctx
                    .wrap_borrowed_stream(stream as cudarc::driver::sys::CUstream)
            },
            timed: false,
            modules: self.modules.clone(),
            functions: self.functions.clone(),
            maps: self.maps.clone(),
            workspaces: Some(workspaces),
            stream_workspaces: self.stream_workspaces.clone(),
            own_stream: self.own_stream.clone(),
        }
    }

    /// Whether this is a view on another library's stream.
    pub(crate) fn borrows_stream(&self) -> bool {
        !Arc::ptr_eq(&self.stream, &self.own_stream)
    }

    /// Whether this device's stream is being captured into a CUDA graph (a launch there is
    /// recorded, to be replayed later on any stream).
    pub(crate) fn capturing(&self) -> Result<bool, LaunchError> {
        let status = self.stream.capture_status().map_err(backend)?;
        Ok(status != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// `bytes` zeroed bytes on the device's own stream, complete when this returns (so that a
    /// launch on any stream may use them), freed on that stream.
    pub(crate) fn alloc_on_own_stream(&self, bytes: usize) -> Result<CudaSlice<u8>, LaunchError> {
        let slice = self
            .own_stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(backend)?;
        self.own_stream.synchronize().map_err(backend)?;
        Ok(slice)
    }

    /// Waits until everything queued on this device's stream has run.
    pub(crate) fn synchronize(&self) -> Result<(), LaunchError> {
        self.stream.synchronize().map_err(backend)
    }

    /// The loaded module of `m`'s crate, loading it on first use.
    fn module(&self, m: &Module) -> Result<Arc<CudaModule>, LaunchError> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let entry = modules.entry(m.crate_name).or_insert_with(|| {
            let (source, ptx) = super::module::find_ptx(m)?;
            self.ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                .map_err(|e| {
                    LaunchError::invalid(
                        rules::PTX_MODULE,
                        format!("the driver rejected the module of `{}` ({source}): {e}; rebuild it with `ck build-ptx --manifest-path {}/Cargo.toml`", m.crate_name, m.manifest_dir),
                    )
                })
        });
        entry.clone()
    }

    fn function(&self, spec: &KernelSpec) -> Result<CudaFunction, LaunchError> {
        let key = (spec.module.crate_name, spec.name);
        if let Some(f) = self
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(f.clone());
        }
        let f = self.module(&spec.module)?.load_function(spec.name).map_err(|e| {
            LaunchError::invalid(rules::PTX_MODULE, format!("kernel `{}` is not in the PTX module of `{}` ({e}); rebuild it with `ck build-ptx --manifest-path {}/Cargo.toml`", spec.name, spec.module.crate_name, spec.module.manifest_dir))
        })?;
        if spec.shared_bytes > 48 * 1024 {
            f.set_attribute(
                CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                spec.shared_bytes as i32,
            )
            .map_err(backend)?;
        }
        self.functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, f.clone());
        Ok(f)
    }

    /// The GPU time per round of `reps` rounds of `f`, launches queued back to back on this
    /// device's stream between two events (no wait, so no launch latency between kernels).
    pub(crate) fn time_queued(
        &self,
        reps: u32,
        f: &mut dyn FnMut(&super::Device) -> Result<(), LaunchError>,
    ) -> Result<Duration, LaunchError> {
        let queued = super::Device::Cuda(Arc::new(CudaDevice {
            ordinal: self.ordinal,
            name: self.name.clone(),
            multiprocessors: self.multiprocessors,
            ctx: self.ctx.clone(),
            stream: self.stream.clone(),
            timed: false,
            modules: self.modules.clone(),
            functions: self.functions.clone(),
            maps: self.maps.clone(),
            workspaces: self.workspaces.clone(),
            stream_workspaces: self.stream_workspaces.clone(),
            own_stream: self.own_stream.clone(),
        }));
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.stream.record_event(flags).map_err(backend)?;
        for _ in 0..reps {
            f(&queued)?;
        }
        let end = self.stream.record_event(flags).map_err(backend)?;
        end.synchronize().map_err(|e| {
            LaunchError::invalid(
                rules::CUDA,
                format!("a queued kernel failed on the GPU: {e}"),
            )
        })?;
        let ms = start.elapsed_ms(&end).map_err(backend)?;
        Ok(Duration::from_secs_f64(
            ms as f64 / 1e3 / reps.max(1) as f64,
        ))
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>, LaunchError> {
        self.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(backend)
    }

    /// Zeros bytes `range` of `slice`, queued on this device's stream (a memset node where
    /// the stream is being captured).
    pub(crate) fn zero(
        &self,
        slice: &mut CudaSlice<u8>,
        range: std::ops::Range<usize>,
    ) -> Result<(), LaunchError> {
        self.stream
            .memset_zeros(&mut slice.slice_mut(range))
            .map_err(backend)
    }

    pub(crate) fn upload(&self, data: &[u8]) -> Result<CudaSlice<u8>, LaunchError> {
        if data.is_empty() {
            return self.alloc(0);
        }
        self.stream.clone_htod(data).map_err(backend)
    }

    /// The encoded tensor map `map` in device memory: the cached copy of an equal map, a new
    /// one added to the cache (complete when this returns), or, with the cache full, a copy
    /// queued on this stream ([`MapCache`]); while the stream is captured, only a cached one.
    pub(crate) fn tensor_map(&self, map: [u8; 128]) -> Result<Arc<CudaSlice<u8>>, LaunchError> {
        let mut maps = self.maps.maps.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(uploaded) = maps.get(&map) {
            return Ok(uploaded.clone());
        }
        if self.capturing()? {
            return Err(LaunchError::invalid(
                rules::CUDA,
                "a launch captured into a CUDA graph needs a tensor map (a TMA descriptor) made \
                 before the capture: run the call once on the same tensors before capturing it \
                 (the warm-up torch.cuda.graph asks for)"
                    .into(),
            ));
        }
        if maps.len() >= MAPS_KEPT {
            return Ok(Arc::new(self.upload(&map)?));
        }
        let uploads = &self.maps.uploads;
        let uploaded = Arc::new(uploads.clone_htod(&map).map_err(backend)?);
        uploads.synchronize().map_err(backend)?;
        maps.insert(map, uploaded.clone());
        Ok(uploaded)
    }

    pub(crate) fn download(
        &self,
        slice: &CudaSlice<u8>,
        bytes: usize,
    ) -> Result<Vec<u8>, LaunchError> {
        let mut v = self.stream.clone_dtoh(slice).map_err(backend)?;
        v.truncate(bytes);
        Ok(v)
    }

    /// Device-to-device copy, timed with CUDA events.
    pub(crate) fn copy(
        &self,
        from: &CudaSlice<u8>,
        to: &mut CudaSlice<u8>,
    ) -> Result<Duration, LaunchError> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.stream.record_event(flags).map_err(backend)?;
        self.stream.memcpy_dtod(from, to).map_err(backend)?;
        let end = self.stream.record_event(flags).map_err(backend)?;
        end.synchronize().map_err(backend)?;
        let ms = start.elapsed_ms(&end).map_err(backend)?;
        Ok(Duration::from_secs_f64(ms as f64 / 1e3))
    }

    /// Launches and waits, the elapsed time measured with CUDA events; on a borrowed stream,
    /// only queues the launch (zero statistics; a failure shows at the stream's next
    /// synchronisation, as for the owner's own kernels).
    pub(crate) fn launch(
        &self,
        spec: &KernelSpec,
        cfg: LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<LaunchStats, LaunchError> {
        let f = self.function(spec)?;
        // Each parameter in a slot of its own, read by the driver from the slot's start for
        // the entry parameter's size (little-endian: a u32 is the slot's low bytes).
        let mut slots: Vec<u64> = Vec::with_capacity(2 * args.len());
        let device_ptr = |s: &CudaSlice<u8>| s.device_ptr(&self.stream).0;
        let other_device = |what: &str| {
            LaunchError::invalid(
                rules::ARGUMENT_DEVICE,
                format!("{what} of another device was passed to a CUDA launch; allocate it on the launch's device"),
            )
        };
        for a in args {
            match a {
                // A buffer's pointer and length; a tensor map's address and its box's bytes.
                KernelArg::Buffer { buffer, len } => {
                    let slice = buffer
                        .cuda_slice()
                        .ok_or_else(|| other_device("a buffer"))?;
                    slots.extend([device_ptr(slice), *len as u64]);
                }
                KernelArg::TensorMap { map, box_bytes, .. } => {
                    let map = map.ok_or_else(|| other_device("a tensor map"))?;
                    slots.extend([device_ptr(map), *box_bytes as u64]);
                }
                KernelArg::U32(v) => slots.push(*v as u64),
                KernelArg::I32(v) => slots.push(*v as u32 as u64),
                KernelArg::F32(v) => slots.push(v.to_bits() as u64),
                KernelArg::U64(v) => slots.push(*v),
                KernelArg::I64(v) => slots.push(*v as u64),
                KernelArg::F64(v) => slots.push(v.to_bits()),
            }
        }
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s as *mut u64 as *mut c_void)
            .collect();
        // SAFETY: a plain C union; the driver reads the member of the attribute's id.
        let mut value: CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
        value.programmaticStreamSerializationAllowed = 1;
        let mut overlap = CUlaunchAttribute {
            id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value,
        };
        let config = CUlaunchConfig {
            gridDimX: cfg.grid,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: cfg.block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: spec.shared_bytes as u32,
            hStream: self.stream.cu_stream(),
            attrs: &mut overlap,
            numAttrs: cfg.overlap as u32,
        };
        let mut launch = || {
            self.ctx.bind_to_thread().map_err(backend)?;
            // SAFETY: the parameters mirror the kernel's `extern "ptx-kernel"` signature, which
            // #[tile_kernel] generated from the same parameters (a pointer and a length per
            // buffer); `slots` outlives the call, which copies them.
            unsafe { cuLaunchKernelEx(&config, f.cu_function(), params.as_mut_ptr(), null_mut()) }
                .result()
                .map_err(backend)
        };
        if !self.timed {
            launch()?;
            return Ok(LaunchStats::default());
        }
        let start = self
            .ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(backend)?;
        let end = self
            .ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(backend)?;
        start.record(&self.stream).map_err(backend)?;
        launch()?;
        end.record(&self.stream).map_err(backend)?;
        self.stream.synchronize().map_err(|e| {
            LaunchError::invalid(
                rules::CUDA,
                format!("kernel `{}` failed on the GPU: {e}", spec.name),
            )
        })?;
        let ms = start.elapsed_ms(&end).map_err(backend)?;
        Ok(LaunchStats {
            elapsed: Duration::from_secs_f64(ms as f64 / 1e3),
            ..LaunchStats::default()
        })
    }
}
