//! The vocabulary of a description: tensors ([`Param`]: role, element type, shape rule of
//! [`Dim`]s), scalars ([`Scalar`]), and an operator's [`Signature`] (its name, tensors and
//! scalars: what a call is checked and looked up against).

/// Whether a tensor is read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read; always given.
    Input,
    /// Read when given (a GEMM's residual and bias); the launch sees whether it was.
    OptionalInput,
    /// Written; always given.
    Output,
    /// Written when given (e.g. LayerNorm's statistics).
    OptionalOutput,
    /// Memory the kernels work in (any contents; nothing is read back). A caller that
    /// allocates its own gives it (Python, through torch's allocator, so that a CUDA graph
    /// captures the call); else the call allocates it. Its length is a symbol the operator
    /// derives ([`crate::op::Op::constraints`]).
    Scratch,
}

impl Role {
    /// Read by the kernels (given or optional).
    pub fn is_input(self) -> bool {
        matches!(self, Role::Input | Role::OptionalInput)
    }

    /// Whether a call may leave it out.
    pub fn is_optional(self) -> bool {
        matches!(self, Role::OptionalInput | Role::OptionalOutput)
    }
}

/// A tensor's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// The call's element type (one of [`crate::op::Op::dtypes`]); every such tensor has the same one.
    Op,
    /// Always f32 (statistics, log-sum-exp).
    F32,
    /// 32-bit unsigned words (a scratch's counters; an int32 tensor from Python).
    U32,
    /// 32-bit signed integers: indices (a packed batch's bounds) and the counters of kernels
    /// that take them signed.
    I32,
    /// 32-bit signed counts the launch reads on the host to plan the kernels (the grouped
    /// GEMM's tokens per expert): kept in host memory, never copied to a GPU, so a call need
    /// not wait for the device to read them (Python: a CPU tensor or a list of ints).
    HostI32,
    /// Always bf16: a tensor-core operand, read in place on a GPU. Where the call copies its
    /// values (the emulator, `.npy` files) f32 values are rounded to bf16 on the way in.
    Bf16,
    /// Always e4m3 (fp8): the fp8 tensor-core operands.
    E4m3,
}

impl Elem {
    /// The element type a tensor of this rule has in a call of element type `dtype` (never
    /// [`Elem::Op`]).
    pub fn of(self, dtype: super::Dtype) -> Elem {
        match (self, dtype) {
            (Elem::Op, super::Dtype::F32) => Elem::F32,
            (Elem::Op, super::Dtype::Bf16) => Elem::Bf16,
            (e, _) => e,
        }
    }

    /// `v` as a tensor of this rule holds it in a call of element type `dtype` (rounded to
    /// bf16 or e4m3, or as is).
    pub fn round(self, dtype: super::Dtype, v: f32) -> f32 {
        use ck_core::device::{Bf16, E4m3};
        match self.of(dtype) {
            Elem::Bf16 => Bf16::from_f32(v).to_f32(),
            Elem::E4m3 => E4m3::from_f32(v).to_f32(),
            Elem::U32 => v as u32 as f32,
            Elem::I32 | Elem::HostI32 => v as i32 as f32,
            _ => v,
        }
    }

    /// Its name in messages and in Python's descriptions: `op` (the call's), `f32`, ...
    pub fn name(self) -> &'static str {
        match self {
            Elem::Op => "op",
            Elem::F32 => "f32",
            Elem::U32 => "u32",
            Elem::I32 => "i32",
            Elem::HostI32 => "host_i32",
            Elem::Bf16 => "bf16",
            Elem::E4m3 => "e4m3",
        }
    }
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
    /// Its shape rule while the flag scalar it names is on, if that flag changes its layout
    /// (attention's `o` as `[B, Sq, H, D]` under `o_seq_first`, `[B, H, Sq, D]` otherwise).
    pub alt: Option<(&'static str, &'static [Dim])>,
    /// One line for the help.
    pub doc: &'static str,
}

/// A tensor `name` of `role` and element type `elem` with the shape rule `dims`: its `ck run`
/// option its name, no flag switching its layout (override either with `Param { .. }`).
pub const fn tensor(
    name: &'static str,
    (role, elem): (Role, Elem),
    dims: &'static [Dim],
    doc: &'static str,
) -> Param {
    Param {
        name,
        flag: name,
        role,
        elem,
        dims,
        alt: None,
        doc,
    }
}

/// What values a scalar takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarRule {
    /// Any finite number (a GEMM's alpha and beta).
    Finite,
    /// Finite and ≥ 0 (an epsilon).
    NonNegative,
    /// Finite and > 0 (a scale).
    Positive,
    /// A switch, off (0) or on (1): Python's `bool`, `ck run`'s `--NAME` without a value.
    Flag,
    /// A whole number ≥ 1 that sets the shape symbol it names, for an extent no tensor's shape
    /// shows (`attention_qkv`'s `heads` is `H`: its `qkv` stacks `H + 2·Hkv` heads).
    Count(&'static str),
    /// One of the names, carried as its index (a GEMM's activation: `none`, `relu`, ...);
    /// Python and `ck run` give the name.
    Choice(&'static [&'static str]),
}

/// A scalar argument, carried as an f32 (a flag as 0 or 1). One that is not given and has no
/// default is NaN in a call's scalars: the operator derives it ([`Scalar::default`]); a count
/// must be given.
#[derive(Clone, Copy, Debug)]
pub struct Scalar {
    /// Its name (Python's keyword, `ck run --NAME`).
    pub name: &'static str,
    /// Its value when not given; `None`: the operator derives one from the problem (its doc
    /// says how, e.g. attention's scale `1/√D`).
    pub default: Option<f32>,
    /// Its rule.
    pub rule: ScalarRule,
    /// One line for the help.
    pub doc: &'static str,
}

impl Scalar {
    /// Its value in a call that does not give it: the default, or NaN where the operator
    /// derives one.
    pub fn initial(&self) -> f32 {
        self.default.unwrap_or(f32::NAN)
    }
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
