//! Host side of the TMA GEMMs: the operands' tensor maps, the checks, the launch, and the
//! per-tensor quantisation of the fp8 operands.

use super::*;
use crate::gemm::epilogue::{Activation, ACTIVATION_SHIFT, HAS_D};
use crate::gemm::fused::{
    check_problem, run_on_host_values, EpilogueArgs, GemmOutput, HostEpilogue,
};
use ck_core::host::{
    Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap, TensorMapMut,
};
use ck_core::rules;

/// Operand types with TMA GEMM kernels writing C of type `O`: one for `C = alpha · A·B`
/// (plain), one with the whole epilogue read from its flags at run time, and for some types
/// kernels compiled for one epilogue each (bias and an activation).
pub trait TmaGemm<O: GemmOutput>: Operands {
    /// The plain kernel's name.
    const KERNEL: &'static str;
    /// The name of the kernel that runs the epilogue of `flags` (the kernels' flag bits).
    fn kernel_for(flags: u32) -> &'static str;
    /// Whether a kernel is compiled for the epilogue of `flags` alone (the plain one for 0):
    /// no code for the others' paths.
    fn compiled_for(flags: u32) -> bool;
    /// Whether a kernel runs the epilogue of `flags` without the run-time-flags kernel's cost
    /// (`gemm::auto`'s test): one compiled for it, or one that reads only the bias and the
    /// activation at run time and brings D through its ring.
    fn takes(flags: u32) -> bool;
    /// Whether the kernel for the epilogue of `flags` shares the last tiles out (stream-K):
    /// all but those with D through the ring.
    fn streams(flags: u32) -> bool;
    /// What K must be a multiple of (16-byte rows of A, and of B when it is K-major).
    const K_MULTIPLE: u32 = 16 / <Self::A as Element>::BYTES;
    /// B's tensor map over `b` for `batch` products (`k × n` row-major, or `n × k`).
    fn b_map<'a>(
        b: &'a DeviceBuffer<Self::B>,
        k_n_batch: (u32, u32, u32),
    ) -> Result<TensorMap<'a, Self::B, 3>, LaunchError>;
    /// Launches [`TmaGemm::kernel_for`] the flags of `scalars`.
    #[allow(clippy::too_many_arguments)]
    fn launch_kernel(
        device: &Device,
        cfg: LaunchConfig,
        maps: (&TensorMap<'_, Self::A, 3>, &TensorMap<'_, Self::B, 3>),
        c: &mut DeviceBuffer<O>,
        d_bias: (&DeviceBuffer<O>, &DeviceBuffer<O>),
        mnk_batch: (u32, u32, u32, u32),
        scalars: (f32, f32, u32),
        stream_k: StreamK<'_>,
    ) -> Result<LaunchStats, LaunchError>;
}

/// The stream-K arguments of a launch: the workspace's parts and tickets, and the tiles to
/// share out (0: every tile whole; the kernels with D through the ring take no workspace).
pub struct StreamK<'a> {
    pub parts: &'a mut DeviceBuffer<f32>,
    pub tickets: &'a mut DeviceBuffer<u32>,
    pub sk_tiles: u32,
}

/// A `[batch, m, k]` (or a row-major B^T `[batch, n, k]`) in boxes of one stage's 128-byte
/// rows by `rows`.
pub(crate) fn k_major_map<T: Element>(
    x: &DeviceBuffer<T>,
    (k, rows, batch): (u32, u32, u32),
    box_rows: u32,
) -> Result<TensorMap<'_, T, 3>, LaunchError> {
    let box_k = ROW_BYTES / T::BYTES;
    TensorMap::dense(
        x,
        [k as u64, rows as u64, batch as u64],
        [box_k, box_rows, 1],
        SwizzleMode::B128,
    )
}

/// A row-major B `[batch, k, n]` (N-major) in boxes of `box_dims`, in the 128-byte swizzle.
fn n_major_map<T: Element>(
    b: &DeviceBuffer<T>,
    (k, n, batch): (u32, u32, u32),
    box_dims: [u32; 3],
) -> Result<TensorMap<'_, T, 3>, LaunchError> {
    TensorMap::dense(
        b,
        [n as u64, k as u64, batch as u64],
        box_dims,
        SwizzleMode::B128,
    )
}

