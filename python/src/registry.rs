//! `_native.call(op, tensors, scalars, stream)`: any operator of the registry, checked by its
//! description (shapes, element types, scalars) and launched where the tensors are; and
//! `_native.operators()`, the descriptions the Python layer builds its functions and custom ops
//! from.

use ck_core::device::{Bf16, E4m3};
use ck_core::rules;
use ck_kernels::op::bind::bind;
use ck_kernels::op::buffers::BufferElement;
use ck_kernels::op::host::{check_dtype, check_scalar};
use ck_kernels::op::{Buffer, Dim, Dtype, Elem, Launch, Op, Role, ScalarRule};
use ck_kernels::registry;
use ck_python::{launch_error, type_error, value_error, Call, Tensor, TensorElement};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The operator element type of a tensor's (none for int32 and e4m3: those are only ever a
/// tensor's own fixed type, [`Elem::I32`], [`Elem::E4m3`]).
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
/// `op` takes; every other tensor has its own fixed type (float32, int32 counters, e4m3; a
/// bfloat16 operand is checked when its buffer is made, [`Call::input_bf16`]).
fn call_dtype(op: &Op, call: &Call<'_>) -> PyResult<Dtype> {
    let mut first: Option<(&str, ck_python::Dtype)> = None;
    for t in call.tensors() {
        let p = op.param(t.name()).expect("named by the description");
        let fixed = match p.elem {
            Elem::Op | Elem::Bf16 => None,
            Elem::F32 => Some(ck_python::Dtype::F32),
            Elem::U32 | Elem::I32 | Elem::HostI32 => Some(ck_python::Dtype::I32), // int32 from Python
            Elem::E4m3 => Some(ck_python::Dtype::E4m3),
        };
        let index_or_fp8 = matches!(t.dtype(), ck_python::Dtype::I32 | ck_python::Dtype::E4m3);
        match (fixed, p.elem, first) {
            (None, _, _) if index_or_fp8 => {
                return Err(type_error(
                    rules::DTYPE_UNSUPPORTED,
                    format!(
                        "`{}` is {}; ck_rs.{} takes float32 or bfloat16 values",
                        t.name(),
                        t.describe(),
                        op.name
                    ),
                ))
            }
            (Some(want), _, _) if t.dtype() != want => {
                return Err(type_error(
                    rules::DTYPE_MISMATCH,
                    format!("`{}` is {}; it is {}", t.name(), t.describe(), want.name()),
                ))
            }
            (None, Elem::Op, None) => first = Some((t.name(), t.dtype())),
            (None, Elem::Op, Some((name, d))) if d != t.dtype() => {
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
            _ => {}
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

/// A tensor whose values the launch reads on the host ([`Elem::HostI32`]): a CPU tensor (e.g. a
/// list the Python layer made one), int32.
fn host_tensor(t: Tensor<'_>) -> PyResult<Tensor<'_>> {
    if t.place() != ck_python::Place::Cpu {
        return Err(value_error(
            rules::DEVICE_MISMATCH,
            format!("`{}` is {}; the launch is planned from its values on the host: give a CPU tensor or a list of ints", t.name(), t.describe()),
        ));
    }
    Ok(t)
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
    let mut parsed = Vec::with_capacity(tensors.len());
    for (p, t) in op.params.iter().zip(&tensors) {
        parsed.push(match (t, p.elem) {
            (None, _) => None,
            // Its bytes may come as uint8: torch exports float8 only from DLPack 1.1 on.
            (Some(t), Elem::E4m3) => Some(Tensor::from_capsule_e4m3(p.name, t)?),
            (Some(t), _) => Some(Tensor::from_capsule(p.name, t)?),
        });
    }
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    unsafe { run(op, parsed, &scalars, stream) }
}

/// Runs `op` on its tensors (in the order of its description, None for one left out) and
/// `scalars` ([`call`]'s).
///
/// # Safety
/// `stream`, for CUDA tensors, is a live `CUstream` of their device's primary context that
/// outlives the call and the kernels queued on it.
pub unsafe fn run<'py>(
    op: &'static Op,
    tensors: Vec<Option<Tensor<'py>>>,
    scalars: &[Option<f32>],
    stream: Option<u64>,
) -> PyResult<()> {
    let (mut parsed, mut host) = (Vec::with_capacity(tensors.len()), Vec::new());
    for (p, t) in op.params.iter().zip(tensors) {
        match (t, p.elem) {
            (None, _) => {}
            (Some(t), Elem::HostI32) => host.push(host_tensor(t)?),
            (Some(t), _) => parsed.push(t),
        }
    }
    // SAFETY: the caller's promise.
    let call = unsafe { Call::from_tensors(parsed, stream)? };
    // SAFETY: CPU tensors only (`host_tensor`): no stream.
    let host = unsafe { Call::from_tensors(host, None)? };
    let dtype = call_dtype(op, &call)?;
    let scalars: Vec<f32> = (op.scalars.iter().zip(scalars))
        .map(|(s, v)| v.unwrap_or_else(|| s.initial()))
        .collect();
    for (s, &v) in op.scalars.iter().zip(&scalars) {
        check_scalar(op, s.name, v).map_err(launch_error)?;
    }
    let shapes: Vec<(&str, &[usize])> = (call.tensors().iter().chain(host.tensors()))
        .map(|t| (t.name(), t.shape()))
        .collect();
    let sizes = bind(op, &shapes, &scalars, true).map_err(launch_error)?;
    if sizes.is_empty(op.params) {
        return Ok(()); // no element to compute
    }
    let mut buffers = Vec::with_capacity(op.params.len());
    for p in op.params {
        let given = shapes.iter().any(|(name, _)| *name == p.name);
        buffers.push(match (given, p.elem.of(dtype)) {
            (false, _) => None,
            (true, Elem::HostI32) => Some(Buffer::I32(host.input::<i32>(p.name)?)),
            (true, Elem::U32) => Some(buffer::<u32>(&call, p.name)?),
            (true, Elem::E4m3) => Some(buffer::<E4m3>(&call, p.name)?),
            (true, Elem::I32) => Some(buffer::<i32>(&call, p.name)?),
            (true, Elem::F32) => Some(buffer::<f32>(&call, p.name)?),
            (true, _) if p.elem == Elem::Bf16 => Some(Buffer::Bf16(call.input_bf16(p.name)?)),
            (true, _) => Some(buffer::<Bf16>(&call, p.name)?),
        });
    }
    let mut launch = Launch::new(op.signature(), dtype, sizes, scalars, buffers);
    (op.launch)(call.device(), &mut launch).map_err(launch_error)?;
    for (p, b) in op.params.iter().zip(launch.into_buffers()) {
        match (p.role, b) {
            (Role::Input | Role::OptionalInput | Role::Scratch, _) | (_, None) => {}
            (_, Some(Buffer::U32(_) | Buffer::E4m3(_) | Buffer::I32(_))) => {} // never outputs
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
/// `input`, `optional_input`, `output`, `optional_output` or `scratch`, `elem` `op` (the
/// call's type) or a fixed one (`f32`, `bf16`, `e4m3`, `u32`, `i32`, `host_i32`: counts read on
/// the host), `dims` a list of symbol names
/// with `...` for the rows' leading dimensions, `kind` `float`, `flag` (a bool), `count` (an
/// int setting a shape symbol) or `choice` (an index into its `choices`), and `default` `None`
/// where the operator derives the value (or, for a count, the caller must give it). A tensor whose layout a flag switches has
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
                Role::OptionalInput => "optional_input",
                Role::Output => "output",
                Role::OptionalOutput => "optional_output",
                Role::Scratch => "scratch",
            };
            pd.set_item("role", role)?;
            pd.set_item("elem", p.elem.name())?;
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
                ScalarRule::Choice(names) => {
                    sd.set_item("choices", names.to_vec())?;
                    "choice"
                }
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
