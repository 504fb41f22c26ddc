//! The registry's operators, and decode attention, for C++ callers: the `torch.ops.ck_rs` library
//! that `ck_rs` builds against the user's torch (`python/ck_rs/csrc/torch_ops.cpp`) calls
//! [`ck_rs_run`] (or [`ck_rs_attention_kvcache`]) with DLPack's `DLTensor`s of its `at::Tensor`s,
//! skipping Python — torch's dispatcher into a Python kernel, the capsules — on every call. The
//! addresses come from `_native.c_api()`.
//!
//! Errors come back as torch raises them: the code says the Python exception (1 `ValueError`,
//! 2 `TypeError`, 3 `RuntimeError`: the emulator's `KernelFault` too), the message
//! (`error[rule]: …`) is written into the caller's buffer.

use crate::ops::{run_kvcache, scratch_lens, KvOptions, KvTensors};
use crate::registry::run;
use ck_core::rules;
use ck_kernels::op::Elem;
use ck_python::{value_error, DlTensor, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::ffi::{c_char, CStr};

/// The index of operator `name` in the registry (what [`ck_rs_run`] takes), or -1.
///
/// # Safety
/// `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ck_rs_op_index(name: *const c_char) -> i32 {
    // SAFETY: the caller's promise.
    let Ok(name) = unsafe { CStr::from_ptr(name) }.to_str() else {
        return -1;
    };
    let found = ck_kernels::registry::operators().position(|op| op.name == name);
    found.map_or(-1, |i| i as i32)
}

/// The index of `choice` among the names operator `op`'s choice scalar `scalar` takes (a GEMM's
/// activation: [`ck_kernels::op::host::choice_index`]), or -1 with what to give instead in
/// `message` (at most `capacity` bytes, NUL-terminated).
///
/// # Safety
/// `scalar` and `choice` are NUL-terminated strings; `message` holds `capacity` bytes.
#[no_mangle]
pub unsafe extern "C" fn ck_rs_choice_index(
    op: u32,
    scalar: *const c_char,
    choice: *const c_char,
    message: *mut c_char,
    capacity: usize,
) -> i32 {
    // SAFETY: the caller's promise.
    let (scalar, choice) = unsafe { (CStr::from_ptr(scalar), CStr::from_ptr(choice)) };
    let (scalar, choice) = (scalar.to_string_lossy(), choice.to_string_lossy());
    let found = match ck_kernels::registry::operators().nth(op as usize) {
        Some(o) => ck_kernels::op::host::choice_index(o, &scalar, &choice),
        None => Err(ck_core::host::LaunchError::invalid(
            rules::UNKNOWN_KERNEL,
            format!("no operator {op}: an index from ck_rs_op_index is expected"),
        )),
    };
    match found {
        Ok(i) => i as i32,
        Err(e) => {
            // SAFETY: the caller's promise.
            unsafe { write_message(&e.message(), message, capacity) };
            -1
        }
    }
}

