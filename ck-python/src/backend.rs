//! Where a call runs: CPU tensors on the emulator (copied into its memory, whose shadow state
//! the sanitizer needs, and the outputs copied back), CUDA tensors on their GPU in place, queued
//! on the caller's stream.

use crate::dlpack::Dtype;
use crate::dlpack::{Place, Tensor};
use crate::errors::{launch_error, type_error, value_error};
use ck_core::device::{Bf16, Element};
use ck_core::host::{Device, DeviceBuffer};
use ck_core::rules;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The device of one call.
pub struct Backend {
    device: Device,
}

/// Each GPU opened once per process (its context, and its PTX module once loaded).
fn gpu(ordinal: usize) -> PyResult<Device> {
    static GPUS: OnceLock<Mutex<HashMap<usize, Device>>> = OnceLock::new();
    let mut gpus = GPUS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(d) = gpus.get(&ordinal) {
        return Ok(d.clone());
    }
    let d = Device::cuda(ordinal).map_err(launch_error)?;
    gpus.insert(ordinal, d.clone());
    Ok(d)
}

/// GPU `ordinal` queueing on `stream`: the view a thread made last, where it was on the same
/// stream (making one takes two locks, a name's copy and a stream wrapper, on every call).
///
/// # Safety
/// As for [`Backend::of`]. A view kept from an earlier call is only reused for the stream
/// handle it was made for, which the caller promises is live now.
unsafe fn on_stream(ordinal: usize, stream: u64) -> PyResult<Device> {
    thread_local! {
        static LAST: RefCell<Option<(usize, u64, Device)>> = const { RefCell::new(None) };
    }
    let kept = LAST.with_borrow(|last| match last {
        Some((o, s, d)) if (*o, *s) == (ordinal, stream) => Some(d.clone()),
        _ => None,
    });
    if let Some(d) = kept {
        return Ok(d);
    }
    // SAFETY: the caller's promise.
    let d = unsafe { gpu(ordinal)?.on_cuda_stream(stream) }.map_err(launch_error)?;
    LAST.with_borrow_mut(|last| *last = Some((ordinal, stream, d.clone())));
    Ok(d)
}

/// The multiprocessors of the place a call runs (a split heuristic's count): GPU `ordinal`'s
/// SMs, or with `None` the emulator's workers (blocks it runs at once).
pub fn multiprocessors(ordinal: Option<usize>) -> PyResult<u32> {
    Ok(match ordinal {
        Some(i) => gpu(i)?.multiprocessors(),
        None => Device::emulator().multiprocessors(),
    })
}

impl Backend {
    /// The backend of `tensors`, which must all be in one place: the emulator for CPU memory
    /// (also for no tensor at all), CUDA device `i` on `stream` for CUDA.
    ///
    /// # Safety
    /// `stream`, when the tensors are on a GPU, is a live `CUstream` of that device's primary
    /// context (e.g. torch's current stream) that outlives the backend and the kernels queued
    /// on it.
    pub unsafe fn of(tensors: &[&Tensor<'_>], stream: Option<u64>) -> PyResult<Backend> {
        let place = tensors.first().map_or(Place::Cpu, |t| t.place());
        if let Some(t) = tensors.iter().find(|t| t.place() != place) {
            return Err(value_error(
                rules::DEVICE_MISMATCH,
                format!(
                    "`{}` is on {:?} but `{}` on {:?}; put every tensor of a call on one device",
                    tensors[0].name(),
                    place,
                    t.name(),
                    t.place()
                ),
            ));
        }
        let device = match (place, stream) {
            (Place::Cpu, _) => Device::emulator(),
            // SAFETY: the caller's promise (`# Safety`).
            (Place::Cuda(i), Some(s)) => unsafe { on_stream(i, s)? },
            (Place::Cuda(_), None) => {
                return Err(value_error(
                    rules::NO_STREAM,
                    "CUDA tensors need the stream to run on; call through `ck_rs`, which passes torch's current stream".into(),
                ))
            }
        };
        Ok(Backend { device })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `t` as a kernel argument of element type `T` (its dtype was checked to be `T`'s).
    pub fn buffer<T: Element>(&self, t: &Tensor<'_>) -> PyResult<DeviceBuffer<T>> {
        match &self.device {
            Device::Emulator { .. } => {
                let values: Vec<T> = t
                    .host_bytes()?
                    .chunks_exact(T::BYTES as usize)
                    .map(|c| {
                        let mut w = [0u8; 4];
                        w[..c.len()].copy_from_slice(c);
                        T::from_bits(u32::from_le_bytes(w))
                    })
                    .collect();
                DeviceBuffer::from_slice(&self.device, &values).map_err(launch_error)
            }
            // SAFETY: the tensor's memory (DLPack: `len` elements from `ptr` on this GPU) stays
            // allocated while the capsule lives, and for the queued kernels torch's caching
            // allocator keeps it until the stream has passed them.
            Device::Cuda(_) => unsafe {
                DeviceBuffer::from_cuda_ptr(&self.device, t.device_ptr(), t.len())
                    .map_err(launch_error)
            },
        }
    }

    /// Makes an output's results visible in its tensor: copies them back from the emulator's
    /// memory (on a GPU the kernel wrote the tensor itself).
    pub fn finish<T: Element>(&self, b: &DeviceBuffer<T>, t: &Tensor<'_>) -> PyResult<()> {
        if self.device.is_emulator() {
            let bytes: Vec<u8> = b
                .to_vec()
                .map_err(launch_error)?
                .iter()
                .flat_map(|v| {
                    v.to_bits()
                        .to_le_bytes()
                        .into_iter()
                        .take(T::BYTES as usize)
                })
                .collect();
            t.write_host_bytes(&bytes)?;
        }
        Ok(())
    }

    /// `t` as a bfloat16 kernel argument: on the emulator a float32 tensor is rounded to
    /// bfloat16 first; on a GPU `t` must be bfloat16 (checked by the caller).
    pub fn bf16(&self, t: &Tensor<'_>) -> PyResult<DeviceBuffer<Bf16>> {
        if matches!(t.dtype(), Dtype::I32 | Dtype::E4m3) {
            return Err(type_error(
                rules::DTYPE_MISMATCH,
                format!(
                    "`{}` is {}; this argument is bfloat16: give float32 or bfloat16",
                    t.name(),
                    t.describe()
                ),
            ));
        }
        if self.device.is_emulator() && t.dtype() == Dtype::F32 {
            let values: Vec<Bf16> = t
                .host_bytes()?
                .chunks_exact(4)
                .map(|c| Bf16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            return DeviceBuffer::from_slice(&self.device, &values).map_err(launch_error);
        }
        self.buffer(t)
    }

    /// [`Backend::finish`] for a bfloat16 result, widened to float32 for a float32 tensor.
    pub fn finish_bf16(&self, b: &DeviceBuffer<Bf16>, t: &Tensor<'_>) -> PyResult<()> {
        if self.device.is_emulator() && t.dtype() == Dtype::F32 {
            let bytes: Vec<u8> = b
                .to_vec()
                .map_err(launch_error)?
                .iter()
                .flat_map(|v| v.to_f32().to_le_bytes())
                .collect();
            t.write_host_bytes(&bytes)?;
            return Ok(());
        }
        self.finish(b, t)
    }
}
