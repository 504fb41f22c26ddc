//! GEMM epilogues, applied to the accumulators in registers before the one store of C:
//!
//! ```text
//! C[r, c] = act(alpha · (A·B)[r, c] + beta · D[r, c] + bias[c])
//! act ∈ {none, relu, gelu (tanh form), silu}; D and bias optional, of C's element type
//! gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))      silu(x) = x / (1 + e^−x)
//! ```
//!
//! No pass over C after the GEMM: the kernel stages its C tile through shared memory so that
//! each thread holds runs of 4 consecutive columns, and a warp reads D and bias and writes C
//! in contiguous, whole-sector accesses.

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
    pub fn code(self) -> u32 {
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
}

#[inline(always)]
fn relu(x: f32) -> f32 {
    x.max(0.0)
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    // tanh(u) = 1 − 2 / (e^{2u} + 1): ±1, not NaN, where e^{2u} overflows. The approximate
    // reciprocal: an IEEE division per element costs more than the MMAs of a K = 1024 GEMM.
    let tanh = 1.0 - 2.0 * math::rcp(math::exp2(2.0 * core::f32::consts::LOG2_E * u) + 1.0);
    0.5 * x * (1.0 + tanh)
}

#[inline(always)]
fn silu(x: f32) -> f32 {
    x * math::rcp(1.0 + math::exp2(-core::f32::consts::LOG2_E * x))
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

    /// `x ← act(alpha · x + beta · D + bias)` on a tile of accumulators; `d()` and `bias()`
    /// give D's and bias's values at `x`'s places and are called only when their flags are
    /// set. Rounds as `((alpha · x) + beta · D) + bias`, the order of the host reference.
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
        self.scale(x);
        if self.flags & HAS_D != 0 {
            let beta = self.beta;
            *x = x.zip_map(&d(), |v, d| v + beta * d);
        }
        if self.flags & HAS_BIAS != 0 {
            *x = x.zip_map(&bias(), |v, b| v + b);
        }
        match self.flags >> ACTIVATION_SHIFT {
            1 => x.update(|v| *v = relu(*v)),
            2 => x.update(|v| *v = gelu(*v)),
            3 => x.update(|v| *v = silu(*v)),
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
    ($t:ty) => {
        impl CElement for $t {
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
c_element!(f32);
c_element!(Bf16);
