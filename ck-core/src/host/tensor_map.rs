//! Tensor maps: a [`DeviceBuffer`] described for Hopper's TMA copy engine, passed to kernels
//! whose parameter is a [`Tma`](crate::device::Tma).
//!
//! ```no_run
//! # use ck_core::host::{Device, DeviceBuffer, TensorMap};
//! # use ck_core::device::Bf16;
//! # use ck_core::wgmma::SwizzleMode;
//! # fn main() -> Result<(), ck_core::host::LaunchError> {
//! let device = Device::emulator();
//! // A [heads = 4, seq = 300, dim = 64] bf16 tensor, copied 128 rows of one head at a time.
//! let x = DeviceBuffer::<Bf16>::zeros(&device, 4 * 300 * 64)?;
//! let map = TensorMap::dense(&x, [64, 300, 4], [64, 128, 1], SwizzleMode::B128)?;
//! assert_eq!(map.geometry().box_bytes(), 128 * 128);
//! # Ok(()) }
//! ```

use crate::rules;
use std::prelude::rust_2021::*;

use super::{DeviceBuffer, KernelArg, LaunchError, RawBuffer, Storage};
use crate::device::emu::memory::EmuMemory;
use crate::device::{Element, Tma, TmaMut};
use crate::tma::TmaGeometry;
use crate::wgmma::SwizzleMode;
use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, DevicePtr};
use std::sync::Arc;

/// A tensor in `buffer` as the TMA copy engine sees it (see [`crate::tma`] for what one copy
/// moves). On a GPU it holds the driver-encoded 128-byte map in device memory (uploaded once per
/// device for equal maps, whichever stream launches: see `CudaDevice::tensor_map`); it borrows the
/// buffer, so the buffer outlives it and no kernel writes the buffer while a kernel copies
/// from it.
pub struct TensorMap<'a, T, const R: usize> {
    buffer: &'a DeviceBuffer<T>,
    geometry: TmaGeometry<R>,
    encoded: Option<Arc<CudaSlice<u8>>>,
}

impl<'a, T: Element, const R: usize> TensorMap<'a, T, R> {
    /// The tensor of `dims` elements with byte `strides` (both innermost first;
    /// `strides[0] = size_of::<T>()`) at the start of `buffer`, copied in boxes of `box_dims`
    /// elements into shared memory laid out as `swizzle` says. Errors (`tensor-map`): what the
    /// hardware does not support ([`TmaGeometry::new`]'s rules), a tensor that does not fit in
    /// its buffer, a driver that refuses the map.
    pub fn new(
        buffer: &'a DeviceBuffer<T>,
        dims: [u64; R],
        strides: [u64; R],
        box_dims: [u32; R],
        swizzle: SwizzleMode,
    ) -> Result<TensorMap<'a, T, R>, LaunchError> {
        let geometry = TmaGeometry::new(dims, strides, box_dims, T::BYTES, swizzle)
            .map_err(|e| LaunchError::invalid(rules::TENSOR_MAP, e.to_string()))?;
        let have = buffer.len() as u64 * T::BYTES as u64;
        if geometry.footprint_bytes() > have {
            return Err(LaunchError::invalid(
                rules::TENSOR_MAP,
                format!(
                    "a tensor of dims {dims:?} and byte strides {strides:?} reaches byte {} but its buffer has {have} bytes",
                    geometry.footprint_bytes()
                ),
            ));
        }
        let encoded = match &buffer.storage {
            Storage::Emu(_) => None,
            Storage::Cuda { slice, device, .. } => {
                let (ptr, _sync) = slice.device_ptr(&device.stream);
                // The driver encodes in the calling thread's context: a thread that has not
                // used the GPU yet (e.g. torch's autograd worker running a backward) has none.
                device.ctx.bind_to_thread().map_err(|e| {
                    LaunchError::invalid(rules::CUDA, format!("CUDA driver error: {e}"))
                })?;
                Some(device.tensor_map(encode(ptr, &geometry)?)?)
            }
        };
        Ok(TensorMap {
            buffer,
            geometry,
            encoded,
        })
    }

    /// [`TensorMap::new`] for a dense row-major tensor: each stride the product of the
    /// dimensions inside it.
    pub fn dense(
        buffer: &'a DeviceBuffer<T>,
        dims: [u64; R],
        box_dims: [u32; R],
        swizzle: SwizzleMode,
    ) -> Result<TensorMap<'a, T, R>, LaunchError> {
        let mut strides = [T::BYTES as u64; R];
        for d in 1..R {
            strides[d] = strides[d - 1].saturating_mul(dims[d - 1]);
        }
        TensorMap::new(buffer, dims, strides, box_dims, swizzle)
    }

    /// The checked geometry: dimensions, strides, box, swizzle.
    pub fn geometry(&self) -> &TmaGeometry<R> {
        &self.geometry
    }

    /// The emulator's device-side handle (used by generated launchers; on a GPU buffer it names
    /// no emulated memory, so an emulator launch rejects it as a `foreign-handle`).
    #[doc(hidden)]
    pub fn tma(&self) -> Tma<T, R> {
        Tma::from_emulated(self.buffer.emulated_id(), self.geometry)
    }

    /// This map as a kernel argument.
    #[doc(hidden)]
    pub fn arg(&self) -> KernelArg<'_> {
        KernelArg::TensorMap {
            buffer: self.buffer.raw(),
            map: self.encoded.as_deref(),
            box_bytes: self.geometry.box_bytes(),
        }
    }
}

