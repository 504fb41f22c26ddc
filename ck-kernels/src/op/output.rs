//! [`HostOutput`]: what an operator computed on host values, with the values it computed it
//! from (what its check against the fp64 reference reads).

use super::{Dtype, Signature, Sizes};
use ck_core::host::LaunchStats;

/// What a [`crate::op::HostCall`] computed, with what it computed it from.
pub struct HostOutput {
    /// The operator's signature.
    pub op: Signature,
    /// The element type it ran with.
    pub dtype: Dtype,
    /// The bound sizes.
    pub sizes: Sizes,
    /// The scalars, in the signature's order.
    pub scalars: Vec<f32>,
    /// Per tensor in the signature's order: an input as the kernel saw it (rounded to the
    /// element type), an output as it wrote it (widened to f32); `None` for an output not
    /// asked for.
    pub values: Vec<Option<Vec<f32>>>,
    /// The launch's statistics (default when the problem is empty).
    pub stats: LaunchStats,
}

impl HostOutput {
    fn get(&self, name: &str) -> Option<&[f32]> {
        let i = self.op.param_index(name)?;
        self.values[i].as_deref()
    }

    /// The input `name` as the kernel saw it.
    ///
    /// # Panics
    /// If `name` is not one of the operator's inputs.
    pub fn input(&self, name: &str) -> &[f32] {
        self.get(name)
            .unwrap_or_else(|| panic!("{} has no input `{name}`", self.op.name))
    }

    /// The optional input `name` as the kernel saw it, if the call gave it.
    pub fn optional_input(&self, name: &str) -> Option<&[f32]> {
        self.get(name)
    }

    /// The output `name`, if it was computed.
    pub fn output(&self, name: &str) -> Option<&[f32]> {
        self.get(name)
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

    /// Every computed output, concatenated in order.
    pub fn outputs_concatenated(&self) -> Vec<f32> {
        let outputs = self.op.params.iter().zip(&self.values);
        outputs
            .filter(|(p, _)| !p.role.is_input())
            .filter_map(|(_, v)| v.as_deref())
            .flatten()
            .copied()
            .collect()
    }
}
