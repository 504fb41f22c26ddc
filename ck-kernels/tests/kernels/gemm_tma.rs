//! The TMA, warp-specialised GEMMs on the emulator against fp64 references computed here:
//! bf16 and fp8 (e4m3 × e4m3, e4m3 × e5m2) operands, f32 and bf16 C, epilogues, batches, edge
//! tiles, more tiles than blocks (each block walks several), stream-K (tiles summed by two or
//! more blocks), K = 0, and the shape errors.

use ck_core::device::{Bf16, E4m3, E5m2, Element, Real};
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::gemm::fused::HostEpilogue;
use ck_kernels::gemm::fused::{reference, upload, EpilogueArgs, GemmOutput};
use ck_kernels::gemm::tma::host::{
    gemm_fp8, kernel_name, launch, quantize, schedule, TmaGemm, TICKETS,
};
use ck_kernels::gemm::tma::{Bf16GatedOperands, Bf16NkOperands, Bf16Operands, Fp8Operands, N192};

/// The value of 8-bit float bits with `e` exponent and `m` mantissa bits, from the format's
/// definition (E4M3: no infinities, NaN only at all ones; E5M2: IEEE specials).
fn decode_fp8(bits: u8, e: u32, m: u32) -> f64 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((bits & 0x7f) >> m) as i32;
    let man = (bits & ((1 << m) - 1)) as f64;
    let bias = (1 << (e - 1)) - 1;
    assert!(
        exp < (1 << e) - 1 || (e == 4 && man < 7.0),
        "NaN or inf operand {bits:#x}"
    );
    let v = if exp == 0 {
        man / (1 << m) as f64 * 2f64.powi(1 - bias)
    } else {
        (1.0 + man / (1 << m) as f64) * 2f64.powi(exp - bias)
    };
    sign * v
}

/// How a test value of an operand type reads back in f64.
trait Operand: Element + Real {
    fn value(self) -> f64;
}
impl Operand for Bf16 {
    fn value(self) -> f64 {
        f32::from_bits((self.0 as u32) << 16) as f64
    }
}
impl Operand for E4m3 {
    fn value(self) -> f64 {
        decode_fp8(self.0, 4, 3)
    }
}
impl Operand for E5m2 {
    fn value(self) -> f64 {
        decode_fp8(self.0, 5, 2)
    }
}

/// One problem: `batch` products of `m × k` by `k × n`.
type Shape = (u32, u32, u32, u32);

/// Runs `C = act(alpha · A·B + beta · D + bias)` on the TMA kernel of `P` for each case and
/// checks every element of C against fp64; `b_t` says B is given as `[n, k]`.
fn check<P, O>(shape: Shape, cases: &[(f32, f32, bool, bool, Activation)], b_t: bool, tol: f64)
where
    P: TmaGemm<O>,
    P::A: Operand,
    P::B: Operand,
    O: GemmOutput,
{
    // Two blocks whatever the host's cores, so that every block walks several tiles (the ring's
    // stages and parities run on across them).
    check_on::<P, O>(2, shape, cases, b_t, tol);
}

