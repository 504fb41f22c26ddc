//! How `ck bench` times a kernel: CUDA events around launches queued back to back (the
//! emulator: wall time), the median of the samples.

use ck_core::host::{Device, LaunchError};
use std::time::Duration;

/// The median of `v`.
pub(super) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One timed sample of `f`: on a GPU, QUEUED launches back to back between two events (the
/// peers of `bench_peers.py` are timed the same way), so a short kernel is not charged the
/// launch latency of an idle GPU; on the emulator, one launch.
pub(super) fn sample(
    device: &Device,
    f: impl FnMut(&Device) -> Result<(), LaunchError>,
) -> Result<Duration, LaunchError> {
    let reps = if device.is_emulator() { 1 } else { QUEUED };
    device.time_queued(reps, f)
}

/// The median of `iters` samples of `f` ([`sample`]) after `warmup` calls.
pub(super) fn timed(
    device: &Device,
    warmup: usize,
    iters: usize,
    mut f: impl FnMut(&Device) -> Result<(), LaunchError>,
) -> Result<Duration, LaunchError> {
    for _ in 0..warmup {
        f(device)?;
    }
    let mut v = Vec::with_capacity(iters);
    for _ in 0..iters {
        v.push(sample(device, &mut f)?);
    }
    Ok(median(v))
}

/// Launches per timed sample on a GPU.
const QUEUED: u32 = 10;
