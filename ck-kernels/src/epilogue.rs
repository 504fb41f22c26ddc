//! GEMM epilogues, applied to the accumulators in registers before the one store of C:
//!
//! ```text
//! C[r, c] = act(alpha · (A·B)[r, c] + beta · D[r, c] + bias[c])
//! act ∈ {none, relu, gelu (tanh form), silu}; D and bias optional, of C's element type
//! gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))      silu(x) = x / (1 + e^−x)
//! ```
//!
//! No pass over C after the GEMM: D and bias are read where each thread holds its results.

use ck_core::device::*;

/// The activation applied last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum Activation {
    #[default]
    None = 0,
    Relu = 1,
    /// GELU, tanh approximation (PyTorch's `approximate="tanh"`).
    Gelu = 2,
    /// SiLU (swish): `x · sigmoid(x)`.
    Silu = 3,
}

impl Activation {
    /// The activation named `s` (`none`, `relu`, `gelu`, `silu`).
    pub fn parse(s: &str) -> Option<Activation> {
        Some(match s {
            "none" => Activation::None,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "silu" => Activation::Silu,
            _ => return None,
        })
    }

    /// The kernel argument's code.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// `act(x)` in f32 (on the GPU with `ex2.approx`, relative error ~2⁻²²).
    #[inline(always)]
    pub fn apply(code: u32, x: f32) -> f32 {
        const LOG2_E: f32 = core::f32::consts::LOG2_E;
        match code {
            1 => x.max(0.0),
            2 => {
                let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
                // tanh(u) = 1 − 2 / (e^{2u} + 1): ±1, not NaN, where e^{2u} overflows.
                let tanh = 1.0 - 2.0 / (math::exp2(2.0 * LOG2_E * u) + 1.0);
                0.5 * x * (1.0 + tanh)
            }
            3 => x / (1.0 + math::exp2(-LOG2_E * x)),
            _ => x,
        }
    }
}

/// Flag bits of the kernel argument `flags`: which optional inputs are given; the activation's
/// code sits above them.
pub const HAS_D: u32 = 1;
pub const HAS_BIAS: u32 = 2;
pub const ACTIVATION_SHIFT: u32 = 8;

/// An epilogue as kernel arguments: `d` is `m × n` and `bias` `n` (or empty when their flag is
/// not set).
#[derive(Clone, Copy)]
pub struct Epilogue<O: Element> {
    pub alpha: f32,
    pub beta: f32,
    pub d: Global<O>,
    pub bias: Global<O>,
    pub flags: u32,
}

impl<O: Real> Epilogue<O> {
    /// True when C is just A·B (no work per element but the conversion).
    #[inline(always)]
    pub fn is_identity(&self) -> bool {
        self.flags == 0 && self.alpha == 1.0
    }

    /// C's value at `[row, col]` (inside the `m × n` matrix) from the product's `v`.
    #[inline(always)]
    #[track_caller]
    pub fn apply(&self, v: f32, (row, col, n): (u32, u32, u32)) -> f32 {
        let mut x = self.alpha * v;
        if self.flags & HAS_D != 0 {
            x += self.beta * self.d.load(row * n + col).to_f32();
        }
        if self.flags & HAS_BIAS != 0 {
            x += self.bias.load(col).to_f32();
        }
        Activation::apply(self.flags >> ACTIVATION_SHIFT, x)
    }
}
