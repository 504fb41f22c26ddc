//! `ck bench gemm`: the GEMM family's TFLOP/s next to cuBLAS (and `torch._scaled_mm`,
//! `torch.bmm`, the grouped peers) from `--peers`: f32, bf16 with f32 or bf16 C, the fused
//! epilogue, the TMA and fp8 kernels per shape; batched and grouped GEMM on their fixed cases.

use super::bench::{parse_shapes, timed};
use super::run::launch_error;
use super::CliError;
use crate::checks::Rng;
use crate::gemm_auto::{choose, Choice};
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer};
use serde_json::{json, Value};
use std::time::Duration;

/// GEMM rows of `ck bench` on `shapes` (MxNxK, comma-separated; default the three benchmark
/// shapes on a GPU, one small one on the emulator).
pub(super) fn bench(
    device: &Device,
    shapes: Option<&str>,
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    use crate::gemm::host::{launch_bf16_with, launch_f32, Bf16Kernel};
    let default = if device.is_emulator() {
        "128x128x64"
    } else {
        "4096x4096x4096,8192x8192x8192,8192x8192x1024"
    };
    let fixed_cases = !device.is_emulator() && shapes.is_none();
    let shapes = parse_shapes::<3>(shapes.unwrap_or(default), "MxNxK")?;
    let mut rows = Vec::new();
    for [m, n, k] in shapes {
        let mut rng = Rng(0x51ed ^ (m as u64) << 32 ^ (n as u64) << 16 ^ k as u64);
        let a: Vec<f32> = (0..m as usize * k as usize).map(|_| rng.f32()).collect();
        let b: Vec<f32> = (0..k as usize * n as usize).map(|_| rng.f32()).collect();
        let (ad, bd) = (
            DeviceBuffer::from_slice(device, &a).map_err(launch_error)?,
            DeviceBuffer::from_slice(device, &b).map_err(launch_error)?,
        );
        let mut cd =
            DeviceBuffer::<f32>::zeros(device, m as usize * n as usize).map_err(launch_error)?;
        let t = timed(device, warmup, iters, |d| {
            launch_f32(d, &ad, &bd, &mut cd, (m, n, k)).map(|_| ())
        })
        .map_err(launch_error)?;
        // One row per kernel: our TFLOP/s and, when the peers ran, cuBLAS's and the ratio.
        // `dtype` names the case and the peer's key: f32, bf16_f32out (bf16 in, f32 C), bf16
        // (bf16 C), bf16_bias_gelu (bf16 C = gelu(A·B + bias)).
        let row = |dtype: &str, kernel: &str, t: Duration| {
            let key = format!("{m}x{n}x{k}");
            let ours = 2.0 * m as f64 * n as f64 * k as f64 / t.as_secs_f64() / 1e12;
            let mut row = json!({"case": format!("{dtype} {key}"), "kernel": kernel, "ms": t.as_secs_f64() * 1e3, "ours_tflops": ours});
            if let Some(c) = peers["gemm"][&key][format!("{dtype}_tflops")].as_f64() {
                row["cublas_tflops"] = json!(c);
                row["vs_cublas"] = json!(ours / c);
            }
            row
        };
        rows.push(row("f32", "gemm_f32", t));
        // The tensor-core kernel on the same values rounded to bf16.
        let ab: Vec<Bf16> = a.iter().map(|&v| Bf16::from_f32(v)).collect();
        let bb: Vec<Bf16> = b.iter().map(|&v| Bf16::from_f32(v)).collect();
        let (ad, bd) = (
            DeviceBuffer::from_slice(device, &ab).map_err(launch_error)?,
            DeviceBuffer::from_slice(device, &bb).map_err(launch_error)?,
        );
        // The kernel launch_bf16 picks ("(auto)"); on the GPU also every other kernel that takes
        // the shape, for what the choice buys (on the emulator they would time the emulator).
        let picked = Bf16Kernel::for_shape(device, (m, n, k));
        let mut kernels = vec![picked];
        if !device.is_emulator() {
            let wgmma_takes = picked != Bf16Kernel::MmaSync;
            kernels.extend(
                [
                    Bf16Kernel::Wgmma128x256,
                    Bf16Kernel::Wgmma128x128,
                    Bf16Kernel::MmaSync,
                ]
                .into_iter()
                .filter(|&o| o != picked && (wgmma_takes || o == Bf16Kernel::MmaSync)),
            );
        }
        for kernel in kernels {
            let t = timed(device, warmup, iters, |d| {
                launch_bf16_with(d, kernel, &ad, &bd, &mut cd, (m, n, k)).map(|_| ())
            })
            .map_err(launch_error)?;
            let name = if kernel == picked {
                format!("{} (auto)", kernel.name())
            } else {
                kernel.name().to_string()
            };
            rows.push(row("bf16_f32out", &name, t));
        }
        // bf16 C, plain and with a fused bias + GELU, on the wgmma kernel launch_bf16 picks.
        if picked != Bf16Kernel::MmaSync {
            use crate::epilogue::Activation;
            use crate::gemm_fused::{launch, EpilogueArgs};
            let mut c16 = DeviceBuffer::<Bf16>::zeros(device, m as usize * n as usize)
                .map_err(launch_error)?;
            let bias: Vec<Bf16> = (0..n).map(|_| Bf16::from_f32(rng.f32())).collect();
            let bias = DeviceBuffer::from_slice(device, &bias).map_err(launch_error)?;
            let gelu = EpilogueArgs {
                bias: Some(&bias),
                activation: Activation::Gelu,
                ..Default::default()
            };
            for (dtype, args) in [("bf16", EpilogueArgs::default()), ("bf16_bias_gelu", gelu)] {
                let t = timed(device, warmup, iters, |d| {
                    launch(d, picked, (&ad, &bd), &mut c16, (m, n, k), &args).map(|_| ())
                })
                .map_err(launch_error)?;
                let name = format!("{}_bf16", picked.name());
                let tma = matches!(choose(device, 1, (m, n, k), &args), Choice::Tma);
                rows.push(row(dtype, &auto_mark(&name, !tma), t));
            }
        }
        if n.is_multiple_of(8) && k.is_multiple_of(16) {
            rows.extend(
                bench_gemm_tma(device, (&ad, &bd), (m, n, k), (&a, &b), (warmup, iters))?
                    .into_iter()
                    .map(|(dtype, kernel, t)| row(dtype, &kernel, t)),
            );
        }
    }
    if fixed_cases {
        rows.extend(bench_bmm(device, peers, (warmup, iters))?);
        rows.extend(bench_grouped(device, peers, (warmup, iters))?);
    }
    Ok(rows)
}

