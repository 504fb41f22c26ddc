//! The grouped GEMM on the emulator: problems of mixed and degenerate shapes (1 × 1 × 1, M = 0,
//! N = 0, K = 0, N and K off the 16-byte vectors, several tiles in both dims) in one launch,
//! on the three kernels (groups with and without rows that are not whole vectors; problems
//! that share N and K on the TMA kernel), with every epilogue input, against an fp64
//! reference written here; more problems than one warp's vote covers; the layout's offsets;
//! the TMA kernel's row table; bad buffers as errors.

use ck_core::device::{Bf16, Real};
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::gemm::fused::{EpilogueArgs, HostEpilogue};
use ck_kernels::gemm::grouped::host::{
    row_table, GroupedGemm, GroupedOutput, Operand, Problem, ALIGN,
};

fn round<O: Real>(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| O::from_f32(x).to_f32()).collect()
}

fn random(rng: &mut Rng, len: u32) -> Vec<f32> {
    (0..len).map(|_| rng.f32()).collect()
}

/// `act(alpha · A·B + beta · D + bias)` in f64, one problem.
fn reference(
    p: Problem,
    (a, b): (&[f32], &[f32]),
    (d, bias): (Option<&[f32]>, Option<&[f32]>),
    (alpha, beta, activation): (f32, f32, Activation),
) -> Vec<f64> {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
            let mut x = alpha as f64 * dot;
            if let Some(d) = d {
                x += beta as f64 * d[i * n + j] as f64;
            }
            if let Some(bias) = bias {
                x += bias[j] as f64;
            }
            c[i * n + j] = match activation {
                Activation::None => x,
                Activation::Relu => x.max(0.0),
                Activation::Silu => x / (1.0 + (-x).exp()),
                Activation::Gelu => {
                    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3));
                    0.5 * x * (1.0 + u.tanh())
                }
            };
        }
    }
    c
}

/// Runs `problems` in one launch with C of type `O`, with and without D and bias, and checks
/// every element of every problem: `tol(want, scale)` bounds the error.
fn check<O: GroupedOutput>(problems: &[Problem], tol: impl Fn(f64, f64) -> f64) {
    let device = Device::Emulator { workers: 2 };
    let grouped = GroupedGemm::new(&device, problems).unwrap();
    let mut rng = Rng(0x9e0);
    let per = |rng: &mut Rng, op: Operand| -> Vec<Vec<f32>> {
        problems
            .iter()
            .map(|p| random(rng, p.len(op) as u32))
            .collect()
    };
    let a: Vec<Vec<f32>> = per(&mut rng, Operand::A)
        .iter()
        .map(|v| round::<Bf16>(v))
        .collect();
    let b: Vec<Vec<f32>> = per(&mut rng, Operand::B)
        .iter()
        .map(|v| round::<Bf16>(v))
        .collect();
    let d: Vec<Vec<f32>> = per(&mut rng, Operand::C)
        .iter()
        .map(|v| round::<O>(v))
        .collect();
    let bias: Vec<Vec<f32>> = per(&mut rng, Operand::Bias)
        .iter()
        .map(|v| round::<O>(v))
        .collect();
    let packed = |op, v: &[Vec<f32>]| grouped.pack(op, v).unwrap();
    let (ap, bp) = (packed(Operand::A, &a), packed(Operand::B, &b));
    let (dp, biasp) = (packed(Operand::C, &d), packed(Operand::Bias, &bias));
    let cases = [
        (1.0, 1.0, false, false, Activation::None),
        (0.5, -2.0, true, true, Activation::Gelu),
        (1.0, 1.0, false, true, Activation::Silu),
    ];
    for (alpha, beta, with_d, with_bias, activation) in cases {
        let epilogue = HostEpilogue {
            alpha,
            beta,
            d: with_d.then_some(&dp[..]),
            bias: with_bias.then_some(&biasp[..]),
            activation,
        };
        let (c, _) = grouped
            .gemm_on_host_values::<O>(&device, (&ap, &bp), epilogue)
            .unwrap();
        let c = grouped.unpack(Operand::C, &c).unwrap();
        for (g, p) in problems.iter().enumerate() {
            let want = reference(
                *p,
                (&a[g], &b[g]),
                (
                    with_d.then_some(&d[g][..]),
                    with_bias.then_some(&bias[g][..]),
                ),
                (alpha, beta, activation),
            );
            let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
            for (i, (&got, &w)) in c[g].iter().zip(&want).enumerate() {
                assert!(
                    (got as f64 - w).abs() <= tol(w, scale),
                    "problem {g} {p:?} epilogue {:?}: C[{}, {}] = {got}, want {w}",
                    (alpha, beta, with_d, with_bias, activation),
                    i / p.n as usize,
                    i % p.n as usize
                );
            }
        }
    }
}

