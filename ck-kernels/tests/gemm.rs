//! GEMM against an fp64 CPU reference on odd shapes (edges through the OOB rules), emulator.

use ck_core::host::Device;
use ck_kernels::checks::norm_relative_error;
use ck_kernels::gemm::host::{gemm, reference};

struct Rng(u64);
impl Rng {
    fn f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 2_000_001) as f32 / 1e6 - 1.0
    }
}

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

#[test]
fn gemm_bf16_tensor_core_matches_fp64_on_odd_shapes() {
    use ck_kernels::gemm::host::gemm_bf16;
    let device = Device::emulator();
    let mut rng = Rng(23);
    let round = |v: &[f32]| {
        v.iter()
            .map(|&x| ck_core::device::Bf16::from_f32(x).to_f32())
            .collect::<Vec<_>>()
    };
    for (m, n, k) in [
        (1u32, 1u32, 1u32),
        (17, 33, 65),
        (257, 129, 73),
        (128, 128, 64),
        // gemm_bf16_wgmma (N, K multiples of 8): one row, one tile, and edges in M and N with
        // six K stages, so the four shared buffers wrap.
        (1, 8, 8),
        (136, 264, 328),
    ] {
        let a: Vec<f32> = (0..m * k).map(|_| rng.f32()).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.f32()).collect();
        let (c, st) = gemm_bf16(&device, &a, &b, (m, n, k)).unwrap();
        // The reference sees the same bf16-rounded operands; accumulation is f32.
        let want = reference(&round(&a), &round(&b), (m, n, k));
        let err = norm_relative_error(&c, &want);
        assert!(err <= 1e-5, "{m}x{n}x{k}: relative error {err}");
        assert!(c.iter().all(|v| v.is_finite()));
        if (m, n, k) == (136, 264, 328) {
            // gemm_bf16_wgmma: 2 × 2 blocks × 6 K stages × 8 warps × 12 cp.async (4 of A's
            // 128 × 64 slice, 8 of B's 64 × 256) per warp; each 8-lane phase writes the 8
            // chunks of one 128-byte row, permuted by the swizzle: conflict-free. The MMAs
            // read shared memory outside the load instructions.
            assert_eq!(st.shared_store_requests, 2 * 2 * 6 * 8 * 12, "{st:?}");
            assert_eq!(st.shared_store_conflicts, 0, "{st:?}");
            assert_eq!(st.shared_load_requests, 0, "{st:?}");
        }
        if (m, n, k) == (128, 128, 64) {
            // The k-write staging of A into the XOR layout is conflict-free.
            assert!(st.shared_store_requests > 0, "{st:?}");
        }
    }
}

#[test]
fn the_swizzled_layouts_cut_the_gemm_bank_conflicts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(["run", "gemm-lds", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let get = |i: usize, k: &str| rows[i][k].as_u64().unwrap();
    assert_eq!(rows[0]["case"], "gemm xor");
    // Same fragments, fewer conflicts: A's ldmatrix rows are 2-way in TV8's layout (4-way
    // plain), B's ldmatrix.trans rows conflict-free (8-way plain); stores conflict-free in both.
    assert!(get(0, "shared_load_conflicts") * 4 < get(1, "shared_load_conflicts"));
    assert_eq!(get(0, "shared_store_conflicts"), 0);
}