/// [`check`] on an emulator of `multiprocessors` (the most blocks a launch has); returns the
/// last case's C.
fn check_on<P, O>(
    multiprocessors: usize,
    shape: Shape,
    cases: &[(f32, f32, bool, bool, Activation)],
    b_t: bool,
    tol: f64,
) -> Vec<f32>
where
    P: TmaGemm<O>,
    P::A: Operand,
    P::B: Operand,
    O: GemmOutput,
{
    let device = Device::Emulator {
        workers: multiprocessors,
    };
    let (batch, m, n, k) = shape;
    let mut last = Vec::new();
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    let mut rng = Rng(0x7a ^ (m * 131 + n * 7 + k) as u64);
    let a: Vec<P::A> = (0..batch as usize * mk)
        .map(|_| P::A::from_f32(4.0 * rng.f32()))
        .collect();
    let b: Vec<P::B> = (0..batch as usize * kn)
        .map(|_| P::B::from_f32(4.0 * rng.f32()))
        .collect();
    let round = |v: Vec<f32>| -> Vec<f32> { v.iter().map(|&x| O::from_f32(x).to_f32()).collect() };
    let d = round((0..batch as usize * mn).map(|_| rng.f32()).collect());
    let bias = round((0..n).map(|_| rng.f32()).collect());
    let upload_o = |v: &[f32]| upload::<O>(&device, v).unwrap();
    let (ad, bd) = (
        DeviceBuffer::from_slice(&device, &a).unwrap(),
        DeviceBuffer::from_slice(&device, &b).unwrap(),
    );
    let (dd, biasd) = (upload_o(&d), upload_o(&bias));
    for &(alpha, beta, with_d, with_bias, activation) in cases {
        let args = EpilogueArgs {
            alpha,
            beta,
            d: with_d.then_some(&dd),
            bias: with_bias.then_some(&biasd),
            activation,
        };
        let mut cd = upload_o(&vec![f32::NAN; batch as usize * mn]);
        launch::<P, O>(&device, (&ad, &bd), &mut cd, batch, (m, n, k), &args).unwrap();
        let c = cd.to_vec().unwrap();
        last = c.iter().map(|v| v.to_f32()).collect();
        for p in 0..batch as usize {
            // A·B in fp64 from the operands' values, B read as [k, n] or [n, k].
            let ab: Vec<f64> = (0..mn)
                .map(|i| {
                    let (r, col) = (i / n as usize, i % n as usize);
                    (0..k as usize)
                        .map(|kk| {
                            let bv = if b_t {
                                b[p * kn + col * k as usize + kk]
                            } else {
                                b[p * kn + kk * n as usize + col]
                            };
                            a[p * mk + r * k as usize + kk].value() * bv.value()
                        })
                        .sum()
                })
                .collect();
            let dp = &d[p * mn..(p + 1) * mn];
            let want = reference(
                &ab,
                (m, n),
                (alpha, beta),
                (with_d.then_some(dp), with_bias.then_some(&bias[..])),
                activation,
            );
            for (i, w) in want.iter().enumerate() {
                let got = c[p * mn + i].to_f32() as f64;
                let bound = tol * (w.abs() + 1.0);
                assert!(
                    (got - w).abs() <= bound,
                    "{shape:?} case {alpha}/{beta}/{with_d}/{with_bias}/{activation:?}: product {p}, C[{}, {}] = {got}, want {w}",
                    i / n as usize,
                    i % n as usize
                );
            }
        }
    }
    last
}

const PLAIN: [(f32, f32, bool, bool, Activation); 1] = [(1.0, 1.0, false, false, Activation::None)];
const EPILOGUES: [(f32, f32, bool, bool, Activation); 3] = [
    (0.5, 1.0, false, false, Activation::None),
    (1.0, -2.0, true, true, Activation::Silu),
    (1.5, 0.25, true, true, Activation::Gelu),
];

/// Bias and an activation: for bf16 operands and C, each on a kernel compiled for it alone
/// (`gemm_tma_bf16_bias*`).
const BIAS_AND: [(f32, f32, bool, bool, Activation); 4] = [
    (1.0, 1.0, false, true, Activation::None),
    (0.5, 1.0, false, true, Activation::Relu),
    (1.0, 1.0, false, true, Activation::Gelu),
    (1.25, 1.0, false, true, Activation::Silu),
];

/// f32 C: the products are exact in f32 up to accumulation order; bf16 C: one rounding.
const F32_TOL: f64 = 1e-5;
const BF16_TOL: f64 = 1.0 / 128.0;
/// f32 C at K = 640 and K ≤ 2000: f32 accumulation's error bound grows with K (F32_TOL is for
/// K ≤ 160).
const F32_TOL_K640: f64 = 4.0 * F32_TOL;
const F32_TOL_K2K: f64 = 12.5 * F32_TOL;

