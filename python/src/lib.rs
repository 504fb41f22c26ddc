//! `ck_rs._native`: the native half of the `ck_rs` Python package (see `python/ck_rs`).
//! Tensors arrive as DLPack capsules; CPU tensors run on the emulator, CUDA tensors on their
//! GPU, queued on the stream the Python layer passes (torch's current one).

mod capi;
mod ops;
mod registry;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("KernelFault", m.py().get_type::<ck_python::KernelFault>())?;
    m.add_function(wrap_pyfunction!(registry::call, m)?)?;
    m.add_function(wrap_pyfunction!(capi::c_api, m)?)?;
    m.add_function(wrap_pyfunction!(registry::operators, m)?)?;
    m.add_function(wrap_pyfunction!(registry::shapes, m)?)?;
    m.add_function(wrap_pyfunction!(ops::attention_kvcache, m)?)?;
    m.add_function(wrap_pyfunction!(ops::decode_scratch, m)?)?;
    m.add(
        "HAS_EMBEDDED_PTX",
        ck_kernels::rows::rmsnorm::RmsnormF32Rows::SPEC
            .module
            .embedded
            .is_some(),
    )?;
    Ok(())
}
