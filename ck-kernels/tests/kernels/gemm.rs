//! GEMM against an fp64 CPU reference on odd shapes (edges through the OOB rules), emulator.

use ck_core::host::Device;
use ck_kernels::checks::norm_relative_error;
use ck_kernels::gemm::mma_sync::host::{gemm, reference};

use ck_kernels::checks::Rng;

#[test]
fn gemm_f32_matches_fp64_on_odd_shapes() {
    let device = Device::emulator();
    let mut rng = Rng(17);
    for (m, n, k) in [
        (1u32, 1u32, 1u32),
        (17, 33, 65),
        (257, 129, 73),
        (128, 128, 16),
    ] {
        let a: Vec<f32> = (0..m * k).map(|_| rng.f32()).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.f32()).collect();
        let (c, st) = gemm(&device, &a, &b, (m, n, k)).unwrap();
        let want = reference(&a, &b, (m, n, k));
        let err = norm_relative_error(&c, &want);
        assert!(err <= 1e-5, "{m}x{n}x{k}: relative error {err}");
        // Every element written and finite (the output starts as NaN).
        assert!(c.iter().all(|v| v.is_finite()));
        if (m, n, k) == (128, 128, 16) {
            // Shared reads along M and N are 16-byte vectors of consecutive lanes.
            assert_eq!(st.shared_load_conflicts, 0, "{st:?}");
        }
    }
}

fn bf16_operands(rng: &mut Rng, (m, n, k): (u32, u32, u32)) -> (Vec<f32>, Vec<f32>) {
    let round = |v: f32| ck_core::device::Bf16::from_f32(v).to_f32();
    let a = (0..m * k).map(|_| round(rng.f32())).collect();
    let b = (0..k * n).map(|_| round(rng.f32())).collect();
    (a, b)
}

#[test]
fn gemm_bf16_tensor_core_matches_fp64_on_odd_shapes() {
    use ck_kernels::gemm::auto::gemm_bf16;
    let device = Device::emulator();
    let mut rng = Rng(23);
    // The kernel launch_bf16 picks: mma.sync for N or K not a multiple of 8, wgmma otherwise.
    for shape in [
        (1u32, 1u32, 1u32),
        (17, 33, 65),
        (257, 129, 73),
        (128, 128, 64),
        (1, 8, 8),
    ] {
        let (a, b) = bf16_operands(&mut rng, shape);
        let (c, st) = gemm_bf16(&device, &a, &b, shape).unwrap();
        // The reference sees the same bf16-rounded operands; accumulation is f32.
        let err = norm_relative_error(&c, &reference(&a, &b, shape));
        assert!(err <= 1e-5, "{shape:?}: relative error {err}");
        assert!(c.iter().all(|v| v.is_finite()));
        if shape == (128, 128, 64) {
            assert!(st.shared_store_requests > 0, "{st:?}");
        }
    }
}

#[test]
fn every_bf16_kernel_matches_fp64_across_tile_edges_and_wrapping_buffers() {
    use ck_kernels::gemm::auto::gemm_bf16_with;
    use ck_kernels::gemm::choice::Bf16Kernel;
    let device = Device::emulator();
    let mut rng = Rng(29);
    // Edges in M and N, six K stages so the four shared buffers wrap.
    let shape = (136u32, 264u32, 328u32);
    let (a, b) = bf16_operands(&mut rng, shape);
    let want = reference(&a, &b, shape);
    for kernel in [
        Bf16Kernel::MmaSync,
        Bf16Kernel::Wgmma128x256,
        Bf16Kernel::Wgmma128x128,
    ] {
        let (c, st) = gemm_bf16_with(&device, kernel, &a, &b, shape).unwrap();
        let err = norm_relative_error(&c, &want);
        assert!(err <= 1e-5, "{}: relative error {err}", kernel.name());
        if kernel == Bf16Kernel::MmaSync {
            continue;
        }
        // Per block and K stage, each of the 8 warps copies A's 128 × 64 slice in 4 cp.async
        // and B's 64 × BN slice in BN / 32 (16 bytes per lane). Each 8-lane phase writes the 8
        // chunks of one 128-byte row, permuted by the swizzle: conflict-free. The MMAs read
        // shared memory outside the load instructions. Then C is staged: each warp stores its
        // BN / 4 accumulator pairs (8 bytes a lane; padded rows: conflict-free) and loads
        // back BN / 8 runs of 4 (16 bytes a lane, contiguous: conflict-free).
        let bn = if kernel == Bf16Kernel::Wgmma128x256 {
            256
        } else {
            128
        };
        let blocks = shape.0.div_ceil(128) * shape.1.div_ceil(bn);
        let copies = blocks * shape.2.div_ceil(64) * 8 * (4 + bn / 32);
        let staging = blocks * 8 * (bn / 4);
        let name = kernel.name();
        assert_eq!(
            st.shared_store_requests,
            (copies + staging) as u64,
            "{name}: {st:?}"
        );
        assert_eq!(st.shared_store_conflicts, 0, "{}: {st:?}", kernel.name());
        assert_eq!(
            st.shared_load_requests,
            (blocks * 8 * bn / 8) as u64,
            "{name}: {st:?}"
        );
        assert_eq!(st.shared_load_conflicts, 0, "{}: {st:?}", kernel.name());
    }
    // A wgmma kernel refuses a shape its copies cannot take.
    let err = gemm_bf16_with(
        &device,
        Bf16Kernel::Wgmma128x128,
        &a[..17 * 9],
        &b[..9 * 8],
        (17, 8, 9),
    );
    assert_eq!(err.unwrap_err().rule(), "shape-unsupported");
}

