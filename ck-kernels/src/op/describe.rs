//! [`Op`]: one operator's description.

use super::{Dtype, HostOutput, Launch, Param, Rng, Role, Scalar, ScalarRule, Signature, Sizes};

/// What a launch returns.
pub type Launched = Result<ck_core::host::LaunchStats, ck_core::host::LaunchError>;

/// An operator: everything the CLI, Python, the cross-check, the benchmarks and the tests need
/// to call it, check it and time it.
#[derive(Clone, Copy)]
pub struct Op {
    /// Its name: Python's function (`add_rmsnorm`), `ck run`'s subcommand with `-` for `_`.
    pub name: &'static str,
    /// What it computes, one line.
    pub summary: &'static str,
    /// Its tensors: inputs first, then outputs, in the order of [`Op::launch`]'s buffers.
    pub params: &'static [Param],
    /// Its scalars.
    pub scalars: &'static [Scalar],
    /// The element types [`crate::op::Elem::Op`] tensors may have.
    pub dtypes: &'static [Dtype],
    /// The relations between symbols that the shape rules do not state, checked once the
    /// tensors are bound, and the symbols no tensor shows that it derives (a scratch's length,
    /// [`Sizes::derive`]); [`no_constraints`] where there are none.
    pub constraints: fn(&mut Sizes) -> Result<(), ck_core::host::LaunchError>,
    /// Launches the kernel the problem calls for on device buffers (already checked against
    /// the shape rules; no output is empty, an input may be: attention over no keys).
    pub launch: fn(&ck_core::host::Device, &mut Launch) -> Launched,
    /// Seeded inputs for `sizes` (in the order of the inputs among [`Op::params`], optional
    /// ones included), the values a check and a benchmark run on.
    pub sample: fn(&Sizes, &mut Rng) -> Vec<Vec<f32>>,
    /// The error of a run's outputs against the fp64 CPU reference (the operator's own
    /// measure), given the inputs as the kernel saw them (rounded to its element type).
    pub error: fn(&HostOutput) -> f64,
    /// The largest [`Op::error`] a correct kernel of this element type has.
    pub tolerance: fn(Dtype) -> f64,
    /// The measure the tolerance is stated in ([`crate::op::max_relative_error`] or
    /// [`crate::op::norm_relative_error`]): how `ck cross-check` compares two devices' outputs
    /// (concatenated) of one problem.
    pub agreement: fn(&[f32], &[f64]) -> f64,
    /// The problem `ck run NAME-DTYPE --n N` checks, and the shapes `ck cross-check` compares
    /// on two devices (an optional input is given where the problem has the flag of its name).
    pub cases: fn(Option<u32>) -> Vec<Sizes>,
    /// Bytes a launch must move at least (the bandwidth floor of `ck bench`).
    pub bytes: fn(&Sizes, Dtype) -> f64,
}

/// An operator whose shape rules say everything.
pub fn no_constraints(_: &mut Sizes) -> Result<(), ck_core::host::LaunchError> {
    Ok(())
}

impl Op {
    /// Its name, tensors and scalars.
    pub fn signature(&self) -> Signature {
        Signature {
            name: self.name,
            params: self.params,
            scalars: self.scalars,
        }
    }

    /// The scalars, in order, that the problem `sizes` implies: its flags on, each count the
    /// symbol it names, a choice the index its symbol sets, the others their defaults (NaN
    /// where the operator derives one).
    pub fn scalars_for(&self, sizes: &Sizes) -> Vec<f32> {
        let value = |s: &Scalar| match s.rule {
            ScalarRule::Flag => sizes.flag(s.name) as u8 as f32,
            ScalarRule::Count(symbol) => sizes.get(symbol) as f32,
            ScalarRule::Choice(_) => sizes.sym(s.name).map_or(s.initial(), |i| i as f32),
            _ => s.initial(),
        };
        self.scalars.iter().map(value).collect()
    }

    /// The `ck run` subcommand: the name with `-` for `_`.
    pub fn command(&self) -> String {
        self.name.replace('_', "-")
    }

    /// Its parameter `name`.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Its inputs (optional ones included), in order.
    pub fn inputs(&self) -> impl Iterator<Item = &'static Param> {
        self.params.iter().filter(|p| p.role.is_input())
    }

    /// Its outputs (optional ones included), in order.
    pub fn outputs(&self) -> impl Iterator<Item = &'static Param> {
        let output = |p: &&Param| matches!(p.role, Role::Output | Role::OptionalOutput);
        self.params.iter().filter(output)
    }
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op").field("name", &self.name).finish()
    }
}
