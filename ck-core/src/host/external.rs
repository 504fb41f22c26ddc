//! Memory and streams owned by another library (PyTorch, CuPy, a user's CUDA code): a
//! [`DeviceBuffer`] over its device pointer and a [`Device`] queueing on its stream, so that
//! kernels run on its tensors in place and in order with its own work.
//!
//! ```ignore
//! // `ptr`, `len` and `stream` from the other library (e.g. DLPack and torch's current stream)
//! let gpu = Device::cuda(0)?;
//! let on_torch = unsafe { gpu.on_cuda_stream(stream)? };
//! let x = unsafe { DeviceBuffer::<f32>::from_cuda_ptr(&on_torch, ptr, len)? };
//! ```

use super::{Device, DeviceBuffer, LaunchError, Storage};
use crate::device::Element;
use crate::rules;
use std::mem::ManuallyDrop;
use std::prelude::rust_2021::*;
use std::sync::Arc;

impl Device {
    /// This GPU queueing its launches on `stream`, a CUDA stream owned by another library,
    /// without waiting for them: its owner orders them with its own work and sees a failure at
    /// its next synchronisation. Launch statistics are zero. PTX modules are shared with `self`.
    /// An error (rule `argument-device`) on the emulator.
    ///
    /// # Safety
    /// `stream` is a live stream of this device's (primary) context, and outlives the returned
    /// device and every buffer made with it.
    pub unsafe fn on_cuda_stream(&self, stream: u64) -> Result<Device, LaunchError> {
        match self {
            // SAFETY: the caller's promise.
            Device::Cuda(d) => Ok(Device::Cuda(Arc::new(unsafe { d.on_stream(stream) }))),
            Device::Emulator { .. } => Err(LaunchError::invalid(
                rules::ARGUMENT_DEVICE,
                "a CUDA stream was given for the emulator".into(),
            )),
        }
    }
}

impl<T: Element> DeviceBuffer<T> {
    /// A buffer of no elements, for a kernel argument the kernel is told not to use (an
    /// optional input left out). On a GPU it allocates nothing: an allocation would go through
    /// the context's default stream, which waits for work queued on other streams.
    pub fn empty(device: &Device) -> Result<DeviceBuffer<T>, LaunchError> {
        match device {
            Device::Emulator { .. } => DeviceBuffer::zeros(device, 0),
            // SAFETY: zero bytes at address 0: nothing is ever read, written or freed there.
            Device::Cuda(_) => unsafe { DeviceBuffer::from_cuda_ptr(device, 0, 0) },
        }
    }

    /// A buffer over `len` elements of `T` at `ptr` in device memory that another library
    /// owns: dropping it frees nothing. Errors: the emulator (`argument-device`), or a pointer
    /// not aligned to 16 bytes, which the kernels' vector accesses need (`misaligned-buffer`).
    ///
    /// # Safety
    /// `ptr..ptr + len · size_of::<T>()` is device memory of this device's context that stays
    /// allocated, and is accessed by nothing but the kernels given this buffer, until the
    /// kernels queued on it are done.
    pub unsafe fn from_cuda_ptr(
        device: &Device,
        ptr: u64,
        len: usize,
    ) -> Result<DeviceBuffer<T>, LaunchError> {
        let Device::Cuda(d) = device else {
            return Err(LaunchError::invalid(
                rules::ARGUMENT_DEVICE,
                "a CUDA pointer was given for the emulator".into(),
            ));
        };
        if !ptr.is_multiple_of(16) {
            return Err(LaunchError::invalid(
                rules::MISALIGNED_BUFFER,
                format!("device pointer {ptr:#x} is not 16-byte aligned; pass a tensor that starts on a 16-byte boundary (e.g. a fresh or `.contiguous()` copy)"),
            ));
        }
        // SAFETY: the caller's promise; `Storage`'s drop leaks the slice, so it is never freed.
        let slice = unsafe {
            d.stream
                .upgrade_device_ptr::<u8>(ptr, len * T::BYTES as usize)
        };
        Ok(DeviceBuffer {
            storage: Storage::Cuda {
                slice: ManuallyDrop::new(slice),
                device: d.clone(),
                borrowed: true,
            },
            len,
            _t: std::marker::PhantomData,
        })
    }
}