/// `kernel`, marked "(auto)" when it is the one `ck run gemm` runs (`gemm_auto`'s choice).
fn auto_mark(kernel: &str, picked: bool) -> String {
    if picked {
        format!("{kernel} (auto)")
    } else {
        kernel.to_string()
    }
}

/// The TMA, warp-specialised GEMMs on one shape: bf16 operands with bf16 C (plain and
/// bias + GELU) and f32 C, and e4m3 operands (per-tensor scales) with bf16 C. Returns
/// (case, kernel, time) rows.
fn bench_gemm_tma(
    device: &Device,
    (ad, bd): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    (m, n, k): (u32, u32, u32),
    (a, b): (&[f32], &[f32]),
    (warmup, iters): (usize, usize),
) -> Result<Vec<(&'static str, String, Duration)>, CliError> {
    use crate::epilogue::Activation;
    use crate::gemm_fused::EpilogueArgs;
    use crate::gemm_tma::host::{kernel_name, launch, quantize};
    use crate::gemm_tma::{Bf16Operands, Fp8Operands};
    use ck_core::device::E4m3;
    let mut rows = Vec::new();
    let mut c16 =
        DeviceBuffer::<Bf16>::zeros(device, m as usize * n as usize).map_err(launch_error)?;
    let mut c32 =
        DeviceBuffer::<f32>::zeros(device, m as usize * n as usize).map_err(launch_error)?;
    let bias: Vec<Bf16> = (0..n)
        .map(|i| Bf16::from_f32((i % 7) as f32 / 7.0 - 0.5))
        .collect();
    let bias = DeviceBuffer::from_slice(device, &bias).map_err(launch_error)?;
    let gelu = EpilogueArgs {
        bias: Some(&bias),
        activation: Activation::Gelu,
        ..Default::default()
    };
    let plain = EpilogueArgs::default();
    for (dtype, args) in [("bf16", &plain), ("bf16_bias_gelu", &gelu)] {
        let t = timed(device, warmup, iters, |d| {
            launch::<Bf16Operands, Bf16>(d, (ad, bd), &mut c16, 1, (m, n, k), args).map(|_| ())
        })
        .map_err(launch_error)?;
        let tma = matches!(choose(device, 1, (m, n, k), args), Choice::Tma);
        rows.push((
            dtype,
            auto_mark(kernel_name::<Bf16Operands, Bf16>(args), tma),
            t,
        ));
    }
    let t = timed(device, warmup, iters, |d| {
        launch::<Bf16Operands, f32>(
            d,
            (ad, bd),
            &mut c32,
            1,
            (m, n, k),
            &EpilogueArgs::default(),
        )
        .map(|_| ())
    })
    .map_err(launch_error)?;
    rows.push(("bf16_f32out", "gemm_tma_bf16_f32".into(), t));
    // e4m3 operands: A as is, B transposed to [n, k]; the scales go into alpha.
    let bt = crate::gemm_tma::host::transpose_batched(b, 1, (k, n));
    let ((qa, sa), (qb, sb)) = (quantize::<E4m3>(a), quantize::<E4m3>(&bt));
    let (a8, b8) = (
        DeviceBuffer::from_slice(device, &qa).map_err(launch_error)?,
        DeviceBuffer::from_slice(device, &qb).map_err(launch_error)?,
    );
    let scaled = EpilogueArgs {
        alpha: sa * sb,
        ..Default::default()
    };
    let t = timed(device, warmup, iters, |d| {
        launch::<Fp8Operands<E4m3, E4m3>, Bf16>(d, (&a8, &b8), &mut c16, 1, (m, n, k), &scaled)
            .map(|_| ())
    })
    .map_err(launch_error)?;
    rows.push(("fp8_e4m3", "gemm_fp8_e4m3 (auto)".into(), t));
    Ok(rows)
}

