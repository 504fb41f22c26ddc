//! `_native.call(op, tensors, scalars, stream)`: any operator of the registry, checked by its
//! description (shapes, element types, scalars) and launched where the tensors are; and
//! `_native.operators()`, the descriptions the Python layer builds its functions and custom ops
//! from.

use ck_core::rules;
use ck_kernels::op::bind::bind;
use ck_kernels::op::buffers::BufferElement;
use ck_kernels::op::host::{check_dtype, check_scalar};
use ck_kernels::op::{Buffer, Dim, Dtype, Elem, Launch, Op, Role, ScalarRule};
use ck_kernels::registry;
use ck_python::{launch_error, type_error, value_error, Call, TensorElement};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The operator element type of a tensor's (none for int32, indices, and for fp8, which only
/// `linear` takes).
fn dtype_of(d: ck_python::Dtype) -> Option<Dtype> {
    match d {
        ck_python::Dtype::F32 => Some(Dtype::F32),
        ck_python::Dtype::Bf16 => Some(Dtype::Bf16),
        ck_python::Dtype::I32 | ck_python::Dtype::E4m3 => None,
    }
}

fn find(name: &str) -> PyResult<&'static Op> {
    registry::find(name).ok_or_else(|| {
        let known: Vec<&str> = registry::operators().map(|op| op.name).collect();
        value_error(
            rules::UNKNOWN_KERNEL,
            format!("no operator `{name}`; available: {}", known.join(", ")),
        )
    })
}

/// The element type of the call: that of its [`Elem::Op`] tensors, which must agree and be one
/// `op` takes; [`Elem::F32`] tensors must be float32.
fn call_dtype(op: &Op, call: &Call<'_>) -> PyResult<Dtype> {
    let mut first: Option<(&str, ck_python::Dtype)> = None;
    for t in call.tensors() {
        let p = op.param(t.name()).expect("named by the description");
        // Other int32 tensors are indices (page tables, lengths): no operator of the registry
        // reads its values from one; a u32 scratch (counters) is int32 from Python.
        if t.dtype() == ck_python::Dtype::I32 && p.elem != Elem::U32 {
            return Err(type_error(
                rules::DTYPE_UNSUPPORTED,
                format!(
                    "`{}` is {}; ck_rs.{} takes float32 or bfloat16 values",
                    t.name(),
                    t.describe(),
                    op.name
                ),
            ));
        }
        match (p.elem, first) {
            (Elem::U32, _) if t.dtype() != ck_python::Dtype::I32 => {
                return Err(type_error(
                    rules::DTYPE_MISMATCH,
                    format!("`{}` is {}; it is int32", t.name(), t.describe()),
                ))
            }
            (Elem::U32, _) => {}
            (Elem::F32, _) if t.dtype() != ck_python::Dtype::F32 => {
                return Err(type_error(
                    rules::DTYPE_MISMATCH,
                    format!("`{}` is {}; it is float32", t.name(), t.describe()),
                ))
            }
            (Elem::F32, _) => {}
            (Elem::Op, None) => first = Some((t.name(), t.dtype())),
            (Elem::Op, Some((name, d))) if d != t.dtype() => {
                return Err(type_error(
                    rules::DTYPE_MISMATCH,
                    format!(
                    "`{name}` is {} but `{}` is {}; give every tensor of the call one element type",
                    d.name(),
                    t.name(),
                    t.dtype().name()
                ),
                ))
            }
            (Elem::Op, Some(_)) => {}
        }
    }
    let dtype = match first {
        None => op.dtypes[0],
        Some((name, d)) => dtype_of(d).ok_or_else(|| {
            type_error(
                rules::DTYPE_UNSUPPORTED,
                format!(
                    "`{name}` is {}; ck_rs.{} takes float32 or bfloat16 values",
                    d.name(),
                    op.name
                ),
            )
        })?,
    };
    check_dtype(op, dtype).map_err(|e| type_error(rules::DTYPE_UNSUPPORTED, e.message()))?;
    Ok(dtype)
}

fn buffer<T: BufferElement + TensorElement>(call: &Call<'_>, name: &str) -> PyResult<Buffer> {
    Ok(T::wrap(call.input::<T>(name)?))
}