/// `text` into the caller's `message` buffer of `capacity` bytes, NUL-terminated, cut at the last
/// character that fits.
///
/// # Safety
/// `message` holds `capacity` bytes.
unsafe fn write_message(text: &str, message: *mut c_char, capacity: usize) {
    if capacity == 0 {
        return;
    }
    let mut n = text.len().min(capacity - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `message` holds `capacity` bytes (the caller's promise); `n + 1` fit.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), message.cast::<u8>(), n);
        *message.add(n) = 0;
    }
}

/// Runs operator `op` (its [`ck_rs_op_index`]) on the `tensor_count` `tensors` (one per tensor
/// of its description, in order; NULL for one left out) and the `scalar_count` `scalars` (one per
/// scalar; NaN where the operator derives it), queued on `stream` (a `CUstream`, 0 the legacy
/// default stream; CPU tensors run on the emulator). 0 on success; else the exception's code,
/// its message in `message` (at most `capacity` bytes, NUL-terminated, cut at a character).
///
/// # Safety
/// `tensors` and `scalars` hold `tensor_count` and `scalar_count` entries (`scalars` may be NULL
/// for none); each non-NULL `DLTensor` describes memory that stays alive and unaliased by other
/// threads' writes for the call; `stream`, for CUDA tensors, is a live stream of their device's
/// primary context that outlives the kernels queued on it; `message` holds `capacity` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ck_rs_run(
    op: u32,
    tensor_count: usize,
    tensors: *const *const DlTensor,
    scalar_count: usize,
    scalars: *const f32,
    stream: u64,
    message: *mut c_char,
    capacity: usize,
) -> i32 {
    let result = std::panic::catch_unwind(|| {
        let Some(op) = ck_kernels::registry::operators().nth(op as usize) else {
            return Err(value_error(
                rules::UNKNOWN_KERNEL,
                format!("no operator {op}: an index from ck_rs_op_index is expected"),
            ));
        };
        if (tensor_count, scalar_count) != (op.params.len(), op.scalars.len()) {
            return Err(value_error(
                rules::UNKNOWN_ARGUMENT,
                format!(
                    "{} takes {} tensors and {} scalars; the C++ kernel passed {tensor_count} and \
                     {scalar_count} (a torch_ops.cpp of another ck_rs version?)",
                    op.name,
                    op.params.len(),
                    op.scalars.len()
                ),
            ));
        }
        // SAFETY: the caller's promise: `tensor_count` and `scalar_count` entries (NULL is
        // allowed for no scalars).
        let (given, values) = unsafe {
            (
                std::slice::from_raw_parts(tensors, tensor_count),
                match scalar_count {
                    0 => &[],
                    n => std::slice::from_raw_parts(scalars, n),
                },
            )
        };
        let tensors = op.params.iter().zip(given).map(|(p, &t)| {
            // SAFETY: the caller's promise: a live `DLTensor` or NULL.
            let t = unsafe { t.as_ref() }?;
            Some(Tensor::from_dl_tensor(p.name, t, p.elem == Elem::E4m3))
        });
        let tensors = tensors
            .map(Option::transpose)
            .collect::<PyResult<Vec<_>>>()?;
        let scalars: Vec<Option<f32>> =
            values.iter().map(|&v| (!v.is_nan()).then_some(v)).collect();
        // SAFETY: the caller's promise (a CPU call ignores the stream).
        unsafe { run(op, tensors, &scalars, Some(stream)) }
    });
    // SAFETY: the caller's promise.
    unsafe { report(result, message, capacity) }
}

/// A native call's outcome for the C++ caller: 0, or the exception's code with its message
/// written into `message` (a panic is an internal error, never an unwind into C++).
///
/// # Safety
/// `message` holds `capacity` bytes.
unsafe fn report(
    result: std::thread::Result<PyResult<()>>,
    message: *mut c_char,
    capacity: usize,
) -> i32 {
    let (code, text) = match result {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => Python::attach(|py| {
            let code = if e.is_instance_of::<PyValueError>(py) {
                1
            } else if e.is_instance_of::<PyTypeError>(py) {
                2
            } else {
                3
            };
            (code, e.value(py).to_string())
        }),
        Err(_) => (
            3,
            "error[internal]: ck_rs's native call panicked".to_string(),
        ),
    };
    // SAFETY: the caller's promise.
    unsafe { write_message(&text, message, capacity) };
    code
}

