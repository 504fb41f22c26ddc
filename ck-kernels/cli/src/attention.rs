//! `ck run attention` (Q, K, V from .npy files) and `ck bench attention` (TFLOP/s next to
//! torch's SDPA flash and cuDNN backends from the peers file).

use super::common::{device, launch_error, report_files, write_npy, BackendArg, JsonArg};
use super::timing::timed;
use super::CliError;
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::attention::host::{attention, launch, Options, Shape};
use ck_kernels::checks::Rng;
use serde_json::{json, Value};

/// `ck run attention`.
#[derive(Debug, clap::Args)]
pub struct AttentionArgs {
    /// Q, a 4-D float32 .npy [batch, heads, Sq, head_dim] (head_dim 64 or 128)
    #[arg(long, value_name = "Q.npy")]
    q: String,
    /// K, a 4-D float32 .npy [batch, kv_heads, Sk, head_dim]; kv_heads divides heads
    #[arg(long, value_name = "K.npy")]
    k: String,
    /// V, shaped like K
    #[arg(long, value_name = "V.npy")]
    v: String,
    /// Where to write O (float32 .npy, shaped like Q)
    #[arg(long, value_name = "O.npy")]
    output: String,
    /// Where to write the row log-sum-exp (float32 .npy [batch, heads, Sq])
    #[arg(long, value_name = "L.npy")]
    lse: Option<String>,
    /// Query row i sees keys j ≤ i + Sk − Sq (bottom-right aligned)
    #[arg(long)]
    causal: bool,
    /// Scale of the scores [default: 1/√head_dim]
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    scale: Option<String>,
    #[command(flatten)]
    backend: BackendArg,
    #[command(flatten)]
    json: JsonArg,
}

/// Reads a 4-D .npy and returns it with its dims.
fn read4(path: &str, what: &str) -> Result<(crate::npy::Array, [u32; 4]), CliError> {
    let a = crate::npy::read(path).map_err(|m| CliError::new(ck_core::rules::NPY, m))?;
    let dims: Option<[u32; 4]> = a
        .shape
        .iter()
        .map(|&d| u32::try_from(d).ok())
        .collect::<Option<Vec<_>>>()
        .and_then(|v| v.try_into().ok());
    match dims {
        Some(d) => Ok((a, d)),
        None => Err(CliError::new(
            ck_core::rules::SHAPE_MISMATCH,
            format!(
                "{path} ({what}) has shape {:?}; it must be a 4-D array [batch, heads, seq, head_dim]",
                a.shape
            ),
        )),
    }
}

/// `ck run attention --q Q.npy --k K.npy --v V.npy --output O.npy [--lse L.npy] [--causal]
/// [--scale S]`.
pub fn run(args: &AttentionArgs) -> Result<(), CliError> {
    let (q, [batch, heads, sq, head_dim]) = read4(&args.q, "Q")?;
    let (k, kd) = read4(&args.k, "K")?;
    let (v, vd) = read4(&args.v, "V")?;
    let [kb, kv_heads, sk, k_dim] = kd;
    if kb != batch || k_dim != head_dim || vd != kd {
        return Err(CliError::new(
            ck_core::rules::SHAPE_MISMATCH,
            format!(
                "Q is {:?}, K {:?} and V {:?}: K and V must be equal, with Q's batch and head_dim",
                q.shape, k.shape, v.shape
            ),
        ));
    }
    let scale = match args.scale.as_deref() {
        None => None,
        Some(s) => Some(
            s.parse::<f32>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| CliError::usage(format!("--scale: `{s}` is not a finite number")))?,
        ),
    };
    let shape = Shape {
        batch,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim,
    };
    let options = Options {
        causal: args.causal,
        scale,
        o_seq_first: false,
    };
    let device = device(&args.backend)?;
    let (o, lse, stats) =
        attention(&device, (&q.data, &k.data, &v.data), shape, options).map_err(launch_error)?;
    write_npy(&args.output, q.shape.clone(), o)?;
    if let Some(path) = &args.lse {
        write_npy(path, q.shape[..3].to_vec(), lse)?;
    }
    let summary = format!(
        "attention (batch {batch}, {heads} heads on {kv_heads} key/value heads, Sq {sq}, Sk {sk}, head_dim {head_dim}{}, scale {}) on {} → {}",
        if args.causal { ", causal" } else { "" },
        options.scale_for(head_dim),
        device.name(),
        args.output
    );
    report_files(args.json.json, summary, &stats)
}

