//! `ck bench OP|copy|gemm|attention` (OP: an operator of the registry): achieved bandwidth of our kernels, next to the peers measured in the
//! same job on the same GPU (`--peers` = the JSON of `scripts/bench_peers.py`), and their ratios.
//! Times are CUDA events around each launch (the emulator: wall time), median of `--iters` runs
//! after `--warmup` runs, on random data.

use super::common::{device, launch_error, on_device, parse_shapes, whole_number, BackendArg};
use super::timing::{median, timed};
use super::CliError;
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError};
use ck_kernels::elementwise::{CopyBf16, CopyF32, TILE_BF16, TILE_F32};
use ck_kernels::op::{Dim, Dtype, Op, Rng, Role, Sizes};
use ck_kernels::registry;
use serde_json::{json, Value};
use std::time::Duration;

/// The median of `iters` calls of `f`, each returning its own time (the driver's copy).
fn timed_each(
    warmup: usize,
    iters: usize,
    mut f: impl FnMut() -> Result<Duration, LaunchError>,
) -> Result<Duration, LaunchError> {
    for _ in 0..warmup {
        f()?;
    }
    let v = (0..iters).map(|_| f()).collect::<Result<Vec<_>, _>>()?;
    Ok(median(v))
}

fn gbps(bytes: f64, t: Duration) -> f64 {
    bytes / t.as_secs_f64() / 1e9
}

/// `ck bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// An operator (rmsnorm, layernorm, add-rmsnorm, softmax, …), copy, gemm or attention
    #[arg(value_name = "OP|copy|gemm|attention")]
    what: String,
    #[command(flatten)]
    backend: BackendArg,
    /// Shapes, MxN (rmsnorm), MxNxK (gemm) or BxHxSxD[:causal] (attention), comma-separated;
    /// for an operator not over rows (linear, …) the sizes N of its seeded problem (`ck run
    /// OP-DTYPE --n N`) [default: the benchmark's]
    #[arg(long, value_name = "SHAPE,..")]
    shapes: Option<String>,
    /// Element types, comma-separated: f32,bf16 (row-wise operators, the default); for gemm
    /// the cases f32, bf16_f32out, bf16, bf16_bias_gelu, bf16_residual,
    /// bf16_bias_gelu_residual, fp8_e4m3, bmm_bf16, grouped_bf16
    /// [default: all]
    #[arg(long, value_name = "f32,bf16")]
    dtypes: Option<String>,
    /// Timed runs; the median is reported [default: 25]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    iters: Option<String>,
    /// Untimed runs first [default: 5]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    warmup: Option<String>,
    /// The JSON of scripts/bench_peers.py from the same job: their rows and our ratios
    #[arg(long, value_name = "PEERS.json")]
    peers: Option<String>,
    /// Bytes to copy (copy) [default: 1 GiB on the GPU, 1 MiB on the emulator]
    #[arg(long, value_name = "B")]
    bytes: Option<String>,
    /// Print the rows as JSON
    #[arg(long)]
    json: bool,
}

fn peers(args: &BenchArgs) -> Result<Value, CliError> {
    match args.peers.as_deref() {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::new(ck_core::rules::IO, format!("cannot read {p}: {e}")))?;
            serde_json::from_str(&text)
                .map_err(|e| CliError::new(ck_core::rules::PEERS, format!("{p} is not JSON: {e}")))
        }
        None => Ok(json!({})),
    }
}

/// A count option (`--iters`, `--warmup`): a whole number ≥ `min`, `default` when absent.
fn count_option(
    name: &str,
    value: Option<&str>,
    default: usize,
    min: usize,
) -> Result<usize, CliError> {
    match value {
        None => Ok(default),
        Some(v) => Ok(whole_number(name, v, (min as u64, u32::MAX as u64))? as usize),
    }
}

pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    let what = &args.what;
    let mut available: Vec<String> = registry::operators().map(|op| op.command()).collect();
    available.push("copy".into());
    if !available.contains(what) {
        return Err(CliError::usage(format!(
            "unknown benchmark `{what}`; available: {}",
            available.join(", ")
        )));
    }
    let device = device(&args.backend)?;
    // The median needs at least one timed run; warm-up may be skipped.
    let iters = count_option("iters", args.iters.as_deref(), 25, 1)?;
    let warmup = count_option("warmup", args.warmup.as_deref(), 5, 0)?;
    let peers = peers(args)?;
    let rows = match what.as_str() {
        // The operator's own shapes (BxHxSxD) and measure (TFLOP/s).
        "attention" => {
            super::attention::bench(&device, args.shapes.as_deref(), &peers, (warmup, iters))?
        }
        // Its own shapes (MxNxK), kernels and operand types, against cuBLAS.
        "gemm" => {
            let cases = super::bench_gemm::parse_cases(args.dtypes.as_deref())?;
            let shapes = args.shapes.as_deref();
            super::bench_gemm::bench(&device, (shapes, &cases), &peers, (warmup, iters))?
        }
        name if registry::find(name).is_some_and(|op| op.command() == name) => {
            let op = registry::find(name).expect("found");
            bench_op(op, &device, args, &peers, (warmup, iters))?
        }
        "copy" => bench_copy(&device, args, &peers, (warmup, iters))?,
        other => {
            return Err(CliError::usage(format!(
                "unknown benchmark `{other}`; available: {}",
                available.join(", ")
            )))
        }
    };
    if args.json {
        println!(
            "{}",
            json!({"device": device.name(), "benchmark": what, "rows": rows})
        );
    } else {
        println!(
            "{what} on {} (median of {iters} after {warmup} warm-up runs)",
            device.name()
        );
        let keys: Vec<String> = rows
            .first()
            .and_then(|r| r.as_object())
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let cell = |v: &Value| match v {
            Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(0.0)),
            Value::String(s) => s.clone(),
            Value::Null => "-".into(),
            v => v.to_string(),
        };
        // Right-aligned columns, each as wide as its widest cell (at least 14).
        let widths: Vec<usize> = keys
            .iter()
            .map(|k| {
                rows.iter()
                    .map(|r| cell(&r[k]).chars().count() + 1)
                    .chain([k.len() + 1, 14])
                    .max()
                    .unwrap_or(14)
            })
            .collect();
        let line = |cells: Vec<String>| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, &w)| format!("{c:>w$}"))
                .collect::<String>()
        };
        println!("{}", line(keys.clone()));
        for r in &rows {
            println!("{}", line(keys.iter().map(|k| cell(&r[k])).collect()));
        }
    }
    Ok(())
}

