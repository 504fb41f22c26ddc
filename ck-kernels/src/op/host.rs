//! An operator on host data ([`HostCall`]: the `.npy` files of `ck run`, the seeded samples of
//! the checks and benchmarks, the tests) and its check against the fp64 reference ([`check`]).

use super::bind::bind;
use super::buffers::{Buffer, Launch};
use super::{Dtype, HostOutput, Op, Outcome, Rng, Role, ScalarRule, Sizes};
use ck_core::host::{Device, LaunchError, LaunchStats};
use ck_core::rules;

/// One call of an operator on f32 host values (rounded to the call's element type on the way
/// in, widened back to f32 on the way out).
pub struct HostCall<'a> {
    op: &'static Op,
    dtype: Option<Dtype>,
    inputs: Vec<(&'a str, &'a [f32], Vec<usize>)>,
    scalars: Vec<(&'a str, f32)>,
    outputs: Vec<&'a str>,
}

/// `value` for `op`'s scalar `name`, checked against its rule.
pub fn check_scalar(op: &Op, name: &str, value: f32) -> Result<(), LaunchError> {
    let Some(s) = op.scalars.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = op.scalars.iter().map(|s| s.name).collect();
        return Err(LaunchError::invalid(
            rules::UNKNOWN_ARGUMENT,
            format!(
                "{} has no scalar `{name}`; its scalars are [{}]",
                op.name,
                known.join(", ")
            ),
        ));
    };
    let fine = match s.rule {
        ScalarRule::Finite => value.is_finite(),
        ScalarRule::Choice(names) => {
            value.fract() == 0.0 && value >= 0.0 && (value as usize) < names.len()
        }
        ScalarRule::NonNegative => value.is_finite() && value >= 0.0,
        ScalarRule::Positive => value.is_finite() && value > 0.0,
        ScalarRule::Flag => value == 0.0 || value == 1.0,
        ScalarRule::Count(_) => value >= 1.0 && value.fract() == 0.0 && value <= 16_777_216.0,
    };
    let count = matches!(s.rule, ScalarRule::Count(_));
    if fine || (value.is_nan() && s.default.is_none() && !count) {
        return Ok(()); // NaN: not given, the operator derives it
    }
    if value.is_nan() && count {
        return Err(LaunchError::invalid(
            rules::UNKNOWN_ARGUMENT,
            format!("{} needs the scalar `{name}` ({})", op.name, s.doc),
        ));
    }
    let (rule, want) = match s.rule {
        ScalarRule::Finite => (rules::BAD_SCALE, "a finite number".to_string()),
        ScalarRule::Choice(names) => (
            rules::UNKNOWN_ARGUMENT,
            format!("one of {}", names.join(", ")),
        ),
        ScalarRule::NonNegative => (rules::BAD_EPS, "a finite, non-negative number".into()),
        ScalarRule::Positive => (rules::BAD_SCALE, "a positive finite number".into()),
        ScalarRule::Flag => (rules::UNKNOWN_ARGUMENT, "0 or 1 (off or on)".into()),
        ScalarRule::Count(_) => (
            rules::SHAPE_MISMATCH,
            "a whole number from 1 to 2^24".into(),
        ),
    };
    Err(LaunchError::invalid(
        rule,
        format!("{name} is {value}; give {want}"),
    ))
}

/// The index of `choice` among the names `op`'s choice scalar `name` takes (a GEMM's
/// activation: `relu` is 1): the value the scalar carries. An `unknown-argument` error naming
/// the choices where `choice` is not one, or `op` has no such scalar.
pub fn choice_index(op: &Op, name: &str, choice: &str) -> Result<usize, LaunchError> {
    let Some(names) = op.scalars.iter().find_map(|s| match s.rule {
        ScalarRule::Choice(names) if s.name == name => Some(names),
        _ => None,
    }) else {
        let choices: Vec<&str> = op
            .scalars
            .iter()
            .filter(|s| matches!(s.rule, ScalarRule::Choice(_)))
            .map(|s| s.name)
            .collect();
        return Err(LaunchError::invalid(
            rules::UNKNOWN_ARGUMENT,
            format!(
                "{} has no choice `{name}`; its choices are [{}]",
                op.name,
                choices.join(", ")
            ),
        ));
    };
    names.iter().position(|&n| n == choice).ok_or_else(|| {
        LaunchError::invalid(
            rules::UNKNOWN_ARGUMENT,
            format!("{name} '{choice}'; use one of {}", names.join(", ")),
        )
    })
}

/// `dtype`, if `op` takes it.
pub fn check_dtype(op: &Op, dtype: Dtype) -> Result<(), LaunchError> {
    if op.dtypes.contains(&dtype) {
        return Ok(());
    }
    let names: Vec<&str> = op.dtypes.iter().map(|d| d.name()).collect();
    Err(LaunchError::invalid(
        rules::DTYPE,
        format!(
            "{} does not take {}; use {}",
            op.name,
            dtype.name(),
            names.join(" or ")
        ),
    ))
}

