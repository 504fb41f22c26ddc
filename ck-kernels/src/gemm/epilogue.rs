//! GEMM epilogues, applied to the accumulators in registers before the one store of C:
//!
//! ```text
//! C[r, c] = act(alpha · (A·B)[r, c] + beta · D[r, c] + bias[c])
//! act ∈ {none, relu, gelu (tanh form), silu}; D and bias optional, of C's element type
//! gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))      silu(x) = x / (1 + e^−x)
//! gated (GATED): C[r, c] = act(alpha · (A·B_gate)[r, c]) · (alpha · (A·B_up)[r, c])
//! rotary (ROTARY): C = alpha · A·B, its query and key heads rotated (RoPE, crate::rope::Projection)
//! ```
//!
//! No pass over C after the GEMM: the kernel stages its C tile through shared memory so that
//! each thread holds runs of 4 consecutive columns, and a warp reads D and bias and writes C
//! in contiguous, whole-sector accesses.

use crate::rope::Projection;
use ck_core::device::*;
use ck_core::tile::{make_tile_window, DistributedTensor, View2};
use ck_core::TileDistribution;

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
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// `act(x)` in f32 (on the GPU with `ex2.approx` and `rcp.approx`, relative error ~2⁻²¹).
    #[inline(always)]
    pub fn apply(code: u32, x: f32) -> f32 {
        match code {
            1 => relu(x),
            2 => gelu(x),
            3 => silu(x),
            _ => x,
        }
    }

    /// `act'(x)`, the slope a backward pass multiplies by:
    ///
    /// ```text
    /// relu'(x) = [x > 0]        silu'(x) = σ(x) · (1 + x · (1 − σ(x)))
    /// gelu'(x) = (1 + t)/2 + x/2 · (1 − t²) · √(2/π) · (1 + 3 · 0.044715 x²),  t = tanh(√(2/π) · (x + 0.044715 x³))
    /// ```
    ///
    /// E.g. `silu'(0) = 1/2`, `gelu'(0) = 1/2`, and both tend to 1 for large `x` and to 0 for
    /// very negative `x`.
    #[inline(always)]
    pub fn slope(code: u32, x: f32) -> f32 {
        match code {
            1 => (x > 0.0) as u32 as f32,
            2 => {
                let c = 0.797_884_6;
                let t = tanh(c * (x + 0.044_715 * x * x * x));
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044_715 * x * x)
            }
            3 => {
                let sigmoid = math::rcp(1.0 + math::exp2(-core::f32::consts::LOG2_E * x));
                sigmoid * (1.0 + x * (1.0 - sigmoid))
            }
            _ => 1.0,
        }
    }
}

/// tanh(u) = 1 − 2 / (e^{2u} + 1): ±1, not NaN, where e^{2u} overflows. The approximate
/// reciprocal: an IEEE division per element costs more than the MMAs of a K = 1024 GEMM.
#[inline(always)]
fn tanh(u: f32) -> f32 {
    1.0 - 2.0 * math::rcp(math::exp2(2.0 * core::f32::consts::LOG2_E * u) + 1.0)
}

#[inline(always)]
fn relu(x: f32) -> f32 {
    x.max(0.0)
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + tanh(0.797_884_6 * (x + 0.044_715 * x * x * x)))
}

#[inline(always)]
fn silu(x: f32) -> f32 {
    x * math::rcp(1.0 + math::exp2(-core::f32::consts::LOG2_E * x))
}

/// [`gelu`] with the approximate tanh (one SFU instruction instead of two): for bf16 C.
#[inline(always)]
fn gelu_tanh_approx(x: f32) -> f32 {
    let u = 0.797_884_6 * x * (1.0 + 0.044_715 * x * x);
    0.5 * x * (1.0 + math::tanh_approx(u))
}

/// [`silu`] as `x · (1 + tanh(x / 2)) / 2` with the approximate tanh: for bf16 C.
#[inline(always)]
fn silu_tanh_approx(x: f32) -> f32 {
    let h = 0.5 * x;
    h + h * math::tanh_approx(h)
}

