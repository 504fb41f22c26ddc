//! [`Call`]: the tensor arguments of one kernel call from Python, found by name.

use crate::backend::Backend;
use crate::dlpack::{Dtype, Tensor};
use crate::errors::{type_error, value_error};
use ck_core::device::{Bf16, E4m3, Element};
use ck_core::host::{Device, DeviceBuffer};
use ck_core::rules;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// Element types a tensor argument can have.
pub trait TensorElement: Element {
    const DTYPE: Dtype;
}

impl TensorElement for f32 {
    const DTYPE: Dtype = Dtype::F32;
}

impl TensorElement for Bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
}

impl TensorElement for i32 {
    const DTYPE: Dtype = Dtype::I32;
}

/// Unsigned words (counters) in an int32 tensor: the same bits.
impl TensorElement for u32 {
    const DTYPE: Dtype = Dtype::I32;
}

impl TensorElement for E4m3 {
    const DTYPE: Dtype = Dtype::E4m3;
}

/// The tensors of one call, on one device (the emulator for CPU tensors, their GPU for CUDA
/// tensors, on torch's current stream there).
pub struct Call<'py> {
    tensors: Vec<Tensor<'py>>,
    backend: Backend,
}

/// `obj`'s DLPack capsule, and for a CUDA torch tensor torch's current stream on its device.
fn export<'py>(name: &str, obj: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Option<u64>)> {
    if obj.is_instance_of::<PyCapsule>() {
        return Ok((obj.clone(), None));
    }
    let py = obj.py();
    let module: String = obj.get_type().getattr("__module__")?.extract()?;
    if module == "torch" && obj.getattr("is_cuda")?.extract::<bool>()? {
        let torch = py.import("torch")?;
        let index: u64 = obj.getattr("device")?.getattr("index")?.extract()?;
        let stream = torch
            .getattr("cuda")?
            .call_method1("current_stream", (index,))?
            .getattr("cuda_stream")?
            .extract()?;
        let t = obj.call_method0("detach")?;
        let capsule = py
            .import("torch.utils.dlpack")?
            .call_method1("to_dlpack", (t,))?;
        return Ok((capsule, Some(stream)));
    }
    if !obj.hasattr("__dlpack__")? {
        return Err(type_error(
            rules::NOT_A_TENSOR,
            format!(
                "`{name}` is a {}; pass a numpy array, a torch tensor or another DLPack tensor",
                obj.get_type().name()?
            ),
        ));
    }
    let obj = if module == "torch" {
        obj.call_method0("detach")?
    } else {
        obj.clone()
    };
    let capsule = obj.call_method0("__dlpack__").map_err(|e| {
        value_error(
            rules::NOT_A_TENSOR,
            format!("`{name}` cannot be exported through DLPack ({e}); pass a writeable, contiguous copy"),
        )
    })?;
    Ok((capsule, None))
}