impl<'a> HostCall<'a> {
    /// A call of `op` with its first element type and default scalars.
    pub fn new(op: &'static Op) -> HostCall<'a> {
        HostCall {
            op,
            dtype: None,
            inputs: Vec::new(),
            scalars: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// The element type of the call.
    pub fn dtype(mut self, dtype: Dtype) -> Self {
        self.dtype = Some(dtype);
        self
    }

    /// The input `name`: `values` of `shape`, row-major.
    pub fn input(mut self, name: &'a str, values: &'a [f32], shape: &[usize]) -> Self {
        self.inputs.push((name, values, shape.to_vec()));
        self
    }

    /// Scalar `name` (else its default).
    pub fn scalar(mut self, name: &'a str, value: f32) -> Self {
        self.scalars.push((name, value));
        self
    }

    /// Also computes the optional output `name`.
    pub fn output(mut self, name: &'a str) -> Self {
        self.outputs.push(name);
        self
    }

    /// Every optional output too.
    pub fn all_outputs(mut self) -> Self {
        let op = self.op;
        let optional = op.params.iter().filter(|p| p.role == Role::OptionalOutput);
        self.outputs.extend(optional.map(|p| p.name));
        self
    }

    /// Runs the call on `device`.
    pub fn run(self, device: &Device) -> Result<HostOutput, LaunchError> {
        let op = self.op;
        let dtype = self.dtype.unwrap_or(op.dtypes[0]);
        check_dtype(op, dtype)?;
        for (name, values, shape) in &self.inputs {
            let len: usize = shape.iter().product();
            if values.len() != len {
                return Err(LaunchError::invalid(
                    rules::SHAPE_MISMATCH,
                    format!("`{name}` has {} values for shape {shape:?}", values.len()),
                ));
            }
        }
        let mut scalars: Vec<f32> = op.scalars.iter().map(|s| s.initial()).collect();
        for &(name, value) in &self.scalars {
            check_scalar(op, name, value)?;
            let i = op.scalars.iter().position(|s| s.name == name);
            scalars[i.expect("checked")] = value;
        }
        // A count left out has no default: it must be given.
        let counts = op.scalars.iter().zip(&scalars);
        for (s, &v) in counts.filter(|(s, _)| matches!(s.rule, ScalarRule::Count(_))) {
            check_scalar(op, s.name, v)?;
        }
        let shapes: Vec<(&str, &[usize])> = self
            .inputs
            .iter()
            .map(|(n, _, s)| (*n, s.as_slice()))
            .collect();
        let sizes = bind(op, &shapes, &scalars, false)?;
        if let Some(name) = self
            .outputs
            .iter()
            .find(|n| op.param(n).is_none_or(|p| p.role != Role::OptionalOutput))
        {
            return Err(LaunchError::invalid(
                rules::UNKNOWN_ARGUMENT,
                format!("{} has no optional output `{name}`", op.name),
            ));
        }
        let mut values = Vec::with_capacity(op.params.len());
        let mut buffers = Vec::with_capacity(op.params.len());
        for p in op.params {
            let elem = (p.elem, dtype);
            let given = self.inputs.iter().find(|(n, _, _)| *n == p.name);
            let (value, buffer) = match (p.role, given) {
                (Role::Input | Role::OptionalInput, Some((_, v, _))) => {
                    let seen: Vec<f32> = v.iter().map(|&a| p.elem.round(dtype, a)).collect();
                    let b = Buffer::from_f32(device, elem, &seen)?;
                    (Some(seen), Some(b))
                }
                (Role::OptionalInput, None) => (None, None),
                (Role::Input, None) => {
                    // `bind` refused the call already; kept an error rather than a panic.
                    return Err(LaunchError::invalid(
                        rules::UNKNOWN_ARGUMENT,
                        format!("{} needs the tensor `{}`", op.name, p.name),
                    ));
                }
                (Role::OptionalOutput, _) if !self.outputs.contains(&p.name) => (None, None),
                (Role::Scratch, _) => (None, None), // the launch allocates it
                (Role::Output | Role::OptionalOutput, _) => {
                    let len: usize = sizes.shape_of(p).iter().product();
                    (
                        None,
                        Some(Buffer::from_f32(device, elem, &vec![f32::NAN; len])?),
                    )
                }
            };
            values.push(value);
            buffers.push(buffer);
        }
        let mut launch = Launch::new(
            op.signature(),
            dtype,
            sizes.clone(),
            scalars.clone(),
            buffers,
        );
        let stats = if sizes.is_empty(op.params) {
            LaunchStats::default()
        } else {
            (op.launch)(device, &mut launch)?
        };
        for ((p, value), buffer) in op.params.iter().zip(&mut values).zip(launch.into_buffers()) {
            if !p.role.is_input() {
                *value = buffer.map(|b| b.to_f32()).transpose()?;
            }
        }
        Ok(HostOutput {
            op: op.signature(),
            dtype,
            sizes,
            scalars,
            values,
            stats,
        })
    }
}

/// `op` of element type `dtype` on seeded samples of `sizes` (every optional output computed,
/// the scalars `sizes` implies, [`Op::scalars_for`]), judged by its error against fp64 and its
/// tolerance.
pub fn check(
    device: &Device,
    op: &'static Op,
    dtype: Dtype,
    sizes: &Sizes,
    seed: u64,
) -> Result<Outcome, LaunchError> {
    let inputs = (op.sample)(sizes, &mut Rng(seed.max(1)));
    let shapes: Vec<Vec<usize>> = op.inputs().map(|p| sizes.shape_of(p)).collect();
    let mut call = HostCall::new(op).dtype(dtype).all_outputs();
    for (s, v) in op.scalars.iter().zip(op.scalars_for(sizes)) {
        if !v.is_nan() {
            call = call.scalar(s.name, v);
        }
    }
    for ((p, v), shape) in op.inputs().zip(&inputs).zip(&shapes) {
        if p.role == Role::Input || sizes.flag(p.name) {
            call = call.input(p.name, v, shape);
        }
    }
    let out = call.run(device)?;
    let err = (op.error)(&out);
    Ok(Outcome::within(
        &out.outputs_concatenated(),
        out.stats,
        err,
        (op.tolerance)(dtype),
    ))
}
