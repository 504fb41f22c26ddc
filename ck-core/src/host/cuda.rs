//! The NVIDIA backend of the host API: one CUDA context and stream per [`Device::Cuda`], the
//! kernels' PTX module loaded once (from `CK_PTX`, beside the executable, or
//! `target/ptx/ck-kernels.ptx`), launches timed with CUDA events.

use super::{KernelArg, KernelSpec, LaunchConfig, LaunchError, LaunchStats};
use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig as CuConfig,
    PushKernelArg,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use std::prelude::rust_2021::*;

/// A CUDA device with its stream and the kernels' module.
pub struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) name: String,
    pub(crate) multiprocessors: u32,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    module: OnceLock<Result<Arc<CudaModule>, String>>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({}, {})", self.ordinal, self.name)
    }
}

fn backend(e: impl std::fmt::Display) -> LaunchError {
    LaunchError::invalid("cuda", format!("CUDA driver error: {e}"))
}

impl CudaDevice {
    pub(crate) fn open(ordinal: usize) -> Result<CudaDevice, LaunchError> {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(LaunchError::invalid(
                "no-gpu",
                "no CUDA driver library (libcuda.so) on this machine; use the emulator (--backend emu)".into(),
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            LaunchError::invalid("no-gpu", format!("cannot open CUDA device {ordinal}: {e}"))
        })?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let multiprocessors = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute_enum::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(backend)?
            .max(1) as u32;
        let stream = ctx.default_stream();
        Ok(CudaDevice {
            ordinal,
            name,
            multiprocessors,
            ctx,
            stream,
            module: OnceLock::new(),
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// Where the PTX module is looked for.
    pub fn ptx_candidates() -> Vec<PathBuf> {
        let mut v = Vec::new();
        if let Ok(p) = std::env::var("CK_PTX") {
            v.push(PathBuf::from(p));
        }
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.to_path_buf()))
        {
            v.push(dir.join("ck-kernels.ptx"));
        }
        v.push(PathBuf::from("target/ptx/ck-kernels.ptx"));
        v
    }

    fn module(&self) -> Result<&Arc<CudaModule>, LaunchError> {
        self.module
            .get_or_init(|| {
                let candidates = Self::ptx_candidates();
                let path = candidates.iter().find(|p| p.is_file()).ok_or_else(|| {
                    format!(
                        "no PTX module found (looked at {}); build it with scripts/build-ptx.sh or set CK_PTX",
                        candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                    )
                })?;
                let src = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                self.ctx
                    .load_module(cudarc::nvrtc::Ptx::from_src(src))
                    .map_err(|e| format!("the driver rejected {}: {e}", path.display()))
            })
            .as_ref()
            .map_err(|m| LaunchError::invalid("ptx-module", m.clone()))
    }

    fn function(&self, spec: &KernelSpec) -> Result<CudaFunction, LaunchError> {
        let mut fns = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = fns.get(spec.name) {
            return Ok(f.clone());
        }
        let f = self.module()?.load_function(spec.name).map_err(|e| {
            LaunchError::invalid("ptx-module", format!("kernel `{}` is not in the PTX module ({e}); rebuild it with scripts/build-ptx.sh", spec.name))
        })?;
        if spec.shared_bytes > 48 * 1024 {
            f.set_attribute(
                CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                spec.shared_bytes as i32,
            )
            .map_err(backend)?;
        }
        fns.insert(spec.name, f.clone());
        Ok(f)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>, LaunchError> {
        self.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(backend)
    }

    pub(crate) fn upload(&self, data: &[u8]) -> Result<CudaSlice<u8>, LaunchError> {
        if data.is_empty() {
            return self.alloc(0);
        }
        self.stream.clone_htod(data).map_err(backend)
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

    /// Launches and waits; the elapsed time is measured with CUDA events.
    pub(crate) fn launch(
        &self,
        spec: &KernelSpec,
        cfg: LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<LaunchStats, LaunchError> {
        let f = self.function(spec)?;
        let mut b = self.stream.launch_builder(&f);
        let lens: Vec<u32> = args
            .iter()
            .map(|a| {
                if let KernelArg::Buffer { len, .. } = a {
                    *len
                } else {
                    0
                }
            })
            .collect();
        for (a, len) in args.iter().zip(&lens) {
            match a {
                KernelArg::Buffer { buffer, .. } => {
                    let slice = buffer.cuda_slice().ok_or_else(|| {
                        LaunchError::invalid(
                            "argument-device",
                            "a buffer of another device was passed to a CUDA launch".into(),
                        )
                    })?;
                    b.arg(slice);
                    b.arg(len);
                }
                KernelArg::U32(v) => {
                    b.arg(v);
                }
                KernelArg::I32(v) => {
                    b.arg(v);
                }
                KernelArg::F32(v) => {
                    b.arg(v);
                }
                KernelArg::U64(v) => {
                    b.arg(v);
                }
                KernelArg::I64(v) => {
                    b.arg(v);
                }
                KernelArg::F64(v) => {
                    b.arg(v);
                }
            }
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
        let cu = CuConfig {
            grid_dim: (cfg.grid, 1, 1),
            block_dim: (cfg.block, 1, 1),
            shared_mem_bytes: spec.shared_bytes as u32,
        };
        // SAFETY: the argument list mirrors the kernel's `extern "ptx-kernel"` signature, which
        // #[tile_kernel] generated from the same parameters (a pointer and a length per buffer).
        unsafe { b.launch(cu) }.map_err(backend)?;
        end.record(&self.stream).map_err(backend)?;
        self.stream.synchronize().map_err(|e| {
            LaunchError::invalid(
                "cuda",
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
