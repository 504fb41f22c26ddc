//! `ck bench attention`: TFLOP/s of the attention operator's launch (through its description,
//! `ck_kernels::attention::describe::OP`) next to torch's SDPA flash and cuDNN backends from
//! the peers file.

use super::common::launch_error;
use super::common::on_device;
use super::timing::timed;
use super::CliError;
use ck_core::host::Device;
use ck_kernels::attention::describe::OP;
use ck_kernels::attention::host::Shape;
use ck_kernels::op::{Dtype, Rng, Sizes};
use serde_json::{json, Value};

/// The benchmark's configurations: `B×H×S×D`, causal or not (self-attention, Sq = Sk).
const GPU_CASES: &str = "16x16x1024x64,16x16x1024x128,4x16x4096x64,4x16x4096x128,\
4x16x4096x128:causal,1x16x16384x128,1x16x16384x128:causal,2x16x8192x64:causal";

/// Parses `--shapes` for attention: `BxHxSxD` or `BxHxSxD:causal`, comma-separated.
fn parse_cases(s: &str) -> Result<Vec<(Sizes, Shape, bool)>, CliError> {
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
            let [b, h, s, d] = [batch, heads, s, head_dim].map(|x| x as usize);
            let sizes = Sizes::default().with("B", b).with("H", h).with("Hkv", h);
            let sizes = sizes.with("Sq", s).with("Sk", s).with("D", d);
            let sizes = if causal {
                sizes.with_flag("causal")
            } else {
                sizes
            };
            Ok((sizes, shape, causal))
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
    for (mut sizes, shape, causal) in parse_cases(shapes.unwrap_or(default))? {
        (OP.constraints)(&mut sizes).map_err(launch_error)?;
        let inputs = (OP.sample)(&sizes, &mut Rng(0xa77e ^ shape.q_len() as u64));
        let on = on_device(&OP, device, (Dtype::Bf16, &sizes), &inputs, true);
        let mut launch = on.map_err(launch_error)?;
        let t = timed(device, warmup, iters, |d| {
            (OP.launch)(d, &mut launch).map(|_| ())
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
