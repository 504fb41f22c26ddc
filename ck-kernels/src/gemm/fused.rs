//! Host side of the fused GEMM: `C = act(alpha · A·B + beta · D + bias)` with bf16 A and B,
//! f32 accumulation, f32 or bf16 C (and D, bias), on the wgmma kernels of [`crate::gemm::wgmma`].
//! The epilogue runs in registers before the one store of C ([`crate::gemm::epilogue`]).

use crate::gemm::choice::Bf16Kernel;
use crate::gemm::epilogue::CElement;
use crate::gemm::epilogue::{Activation, ACTIVATION_SHIFT, HAS_BIAS, HAS_D};
use crate::gemm::wgmma::*;
use ck_core::device::{Bf16, Real};
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

/// The epilogue of one GEMM: `C = act(alpha · A·B + beta · D + bias)`.
pub struct EpilogueArgs<'a, O> {
    pub alpha: f32,
    pub beta: f32,
    /// `m × n` (the residual), or none.
    pub d: Option<&'a DeviceBuffer<O>>,
    /// `n` (one value per column), or none.
    pub bias: Option<&'a DeviceBuffer<O>>,
    pub activation: Activation,
}

impl<O> Default for EpilogueArgs<'_, O> {
    /// `C = A·B`.
    fn default() -> Self {
        EpilogueArgs {
            alpha: 1.0,
            beta: 1.0,
            d: None,
            bias: None,
            activation: Activation::None,
        }
    }
}

impl<O> EpilogueArgs<'_, O> {
    /// True for `C = A·B`.
    pub fn is_identity(&self) -> bool {
        self.alpha == 1.0
            && self.d.is_none()
            && self.bias.is_none()
            && self.activation == Activation::None
    }

    /// The kernels' `flags` argument.
    pub fn flags(&self) -> u32 {
        (self.d.is_some() as u32 * HAS_D)
            | (self.bias.is_some() as u32 * HAS_BIAS)
            | self.activation.code() << ACTIVATION_SHIFT
    }
}

/// C's element types: which kernels write them.
pub trait GemmOutput: CElement {
    /// Launches the wgmma kernel `kernel` writing this type.
    #[allow(clippy::too_many_arguments)]
    fn launch_wgmma(
        device: &Device,
        kernel: Bf16Kernel,
        cfg: LaunchConfig,
        ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<Self>,
        d_bias: (&DeviceBuffer<Self>, &DeviceBuffer<Self>),
        mnk: (u32, u32, u32),
        scalars: (f32, f32, u32),
    ) -> Result<LaunchStats, LaunchError>;
}