/// A's tensor map: `[batch, m, k]` in boxes of one stage's 128-byte rows by the tile's rows,
/// or, given transposed (`[batch, k, m]`), in boxes of 64 columns by one stage's 64 rows.
fn a_map<P: TmaGemm<O>, O: GemmOutput>(
    a: &DeviceBuffer<P::A>,
    (k, m, batch): (u32, u32, u32),
) -> Result<TensorMap<'_, P::A, 3>, LaunchError> {
    if P::A_M_MAJOR {
        n_major_map(a, (k, m, batch), [64, P::BK, 1])
    } else {
        k_major_map(a, (k, m, batch), BM)
    }
}

/// D `[batch, m, n]` as the residual kernel's producer copies it into the ring: boxes of
/// [`D_BOX`] (a tile's 128 rows by 64 columns) in the 128-byte swizzle, so that each warp's
/// 16 rows lie as its C box does.
fn d_map(
    d: &DeviceBuffer<Bf16>,
    (m, n, batch): (u32, u32, u32),
) -> Result<TensorMap<'_, Bf16, 3>, LaunchError> {
    TensorMap::dense(
        d,
        [n as u64, m as u64, batch as u64],
        [D_BOX[1], D_BOX[0], 1],
        SwizzleMode::B128,
    )
}

/// C `[batch, m, n]` as the kernels' store map: boxes of [`C_BOX`] in the 128-byte swizzle.
pub(crate) fn c_map(
    c: &mut DeviceBuffer<Bf16>,
    (m, n, batch): (u32, u32, u32),
) -> Result<TensorMapMut<'_, Bf16, 3>, LaunchError> {
    TensorMapMut::dense(
        c,
        [n as u64, m as u64, batch as u64],
        [C_BOX[1], C_BOX[0], 1],
        SwizzleMode::B128,
    )
}

/// The kernels' C argument for C passed as `map` (bf16: the copy engine stores it) or as a
/// `buffer` (f32).
macro_rules! c_argument {
    (map, $c:ident, $dims:expr) => {
        c_map($c, $dims)?
    };
    (buffer, $c:ident, $dims:expr) => {
        &mut *$c
    };
}

/// The launch of a compiled kernel: D as the buffer (`buffer`: not read, or read by the
/// threads), with the stream-K workspace; or D as [`d_map`] over it (`map`: copied by the copy
/// engine through the ring), every tile whole.
macro_rules! launch_compiled {
    (buffer, $kernel:ident, ($($arg:expr),*), $dims:expr, $sk:ident) => {
        $kernel::launch($($arg),*, $sk.parts, $sk.tickets, $sk.sk_tiles)
    };
    (map, $kernel:ident, ($device:expr, $cfg:expr, $a:expr, $b:expr, $c:expr, $d:expr, $($arg:expr),*), $dims:expr, $sk:ident) => {{
        let _ = $sk;
        $kernel::launch($device, $cfg, $a, $b, $c, &d_map($d, $dims)?, $($arg),*)
    }};
}

/// Whether a kernel with D as `map` (the `with_d` kernel among them) brings D through its ring,
/// where stream-K cannot follow.
macro_rules! through_ring {
    (map $($with_d:ident)?) => {
        true
    };
    (buffer) => {
        false
    };
}

/// The name of the kernel for the epilogues no kernel is compiled for: the run-time-flags one
/// (`<name>_epilogue`), or, where the rest is `refused`, the plain kernel's (whose launch
/// refuses them).
macro_rules! rest_name {
    (refused, $name:literal) => {
        $name
    };
    ($fused:ident, $name:literal) => {
        concat!($name, "_epilogue")
    };
}

/// The launch for the epilogues no kernel is compiled for: the run-time-flags kernel, or
/// `epilogue-unsupported`.
macro_rules! rest_launch {
    (refused, $name:literal, ($($arg:expr),*)) => {{
        let _ = ($($arg),*);
        Err(LaunchError::invalid(
            rules::EPILOGUE_UNSUPPORTED,
            format!("{} has no kernel for this epilogue (it has alpha alone, and for bf16 C a bias with an activation, or D alone); use the 256-wide kernels (Bf16Operands), or ck_kernels::gemm::auto, which picks a kernel for every epilogue", $name),
        ))
    }};
    ($fused:ident, $name:literal, ($($arg:expr),*)) => {
        $fused::launch($($arg),*)
    };
}

