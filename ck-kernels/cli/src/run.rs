//! `ck run KERNEL [--backend emu|cuda] …` runs a kernel, checks its output against the CPU
//! reference and prints the launch statistics; `ck cross-check` runs every exercise kernel on
//! the emulator and the GPU and compares the outputs bit for bit.

use super::common::{
    device, launch_error, print_stats, stats_json, whole_number, BackendArg, JsonArg,
};
use super::CliError;
use ck_core::host::Device;
use ck_kernels::checks::{self, Outcome};
use serde_json::json;

/// A seeded run of an exercise kernel.
#[derive(Debug, clap::Args)]
pub struct ExerciseArgs {
    /// Problem size N, as the command's description uses it (elements, K of a GEMM, rows, the
    /// longest cached length) [default: 4096]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    n: Option<String>,
    /// Seed of the random input [default: 1]
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    seed: Option<String>,
    #[command(flatten)]
    backend: BackendArg,
    #[command(flatten)]
    json: JsonArg,
}

/// `ck run bank-probe`.
#[derive(Debug, clap::Args)]
pub struct BankProbeArgs {
    /// Element stride between lanes
    #[arg(
        long,
        value_name = "S",
        allow_hyphen_values = true,
        required_unless_present = "sweep"
    )]
    stride: Option<String>,
    /// Bytes per access: 4, 8 or 16
    #[arg(
        long,
        value_name = "W",
        allow_hyphen_values = true,
        required_unless_present = "sweep"
    )]
    width: Option<String>,
    /// All 21 cases W ∈ {4, 8, 16}, S ∈ {1, 2, 4, 8, 16, 32, 33}
    #[arg(long)]
    sweep: bool,
    #[command(flatten)]
    backend: BackendArg,
    #[command(flatten)]
    json: JsonArg,
}

/// Probes run with the swizzled shared layout, the plain one, or both.
#[derive(Debug, clap::Args)]
pub struct LayoutArgs {
    /// xor, plain or both (XOR first: one ncu session profiles them in that order)
    #[arg(long, value_name = "xor|plain|both", default_value = "both")]
    layout: String,
    #[command(flatten)]
    backend: BackendArg,
    #[command(flatten)]
    json: JsonArg,
}

/// `ck run KERNEL`.
#[derive(Debug, clap::Subcommand)]
pub enum RunCommand {
    /// Reverses blocks of 256 through shared memory
    Reverse(ExerciseArgs),
    /// Block sums with shuffles and shared memory
    BlockSum(ExerciseArgs),
    /// A 64-bin histogram with shared-memory atomics
    Histogram(ExerciseArgs),
    /// f32 copy with 16-byte accesses
    Copy(ExerciseArgs),
    /// f32 add with 16-byte accesses
    Add(ExerciseArgs),
    /// N rows of 32 u32 multicast by the TMA engine to both blocks of each cluster (sm_90)
    Multicast(ExerciseArgs),
    /// The mma.sync bf16 GEMM, 257 × 129 × N (`gemm-bf16` picks the kernel for the shape)
    GemmMmaSync(ExerciseArgs),
    /// The wgmma bf16 GEMM, 128 × 256 tiles (sm_90a)
    GemmWgmma(ExerciseArgs),
    /// The wgmma bf16 GEMM, 128 × 128 tiles (sm_90a)
    GemmWgmmaN128(ExerciseArgs),
    /// The grouped bf16 GEMM: five problems of mixed shapes (two of depth N) in one launch
    GemmGrouped(ExerciseArgs),
    /// The grouped bf16 GEMM as a mixture-of-experts layer: 0, 300, 390, 1 and 337 tokens,
    /// N = 264, K = N rounded up to a multiple of 8, bf16 C = A_g·B_g (the TMA kernel)
    GemmGroupedMoe(ExerciseArgs),
    /// A shared-memory access pattern whose bank conflicts are known: thread (warp w, lane l)
    /// stores W bytes at w·8192 + l·S·W, loads them back
    BankProbe(BankProbeArgs),
    /// The spec's TV8 LDS tile written with k-write and read with k-read
    LdsProbe(LayoutArgs),
    /// Decode attention against a paged KV cache (pages of 64): GQA 32/8 heads of 128, cached
    /// lengths N, N/2, 1 and 0, one new token appended with RoPE
    AttentionDecode(ExerciseArgs),
    /// CK's short-row RMSNorm configurations (lane groups of 8 and 16 lanes) for 64- and 32-lane
    /// warps: y and each row's mean of squares against fp64.
    LaneGroups(ExerciseArgs),
    /// One 256³ bf16 mma.sync GEMM with swizzled and plain shared layouts, and their counters
    GemmLds(LayoutArgs),
}