/// Flag bits of the kernel argument `flags`: which optional inputs are given; the activation's
/// code sits above them.
pub const HAS_D: u32 = 1;
pub const HAS_BIAS: u32 = 2;
/// A gated linear unit (SwiGLU, GeGLU): the product's columns come in pairs, the gate's and the
/// up projection's, and C = act(alpha · gate) · (alpha · up) ([`Epilogue::gate`]); no D, no
/// bias.
pub const GATED: u32 = 4;
/// A QKV projection with RoPE: C = alpha · A·B, each row's query and key heads rotated at its
/// token's angles ([`Epilogue::rope`], [`crate::rope::Projection`]); no D, no bias, no
/// activation.
pub const ROTARY: u32 = 8;
pub const ACTIVATION_SHIFT: u32 = 8;
/// In place of a kernel's compile-time flags: read them from its `flags` argument.
pub const RUNTIME_FLAGS: u32 = u32::MAX;

/// An epilogue as kernel arguments: `d` is `m × n` and `bias` `n` (or empty when their flag is
/// not set); `rope` is read only under [`ROTARY`].
#[derive(Clone, Copy)]
pub struct Epilogue<O: Element> {
    pub alpha: f32,
    pub beta: f32,
    pub d: Global<O>,
    pub bias: Global<O>,
    pub flags: u32,
    pub rope: Projection,
}

impl<O: Element> Epilogue<O> {
    /// The epilogue of the arguments every kernel but the rotary ones takes.
    #[inline(always)]
    pub fn of(alpha: f32, beta: f32, (d, bias): (Global<O>, Global<O>), flags: u32) -> Self {
        Epilogue {
            alpha,
            beta,
            d,
            bias,
            flags,
            rope: Projection::none(),
        }
    }
}

impl<O: CElement> Epilogue<O> {
    /// True when C is just A·B (no work per element but the conversion).
    #[inline(always)]
    pub fn is_identity(&self) -> bool {
        self.flags == 0 && self.alpha == 1.0
    }

    /// `x ← act(alpha · x + beta · D + bias)` on a tile of accumulators; `d()` and `bias()`
    /// give D's and bias's values at `x`'s places and are called only when their flags are
    /// set. Rounds as `((alpha · x) + beta · D) + bias`, the order of the host reference.
    /// GELU and SiLU on the GPU: with `ex2` and `rcp` (about 2⁻²¹ relative) for f32 C, with
    /// `tanh.approx` (about 2⁻¹¹, one instruction) for bf16 C, whose rounding is 2⁻⁹.
    ///
    /// Every choice is made once per tile, never per element: a branch between two elements
    /// keeps ptxas from interleaving their exp/rcp chains, and each element then waits out its
    /// whole latency (chosen per element, bias + GELU cost the 8192³ GEMM 9 %).
    #[inline(always)]
    pub fn apply<D: TileDistribution>(
        &self,
        x: &mut DistributedTensor<D, f32>,
        d: impl FnOnce() -> DistributedTensor<D, f32>,
        bias: impl FnOnce() -> DistributedTensor<D, f32>,
    ) {
        self.apply_flags(self.flags, x, d, bias);
    }

    /// [`Epilogue::apply`] with the flags `flags` in place of the kernel argument's: a kernel
    /// compiled for one epilogue passes a constant, and only that epilogue's code is emitted.
    #[inline(always)]
    pub fn apply_flags<D: TileDistribution>(
        &self,
        flags: u32,
        x: &mut DistributedTensor<D, f32>,
        d: impl FnOnce() -> DistributedTensor<D, f32>,
        bias: impl FnOnce() -> DistributedTensor<D, f32>,
    ) {
        self.scale(x);
        if flags & HAS_D != 0 {
            let beta = self.beta;
            *x = x.zip_map(&d(), |v, d| v + beta * d);
        }
        if flags & HAS_BIAS != 0 {
            *x = x.zip_map(&bias(), |v, b| v + b);
        }
        Self::activate(flags, x);
    }

