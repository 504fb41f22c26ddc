//! `ck bench gemm`: the GEMM family's TFLOP/s next to cuBLAS: f32, bf16 with f32 or bf16 C,
//! the fused epilogue, the TMA and fp8 kernels per shape; batched and grouped GEMM on their
//! fixed cases. The peer is cuBLASLt timed in turn with each kernel where it loads
//! ([`super::gemm_peer`]; for grouped GEMM a loop of its products, one per problem), else the
//! `--peers` file (torch's cuBLAS, `torch._scaled_mm`, `torch.bmm`, the grouped peers).

use super::common::{launch_error, parse_shapes};
use super::gemm_peer::{GemmPeer, Timed};
use super::CliError;
use ck_core::device::Bf16;
use ck_core::host::cublas_lt::{LtOperands, LtProblem};
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::auto::{choose, Choice};
use serde_json::Value;

/// The cases of `ck bench gemm`, the names `--dtypes` takes.
pub(super) const CASES: [&str; 11] = [
    "f32",
    "bf16_f32out",
    "bf16",
    "bf16_bias_gelu",
    "bf16_residual",
    "bf16_bias_gelu_residual",
    "bf16_nk",
    "bf16_nk_residual",
    "fp8_e4m3",
    "bmm_bf16",
    "grouped_bf16",
];

/// The cases of `--dtypes` (comma-separated names of [`CASES`]; all when absent).
pub(super) fn parse_cases(dtypes: Option<&str>) -> Result<Vec<&'static str>, CliError> {
    let Some(list) = dtypes else {
        return Ok(CASES.to_vec());
    };
    list.split(',')
        .map(|d| {
            CASES.iter().copied().find(|&c| c == d).ok_or_else(|| {
                CliError::new(
                    ck_core::rules::DTYPE,
                    format!("`{d}` is not a GEMM case; use {}", CASES.join(", ")),
                )
            })
        })
        .collect()
}