/// Mixed shapes: two tiles down and two across, nothing (M = 0, N = 0), a 1 × 1 × 1, K = 0 (C
/// is the epilogue of zero), N and K off the 8-element vectors, M of one row.
const MIXED: [Problem; 8] = [
    Problem::new(200, 300, 72),
    Problem::new(0, 256, 64),
    Problem::new(1, 1, 1),
    Problem::new(37, 0, 16),
    Problem::new(5, 21, 13),
    Problem::new(64, 40, 0),
    Problem::new(1, 264, 24),
    Problem::new(130, 8, 8),
];

#[test]
fn grouped_gemm_f32_output_matches_fp64_on_mixed_shapes() {
    check::<f32>(&MIXED, |_, scale| 1e-5 * scale.max(1.0));
}

#[test]
fn grouped_gemm_bf16_output_is_the_reference_rounded_once() {
    check::<Bf16>(&MIXED, |w, scale| {
        w.abs() * 2f64.powi(-8) + 1e-5 * scale.max(1.0)
    });
}

/// Every N and K a multiple of 8: the kernels without element copies run.
const WHOLE_VECTORS: [Problem; 5] = [
    Problem::new(200, 264, 72),
    Problem::new(0, 256, 64),
    Problem::new(1, 8, 8),
    Problem::new(64, 40, 0),
    Problem::new(130, 520, 16),
];

#[test]
fn grouped_gemm_of_whole_vector_rows_matches_fp64_in_both_output_types() {
    check::<f32>(&WHOLE_VECTORS, |_, scale| 1e-5 * scale.max(1.0));
    check::<Bf16>(&WHOLE_VECTORS, |w, scale| {
        w.abs() * 2f64.powi(-8) + 1e-5 * scale.max(1.0)
    });
}

/// A mixture-of-experts layer: every problem of the same N and K (multiples of 8), 257 rows on
/// average over those with rows (the TMA kernel's side of `TMA_MIN_ROWS`). Problems' rows end
/// inside a tile and inside a 16-row box (300, 390, 337), a problem has no rows and one has
/// one; N ends 8 columns into a second tile, K 8 into a second stage.
const SHARED_N_K: [Problem; 5] = [
    Problem::new(300, 264, 72),
    Problem::new(0, 264, 72),
    Problem::new(390, 264, 72),
    Problem::new(1, 264, 72),
    Problem::new(337, 264, 72),
];

#[test]
fn problems_that_share_n_and_k_run_on_the_tma_kernel_and_match_fp64() {
    let device = Device::Emulator { workers: 2 };
    let grouped = GroupedGemm::new(&device, &SHARED_N_K).unwrap();
    // alpha alone on the TMA kernel (11 row tiles by 2 column tiles on a grid of 2: each
    // block runs 11 tiles); any other epilogue on the `cp.async` one.
    assert_eq!(grouped.kernel_name::<Bf16>(0), "gemm_tma_grouped_bf16");
    assert_eq!(grouped.kernel_name::<f32>(0), "gemm_tma_grouped_bf16_f32");
    assert_eq!(grouped.kernel_name::<f32>(1), "gemm_grouped_bf16_f32");
    check::<f32>(&SHARED_N_K, |_, scale| 1e-5 * scale.max(1.0));
    check::<Bf16>(&SHARED_N_K, |w, scale| {
        w.abs() * 2f64.powi(-8) + 1e-5 * scale.max(1.0)
    });
    // Problems of different N, and problems of too few rows to pay for the TMA kernel (255 on
    // average: bound by reading B), stay on the `cp.async` kernel.
    let mixed = GroupedGemm::new(&device, &WHOLE_VECTORS).unwrap();
    assert_eq!(mixed.kernel_name::<Bf16>(0), "gemm_grouped_bf16");
    let shallow = [Problem::new(255, 8, 8), Problem::new(0, 8, 8)];
    let shallow = GroupedGemm::new(&device, &shallow).unwrap();
    assert_eq!(shallow.kernel_name::<Bf16>(0), "gemm_grouped_bf16");
    let deep = [Problem::new(257, 8, 8), Problem::new(255, 8, 8)];
    let deep = GroupedGemm::new(&device, &deep).unwrap();
    assert_eq!(deep.kernel_name::<Bf16>(0), "gemm_tma_grouped_bf16");
}