/// `TmaGemm` for operands `$p` and C of `$o`: the plain kernel `$plain` (named `$name`), the
/// kernels compiled for one epilogue each, the run-time-flags kernel with D through the ring
/// (`with_d`), and for the rest the run-time-flags kernel `$fused` or `refused`.
macro_rules! tma_gemm {
    ($p:ty, $o:ty, $plain:ident, $fused:ident, $name:literal, c: $c_as:ident,
        b_k_major: $kmajor:literal
        $(, compiled: [$(($flags:expr, $lean:ident, $lean_name:literal, d: $d_as:ident)),*])?
        $(, with_d: ($with_d:ident, $with_d_name:literal))?) => {
        impl TmaGemm<$o> for $p {
            const KERNEL: &'static str = $name;

            fn kernel_for(flags: u32) -> &'static str {
                $($(if flags == $flags {
                    return $lean_name;
                })*)?
                $(if flags & HAS_D != 0 {
                    return $with_d_name;
                })?

                if flags == 0 {
                    $name
                } else {
                    rest_name!($fused, $name)
                }
            }

            fn compiled_for(flags: u32) -> bool {
                flags == 0 $($(|| flags == $flags)*)?
            }

            fn takes(flags: u32) -> bool {
                <Self as TmaGemm<$o>>::compiled_for(flags)
                    || <Self as TmaGemm<$o>>::kernel_for(flags) != rest_name!($fused, $name)
            }

            fn streams(flags: u32) -> bool {
                // (Read only where some kernel brings D through the ring.)
                let _ = flags;
                let through_ring = false
                    $($(|| (flags == $flags && through_ring!($d_as)))*)?
                    $(|| (flags & HAS_D != 0 && through_ring!(map $with_d)))?;
                !through_ring
            }

            fn b_map<'a>(
                b: &'a DeviceBuffer<Self::B>,
                (k, n, batch): (u32, u32, u32),
            ) -> Result<TensorMap<'a, Self::B, 3>, LaunchError> {
                if $kmajor {
                    k_major_map(b, (k, n, batch), <$p as Operands>::W::BN)
                } else {
                    n_major_map(b, (k, n, batch), <$p as Operands>::B_BOX)
                }
            }

            fn launch_kernel(
                device: &Device,
                cfg: LaunchConfig,
                (a, b): (&TensorMap<'_, Self::A, 3>, &TensorMap<'_, Self::B, 3>),
                c: &mut DeviceBuffer<$o>,
                (d, bias): (&DeviceBuffer<$o>, &DeviceBuffer<$o>),
                (m, n, k, batch): (u32, u32, u32, u32),
                (alpha, beta, flags): (f32, f32, u32),
                sk: StreamK<'_>,
            ) -> Result<LaunchStats, LaunchError> {
                let mut c = c_argument!($c_as, c, (m, n, batch));
                $($(if flags == $flags {
                    return launch_compiled!(
                        $d_as,
                        $lean,
                        (device, cfg, a, b, &mut c, d, bias, m, n, k, batch, alpha, beta, flags),
                        (m, n, batch),
                        sk
                    );
                })*)?
                $(if flags & HAS_D != 0 {
                    let d = &d_map(d, (m, n, batch))?;
                    let _ = sk;
                    return $with_d::launch(
                        device, cfg, a, b, &mut c, d, bias, m, n, k, batch, alpha, beta, flags,
                    );
                })?
                let (parts, tickets, sk_tiles) = (sk.parts, sk.tickets, sk.sk_tiles);
                if flags == 0 {
                    $plain::launch(
                        device, cfg, a, b, &mut c, m, n, k, batch, alpha, parts, tickets, sk_tiles,
                    )
                } else {
                    rest_launch!(
                        $fused,
                        $name,
                        (
                            device, cfg, a, b, &mut c, d, bias, m, n, k, batch, alpha, beta, flags,
                            parts, tickets, sk_tiles
                        )
                    )
                }
            }
        }
    };
}