/// Runs operator `op` on `tensors` (DLPack capsules in the order of the operator's tensors,
/// `None` for an optional output left out) with `scalars` (in the order of its scalars, a flag
/// as 0 or 1, `None` for one the operator derives), on `stream` for CUDA tensors. Positional,
/// so that a call allocates nothing for names.
#[pyfunction]
#[pyo3(signature = (op, tensors, scalars, stream=None))]
pub fn call(
    op: &str,
    tensors: Vec<Option<Bound<'_, PyAny>>>,
    scalars: Vec<Option<f32>>,
    stream: Option<u64>,
) -> PyResult<()> {
    let op = find(op)?;
    if tensors.len() != op.params.len() || scalars.len() != op.scalars.len() {
        return Err(value_error(
            rules::UNKNOWN_ARGUMENT,
            format!(
                "{} takes {} tensors and {} scalars; {} and {} were given",
                op.name,
                op.params.len(),
                op.scalars.len(),
                tensors.len(),
                scalars.len()
            ),
        ));
    }
    let args: Vec<(&'static str, &Bound<'_, PyAny>)> = op
        .params
        .iter()
        .zip(&tensors)
        .filter_map(|(p, t)| t.as_ref().map(|t| (p.name, t)))
        .collect();
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let call = unsafe { Call::from_capsules(&args, stream)? };
    let dtype = call_dtype(op, &call)?;
    let scalars: Vec<f32> = (op.scalars.iter().zip(scalars))
        .map(|(s, v)| v.unwrap_or_else(|| s.initial()))
        .collect();
    for (s, &v) in op.scalars.iter().zip(&scalars) {
        check_scalar(op, s.name, v).map_err(launch_error)?;
    }
    let shapes: Vec<(&str, &[usize])> = call
        .tensors()
        .iter()
        .map(|t| (t.name(), t.shape()))
        .collect();
    let sizes = bind(op, &shapes, &scalars, true).map_err(launch_error)?;
    if sizes.is_empty(op.params) {
        return Ok(()); // no element to compute
    }
    let mut buffers = Vec::with_capacity(op.params.len());
    for p in op.params {
        let given = call.tensors().iter().any(|t| t.name() == p.name);
        let elem = if p.elem == Elem::F32 {
            Dtype::F32
        } else {
            dtype
        };
        buffers.push(match (given, p.elem) {
            (false, _) => None,
            (true, Elem::U32) => Some(buffer::<u32>(&call, p.name)?),
            (true, _) => Some(ck_kernels::by_dtype!(elem, T => buffer::<T>(&call, p.name))?),
        });
    }
    let mut launch = Launch::new(op.signature(), dtype, sizes, scalars, buffers);
    (op.launch)(call.device(), &mut launch).map_err(launch_error)?;
    for (p, b) in op.params.iter().zip(launch.into_buffers()) {
        match (p.role, b) {
            (Role::Input | Role::Scratch, _) | (_, None) => {}
            (_, Some(Buffer::U32(_))) => {} // only a scratch is u32
            (_, Some(Buffer::F32(b))) => call.finish(p.name, &b)?,
            (_, Some(Buffer::Bf16(b))) => call.finish(p.name, &b)?,
        }
    }
    Ok(())
}

/// The shape of every tensor of operator `op` (scratch included, in its order) for the given
/// tensors' `shapes` (by name: its inputs at least) and its `scalars` (as [`call`] takes them):
/// what a caller allocates, checked as a call would check it.
#[pyfunction]
pub fn shapes(
    op: &str,
    shapes: Vec<(String, Vec<usize>)>,
    scalars: Vec<Option<f32>>,
) -> PyResult<Vec<Vec<usize>>> {
    let op = find(op)?;
    if scalars.len() != op.scalars.len() {
        return Err(value_error(
            rules::UNKNOWN_ARGUMENT,
            format!(
                "{} takes {} scalars; {} were given",
                op.name,
                op.scalars.len(),
                scalars.len()
            ),
        ));
    }
    let scalars: Vec<f32> = (op.scalars.iter().zip(scalars))
        .map(|(s, v)| v.unwrap_or_else(|| s.initial()))
        .collect();
    for (s, &v) in op.scalars.iter().zip(&scalars) {
        check_scalar(op, s.name, v).map_err(launch_error)?;
    }
    let named: Vec<(&str, &[usize])> = shapes.iter().map(|(n, s)| (n.as_str(), &s[..])).collect();
    let sizes = bind(op, &named, &scalars, false).map_err(launch_error)?;
    Ok(op.params.iter().map(|p| sizes.shape_of(p)).collect())
}

/// The registry's descriptions as Python values: a list of dicts `{name, summary, dtypes,
/// params: [{name, role, elem, dims}], scalars: [{name, kind, default}]}`, where `role` is
/// `input`, `output` or `optional_output`, `elem` `op` or `f32`, `dims` a list of symbol names
/// with `...` for the rows' leading dimensions, `kind` `float`, `flag` (a bool) or `count` (an
/// int setting a shape symbol), and `default` `None` where the operator derives the value (or,
/// for a count, the caller must give it). A tensor whose layout a flag switches has
/// `alt: (flag, dims)`.
#[pyfunction]
pub fn operators(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for op in registry::operators() {
        let d = PyDict::new(py);
        d.set_item("name", op.name)?;
        d.set_item("summary", op.summary)?;
        let dtypes: Vec<&str> = op.dtypes.iter().map(|t| t.name()).collect();
        d.set_item("dtypes", dtypes)?;
        let params = PyList::empty(py);
        for p in op.params {
            let pd = PyDict::new(py);
            pd.set_item("name", p.name)?;
            let role = match p.role {
                Role::Input => "input",
                Role::Output => "output",
                Role::OptionalOutput => "optional_output",
                Role::Scratch => "scratch",
            };
            pd.set_item("role", role)?;
            let elem = match p.elem {
                Elem::Op => "op",
                Elem::F32 => "f32",
                Elem::U32 => "u32",
            };
            pd.set_item("elem", elem)?;
            let text = |dims: &[Dim]| -> Vec<String> { dims.iter().map(Dim::text).collect() };
            pd.set_item("dims", text(p.dims))?;
            if let Some((flag, dims)) = p.alt {
                pd.set_item("alt", (flag, text(dims)))?;
            }
            pd.set_item("doc", p.doc)?;
            params.append(pd)?;
        }
        d.set_item("params", params)?;
        let scalars = PyList::empty(py);
        for s in op.scalars {
            let sd = PyDict::new(py);
            sd.set_item("name", s.name)?;
            let flag = s.rule == ScalarRule::Flag;
            let kind = match s.rule {
                ScalarRule::Flag => "flag",
                ScalarRule::Count(_) => "count",
                _ => "float",
            };
            sd.set_item("kind", kind)?;
            match s.default {
                Some(v) if flag => sd.set_item("default", v != 0.0)?,
                v => sd.set_item("default", v)?,
            }
            sd.set_item("doc", s.doc)?;
            scalars.append(sd)?;
        }
        d.set_item("scalars", scalars)?;
        list.append(d)?;
    }
    Ok(list)
}