/// The benchmark's configurations: `B×H×S×D`, causal or not (self-attention, Sq = Sk).
const GPU_CASES: &str = "16x16x1024x64,16x16x1024x128,4x16x4096x64,4x16x4096x128,\
4x16x4096x128:causal,1x16x16384x128,1x16x16384x128:causal,2x16x8192x64:causal";

/// Parses `--shapes` for attention: `BxHxSxD` or `BxHxSxD:causal`, comma-separated.
fn parse_cases(s: &str) -> Result<Vec<(Shape, bool)>, CliError> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            let (dims, causal) = match t.strip_suffix(":causal") {
                Some(d) => (d, true),
                None => (t, false),
            };
            let v: Vec<u32> = dims
                .split('x')
                .map(|d| d.parse::<u32>().ok().filter(|&x| x > 0))
                .collect::<Option<_>>()
                .unwrap_or_default();
            let [batch, heads, s, head_dim] = v[..] else {
                return Err(CliError::usage(format!(
                    "--shapes: `{t}` is not BxHxSxD or BxHxSxD:causal (positive integers)"
                )));
            };
            let shape = Shape {
                batch,
                heads,
                kv_heads: heads,
                sq: s,
                sk: s,
                head_dim,
            };
            Ok((shape, causal))
        })
        .collect()
}

/// `ck bench attention`: TFLOP/s (`4·B·H·S²·D`, halved when causal) of our kernel and, from
/// the peers file, of SDPA's flash (FlashAttention-2) and cuDNN backends, with the ratio to the
/// best of them.
pub fn bench(
    device: &Device,
    shapes: Option<&str>,
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    let default = if device.is_emulator() {
        "1x2x256x64,1x2x256x128:causal"
    } else {
        GPU_CASES
    };
    let mut rows = Vec::new();
    for (shape, causal) in parse_cases(shapes.unwrap_or(default))? {
        shape.check().map_err(launch_error)?;
        let mut rng = Rng(0xa77e ^ shape.q_len() as u64);
        let mut random = |len: usize| -> Result<DeviceBuffer<Bf16>, CliError> {
            let x: Vec<Bf16> = (0..len).map(|_| Bf16::from_f32(rng.f32())).collect();
            DeviceBuffer::from_slice(device, &x).map_err(launch_error)
        };
        let (q, k, v) = (
            random(shape.q_len())?,
            random(shape.kv_len())?,
            random(shape.kv_len())?,
        );
        let mut o = DeviceBuffer::<Bf16>::zeros(device, shape.q_len()).map_err(launch_error)?;
        let mut lse = DeviceBuffer::<f32>::zeros(device, shape.lse_len()).map_err(launch_error)?;
        let options = Options {
            causal,
            scale: None,
            o_seq_first: false,
        };
        let t = timed(device, warmup, iters, |d| {
            launch(d, (&q, &k, &v), &mut o, &mut lse, shape, options).map(|_| ())
        })
        .map_err(launch_error)?;
        let Shape {
            batch,
            heads,
            sq,
            head_dim,
            ..
        } = shape;
        let key = format!(
            "{batch}x{heads}x{sq}x{head_dim}{}",
            if causal { ":causal" } else { "" }
        );
        let ours = shape.flops(causal) / t.as_secs_f64() / 1e12;
        let mut row = json!({"case": key, "ms": t.as_secs_f64() * 1e3, "ours_tflops": ours});
        let peer = &peers["attention"][&key];
        let mut best: Option<f64> = None;
        for name in ["flash", "cudnn"] {
            if let Some(p) = peer[format!("{name}_tflops")].as_f64() {
                row[format!("{name}_tflops")] = json!(p);
                best = Some(best.map_or(p, |b: f64| b.max(p)));
            }
        }
        if let Some(b) = best {
            row["vs_best"] = json!(ours / b);
        }
        rows.push(row);
    }
    Ok(rows)
}