tma_gemm!(
    Bf16Operands, Bf16, GemmTmaBf16, GemmTmaBf16Epilogue, "gemm_tma_bf16", c: map, b_k_major: false,
    compiled: [
        (bias_and(Activation::None), GemmTmaBf16Bias, "gemm_tma_bf16_bias", d: buffer),
        (bias_and(Activation::Relu), GemmTmaBf16BiasRelu, "gemm_tma_bf16_bias_relu", d: buffer),
        (bias_and(Activation::Gelu), GemmTmaBf16BiasGelu, "gemm_tma_bf16_bias_gelu", d: buffer),
        (bias_and(Activation::Silu), GemmTmaBf16BiasSilu, "gemm_tma_bf16_bias_silu", d: buffer),
        (HAS_D, GemmTmaBf16Residual, "gemm_tma_bf16_residual", d: map),
        (HAS_D | bias_and(Activation::None), GemmTmaBf16ResidualBias, "gemm_tma_bf16_residual_bias", d: map),
        (HAS_D | bias_and(Activation::Relu), GemmTmaBf16ResidualBiasRelu, "gemm_tma_bf16_residual_bias_relu", d: map),
        (HAS_D | bias_and(Activation::Gelu), GemmTmaBf16ResidualBiasGelu, "gemm_tma_bf16_residual_bias_gelu", d: map),
        (HAS_D | bias_and(Activation::Silu), GemmTmaBf16ResidualBiasSilu, "gemm_tma_bf16_residual_bias_silu", d: map)
    ],
    with_d: (GemmTmaBf16ResidualEpilogue, "gemm_tma_bf16_residual_epilogue")
);
// The 128 × 192 tiles: the plain product (bf16 or f32 C) and, for bf16 C, a bias with an
// activation or D alone; any other epilogue is refused.
tma_gemm!(
    Bf16Operands<N192>, Bf16, GemmTmaBf16N192, refused, "gemm_tma_bf16_n192", c: map,
    b_k_major: false,
    compiled: [
        (bias_and(Activation::None), GemmTmaBf16N192Bias, "gemm_tma_bf16_n192_bias", d: buffer),
        (bias_and(Activation::Relu), GemmTmaBf16N192BiasRelu, "gemm_tma_bf16_n192_bias_relu", d: buffer),
        (bias_and(Activation::Gelu), GemmTmaBf16N192BiasGelu, "gemm_tma_bf16_n192_bias_gelu", d: buffer),
        (bias_and(Activation::Silu), GemmTmaBf16N192BiasSilu, "gemm_tma_bf16_n192_bias_silu", d: buffer),
        (HAS_D, GemmTmaBf16N192Residual, "gemm_tma_bf16_n192_residual", d: map)
    ]
);
tma_gemm!(
    Bf16Operands<N192>, f32, GemmTmaBf16F32N192, refused, "gemm_tma_bf16_f32_n192", c: buffer,
    b_k_major: false
);
tma_gemm!(
    Bf16Operands, f32, GemmTmaBf16F32, GemmTmaBf16F32Epilogue, "gemm_tma_bf16_f32",
    c: buffer, b_k_major: false
);
tma_gemm!(
    Bf16NkOperands, Bf16, GemmTmaBf16Nk, GemmTmaBf16NkEpilogue, "gemm_tma_bf16_nk", c: map,
    b_k_major: true,
    compiled: [
        (bias_and(Activation::None), GemmTmaBf16NkBias, "gemm_tma_bf16_nk_bias", d: buffer),
        (bias_and(Activation::Relu), GemmTmaBf16NkBiasRelu, "gemm_tma_bf16_nk_bias_relu", d: buffer),
        (bias_and(Activation::Gelu), GemmTmaBf16NkBiasGelu, "gemm_tma_bf16_nk_bias_gelu", d: buffer),
        (bias_and(Activation::Silu), GemmTmaBf16NkBiasSilu, "gemm_tma_bf16_nk_bias_silu", d: buffer),
        (HAS_D, GemmTmaBf16NkResidual, "gemm_tma_bf16_nk_residual", d: map)
    ],
    with_d: (GemmTmaBf16NkResidualEpilogue, "gemm_tma_bf16_nk_residual_epilogue")
);
tma_gemm!(
    Bf16NkOperands<N192>, Bf16, GemmTmaBf16NkN192, refused, "gemm_tma_bf16_nk_n192", c: map,
    b_k_major: true,
    compiled: [
        (bias_and(Activation::None), GemmTmaBf16NkN192Bias, "gemm_tma_bf16_nk_n192_bias", d: buffer),
        (HAS_D, GemmTmaBf16NkN192Residual, "gemm_tma_bf16_nk_n192_residual", d: map)
    ]
);
tma_gemm!(
    Bf16NkOperands, f32, GemmTmaBf16NkF32, GemmTmaBf16NkF32Epilogue, "gemm_tma_bf16_nk_f32",
    c: buffer, b_k_major: true
);
tma_gemm!(
    Bf16NkOperands<N192>, f32, GemmTmaBf16NkF32N192, refused, "gemm_tma_bf16_nk_f32_n192",
    c: buffer, b_k_major: true
);
tma_gemm!(
    Bf16KmOperands, Bf16, GemmTmaBf16Km, refused, "gemm_tma_bf16_km", c: map, b_k_major: false
);
tma_gemm!(
    Bf16KmOperands, f32, GemmTmaBf16KmF32, GemmTmaBf16KmF32Epilogue, "gemm_tma_bf16_km_f32",
    c: buffer, b_k_major: false
);
tma_gemm!(
    Fp8Operands<E4m3, E4m3>, Bf16, GemmFp8E4m3, GemmFp8E4m3Epilogue, "gemm_fp8_e4m3",
    c: map, b_k_major: true
);
tma_gemm!(
    Fp8Operands<E4m3, E4m3>, f32, GemmFp8E4m3F32, GemmFp8E4m3F32Epilogue, "gemm_fp8_e4m3_f32",
    c: buffer, b_k_major: true
);
tma_gemm!(
    Fp8Operands<E4m3, E5m2>, Bf16, GemmFp8E4m3E5m2, GemmFp8E4m3E5m2Epilogue,
    "gemm_fp8_e4m3_e5m2", c: map, b_k_major: true
);