/// GEMM rows of `ck bench` on `shapes` (MxNxK, comma-separated; default the three benchmark
/// shapes on a GPU, one small one on the emulator), for `cases` (names of [`CASES`]).
pub(super) fn bench(
    device: &Device,
    (shapes, cases): (Option<&str>, &[&str]),
    peers: &Value,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Value>, CliError> {
    let want = |case: &str| cases.contains(&case);
    use ck_kernels::gemm::auto::launch_bf16_with;
    use ck_kernels::gemm::choice::Bf16Kernel;
    use ck_kernels::gemm::mma_sync::host::launch_f32;
    let default = if device.is_emulator() {
        "128x128x64"
    } else {
        "4096x4096x4096,8192x8192x8192,8192x8192x1024"
    };
    let fixed_cases = !device.is_emulator() && shapes.is_none();
    let shapes = parse_shapes::<3>(shapes.unwrap_or(default), "MxNxK")?;
    let peer = GemmPeer::open(device, peers);
    let counts = (warmup, iters);
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
        let f32_problem = LtProblem {
            operands: LtOperands::F32,
            c_f32: true,
            ..LtProblem::bf16(m, n, k)
        };
        let shape = format!("{m}x{n}x{k}");
        let flop = 2.0 * m as f64 * n as f64 * k as f64;
        let row = |dtype: &str, kernel: &str, t: Timed| peer.row((dtype, &shape), kernel, flop, t);
        if want("f32") {
            let t = peer.time(
                device,
                counts,
                (f32_problem, "gemm_f32"),
                (&ad, &bd),
                (None, None),
                &mut cd,
                |d, c| launch_f32(d, &ad, &bd, c, (m, n, k)).map(|_| ()),
            )?;
            rows.push(row("f32", "gemm_f32", t));
        }
        // The tensor-core kernel on the same values rounded to bf16.
        let ab: Vec<Bf16> = a.iter().map(|&v| Bf16::from_f32(v)).collect();
        let bb: Vec<Bf16> = b.iter().map(|&v| Bf16::from_f32(v)).collect();
        let (ad, bd) = (
            DeviceBuffer::from_slice(device, &ab).map_err(launch_error)?,
            DeviceBuffer::from_slice(device, &bb).map_err(launch_error)?,
        );
        // The cp.async kernel for the shape; on the GPU also every other kernel that takes the
        // shape, for what the choice buys (on the emulator they would time the emulator).
        // "(auto)" marks what `ck run gemm` runs (gemm::auto's choice), here or on TMA.
        let picked = Bf16Kernel::for_shape(device, (m, n, k));
        let f32_plain = ck_kernels::gemm::fused::EpilogueArgs::<f32>::default();
        let f32_tma = !matches!(choose(device, 1, (m, n, k), &f32_plain), Choice::Wgmma(_));
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
        let f32out = LtProblem {
            c_f32: true,
            ..LtProblem::bf16(m, n, k)
        };
        for kernel in kernels.into_iter().filter(|_| want("bf16_f32out")) {
            let name = auto_mark(kernel.name(), kernel == picked && !f32_tma);
            let t = peer.time(
                device,
                counts,
                (f32out, &name),
                (&ad, &bd),
                (None, None),
                &mut cd,
                |d, c| launch_bf16_with(d, kernel, &ad, &bd, c, (m, n, k)).map(|_| ()),
            )?;
            rows.push(row("bf16_f32out", &name, t));
        }
        // bf16 C, plain and with a fused bias + GELU, on the wgmma kernel launch_bf16 picks.
        if picked != Bf16Kernel::MmaSync {
            use ck_kernels::gemm::epilogue::Activation;
            use ck_kernels::gemm::fused::{launch, EpilogueArgs};
            let mut c16 = DeviceBuffer::<Bf16>::zeros(device, m as usize * n as usize)
                .map_err(launch_error)?;
            let bias: Vec<Bf16> = (0..n).map(|_| Bf16::from_f32(rng.f32())).collect();
            let bias = DeviceBuffer::from_slice(device, &bias).map_err(launch_error)?;
            let gelu = EpilogueArgs {
                bias: Some(&bias),
                activation: Activation::Gelu,
                ..Default::default()
            };
            let resid = residual(device, &mut rng, m * n)?;
            let with_d = EpilogueArgs {
                d: Some(&resid),
                ..Default::default()
            };
            let everything = EpilogueArgs {
                d: Some(&resid),
                ..gelu
            };
            let epilogues = [
                ("bf16", EpilogueArgs::default()),
                ("bf16_bias_gelu", gelu),
                ("bf16_residual", with_d),
                ("bf16_bias_gelu_residual", everything),
            ];
            for (dtype, args) in epilogues.into_iter().filter(|(d, _)| want(d)) {
                let problem = LtProblem {
                    bias_gelu: args.bias.is_some(),
                    residual: args.d.is_some(),
                    ..LtProblem::bf16(m, n, k)
                };
                let tma = !matches!(choose(device, 1, (m, n, k), &args), Choice::Wgmma(_));
                let name = auto_mark(&format!("{}_bf16", picked.name()), !tma);
                let t = peer.time(
                    device,
                    counts,
                    (problem, &name),
                    (&ad, &bd),
                    (args.bias, args.d),
                    &mut c16,
                    |d, c| launch(d, picked, (&ad, &bd), c, (m, n, k), &args).map(|_| ()),
                )?;
                rows.push(row(dtype, &name, t));
            }
        }
        if n.is_multiple_of(8) && k.is_multiple_of(16) {
            rows.extend(
                bench_gemm_tma(
                    device,
                    &peer,
                    &want,
                    (&ad, &bd),
                    (m, n, k),
                    (&a, &b),
                    counts,
                )?
                .into_iter()
                .map(|(dtype, kernel, t)| row(dtype, &kernel, t)),
            );
        }
    }
    if fixed_cases && want("bmm_bf16") {
        rows.extend(bench_bmm(device, &peer, counts)?);
    }
    if fixed_cases && want("grouped_bf16") {
        rows.extend(bench_grouped(device, &peer, counts)?);
    }
    Ok(rows)
}

/// A residual D of `len` random bf16 values for the `bf16_residual` case (C = A·B + D).
fn residual(device: &Device, rng: &mut Rng, len: u32) -> Result<DeviceBuffer<Bf16>, CliError> {
    let d: Vec<Bf16> = (0..len).map(|_| Bf16::from_f32(rng.f32())).collect();
    DeviceBuffer::from_slice(device, &d).map_err(launch_error)
}

