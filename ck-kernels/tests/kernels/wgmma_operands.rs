//! The wgmma operand forms beyond the GEMM's first, on one warpgroup, against products computed
//! here in fp64: B K-major (`wgmma_bf16_b_kmajor`, `C = A·Bᵀ` with both operands row-major), A
//! M-major (`wgmma_bf16_a_mn`, `C = Aᵀ·B` with A stored `[K, M]`: a weight gradient), and A
//! from registers (`wgmma_bf16_a_regs`), each thread building its fragment from global memory
//! by the PTX ISA's layout as `WgmmaA::Regs` documents it. The accumulators are stored by the
//! documented D layout, so a wrong fragment layout on either side shows as a wrong product.

use ck_core::device::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_core::wgmma::{swizzle_128b, SmemMatrix, SwizzleMode};
use ck_kernels::checks::Rng;
use ck_macros::tile_kernel;

/// Stores thread `t`'s accumulators of a 64 × 64 MMA (register 4j + 2h + e = element
/// (16w + 8h + g, 8j + 2c + e)) into the row-major `c`.
fn store_d(c: &GlobalMut<f32>, acc: &[f32; 32]) {
    let t = thread_idx();
    let (w, g, col) = (t / 32, t % 32 / 4, 2 * (t % 4));
    for (i, &v) in acc.iter().enumerate() {
        let (j, h, e) = (i as u32 / 4, i as u32 / 2 % 2, i as u32 % 2);
        c.store((16 * w + 8 * h + g) * 64 + 8 * j + col + e, v);
    }
}

/// `C (64 × 64) = A (64 × 16) · Bᵀ`, B given as 64 rows × 16 (both row-major): rows of 128
/// swizzled bytes in shared memory, both K-major.
#[tile_kernel(block = 128)]
fn mma_b_kmajor(a: Global<Bf16>, b: Global<Bf16>, c: GlobalMut<f32>) {
    let smem = shared!(Bf16; 64 * 64 * 2 + 512);
    let first = (1024 - smem.shared_address(0) % 1024) % 1024 / 2;
    let t = thread_idx();
    // Threads 0..64 store row t of A, threads 64..128 row t − 64 of B (4096 elements later).
    let (m, row) = (t / 64, t % 64);
    let src = if m == 0 { &a } else { &b };
    for k in 0..16 {
        let at = first + m * 4096 + swizzle_128b(row * 128 + k * 2) / 2;
        smem.store(at, src.load(row * 16 + k));
    }
    fence_proxy_async();
    block_sync();
    let desc = |m: u32| {
        let start = smem.shared_address(first + m * 4096);
        SmemMatrix::k_major_128b(start).descriptor()
    };
    let mut acc = [0f32; 32];
    wgmma_fence();
    wgmma_bf16_b_kmajor(&mut acc, desc(0), desc(1), false);
    wgmma_commit();
    wgmma_wait::<0>(&mut acc);
    store_d(&c, &acc);
}

/// `C (64 × 64) = A (64 × 16) · B (16 × 64)`, A from registers, B row-major (N-major) in
/// shared memory, 16 rows of 128 swizzled bytes.
#[tile_kernel(block = 128)]
fn mma_a_regs(a: Global<Bf16>, b: Global<Bf16>, c: GlobalMut<f32>) {
    let smem = shared!(Bf16; 16 * 64 + 512);
    let first = (1024 - smem.shared_address(0) % 1024) % 1024 / 2;
    let t = thread_idx();
    if t < 16 {
        for n in 0..64 {
            smem.store(
                first + swizzle_128b(t * 128 + n * 2) / 2,
                b.load(t * 64 + n),
            );
        }
    }
    fence_proxy_async();
    block_sync();
    // Word 2q + h: elements (16w + g + 8h, 8q + 2c + {0, 1}), the lower column in the low half.
    let (w, g, col) = (t / 32, t % 32 / 4, 2 * (t % 4));
    let word = |i: u32| {
        let (q, h) = (i / 2, i % 2);
        let at = (16 * w + g + 8 * h) * 16 + 8 * q + col;
        a.load(at).0 as u32 | (a.load(at + 1).0 as u32) << 16
    };
    let regs = [word(0), word(1), word(2), word(3)];
    let start = smem.shared_address(first);
    let bd = SmemMatrix {
        start,
        lbo: 8192,
        sbo: 1024,
        swizzle: SwizzleMode::B128,
    }
    .descriptor();
    let mut acc = [0f32; 32];
    wgmma_fence();
    wgmma_bf16_a_regs(&mut acc, regs, bd, false);
    wgmma_commit();
    wgmma_wait::<0>(&mut acc);
    store_d(&c, &acc);
}