/// The GEMM family's operator descriptions (`gemm::describe`) through `HostCall`: layouts,
/// shapes each kernel takes, and the errors of bad arguments.
mod described {
    use ck_core::host::Device;
    use ck_kernels::gemm::describe::*;
    use ck_kernels::gemm::epilogue::Activation;
    use ck_kernels::op::Dtype;
    use ck_kernels::op::HostCall;

    /// `activation`'s names are [`Activation`]'s, in the order of its codes.
    #[test]
    fn activation_indices_are_the_kernels_codes() {
        for (i, name) in ACTIVATIONS.iter().enumerate() {
            assert_eq!(Activation::parse(name).unwrap().code(), i as u32);
        }
    }

    /// `gemm_a_km` reads `a` transposed: with a_km `[K = 2, M = 8]` = rows (1…8) and (0…0),
    /// and b `[2, 8]` all 1 and all 5, `C[i, j] = a_km[0, i] · 1 + a_km[1, i] · 5 = i + 1`.
    #[test]
    fn gemm_a_km_reads_a_as_it_lies() {
        let device = Device::emulator();
        let a: Vec<f32> = (0..16)
            .map(|i| if i < 8 { (i + 1) as f32 } else { 0.0 })
            .collect();
        let b: Vec<f32> = (0..16).map(|i| if i < 8 { 1.0 } else { 5.0 }).collect();
        let out = HostCall::new(&GEMM_A_KM)
            .input("a_km", &a, &[2, 8])
            .input("b", &b, &[2, 8])
            .run(&device)
            .unwrap();
        let c = out.output("c").unwrap();
        for i in 0..8 {
            assert!(
                c[i * 8..(i + 1) * 8].iter().all(|&v| v == (i + 1) as f32),
                "{c:?}"
            );
        }
    }

    /// `gemm` into f32 C without an epilogue takes N and K that are not multiples of 8 (on
    /// the `mma.sync` kernel): a `[2, 3]` = 0…5 times b `[3, 5]` all 1 is each row's sum of
    /// a, exact in bf16; a bf16 C of that shape is refused with the rule and the fix.
    #[test]
    fn gemm_takes_any_shape_into_f32_c_alone() {
        let device = Device::emulator();
        let a: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let call = || {
            HostCall::new(&GEMM)
                .input("a", &a, &[2, 3])
                .input("b", &[1.0; 15], &[3, 5])
        };
        let out = call().run(&device).unwrap();
        assert_eq!(out.output("c").unwrap(), [[3.0; 5], [12.0; 5]].concat());
        let err = call().dtype(Dtype::Bf16).run(&device).err().unwrap();
        assert_eq!(err.rule(), ck_core::rules::SHAPE_UNSUPPORTED, "{err}");
        assert!(err.to_string().contains("N = 5, K = 3"), "{err}");
        assert!(err.to_string().contains("f32 C"), "{err}");
        // An epilogue into f32 C is refused the same way.
        let err = call()
            .input("bias", &[0.0; 5], &[5])
            .run(&device)
            .err()
            .unwrap();
        assert_eq!(err.rule(), ck_core::rules::SHAPE_UNSUPPORTED, "{err}");
    }

    /// `sgemm` keeps f32 operands as they are: 1 + 2⁻¹⁰, which bf16 rounds to 1, times 1.
    #[test]
    fn sgemm_does_not_round_its_operands() {
        let device = Device::emulator();
        let x = 1.0 + 2f32.powi(-10);
        let out = HostCall::new(&SGEMM)
            .input("a", &[x], &[1, 1])
            .input("b", &[1.0], &[1, 1])
            .run(&device)
            .unwrap();
        assert_eq!(out.output("c").unwrap(), [x]);
    }

    /// `grouped_mm` gives each expert its rows in turn: a `[3, 8]` of rows all 1, 2 and 3,
    /// experts' weights all 1 and all 2, tokens `[1, 2]`: row 0 is 8 · 1 · 1, rows 1 and 2 are
    /// 8 · 2 · 2 and 8 · 3 · 2. Counts that do not add up to a's rows are refused.
    #[test]
    fn grouped_mm_gives_each_expert_its_rows() {
        let device = Device::emulator();
        let a: Vec<f32> = (0..24).map(|i| (i / 8 + 1) as f32).collect();
        let b: Vec<f32> = (0..128).map(|i| (i / 64 + 1) as f32).collect();
        let call = |tokens: &'static [f32]| {
            HostCall::new(&GROUPED_MM)
                .input("a", &a, &[3, 8])
                .input("b", &b, &[2, 8, 8])
                .input("tokens", tokens, &[2])
        };
        let out = call(&[1.0, 2.0]).run(&device).unwrap();
        assert_eq!(
            out.output("c").unwrap(),
            [[8.0; 8], [32.0; 8], [48.0; 8]].concat()
        );
        let err = call(&[2.0, 2.0]).run(&device).err().unwrap();
        assert_eq!(err.rule(), ck_core::rules::SHAPE_MISMATCH, "{err}");
        assert!(
            err.to_string().contains("add up to 4 but `a` has 3 rows"),
            "{err}"
        );
    }

    /// A bias of the wrong length is refused with the rule it breaks.
    #[test]
    fn a_bias_of_another_length_is_named() {
        let device = Device::emulator();
        let err = HostCall::new(&LINEAR)
            .input("x", &[0.0; 6], &[2, 3])
            .input("weight", &[0.0; 12], &[4, 3])
            .input("bias", &[0.0; 3], &[3])
            .run(&device)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("`bias` has shape [3]; it must be [4]"),
            "{err}"
        );
    }
}