#[test]
fn the_row_table_cuts_each_problem_into_tiles_of_its_own() {
    // The worked example of `gemm::tma::grouped`: rows 0..200, none, 200..330.
    let firsts = [0, 128, 200, 328];
    let ends = [200, 200, 330, 330];
    let problems = [0, 0, 2, 2];
    let want: Vec<u32> = [firsts, ends, problems].concat();
    assert_eq!(row_table(&[200, 0, 130]), want);
    assert!(row_table(&[0, 0]).is_empty());
}

#[test]
fn more_problems_than_one_vote_covers_with_empty_ones_at_its_edges() {
    // 70 problems: the search takes three steps of 32; empty problems at 31, 32 and the end.
    let problems: Vec<Problem> = (0..70u32)
        .map(|g| match g {
            31 | 32 | 69 => Problem::new(0, 8, 8),
            _ => Problem::new(1 + g % 3, 8 * (1 + g % 2), 8),
        })
        .collect();
    check::<f32>(&problems, |_, scale| 1e-5 * scale.max(1.0));
}

#[test]
fn the_layout_is_concatenation_when_every_operand_is_whole_vectors() {
    let device = Device::emulator();
    // A mixture-of-experts layer: tokens per expert, shared N and K (multiples of 8).
    let tokens = [3u32, 0, 17, 128, 1];
    let (n, k) = (24u32, 40u32);
    let problems: Vec<Problem> = tokens.iter().map(|&m| Problem::new(m, n, k)).collect();
    let grouped = GroupedGemm::new(&device, &problems).unwrap();
    let mut rows = 0;
    for (g, &m) in tokens.iter().enumerate() {
        assert_eq!(grouped.offset(g, Operand::A), rows * k);
        assert_eq!(grouped.offset(g, Operand::C), rows * n);
        assert_eq!(grouped.offset(g, Operand::B), g as u32 * k * n);
        assert_eq!(grouped.offset(g, Operand::Bias), g as u32 * n);
        rows += m;
    }
    assert_eq!(grouped.len(Operand::A), rows * k);
    assert_eq!(grouped.len(Operand::B), 5 * k * n);
    // 128 × 256 tiles: 1 + 0 + 1 + 1 + 1.
    assert_eq!(grouped.tiles(), 4);
}

#[test]
fn unaligned_problems_start_their_successors_on_the_next_vector() {
    let device = Device::emulator();
    let problems = [
        Problem::new(3, 5, 7),
        Problem::new(2, 8, 8),
        Problem::new(1, 1, 1),
    ];
    let grouped = GroupedGemm::new(&device, &problems).unwrap();
    for op in [Operand::A, Operand::B, Operand::C, Operand::Bias] {
        let mut end = 0;
        for (g, p) in problems.iter().enumerate() {
            let at = grouped.offset(g, op);
            assert_eq!(at % ALIGN, 0, "{op:?} of problem {g}");
            assert!(
                at >= end && at < end + ALIGN,
                "{op:?} of problem {g}: {at} after {end}"
            );
            end = at + p.len(op) as u32;
        }
        assert_eq!(grouped.len(op), end);
    }
    // A: 21 elements, then 16 from 24, then 1 from 40.
    assert_eq!(grouped.offset(2, Operand::A), 40);
}

#[test]
fn bad_buffers_and_scales_are_errors() {
    let device = Device::emulator();
    let problems = [Problem::new(4, 8, 8), Problem::new(2, 16, 8)];
    let grouped = GroupedGemm::new(&device, &problems).unwrap();
    let bf16 = |len: u32| DeviceBuffer::<Bf16>::zeros(&device, len as usize).unwrap();
    let (a, b) = (bf16(grouped.len(Operand::A)), bf16(grouped.len(Operand::B)));
    let mut c = DeviceBuffer::<f32>::zeros(&device, grouped.len(Operand::C) as usize).unwrap();
    let short = DeviceBuffer::<f32>::zeros(&device, 3).unwrap();
    let rule = |c: &mut DeviceBuffer<f32>, a: &DeviceBuffer<Bf16>, args: EpilogueArgs<'_, f32>| {
        grouped
            .launch(&device, (a, &b), c, &args)
            .unwrap_err()
            .rule()
    };
    assert_eq!(
        rule(&mut c, &bf16(7), EpilogueArgs::default()),
        "shape-mismatch"
    );
    let d = EpilogueArgs {
        d: Some(&short),
        ..Default::default()
    };
    assert_eq!(rule(&mut c, &a, d), "shape-mismatch");
    let bias = EpilogueArgs {
        bias: Some(&short),
        ..Default::default()
    };
    assert_eq!(rule(&mut c, &a, bias), "shape-mismatch");
    let inf = EpilogueArgs {
        beta: f32::INFINITY,
        ..Default::default()
    };
    assert_eq!(rule(&mut c, &a, inf), "bad-scale");
    let mut short_c = DeviceBuffer::<f32>::zeros(&device, 8).unwrap();
    assert_eq!(
        rule(&mut short_c, &a, EpilogueArgs::default()),
        "shape-mismatch"
    );
    // Host values: one operand per problem, each of its problem's length.
    let err = grouped.pack(Operand::A, &[vec![0.0; 32]]).unwrap_err();
    assert_eq!(err.rule(), "shape-mismatch");
    let err = grouped
        .pack(Operand::B, &[vec![0.0; 64], vec![0.0; 100]])
        .unwrap_err();
    assert!(err.to_string().contains("problem 1"), "{err}");
    let c = vec![0.0f32; grouped.len(Operand::C) as usize - 1];
    assert_eq!(
        grouped.unpack(Operand::C, &c).unwrap_err().rule(),
        "shape-mismatch"
    );
}

