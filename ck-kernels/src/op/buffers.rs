//! [`Buffer`]: a device buffer of an operator's element type, and [`Launch`]: one call's
//! buffers, sizes and scalars, as an operator's `launch` receives them.

use super::{Dtype, Elem, Role, Signature, Sizes};
use ck_core::device::{Bf16, E4m3, Element};
use ck_core::host::{Device, DeviceBuffer, LaunchError};
use ck_core::rules;

/// A device buffer of f32, bf16, e4m3, or 32-bit integers (indices, counters).
pub enum Buffer {
    /// f32 elements.
    F32(DeviceBuffer<f32>),
    /// bf16 elements.
    Bf16(DeviceBuffer<Bf16>),
    /// u32 words.
    U32(DeviceBuffer<u32>),
    /// e4m3 (fp8) elements.
    E4m3(DeviceBuffer<E4m3>),
    /// i32 indices.
    I32(DeviceBuffer<i32>),
}

impl Buffer {
    /// `values` in a new device buffer for a tensor of rule `elem` in a call of element type
    /// `dtype` (rounded to its type, [`Elem::round`]).
    pub fn from_f32(
        device: &Device,
        (elem, dtype): (Elem, Dtype),
        values: &[f32],
    ) -> Result<Buffer, LaunchError> {
        fn typed<T: BufferElement>(
            d: &Device,
            v: &[f32],
            from: impl Fn(f32) -> T,
        ) -> Result<Buffer, LaunchError> {
            let t: Vec<T> = v.iter().map(|&a| from(a)).collect();
            Ok(T::wrap(DeviceBuffer::from_slice(d, &t)?))
        }
        match elem.of(dtype) {
            Elem::Bf16 => typed(device, values, Bf16::from_f32),
            Elem::E4m3 => typed(device, values, E4m3::from_f32),
            Elem::U32 => typed(device, values, |v| v as u32),
            Elem::I32 => typed(device, values, |v| v as i32),
            // Host memory: the emulator's buffers are the host's.
            Elem::HostI32 => typed(&Device::emulator(), values, |v| v as i32),
            _ => typed(device, values, |v| v),
        }
    }

    /// Its values as f32.
    pub fn to_f32(&self) -> Result<Vec<f32>, LaunchError> {
        Ok(match self {
            Buffer::F32(b) => b.to_vec()?,
            Buffer::Bf16(b) => b.to_vec()?.iter().map(|v| v.to_f32()).collect(),
            Buffer::U32(b) => b.to_vec()?.iter().map(|&v| v as f32).collect(),
            Buffer::E4m3(b) => b.to_vec()?.iter().map(|v| v.to_f32()).collect(),
            Buffer::I32(b) => b.to_vec()?.iter().map(|&v| v as f32).collect(),
        })
    }

    /// Its element type's name.
    pub fn elem_name(&self) -> &'static str {
        match self {
            Buffer::F32(_) => f32::NAME,
            Buffer::Bf16(_) => Bf16::NAME,
            Buffer::U32(_) => u32::NAME,
            Buffer::E4m3(_) => E4m3::NAME,
            Buffer::I32(_) => i32::NAME,
        }
    }
}

/// Moving typed buffers in and out of a [`Buffer`].
pub trait BufferElement: Element {
    /// `b` as a [`Buffer`].
    fn wrap(b: DeviceBuffer<Self>) -> Buffer;
    /// The typed buffer, if `b` has this element type.
    fn unwrap(b: Buffer) -> Result<DeviceBuffer<Self>, Buffer>;
    /// A view of the typed buffer, if `b` has this element type.
    fn view(b: &Buffer) -> Option<&DeviceBuffer<Self>>;
}

/// `BufferElement` for the element type `$t` of the variant `Buffer::$v`.
macro_rules! buffer_element {
    ($($t:ty => $v:ident),*) => {$(
        impl BufferElement for $t {
            fn wrap(b: DeviceBuffer<$t>) -> Buffer {
                Buffer::$v(b)
            }
            fn unwrap(b: Buffer) -> Result<DeviceBuffer<$t>, Buffer> {
                match b {
                    Buffer::$v(b) => Ok(b),
                    other => Err(other),
                }
            }
            fn view(b: &Buffer) -> Option<&DeviceBuffer<$t>> {
                match b {
                    Buffer::$v(b) => Some(b),
                    _ => None,
                }
            }
        }
    )*};
}

buffer_element!(f32 => F32, Bf16 => Bf16, u32 => U32, E4m3 => E4m3, i32 => I32);

/// Runs `$body` with `$t` the element type of the [`Dtype`] `$dtype`.
#[macro_export]
macro_rules! by_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::op::Dtype::F32 => {
                type $t = f32;
                $body
            }
            $crate::op::Dtype::Bf16 => {
                type $t = ::ck_core::device::Bf16;
                $body
            }
        }
    };
}