/// `ck bench OP` for an operator of the registry: its launch on seeded samples already on the
/// device, its bytes ([`Op::bytes`]) over the median time, next to the peers' rows keyed
/// `"{dtype} {shape}"` under the operator's command name. An operator over rows of N (the
/// row-wise family) runs on `--shapes MxN`; any other on its seeded problem of each size N of
/// `--shapes N,..` (what `ck run OP-DTYPE --n N` checks).
fn bench_op(
    op: &'static Op,
    device: &Device,
    args: &BenchArgs,
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    let problems: Vec<(String, Sizes)> = if over_rows(op) {
        let default = if device.is_emulator() {
            "64x1024,8x4096"
        } else {
            "4096x4096,16384x8192,65536x1024"
        };
        let shapes = parse_shapes::<2>(args.shapes.as_deref().unwrap_or(default), "MxN")?;
        let sizes = |[m, n]: [u32; 2]| Sizes::rows(&[m as usize]).with("N", n as usize);
        shapes
            .into_iter()
            .map(|s| (format!("{}x{}", s[0], s[1]), sizes(s)))
            .collect()
    } else {
        let default = if device.is_emulator() { "64" } else { "4096" };
        let sizes = parse_shapes::<1>(args.shapes.as_deref().unwrap_or(default), "N")?;
        let seeded = |n: u32| (op.cases)(Some(n)).remove(0);
        sizes
            .into_iter()
            .map(|[n]| (seeded(n).describe(&op.params[0]), seeded(n)))
            .collect()
    };
    let all: Vec<&str> = op.dtypes.iter().map(|d| d.name()).collect();
    let dtypes: Vec<Dtype> = args
        .dtypes
        .as_deref()
        .map_or_else(|| all.join(","), str::to_string)
        .split(',')
        .map(|d| {
            Dtype::parse(d)
                .filter(|d| op.dtypes.contains(d))
                .ok_or_else(|| {
                    CliError::new(
                        ck_core::rules::DTYPE,
                        format!("unsupported dtype `{d}`; use {}", all.join(" or ")),
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let name = op.command();
    let copy_gbps = peers["copy"]["torch_gbps"].as_f64();
    let mut rows = Vec::new();
    for (shape, sizes) in &problems {
        let seed = shape
            .bytes()
            .fold(0x9e3779b97f4a7c15u64, |h, b| h.rotate_left(5) ^ b as u64);
        let inputs = (op.sample)(sizes, &mut Rng(seed));
        for &dt in &dtypes {
            let mut launch =
                on_device(op, device, (dt, sizes), &inputs, false).map_err(launch_error)?;
            let t = timed(device, warmup, iters, |d| {
                (op.launch)(d, &mut launch).map(|_| ())
            })
            .map_err(launch_error)?;
            let ours = gbps((op.bytes)(sizes, dt), t);
            let key = format!("{} {shape}", dt.name());
            let torch = peers[&name][&key]["torch_gbps"].as_f64();
            let triton = peers[&name][&key]["triton_gbps"].as_f64();
            let best = torch
                .into_iter()
                .chain(triton)
                .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))));
            let mut row = json!({"case": key, "ms": t.as_secs_f64() * 1e3, "ours_gbps": ours});
            if let Some(v) = torch {
                row["torch_gbps"] = json!(v);
            }
            if let Some(v) = triton {
                row["triton_gbps"] = json!(v);
            }
            if let Some(b) = best {
                row["vs_best_peer"] = json!(ours / b);
            }
            if let Some(c) = copy_gbps {
                row["vs_copy"] = json!(ours / c);
            }
            // A copy of the same bytes: the ramp and tail of a launch this size included.
            if let Some(c) = peers[&name][&key]["copy_gbps"].as_f64() {
                row["vs_same_size_copy"] = json!(ours / c);
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Whether `op`'s tensors are rows of N, or N alone: `MxN` states its problem.
fn over_rows(op: &Op) -> bool {
    let rows_of_n = |d: &Dim| matches!(d, Dim::Rows | Dim::Sym("N"));
    (op.params.iter())
        .filter(|p| p.role != Role::Scratch)
        .all(|p| p.dims.iter().all(rows_of_n))
}

fn bench_copy(
    device: &Device,
    args: &BenchArgs,
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    let default_bytes: usize = if device.is_emulator() {
        1 << 20
    } else {
        1 << 30
    };
    let bytes: usize = args
        .bytes
        .as_deref()
        .map(|v| {
            v.parse()
                .map_err(|_| CliError::usage("--bytes: not a number"))
        })
        .transpose()?
        .unwrap_or(default_bytes);
    let moved = 2.0 * bytes as f64;
    let mut rows = Vec::new();
    // f32 kernel, bf16 kernel, and the driver's device-to-device copy of the same bytes.
    let n = (bytes / 4) as u32;
    let src = DeviceBuffer::<f32>::zeros(device, n as usize).map_err(launch_error)?;
    let mut dst = DeviceBuffer::<f32>::zeros(device, n as usize).map_err(launch_error)?;
    let driver = timed_each(warmup, iters, || dst.copy_from(&src)).map_err(launch_error)?;
    let k32 = timed(device, warmup, iters, |d| {
        CopyF32::launch(
            d,
            LaunchConfig::new(n.div_ceil(TILE_F32), 256),
            &src,
            &mut dst,
            n,
        )
        .map(|_| ())
    })
    .map_err(launch_error)?;
    drop((src, dst));
    let nb = (bytes / 2) as u32;
    let src = DeviceBuffer::<Bf16>::zeros(device, nb as usize).map_err(launch_error)?;
    let mut dst = DeviceBuffer::<Bf16>::zeros(device, nb as usize).map_err(launch_error)?;
    let k16 = timed(device, warmup, iters, |d| {
        CopyBf16::launch(
            d,
            LaunchConfig::new(nb.div_ceil(TILE_BF16), 256),
            &src,
            &mut dst,
            nb,
        )
        .map(|_| ())
    })
    .map_err(launch_error)?;
    let d = gbps(moved, driver);
    let torch = peers["copy"]["torch_gbps"].as_f64();
    for (name, t) in [
        ("driver dtod", driver),
        ("copy_f32", k32),
        ("copy_bf16", k16),
    ] {
        let mut row = json!({"case": name, "ms": t.as_secs_f64() * 1e3, "gbps": gbps(moved, t), "vs_driver": gbps(moved, t) / d});
        if let Some(tc) = torch {
            row["vs_torch_copy"] = json!(gbps(moved, t) / tc);
        }
        rows.push(row);
    }
    Ok(rows)
}
