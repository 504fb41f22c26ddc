//! `linear`: `C = act(alpha · X·Wᵀ + beta · D + bias)` with the weight as `nn.Linear` keeps it,
//! `W` `[N, K]` row-major, read in place (no transposed copy) — the layout the MMA reads
//! natively (B K-major). X `[M, K]` (a model's tokens, any leading dims flattened), C and D
//! `[M, N]`, bias `[N]`; bf16 X and W, f32 accumulation, bf16 or f32 C.
//!
//! | problem | kernel |
//! |---|---|
//! | N or K not a multiple of 8 (rows TMA cannot copy) | `linear_simt_*` (f32 FMAs, 128 × 128 tiles, any shape) |
//! | 128 × 192 tiles spend ≥ 5 % more of the machine's time on C than 128 × 256 ones, and a 192-wide kernel is compiled for the epilogue (alpha alone, a bias, D alone) | `gemm_tma_bf16_nk*_n192*` |
//! | otherwise | `gemm_tma_bf16_nk*` (TMA, warp-specialised, persistent; stream-K for few tiles of a long K) |
//!
//! The TMA kernels are [`crate::gemm::tma`]'s body on [`Bf16NkOperands`]: B's stage is one box
//! of 256 (or 192) rows of 64 k in the 128-byte swizzle, as A's is.
//!
//! [`launch_gated`] is a gated linear unit in one launch — SwiGLU `silu(X·W_gateᵀ) · (X·W_upᵀ)`
//! or GeGLU — on the stacked weight `[2F, K]` (gate rows first: `torch.cat([w_gate, w_up])`,
//! serving stacks' merged `gate_up_proj`): each tile's MMAs compute both products of its 128
//! columns, and the epilogue combines them in registers, so neither `[M, F]` product is
//! written ([`crate::gemm::tma::Bf16GatedOperands`]).
//!
//! [`launch_fp8`] is the same product on e4m3 X and W with per-tensor scales (`gemm_fp8_e4m3*`).
//!
//! [`launch_weight_grad`] is its weight's gradient, `dW = dYᵀ·X` (`[N, K]`, the weight's
//! layout) from `dY` `[tokens, N]` and `X` `[tokens, K]` as they lie: the TMA kernel reads
//! `dY` M-major ([`crate::gemm::tma::Bf16KmOperands`], `gemm_tma_bf16_km*`), so no transposed
//! copy of `dY` is made; f32 C may add the product to a gradient kept in f32 (`beta = 1`).
//!
//! ```
//! use ck_core::device::Bf16;
//! use ck_core::host::Device;
//! use ck_kernels::gemm::epilogue::Activation;
//! use ck_kernels::gemm::fused::HostEpilogue;
//! use ck_kernels::gemm::linear::linear;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::emulator();
//! let (m, n, k) = (3u32, 5u32, 7u32); // any shape
//! let x = vec![0.5f32; (m * k) as usize]; // [m, k]
//! let w: Vec<f32> = (0..n * k).map(|i| (i / k) as f32).collect(); // [n, k]: row j is all j
//! let bias = vec![-1.0f32; n as usize];
//! let epilogue = HostEpilogue { bias: Some(&bias), activation: Activation::Relu, ..Default::default() };
//! let (c, _) = linear::<f32>(&device, (&x, &w), (m, n, k), epilogue)?;
//! // C[i, j] = relu(7 · 0.5 · j − 1): exact in bf16 operands and f32 C.
//! assert_eq!(&c[..5], &[0.0, 2.5, 6.0, 9.5, 13.0]);
//! # Ok(()) }
//! ```

use crate::gemm::auto::{wave_efficiency, NARROW_GAIN};
use crate::gemm::epilogue::Activation;
use crate::gemm::fused::{
    check_problem, run_with_host_epilogue, upload, EpilogueArgs, GemmOutput, HostEpilogue,
};
use crate::gemm::mma_sync::host::config;
use crate::gemm::mma_sync::{LinearSimtBf16, LinearSimtF32};
use crate::gemm::tma::host::{kernel_name, launch as launch_tma, TmaGemm};
use crate::gemm::tma::{
    Bf16GatedOperands, Bf16KmOperands, Bf16NkOperands, Fp8Operands, Width, N192, N256,
};
use ck_core::device::{Bf16, E4m3};
use ck_core::host::{Device, DeviceBuffer, LaunchError, LaunchStats};

