//! Tensors handed in through DLPack: the capsule a producer's `__dlpack__()` returns (numpy,
//! torch, CuPy, JAX), read in place — no copy, and no ownership taken: the capsule stays alive
//! for the call and its producer frees the tensor when the capsule goes.
//!
//! ```text
//! DLManagedTensor { dl_tensor: DLTensor, manager_ctx, deleter }
//! DLTensor { data, device: {type, id}, ndim, dtype: {code, bits, lanes}, shape, strides, byte_offset }
//! element (i, j, …) at data + byte_offset + (i·strides[0] + j·strides[1] + …) · bits / 8
//! ```
//!
//! Kernels take dense row-major buffers, so a tensor is accepted when its strides are the
//! row-major ones (dimensions of length 1 may have any stride; NULL strides mean row-major; an
//! empty tensor has any).

use crate::errors::{type_error, value_error};
use ck_core::rules;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::ffi::c_void;

#[repr(C)]
pub struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
pub struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// DLPack's `DLTensor`: what a capsule's `DLManagedTensor` starts with, and what a C++ caller
/// (the `torch.ops` library, `python/ck_rs/csrc`) passes for each tensor of a call.
#[repr(C)]
pub struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    /// The producer's deleter: never called here, the capsule keeps ownership.
    deleter: *mut c_void,
}

const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_INT: u8 = 0;
const DL_UINT: u8 = 1;
const DL_FLOAT: u8 = 2;
const DL_BFLOAT: u8 = 4;
const DL_COMPLEX: u8 = 5;
const DL_BOOL: u8 = 6;
const DL_FLOAT8_E4M3FN: u8 = 10;

/// A DLPack element type as torch and numpy name it (`float64`, `float16`, `bool`), for the
/// message refusing it; one they do not name is spelled out by its code.
fn dtype_name(code: u8, bits: u8, lanes: u16) -> String {
    let scalar = match code {
        DL_FLOAT => format!("float{bits}"),
        DL_BFLOAT => format!("bfloat{bits}"),
        DL_COMPLEX => format!("complex{bits}"),
        DL_BOOL => "bool".to_string(),
        _ => return format!("of DLPack type code {code} ({bits} bits, {lanes} lanes)"),
    };
    if lanes == 1 {
        scalar
    } else {
        format!("{scalar} × {lanes} lanes")
    }
}

/// The element types the kernels take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    Bf16,
    /// Indices and lengths (page tables, sequence lengths).
    I32,
    /// 8-bit floats, 4 exponent and 3 mantissa bits, no infinities (`torch.float8_e4m3fn`):
    /// fp8 GEMM operands.
    E4m3,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::Bf16 => "bfloat16",
            Dtype::I32 => "int32",
            Dtype::E4m3 => "float8_e4m3fn",
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::Bf16 => 2,
            Dtype::E4m3 => 1,
        }
    }
}

/// Where a tensor's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Cpu,
    Cuda(usize),
}

/// One tensor argument, valid while its capsule (or its C++ caller's tensor) is alive. Its fields
/// are read through accessors: the memory behind `ptr` is only ever touched through the checks
/// of this crate.
pub struct Tensor<'py> {
    /// The argument's name, for messages.
    name: &'static str,
    /// Keeps the producer's tensor alive (None: a C++ caller holds it for the call).
    _capsule: Option<Bound<'py, PyCapsule>>,
    /// The first element (`data + byte_offset`).
    ptr: u64,
    place: Place,
    dtype: Dtype,
    shape: Vec<usize>,
}

impl<'py> Tensor<'py> {
    /// Reads the DLPack capsule `obj` (from `__dlpack__()`), checking that it is a dense
    /// row-major float32, bfloat16, int32 or float8_e4m3fn tensor in CPU or CUDA memory.
    pub fn from_capsule(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Tensor<'py>> {
        Tensor::parse(name, obj, false)
    }

    /// [`Tensor::from_capsule`] for an e4m3 operand: a float8_e4m3fn tensor, or its bytes as an
    /// 8-bit integer one (`t.view(torch.uint8)`: torch exports float8 through DLPack only from
    /// DLPack 1.1 on).
    pub fn from_capsule_e4m3(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Tensor<'py>> {
        Tensor::parse(name, obj, true)?.e4m3()
    }