#[test]
fn bf16_operands_f32_and_bf16_c() {
    // Two stages of K, edge tiles in M and N, two tiles per block.
    check::<Bf16Operands, f32>((1, 130, 264, 72), &EPILOGUES, false, F32_TOL);
    check::<Bf16Operands, Bf16>((1, 1, 8, 8), &PLAIN, false, BF16_TOL);
    // Three K stages over three products, then one K stage over six tiles (three per block).
    check::<Bf16Operands, Bf16>((3, 67, 24, 136), &EPILOGUES[1..2], false, BF16_TOL);
    check::<Bf16Operands, Bf16>((1, 260, 296, 40), &EPILOGUES[2..], false, BF16_TOL);
}

#[test]
fn tiles_192_wide() {
    // Three by three tiles (the last column of tiles 8 wide, the last row 4 high) on two
    // blocks: each block walks four or five tiles of three C boxes per warp, so the warps'
    // two box buffers alternate across tile boundaries; two K stages and a half. Then a batch.
    check::<Bf16Operands<N192>, Bf16>((1, 260, 392, 160), &EPILOGUES[..1], false, BF16_TOL);
    check::<Bf16Operands<N192>, Bf16>((2, 67, 200, 64), &PLAIN, false, BF16_TOL);
    // The epilogues compiled for them: a bias with each activation, and D alone through the
    // ring (three D stages of one panel per tile; four or five tiles per block).
    check::<Bf16Operands<N192>, Bf16>((1, 260, 392, 160), &BIAS_AND, false, BF16_TOL);
    check::<Bf16Operands<N192>, Bf16>((1, 260, 392, 160), &RESIDUAL[..2], false, BF16_TOL);
    check::<Bf16Operands<N192>, Bf16>((3, 67, 200, 64), &RESIDUAL[1..2], false, BF16_TOL);
    // Any other epilogue is refused, not ignored.
    let device = Device::emulator();
    let a = DeviceBuffer::<Bf16>::zeros(&device, 8 * 16).unwrap();
    let b = DeviceBuffer::<Bf16>::zeros(&device, 16 * 8).unwrap();
    let mut c = DeviceBuffer::<Bf16>::zeros(&device, 8 * 8).unwrap();
    let (bias, d) = (
        DeviceBuffer::<Bf16>::zeros(&device, 8).unwrap(),
        DeviceBuffer::<Bf16>::zeros(&device, 64).unwrap(),
    );
    let args = EpilogueArgs {
        bias: Some(&bias),
        d: Some(&d),
        ..Default::default()
    };
    let e = launch::<Bf16Operands<N192>, Bf16>(&device, (&a, &b), &mut c, 1, (8, 8, 16), &args)
        .unwrap_err();
    assert_eq!(e.rule(), "epilogue-unsupported", "{e}");
}

#[test]
fn bias_and_activation_kernels_of_bf16_c() {
    for (alpha, _, _, _, activation) in BIAS_AND {
        let bias = DeviceBuffer::<Bf16>::empty(&Device::emulator()).unwrap();
        let args = EpilogueArgs {
            alpha,
            bias: Some(&bias),
            activation,
            ..Default::default()
        };
        assert!(<Bf16Operands as TmaGemm<Bf16>>::compiled_for(args.flags()));
    }
    // Edge tiles in M and N, two K stages and a half.
    check::<Bf16Operands, Bf16>((1, 130, 264, 160), &BIAS_AND, false, BF16_TOL);
}