/// The kernel [`launch`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// `gemm_tma_bf16_nk*`: 128 × 256 tiles.
    Tma,
    /// `gemm_tma_bf16_nk*_n192*`: 128 × 192 tiles.
    TmaN192,
    /// `linear_simt_*`: any shape.
    AnyShape,
}

/// C's element types: their kernels.
pub trait LinearOutput: GemmOutput {
    /// Launches the any-shape kernel.
    fn launch_any_shape(
        device: &Device,
        xw: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<Self>,
        mnk: (u32, u32, u32),
        epilogue: &EpilogueArgs<'_, Self>,
    ) -> Result<LaunchStats, LaunchError>;
    /// The any-shape kernel's name.
    const ANY_SHAPE: &'static str;
    /// Whether a 128 × 192 kernel runs the epilogue of `flags`.
    fn narrow_takes(flags: u32) -> bool;
    /// The TMA kernel's launch, in `narrow` tiles or not.
    fn launch_tma(
        device: &Device,
        xw: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<Self>,
        mnk: (u32, u32, u32),
        epilogue: &EpilogueArgs<'_, Self>,
        narrow: bool,
    ) -> Result<LaunchStats, LaunchError>;
    /// The TMA kernel's name.
    fn tma_name(epilogue: &EpilogueArgs<'_, Self>, narrow: bool) -> &'static str;
}

macro_rules! linear_output {
    ($o:ty, $any:ident, $any_name:literal) => {
        impl LinearOutput for $o {
            fn launch_any_shape(
                device: &Device,
                (x, w): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
                c: &mut DeviceBuffer<$o>,
                (m, n, k): (u32, u32, u32),
                epilogue: &EpilogueArgs<'_, $o>,
            ) -> Result<LaunchStats, LaunchError> {
                let empty = DeviceBuffer::<$o>::empty(device)?;
                let d = epilogue.d.unwrap_or(&empty);
                let bias = epilogue.bias.unwrap_or(&empty);
                let (alpha, beta, flags) = (epilogue.alpha, epilogue.beta, epilogue.flags());
                $any::launch(
                    device,
                    config(m, n),
                    x,
                    w,
                    c,
                    d,
                    bias,
                    m,
                    n,
                    k,
                    alpha,
                    beta,
                    flags,
                )
            }
            const ANY_SHAPE: &'static str = $any_name;
            fn narrow_takes(flags: u32) -> bool {
                <Bf16NkOperands<N192> as TmaGemm<$o>>::takes(flags)
            }
            fn launch_tma(
                device: &Device,
                xw: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
                c: &mut DeviceBuffer<$o>,
                mnk: (u32, u32, u32),
                epilogue: &EpilogueArgs<'_, $o>,
                narrow: bool,
            ) -> Result<LaunchStats, LaunchError> {
                if narrow {
                    launch_tma::<Bf16NkOperands<N192>, $o>(device, xw, c, 1, mnk, epilogue)
                } else {
                    launch_tma::<Bf16NkOperands, $o>(device, xw, c, 1, mnk, epilogue)
                }
            }
            fn tma_name(epilogue: &EpilogueArgs<'_, $o>, narrow: bool) -> &'static str {
                if narrow {
                    kernel_name::<Bf16NkOperands<N192>, $o>(epilogue)
                } else {
                    kernel_name::<Bf16NkOperands, $o>(epilogue)
                }
            }
        }
    };
}
linear_output!(Bf16, LinearSimtBf16, "linear_simt_bf16");
linear_output!(f32, LinearSimtF32, "linear_simt_f32");

/// The choice of the table in the module documentation.
pub fn choose<O: LinearOutput>(
    device: &Device,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Kernel {
    if !n.is_multiple_of(8) || !k.is_multiple_of(8) {
        return Kernel::AnyShape;
    }
    let sms = device.multiprocessors();
    let narrow = wave_efficiency(1, (m, n), N192::BN, sms);
    let wide = wave_efficiency(1, (m, n), N256::BN, sms);
    if O::narrow_takes(epilogue.flags()) && narrow > NARROW_GAIN * wide {
        Kernel::TmaN192
    } else {
        Kernel::Tma
    }
}

/// `C = act(alpha · X·Wᵀ + beta · D + bias)` on device buffers — X `[m, k]`, W `[n, k]`, C and D
/// `[m, n]`, bias `[n]`, row-major — on the kernel [`choose`] picks; returns the launch's
/// statistics and the kernel's name. Errors: `shape-mismatch` (a buffer's length against the
/// shape, naming it), `argument-size`, `bad-scale`.
pub fn launch<O: LinearOutput>(
    device: &Device,
    (x, w): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<O>,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<(LaunchStats, &'static str), LaunchError> {
    check_lengths((m, n, k), (x.len(), w.len(), c.len()))?;
    check_problem(1, (m, n, k), (x.len(), w.len(), c.len()), epilogue)?;
    match choose(device, (m, n, k), epilogue) {
        Kernel::AnyShape => {
            if m == 0 || n == 0 {
                return Ok((LaunchStats::default(), O::ANY_SHAPE));
            }
            let stats = O::launch_any_shape(device, (x, w), c, (m, n, k), epilogue)?;
            Ok((stats, O::ANY_SHAPE))
        }
        kernel => {
            let narrow = kernel == Kernel::TmaN192;
            let stats = O::launch_tma(device, (x, w), c, (m, n, k), epilogue, narrow)?;
            Ok((stats, O::tma_name(epilogue, narrow)))
        }
    }
}

/// `C = act(alpha · X·W_gateᵀ) · (alpha · X·W_upᵀ)` in one launch, `activation` silu (SwiGLU) or
/// gelu (GeGLU, tanh form): X `[m, k]`, the weights stacked `[2f, k]` (the gate's `f` rows
/// first), C `[m, f]`, bf16, row-major. F and K multiples of 8. Returns the launch's statistics
/// and the kernel's name.
pub fn launch_gated(
    device: &Device,
    (x, w): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<Bf16>,
    (m, f, k): (u32, u32, u32),
    (alpha, activation): (f32, Activation),
) -> Result<(LaunchStats, &'static str), LaunchError> {
    check_gated_lengths((m, f, k), (x.len(), w.len(), c.len()))?;
    if !matches!(activation, Activation::Silu | Activation::Gelu) {
        return Err(LaunchError::invalid(
            ck_core::rules::BAD_ACTIVATION,
            format!("a gated linear unit's activation is silu (SwiGLU) or gelu (GeGLU); got {activation:?}"),
        ));
    }
    if !f.is_multiple_of(8) || !k.is_multiple_of(8) {
        return Err(LaunchError::invalid(
            ck_core::rules::SHAPE_UNSUPPORTED,
            format!("the gated GEMM moves whole 16-byte rows with TMA: F and K must be multiples of 8 (pad the weight's halves with zero rows and X with zero columns); got F = {f}, K = {k}"),
        ));
    }
    let epilogue = EpilogueArgs {
        alpha,
        activation,
        ..Default::default()
    };
    let stats = launch_tma::<Bf16GatedOperands, Bf16>(device, (x, w), c, 1, (m, f, k), &epilogue)?;
    Ok((stats, kernel_name::<Bf16GatedOperands, Bf16>(&epilogue)))
}

/// [`launch_gated`] from host values (X `[m, k]`, the stacked weight `[2f, k]`), rounded to
/// bf16; C widened to f32.
pub fn gated(
    device: &Device,
    (x, w): (&[f32], &[f32]),
    (m, f, k): (u32, u32, u32),
    (alpha, activation): (f32, Activation),
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    let c_len = m as usize * f as usize;
    check_gated_lengths((m, f, k), (x.len(), w.len(), c_len))?;
    let (xd, wd) = (upload::<Bf16>(device, x)?, upload::<Bf16>(device, w)?);
    let mut c = upload::<Bf16>(device, &vec![f32::NAN; c_len])?;
    let (stats, _) = launch_gated(device, (&xd, &wd), &mut c, (m, f, k), (alpha, activation))?;
    Ok((c.to_vec()?.iter().map(|v| v.to_f32()).collect(), stats))
}

/// [`launch`] on fp8 operands: `C = act(alpha · X·Wᵀ + beta · D + bias)` with X `[m, k]` and W
/// `[n, k]` in e4m3 — both K-major, the only layout fp8 wgmma reads, so `nn.Linear`'s weight
/// layout is the native one — on `gemm_fp8_e4m3*` ([`Fp8Operands`]). Per-tensor scales of X and
/// W (`x ≈ x_scale · X`) fold into `alpha = x_scale · w_scale`. K a multiple of 16, N of 8.
/// Returns the launch's statistics and the kernel's name.
///
/// ```
/// use ck_core::device::{Bf16, E4m3, Fp8};
/// use ck_core::host::{Device, DeviceBuffer};
/// use ck_kernels::gemm::fused::EpilogueArgs;
/// use ck_kernels::gemm::linear::launch_fp8;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::emulator();
/// let (m, n, k) = (2u32, 8u32, 16u32);
/// // X all 1.5, W row j all j (both exact in e4m3), scales 0.5 and 2: alpha = 1.
/// let x = DeviceBuffer::from_slice(&device, &vec![E4m3::from_f32(1.5); (m * k) as usize])?;
/// let w: Vec<E4m3> = (0..n * k).map(|i| E4m3::from_f32((i / k) as f32)).collect();
/// let w = DeviceBuffer::from_slice(&device, &w)?;
/// let mut c = DeviceBuffer::<Bf16>::zeros(&device, (m * n) as usize)?;
/// let args = EpilogueArgs { alpha: 0.5 * 2.0, ..Default::default() };
/// let (_, kernel) = launch_fp8(&device, (&x, &w), &mut c, (m, n, k), &args)?;
/// assert_eq!(kernel, "gemm_fp8_e4m3");
/// // C[i, j] = 16 · 1.5 · j = 24 j.
/// let c: Vec<f32> = c.to_vec()?.iter().map(|v| v.to_f32()).collect();
/// assert_eq!(&c[..4], &[0.0, 24.0, 48.0, 72.0]);
/// # Ok(()) }
/// ```
pub fn launch_fp8<O: GemmOutput>(
    device: &Device,
    (x, w): (&DeviceBuffer<E4m3>, &DeviceBuffer<E4m3>),
    c: &mut DeviceBuffer<O>,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<(LaunchStats, &'static str), LaunchError>
where
    Fp8Operands<E4m3, E4m3>: TmaGemm<O>,
{
    check_lengths((m, n, k), (x.len(), w.len(), c.len()))?;
    if !k.is_multiple_of(16) || !n.is_multiple_of(8) {
        return Err(LaunchError::invalid(
            ck_core::rules::SHAPE_UNSUPPORTED,
            format!("the fp8 GEMM moves whole 16-byte rows with TMA: K must be a multiple of 16 and N of 8 (pad x and the weight with zero columns, the weight with zero rows); got N = {n}, K = {k}"),
        ));
    }
    let stats =
        launch_tma::<Fp8Operands<E4m3, E4m3>, O>(device, (x, w), c, 1, (m, n, k), epilogue)?;
    Ok((stats, kernel_name::<Fp8Operands<E4m3, E4m3>, O>(epilogue)))
}

/// The weight's gradient of [`launch`]: `C = alpha · dYᵀ·X + beta · D` on device buffers — dY
/// `[tokens, n]`, X `[tokens, k]`, C and D `[n, k]`, row-major — on `gemm_tma_bf16_km` (bf16
/// C, alpha alone) or `gemm_tma_bf16_km_f32*` (f32 C, any epilogue: D = the gradient so far,
/// `beta = 1`, accumulates). n and k multiples of 8; any number of tokens. Returns the launch's
/// statistics and the kernel's name. Errors: `shape-mismatch` naming the buffer,
/// `shape-unsupported`, `epilogue-unsupported` (bf16 C with more than alpha).
pub fn launch_weight_grad<O: GemmOutput>(
    device: &Device,
    (dy, x): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<O>,
    (tokens, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<(LaunchStats, &'static str), LaunchError>
where
    Bf16KmOperands: TmaGemm<O>,
{
    check_weight_grad_lengths((tokens, n, k), (dy.len(), x.len(), c.len()))?;
    let stats = launch_tma::<Bf16KmOperands, O>(device, (dy, x), c, 1, (n, k, tokens), epilogue)?;
    Ok((stats, kernel_name::<Bf16KmOperands, O>(epilogue)))
}

/// [`launch_weight_grad`] from host values (dY `[tokens, n]`, X `[tokens, k]`, D `[n, k]`):
/// dY and X rounded to bf16, D to `O`, C (`O`) widened to f32.
pub fn weight_grad<O: GemmOutput>(
    device: &Device,
    (dy, x): (&[f32], &[f32]),
    (tokens, n, k): (u32, u32, u32),
    epilogue: HostEpilogue<'_>,
) -> Result<(Vec<f32>, LaunchStats), LaunchError>
where
    Bf16KmOperands: TmaGemm<O>,
{
    let c_len = n as usize * k as usize;
    check_weight_grad_lengths((tokens, n, k), (dy.len(), x.len(), c_len))?;
    let (dyd, xd) = (upload::<Bf16>(device, dy)?, upload::<Bf16>(device, x)?);
    run_with_host_epilogue::<O>(device, c_len, epilogue, |c, args| {
        launch_weight_grad(device, (&dyd, &xd), c, (tokens, n, k), args).map(|(stats, _)| stats)
    })
}

/// `shape-mismatch` naming the buffer of a weight gradient whose length is not the shape's.
fn check_weight_grad_lengths(
    (tokens, n, k): (u32, u32, u32),
    (dy, x, c): (usize, usize, usize),
) -> Result<(), LaunchError> {
    let t = tokens as u64;
    check_named(
        || format!("dW [{n}, {k}] = dy [{tokens}, {n}]ᵀ · x [{tokens}, {k}]"),
        [("dy", dy, t, n), ("x", x, t, k), ("c", c, n as u64, k)],
    )
}

/// `shape-mismatch` naming the buffer of a gated unit whose length is not the shape's.
/// A QKV projection with RoPE in one launch: `C = X·Wᵀ` with X `[T, K]` (tokens `t = b·S + s`),
/// the fused weight W `[(H + 2·Hkv)·D, K]` (query rows, key rows, value rows) and C `[T, (H +
/// 2·Hkv)·D]`, its query and key heads rotated in the epilogue at table row `t mod rows` of
/// `cos`, `sin` (`[rows, R/2]` f32) — [`crate::rope::Projection`], the math of
/// [`crate::rope`]. What `rope_qkv` does after a plain projection, without its pass over C
/// (and C stays in the projection's layout: attention reads Q, K and V from it in place).
/// `shape` describes the problem as for `rope_qkv`; here `head_dim` is 64 or 128 (a tile's
/// 256 columns hold whole heads) and, half-split, `rotary_dim` 64 or 128 (each half whole
/// 32-column slices). Returns the launch's statistics and the kernel's name.
///
/// ```
/// use ck_core::device::Bf16;
/// use ck_core::host::{Device, DeviceBuffer};
/// use ck_kernels::gemm::linear::launch_rope;
/// use ck_kernels::rope::host::Shape;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::emulator();
/// // One token, one query, key and value head of 64; X = e₀, so C's row is W's column 0.
/// let shape = Shape { batch: 1, seq: 1, heads: 1, kv_heads: 1, head_dim: 64, rotary_dim: 64, table_rows: 1, interleaved: false };
/// let k = 8;
/// let mut w = vec![0.0f32; 3 * 64 * k];
/// w[0] = 1.0; // query element 0
/// w[32 * k] = 2.0; // query element 32, element 0's partner
/// let x: Vec<f32> = (0..k).map(|i| (i == 0) as u32 as f32).collect();
/// // Pair 0 at 90°: (x₀, x₃₂) → (x₀·0 − x₃₂·1, x₃₂·0 + x₀·1) = (−2, 1); pairs 1.. at 0°.
/// let (mut cos, mut sin) = (vec![1.0f32; 32], vec![0.0f32; 32]);
/// (cos[0], sin[0]) = (0.0, 1.0);
/// let up = |v: &[f32]| DeviceBuffer::from_slice(&device, &v.iter().map(|&x| Bf16::from_f32(x)).collect::<Vec<_>>());
/// let (xd, wd) = (up(&x)?, up(&w)?);
/// let (cd, sd) = (DeviceBuffer::from_slice(&device, &cos)?, DeviceBuffer::from_slice(&device, &sin)?);
/// let mut c = DeviceBuffer::<Bf16>::zeros(&device, 3 * 64)?;
/// launch_rope(&device, (&xd, &wd), &mut c, k as u32, (&cd, &sd), &shape)?;
/// let c: Vec<f32> = c.to_vec()?.iter().map(|v| v.to_f32()).collect();
/// assert_eq!((c[0], c[32]), (-2.0, 1.0));
/// # Ok(()) }
/// ```
pub fn launch_rope(
    device: &Device,
    (x, w): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<Bf16>,
    k: u32,
    (cos, sin): (&DeviceBuffer<f32>, &DeviceBuffer<f32>),
    shape: &crate::rope::host::Shape,
) -> Result<(LaunchStats, &'static str), LaunchError> {
    use crate::gemm::tma::host::c_map;
    use crate::gemm::tma::GemmTmaBf16NkRope;
    shape.check()?;
    let unsupported = |m: String| Err(LaunchError::invalid(ck_core::rules::SHAPE_UNSUPPORTED, m));
    let (d, r) = (shape.head_dim, shape.rotary_dim);
    if d != 64 && d != 128 {
        return unsupported(format!("head_dim {d}: the projection's RoPE epilogue takes heads of 64 or 128 (its tiles' 256 columns hold whole heads); use rope_qkv after a plain projection"));
    }
    if !shape.interleaved && r != 64 && r != 128 {
        return unsupported(format!("rotary_dim {r}, half-split: the projection's RoPE epilogue takes 64 or 128 (each half whole 32-column slices of the accumulators); use rope_qkv after a plain projection, or the interleaved style"));
    }
    let (tokens, n) = (shape.tokens(), (shape.heads + 2 * shape.kv_heads) * d);
    let m = u32::try_from(tokens).map_err(|_| {
        LaunchError::invalid(
            ck_core::rules::ARGUMENT_SIZE,
            format!("{tokens} tokens; at most 2³² − 1"),
        )
    })?;
    check_lengths((m, n, k), (x.len(), w.len(), c.len()))?;
    let (.., table) = shape.lens();
    for (name, t) in [("cos", cos), ("sin", sin)] {
        if t.len() as u64 != table {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!(
                    "`{name}` has {} elements; give [{}, {}] ({table})",
                    t.len(),
                    shape.table_rows,
                    r / 2
                ),
            ));
        }
    }
    let epilogue = EpilogueArgs::<Bf16>::default();
    let rotated = (shape.heads + shape.kv_heads) * d;
    let stats = crate::gemm::tma::host::launch_with::<Bf16NkOperands, Bf16>(
        device,
        (x, w),
        c,
        1,
        (m, n, k),
        &epilogue,
        |cfg, (a, b), c, sk| {
            let mut c = c_map(c, (m, n, 1))?;
            GemmTmaBf16NkRope::launch(
                device,
                cfg,
                a,
                b,
                &mut c,
                cos,
                sin,
                m,
                n,
                k,
                1.0,
                d,
                r,
                rotated,
                shape.table_rows,
                shape.interleaved as u32,
                sk.parts,
                sk.tickets,
                sk.sk_tiles,
            )
        },
    )?;
    Ok((stats, "gemm_tma_bf16_nk_rope"))
}

/// [`launch_rope`] from host values (X `[T, k]`, W `[(H + 2·Hkv)·D, k]`, the tables), X and W
/// rounded to bf16; C widened to f32.
pub fn rope_projection(
    device: &Device,
    (x, w): (&[f32], &[f32]),
    k: u32,
    (cos, sin): (&[f32], &[f32]),
    shape: &crate::rope::host::Shape,
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    let tokens = shape.tokens();
    let n = (shape.heads + 2 * shape.kv_heads) as u64 * shape.head_dim as u64;
    let (xd, wd) = (upload::<Bf16>(device, x)?, upload::<Bf16>(device, w)?);
    let (cd, sd) = (
        DeviceBuffer::from_slice(device, cos)?,
        DeviceBuffer::from_slice(device, sin)?,
    );
    let mut c = upload::<Bf16>(device, &vec![f32::NAN; (tokens * n) as usize])?;
    let (stats, _) = launch_rope(device, (&xd, &wd), &mut c, k, (&cd, &sd), shape)?;
    Ok((c.to_vec()?.iter().map(|v| v.to_f32()).collect(), stats))
}

fn check_gated_lengths(
    (m, f, k): (u32, u32, u32),
    (x, w, c): (usize, usize, usize),
) -> Result<(), LaunchError> {
    let two_f = 2 * f as u64;
    check_named(
        || {
            format!(
                "x [{m}, {k}] · weight [2·{f}, {k}]ᵀ (the gate's rows, then the up projection's)"
            )
        },
        [
            ("x", x, m as u64, k),
            ("weight", w, two_f, k),
            ("c", c, m as u64, f),
        ],
    )
}

/// `shape-mismatch` naming the buffer whose length is not the shape's.
fn check_lengths(
    (m, n, k): (u32, u32, u32),
    (x, w, c): (usize, usize, usize),
) -> Result<(), LaunchError> {
    let (m64, n64) = (m as u64, n as u64);
    check_named(
        || format!("x [{m}, {k}] · weight [{n}, {k}]ᵀ"),
        [("x", x, m64, k), ("weight", w, n64, k), ("c", c, m64, n)],
    )
}

/// Each `(name, length, rows, cols)`: `shape-mismatch` for the first whose length is not
/// `rows × cols`, saying what the problem (`what()`, formatted only then) needs.
fn check_named(
    what: impl Fn() -> String,
    buffers: [(&str, usize, u64, u32); 3],
) -> Result<(), LaunchError> {
    let elems = |r: u64, c: u32| r * c as u64;
    for (name, len, rows, cols) in buffers {
        if len as u64 != elems(rows, cols) {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!(
                    "`{name}` has {len} elements; for {} it must be [{rows}, {cols}] ({} elements)",
                    what(),
                    elems(rows, cols)
                ),
            ));
        }
    }
    Ok(())
}

/// [`launch`] from host values (X `[m, k]`, W `[n, k]`, D `[m, n]`): X and W rounded to bf16, D
/// and bias to `O`, C (`O`) widened to f32.
pub fn linear<O: LinearOutput>(
    device: &Device,
    (x, w): (&[f32], &[f32]),
    (m, n, k): (u32, u32, u32),
    epilogue: HostEpilogue<'_>,
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    let c_len = m as usize * n as usize;
    check_lengths((m, n, k), (x.len(), w.len(), c_len))?;
    let (xd, wd) = (upload::<Bf16>(device, x)?, upload::<Bf16>(device, w)?);
    run_with_host_epilogue::<O>(device, c_len, epilogue, |c, args| {
        launch(device, (&xd, &wd), c, (m, n, k), args).map(|(stats, _)| stats)
    })
}