/// The gated linear units' kernels (bf16 C): the epilogue's activation is the gate's — silu
/// (SwiGLU, `gemm_tma_bf16_swiglu`) or gelu (GeGLU, `gemm_tma_bf16_geglu`); D, a bias or
/// another activation are refused. B is the stacked `[2F, K]` weight of one product.
impl TmaGemm<Bf16> for Bf16GatedOperands {
    const KERNEL: &'static str = "gemm_tma_bf16_swiglu";

    fn kernel_for(flags: u32) -> &'static str {
        if flags == Activation::Gelu.code() << ACTIVATION_SHIFT {
            "gemm_tma_bf16_geglu"
        } else {
            Self::KERNEL
        }
    }

    fn compiled_for(flags: u32) -> bool {
        [Activation::Silu, Activation::Gelu]
            .iter()
            .any(|a| flags == a.code() << ACTIVATION_SHIFT)
    }

    fn takes(flags: u32) -> bool {
        Self::compiled_for(flags)
    }

    fn streams(_flags: u32) -> bool {
        true
    }

    fn b_map<'a>(
        b: &'a DeviceBuffer<Bf16>,
        (k, n, batch): (u32, u32, u32),
    ) -> Result<TensorMap<'a, Bf16, 3>, LaunchError> {
        if batch != 1 {
            return Err(LaunchError::invalid(
                rules::SHAPE_UNSUPPORTED,
                format!("the gated GEMM runs one product; got a batch of {batch}"),
            ));
        }
        // The stacked weight as [2, F, K]: the gate's half, then the up projection's.
        k_major_map(b, (k, n, 2), Self::B_BOX[1])
    }

    fn launch_kernel(
        device: &Device,
        cfg: LaunchConfig,
        (a, b): (&TensorMap<'_, Bf16, 3>, &TensorMap<'_, Bf16, 3>),
        c: &mut DeviceBuffer<Bf16>,
        (d, bias): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        (m, n, k, batch): (u32, u32, u32, u32),
        (alpha, beta, flags): (f32, f32, u32),
        sk: StreamK<'_>,
    ) -> Result<LaunchStats, LaunchError> {
        let mut c = c_map(c, (m, n, batch))?;
        let (parts, tickets, sk_tiles) = (sk.parts, sk.tickets, sk.sk_tiles);
        match Self::kernel_for(flags) {
            _ if !Self::compiled_for(flags) => Err(LaunchError::invalid(
                rules::EPILOGUE_UNSUPPORTED,
                "the gated GEMM's epilogue is its gate's activation, silu (SwiGLU) or gelu (GeGLU); no residual, no bias".to_string(),
            )),
            "gemm_tma_bf16_geglu" => GemmTmaBf16Geglu::launch(
                device, cfg, a, b, &mut c, d, bias, m, n, k, batch, alpha, beta, flags, parts,
                tickets, sk_tiles,
            ),
            _ => GemmTmaBf16Swiglu::launch(
                device, cfg, a, b, &mut c, d, bias, m, n, k, batch, alpha, beta, flags, parts,
                tickets, sk_tiles,
            ),
        }
    }
}

