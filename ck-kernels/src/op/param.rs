//! The vocabulary of a description: tensors ([`Param`]: role, element type, shape rule of
//! [`Dim`]s), scalars ([`Scalar`]), and an operator's [`Signature`] (its name, tensors and
//! scalars: what a call is checked and looked up against).

/// Whether a tensor is read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read; always given.
    Input,
    /// Written; always given.
    Output,
    /// Written when given (e.g. LayerNorm's statistics).
    OptionalOutput,
}

/// A tensor's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// The call's element type (one of [`crate::op::Op::dtypes`]); every such tensor has the same one.
    Op,
    /// Always f32 (statistics, log-sum-exp).
    F32,
}

/// One dimension of a shape rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// Any number of leading dimensions (none included), flattened into the rows `M`: a
    /// row-wise operator's `[..., N]`. Only first in a rule.
    Rows,
    /// A named extent; every tensor that names it agrees.
    Sym(&'static str),
    /// Twice a named extent: a gated unit's `[gate, up]` columns stacked, `[..., 2·F]` beside
    /// the `[..., F]` of its product.
    Twice(&'static str),
}

impl Dim {
    /// The rule's text for this dimension: `...`, `N`, `2*F` (what error messages and the
    /// Python package read).
    pub fn text(&self) -> String {
        match self {
            Dim::Rows => "...".into(),
            Dim::Sym(s) => (*s).into(),
            Dim::Twice(s) => format!("2*{s}"),
        }
    }

    /// The named extent and its multiple (`Twice("F")` is `("F", 2)`), or `None` for the rows.
    pub fn symbol(&self) -> Option<(&'static str, usize)> {
        match self {
            Dim::Rows => None,
            Dim::Sym(s) => Some((s, 1)),
            Dim::Twice(s) => Some((s, 2)),
        }
    }
}

/// One tensor of an operator.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// Its name (Python's keyword, the error messages').
    pub name: &'static str,
    /// Its `ck run` option (`--input` for `x`).
    pub flag: &'static str,
    /// Read or written.
    pub role: Role,
    /// Its element type.
    pub elem: Elem,
    /// Its shape rule.
    pub dims: &'static [Dim],
    /// One line for the help.
    pub doc: &'static str,
}

/// What values a scalar takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarRule {
    /// Finite and ≥ 0 (an epsilon).
    NonNegative,
}

/// A scalar argument (f32).
#[derive(Clone, Copy, Debug)]
pub struct Scalar {
    /// Its name (Python's keyword, `ck run --NAME`).
    pub name: &'static str,
    /// Its value when not given.
    pub default: f32,
    /// Its rule.
    pub rule: ScalarRule,
    /// One line for the help.
    pub doc: &'static str,
}

/// An operator's name, tensors and scalars.
#[derive(Clone, Copy, Debug)]
pub struct Signature {
    /// The operator's name.
    pub name: &'static str,
    /// Its tensors, inputs first.
    pub params: &'static [Param],
    /// Its scalars.
    pub scalars: &'static [Scalar],
}

impl Signature {
    /// The position of tensor `name`.
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// The position of scalar `name`.
    ///
    /// # Panics
    /// If there is none (a bug in the operator's launch or check).
    pub fn scalar_index(&self, name: &str) -> usize {
        match self.scalars.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => panic!("{} has no scalar `{name}`", self.name),
        }
    }
}
