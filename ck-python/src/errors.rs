//! Errors as Python exceptions whose message starts with the rule name the `ck` command prints,
//! `error[rule]: what is wrong and what to change`:
//!
//! | Python exception | when |
//! |---|---|
//! | `TypeError` | not a tensor, an element type the kernel does not take |
//! | `ValueError` | shapes, devices, layout, options (every refused launch) |
//! | `ck_rs.KernelFault` (a `RuntimeError`) | the emulator's sanitizer found a bug in a kernel: the rule, thread and address |
//! | `RuntimeError` | no GPU, no PTX module (`no-ptx`, `ptx-module`), a CUDA driver error |

use ck_core::host::{LaunchError, LaunchStats};
use ck_core::rules::{self, RuleId};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::{PyErr, PyResult};

create_exception!(
    ck_python,
    KernelFault,
    PyRuntimeError,
    "A bug the emulator's sanitizer found in a kernel (out-of-bounds or misaligned access, data race, ...): the message names the rule, the block, the threads and the address."
);

fn framed(rule: RuleId, message: &str) -> String {
    format!("{rule}: {message}")
}

pub fn type_error(rule: RuleId, message: String) -> PyErr {
    PyTypeError::new_err(framed(rule, &message))
}

pub fn value_error(rule: RuleId, message: String) -> PyErr {
    PyValueError::new_err(framed(rule, &message))
}

/// A launch's error as the exception of its kind.
pub fn launch_error(e: LaunchError) -> PyErr {
    let text = framed(e.rule(), &e.message());
    let runtime = [rules::NO_GPU, rules::NO_PTX, rules::PTX_MODULE, rules::CUDA];
    match e {
        LaunchError::Kernel(_) => KernelFault::new_err(text),
        LaunchError::Invalid { rule, .. } if runtime.contains(&rule) => {
            PyRuntimeError::new_err(text)
        }
        LaunchError::Invalid { .. } => PyValueError::new_err(text),
    }
}

/// A launch's result, its error as the exception of its kind.
pub fn launched(r: Result<LaunchStats, LaunchError>) -> PyResult<LaunchStats> {
    r.map_err(launch_error)
}