    /// The tensor, which must be e4m3 (or its bytes).
    fn e4m3(self) -> PyResult<Tensor<'py>> {
        match self.dtype {
            Dtype::E4m3 => Ok(self),
            _ => Err(type_error(
                rules::DTYPE_MISMATCH,
                format!(
                    "`{}` is {}; give float8_e4m3fn (or its bytes as uint8)",
                    self.name,
                    self.describe()
                ),
            )),
        }
    }

    /// The capsule's tensor; with `e4m3_bytes`, 8-bit integers are read as e4m3 bits.
    fn parse(
        name: &'static str,
        obj: &Bound<'py, PyAny>,
        e4m3_bytes: bool,
    ) -> PyResult<Tensor<'py>> {
        let capsule = obj.cast::<PyCapsule>().map_err(|_| {
            type_error(
                rules::NOT_A_TENSOR,
                format!("`{name}` is not a DLPack capsule; pass a numpy array or a torch tensor"),
            )
        })?;
        let raw = capsule.pointer_checked(Some(c"dltensor")).map_err(|_| {
            value_error(
                rules::NOT_A_TENSOR,
                format!("`{name}`'s DLPack capsule was already consumed; pass the tensor again"),
            )
        })?;
        // SAFETY: a capsule named "dltensor" holds a DLManagedTensor (the DLPack protocol),
        // which its producer keeps alive as long as the capsule, held in the returned value.
        let t = unsafe { &(*(raw.as_ptr() as *const DlManagedTensor)).dl_tensor };
        Tensor::read(name, t, e4m3_bytes, Some(capsule.clone()))
    }

    /// The tensor `t` describes, from a C++ caller that keeps it alive for the call, checked as
    /// [`Tensor::from_capsule`] checks a capsule's (with `e4m3`, as
    /// [`Tensor::from_capsule_e4m3`]).
    pub fn from_dl_tensor(
        name: &'static str,
        t: &DlTensor,
        e4m3: bool,
    ) -> PyResult<Tensor<'static>> {
        let t = Tensor::read(name, t, e4m3, None)?;
        if e4m3 {
            t.e4m3()
        } else {
            Ok(t)
        }
    }

    fn read(
        name: &'static str,
        t: &DlTensor,
        e4m3_bytes: bool,
        capsule: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Tensor<'py>> {
        let ndim = usize::try_from(t.ndim).unwrap_or(0);
        let dims = |p: *const i64| -> Vec<i64> {
            if p.is_null() || ndim == 0 {
                Vec::new()
            } else {
                // SAFETY: DLPack's `shape` and (when not NULL) `strides` hold `ndim` values.
                unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec()
            }
        };
        let shape: Vec<usize> = dims(t.shape).iter().map(|&d| d.max(0) as usize).collect();
        let dtype = match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
            (DL_FLOAT, 32, 1) => Dtype::F32,
            (DL_BFLOAT, 16, 1) => Dtype::Bf16,
            (DL_INT, 32, 1) => Dtype::I32,
            (DL_FLOAT8_E4M3FN, 8, 1) => Dtype::E4m3,
            (DL_INT | DL_UINT, 8, 1) if e4m3_bytes => Dtype::E4m3,
            (DL_INT | DL_UINT, bits, 1) => {
                return Err(type_error(
                    rules::DTYPE_UNSUPPORTED,
                    format!("`{name}` holds {bits}-bit integers; index tensors are int32 — convert it (`.to(torch.int32)` or `.astype(np.int32)`)"),
                ))
            }
            (code, bits, lanes) => {
                let dtype = dtype_name(code, bits, lanes);
                return Err(type_error(
                    rules::DTYPE_UNSUPPORTED,
                    format!("`{name}` is {dtype}; the kernels take float32 or bfloat16 (int32 for indices) — convert it (e.g. `.astype(np.float32)` or `.to(torch.bfloat16)`)"),
                ))
            }
        };
        let place = match t.device.device_type {
            DL_CPU => Place::Cpu,
            DL_CUDA => Place::Cuda(t.device.device_id.max(0) as usize),
            other => {
                return Err(value_error(
                    rules::DEVICE_UNSUPPORTED,
                    format!("`{name}` is in DLPack device memory of type {other}; the kernels take CPU (emulator) or CUDA tensors"),
                ))
            }
        };
        // An empty tensor has no layout to check (numpy gives it zero strides).
        if !t.strides.is_null() && shape.iter().all(|&d| d > 0) {
            let strides = dims(t.strides);
            let mut expect = 1i64;
            for (&len, &stride) in shape.iter().zip(&strides).rev() {
                if len > 1 && stride != expect {
                    return Err(value_error(
                        rules::NOT_CONTIGUOUS,
                        format!("`{name}` (shape {shape:?}) has strides {strides:?}; the kernels take row-major contiguous tensors — pass `.contiguous()` / `np.ascontiguousarray(...)`"),
                    ));
                }
                expect *= len as i64;
            }
        }
        Ok(Tensor {
            name,
            _capsule: capsule,
            ptr: t.data as u64 + t.byte_offset,
            place,
            dtype,
            shape,
        })
    }

    /// The argument's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Where its memory is.
    pub fn place(&self) -> Place {
        self.place
    }

    /// Its element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Its shape (row-major, contiguous).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The device address of its first element (a CUDA tensor).
    pub(crate) fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An error unless the tensor is in host memory (what the two copies below read and write).
    fn check_cpu(&self) -> PyResult<()> {
        match self.place {
            Place::Cpu => Ok(()),
            Place::Cuda(i) => Err(value_error(
                rules::DEVICE_MISMATCH,
                format!("`{}` is on CUDA device {i}, not in host memory", self.name),
            )),
        }
    }

    /// A copy of a CPU tensor's bytes (a copy: no reference into memory Python owns outlives
    /// the call).
    pub(crate) fn host_bytes(&self) -> PyResult<Vec<u8>> {
        self.check_cpu()?;
        let bytes = self.len() * self.dtype.bytes();
        if bytes == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: a CPU tensor's `bytes` bytes from `ptr` are its memory (DLPack), alive while
        // the capsule is; they are copied out at once.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr as *const u8, bytes) }.to_vec())
    }

    /// Overwrites a CPU tensor's bytes with `data` (as many bytes as it holds).
    pub(crate) fn write_host_bytes(&self, data: &[u8]) -> PyResult<()> {
        self.check_cpu()?;
        let bytes = (self.len() * self.dtype.bytes()).min(data.len());
        // SAFETY: as in `host_bytes`, and no Rust reference into that memory exists (reads
        // copy it out); the output tensors are fresh or given as `out=` by the caller, who
        // hands their memory to the kernel for the call.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr as *mut u8, bytes) };
        Ok(())
    }

    /// "float32 [2, 8]": for messages.
    pub fn describe(&self) -> String {
        format!("{} {:?}", self.dtype.name(), self.shape)
    }
}