/// The split scratch's lengths of a decode call in f32 elements ([`crate::ops::scratch_lens`]:
/// for `num_splits`, or with 0 the heuristic's count for the multiprocessors of CUDA device
/// `ordinal`, or of the emulator where `ordinal` < 0), written into `out[0..2]`. 0 on success;
/// else as [`ck_rs_run`].
///
/// # Safety
/// `shape` holds `[batch, heads, kv_heads, sq, head_dim]`; `out` holds 2 entries; `message`
/// holds `capacity` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ck_rs_decode_scratch(
    shape: *const u32,
    capacity_keys: u64,
    num_splits: u32,
    ordinal: i32,
    out: *mut u64,
    message: *mut c_char,
    capacity: usize,
) -> i32 {
    let result = std::panic::catch_unwind(|| {
        // SAFETY: the caller's promise.
        let dims = unsafe { std::slice::from_raw_parts(shape, 5) };
        let shape = ck_kernels::attention::decode::host::Shape {
            batch: dims[0],
            heads: dims[1],
            kv_heads: dims[2],
            sq: dims[3],
            head_dim: dims[4],
        };
        let ordinal = usize::try_from(ordinal).ok();
        let (o_len, lse_len) = scratch_lens(&shape, capacity_keys, num_splits, ordinal)?;
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping([o_len, lse_len].as_ptr(), out, 2) };
        Ok(())
    });
    // SAFETY: the caller's promise.
    unsafe { report(result, message, capacity) }
}

/// Decode attention against a KV cache ([`crate::ops::run_kvcache`]) on the 14 `tensors` of
/// [`KvTensors::NAMES`], in that order (NULL for an optional one left out), the scratch sized
/// by [`ck_rs_decode_scratch`] for the same `num_splits` (0: the heuristic); `scale` NaN for 1/√D.
/// Queued on `stream`; 0 on success, else as [`ck_rs_run`].
///
/// # Safety
/// As for [`ck_rs_run`]: `tensors` holds 14 entries, each a live `DLTensor` or NULL.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ck_rs_attention_kvcache(
    tensors: *const *const DlTensor,
    causal: bool,
    scale: f32,
    num_splits: u32,
    rotary_interleaved: bool,
    stream: u64,
    message: *mut c_char,
    capacity: usize,
) -> i32 {
    let result = std::panic::catch_unwind(|| {
        // SAFETY: the caller's promise: 14 entries, each live or NULL.
        let given = unsafe { std::slice::from_raw_parts(tensors, KvTensors::NAMES.len()) };
        let mut described = KvTensors::NAMES.iter().zip(given).map(|(&name, &t)| {
            // SAFETY: as above.
            unsafe { t.as_ref() }.map(|t| Tensor::from_dl_tensor(name, t, false))
        });
        let mut optional = || described.next().flatten().transpose();
        let mut required = || {
            optional()?.ok_or_else(|| {
                value_error(
                    rules::UNKNOWN_ARGUMENT,
                    "a decode call needs q, k_cache, v_cache, cache_seqlens, o, lse and the split scratch".into(),
                )
            })
        };
        let t = KvTensors {
            q: required()?,
            k_cache: required()?,
            v_cache: required()?,
            cache_seqlens: required()?,
            o: required()?,
            lse: required()?,
            o_part: required()?,
            lse_part: required()?,
            page_table: optional()?,
            k: optional()?,
            v: optional()?,
            rotary_cos: optional()?,
            rotary_sin: optional()?,
            q_rotated: optional()?,
        };
        let options = KvOptions {
            causal,
            scale: (!scale.is_nan()).then_some(scale),
            splits: num_splits,
            rotary_interleaved,
        };
        // SAFETY: the caller's promise (a CPU call ignores the stream).
        unsafe { run_kvcache(t, options, Some(stream)) }
    });
    // SAFETY: the caller's promise.
    unsafe { report(result, message, capacity) }
}

/// The addresses of [`ck_rs_op_index`], [`ck_rs_choice_index`], [`ck_rs_run`],
/// [`ck_rs_decode_scratch`] and [`ck_rs_attention_kvcache`], for the C++ library.
#[pyfunction]
pub fn c_api() -> (usize, usize, usize, usize, usize) {
    (
        ck_rs_op_index as *const () as usize,
        ck_rs_choice_index as *const () as usize,
        ck_rs_run as *const () as usize,
        ck_rs_decode_scratch as *const () as usize,
        ck_rs_attention_kvcache as *const () as usize,
    )
}