/// Batched GEMM, 16 products of 2048³ (bf16 in and out) against torch.bmm from the peers.
fn bench_bmm(
    device: &Device,
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    use crate::gemm::host::Bf16Kernel;
    use crate::gemm_fused::{launch_batched, EpilogueArgs};
    let (batch, m, n, k) = (16u32, 2048u32, 2048u32, 2048u32);
    let mut rng = Rng(0xb33);
    let rand = |rng: &mut Rng, len: u32| -> Vec<Bf16> {
        (0..len).map(|_| Bf16::from_f32(rng.f32())).collect()
    };
    let a =
        DeviceBuffer::from_slice(device, &rand(&mut rng, batch * m * k)).map_err(launch_error)?;
    let b =
        DeviceBuffer::from_slice(device, &rand(&mut rng, batch * k * n)).map_err(launch_error)?;
    let mut c =
        DeviceBuffer::<Bf16>::zeros(device, (batch * m * n) as usize).map_err(launch_error)?;
    let kernel = Bf16Kernel::for_shape(device, (batch * m, n, k));
    let plain = EpilogueArgs::default();
    let t = timed(device, warmup, iters, |d| {
        launch_batched(d, kernel, (&a, &b), &mut c, batch, (m, n, k), &plain).map(|_| ())
    })
    .map_err(launch_error)?;
    let t_tma = timed(device, warmup, iters, |d| {
        crate::gemm_tma::host::launch::<crate::gemm_tma::Bf16Operands, Bf16>(
            d,
            (&a, &b),
            &mut c,
            batch,
            (m, n, k),
            &plain,
        )
        .map(|_| ())
    })
    .map_err(launch_error)?;
    let key = format!("{batch}x{m}x{n}x{k}");
    let row = |kernel: String, t: Duration| {
        let ours = 2.0 * batch as f64 * m as f64 * n as f64 * k as f64 / t.as_secs_f64() / 1e12;
        let mut row = json!({"case": format!("bmm_bf16 {key}"), "kernel": kernel, "ms": t.as_secs_f64() * 1e3, "ours_tflops": ours});
        if let Some(p) = peers["gemm"][&key]["bmm_bf16_tflops"].as_f64() {
            row["cublas_tflops"] = json!(p);
            row["vs_cublas"] = json!(ours / p);
        }
        row
    };
    Ok(vec![
        row(format!("{}_bf16", kernel.name()), t),
        row("gemm_tma_bf16".into(), t_tma),
    ])
}