/// `kernel`, marked "(auto)" when it is the one `ck run gemm` runs (`gemm::auto`'s choice).
fn auto_mark(kernel: &str, picked: bool) -> String {
    if picked {
        format!("{kernel} (auto)")
    } else {
        kernel.to_string()
    }
}

/// The TMA, warp-specialised GEMMs on one shape: bf16 operands with bf16 C (plain and
/// bias + GELU) and f32 C, bf16 with B as `[N, K]` (`gemm::linear`, plain and with the
/// residual), and e4m3 operands (per-tensor scales) with bf16 C. Returns (case, kernel, time)
/// rows.
fn bench_gemm_tma(
    device: &Device,
    peer: &GemmPeer,
    want: &dyn Fn(&str) -> bool,
    (ad, bd): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
    (m, n, k): (u32, u32, u32),
    (a, b): (&[f32], &[f32]),
    counts: (usize, usize),
) -> Result<Vec<(&'static str, String, Timed)>, CliError> {
    use ck_core::device::E4m3;
    use ck_kernels::gemm::auto::AutoOutput;
    use ck_kernels::gemm::epilogue::Activation;
    use ck_kernels::gemm::fused::EpilogueArgs;
    use ck_kernels::gemm::tma::host::{launch, quantize};
    use ck_kernels::gemm::tma::Fp8Operands;
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
    let resid = residual(device, &mut Rng(0xd), m * n)?;
    let with_d = EpilogueArgs {
        d: Some(&resid),
        ..Default::default()
    };
    let everything = EpilogueArgs {
        d: Some(&resid),
        ..gelu
    };
    let epilogues = [
        ("bf16", &plain),
        ("bf16_bias_gelu", &gelu),
        ("bf16_residual", &with_d),
        ("bf16_bias_gelu_residual", &everything),
    ];
    for (dtype, args) in epilogues.into_iter().filter(|(d, _)| want(d)) {
        let problem = LtProblem {
            bias_gelu: args.bias.is_some(),
            residual: args.d.is_some(),
            ..LtProblem::bf16(m, n, k)
        };
        let choice = choose(device, 1, (m, n, k), args);
        // The 256-wide tiles, and the 192-wide ones where a kernel is compiled for the epilogue.
        for (narrow, picked) in [(false, Choice::Tma), (true, Choice::TmaN192)] {
            if narrow && !Bf16::narrow_takes(args.flags()) {
                continue;
            }
            let name = auto_mark(Bf16::tma_name(args, narrow), choice == picked);
            let t = peer.time(
                device,
                counts,
                (problem, &name),
                (ad, bd),
                (args.bias, args.d),
                &mut c16,
                |d, c| Bf16::launch_tma(d, (ad, bd), c, (1, (m, n, k)), args, narrow).map(|_| ()),
            )?;
            rows.push((dtype, name, t));
        }
    }
    let f32out = LtProblem {
        c_f32: true,
        ..LtProblem::bf16(m, n, k)
    };
    let f32_plain = EpilogueArgs::<f32>::default();
    let f32_choice = choose(device, 1, (m, n, k), &f32_plain);
    if want("bf16_f32out") {
        for (narrow, picked) in [(false, Choice::Tma), (true, Choice::TmaN192)] {
            let name = auto_mark(f32::tma_name(&f32_plain, narrow), f32_choice == picked);
            let t = peer.time(
                device,
                counts,
                (f32out, &name),
                (ad, bd),
                (None, None),
                &mut c32,
                |d, c| {
                    f32::launch_tma(d, (ad, bd), c, (1, (m, n, k)), &f32_plain, narrow).map(|_| ())
                },
            )?;
            rows.push(("bf16_f32out", name, t));
        }
    }
    // B as `[n, k]` (`nn.Linear`'s weight): `gemm::linear`'s kernels against cuBLASLt's TN.
    let bt = ck_kernels::gemm::tma::host::transpose_batched(b, 1, (k, n));
    if want("bf16_nk") || want("bf16_nk_residual") {
        use ck_kernels::gemm::linear::{choose as choose_linear, Kernel, LinearOutput};
        let bt16: Vec<Bf16> = bt.iter().map(|&v| Bf16::from_f32(v)).collect();
        let btd = DeviceBuffer::from_slice(device, &bt16).map_err(launch_error)?;
        let cases = [("bf16_nk", &plain), ("bf16_nk_residual", &with_d)];
        for (dtype, args) in cases.into_iter().filter(|(d, _)| want(d)) {
            let problem = LtProblem {
                operands: LtOperands::Bf16Nk,
                residual: args.d.is_some(),
                ..LtProblem::bf16(m, n, k)
            };
            let choice = choose_linear(device, (m, n, k), args);
            for (narrow, picked) in [(false, Kernel::Tma), (true, Kernel::TmaN192)] {
                if narrow && !<Bf16 as LinearOutput>::narrow_takes(args.flags()) {
                    continue;
                }
                let kernel = <Bf16 as LinearOutput>::tma_name(args, narrow);
                let name = auto_mark(kernel, choice == picked);
                let t = peer.time(
                    device,
                    counts,
                    (problem, &name),
                    (ad, &btd),
                    (None, args.d),
                    &mut c16,
                    |d, c| {
                        <Bf16 as LinearOutput>::launch_tma(
                            d,
                            (ad, &btd),
                            c,
                            (m, n, k),
                            args,
                            narrow,
                        )
                        .map(|_| ())
                    },
                )?;
                rows.push((dtype, name, t));
            }
        }
    }
    if !want("fp8_e4m3") {
        return Ok(rows);
    }
    // e4m3 operands: A as is, B transposed to [n, k]; the scales go into alpha.
    let ((qa, sa), (qb, sb)) = (quantize::<E4m3>(a), quantize::<E4m3>(&bt));
    let (a8, b8) = (
        DeviceBuffer::from_slice(device, &qa).map_err(launch_error)?,
        DeviceBuffer::from_slice(device, &qb).map_err(launch_error)?,
    );
    let scaled = EpilogueArgs {
        alpha: sa * sb,
        ..Default::default()
    };
    let problem = LtProblem {
        operands: LtOperands::E4m3,
        alpha: scaled.alpha,
        ..LtProblem::bf16(m, n, k)
    };
    let name = "gemm_fp8_e4m3 (auto)";
    let t = peer.time(
        device,
        counts,
        (problem, name),
        (&a8, &b8),
        (None, None),
        &mut c16,
        |d, c| {
            launch::<Fp8Operands<E4m3, E4m3>, Bf16>(d, (&a8, &b8), c, 1, (m, n, k), &scaled)
                .map(|_| ())
        },
    )?;
    rows.push(("fp8_e4m3", name.into(), t));
    Ok(rows)
}

