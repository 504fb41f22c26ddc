//! An operator's element type, as a value ([`Dtype`]) and as a type ([`OpElement`]).

/// An operator's element type (arithmetic is f32 either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// f32.
    F32,
    /// bf16 (f32 arithmetic).
    Bf16,
}

impl Dtype {
    /// Parses `f32` / `bf16`.
    pub fn parse(s: &str) -> Option<Dtype> {
        match s {
            "f32" => Some(Dtype::F32),
            "bf16" => Some(Dtype::Bf16),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 => 2,
        }
    }

    /// `v` as a kernel of this type sees it (rounded to bf16, or as is).
    pub fn round(self, v: f32) -> f32 {
        match self {
            Dtype::F32 => v,
            Dtype::Bf16 => ck_core::device::Bf16::from_f32(v).to_f32(),
        }
    }

    /// `f32` / `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::Bf16 => "bf16",
        }
    }
}

/// A Rust element type an operator's tensors can have: f32 or bf16.
pub trait OpElement: ck_core::device::Real {
    /// Its [`Dtype`].
    const DTYPE: Dtype;
}

impl OpElement for f32 {
    const DTYPE: Dtype = Dtype::F32;
}

impl OpElement for ck_core::device::Bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
}
