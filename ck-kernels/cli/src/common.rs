//! What the subcommands share: the backend and output options, the device they name, launch
//! errors as CLI errors, the report of a run, `.npy` output and `--shapes`.

use super::CliError;
use ck_core::host::{Device, LaunchError, LaunchStats};
use ck_kernels::op::{Buffer, Dtype, Launch, Op, Role, Sizes};
use serde_json::json;

/// A launch error as the CLI prints it (its rule and message).
pub(crate) fn launch_error(e: LaunchError) -> CliError {
    CliError::new(e.rule(), e.message())
}

/// Where a kernel runs.
#[derive(Debug, Clone, clap::Args)]
pub struct BackendArg {
    /// emu (the CPU emulator: sanitizer and profiler) or cuda (GPU 0)
    #[arg(long, value_name = "emu|cuda", default_value = "emu")]
    pub(super) backend: String,
}

/// Output format.
#[derive(Debug, Clone, clap::Args)]
pub struct JsonArg {
    /// Print the launch counters as JSON
    #[arg(long)]
    pub(super) json: bool,
}

/// A whole-number option's value (`--n`, `--seed`, `--iters`): `v` as a number from `min` to
/// `max`, or a usage error that says which it is not.
pub(crate) fn whole_number(name: &str, v: &str, (min, max): (u64, u64)) -> Result<u64, CliError> {
    let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ if digits => Err(CliError::usage(format!(
            "--{name}: {v} is out of range; give {min} to {max}"
        ))),
        _ => Err(CliError::usage(format!(
            "--{name}: `{v}` is not a whole number; give {min} to {max}"
        ))),
    }
}

/// An integer option's value (lengths, which the checks that follow refuse with their own rule
/// when not positive): `v` as an `i32`, or a usage error that tells a number past the range
/// from something that is not a number (`then`: what to give instead).
pub(crate) fn integer(name: &str, v: &str, then: &str) -> Result<i32, CliError> {
    let v = v.trim();
    v.parse::<i32>().map_err(|_| {
        let why = if v.parse::<i128>().is_ok() {
            format!("{v} is out of range; give at most {}", i32::MAX)
        } else {
            format!("`{v}` is not an integer; {then}")
        };
        CliError::usage(format!("--{name}: {why}"))
    })
}

pub(crate) fn device(args: &BackendArg) -> Result<Device, CliError> {
    match args.backend.as_str() {
        "emu" => Ok(Device::emulator()),
        "cuda" => Device::cuda(0).map_err(launch_error),
        other => Err(CliError::new(
            ck_core::rules::BACKEND,
            format!("unknown backend `{other}`; available: emu, cuda"),
        )),
    }
}

/// The counters every `ck run` prints (zero on the GPU, which has no profiler here: use ncu).
pub fn stats_json(st: &LaunchStats) -> serde_json::Value {
    json!({
        "shared_load_wavefronts": st.shared_load_wavefronts,
        "shared_load_conflicts": st.shared_load_conflicts,
        "shared_store_wavefronts": st.shared_store_wavefronts,
        "shared_store_conflicts": st.shared_store_conflicts,
        "shared_load_requests": st.shared_load_requests,
        "shared_store_requests": st.shared_store_requests,
        "global_load_sectors": st.global_load_sectors,
        "global_store_sectors": st.global_store_sectors,
        "elapsed_ms": st.elapsed.as_secs_f64() * 1e3,
    })
}

/// The counters of a launch, one line per kind.
pub(super) fn print_stats(st: &LaunchStats) {
    println!(
        "shared loads:  {:>6} wavefronts, {:>6} conflicts ({} requests)",
        st.shared_load_wavefronts, st.shared_load_conflicts, st.shared_load_requests
    );
    println!(
        "shared stores: {:>6} wavefronts, {:>6} conflicts ({} requests)",
        st.shared_store_wavefronts, st.shared_store_conflicts, st.shared_store_requests
    );
    println!(
        "global loads:  {:>6} sectors ({} requests)",
        st.global_load_sectors, st.global_load_requests
    );
    println!(
        "global stores: {:>6} sectors ({} requests)",
        st.global_store_sectors, st.global_store_requests
    );
    println!("time:          {:.3} ms", st.elapsed.as_secs_f64() * 1e3);
}

/// Writes an f32 array of `shape` to the .npy file `path`.
pub(super) fn write_npy(path: &str, shape: Vec<usize>, data: Vec<f32>) -> Result<(), CliError> {
    crate::npy::write(path, &crate::npy::Array { shape, data })
        .map_err(|msg| CliError::new(ck_core::rules::IO, msg))
}

/// The end of a `ck run` on files: the counters as JSON, or `summary` and the counters.
pub(super) fn report_files(
    json: bool,
    summary: String,
    stats: &LaunchStats,
) -> Result<(), CliError> {
    if json {
        println!("{}", stats_json(stats));
    } else {
        println!("{summary}");
        print_stats(stats);
    }
    Ok(())
}

/// Parses `--shapes`: comma-separated shapes of `N` positive extents joined by `x`
/// (`4096x4096` for N = 2, `4096x4096x1024` for N = 3); `form` names them for the error.
pub(super) fn parse_shapes<const N: usize>(s: &str, form: &str) -> Result<Vec<[u32; N]>, CliError> {
    s.split(',')
        .map(|t| {
            let bad = || {
                CliError::usage(format!(
                    "--shapes: `{t}` is not {form} (positive integers joined by `x`)"
                ))
            };
            let dims: Vec<u32> = t
                .split('x')
                .map(|d| d.parse::<u32>().ok().filter(|&x| x > 0).ok_or_else(bad))
                .collect::<Result<_, _>>()?;
            dims.try_into().map_err(|_| bad())
        })
        .collect()
}

/// `op`'s call on `inputs` (rounded to `dtype`) with its outputs, on `device`; optional outputs
/// given where `optional` (attention's log-sum-exp, which the kernel writes either way), else
/// left out (as in the row operators' peers); the scalars `sizes` implies
/// ([`Op::scalars_for`]).
pub(crate) fn on_device(
    op: &'static Op,
    device: &Device,
    (dtype, sizes): (Dtype, &Sizes),
    inputs: &[Vec<f32>],
    optional: bool,
) -> Result<Launch, LaunchError> {
    // The symbols the operator derives (a scratch's length), as a bound call has them.
    let mut sizes = sizes.clone();
    (op.constraints)(&mut sizes)?;
    let mut values = inputs.iter();
    let mut buffers = Vec::new();
    for p in op.params {
        let len: usize = sizes.shape_of(p).iter().product();
        let v = match p.role {
            Role::Input => values.next().cloned().unwrap_or_default(),
            // Given where the problem names it, as in a check.
            Role::OptionalInput => match (values.next(), sizes.flag(p.name)) {
                (Some(v), true) => v.clone(),
                _ => {
                    buffers.push(None);
                    continue;
                }
            },
            Role::Output => vec![0.0; len],
            Role::OptionalOutput if optional => vec![0.0; len],
            Role::OptionalOutput | Role::Scratch => {
                buffers.push(None); // a scratch: the launch allocates it
                continue;
            }
        };
        buffers.push(Some(Buffer::from_f32(device, (p.elem, dtype), &v)?));
    }
    let scalars = op.scalars_for(&sizes);
    Ok(Launch::new(op.signature(), dtype, sizes, scalars, buffers))
}