/// The grouped cases (the same list as `grouped_cases` in `scripts/bench_peers.py`):
/// mixture-of-experts layers as (tokens per expert, N, K).
fn grouped_cases() -> [(Vec<u32>, u32, u32); 2] {
    [
        (
            vec![1024, 3072, 512, 2560, 1536, 2048, 4096, 1536],
            4096,
            4096,
        ),
        ((0..64).map(|g| 37 * g % 256).collect(), 2048, 2048),
    ]
}

/// Grouped GEMM (bf16 in and out) on [`grouped_cases`] against the faster of
/// `torch._grouped_mm` and a loop of `torch.mm` from the peers.
fn bench_grouped(
    device: &Device,
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    use crate::gemm_fused::EpilogueArgs;
    use crate::gemm_grouped::host::{GroupedGemm, Operand, Problem};
    let mut rows = Vec::new();
    for (tokens, n, k) in grouped_cases() {
        let problems: Vec<Problem> = tokens.iter().map(|&m| Problem::new(m, n, k)).collect();
        let grouped = GroupedGemm::new(device, &problems).map_err(launch_error)?;
        let mut rng = Rng(0x6e0);
        let mut rand = |len: u32| -> Result<DeviceBuffer<Bf16>, CliError> {
            let v: Vec<Bf16> = (0..len).map(|_| Bf16::from_f32(rng.f32())).collect();
            DeviceBuffer::from_slice(device, &v).map_err(launch_error)
        };
        let (a, b) = (
            rand(grouped.len(Operand::A))?,
            rand(grouped.len(Operand::B))?,
        );
        let mut c = DeviceBuffer::<Bf16>::zeros(device, grouped.len(Operand::C) as usize)
            .map_err(launch_error)?;
        let t = timed(device, warmup, iters, |d| {
            grouped
                .launch(d, (&a, &b), &mut c, &EpilogueArgs::default())
                .map(|_| ())
        })
        .map_err(launch_error)?;
        let m: u32 = tokens.iter().sum();
        let key = format!("moe{} {m}x{n}x{k}", tokens.len());
        let ours = 2.0 * m as f64 * n as f64 * k as f64 / t.as_secs_f64() / 1e12;
        let mut row = json!({"case": format!("grouped_bf16 {key}"), "kernel": "gemm_grouped_bf16", "ms": t.as_secs_f64() * 1e3, "ours_tflops": ours});
        if let Some(p) = peers["gemm"][&key]["grouped_bf16_tflops"].as_f64() {
            row["cublas_tflops"] = json!(p);
            row["vs_cublas"] = json!(ours / p);
        }
        rows.push(row);
    }
    Ok(rows)
}