fn uint(name: &str, value: &Option<String>, default: Option<u32>) -> Result<u32, CliError> {
    match value {
        Some(v) => Ok(whole_number(name, v, (0, u32::MAX as u64))? as u32),
        None => default.ok_or_else(|| CliError::usage(format!("--{name} is required"))),
    }
}

pub fn run(command: &RunCommand) -> Result<(), CliError> {
    use RunCommand::*;
    match command {
        Reverse(a) => exercise("reverse", a),
        BlockSum(a) => exercise("block-sum", a),
        Histogram(a) => exercise("histogram", a),
        Copy(a) => exercise("copy", a),
        Add(a) => exercise("add", a),
        Multicast(a) => exercise("multicast", a),
        GemmMmaSync(a) => exercise("gemm-mma-sync", a),
        GemmWgmma(a) => exercise("gemm-wgmma", a),
        GemmWgmmaN128(a) => exercise("gemm-wgmma-n128", a),
        GemmGrouped(a) => exercise("gemm-grouped", a),
        GemmGroupedMoe(a) => exercise("gemm-grouped-moe", a),
        BankProbe(a) if a.sweep => bank_probe_sweep(a),
        BankProbe(a) => {
            let (stride, width) = (
                uint("stride", &a.stride, None)?,
                uint("width", &a.width, None)?,
            );
            ck_kernels::probes::bank_probe::check_parameters(stride, width)
                .map_err(|m| CliError::new(ck_core::rules::PROBE_PARAMETERS, m))?;
            let device = device(&a.backend)?;
            let o = checks::run_bank_probe(&device, stride, width).map_err(launch_error)?;
            let desc = format!("128 threads, {width}-byte accesses, stride {stride}");
            report("bank-probe", o, &desc, &device, a.json.json)
        }
        LdsProbe(a) => lds_probe_cmd(a),
        AttentionDecode(a) => exercise("attention-decode", a),
        LaneGroups(a) => exercise("lane-groups", a),
        GemmLds(a) => gemm_lds_cmd(a),
    }
}

/// An exercise kernel (`checks::EXERCISES`) on seeded random input.
fn exercise(kernel: &str, a: &ExerciseArgs) -> Result<(), CliError> {
    let (n, seed) = (
        uint("n", &a.n, Some(4096))?,
        uint("seed", &a.seed, Some(1))?,
    );
    let device = device(&a.backend)?;
    let o = checks::run_exercise(&device, kernel, n, seed as u64).map_err(launch_error)?;
    report(
        kernel,
        o,
        &format!("n = {n}, seed {seed}"),
        &device,
        a.json.json,
    )
}

/// The outcome of a checked run: an error if the output differs from the reference, else the
/// counters.
pub(crate) fn report(
    kernel: &str,
    outcome: Outcome,
    desc: &str,
    device: &Device,
    json: bool,
) -> Result<(), CliError> {
    let Outcome {
        stats, mismatch, ..
    } = outcome;
    if let Some(m) = mismatch {
        return Err(CliError::new(
            ck_core::rules::WRONG_RESULT,
            format!("{kernel} on {}: {m}", device.name()),
        ));
    }
    if json {
        println!("{}", stats_json(&stats));
    } else {
        println!(
            "{kernel} on {}: {desc}; output matches the CPU reference",
            device.name()
        );
        print_stats(&stats);
    }
    Ok(())
}

/// Widths and strides of the bank-probe sweep (the 21 cases).
pub const SWEEP_WIDTHS: [u32; 3] = [4, 8, 16];
/// Strides of the sweep.
pub const SWEEP_STRIDES: [u32; 7] = [1, 2, 4, 8, 16, 32, 33];