/// `C = act(alpha · A·B + beta · D + bias)` for bf16 C, D copied through the ring, and the
/// kernel each case runs: compiled for D alone or D, a bias and an activation; the run-time
/// flags' twin for the rest.
const RESIDUAL: [(f32, f32, bool, bool, Activation); 7] = [
    (1.0, 1.0, true, false, Activation::None),
    (0.5, -1.5, true, false, Activation::None),
    (1.25, 0.5, true, true, Activation::Gelu),
    (1.0, 1.0, true, false, Activation::Silu),
    (0.75, 1.0, true, true, Activation::None),
    (1.0, 2.0, true, true, Activation::Relu),
    (1.0, 1.0, true, true, Activation::Silu),
];
const RESIDUAL_KERNELS: [&str; 7] = [
    "gemm_tma_bf16_residual",
    "gemm_tma_bf16_residual",
    "gemm_tma_bf16_residual_bias_gelu",
    "gemm_tma_bf16_residual_epilogue",
    "gemm_tma_bf16_residual_bias",
    "gemm_tma_bf16_residual_bias_relu",
    "gemm_tma_bf16_residual_bias_silu",
];

#[test]
fn residual_kernels_copy_d_through_the_ring() {
    let device = Device::emulator();
    let (d, bias) = (
        DeviceBuffer::<Bf16>::empty(&device).unwrap(),
        DeviceBuffer::<Bf16>::empty(&device).unwrap(),
    );
    for (&(alpha, beta, _, with_bias, activation), kernel) in RESIDUAL.iter().zip(RESIDUAL_KERNELS)
    {
        let args = EpilogueArgs {
            alpha,
            beta,
            d: Some(&d),
            bias: with_bias.then_some(&bias),
            activation,
        };
        assert_eq!(kernel_name::<Bf16Operands, Bf16>(&args), kernel);
        let compiled = kernel != "gemm_tma_bf16_residual_epilogue";
        assert_eq!(
            <Bf16Operands as TmaGemm<Bf16>>::compiled_for(args.flags()),
            compiled
        );
    }
    // Three by three tiles on two blocks (four or five each: the ring's D stages and their
    // parities run on across tiles); the last row of tiles 4 high, the last column 8 wide
    // (three of each warp's four D boxes lie wholly past N: copied as zeros, stored nowhere);
    // three K stages.
    check::<Bf16Operands, Bf16>((1, 260, 520, 136), &RESIDUAL[..3], false, BF16_TOL);
    // One K stage, over a batch of three; then no K at all.
    check::<Bf16Operands, Bf16>((3, 67, 24, 64), &RESIDUAL[1..], false, BF16_TOL);
    check::<Bf16Operands, Bf16>((1, 5, 16, 0), &RESIDUAL[3..5], false, BF16_TOL);
}

#[test]
fn bf16_b_as_n_by_k() {
    // `nn.Linear`'s weight layout: B `[n, k]`, K-major like A. Every kernel of the layout:
    // the plain one and the run-time flags' (f32 C), a bias with each activation, D through
    // the ring alone and with the rest, and the 192-wide tiles; edge tiles in M and N, K stages
    // and a half, two blocks walking several tiles.
    check::<Bf16NkOperands, f32>((1, 130, 264, 72), &EPILOGUES, true, F32_TOL);
    check::<Bf16NkOperands, f32>((2, 67, 24, 136), &PLAIN, true, F32_TOL);
    check::<Bf16NkOperands, Bf16>((1, 130, 264, 160), &BIAS_AND, true, BF16_TOL);
    check::<Bf16NkOperands, Bf16>((1, 260, 520, 136), &RESIDUAL[..4], true, BF16_TOL);
    check::<Bf16NkOperands, Bf16>((3, 67, 24, 64), &RESIDUAL[4..], true, BF16_TOL);
    check::<Bf16NkOperands<N192>, Bf16>((1, 260, 392, 160), &PLAIN, true, BF16_TOL);
    check::<Bf16NkOperands<N192>, Bf16>((1, 67, 200, 64), &BIAS_AND[..1], true, BF16_TOL);
    check::<Bf16NkOperands<N192>, Bf16>((2, 67, 200, 64), &RESIDUAL[..1], true, BF16_TOL);
    check::<Bf16NkOperands<N192>, f32>((1, 67, 200, 64), &PLAIN, true, F32_TOL);
}