#[test]
fn a_group_with_no_tiles_launches_nothing() {
    let device = Device::emulator();
    let grouped =
        GroupedGemm::new(&device, &[Problem::new(0, 8, 8), Problem::new(4, 0, 8)]).unwrap();
    assert_eq!(grouped.tiles(), 0);
    let (c, _) = grouped
        .gemm_on_host_values::<f32>(&device, (&[0.0; 32], &[0.0; 64]), HostEpilogue::default())
        .unwrap();
    assert!(c.is_empty());
    let none = GroupedGemm::new(&device, &[]).unwrap();
    assert!(none.is_empty());
}

#[test]
fn experts_weights_as_nn_linear_keeps_them_run_on_the_tma_kernel() {
    // B [groups, N, K]: each expert's [N, K] weight, read K-major (`launch_nk`), against the
    // fp64 product with the same weight transposed; few rows per expert run there too.
    let device = Device::Emulator { workers: 2 };
    let problems = [
        Problem::new(130, 264, 72),
        Problem::new(0, 264, 72),
        Problem::new(3, 264, 72),
    ];
    let grouped = GroupedGemm::new(&device, &problems).unwrap();
    let (n, k) = (264usize, 72usize);
    let mut rng = Rng(0x4e1);
    let a: Vec<Vec<f32>> = problems
        .iter()
        .map(|p| random(&mut rng, p.m * 72))
        .collect();
    let w: Vec<Vec<f32>> = problems
        .iter()
        .map(|_| random(&mut rng, (n * k) as u32))
        .collect();
    let (a_all, w_all) = (grouped.pack(Operand::A, &a).unwrap(), w.concat());
    let up = |v: &[f32]| {
        DeviceBuffer::from_slice(
            &device,
            &round::<Bf16>(v)
                .iter()
                .map(|&x| Bf16::from_f32(x))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    };
    let (ad, wd) = (up(&a_all), up(&w_all));
    let mut c = DeviceBuffer::<f32>::zeros(&device, grouped.len(Operand::C) as usize).unwrap();
    grouped.launch_nk(&device, (&ad, &wd), &mut c, 0.5).unwrap();
    let c_all = c.to_vec().unwrap();
    let c = grouped.unpack(Operand::C, &c_all).unwrap();
    for (g, p) in problems.iter().enumerate() {
        // [N, K] → [K, N] for the reference.
        let b: Vec<f32> = (0..k * n).map(|i| w[g][(i % n) * k + i / n]).collect();
        let want = reference(
            *p,
            (&round::<Bf16>(&a[g]), &round::<Bf16>(&b)),
            (None, None),
            (0.5, 0.0, Activation::None),
        );
        for (i, (&got, &want)) in c[g].iter().zip(&want).enumerate() {
            assert!(
                (got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                "expert {g}, C[{i}] = {got}, want {want}"
            );
        }
    }
    // Problems of different N have no TMA kernel: the [N, K] layout is refused.
    let mixed =
        GroupedGemm::new(&device, &[Problem::new(4, 8, 8), Problem::new(4, 16, 8)]).unwrap();
    let (ad, wd) = (up(&vec![0.0; 64]), up(&vec![0.0; 192]));
    let mut c = DeviceBuffer::<f32>::zeros(&device, mixed.len(Operand::C) as usize).unwrap();
    let e = mixed
        .launch_nk(&device, (&ad, &wd), &mut c, 1.0)
        .unwrap_err();
    assert_eq!(e.rule(), "shape-unsupported");
}