/// Batched GEMM, 16 products of 2048³ (bf16 in and out) against cuBLASLt's strided batch (or
/// `torch.bmm` from the peers file).
fn bench_bmm(
    device: &Device,
    peer: &GemmPeer,
    counts: (usize, usize),
) -> Result<Vec<Value>, CliError> {
    use ck_kernels::gemm::choice::Bf16Kernel;
    use ck_kernels::gemm::fused::{launch_batched, EpilogueArgs};
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
    let problem = LtProblem {
        batch,
        ..LtProblem::bf16(m, n, k)
    };
    let tma = !matches!(choose(device, batch, (m, n, k), &plain), Choice::Wgmma(_));
    let name = auto_mark(&format!("{}_bf16", kernel.name()), !tma);
    let tma_name = auto_mark("gemm_tma_bf16", tma);
    let t = peer.time(
        device,
        counts,
        (problem, &name),
        (&a, &b),
        (None, None),
        &mut c,
        |d, c| launch_batched(d, kernel, (&a, &b), c, batch, (m, n, k), &plain).map(|_| ()),
    )?;
    let t_tma = peer.time(
        device,
        counts,
        (problem, &tma_name),
        (&a, &b),
        (None, None),
        &mut c,
        |d, c| {
            use ck_kernels::gemm::tma::{host::launch, Bf16Operands};
            launch::<Bf16Operands, Bf16>(d, (&a, &b), c, batch, (m, n, k), &plain).map(|_| ())
        },
    )?;
    let shape = format!("{batch}x{m}x{n}x{k}");
    let flop = 2.0 * batch as f64 * m as f64 * n as f64 * k as f64;
    Ok(vec![
        peer.row(("bmm_bf16", &shape), &name, flop, t),
        peer.row(("bmm_bf16", &shape), &tma_name, flop, t_tma),
    ])
}