impl<'py> Call<'py> {
    /// The call's tensors by name: numpy arrays, torch tensors, objects with `__dlpack__`, or
    /// DLPack capsules. All on one device.
    pub fn new(args: &[(&'static str, &Bound<'py, PyAny>)]) -> PyResult<Call<'py>> {
        let mut stream = None;
        let mut tensors = Vec::with_capacity(args.len());
        for &(name, obj) in args {
            let (capsule, s) = export(name, obj)?;
            stream = stream.or(s);
            tensors.push(Tensor::from_capsule(name, &capsule)?);
        }
        let refs: Vec<&Tensor<'py>> = tensors.iter().collect();
        // SAFETY: `stream` is what `export` read from torch for these tensors' device: its
        // current stream, which torch keeps alive while work is queued on it.
        let backend = unsafe { Backend::of(&refs, stream)? };
        Ok(Call { tensors, backend })
    }

    /// The call's tensors from DLPack capsules by name, on `stream` where they are CUDA tensors
    /// (what a Python layer that exports the tensors itself passes: e.g. torch's current
    /// stream, read once per call).
    ///
    /// # Safety
    /// `stream`, for CUDA tensors, is a live `CUstream` of their device's primary context
    /// that outlives the call and the kernels queued on it.
    pub unsafe fn from_capsules(
        args: &[(&'static str, &Bound<'py, PyAny>)],
        stream: Option<u64>,
    ) -> PyResult<Call<'py>> {
        let tensors = args
            .iter()
            .map(|&(name, capsule)| Tensor::from_capsule(name, capsule))
            .collect::<PyResult<Vec<_>>>()?;
        // SAFETY: the caller's promise.
        unsafe { Call::from_tensors(tensors, stream) }
    }

    /// The call of tensors already read from their capsules (e.g. an e4m3 operand with
    /// [`Tensor::from_capsule_e4m3`]), on `stream` where they are CUDA tensors.
    ///
    /// # Safety
    /// As for [`Call::from_capsules`].
    pub unsafe fn from_tensors(
        tensors: Vec<Tensor<'py>>,
        stream: Option<u64>,
    ) -> PyResult<Call<'py>> {
        let refs: Vec<&Tensor<'py>> = tensors.iter().collect();
        // SAFETY: the caller's promise.
        let backend = unsafe { Backend::of(&refs, stream)? };
        Ok(Call { tensors, backend })
    }

    /// The call's tensors, in the order given.
    pub fn tensors(&self) -> &[Tensor<'py>] {
        &self.tensors
    }

    /// Where the call runs.
    pub fn device(&self) -> &Device {
        self.backend.device()
    }

    /// The tensor `name`.
    pub fn tensor(&self, name: &str) -> PyResult<&Tensor<'py>> {
        self.tensors
            .iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                value_error(
                    rules::UNKNOWN_ARGUMENT,
                    format!("no tensor `{name}` was given to this call"),
                )
            })
    }

    /// Elements of `name`, as the u32 kernels index with.
    pub fn len(&self, name: &str) -> PyResult<u32> {
        let t = self.tensor(name)?;
        u32::try_from(t.len()).map_err(|_| {
            value_error(
                rules::ARGUMENT_SIZE,
                format!(
                    "`{name}` has {} elements; kernels index with 32 bits",
                    t.len()
                ),
            )
        })
    }

    /// `name` as a kernel argument of element type `T` (an error naming the tensor if it has
    /// another): on the emulator a copy in its memory, on a GPU the tensor's own memory.
    pub fn input<T: TensorElement>(&self, name: &str) -> PyResult<DeviceBuffer<T>> {
        let t = self.tensor(name)?;
        if t.dtype() != T::DTYPE {
            return Err(type_error(
                rules::DTYPE_MISMATCH,
                format!(
                    "`{name}` is {}; this kernel takes {}",
                    t.describe(),
                    T::DTYPE.name()
                ),
            ));
        }
        self.backend.buffer(t)
    }

    /// `name` as a bfloat16 kernel argument: a bfloat16 tensor, or on the emulator a float32
    /// one rounded to bfloat16 (a tensor-core operand, which a GPU reads in place).
    pub fn input_bf16(&self, name: &str) -> PyResult<DeviceBuffer<Bf16>> {
        let t = self.tensor(name)?;
        if t.dtype() != Dtype::Bf16 && !(t.dtype() == Dtype::F32 && self.device().is_emulator()) {
            let hint = match self.device().is_emulator() {
                true => "give bfloat16 (or float32, rounded)",
                false => {
                    "the GPU reads it in place as bfloat16: convert it with .to(torch.bfloat16)"
                }
            };
            return Err(type_error(
                rules::DTYPE_MISMATCH,
                format!("`{name}` is {}; {hint}", t.describe()),
            ));
        }
        self.backend.bf16(t)
    }

    /// Makes what the kernel wrote into `buffer` (made from `name` by [`Call::input`]) the
    /// contents of the tensor `name`: a copy back from the emulator; nothing on a GPU.
    pub fn finish<T: Element>(&self, name: &str, buffer: &DeviceBuffer<T>) -> PyResult<()> {
        self.backend.finish(buffer, self.tensor(name)?)
    }
}
