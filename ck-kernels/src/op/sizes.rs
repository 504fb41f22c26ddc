//! [`Sizes`]: the values of an operator's shape symbols ([`super::bind`] binds them from its
//! tensors' shapes) and the flags of the problem. For RMSNorm (`x: [Rows, N]`) and `x` of shape
//! `[2, 3, 8]`, the rows' leading dimensions are `[2, 3]` (so `M = 6`) and `N = 8`.

use super::{Dim, Param, Role};

/// One problem: the leading dimensions of [`Dim::Rows`], every named symbol, and the flag
/// scalars that are on (a flag may change a tensor's layout, [`Param::alt`], or the problem:
/// attention's `causal`). A seeded problem ([`crate::op::Op::cases`]) also names its optional
/// inputs as flags, and may set a choice scalar's index as a symbol of its name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    lead: Vec<usize>,
    syms: Vec<(&'static str, usize)>,
    flags: Vec<&'static str>,
    /// Which tensor set each symbol (for the error messages).
    from: Vec<(&'static str, &'static str)>,
}

impl Sizes {
    /// Sizes with `rows` leading dimensions (a row-wise operator's `[M]`).
    pub fn rows(lead: &[usize]) -> Sizes {
        Sizes {
            lead: lead.to_vec(),
            ..Sizes::default()
        }
    }

    /// These sizes and `name = value`.
    pub fn with(mut self, name: &'static str, value: usize) -> Sizes {
        self.syms.push((name, value));
        self
    }

    /// These sizes with the flag `name` on.
    pub fn with_flag(mut self, name: &'static str) -> Sizes {
        self.flags.push(name);
        self
    }

    /// Sets the symbol `name`, which no tensor shows, to `value` (an operator's
    /// [`crate::op::Op::constraints`]: a scratch's length).
    pub fn derive(&mut self, name: &'static str, value: usize) {
        self.set(name, value, "the operator");
    }

    /// Whether the flag `name` is on.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.contains(&name)
    }

    /// Symbol `name`; `M`, unless a rule names it, is the product of the leading dimensions
    /// of [`Dim::Rows`].
    ///
    /// # Panics
    /// If the operator's rules do not name it (a bug in the operator's description).
    pub fn get(&self, name: &str) -> usize {
        match self.syms.iter().find(|(n, _)| *n == name) {
            Some(&(_, v)) => v,
            None if name == "M" => self.lead.iter().product(),
            None => panic!("no symbol `{name}` in {self:?}"),
        }
    }

    /// Symbol `name` as the u32 kernels index with ([`crate::op::bind::bind`] checked that it fits).
    pub fn u32(&self, name: &str) -> u32 {
        self.get(name) as u32
    }

    /// The shape rule `p` has in this problem: [`Param::alt`]'s while its flag is on.
    pub fn rule_of(&self, p: &Param) -> &'static [Dim] {
        match p.alt {
            Some((flag, dims)) if self.flag(flag) => dims,
            _ => p.dims,
        }
    }

    /// The shape `p` has for these sizes.
    pub fn shape_of(&self, p: &Param) -> Vec<usize> {
        let dims = self.rule_of(p);
        let mut shape = Vec::with_capacity(dims.len() + self.lead.len());
        for d in dims {
            match d {
                Dim::Rows => shape.extend_from_slice(&self.lead),
                Dim::Sym(s) => shape.push(self.get(s)),
                Dim::Twice(s) => shape.push(2 * self.get(s)),
            }
        }
        shape
    }

    /// Whether no output of `params` has an element (then there is nothing to launch). An
    /// empty input alone is a problem to compute: attention over no keys writes zeros, a
    /// backward over no rows writes zero parameter gradients.
    pub fn is_empty(&self, params: &[Param]) -> bool {
        params
            .iter()
            .filter(|p| matches!(p.role, Role::Output | Role::OptionalOutput))
            .all(|p| self.shape_of(p).iter().product::<usize>() == 0)
    }

    /// The shape of `first` (an operator's first tensor) as `257x4096`, for case names.
    pub fn describe(&self, first: &Param) -> String {
        let shape = self.shape_of(first);
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        dims.join("x")
    }

    /// The leading dimensions of [`Dim::Rows`].
    pub(super) fn leading(&self) -> &[usize] {
        &self.lead
    }

    /// Sets the leading dimensions of [`Dim::Rows`].
    pub(super) fn set_rows(&mut self, lead: &[usize]) {
        self.lead = lead.to_vec();
    }

    /// Binds `name` to `value`, set from the tensor (or count scalar) `from`.
    pub(super) fn set(&mut self, name: &'static str, value: usize, from: &'static str) {
        self.syms.push((name, value));
        self.from.push((name, from));
    }

    /// Which tensor set `name`.
    pub(super) fn set_from(&self, name: &str) -> Option<&'static str> {
        self.from.iter().find(|(n, _)| *n == name).map(|f| f.1)
    }

    /// Every symbol, in binding order.
    pub(super) fn symbols(&self) -> &[(&'static str, usize)] {
        &self.syms
    }

    /// Symbol `name`, if bound.
    pub fn sym(&self, name: &str) -> Option<usize> {
        self.syms.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }
}