/// `ck run bank-probe --sweep`: all 21 cases in one process (one ncu session profiles them in
/// this order: width outer, stride inner).
fn bank_probe_sweep(args: &BankProbeArgs) -> Result<(), CliError> {
    let device = device(&args.backend)?;
    let mut rows = Vec::new();
    for width in SWEEP_WIDTHS {
        for stride in SWEEP_STRIDES {
            let o = checks::run_bank_probe(&device, stride, width).map_err(launch_error)?;
            if let Some(m) = o.mismatch {
                return Err(CliError::new(
                    ck_core::rules::WRONG_RESULT,
                    format!("bank-probe W={width} S={stride}: {m}"),
                ));
            }
            let mut row = stats_json(&o.stats);
            row["width"] = json!(width);
            row["stride"] = json!(stride);
            rows.push(row);
        }
    }
    if args.json.json {
        println!("{}", serde_json::Value::Array(rows));
    } else {
        println!(
            "{:>5} {:>6} {:>10} {:>10} {:>10} {:>10}",
            "width", "stride", "ld wavefr", "ld confl", "st wavefr", "st confl"
        );
        for r in &rows {
            let n = |k: &str| r[k].as_u64().unwrap_or(0);
            println!(
                "{:>5} {:>6} {:>10} {:>10} {:>10} {:>10}",
                n("width"),
                n("stride"),
                n("shared_load_wavefronts"),
                n("shared_load_conflicts"),
                n("shared_store_wavefronts"),
                n("shared_store_conflicts")
            );
        }
    }
    Ok(())
}

/// `ck cross-check`.
#[derive(Debug, clap::Args)]
pub struct CrossCheckArgs {
    #[command(flatten)]
    json: JsonArg,
}

pub fn cross_check(args: &CrossCheckArgs) -> Result<(), CliError> {
    let gpu = Device::cuda(0).map_err(launch_error)?;
    let emu = Device::emulator();
    let results = checks::cross_check(&emu, &gpu).map_err(launch_error)?;
    // Bitwise for integer and copy kernels, within the case's tolerance for float kernels
    // (`CrossCheck::problems` says which).
    let bad = results.iter().filter(|r| !r.problems.is_empty()).count();
    if args.json.json {
        let rows: Vec<_> = results
            .iter()
            .map(|r| json!({"case": r.case, "identical": r.identical, "problems": r.problems, "emulator": stats_json(&r.first), "gpu_ms": r.second.elapsed.as_secs_f64() * 1e3}))
            .collect();
        println!("{}", json!({"gpu": gpu.name(), "results": rows}));
    } else {
        println!("{:<28} {:>10} {:>10}  notes", "case", "identical", "gpu ms");
        for r in &results {
            println!(
                "{:<28} {:>10} {:>10.4}  {}",
                r.case,
                r.identical,
                r.second.elapsed.as_secs_f64() * 1e3,
                r.problems.join("; ")
            );
        }
        let same = results.iter().filter(|r| r.identical).count();
        println!(
            "{} of {} cases agree on {} and {} ({same} bit for bit; float kernels within their tolerance)",
            results.len() - bad,
            results.len(),
            emu.name(),
            gpu.name()
        );
    }
    if bad > 0 {
        return Err(CliError::new(
            ck_core::rules::CROSS_BACKEND_MISMATCH,
            format!("{bad} case(s) differ between the emulator and the GPU"),
        ));
    }
    Ok(())
}

/// `ck run lds-probe [--layout xor|plain|both]`: the LDS probe's counters (`both`: XOR then
/// plain, one ncu session profiles them in that order).
fn lds_probe_cmd(args: &LayoutArgs) -> Result<(), CliError> {
    let layouts: &[(&str, bool)] = match args.layout.as_str() {
        "xor" => &[("xor", true)],
        "plain" => &[("plain", false)],
        "both" => &[("xor", true), ("plain", false)],
        other => {
            return Err(CliError::usage(format!(
                "--layout `{other}`: use xor, plain or both"
            )))
        }
    };
    let device = device(&args.backend)?;
    let mut rows = Vec::new();
    for &(name, swizzled) in layouts {
        let o = checks::run_lds_probe(&device, swizzled).map_err(launch_error)?;
        if let Some(m) = o.mismatch {
            return Err(CliError::new(
                ck_core::rules::WRONG_RESULT,
                format!("lds-probe {name}: {m}"),
            ));
        }
        let mut row = stats_json(&o.stats);
        row["case"] = json!(format!("lds {name}"));
        rows.push(row);
    }
    print_counter_rows(&rows, args.json.json);
    Ok(())
}

