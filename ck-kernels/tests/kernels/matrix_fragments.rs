//! `stmatrix_x4`, the warp's store of four 8 × 8 b16 matrices from mma fragments, against the
//! PTX ISA's layout written out here: lane `l`'s register `j` holds elements
//! `(l / 4, 2(l % 4) + {0, 1})` of matrix `j`, lanes `8j..8j + 8` name matrix `j`'s rows; with
//! `.trans` (`stmatrix_x4_trans`) element `(r, c)` lands at column `r` of row `c`.

use ck_core::device::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_core::report::Fault;
use ck_macros::tile_kernel;

/// Element `(r, c)` of matrix `j`: distinct integers below 256, exact in bf16.
fn value(j: u32, r: u32, c: u32) -> f32 {
    (64 * j + 8 * r + c) as f32
}

/// Where row `r` of matrix `j` goes (elements): rows of the four matrices interleaved and in
/// reverse, so that a layout mix-up cannot land in place.
fn row_start(j: u32, r: u32) -> u32 {
    8 * (4 * (7 - r) + j)
}

/// One warp stores the four matrices with `stmatrix_x4` (rows as `row_start` says, shifted by
/// `skew` elements), copies shared memory to `out` and writes back what `ldmatrix_x4` of the
/// same rows returns to each lane, in `regs_back`.
#[tile_kernel(block = 32)]
fn store_fragments(out: GlobalMut<Bf16>, regs_back: GlobalMut<u32>, skew: u32, trans: bool) {
    let smem = shared!(Bf16; 256 + 8);
    let lane = lane_id();
    let (g, t) = (lane / 4, lane % 4);
    let pair = |j: u32| {
        let lo = Bf16::from_f32(value(j, g, 2 * t));
        let hi = Bf16::from_f32(value(j, g, 2 * t + 1));
        lo.0 as u32 | (hi.0 as u32) << 16
    };
    let row = 4 * (7 - lane % 8) + lane / 8;
    let pairs = [pair(0), pair(1), pair(2), pair(3)];
    if trans {
        stmatrix_x4_trans(&smem, 8 * row + skew, pairs);
    } else {
        stmatrix_x4(&smem, 8 * row + skew, pairs);
    }
    warp_sync();
    for i in 0..8 {
        out.store(8 * lane + i, smem.load(8 * lane + i));
    }
    // Transposed twice (`.trans` both ways) is the fragment again.
    let back = if trans {
        ldmatrix_x4_trans(&smem, 8 * row + skew)
    } else {
        ldmatrix_x4(&smem, 8 * row + skew)
    };
    for (j, word) in back.into_iter().enumerate() {
        regs_back.store(4 * lane + j as u32, word);
    }
}

fn run(skew: u32, trans: bool) -> Result<(Vec<Bf16>, Vec<u32>), ck_core::host::LaunchError> {
    let device = Device::emulator();
    let mut out = DeviceBuffer::<Bf16>::zeros(&device, 256)?;
    let mut back = DeviceBuffer::<u32>::zeros(&device, 128)?;
    let cfg = LaunchConfig::new(1, 32);
    StoreFragments::launch(&device, cfg, &mut out, &mut back, skew, trans)?;
    Ok((out.to_vec()?, back.to_vec()?))
}

/// Each lane's registers as `ldmatrix` (of the same kind) gave them back: the fragment pairs.
fn assert_fragments_back(back: &[u32]) {
    for lane in 0..32 {
        for j in 0..4 {
            let word = back[(4 * lane + j) as usize];
            let (g, t) = (lane / 4, lane % 4);
            let lo = f32::from_bits((word & 0xffff) << 16);
            let hi = f32::from_bits(word & 0xffff_0000);
            assert_eq!(
                (lo, hi),
                (value(j, g, 2 * t), value(j, g, 2 * t + 1)),
                "lane {lane}, reg {j}"
            );
        }
    }
}

#[test]
fn stmatrix_puts_each_fragment_pair_in_its_row_and_ldmatrix_reads_it_back() {
    let (out, back) = run(0, false).unwrap();
    for j in 0..4 {
        for r in 0..8 {
            for c in 0..8 {
                let got = out[(row_start(j, r) + c) as usize].to_f32();
                assert_eq!(got, value(j, r, c), "matrix {j}, element ({r}, {c})");
            }
        }
    }
    assert_fragments_back(&back);
}

#[test]
fn stmatrix_trans_puts_each_fragment_pair_in_a_column_and_ldmatrix_trans_reads_it_back() {
    let (out, back) = run(0, true).unwrap();
    for j in 0..4 {
        for r in 0..8 {
            for c in 0..8 {
                let got = out[(row_start(j, c) + r) as usize].to_f32();
                assert_eq!(got, value(j, r, c), "matrix {j}, element ({r}, {c})");
            }
        }
    }
    assert_fragments_back(&back);
}

#[test]
fn a_row_off_a_16_byte_boundary_is_refused() {
    let e = match run(1, true) {
        Err(ck_core::host::LaunchError::Kernel(e)) => e,
        other => panic!("expected a kernel error, got {other:?}"),
    };
    assert_eq!(e.fault, Fault::OutOfBounds, "{e}");
    assert!(e.message.contains("stmatrix row"), "{e}");
}
