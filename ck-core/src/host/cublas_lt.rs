//! NVIDIA's cuBLASLt as a GEMM peer, loaded from the machine at run time (nothing links it):
//! the product a benchmark times beside its own kernel, sample for sample, so that both run
//! under the same clocks.
//!
//! A GPU under a sustained load slows down: on an H100 a 4096³ bf16 product by cuBLAS runs at
//! ~790 TFLOP/s for its first ~50 ms and at ~660–700 once the 700 W power cap holds the clock
//! down. A peer timed in a short burst of its own (a separate script, before or after) and a
//! kernel timed in a long benchmark therefore compare two clocks, not two kernels. Timing
//! both in one process, alternating ([`crate::host::Device::time_queued`] for each), puts them
//! under one clock.
//!
//! Row-major products are handed to cuBLASLt (column-major) transposed: `C = A · B` with
//! `A[M, K]`, `B[K, N]` and `C[M, N]` row-major is, read column-major, `Cᵀ[N, M] = Bᵀ · Aᵀ`,
//! where `Bᵀ` is `B`'s memory as an `N × K` column-major matrix (leading dimension N) — so the
//! library's "A" is our B, its "B" our A, and its M and N are swapped; no data moves. The bias
//! (one value per column of our C) is then one value per row of the library's D, which is what
//! its `GELU_BIAS` epilogue adds. fp8 operands must be K-major on both sides ("TN"): our A
//! `[M, K]` and our B given as `Bᵀ[N, K]`, the library's "A" transposed.

use super::{Device, DeviceBuffer, LaunchError, Storage};
use crate::device::{Bf16, E4m3, Element};
use crate::rules;
use cudarc::cublaslt::{result, sys};
use cudarc::driver::{CudaSlice, DevicePtr};
use std::ffi::c_void;
use std::sync::Arc;

use std::prelude::rust_2021::*;

/// What cuBLAS recommends on Hopper.
const WORKSPACE_BYTES: usize = 32 << 20;

fn lt_error(what: &str, e: impl std::fmt::Debug) -> LaunchError {
    LaunchError::invalid(rules::CUDA, format!("cuBLASLt: {what}: {e:?}"))
}

/// A cuBLASLt handle and its workspace on one CUDA device.
pub struct CublasLt {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    device: Arc<super::CudaDevice>,
}

impl std::fmt::Debug for CublasLt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CublasLt({:?})", self.device)
    }
}

impl Drop for CublasLt {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once.
        let _ = unsafe { result::destroy_handle(self.handle) };
    }
}

/// The operands' element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtOperands {
    /// bf16 A `[M, K]` and B `[K, N]`.
    Bf16,
    /// e4m3 A `[M, K]` and `Bᵀ[N, K]` (both K-major, as the library requires for fp8).
    E4m3,
    /// bf16 A `[M, K]` and `Bᵀ[N, K]` (`nn.Linear`'s weight, what `F.linear` hands cuBLAS).
    Bf16Nk,
    /// f32 A and B (f32 arithmetic, no TF32; C must be f32).
    F32,
}

/// One product for cuBLASLt: `C = act(alpha · A · B + bias)` or `alpha · A · B + D`, `batch`
/// of them at strides of whole matrices, f32 accumulation.
#[derive(Clone, Copy, Debug)]
pub struct LtProblem {
    /// The element type of A and B.
    pub operands: LtOperands,
    /// f32 C; otherwise bf16.
    pub c_f32: bool,
    /// Products, each matrix `M·K`, `K·N` or `M·N` elements after the previous one.
    pub batch: u32,
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// The scale of `A · B` (fp8: the product of the operands' per-tensor scales).
    pub alpha: f32,
    /// `C = gelu(alpha · A · B + bias)` (tanh GELU) with a bf16 bias of N values.
    pub bias_gelu: bool,
    /// `C = alpha · A · B + D` with D (C's type and shape) given to [`CublasLt::run`].
    pub residual: bool,
}