/// One call of an operator: its element type, sizes, scalars (in the signature's order) and a
/// buffer per tensor (an absent optional output has none).
pub struct Launch {
    op: Signature,
    /// The element type of the call's [`super::Elem::Op`] tensors.
    pub dtype: Dtype,
    /// The bound sizes.
    pub sizes: Sizes,
    scalars: Vec<f32>,
    buffers: Vec<Option<Buffer>>,
    /// Which tensors the caller gave (an optional output may be absent).
    given: Vec<bool>,
}

fn internal(message: String) -> LaunchError {
    LaunchError::invalid(rules::INTERNAL, message)
}

impl Launch {
    /// A call of `op` with `buffers` in its tensors' order (checked by the caller against the
    /// shape rules and element types).
    pub fn new(
        op: Signature,
        dtype: Dtype,
        sizes: Sizes,
        scalars: Vec<f32>,
        buffers: Vec<Option<Buffer>>,
    ) -> Launch {
        let given = buffers.iter().map(Option::is_some).collect();
        Launch {
            op,
            dtype,
            sizes,
            scalars,
            buffers,
            given,
        }
    }

    fn index(&self, name: &str) -> Result<usize, LaunchError> {
        self.op
            .param_index(name)
            .ok_or_else(|| internal(format!("{} has no tensor `{name}`", self.op.name)))
    }

    /// Scalar `name`.
    pub fn scalar(&self, name: &str) -> f32 {
        self.scalars[self.op.scalar_index(name)]
    }

    /// Whether the flag `name` is on.
    pub fn flag(&self, name: &str) -> bool {
        self.scalar(name) != 0.0
    }

    /// Scalar `name` as given, or `None` where the operator derives it.
    pub fn given(&self, name: &str) -> Option<f32> {
        Some(self.scalar(name)).filter(|v| !v.is_nan())
    }

    /// The input `name` as a buffer of `T`.
    pub fn input<T: BufferElement>(&self, name: &str) -> Result<&DeviceBuffer<T>, LaunchError> {
        let i = self.index(name)?;
        self.buffers[i]
            .as_ref()
            .and_then(T::view)
            .ok_or_else(|| internal(format!("`{name}` is not a {} buffer", T::NAME)))
    }

    /// The optional input `name` as a buffer of `T`, if the caller gave it.
    pub fn optional_input<T: BufferElement>(
        &self,
        name: &str,
    ) -> Result<Option<&DeviceBuffer<T>>, LaunchError> {
        match self.given[self.index(name)?] {
            true => self.input(name).map(Some),
            false => Ok(None),
        }
    }

    /// Takes the tensor `name` (an output, or an input the kernel needs by value) out of the
    /// call as a buffer of `T` (give it back with [`Launch::put`]); an absent optional output
    /// is an empty buffer.
    pub fn take<T: BufferElement>(
        &mut self,
        device: &ck_core::host::Device,
        name: &str,
    ) -> Result<DeviceBuffer<T>, LaunchError> {
        let i = self.index(name)?;
        match self.buffers[i].take() {
            Some(b) => T::unwrap(b).map_err(|b| {
                let elem = b.elem_name();
                self.buffers[i] = Some(b);
                internal(format!("`{name}` is a {elem} buffer, not {}", T::NAME))
            }),
            None if self.op.params[i].role == Role::OptionalOutput => DeviceBuffer::empty(device),
            None => Err(internal(format!("`{name}` was taken twice"))),
        }
    }

    /// The scratch `name` as a buffer of `T`: the caller's, or a fresh one of the length the
    /// operator derived (give it back with [`Launch::put`]).
    pub fn scratch<T: BufferElement>(
        &mut self,
        device: &ck_core::host::Device,
        name: &str,
    ) -> Result<DeviceBuffer<T>, LaunchError> {
        let i = self.index(name)?;
        if self.given[i] {
            return self.take(device, name);
        }
        let len = self.sizes.shape_of(&self.op.params[i]).iter().product();
        DeviceBuffer::zeros(device, len)
    }

    /// Gives back an output taken with [`Launch::take`] (the buffer of an optional output that
    /// was not asked for is dropped).
    pub fn put<T: BufferElement>(&mut self, name: &str, buffer: DeviceBuffer<T>) {
        if let Ok(i) = self.index(name) {
            if self.given[i] {
                self.buffers[i] = Some(T::wrap(buffer));
            }
        }
    }

    /// The call's buffers, in its tensors' order.
    pub fn into_buffers(self) -> Vec<Option<Buffer>> {
        self.buffers
    }
}
