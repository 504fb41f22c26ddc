//! The GEMM peer of `ck bench gemm`: cuBLASLt ([`ck_core::host::cublas_lt`]) timed in the same
//! process, sample for sample in turn with each of our kernels, so that both run at the same
//! clocks; and the row that reports the two.
//!
//! Where cuBLASLt cannot be loaded (or on the emulator), the peer column comes from the
//! `--peers` file of `scripts/bench_peers.py`, measured by torch in a separate process: that
//! number is a short burst on a GPU that may be cooler or hotter than during our rows (on an
//! H100 a sustained cuBLAS 4096³ falls from ~790 to ~660–700 TFLOP/s within a second, held by
//! the power cap), so the row says which peer it shows.

use super::common::launch_error;
use super::timing::{median, sample};
use super::CliError;
use ck_core::device::{Bf16, Element, Real};
use ck_core::host::cublas_lt::{CublasLt, LtProblem};
use ck_core::host::{Device, DeviceBuffer, LaunchError};
use ck_core::rules;
use serde_json::{json, Value};
use std::time::Duration;

/// Our kernel's median time and, where cuBLASLt ran beside it, the peer's.
#[derive(Clone, Copy)]
pub(super) struct Timed {
    pub ours: Duration,
    pub peer: Option<Duration>,
}

/// cuBLASLt where it loads, and the `--peers` file.
pub(super) struct GemmPeer<'a> {
    lt: Option<CublasLt>,
    file: &'a Value,
}