impl LtProblem {
    /// A bf16 product with bf16 C and no epilogue.
    pub fn bf16(m: u32, n: u32, k: u32) -> LtProblem {
        LtProblem {
            operands: LtOperands::Bf16,
            c_f32: false,
            batch: 1,
            m,
            n,
            k,
            alpha: 1.0,
            bias_gelu: false,
            residual: false,
        }
    }
}

/// A planned product: descriptors and the algorithm cuBLASLt's heuristic ranks first (what
/// `torch.matmul` runs), made once and run many times.
pub struct LtGemm {
    problem: LtProblem,
    desc: sys::cublasLtMatmulDesc_t,
    /// The library's A (our B), B (our A), and C = D.
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: created in `plan`, destroyed once.
        unsafe {
            let _ = result::destroy_matmul_desc(self.desc);
            for l in self.layouts {
                let _ = result::destroy_matrix_layout(l);
            }
        }
    }
}

fn data_type(operands: LtOperands) -> sys::cudaDataType {
    match operands {
        LtOperands::Bf16 | LtOperands::Bf16Nk => sys::cudaDataType::CUDA_R_16BF,
        LtOperands::E4m3 => sys::cudaDataType::CUDA_R_8F_E4M3,
        LtOperands::F32 => sys::cudaDataType::CUDA_R_32F,
    }
}

/// A column-major `rows × cols` layout, `batch` of them `rows · cols` apart.
fn layout(
    ty: sys::cudaDataType,
    rows: u32,
    cols: u32,
    batch: u32,
) -> Result<sys::cublasLtMatrixLayout_t, LaunchError> {
    let l = result::create_matrix_layout(ty, rows as u64, cols as u64, rows as i64)
        .map_err(|e| lt_error("matrix layout", e))?;
    if batch > 1 {
        let count = batch as i32;
        let stride = rows as i64 * cols as i64;
        // SAFETY: `l` is live; the buffers are the attributes' types.
        unsafe {
            result::set_matrix_layout_attribute(
                l,
                sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                &count as *const i32 as *const c_void,
                4,
            )
            .and_then(|()| {
                result::set_matrix_layout_attribute(
                    l,
                    sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride as *const i64 as *const c_void,
                    8,
                )
            })
            .map_err(|e| lt_error("batched layout", e))?;
        }
    }
    Ok(l)
}

/// Sets a descriptor attribute of plain type `T`.
///
/// # Safety
/// `desc` is live and `T` is the attribute's type.
unsafe fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> Result<(), LaunchError> {
    // SAFETY: the caller's promise.
    unsafe {
        result::set_matmul_desc_attribute(
            desc,
            attr,
            value as *const T as *const c_void,
            std::mem::size_of::<T>(),
        )
    }
    .map_err(|e| lt_error("matmul descriptor", e))
}