#[test]
fn fp8_operands() {
    check::<Fp8Operands<E4m3, E4m3>, Bf16>((1, 65, 272, 144), &EPILOGUES[..2], true, BF16_TOL);
    check::<Fp8Operands<E4m3, E4m3>, f32>((2, 130, 40, 16), &PLAIN, true, F32_TOL);
    check::<Fp8Operands<E4m3, E5m2>, Bf16>((1, 17, 24, 160), &PLAIN, true, BF16_TOL);
}

#[test]
fn no_k_leaves_the_epilogue_of_zeros() {
    check::<Bf16Operands, f32>((2, 5, 16, 0), &EPILOGUES[1..2], false, F32_TOL);
    check::<Fp8Operands<E4m3, E4m3>, Bf16>((1, 3, 8, 0), &EPILOGUES[2..], true, BF16_TOL);
}

#[test]
fn rows_that_tma_cannot_copy_are_refused() {
    let device = Device::emulator();
    let a = DeviceBuffer::<E4m3>::zeros(&device, 8 * 24).unwrap();
    let b = DeviceBuffer::<E4m3>::zeros(&device, 8 * 24).unwrap();
    let mut c = DeviceBuffer::<Bf16>::zeros(&device, 64).unwrap();
    let args = EpilogueArgs::default();
    let e =
        launch::<Fp8Operands<E4m3, E4m3>, Bf16>(&device, (&a, &b), &mut c, 1, (8, 8, 24), &args)
            .unwrap_err();
    assert_eq!(e.rule(), "shape-unsupported", "{e}");
    assert!(e.to_string().contains("K must be a multiple of 16"), "{e}");
    // N = 12: C's rows (stored by the copy engine) would not start 16-byte aligned.
    let a = DeviceBuffer::<Bf16>::zeros(&device, 8 * 16).unwrap();
    let b = DeviceBuffer::<Bf16>::zeros(&device, 16 * 12).unwrap();
    let mut c = DeviceBuffer::<Bf16>::zeros(&device, 8 * 12).unwrap();
    let e =
        launch::<Bf16Operands, Bf16>(&device, (&a, &b), &mut c, 1, (8, 12, 16), &args).unwrap_err();
    assert_eq!(e.rule(), "shape-unsupported", "{e}");
    assert!(e.to_string().contains("N of 8"), "{e}");
}

#[test]
fn per_tensor_quantisation_maps_the_largest_magnitude_to_the_format_max() {
    let x = [0.5f32, -3.0, 1.25, 0.0];
    let (q, s) = quantize::<E4m3>(&x);
    assert_eq!(s, 3.0 / 448.0);
    assert_eq!(q[1].to_f32(), -448.0);
    // Each value within half a step of E4M3's 3 mantissa bits (relative 2⁻⁴).
    for (v, q) in x.iter().zip(&q) {
        assert!((q.to_f32() * s - v).abs() <= v.abs() / 16.0, "{v} → {q:?}");
    }
    let (_, s) = quantize::<E5m2>(&[0.0, 0.0]);
    assert_eq!(s, 1.0);
}