/// A tensor the TMA copy engine writes (kernels' [`TmaMut`] parameters, e.g. a GEMM's C
/// stored from a staged shared tile): a [`TensorMap`] that borrows its buffer mutably, so no
/// other argument of a launch reaches the tensor.
///
/// ```no_run
/// # use ck_core::host::{Device, DeviceBuffer, TensorMapMut};
/// # use ck_core::device::Bf16;
/// # use ck_core::wgmma::SwizzleMode;
/// # fn main() -> Result<(), ck_core::host::LaunchError> {
/// let device = Device::emulator();
/// // A 300 × 500 bf16 matrix written in boxes of 64 rows × 64 columns.
/// let mut c = DeviceBuffer::<Bf16>::zeros(&device, 300 * 500)?;
/// let map = TensorMapMut::dense(&mut c, [500, 300], [64, 64], SwizzleMode::B128)?;
/// assert_eq!(map.geometry().box_bytes(), 64 * 128);
/// # Ok(()) }
/// ```
pub struct TensorMapMut<'a, T, const R: usize> {
    map: TensorMap<'a, T, R>,
}

impl<'a, T: Element, const R: usize> TensorMapMut<'a, T, R> {
    /// As [`TensorMap::new`], writing `buffer`.
    pub fn new(
        buffer: &'a mut DeviceBuffer<T>,
        dims: [u64; R],
        strides: [u64; R],
        box_dims: [u32; R],
        swizzle: SwizzleMode,
    ) -> Result<TensorMapMut<'a, T, R>, LaunchError> {
        Ok(TensorMapMut {
            map: TensorMap::new(buffer, dims, strides, box_dims, swizzle)?,
        })
    }

    /// As [`TensorMap::dense`], writing `buffer`.
    pub fn dense(
        buffer: &'a mut DeviceBuffer<T>,
        dims: [u64; R],
        box_dims: [u32; R],
        swizzle: SwizzleMode,
    ) -> Result<TensorMapMut<'a, T, R>, LaunchError> {
        Ok(TensorMapMut {
            map: TensorMap::dense(buffer, dims, box_dims, swizzle)?,
        })
    }

    /// The checked geometry: dimensions, strides, box, swizzle.
    pub fn geometry(&self) -> &TmaGeometry<R> {
        self.map.geometry()
    }

    /// The emulator's device-side handle (see [`TensorMap::tma`]).
    #[doc(hidden)]
    pub fn tma_mut(&self) -> TmaMut<T, R> {
        TmaMut::from_emulated(self.map.buffer.emulated_id(), self.map.geometry)
    }

    /// This map as a kernel argument.
    #[doc(hidden)]
    pub fn arg(&self) -> KernelArg<'_> {
        self.map.arg()
    }
}

/// The driver's encoding of `g` over the tensor at device address `ptr` (128 bytes).
fn encode<const R: usize>(ptr: u64, g: &TmaGeometry<R>) -> Result<[u8; 128], LaunchError> {
    use sys::CUtensorMapDataType_enum as Ty;
    use sys::CUtensorMapSwizzle_enum as Sw;
    // TMA copies bits: the type only sets the element size (no conversion, zero fill).
    let ty = match g.elem_bytes() {
        1 => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        2 => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        _ => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT32,
    };
    let swizzle = match g.swizzle() {
        SwizzleMode::None => Sw::CU_TENSOR_MAP_SWIZZLE_NONE,
        SwizzleMode::B128 => Sw::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let (dims, strides, box_dims) = (g.dims(), g.strides(), g.box_dims());
    let element_strides = [1u32; R];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every pointer addresses an array of the rank's length (strides from dimension 1:
    // R − 1 entries), and `map` is writable; the driver only encodes the geometry (it does not
    // touch the tensor's memory).
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            ty,
            R as u32,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides[1..].as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave_enum::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion_enum::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill_enum::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(LaunchError::invalid(
            rules::TENSOR_MAP,
            format!("the CUDA driver refused the tensor map (dims {dims:?}, strides {strides:?}, box {box_dims:?}): {r:?}"),
        ));
    }
    // SAFETY: the call succeeded, so the map is initialised (and it was zeroed before).
    let map = unsafe { map.assume_init() };
    let mut bytes = [0u8; 128];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(map.opaque.iter()) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    Ok(bytes)
}

impl<'a> KernelArg<'a> {
    /// The emulated memory a buffer or tensor-map argument uses, if any.
    pub(crate) fn emulated(&self) -> Option<&'a Arc<EmuMemory>> {
        match self {
            KernelArg::Buffer {
                buffer: RawBuffer::Emu(m),
                ..
            }
            | KernelArg::TensorMap {
                buffer: RawBuffer::Emu(m),
                ..
            } => Some(m),
            _ => None,
        }
    }
}
