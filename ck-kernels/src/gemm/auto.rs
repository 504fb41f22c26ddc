//! The bf16 tensor-core GEMM with the kernel chosen for the problem: what `ck run gemm` and the
//! Python binding call. `C = act(alpha · A·B + beta · D + bias)`, bf16 A and B, f32 or bf16 C.
//!
//! The rule, from measurements on an H100 (`notes/gemm.md`, "The GEMM peer in the same
//! process"):
//!
//! | problem | kernel |
//! |---|---|
//! | N or K not a multiple of 8 | `gemm_bf16` (`mma.sync`; no fused epilogue) — refused here |
//! | all 128 × 128 tiles fit in one wave, and a TMA kernel for the epilogue would share its tiles' K stages out (few tiles, a long K — on a GPU tiles of at least 64 K stages: `gemm::tma::stream_k`; not on a stream being captured into a CUDA graph) | `gemm_tma_bf16*` in 128 × 256 or 128 × 192 tiles, the fewer estimated stages |
//! | otherwise, all 128 × 128 tiles fit in one wave | `gemm_bf16_wgmma_n128*` (`cp.async`) |
//! | alpha alone (bf16 or f32 C), or bf16 C with a bias and an activation or with D alone, where 128 × 192 tiles spend ≥ 5 % more of the machine's time on C than 128 × 256 ones (`wave_efficiency`: 3072³, 1536³, …) | `gemm_tma_bf16*_n192*` |
//! | an epilogue a TMA kernel is compiled for: alpha alone (bf16 or f32 C), bf16 C with a bias and an activation, or bf16 C with a residual (`alpha · A·B + beta · D`) and a bias and an activation or neither; and bf16 C with a residual and an activation alone (`gemm_tma_bf16_residual_epilogue`, D through the ring, the activation read at run time); any batch | `gemm_tma_bf16*` (TMA, warp-specialised, persistent) |
//! | otherwise (an activation without a bias or D, f32 C with D or a bias) | `gemm_bf16_wgmma*` (`cp.async`, 128 × 256 tiles) |
//!
//! Measured on an H100 against cuBLASLt timed in turn in the same process (`ck bench gemm`), as
//! a fraction of it, TMA / `cp.async`: bf16 C 0.98–1.00 / 0.90–0.95 on the shapes from 2048³ to
//! 4096×4096×16384 and 0.97–0.99 / 0.78–0.84 at K = 1024; f32 C 0.91–1.04 / 0.81–0.96 (a tie at
//! 2048³); 16 products of 2048³ 0.98–1.03 / 0.85. Timed one after the other instead, the
//! `cp.async` kernel, which ran first on a cooler GPU, had seemed the faster at K ≥ 4096. Where
//! the 256-wide tiles leave the last wave mostly idle the 192-wide ones win: 3072³ 0.98–0.99
//! against 0.76–0.77 (f32 C 0.95 against 0.74), 2048×3072×3072 1.00–1.01 against 0.79–0.82.

use crate::gemm::choice::Bf16Kernel;
use crate::gemm::fused::HostEpilogue;
use crate::gemm::fused::{launch_batched, run_on_host_values, upload, EpilogueArgs, GemmOutput};
use crate::gemm::mma_sync::host::{check_shapes, config};
use crate::gemm::mma_sync::GemmBf16;
use crate::gemm::tma::host::{kernel_name, launch as launch_tma, schedule, TmaGemm};
use crate::gemm::tma::stream_k::Schedule;
use crate::gemm::tma::{Bf16Operands, Width, BM, N192, N256};
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchError, LaunchStats};

/// How much more of the machine's time the 192-wide tiles must spend on C's own elements
/// than the 256-wide ones before they are chosen (they copy 11 % more bytes per FLOP). On an
/// H100 they tie at equal shares (6144³) and win by 4–6 % at 6.5 % more (5632×5632×4096).
pub(crate) const NARROW_GAIN: f64 = 1.05;