    /// `gate ← act(alpha · gate) · (alpha · up)`, the activation of `flags`: the [`GATED`]
    /// epilogue, on a gate's and an up projection's accumulators of the same columns.
    #[inline(always)]
    pub fn gate<D: TileDistribution>(
        &self,
        flags: u32,
        gate: &mut DistributedTensor<D, f32>,
        up: &DistributedTensor<D, f32>,
    ) {
        self.scale(gate);
        Self::activate(flags, gate);
        let alpha = self.alpha;
        *gate = gate.zip_map(up, |g, u| g * (alpha * u));
    }

    /// `x ← act(x)`, the activation of `flags` (tanh-approximate for bf16 C).
    #[inline(always)]
    fn activate<D: TileDistribution>(flags: u32, x: &mut DistributedTensor<D, f32>) {
        match (flags >> ACTIVATION_SHIFT, O::APPROXIMATE_TANH) {
            (1, _) => x.update(|v| *v = relu(*v)),
            (2, false) => x.update(|v| *v = gelu(*v)),
            (2, true) => x.update(|v| *v = gelu_tanh_approx(*v)),
            (3, false) => x.update(|v| *v = silu(*v)),
            (3, true) => x.update(|v| *v = silu_tanh_approx(*v)),
            _ => {}
        }
    }
}

impl<O: Element> Epilogue<O> {
    /// `x ← alpha · x`: the whole epilogue of a kernel compiled for `C = alpha · A·B` (the
    /// plain GEMM, and fp8's per-tensor scales), and [`Epilogue::apply`]'s first step.
    #[inline(always)]
    pub fn scale<D: TileDistribution>(&self, x: &mut DistributedTensor<D, f32>) {
        let alpha = self.alpha;
        if alpha != 1.0 {
            x.update(|v| *v *= alpha);
        }
    }
}

/// C's element types (accessed in vectors of `V` elements).
pub trait CElement: Real {
    /// Whether GELU and SiLU may use the approximate tanh (`math::tanh_approx`, about 2⁻¹¹
    /// relative): yes where C's own rounding is coarser (bf16, 2⁻⁹), not for f32 C.
    const APPROXIMATE_TANH: bool;
    /// The `D`-distributed values of the `rows × cols` matrix `v` (row stride `stride`) at
    /// `origin`, widened to f32 (0 outside it).
    fn load_f32<D: TileDistribution<X = [i32; 2]>, const V: usize>(
        v: Global<Self>,
        shape: (u32, u32, u32),
        origin: [i32; 2],
    ) -> DistributedTensor<D, f32>;

    /// Stores `t` rounded to this type into the `rows × cols` matrix `c` at `origin` (nothing
    /// outside it).
    fn store_f32<D: TileDistribution<X = [i32; 2]>, const V: usize>(
        c: GlobalMut<Self>,
        shape: (u32, u32, u32),
        origin: [i32; 2],
        t: &DistributedTensor<D, f32>,
    );
}

macro_rules! c_element {
    ($t:ty, $approximate_tanh:literal) => {
        impl CElement for $t {
            const APPROXIMATE_TANH: bool = $approximate_tanh;

            #[inline(always)]
            fn load_f32<D: TileDistribution<X = [i32; 2]>, const V: usize>(
                v: Global<$t>,
                (rows, cols, stride): (u32, u32, u32),
                origin: [i32; 2],
            ) -> DistributedTensor<D, f32> {
                let view = View2::<_, $t, V>::new(v, rows, cols, stride);
                make_tile_window::<D, _>(view, origin)
                    .load::<$t>()
                    .map(<$t>::to_f32)
            }

            #[inline(always)]
            fn store_f32<D: TileDistribution<X = [i32; 2]>, const V: usize>(
                c: GlobalMut<$t>,
                (rows, cols, stride): (u32, u32, u32),
                origin: [i32; 2],
                t: &DistributedTensor<D, f32>,
            ) {
                let view = View2::<_, $t, V>::new(c, rows, cols, stride);
                make_tile_window::<D, _>(view, origin).store(&t.round_to::<$t>());
            }
        }
    };
}
c_element!(f32, false);
c_element!(Bf16, true);