/// The grouped cases (the same list as `grouped_cases` in `scripts/bench_peers.py`):
/// mixture-of-experts layers as (tokens per expert, N, K). Skewed routing (8 experts, 512–4096 tokens), 64 experts of 0–255 tokens, and even routing
/// of 128, 256 and 512 tokens per expert around the point where a problem's FLOP per byte of
/// its weights (its rows) meets the H100's balance ([`ck_kernels::gemm::grouped::host::TMA_MIN_ROWS`]).
fn grouped_cases() -> [(Vec<u32>, u32, u32); 5] {
    [
        (
            vec![1024, 3072, 512, 2560, 1536, 2048, 4096, 1536],
            4096,
            4096,
        ),
        ((0..64).map(|g| 37 * g % 256).collect(), 2048, 2048),
        (vec![128; 32], 4096, 4096),
        (vec![256; 16], 4096, 4096),
        (vec![512; 16], 4096, 4096),
    ]
}

/// Grouped GEMM (bf16 in and out) on [`grouped_cases`] against a loop of cuBLASLt products,
/// one per problem, in turn (where cuBLASLt loads; else the `--peers` file's figure, the
/// faster of `torch._grouped_mm` and a loop of `torch.mm`).
fn bench_grouped(
    device: &Device,
    peer: &GemmPeer,
    counts: (usize, usize),
) -> Result<Vec<Value>, CliError> {
    use ck_kernels::gemm::fused::EpilogueArgs;
    use ck_kernels::gemm::grouped::host::{GroupedGemm, Operand, Problem};
    let mut rows = Vec::new();
    for (tokens, n, k) in grouped_cases() {
        let problems: Vec<Problem> = tokens.iter().map(|&m| Problem::new(m, n, k)).collect();
        let grouped = GroupedGemm::new(device, &problems).map_err(launch_error)?;
        let mut rng = Rng(0x6e0);
        let mut rand =
            |len: u32| -> Vec<Bf16> { (0..len).map(|_| Bf16::from_f32(rng.f32())).collect() };
        let (a, b) = (rand(grouped.len(Operand::A)), rand(grouped.len(Operand::B)));
        let upload = |v: &[Bf16]| DeviceBuffer::from_slice(device, v).map_err(launch_error);
        // The peer's operands: each problem's own (none for a problem without rows).
        let mut loop_problems = Vec::new();
        let (mut ab, mut c_at) = (Vec::new(), Vec::new());
        for (g, p) in problems.iter().enumerate().filter(|(_, p)| p.m > 0) {
            let part = |v: &[Bf16], op: Operand| {
                let at = grouped.offset(g, op) as usize;
                upload(&v[at..at + p.len(op) as usize])
            };
            ab.push((part(&a, Operand::A)?, part(&b, Operand::B)?));
            loop_problems.push((p.m, p.n, p.k));
            c_at.push(grouped.offset(g, Operand::C) as usize);
        }
        let (a, b) = (upload(&a)?, upload(&b)?);
        let mut c = DeviceBuffer::<Bf16>::zeros(device, grouped.len(Operand::C) as usize)
            .map_err(launch_error)?;
        let args = EpilogueArgs::default();
        let m: u32 = tokens.iter().sum();
        let shape = format!("moe{} {m}x{n}x{k}", tokens.len());
        let flop = 2.0 * m as f64 * n as f64 * k as f64;
        let picked = grouped.kernel_name::<Bf16>(args.flags());
        // Both kernels where the TMA one can run the group, the one `launch` picks marked.
        let kernels: &[bool] = if grouped.has_tma() {
            &[true, false]
        } else {
            &[false]
        };
        for &tma in kernels {
            let kernel = grouped.kernel_name_on::<Bf16>(tma);
            let name = auto_mark(kernel, kernel == picked);
            let t = peer.time_loop(
                device,
                counts,
                (&loop_problems, &name),
                &ab,
                (&mut c, &c_at),
                |d, c| grouped.launch_on(tma, d, (&a, &b), c, &args).map(|_| ()),
            )?;
            rows.push(peer.row(("grouped_bf16", &shape), &name, flop, t));
        }
    }
    Ok(rows)
}