/// `C (64 × 64) = A (64 × 16) · B (16 × 64)` with A given as `[16, 64]` (its transpose,
/// row-major: M-major) and B `[16, 64]` (N-major): each 16 rows of 128 swizzled bytes.
#[tile_kernel(block = 128)]
fn mma_a_mn(at: Global<Bf16>, b: Global<Bf16>, c: GlobalMut<f32>) {
    let smem = shared!(Bf16; 2 * 16 * 64 + 512);
    let first = (1024 - smem.shared_address(0) % 1024) % 1024 / 2;
    let t = thread_idx();
    // Threads 0..16 store row t of Aᵀ, threads 16..32 row t − 16 of B (2048 bytes later).
    if t < 32 {
        let (src, row) = if t < 16 { (&at, t) } else { (&b, t - 16) };
        for n in 0..64 {
            let to = first + (t / 16) * 1024 + swizzle_128b(row * 128 + n * 2) / 2;
            smem.store(to, src.load(row * 64 + n));
        }
    }
    fence_proxy_async();
    block_sync();
    let desc = |part: u32| {
        SmemMatrix {
            start: smem.shared_address(first + part * 1024),
            lbo: 8192,
            sbo: 1024,
            swizzle: SwizzleMode::B128,
        }
        .descriptor()
    };
    let mut acc = [0f32; 32];
    wgmma_fence();
    wgmma_bf16_a_mn(&mut acc, desc(0), desc(1), false);
    wgmma_commit();
    wgmma_wait::<0>(&mut acc);
    store_d(&c, &acc);
}

fn random(len: usize, seed: u64) -> Vec<Bf16> {
    let mut rng = Rng(seed);
    (0..len).map(|_| Bf16::from_f32(rng.f32())).collect()
}

/// fp64 `C[i][j] = Σ_k a(i, k) · b(k, j)`.
fn product(a: impl Fn(usize, usize) -> f64, b: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut c = vec![0.0; 64 * 64];
    for i in 0..64 {
        for j in 0..64 {
            c[i * 64 + j] = (0..16).map(|k| a(i, k) * b(k, j)).sum();
        }
    }
    c
}

fn assert_close(got: &[f32], want: &[f64]) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        // Each element is one exact 16-term sum rounded once to f32.
        assert!(
            (g as f64 - w).abs() <= 1e-6 * w.abs().max(1.0),
            "C[{}][{}]: {g} vs {w}",
            i / 64,
            i % 64
        );
    }
}

#[test]
fn b_kmajor_multiplies_by_the_transpose() {
    let device = Device::emulator();
    let (a, b) = (random(64 * 16, 3), random(64 * 16, 4));
    let (ad, bd) = (
        DeviceBuffer::from_slice(&device, &a).unwrap(),
        DeviceBuffer::from_slice(&device, &b).unwrap(),
    );
    let mut cd = DeviceBuffer::from_slice(&device, &vec![f32::NAN; 64 * 64]).unwrap();
    MmaBKmajor::launch(&device, LaunchConfig::new(1, 128), &ad, &bd, &mut cd).unwrap();
    let want = product(
        |i, k| a[i * 16 + k].to_f32() as f64,
        |k, j| b[j * 16 + k].to_f32() as f64,
    );
    assert_close(&cd.to_vec().unwrap(), &want);
}

#[test]
fn a_from_registers_follows_the_fragment_layout() {
    let device = Device::emulator();
    let (a, b) = (random(64 * 16, 5), random(16 * 64, 6));
    let (ad, bd) = (
        DeviceBuffer::from_slice(&device, &a).unwrap(),
        DeviceBuffer::from_slice(&device, &b).unwrap(),
    );
    let mut cd = DeviceBuffer::from_slice(&device, &vec![f32::NAN; 64 * 64]).unwrap();
    MmaARegs::launch(&device, LaunchConfig::new(1, 128), &ad, &bd, &mut cd).unwrap();
    let want = product(
        |i, k| a[i * 16 + k].to_f32() as f64,
        |k, j| b[k * 64 + j].to_f32() as f64,
    );
    assert_close(&cd.to_vec().unwrap(), &want);
}

#[test]
fn a_m_major_multiplies_the_transpose_of_what_is_stored() {
    let device = Device::emulator();
    let (at, b) = (random(16 * 64, 7), random(16 * 64, 8));
    let (ad, bd) = (
        DeviceBuffer::from_slice(&device, &at).unwrap(),
        DeviceBuffer::from_slice(&device, &b).unwrap(),
    );
    let mut cd = DeviceBuffer::from_slice(&device, &vec![f32::NAN; 64 * 64]).unwrap();
    MmaAMn::launch(&device, LaunchConfig::new(1, 128), &ad, &bd, &mut cd).unwrap();
    let want = product(
        |i, k| at[k * 64 + i].to_f32() as f64,
        |k, j| b[k * 64 + j].to_f32() as f64,
    );
    assert_close(&cd.to_vec().unwrap(), &want);
}
