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