/// `ck run gemm-lds [--layout xor|plain|both]`: one 256 × 256 × 256 bf16 `mma.sync` GEMM
/// (`gemm_bf16`, whose `ldmatrix` reads go through the LDS pipe) with the swizzled and with the
/// plain shared layouts (the same result; `both`: XOR then plain, one
/// ncu session profiles them in that order), and their shared-memory counters.
fn gemm_lds_cmd(args: &LayoutArgs) -> Result<(), CliError> {
    use ck_core::device::Bf16;
    use ck_core::host::DeviceBuffer;
    use ck_kernels::gemm::auto::launch_bf16_with;
    use ck_kernels::gemm::choice::Bf16Kernel;
    use ck_kernels::gemm::mma_sync::host::launch_bf16_plain;
    let layouts: &[&str] = match args.layout.as_str() {
        "xor" => &["xor"],
        "plain" => &["plain"],
        "both" => &["xor", "plain"],
        other => {
            return Err(CliError::usage(format!(
                "--layout `{other}`: use xor, plain or both"
            )))
        }
    };
    let device = device(&args.backend)?;
    let (m, n, k) = (256u32, 256u32, 256u32);
    let vals = |seed: u32, len: u32| {
        (0..len)
            .map(|i| Bf16::from_f32(((i * 7919 + seed) % 1000) as f32 / 500.0 - 1.0))
            .collect::<Vec<_>>()
    };
    let (a, b) = (vals(1, m * k), vals(2, k * n));
    let ad = DeviceBuffer::from_slice(&device, &a).map_err(launch_error)?;
    let bd = DeviceBuffer::from_slice(&device, &b).map_err(launch_error)?;
    let af: Vec<f32> = a.iter().map(|v| v.to_f32()).collect();
    let bf: Vec<f32> = b.iter().map(|v| v.to_f32()).collect();
    let want = ck_kernels::gemm::mma_sync::host::reference(&af, &bf, (m, n, k));
    let mut rows = Vec::new();
    for &name in layouts {
        let mut cd = DeviceBuffer::<f32>::zeros(&device, (m * n) as usize).map_err(launch_error)?;
        let st = if name == "xor" {
            launch_bf16_with(&device, Bf16Kernel::MmaSync, &ad, &bd, &mut cd, (m, n, k))
        } else {
            launch_bf16_plain(&device, &ad, &bd, &mut cd, (m, n, k))
        }
        .map_err(launch_error)?;
        let err = checks::norm_relative_error(&cd.to_vec().map_err(launch_error)?, &want);
        if err.is_nan() || err > 1e-5 {
            return Err(CliError::new(
                ck_core::rules::WRONG_RESULT,
                format!("gemm-lds {name}: relative error {err:e} against fp64"),
            ));
        }
        let mut row = stats_json(&st);
        row["case"] = json!(format!("gemm {name}"));
        rows.push(row);
    }
    print_counter_rows(&rows, args.json.json);
    Ok(())
}

/// Rows of `{case, shared_*}` counters: a JSON array, or one line each.
fn print_counter_rows(rows: &[serde_json::Value], as_json: bool) {
    if as_json {
        println!("{}", serde_json::Value::Array(rows.to_vec()));
        return;
    }
    for r in rows {
        println!(
            "{}: shared loads {} wavefronts ({} conflicts), stores {} wavefronts ({} conflicts)",
            r["case"].as_str().unwrap_or(""),
            r["shared_load_wavefronts"],
            r["shared_load_conflicts"],
            r["shared_store_wavefronts"],
            r["shared_store_conflicts"]
        );
    }
}