/// C's element types: whether their GEMMs may run on a TMA kernel, and the bf16-operand TMA
/// kernels' entry points for them ([`crate::gemm::tma::host`], which depends on this crate's
/// fused-GEMM host code and so cannot be a bound of [`GemmOutput`]).
pub trait AutoOutput: GemmOutput {
    /// [`TmaGemm::takes`]: a TMA kernel runs the epilogue of `flags` at full speed.
    fn tma_takes(flags: u32) -> bool;
    /// The same for the 128 × 192 tiles.
    fn narrow_takes(flags: u32) -> bool;
    /// [`crate::gemm::tma::host::launch`] for `batch` products of bf16 operands, in 128 × 256
    /// tiles or, `narrow`, 128 × 192 ones.
    fn launch_tma(
        device: &Device,
        ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<Self>,
        batch_mnk: (u32, (u32, u32, u32)),
        epilogue: &EpilogueArgs<'_, Self>,
        narrow: bool,
    ) -> Result<LaunchStats, LaunchError>;
    /// [`kernel_name`]: the TMA kernel that runs `epilogue` (in `narrow` tiles).
    fn tma_name(epilogue: &EpilogueArgs<'_, Self>, narrow: bool) -> &'static str;
    /// [`schedule`]: how that kernel shares the tiles out over its blocks.
    fn tma_schedule(
        device: &Device,
        batch_mnk: (u32, (u32, u32, u32)),
        epilogue: &EpilogueArgs<'_, Self>,
        narrow: bool,
    ) -> Schedule;
}

macro_rules! auto_output {
    ($o:ty) => {
        impl AutoOutput for $o {
            fn tma_takes(flags: u32) -> bool {
                <Bf16Operands as TmaGemm<$o>>::takes(flags)
            }
            fn narrow_takes(flags: u32) -> bool {
                <Bf16Operands<N192> as TmaGemm<$o>>::takes(flags)
            }
            fn launch_tma(
                device: &Device,
                ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
                c: &mut DeviceBuffer<$o>,
                (batch, mnk): (u32, (u32, u32, u32)),
                epilogue: &EpilogueArgs<'_, $o>,
                narrow: bool,
            ) -> Result<LaunchStats, LaunchError> {
                if narrow {
                    launch_tma::<Bf16Operands<N192>, $o>(device, ab, c, batch, mnk, epilogue)
                } else {
                    launch_tma::<Bf16Operands, $o>(device, ab, c, batch, mnk, epilogue)
                }
            }
            fn tma_name(epilogue: &EpilogueArgs<'_, $o>, narrow: bool) -> &'static str {
                if narrow {
                    kernel_name::<Bf16Operands<N192>, $o>(epilogue)
                } else {
                    kernel_name::<Bf16Operands, $o>(epilogue)
                }
            }
            fn tma_schedule(
                device: &Device,
                (batch, mnk): (u32, (u32, u32, u32)),
                epilogue: &EpilogueArgs<'_, $o>,
                narrow: bool,
            ) -> Schedule {
                if narrow {
                    schedule::<Bf16Operands<N192>, $o>(device, batch, mnk, epilogue)
                } else {
                    schedule::<Bf16Operands, $o>(device, batch, mnk, epilogue)
                }
            }
        }
    };
}
auto_output!(Bf16);
auto_output!(f32);

/// The kernel [`launch`] runs for `batch` products of `m × k` by `k × n` with `epilogue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// A `cp.async` wgmma kernel (or `mma.sync`, which [`launch`] refuses).
    Wgmma(Bf16Kernel),
    /// The TMA kernel (128 × 256 tiles).
    Tma,
    /// The TMA kernel with 128 × 192 tiles.
    TmaN192,
}

/// The share of the multiprocessors' time a grid of `w`-wide tiles spends on C's own elements:
/// `batch · m · n` over the tiles' area in whole waves of `sms`.
pub(crate) fn wave_efficiency(batch: u32, (m, n): (u32, u32), w: u32, sms: u32) -> f64 {
    let tiles = batch as u64 * m.div_ceil(BM) as u64 * n.div_ceil(w) as u64;
    let waves = tiles.div_ceil(sms.max(1) as u64);
    let area = waves * sms as u64 * (BM * w) as u64;
    batch as f64 * m as f64 * n as f64 / area as f64
}

/// The choice of the table in the module documentation.
pub fn choose<O: AutoOutput>(
    device: &Device,
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Choice {
    let kernel = Bf16Kernel::for_shape(device, (batch.saturating_mul(m), n, k));
    if !O::tma_takes(epilogue.flags()) {
        return Choice::Wgmma(kernel);
    }
    match kernel {
        Bf16Kernel::Wgmma128x256 => {
            let sms = device.multiprocessors();
            let narrow = wave_efficiency(batch, (m, n), N192::BN, sms);
            let wide = wave_efficiency(batch, (m, n), N256::BN, sms);
            if O::narrow_takes(epilogue.flags()) && narrow > NARROW_GAIN * wide {
                return Choice::TmaN192;
            }
            Choice::Tma
        }
        Bf16Kernel::Wgmma128x128 => {
            shared_out(device, (batch, (m, n, k)), epilogue).unwrap_or(Choice::Wgmma(kernel))
        }
        Bf16Kernel::MmaSync => Choice::Wgmma(kernel),
    }
}

/// The TMA kernel for a problem of one wave of 128 × 128 tiles where a TMA kernel would share
/// its tiles' K stages out over idle multiprocessors ([`crate::gemm::tma::stream_k`]; only where
/// the device gives a workspace, not while its stream is being captured into a CUDA graph): of
/// the two widths, the one of
/// fewer estimated stages (a 192-wide stage counting 3/4 of a 256-wide one). On an H100,
/// 1024×1024×8192 ran in 47 µs on 128 × 256 tiles against the `cp.async` 128 × 128 kernel's
/// 58, and 512×2048×16384 in 63 µs on 128 × 192 tiles against 112.
fn shared_out<O: AutoOutput>(
    device: &Device,
    batch_mnk: (u32, (u32, u32, u32)),
    epilogue: &EpilogueArgs<'_, O>,
) -> Option<Choice> {
    if !device.keeps_workspaces() {
        return None;
    }
    let wide = O::tma_schedule(device, batch_mnk, epilogue, false);
    let narrow = O::narrow_takes(epilogue.flags())
        .then(|| O::tma_schedule(device, batch_mnk, epilogue, true));
    if !wide.streams() && !narrow.is_some_and(|s| s.streams()) {
        return None;
    }
    match narrow {
        Some(narrow) if 3 * narrow.cost() < 4 * wide.cost() => Some(Choice::TmaN192),
        _ => Some(Choice::Tma),
    }
}

/// `C = act(alpha · A·B + beta · D + bias)` for `batch` products on device buffers (A
/// `[batch, m, k]`, B `[batch, k, n]`, C and D `[batch, m, n]`, bias `n`, row-major) on the
/// kernel [`choose`] picks; returns the launch's statistics and the kernel's name. Errors as
/// [`crate::gemm::fused::launch_batched`] (N and K must be multiples of 8).
pub fn launch<O: AutoOutput>(
    device: &Device,
    ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<O>,
    batch: u32,
    mnk: (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<(LaunchStats, &'static str), LaunchError> {
    let choice = choose(device, batch, mnk, epilogue);
    match choice {
        Choice::Tma | Choice::TmaN192 => {
            let narrow = choice == Choice::TmaN192;
            Ok((
                O::launch_tma(device, ab, c, (batch, mnk), epilogue, narrow)?,
                O::tma_name(epilogue, narrow),
            ))
        }
        Choice::Wgmma(kernel) => Ok((
            launch_batched(device, kernel, ab, c, batch, mnk, epilogue)?,
            kernel.name(),
        )),
    }
}

/// [`launch`] from host values (A `[batch, m, k]`, B `[batch, k, n]`, D and C `[batch, m, n]`):
/// A and B rounded to bf16, D and bias to `O`, C (`O`) widened to f32.
///
/// ```
/// use ck_core::device::Bf16;
/// use ck_core::host::Device;
/// use ck_kernels::gemm::auto::gemm;
/// use ck_kernels::gemm::fused::HostEpilogue;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::emulator();
/// let (m, n, k) = (2u32, 8u32, 16u32);
/// let a = vec![0.5f32; (m * k) as usize];
/// let b = vec![0.25f32; (k * n) as usize];
/// let (c, _) = gemm::<Bf16>(&device, (&a, &b), 1, (m, n, k), HostEpilogue::default())?;
/// assert!(c.iter().all(|&v| v == 16.0 * 0.5 * 0.25)); // exact in bf16
/// # Ok(()) }
/// ```
pub fn gemm<O: AutoOutput>(
    device: &Device,
    (a, b): (&[f32], &[f32]),
    batch: u32,
    mnk: (u32, u32, u32),
    epilogue: HostEpilogue<'_>,
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    let (ad, bd) = (upload::<Bf16>(device, a)?, upload::<Bf16>(device, b)?);
    run_on_host_values::<O>(
        (a.len(), b.len()),
        batch,
        mnk,
        device,
        epilogue,
        |c, args| launch(device, (&ad, &bd), c, batch, mnk, args).map(|(stats, _)| stats),
    )
}

// The bf16 GEMM with f32 C and no epilogue, on any shape: the `mma.sync` kernel where N or K is
// not a multiple of 8, else the `cp.async` wgmma kernel [`Bf16Kernel::for_shape`] picks.

/// The bf16 GEMM on device buffers, with the kernel [`Bf16Kernel::for_shape`] picks.
pub fn launch_bf16(
    device: &Device,
    a: &DeviceBuffer<Bf16>,
    b: &DeviceBuffer<Bf16>,
    c: &mut DeviceBuffer<f32>,
    shape: (u32, u32, u32),
) -> Result<LaunchStats, LaunchError> {
    launch_bf16_with(device, Bf16Kernel::for_shape(device, shape), a, b, c, shape)
}

/// The bf16 GEMM on device buffers with `kernel`; `shape-unsupported` for a wgmma kernel
/// where N or K is not a multiple of 8.
pub fn launch_bf16_with(
    device: &Device,
    kernel: Bf16Kernel,
    a: &DeviceBuffer<Bf16>,
    b: &DeviceBuffer<Bf16>,
    c: &mut DeviceBuffer<f32>,
    (m, n, k): (u32, u32, u32),
) -> Result<LaunchStats, LaunchError> {
    if kernel == Bf16Kernel::MmaSync {
        return GemmBf16::launch(device, config(m, n), a, b, c, m, n, k);
    }
    if !crate::gemm::wgmma::whole_vector_rows(n, k) {
        return Err(LaunchError::invalid(
            ck_core::rules::SHAPE_UNSUPPORTED,
            format!("{} needs N and K to be multiples of 8 (16-byte rows); got N = {n}, K = {k} (launch_bf16 sends such shapes to gemm_bf16)", kernel.name()),
        ));
    }
    let plain = EpilogueArgs::default();
    crate::gemm::fused::launch(device, kernel, (a, b), c, (m, n, k), &plain)
}

/// `A · B` with A and B rounded to bf16, on the tensor-core kernel
/// [`Bf16Kernel::for_shape`] picks (f32 accumulation).
pub fn gemm_bf16(
    device: &Device,
    a: &[f32],
    b: &[f32],
    shape: (u32, u32, u32),
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    gemm_bf16_with(device, Bf16Kernel::for_shape(device, shape), a, b, shape)
}

/// `A · B` with A and B rounded to bf16, on `kernel`.
pub fn gemm_bf16_with(
    device: &Device,
    kernel: Bf16Kernel,
    a: &[f32],
    b: &[f32],
    shape: (u32, u32, u32),
) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
    check_shapes(a, b, shape)?;
    let round = |v: &[f32]| v.iter().map(|&x| Bf16::from_f32(x)).collect::<Vec<_>>();
    let (ad, bd) = (
        DeviceBuffer::from_slice(device, &round(a))?,
        DeviceBuffer::from_slice(device, &round(b))?,
    );
    let mut cd = DeviceBuffer::from_slice(device, &vec![f32::NAN; (shape.0 * shape.1) as usize])?;
    let st = launch_bf16_with(device, kernel, &ad, &bd, &mut cd, shape)?;
    Ok((cd.to_vec()?, st))
}