/// The name of the kernel [`launch`] runs for operands `P`, C of type `O` and `epilogue`.
pub fn kernel_name<P: TmaGemm<O>, O: GemmOutput>(epilogue: &EpilogueArgs<'_, O>) -> &'static str {
    P::kernel_for(epilogue.flags())
}

/// `C = act(alpha · A·B + beta · D + bias)` for `batch` products on the TMA kernel of operands
/// `P`: A `[batch, m, k]` (`[batch, k, m]` for [`Bf16KmOperands`]); B `[batch, k, n]` for bf16, `[batch, n, k]` (B transposed) for the
/// 8-bit floats; C and D `[batch, m, n]`; bias `n`; all row-major and contiguous. For fp8 with
/// per-tensor scales `sa`, `sb` (A = A_real / sa), pass `alpha = sa · sb`.
///
/// ```
/// use ck_core::device::{Bf16, E4m3};
/// use ck_core::host::{Device, DeviceBuffer};
/// use ck_kernels::gemm::fused::EpilogueArgs;
/// use ck_kernels::gemm::tma::{host, Fp8Operands};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::emulator();
/// let (m, n, k) = (64u32, 128u32, 256u32);
/// let a: Vec<f32> = (0..m * k).map(|i| (i % 15) as f32 * 0.5 - 3.5).collect(); // [m, k]
/// let bt: Vec<f32> = (0..n * k).map(|i| (i % 8) as f32 * 0.25).collect(); // B as [n, k]
/// let ((qa, sa), (qb, sb)) = (host::quantize::<E4m3>(&a), host::quantize::<E4m3>(&bt));
/// let (a8, b8) = (DeviceBuffer::from_slice(&device, &qa)?, DeviceBuffer::from_slice(&device, &qb)?);
/// let mut c = DeviceBuffer::<Bf16>::zeros(&device, (m * n) as usize)?;
/// let scales = EpilogueArgs { alpha: sa * sb, ..Default::default() };
/// host::launch::<Fp8Operands<E4m3, E4m3>, Bf16>(&device, (&a8, &b8), &mut c, 1, (m, n, k), &scales)?;
/// // The scales are 2⁻⁷ and 2⁻⁸ (3.5 and 1.75 map to 448): every operand is exact in e4m3,
/// // so C[0, 0] = Σ_k a[0, k] · bt[0, k], rounded once to bf16.
/// let want: f32 = (0..k).map(|k| ((k % 15) as f32 * 0.5 - 3.5) * (k % 8) as f32 * 0.25).sum();
/// assert!((c.to_vec()?[0].to_f32() - want).abs() <= want.abs() / 256.0);
/// # Ok(()) }
/// ```
///
/// Where [`schedule`] shares tiles out (few tiles, a long K), the launch uses the device's
/// stream-K workspace ([`PARTS`], [`TICKETS`]): two 128 KiB parts per block of the grid at
/// most (34 MB on 132 SMs), allocated by the first such launch and kept for the next ones.
///
/// Errors: `shape-unsupported` where a row of A, B or C would not start 16-byte aligned (K not
/// a multiple of 8 for bf16 or 16 for fp8, M for A given as `[K, M]`; N not a multiple of 8),
/// and the checks of
/// [`check_problem`].
pub fn launch<P: TmaGemm<O>, O: GemmOutput>(
    device: &Device,
    (a, b): (&DeviceBuffer<P::A>, &DeviceBuffer<P::B>),
    c: &mut DeviceBuffer<O>,
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<LaunchStats, LaunchError> {
    let empty = DeviceBuffer::<O>::empty(device)?;
    let (d, bias) = (
        epilogue.d.unwrap_or(&empty),
        epilogue.bias.unwrap_or(&empty),
    );
    let scalars = (epilogue.alpha, epilogue.beta, epilogue.flags());
    launch_with::<P, O>(
        device,
        (a, b),
        c,
        batch,
        (m, n, k),
        epilogue,
        |cfg, maps, c, sk| {
            P::launch_kernel(
                device,
                cfg,
                maps,
                c,
                (d, bias),
                (m, n, k, batch),
                scalars,
                sk,
            )
        },
    )
}

/// [`launch`]'s checks, tensor maps and schedule (for `epilogue`'s flags), then `kernel` on
/// them: the launch of a kernel that takes more than the epilogue's usual arguments
/// ([`crate::gemm::linear::launch_rope`]).
pub fn launch_with<P: TmaGemm<O>, O: GemmOutput>(
    device: &Device,
    (a, b): (&DeviceBuffer<P::A>, &DeviceBuffer<P::B>),
    c: &mut DeviceBuffer<O>,
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
    kernel: impl FnOnce(
        LaunchConfig,
        (&TensorMap<'_, P::A, 3>, &TensorMap<'_, P::B, 3>),
        &mut DeviceBuffer<O>,
        StreamK<'_>,
    ) -> Result<LaunchStats, LaunchError>,
) -> Result<LaunchStats, LaunchError> {
    if P::A_M_MAJOR && (!m.is_multiple_of(8) || !n.is_multiple_of(8)) {
        return Err(LaunchError::invalid(
            rules::SHAPE_UNSUPPORTED,
            format!(
                "{} moves whole 16-byte rows of A ([K, M]), B and C with TMA: M and N must be multiples of 8 (pad them, or copy A transposed to [M, K] and use the other kernels); got M = {m}, N = {n}",
                kernel_name::<P, O>(epilogue),
            ),
        ));
    }
    if !P::A_M_MAJOR && (!k.is_multiple_of(P::K_MULTIPLE) || !n.is_multiple_of(8)) {
        return Err(LaunchError::invalid(
            rules::SHAPE_UNSUPPORTED,
            format!(
                "{} moves whole 16-byte rows of A, B and C with TMA: K must be a multiple of {} and N of 8 (pad them, or use ck_kernels::gemm::auto::launch_bf16, which takes any N and K without the fused epilogue); got N = {n}, K = {k}",
                kernel_name::<P, O>(epilogue),
                P::K_MULTIPLE,
            ),
        ));
    }
    let b_rows = P::B_PER_C as u64 * n as u64;
    if P::B_PER_C != 1 && b.len() as u64 != batch as u64 * b_rows * k as u64 {
        return Err(LaunchError::invalid(
            rules::SHAPE_MISMATCH,
            format!(
                "B has {} elements; {} writes {n} columns of C from {b_rows} rows of B, {b_rows} × {k} per product",
                b.len(),
                kernel_name::<P, O>(epilogue)
            ),
        ));
    }
    let b_len = b.len() / P::B_PER_C as usize;
    check_problem(batch, (m, n, k), (a.len(), b_len, c.len()), epilogue)?;
    if batch == 0 || m == 0 || n == 0 {
        return Ok(LaunchStats::default());
    }
    // With K = 0 nothing is copied (C is the epilogue of zeros), but a tensor map needs a
    // tensor: maps over one stage of zeros stand in.
    let (stand_in_a, stand_in_b);
    let (a_map, b_map) = if k == 0 {
        stand_in_a = DeviceBuffer::<P::A>::zeros(device, (ROW_BYTES * BM) as usize)?;
        stand_in_b = DeviceBuffer::<P::B>::zeros(device, (ROW_BYTES * P::W::BN) as usize)?;
        (
            a_map::<P, O>(&stand_in_a, (P::BK, BM, 1))?,
            P::b_map(&stand_in_b, (P::BK, P::C_BN, 1))?,
        )
    } else {
        (
            a_map::<P, O>(a, (k, m, batch))?,
            P::b_map(b, (k, n, batch))?,
        )
    };
    let planned = schedule::<P, O>(device, batch, (m, n, k), epilogue);
    let mut workspace = if planned.streams() {
        take_workspace::<P::W>(device, planned)?
    } else {
        None
    };
    let (mut no_parts, mut no_tickets) = (
        DeviceBuffer::<f32>::empty(device)?,
        DeviceBuffer::<u32>::empty(device)?,
    );
    // Without a workspace (a stream being captured into a graph), every tile whole.
    let (schedule, parts, tickets) = match &mut workspace {
        Some((parts, tickets)) => (planned, parts, tickets),
        None => {
            let whole =
                Schedule::whole_tiles(planned.tiles, planned.k_stages, device.multiprocessors());
            (whole, &mut no_parts, &mut no_tickets)
        }
    };
    let stream_k = StreamK {
        parts,
        tickets,
        sk_tiles: schedule.tiles - schedule.dp_tiles,
    };
    let launched = kernel(
        LaunchConfig::new(schedule.grid, THREADS),
        (&a_map, &b_map),
        c,
        stream_k,
    );
    // Kept only after a launch that ran: a failed one may have left tickets counted.
    if let (Some((parts, tickets)), Ok(_)) = (workspace, &launched) {
        device.keep_workspace(PARTS, parts);
        device.keep_workspace(TICKETS, tickets);
    }
    launched
}

/// How [`launch`] shares `batch` products of `m × n × k` with `epilogue` out over the blocks
/// on `device` ([`Schedule::plan`]): the last tiles in stream-K where that pays and the kernel
/// can (not where D comes through the ring; on a GPU, only tiles of at least
/// [`stream_k::GPU_MIN_SHARED_STAGES`] stages). Where the device gives no workspace (its stream
/// is being captured into a CUDA graph), [`launch`] runs every tile whole instead.
pub fn schedule<P: TmaGemm<O>, O: GemmOutput>(
    device: &Device,
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Schedule {
    let tiles = batch * m.div_ceil(BM) * n.div_ceil(P::C_BN);
    let (k_stages, sms) = (k.div_ceil(P::BK), device.multiprocessors());
    let floor = if device.is_emulator() {
        1
    } else {
        stream_k::GPU_MIN_SHARED_STAGES
    };
    if P::streams(epilogue.flags()) {
        Schedule::plan(tiles, k_stages, sms, floor)
    } else {
        Schedule::whole_tiles(tiles, k_stages, sms)
    }
}

/// The names of the stream-K kernels' workspaces ([`Device::take_workspace`]; every width
/// shares them): the parts, and the tickets, which every launch leaves at zero.
pub const PARTS: &str = "gemm_tma stream-K parts";
pub const TICKETS: &str = "gemm_tma stream-K tickets";

/// The device's stream-K workspace for `schedule` in tiles `W` wide: a part of each block's
/// accumulators per slot, and a ticket per stream-K tile. `None` where the device gives none
/// (a stream being captured into a CUDA graph).
#[allow(clippy::type_complexity)]
fn take_workspace<W: Width>(
    device: &Device,
    schedule: Schedule,
) -> Result<Option<(DeviceBuffer<f32>, DeviceBuffer<u32>)>, LaunchError> {
    let part = stream_k::Parts::part_elems::<W>() as usize;
    let slots = stream_k::Schedule::slots(schedule.grid) as usize;
    let parts = device.take_workspace::<f32>(PARTS, slots * part)?;
    let sk_tiles = (schedule.tiles - schedule.dp_tiles) as usize;
    let tickets = device.take_workspace::<u32>(TICKETS, sk_tiles)?;
    Ok(parts.zip(tickets))
}

/// `x` in the 8-bit format `T` with a per-tensor scale: `(q, s)` with `x ≈ s · q`, `s` mapping
/// the largest finite magnitude of `x` to `T::MAX` (1 when there is none but zeros);
/// infinities saturate to `±T::MAX`, NaN stays NaN.
pub fn quantize<T: Fp8>(x: &[f32]) -> (Vec<T>, f32) {
    let amax = x
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f32, |m, v| m.max(v.abs()));
    let scale = if amax > 0.0 { amax / T::MAX } else { 1.0 };
    (x.iter().map(|&v| T::from_f32(v / scale)).collect(), scale)
}

/// `B` `[batch, k, n]` as `[batch, n, k]`: the fp8 kernels' layout of B.
pub fn transpose_batched(b: &[f32], batch: u32, (k, n): (u32, u32)) -> Vec<f32> {
    let (k, n) = (k as usize, n as usize);
    (0..batch as usize * k * n)
        .map(|i| {
            let (p, r) = (i / (k * n), i % (k * n));
            b[p * k * n + (r % k) * n + r / k]
        })
        .collect()
}

/// `C = act(alpha · A·B + beta · D + bias)` for `batch` products from host values, with A and
/// B quantised to e4m3 per tensor ([`quantize`]; B given as `[batch, k, n]` and transposed
/// here, the fp8 kernels' layout) and the scales folded into alpha: C (`O`) widened to f32.
pub fn gemm_fp8<O: GemmOutput>(
    device: &Device,
    (a, b): (&[f32], &[f32]),
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: HostEpilogue<'_>,
) -> Result<(Vec<f32>, LaunchStats), LaunchError>
where
    Fp8Operands<E4m3, E4m3>: TmaGemm<O>,
{
    let lens = (a.len(), b.len());
    // Only transposed when its length is right (the shared check below reports a wrong one).
    let bt = if b.len() == batch as usize * (k * n) as usize {
        transpose_batched(b, batch, (k, n))
    } else {
        Vec::new()
    };
    let ((qa, sa), (qb, sb)) = (quantize::<E4m3>(a), quantize::<E4m3>(&bt));
    let (ad, bd) = (
        DeviceBuffer::from_slice(device, &qa)?,
        DeviceBuffer::from_slice(device, &qb)?,
    );
    let scaled = HostEpilogue {
        alpha: epilogue.alpha * sa * sb,
        ..epilogue
    };
    run_on_host_values(lens, batch, (m, n, k), device, scaled, |c, args| {
        launch::<Fp8Operands<E4m3, E4m3>, O>(device, (&ad, &bd), c, batch, (m, n, k), args)
    })
}
