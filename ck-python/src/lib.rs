//! Exposing ck-rs kernels to Python (pyo3). A kernel's tensor arguments arrive as numpy arrays,
//! torch tensors or anything else that speaks DLPack, and are used in place where they are: CPU
//! memory on the emulator (its sanitizer reports kernel bugs as [`KernelFault`]), CUDA memory
//! on its GPU, queued on torch's current stream. Errors become Python exceptions carrying the
//! rule names of the `ck` command (`error[rule]: ...`).
//!
//! A user's kernel crate exports a kernel with a `#[pyfunction]` built on [`Call`] (what
//! `ck new --python` generates):
//!
//! ```ignore
//! #[pyfunction]
//! fn saxpy(a: f32, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<()> {
//!     let call = Call::new(&[("x", x), ("y", y)])?;
//!     let n = call.len("x")?;                                 // checked shapes, as u32
//!     let (xb, mut yb) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
//!     let cfg = LaunchConfig::new(n.div_ceil(TILE), 256);
//!     launched(Saxpy::launch(call.device(), cfg, a, &xb, &mut yb, n))?;
//!     call.finish("y", &yb)                                   // results back into `y`
//! }
//! ```

mod backend;
mod call;
mod dlpack;
mod errors;

pub use backend::{multiprocessors, Backend};
pub use call::{Call, TensorElement};
pub use dlpack::{DlTensor, Dtype, Place, Tensor};
pub use errors::{launch_error, launched, type_error, value_error, KernelFault};