impl<'a> GemmPeer<'a> {
    /// Loads cuBLASLt on a GPU; says on stderr why not where it cannot.
    pub fn open(device: &Device, file: &'a Value) -> GemmPeer<'a> {
        let lt = if device.is_emulator() {
            None
        } else {
            CublasLt::open(device)
                .map_err(|e| {
                    eprintln!(
                        "note: no in-process cuBLASLt peer ({}); the cuBLAS column comes from --peers",
                        e.message()
                    )
                })
                .ok()
        };
        GemmPeer { lt, file }
    }

    /// Times `ours` (our kernel `kernel` writing `ours_c`) and, where cuBLASLt loaded, its
    /// `problem` on `a` and `b` (with `inputs`: the bias, the residual) into a C of its own:
    /// `iters` samples of each in turn, after `warmup` runs of each. Then the two Cs must agree
    /// (`‖ours − peer‖ / ‖peer‖` under 1e-2): a peer fed the operands the wrong way round, or
    /// a kernel that computes something else, is an error rather than a ratio. A problem
    /// cuBLASLt has no algorithm for is timed without the peer (and says so on stderr).
    #[allow(clippy::too_many_arguments)]
    pub fn time<A: Element, C: Real>(
        &self,
        device: &Device,
        (warmup, iters): (usize, usize),
        (problem, kernel): (LtProblem, &str),
        (a, b): (&DeviceBuffer<A>, &DeviceBuffer<A>),
        inputs: (Option<&DeviceBuffer<Bf16>>, Option<&DeviceBuffer<C>>),
        ours_c: &mut DeviceBuffer<C>,
        mut ours: impl FnMut(&Device, &mut DeviceBuffer<C>) -> Result<(), LaunchError>,
    ) -> Result<Timed, CliError> {
        let planned = self.lt.as_ref().and_then(|lt| match lt.plan(problem) {
            Ok(gemm) => Some((lt, gemm)),
            Err(e) => {
                eprintln!("note: {kernel}: no cuBLASLt peer for this problem ({e})");
                None
            }
        });
        let Some((lt, gemm)) = planned else {
            let t = super::timing::timed(device, warmup, iters, |d| ours(d, ours_c))
                .map_err(launch_error)?;
            return Ok(Timed {
                ours: t,
                peer: None,
            });
        };
        let len = problem.batch as usize * problem.m as usize * problem.n as usize;
        let mut c = DeviceBuffer::<C>::zeros(device, len).map_err(launch_error)?;
        let (t_ours, t_peer) = in_turn(
            device,
            (warmup, iters),
            |d| ours(d, ours_c),
            |d| lt.run(&gemm, d, (a, b), &mut c, inputs),
        )?;
        let error = relative_error(ours_c, &c).map_err(launch_error)?;
        agree(kernel, &format!("{problem:?}"), error)?;
        Ok(Timed {
            ours: t_ours,
            peer: Some(t_peer),
        })
    }

    /// Times `ours` (a grouped kernel writing `ours_c`, problem `g`'s C from element
    /// `c_at[g]`) against what a framework without a grouped GEMM runs — a loop of cuBLASLt
    /// products, one per problem `(m, n, k)` on its own operands `ab[g]` into a C of its own
    /// (torch's `mm` loop) — in turn, as [`GemmPeer::time`]; then every problem's C must
    /// agree. Without cuBLASLt, `ours` alone.
    #[allow(clippy::too_many_arguments)]
    pub fn time_loop(
        &self,
        device: &Device,
        (warmup, iters): (usize, usize),
        (problems, kernel): (&[(u32, u32, u32)], &str),
        ab: &[(DeviceBuffer<Bf16>, DeviceBuffer<Bf16>)],
        (ours_c, c_at): (&mut DeviceBuffer<Bf16>, &[usize]),
        mut ours: impl FnMut(&Device, &mut DeviceBuffer<Bf16>) -> Result<(), LaunchError>,
    ) -> Result<Timed, CliError> {
        let Some(lt) = &self.lt else {
            let t = super::timing::timed(device, warmup, iters, |d| ours(d, ours_c))
                .map_err(launch_error)?;
            return Ok(Timed {
                ours: t,
                peer: None,
            });
        };
        let mut planned = Vec::with_capacity(problems.len());
        for &(m, n, k) in problems {
            let gemm = lt.plan(LtProblem::bf16(m, n, k)).map_err(launch_error)?;
            let c = DeviceBuffer::<Bf16>::zeros(device, (m * n) as usize).map_err(launch_error)?;
            planned.push((gemm, c));
        }
        let (t_ours, t_peer) = in_turn(
            device,
            (warmup, iters),
            |d| ours(d, ours_c),
            |d| {
                for ((gemm, c), (a, b)) in planned.iter_mut().zip(ab) {
                    lt.run(gemm, d, (a, b), c, (None, None))?;
                }
                Ok(())
            },
        )?;
        let ours_c = ours_c.to_vec().map_err(launch_error)?;
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for ((_, c), &at) in planned.iter().zip(c_at) {
            let peer = c.to_vec().map_err(launch_error)?;
            got.extend(ours_c[at..at + peer.len()].iter().map(|v| v.to_f32()));
            want.extend(peer.iter().map(|v| v.to_f32() as f64));
        }
        let error = ck_kernels::checks::norm_relative_error(&got, &want);
        agree(kernel, &format!("{} problems", problems.len()), error)?;
        Ok(Timed {
            ours: t_ours,
            peer: Some(t_peer),
        })
    }

    /// One row: `case` (`"{dtype} {shape}"`), our kernel's TFLOP/s for `flop` operations, and
    /// the peer's: cuBLASLt timed in turn where it ran (then the file's figure, measured by
    /// torch, as `torch_tflops`), else the `--peers` file's `{dtype}_tflops` for `shape`.
    pub fn row(&self, (dtype, shape): (&str, &str), kernel: &str, flop: f64, t: Timed) -> Value {
        let tflops = |t: Duration| flop / t.as_secs_f64() / 1e12;
        let ours = tflops(t.ours);
        let mut row = json!({
            "case": format!("{dtype} {shape}"),
            "kernel": kernel,
            "ms": t.ours.as_secs_f64() * 1e3,
            "ours_tflops": ours,
        });
        let file = self.file["gemm"][shape][format!("{dtype}_tflops")].as_f64();
        let (peer, source) = match (t.peer, file) {
            (Some(p), _) => (Some(tflops(p)), "cuBLASLt, in turn"),
            (None, Some(f)) => (Some(f), "--peers file"),
            (None, None) => (None, ""),
        };
        if let Some(p) = peer {
            row["cublas_tflops"] = json!(p);
            row["vs_cublas"] = json!(ours / p);
            row["peer"] = json!(source);
        }
        if let (Some(_), Some(f)) = (t.peer, file) {
            row["torch_tflops"] = json!(f);
        }
        row
    }
}

/// `iters` samples of `ours` and of `peer` in turn, after `warmup` runs of each (at least one,
/// for the comparison of their results): their medians.
fn in_turn(
    device: &Device,
    (warmup, iters): (usize, usize),
    mut ours: impl FnMut(&Device) -> Result<(), LaunchError>,
    mut peer: impl FnMut(&Device) -> Result<(), LaunchError>,
) -> Result<(Duration, Duration), CliError> {
    for _ in 0..warmup.max(1) {
        ours(device).map_err(launch_error)?;
        peer(device).map_err(launch_error)?;
    }
    // Ours, peer, peer, ours, …: a clock that drifts within a pair of samples favours neither.
    let (mut t_ours, mut t_peer) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    for i in 0..iters {
        if i % 2 == 0 {
            t_ours.push(sample(device, &mut ours).map_err(launch_error)?);
            t_peer.push(sample(device, &mut peer).map_err(launch_error)?);
        } else {
            t_peer.push(sample(device, &mut peer).map_err(launch_error)?);
            t_ours.push(sample(device, &mut ours).map_err(launch_error)?);
        }
    }
    Ok((median(t_ours), median(t_peer)))
}

/// An error (`wrong-result`) unless our kernel and the peer agree on `what` (relative error
/// under 1e-2): a peer fed the operands the wrong way round, or a kernel that computes
/// something else, is an error rather than a ratio.
fn agree(kernel: &str, what: &str, error: f64) -> Result<(), CliError> {
    if error.is_nan() || error >= 1e-2 {
        return Err(CliError::new(
            rules::WRONG_RESULT,
            format!("{kernel} and the cuBLASLt peer disagree on {what}: relative error {error:.2e} (at most 1e-2 expected)"),
        ));
    }
    Ok(())
}

/// `‖x − y‖ / ‖y‖` over every element ([`ck_kernels::checks::norm_relative_error`]).
fn relative_error<C: Real>(x: &DeviceBuffer<C>, y: &DeviceBuffer<C>) -> Result<f64, LaunchError> {
    let x: Vec<f32> = x.to_vec()?.into_iter().map(C::to_f32).collect();
    let y: Vec<f64> = y.to_vec()?.into_iter().map(|v| v.to_f32() as f64).collect();
    Ok(ck_kernels::checks::norm_relative_error(&x, &y))
}
