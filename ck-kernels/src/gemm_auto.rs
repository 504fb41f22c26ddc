//! The bf16 tensor-core GEMM with the kernel chosen for the problem: what `ck run gemm` and the
//! Python binding call. `C = act(alpha · A·B + beta · D + bias)`, bf16 A and B, f32 or bf16 C.
//!
//! The rule, from measurements on an H100 (`notes/README.md`, "Where the plain TMA kernel
//! pays" and "gemm_auto's rule still holds"):
//!
//! | problem | kernel |
//! |---|---|
//! | N or K not a multiple of 8 | `gemm_bf16` (`mma.sync`; no fused epilogue) — refused here |
//! | all 128 × 128 tiles fit in one wave | `gemm_bf16_wgmma_n128*` (`cp.async`) |
//! | one product, bf16 C, bias and an activation | `gemm_tma_bf16_bias*` (TMA, warp-specialised, persistent, compiled for that epilogue) |
//! | one product, bf16 C, alpha alone, and K ≤ 1024 or ≥ 2048 tiles of 128 × 256 | `gemm_tma_bf16` |
//! | otherwise | `gemm_bf16_wgmma*` (`cp.async`, 128 × 256 tiles) |
//!
//! Measured on an H100 with the TMA kernels storing C by the copy engine (TFLOP/s, TMA against
//! `cp.async`): the plain GEMM 613–658 / 581 at 8192×8192×1024, 648–664 / 565–583 at
//! 4096×4096×1024 and 16384×4096×1024, 670–687 / 658–676 at 8192³ — but 666 / 680–693 at 1024
//! tiles with K = 4096, 674 / 726 at 6144³ and 730 / 741 at 2048×8192×8192 (the rule's one
//! miss: 720 / 700 at 4096×4096×16384); bias + GELU
//! 507–700 / 433–615 at the three benchmark shapes. With f32 C, a batch of products, or an
//! epilogue read from the flags at run time (D) the `cp.async` kernels were as fast or faster.

use crate::gemm::host::Bf16Kernel;
use crate::gemm_fused::HostEpilogue;
use crate::gemm_fused::{launch_batched, run_on_host_values, upload, EpilogueArgs, GemmOutput};
use crate::gemm_tma::host::{kernel_name, launch as launch_tma, TmaGemm};
use crate::gemm_tma::{Bf16Operands, BM, BN};
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchError, LaunchStats};

/// C's element types: whether their GEMMs may run on a TMA kernel, and the bf16-operand TMA
/// kernels' entry points for them ([`crate::gemm_tma::host`], which depends on this crate's
/// fused-GEMM host code and so cannot be a bound of [`GemmOutput`]).
pub trait AutoOutput: GemmOutput {
    /// bf16 C: yes; f32 C: no (the `cp.async` kernels were as fast or faster).
    const TMA: bool;
    /// [`TmaGemm::compiled_for`]: a TMA kernel is compiled for the epilogue of `flags`.
    fn compiled_for(flags: u32) -> bool;
    /// [`crate::gemm_tma::host::launch`] for one product of bf16 operands.
    fn launch_tma(
        device: &Device,
        ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<Self>,
        mnk: (u32, u32, u32),
        epilogue: &EpilogueArgs<'_, Self>,
    ) -> Result<LaunchStats, LaunchError>;
    /// [`kernel_name`]: the TMA kernel that runs `epilogue`.
    fn tma_name(epilogue: &EpilogueArgs<'_, Self>) -> &'static str;
}

macro_rules! auto_output {
    ($o:ty, $tma:literal) => {
        impl AutoOutput for $o {
            const TMA: bool = $tma;
            fn compiled_for(flags: u32) -> bool {
                <Bf16Operands as TmaGemm<$o>>::compiled_for(flags)
            }
            fn launch_tma(
                device: &Device,
                ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
                c: &mut DeviceBuffer<$o>,
                mnk: (u32, u32, u32),
                epilogue: &EpilogueArgs<'_, $o>,
            ) -> Result<LaunchStats, LaunchError> {
                launch_tma::<Bf16Operands, $o>(device, ab, c, 1, mnk, epilogue)
            }
            fn tma_name(epilogue: &EpilogueArgs<'_, $o>) -> &'static str {
                kernel_name::<Bf16Operands, $o>(epilogue)
            }
        }
    };
}
auto_output!(Bf16, true);
auto_output!(f32, false);

/// The kernel [`launch`] runs for `batch` products of `m × k` by `k × n` with `epilogue`.
pub enum Choice {
    /// A `cp.async` wgmma kernel (or `mma.sync`, which [`launch`] refuses).
    Wgmma(Bf16Kernel),
    /// The TMA kernel.
    Tma,
}

/// The choice of the table in the module documentation.
pub fn choose<O: AutoOutput>(
    device: &Device,
    batch: u32,
    (m, n, k): (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Choice {
    let kernel = Bf16Kernel::for_shape(device, (batch.saturating_mul(m), n, k));
    let flags = epilogue.flags();
    let tiles = m.div_ceil(BM) as u64 * n.div_ceil(BN) as u64;
    let plain_pays = k <= 1024 || tiles >= 2048;
    if O::TMA
        && batch == 1
        && kernel == Bf16Kernel::Wgmma128x256
        && O::compiled_for(flags)
        && (flags != 0 || plain_pays)
    {
        Choice::Tma
    } else {
        Choice::Wgmma(kernel)
    }
}

/// `C = act(alpha · A·B + beta · D + bias)` for `batch` products on device buffers (A
/// `[batch, m, k]`, B `[batch, k, n]`, C and D `[batch, m, n]`, bias `n`, row-major) on the
/// kernel [`choose`] picks; returns the launch's statistics and the kernel's name. Errors as
/// [`crate::gemm_fused::launch_batched`] (N and K must be multiples of 8).
pub fn launch<O: AutoOutput>(
    device: &Device,
    ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    c: &mut DeviceBuffer<O>,
    batch: u32,
    mnk: (u32, u32, u32),
    epilogue: &EpilogueArgs<'_, O>,
) -> Result<(LaunchStats, &'static str), LaunchError> {
    match choose(device, batch, mnk, epilogue) {
        Choice::Tma => Ok((
            O::launch_tma(device, ab, c, mnk, epilogue)?,
            O::tma_name(epilogue),
        )),
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
/// use ck_kernels::gemm_auto::gemm;
/// use ck_kernels::gemm_fused::HostEpilogue;
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