impl CublasLt {
    /// cuBLASLt on `device`'s GPU: an error (rule `no-cublas`) on the emulator or where no
    /// `libcublasLt` can be loaded (it is found on the library path, e.g. PyTorch's
    /// `nvidia/cu13/lib`).
    pub fn open(device: &Device) -> Result<CublasLt, LaunchError> {
        let Device::Cuda(d) = device else {
            return Err(LaunchError::invalid(
                rules::NO_CUBLAS,
                "cuBLASLt runs on a CUDA device, not the emulator".into(),
            ));
        };
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(LaunchError::invalid(
                rules::NO_CUBLAS,
                "no cuBLASLt library (libcublasLt.so) on the library path; add the folder that holds it (e.g. PyTorch's site-packages/nvidia/cu13/lib) to LD_LIBRARY_PATH".into(),
            ));
        }
        let handle = result::create_handle().map_err(|e| lt_error("create handle", e))?;
        let workspace = d.alloc(WORKSPACE_BYTES)?;
        Ok(CublasLt {
            handle,
            workspace,
            device: d.clone(),
        })
    }

    /// Plans `p`: an error where cuBLASLt has no algorithm for it.
    pub fn plan(&self, p: LtProblem) -> Result<LtGemm, LaunchError> {
        if p.m == 0 || p.n == 0 || p.k == 0 || p.batch == 0 {
            return Err(LaunchError::invalid(
                rules::SHAPE_UNSUPPORTED,
                format!(
                    "cuBLASLt peer: an empty product ({}x{}x{}x{})",
                    p.batch, p.m, p.n, p.k
                ),
            ));
        }
        if p.operands == LtOperands::F32 && !p.c_f32 {
            return Err(LaunchError::invalid(
                rules::DTYPE,
                "cuBLASLt peer: f32 operands need f32 C".into(),
            ));
        }
        let ab = data_type(p.operands);
        let c = if p.c_f32 {
            sys::cudaDataType::CUDA_R_32F
        } else {
            sys::cudaDataType::CUDA_R_16BF
        };
        // The library's A: our B as N × K (bf16: column-major with leading dimension N), or
        // our Bᵀ[N, K] as K × N transposed (fp8, bf16 `[N, K]`). Its B: our A as K × M.
        // (cublasOperation_t: 0 = N, 1 = T.)
        let (lib_a, transa) = match p.operands {
            LtOperands::Bf16 | LtOperands::F32 => (layout(ab, p.n, p.k, p.batch)?, 0i32),
            LtOperands::E4m3 | LtOperands::Bf16Nk => (layout(ab, p.k, p.n, p.batch)?, 1i32),
        };
        let layouts = [
            lib_a,
            layout(ab, p.k, p.m, p.batch)?,
            layout(c, p.n, p.m, p.batch)?,
        ];
        let desc = result::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )
        .map_err(|e| lt_error("matmul descriptor", e))?;
        let mut gemm = LtGemm {
            problem: p,
            desc,
            layouts,
            // SAFETY: plain data, overwritten below before any use.
            algo: unsafe { std::mem::zeroed() },
        };
        use sys::cublasLtMatmulDescAttributes_t as D;
        // SAFETY: `desc` is live; each value has its attribute's type.
        unsafe {
            set_desc(desc, D::CUBLASLT_MATMUL_DESC_TRANSA, &transa)?;
            if p.bias_gelu {
                let epilogue = sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS as u32;
                set_desc(desc, D::CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue)?;
                let bias_type = sys::cudaDataType::CUDA_R_16BF as i32;
                set_desc(desc, D::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type)?;
            }
        }
        let pref = result::create_matmul_pref().map_err(|e| lt_error("preference", e))?;
        let bytes = WORKSPACE_BYTES as u64;
        // SAFETY: all descriptors are live; `pref` is destroyed once, here.
        let heuristic = unsafe {
            let found = result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &bytes as *const u64 as *const c_void,
                8,
            )
            .and_then(|()| {
                result::get_matmul_algo_heuristic(
                    self.handle,
                    desc,
                    layouts[0],
                    layouts[1],
                    layouts[2],
                    layouts[2],
                    pref,
                )
            });
            let _ = result::destroy_matmul_pref(pref);
            found
        }
        .map_err(|e| {
            LaunchError::invalid(
                rules::SHAPE_UNSUPPORTED,
                format!("cuBLASLt has no algorithm for {p:?}: {e:?}"),
            )
        })?;
        gemm.algo = heuristic.algo;
        Ok(gemm)
    }

    /// Queues `gemm` on `device`'s stream: `a` and `b` as [`LtOperands`] says, `c` f32 or
    /// bf16 as planned, `bias` the N values of a `bias_gelu` plan, `residual` the matrix a
    /// `residual` plan adds.
    pub fn run<A: Element, C: Element>(
        &self,
        gemm: &LtGemm,
        device: &Device,
        (a, b): (&DeviceBuffer<A>, &DeviceBuffer<A>),
        c: &mut DeviceBuffer<C>,
        (bias, residual): (Option<&DeviceBuffer<Bf16>>, Option<&DeviceBuffer<C>>),
    ) -> Result<(), LaunchError> {
        let p = gemm.problem;
        let ab_type = match p.operands {
            LtOperands::Bf16 | LtOperands::Bf16Nk => Bf16::NAME,
            LtOperands::E4m3 => E4m3::NAME,
            LtOperands::F32 => f32::NAME,
        };
        let c_type = if p.c_f32 { f32::NAME } else { Bf16::NAME };
        let (mk, kn, mn) = (
            p.batch as usize * p.m as usize * p.k as usize,
            p.batch as usize * p.k as usize * p.n as usize,
            p.batch as usize * p.m as usize * p.n as usize,
        );
        let mismatch = |what: String| {
            Err(LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!("cuBLASLt peer: {what}"),
            ))
        };
        if A::NAME != ab_type || C::NAME != c_type {
            return mismatch(format!(
                "operands of {} and C of {} do not match the plan {p:?}: pass {ab_type} operands and {c_type} C",
                A::NAME,
                C::NAME
            ));
        }
        if a.len() != mk || b.len() != kn || c.len() != mn {
            return mismatch(format!(
                "A, B, C have {}, {}, {} elements; {p:?} needs {mk}, {kn}, {mn}",
                a.len(),
                b.len(),
                c.len()
            ));
        }
        if p.bias_gelu != bias.is_some() || bias.is_some_and(|b| b.len() != p.n as usize) {
            return mismatch(format!(
                "a bias of {} values for {p:?}",
                bias.map_or(0, |b| b.len())
            ));
        }
        if p.residual != residual.is_some() || residual.is_some_and(|r| r.len() != mn) {
            return mismatch(format!(
                "a residual of {} elements for {p:?}",
                residual.map_or(0, |r| r.len())
            ));
        }
        let Device::Cuda(d) = device else {
            return Err(LaunchError::invalid(
                rules::NO_CUBLAS,
                "cuBLASLt runs on a CUDA device".into(),
            ));
        };
        let stream = &d.stream;
        let ptr = |s: &Storage| -> Result<u64, LaunchError> {
            match s {
                Storage::Cuda { slice, device, .. }
                    if Arc::ptr_eq(&device.ctx, &self.device.ctx) =>
                {
                    Ok(slice.device_ptr(stream).0)
                }
                _ => Err(LaunchError::invalid(
                    rules::ARGUMENT_DEVICE,
                    "cuBLASLt peer: a buffer of another device".into(),
                )),
            }
        };
        let (pa, pb, pc) = (ptr(&a.storage)?, ptr(&b.storage)?, ptr(&c.storage)?);
        if let Some(bias) = bias {
            let pbias = ptr(&bias.storage)?;
            // SAFETY: `desc` is live; the bias pointer's type is a device pointer.
            unsafe {
                set_desc(
                    gemm.desc,
                    sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &pbias,
                )?
            };
        }
        // The library's C input: D for a residual (beta 1), else C itself, unread (beta 0).
        let (beta, pd) = match residual {
            Some(r) => (1.0f32, ptr(&r.storage)?),
            None => (0.0, pc),
        };
        let alpha = p.alpha;
        let workspace = self.workspace.device_ptr(stream).0;
        // SAFETY: the buffers hold the planned matrices (lengths and types checked above) on
        // this device; the library's A is our B and its B our A (module docs).
        unsafe {
            result::matmul(
                self.handle,
                gemm.desc,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                pb as *const c_void,
                gemm.layouts[0],
                pa as *const c_void,
                gemm.layouts[1],
                pd as *const c_void,
                gemm.layouts[2],
                pc as *mut c_void,
                gemm.layouts[2],
                &gemm.algo,
                workspace as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| lt_error("matmul", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_has_no_cublas() {
        let e = CublasLt::open(&Device::emulator()).unwrap_err();
        assert_eq!(e.rule(), "no-cublas", "{e}");
    }
}