macro_rules! gemm_output {
    ($o:ty, $wide:ident, $narrow:ident) => {
        impl GemmOutput for $o {
            fn launch_wgmma(
                device: &Device,
                kernel: Bf16Kernel,
                cfg: LaunchConfig,
                (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
                c: &mut DeviceBuffer<$o>,
                (d, bias): (&DeviceBuffer<$o>, &DeviceBuffer<$o>),
                (m, n, k): (u32, u32, u32),
                (alpha, beta, flags): (f32, f32, u32),
            ) -> Result<LaunchStats, LaunchError> {
                match kernel {
                    Bf16Kernel::Wgmma128x128 => {
                        $narrow::launch(device, cfg, a, b, c, d, bias, m, n, k, alpha, beta, flags)
                    }
                    _ => $wide::launch(device, cfg, a, b, c, d, bias, m, n, k, alpha, beta, flags),
                }
            }
        }
    };
}
gemm_output!(f32, GemmBf16Wgmma, GemmBf16WgmmaN128);
gemm_output!(Bf16, GemmBf16WgmmaBf16, GemmBf16WgmmaN128Bf16);

/// `C = act(alpha · A·B + beta · D + bias)` on device buffers (A `m × k`, B `k × n`, C and D
/// `m × n`, bias `n`, row-major) with the wgmma kernel `kernel` (`Wgmma128x256` or
/// `Wgmma128x128`; N and K multiples of 8).
pub fn launch<O: GemmOutput>(
    device: &Device,
    kernel: Bf16Kernel,
    (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<O>,
    mnk: (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<LaunchStats, LaunchError> {
    launch_batched(device, kernel, (a, b), c, 1, mnk, epilogue)
}

/// [`launch`] for `batch` products at once: A `[batch, m, k]`, B `[batch, k, n]`, C and D
/// `[batch, m, n]` (contiguous), one bias `n` for all.
pub fn launch_batched<O: GemmOutput>(
    device: &Device,
    kernel: Bf16Kernel,
    (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<O>,
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<LaunchStats, LaunchError> {
    if kernel == Bf16Kernel::MmaSync || !whole_vector_rows(n, k) {
        return Err(LaunchError::invalid(
            ck_core::rules::SHAPE_UNSUPPORTED,
            format!("the fused GEMM runs on the wgmma kernels, which need N and K to be multiples of 8 (16-byte rows); got N = {n}, K = {k} ({})", kernel.name()),
        ));
    }
    check_problem(batch, (m, n, k), (a.len(), b.len(), c.len()), epilogue)?;
    let empty = DeviceBuffer::<O>::empty(device)?;
    let (d, bias) = (
        epilogue.d.unwrap_or(&empty),
        epilogue.bias.unwrap_or(&empty),
    );
    if batch == 0 || m == 0 || n == 0 {
        return Ok(LaunchStats::default());
    }
    let bn = if kernel == Bf16Kernel::Wgmma128x128 {
        128
    } else {
        256
    };
    let cfg = LaunchConfig::new(batch * m.div_ceil(BM) * n.div_ceil(bn), 256);
    let scalars = (epilogue.alpha, epilogue.beta, epilogue.flags());
    O::launch_wgmma(
        device,
        kernel,
        cfg,
        (a, b),
        c,
        (d, bias),
        (m, n, k),
        scalars,
    )
}

/// The checks of every fused GEMM launch, for `batch` products of `m × k` by `k × n` with A, B
/// and C of `lens` elements: indices within 32 bits, operands of the shapes' lengths, D and
/// bias (if given) of C's and a row's, finite alpha and beta.
pub fn check_problem<O: ck_core::device::Element>(
    batch: u32,
    (m, n, k): (u32, u32, u32),
    (a, b, c): (usize, usize, usize),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<(), LaunchError> {
    let elems = |r: u32, c: u32| batch as u64 * r as u64 * c as u64;
    if [elems(m, k), elems(k, n), elems(m, n)]
        .iter()
        .any(|&e| e > u32::MAX as u64)
    {
        return Err(LaunchError::invalid(
            ck_core::rules::ARGUMENT_SIZE,
            format!(
                "{batch} products of {m}×{k} · {k}×{n} exceed the kernels' 32-bit element indices"
            ),
        ));
    }
    let want = |what: &str, len: usize, expect: u64| {
        if len as u64 == expect {
            Ok(())
        } else {
            Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!("{what} has {len} elements; for {batch} product(s) of {m}×{k} · {k}×{n} it needs {expect}"),
            ))
        }
    };
    want("A", a, elems(m, k))?;
    want("B", b, elems(k, n))?;
    want("C", c, elems(m, n))?;
    if let Some(d) = epilogue.d {
        want("D", d.len(), elems(m, n))?;
    }
    if let Some(bias) = epilogue.bias {
        want("bias", bias.len(), n as u64)?;
    }
    check_scales(epilogue)
}

/// Errors `bad-scale` unless the epilogue's alpha and beta are finite.
pub fn check_scales<O>(epilogue: &EpilogueArgs<'_, O>) -> Result<(), LaunchError> {
    for (what, v) in [("alpha", epilogue.alpha), ("beta", epilogue.beta)] {
        if !v.is_finite() {
            return Err(LaunchError::invalid(
                ck_core::rules::BAD_SCALE,
                format!("{what} is {v}; give a finite number"),
            ));
        }
    }
    Ok(())
}

/// The fp64 reference of the epilogue over `ab` (the product A·B, `m × n`, in f64).
pub fn reference(
    ab: &[f64],
    (m, n): (u32, u32),
    (alpha, beta): (f32, f32),
    (d, bias): (Option<&[f32]>, Option<&[f32]>),
    activation: Activation,
) -> Vec<f64> {
    let act = |x: f64| match activation {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::Gelu => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + u.tanh())
        }
        Activation::Silu => x / (1.0 + (-x).exp()),
    };
    (0..m as usize * n as usize)
        .map(|i| {
            let mut x = alpha as f64 * ab[i];
            if let Some(d) = d {
                x += beta as f64 * d[i] as f64;
            }
            if let Some(b) = bias {
                x += b[i % n as usize] as f64;
            }
            act(x)
        })
        .collect()
}

/// The epilogue's inputs on the host (f32 values, rounded to C's element type).
#[derive(Clone, Copy, Debug)]
pub struct HostEpilogue<'a> {
    pub alpha: f32,
    pub beta: f32,
    pub d: Option<&'a [f32]>,
    pub bias: Option<&'a [f32]>,
    pub activation: Activation,
}

impl Default for HostEpilogue<'_> {
    fn default() -> Self {
        HostEpilogue {
            alpha: 1.0,
            beta: 1.0,
            d: None,
            bias: None,
            activation: Activation::None,
        }
    }
}

/// `values` rounded to `T` in a new device buffer.
pub fn upload<T: Real>(device: &Device, values: &[f32]) -> Result<DeviceBuffer<T>, LaunchError> {
    let v: Vec<T> = values.iter().map(|&x| T::from_f32(x)).collect();
    DeviceBuffer::from_slice(device, &v)
}

/// What every GEMM from host values shares: the operands' lengths checked against `batch`
/// products of `m × k` by `k × n` (`lens`: A's and B's), then [`run_with_host_epilogue`].
pub fn run_on_host_values<O: GemmOutput>(
    (a_len, b_len): (usize, usize),
    batch: u32,
    (m, n, k): (u32, u32, u32),
    device: &Device,
    epilogue: HostEpilogue<'_>,
    launch: impl FnOnce(&mut DeviceBuffer<O>, &EpilogueArgs<'_, O>) -> Result<LaunchStats, LaunchError>,
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    let size = |r: u32, c: u32| batch as usize * r as usize * c as usize;
    if a_len != size(m, k) || b_len != size(k, n) {
        return Err(LaunchError::invalid(
            ck_core::rules::SHAPE_MISMATCH,
            format!(
                "A has {a_len} elements and B {b_len}, but the shapes are {batch} × {m}×{k} and {batch} × {k}×{n}"
            ),
        ));
    }
    run_with_host_epilogue(device, size(m, n), epilogue, launch)
}

/// D and bias of `epilogue` uploaded as `O`, C of `c_len` elements allocated (NaN, so an
/// unwritten element shows), `launch` run on them, C widened to f32.
pub fn run_with_host_epilogue<O: GemmOutput>(
    device: &Device,
    c_len: usize,
    epilogue: HostEpilogue<'_>,
    launch: impl FnOnce(&mut DeviceBuffer<O>, &EpilogueArgs<'_, O>) -> Result<LaunchStats, LaunchError>,
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    let d = epilogue.d.map(|d| upload::<O>(device, d)).transpose()?;
    let bias = epilogue.bias.map(|b| upload::<O>(device, b)).transpose()?;
    let mut c = upload::<O>(device, &vec![f32::NAN; c_len])?;
    let args = EpilogueArgs {
        alpha: epilogue.alpha,
        beta: epilogue.beta,
        d: d.as_ref(),
        bias: bias.as_ref(),
        activation: epilogue.activation,
    };
    let stats = launch(&mut c, &args)?;
    Ok((c.to_vec()?.iter().map(|v| v.to_f32()).collect(), stats))
}