/// `gemm_fp8` from host values: B given as `[batch, k, n]`, quantised per tensor with
/// power-of-two scales (the largest magnitudes 3.5 and 1.75 map to 448), so every operand is
/// exact in e4m3 and C is the fp64 product rounded once to bf16, with a bias added.
#[test]
fn fp8_from_host_values_transposes_b_and_applies_the_scales() {
    let device = Device::emulator();
    let (batch, m, n, k) = (2u32, 33u32, 40u32, 48u32);
    let a: Vec<f32> = (0..batch * m * k)
        .map(|i| (i % 15) as f32 * 0.5 - 3.5)
        .collect();
    let b: Vec<f32> = (0..batch * k * n).map(|i| (i % 8) as f32 * 0.25).collect();
    let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
    let epilogue = HostEpilogue {
        bias: Some(&bias),
        ..Default::default()
    };
    let (c, _) = gemm_fp8::<Bf16>(&device, (&a, &b), batch, (m, n, k), epilogue).unwrap();
    let (mk, kn) = ((m * k) as usize, (k * n) as usize);
    for p in 0..batch as usize {
        for r in 0..m as usize {
            for col in 0..n as usize {
                let want: f64 = (0..k as usize)
                    .map(|kk| {
                        a[p * mk + r * k as usize + kk] as f64
                            * b[p * kn + kk * n as usize + col] as f64
                    })
                    .sum::<f64>()
                    + col as f64;
                let got = c[p * (m * n) as usize + r * n as usize + col] as f64;
                assert!(
                    (got - want).abs() <= want.abs() / 256.0,
                    "C[{p}, {r}, {col}] = {got}, want {want}"
                );
            }
        }
    }
    // A B of the wrong length is an error, not a panic.
    let e = gemm_fp8::<Bf16>(
        &device,
        (&a, &b[1..]),
        batch,
        (m, n, k),
        HostEpilogue::default(),
    )
    .unwrap_err();
    assert_eq!(e.rule(), "shape-mismatch", "{e}");
}

/// Asserts that the launch of `shape` (a bias where `with_bias`) on `multiprocessors` shares
/// tiles out (stream-K); returns the most blocks on a tile.
fn assert_streams<P: TmaGemm<O>, O: GemmOutput>(
    multiprocessors: usize,
    (batch, m, n, k): Shape,
    with_bias: bool,
) -> u32 {
    let device = Device::Emulator {
        workers: multiprocessors,
    };
    let bias = DeviceBuffer::<O>::empty(&device).unwrap();
    let args = EpilogueArgs {
        bias: with_bias.then_some(&bias),
        ..Default::default()
    };
    let s = schedule::<P, O>(&device, batch, (m, n, k), &args);
    assert!(s.streams(), "{s:?}");
    let sharers = (s.dp_tiles..s.tiles)
        .map(|t| s.sharers(t))
        .map(|(f, l)| l - f + 1);
    sharers.max().unwrap()
}

#[test]
fn stream_k_shares_few_tiles_of_a_long_k_out() {
    // One tile of ten K stages on two blocks of five: block 0 sums the first five, block 1 the
    // last five; each stores its part, and the second to take a ticket adds both and runs the
    // epilogue.
    let one = (1, 100, 256, 640);
    assert_eq!(assert_streams::<Bf16Operands, Bf16>(2, one, false), 2);
    check::<Bf16Operands, Bf16>(one, &PLAIN, false, BF16_TOL);
    check::<Bf16Operands, Bf16>(one, &BIAS_AND[2..3], false, BF16_TOL);
    // f32 C, the run-time-flags kernel (D read by the threads), over a batch of two tiles on
    // four blocks.
    let two = (2, 60, 104, 640);
    assert_eq!(assert_streams::<Bf16Operands, f32>(5, two, true), 2);
    check_on::<Bf16Operands, f32>(5, two, &EPILOGUES, false, F32_TOL_K640);
    // The 192-wide tiles and fp8 (128 K per stage).
    check::<Bf16Operands<N192>, Bf16>((1, 100, 192, 640), &BIAS_AND[..1], false, BF16_TOL);
    let fp8 = (1, 100, 256, 1280);
    assert_eq!(
        assert_streams::<Fp8Operands<E4m3, E4m3>, Bf16>(2, fp8, false),
        2
    );
    check::<Fp8Operands<E4m3, E4m3>, Bf16>(fp8, &PLAIN, true, BF16_TOL);
    // B as [n, k] (`gemm::linear`'s kernels): the same sharing of one tile's stages.
    assert_eq!(assert_streams::<Bf16NkOperands, Bf16>(2, one, false), 2);
    check::<Bf16NkOperands, Bf16>(one, &PLAIN, true, BF16_TOL);
    // And the gated unit's (its values: `gemm_linear.rs`, on this shape with F = 128).
    let gated_one = (1, 100, 128, 640);
    assert_eq!(
        assert_streams::<Bf16GatedOperands, Bf16>(2, gated_one, false),
        2
    );
    // D through the ring keeps every tile whole, and is right on the same shape.
    check::<Bf16Operands, Bf16>(one, &RESIDUAL[..1], false, BF16_TOL);

    // One tile of 30 stages on five blocks of six: five parts, added in block order whoever
    // finishes last, so C is the same bits from launch to launch, with a launch on other data
    // between (31 stages). After them the tickets are back at zero (a launch that found one
    // counted could finish a tile before every part is in).
    let shape = (1, 128, 256, 1920);
    assert_eq!(assert_streams::<Bf16Operands, f32>(5, shape, false), 5);
    assert_eq!(
        assert_streams::<Bf16Operands, f32>(5, (1, 128, 256, 1984), false),
        5
    );
    let first = check_on::<Bf16Operands, f32>(5, shape, &PLAIN, false, F32_TOL_K2K);
    check_on::<Bf16Operands, f32>(5, (1, 128, 256, 1984), &PLAIN, false, F32_TOL_K2K);
    let again = check_on::<Bf16Operands, f32>(5, shape, &PLAIN, false, F32_TOL_K2K);
    assert!(first
        .iter()
        .zip(&again)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    // (The stream-K launches of this binary all run in this test, one after the other, so each
    // takes the workspace the last one kept.)
    let device = Device::emulator();
    let tickets = device.take_workspace::<u32>(TICKETS, 1).unwrap().unwrap();
    assert!(tickets.to_vec().unwrap().iter().all(|&t| t == 0));
}

mod stream_k_schedule {
    use ck_kernels::gemm::tma::stream_k::*;

    const GPU: u32 = GPU_MIN_SHARED_STAGES;

    /// Every stage of every tile is in exactly one unit of one block, units are runs of one
    /// tile, whole tiles are whole, and the sharers and slots agree with the units.
    fn check(s: Schedule) {
        let (tiles, k_stages) = (s.tiles, s.k_stages);
        let mut seen = vec![0u32; (tiles * k_stages.max(1)) as usize];
        let mut sharers = vec![Vec::new(); tiles as usize];
        let mut slots = std::collections::HashSet::new();
        for b in 0..s.grid {
            for u in s.units(b) {
                assert!(
                    u.tile < tiles && u.k0 < u.k1.max(1) && u.k1 <= k_stages,
                    "{u:?}"
                );
                if k_stages == 0 {
                    seen[u.tile as usize] += 1;
                    continue;
                }
                for k in u.k0..u.k1 {
                    seen[(u.tile * k_stages + k) as usize] += 1;
                }
                if u.tile < s.dp_tiles {
                    assert!(s.whole(u));
                } else {
                    sharers[u.tile as usize].push(b);
                    if !s.whole(u) {
                        assert!(slots.insert(s.slot(b, u.tile)));
                        assert!(s.slot(b, u.tile) < Schedule::slots(s.grid));
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{s:?}");
        for t in s.dp_tiles..tiles {
            let (first, last) = s.sharers(t);
            assert_eq!(
                sharers[t as usize],
                (first..=last).collect::<Vec<_>>(),
                "{s:?}"
            );
            if s.dp_tiles > 0 {
                // Runs at least a tile long: at most two blocks on a tile.
                assert!(last - first < 2, "{s:?}: tile {t}");
            }
        }
    }

    #[test]
    fn every_stage_once_over_a_domain() {
        for sms in [1, 2, 3, 7, 132] {
            for tiles in (0..40).chain([131, 132, 133, 263, 264, 265, 512]) {
                for k_stages in [0, 1, 2, 3, 5, 16, 64] {
                    let s = Schedule::plan(tiles, k_stages, sms, 1);
                    assert!(s.grid >= 1 && s.grid <= sms);
                    check(s);
                    // Every tile in stream-K, and the last round and one more.
                    check(Schedule::new(tiles, k_stages, sms, tiles));
                    if tiles >= sms {
                        check(Schedule::new(tiles, k_stages, sms, tiles % sms + sms));
                    }
                }
            }
        }
    }

    #[test]
    fn the_worked_example() {
        let s = Schedule::new(512, 64, 132, 248);
        assert_eq!((s.grid, s.dp_tiles, s.sk_stages), (132, 264, 248 * 64));
        let units: Vec<_> = s.units(1).collect();
        assert_eq!(units.len(), 5);
        assert_eq!((units[0].tile, units[1].tile), (1, 133));
        assert_eq!(
            units[2],
            Unit {
                tile: 265,
                k0: 56,
                k1: 64
            }
        );
        assert_eq!(
            units[3],
            Unit {
                tile: 266,
                k0: 0,
                k1: 64
            }
        );
        assert_eq!(
            units[4],
            Unit {
                tile: 267,
                k0: 0,
                k1: 48
            }
        );
        assert_eq!(s.sharers(265), (0, 1));
        assert_eq!((s.slot(0, 265), s.slot(1, 265)), (1, 2));
        // 128 + 121 stages at most, against 256 whole; but 379 parts cost more than that saves.
        assert_eq!(s.stages_per_block(), 249);
        assert_eq!(
            Schedule::plan(512, 64, 132, GPU),
            Schedule::whole_tiles(512, 64, 132)
        );
    }

    #[test]
    fn stream_k_where_few_tiles_meet_a_long_k() {
        // 1024×1024×8192 in 128 × 256 tiles: 32 tiles of 128 stages. Stages per block plus
        // ⌈2/5 · parts⌉ (parts = tiles + grid − 1) on 64, 96, 128 or 132 blocks: 64 + 38 = 102,
        // 43 + 51 = 94, 32 + 64 = 96, 32 + 66 = 98; whole, 128 (94 ≤ 4/5 · 128). On an H100 the
        // 96 blocks ran 1.70 × as fast as whole tiles (64 and 128 blocks: 1.44 and 1.66 ×).
        let s = Schedule::plan(32, 128, 132, GPU);
        assert_eq!((s.grid, s.dp_tiles, s.stages_per_block()), (96, 0, 43));
        assert!(s.cost() * 5 <= 128 * 4);
        // 512×2048×16384: 32 tiles of 256 stages; on 64, 96, 128 or 132 blocks 128 + 38,
        // 86 + 51, 64 + 64 = 128 (the least), 63 + 66 (2.2 × as fast on an H100).
        assert_eq!(Schedule::plan(32, 256, 132, GPU).grid, 128);
        // Whole where the hand-overs cost more than they save, as measured: 1536×1536×8192,
        // 1536³, 3072³, 8192×8192×1024.
        for (tiles, k_stages) in [(72, 128), (72, 24), (288, 48), (2048, 16)] {
            assert!(!Schedule::plan(tiles, k_stages, 132, GPU).streams());
        }
        // Full rounds, and tiles too short to share: 64×1024×1024 is 4 tiles of 16 stages,
        // whose cost (12 on 12 blocks against 16 whole) promised a quarter off; it ran 1.7 ×
        // as long on an H200. 128×2048×2048 (8 tiles of 32 stages: 24 on 24 blocks against
        // 32) ran 1.3 × as long; 64×4096×4096 (16 tiles of 64 stages) as fast or a little
        // faster.
        assert!(!Schedule::plan(264, 64, 132, GPU).streams());
        assert!(!Schedule::plan(1, 2, 132, GPU).streams());
        assert!(!Schedule::plan(4, 16, 132, GPU).streams());
        assert!(Schedule::plan(4, 16, 132, 1).streams()); // the emulator's plan
        assert!(!Schedule::plan(8, 32, 132, GPU).streams());
        assert!(Schedule::plan(16, 64, 132, GPU).streams());
        // Stage numbers past 32 bits (K in the millions).
        assert!(!Schedule::new(264, 1 << 20, 132, 264).streams());
    }
}
