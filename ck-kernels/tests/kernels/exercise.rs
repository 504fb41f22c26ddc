//! The exercise kernels against their CPU references on the emulator, and bank-probe's counters
//! against the bank model computed independently here.

use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_kernels::probes::bank_probe::{self, BankProbe};
use ck_kernels::probes::exercise::*;
use std::collections::{HashMap, HashSet};

use ck_kernels::checks::Rng;

#[test]
fn reverse_matches_its_reference() {
    let device = Device::emulator();
    let mut rng = Rng(7);
    for blocks in [1u32, 3] {
        let x: Vec<f32> = (0..blocks * BLOCK).map(|_| rng.f32()).collect();
        let input = DeviceBuffer::from_slice(&device, &x).unwrap();
        let mut output = DeviceBuffer::from_slice(&device, &vec![f32::NAN; x.len()]).unwrap();
        let st = Reverse::launch(
            &device,
            LaunchConfig::new(blocks, BLOCK),
            &input,
            &mut output,
        )
        .unwrap();
        assert_eq!(output.to_vec().unwrap(), reverse_reference(&x));
        // 8 warps per block, one 4-byte store and load each; consecutive lanes hit consecutive banks.
        assert_eq!(st.shared_store_requests, 8 * blocks as u64);
        assert_eq!(st.shared_load_conflicts + st.shared_store_conflicts, 0);
    }
}

#[test]
fn block_sum_matches_its_reference() {
    let device = Device::emulator();
    let mut rng = Rng(11);
    for n in [1u32, 255, 256, 1000] {
        let x: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
        let blocks = n.div_ceil(BLOCK);
        let input = DeviceBuffer::from_slice(&device, &x).unwrap();
        let mut output =
            DeviceBuffer::from_slice(&device, &vec![f32::NAN; blocks as usize]).unwrap();
        BlockSum::launch(
            &device,
            LaunchConfig::new(blocks, BLOCK),
            &input,
            &mut output,
            n,
        )
        .unwrap();
        for (got, want) in output.to_vec().unwrap().iter().zip(block_sum_reference(&x)) {
            assert!(
                (*got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{got} vs {want}"
            );
        }
    }
}

#[test]
fn histogram_matches_its_reference() {
    let device = Device::emulator();
    let mut rng = Rng(13);
    for n in [1usize, 300, 5000] {
        let v: Vec<u32> = (0..n).map(|_| (rng.bits() % 1000) as u32).collect();
        let values = DeviceBuffer::from_slice(&device, &v).unwrap();
        let mut bins = DeviceBuffer::zeros(&device, BINS as usize).unwrap();
        let st =
            Histogram::launch(&device, LaunchConfig::new(3, BLOCK), &values, &mut bins).unwrap();
        assert_eq!(bins.to_vec().unwrap(), histogram_reference(&v));
        assert_eq!(
            st.global_atomic_requests,
            3 * 2,
            "two warps of bin-owning threads per block"
        );
    }
}

/// The bank model, written out independently: per phase, distinct 4-byte words per bank.
fn expected_wavefronts(stride: u32, width: u32) -> (u64, u64) {
    let lanes_per_phase = match width {
        16 => 8,
        8 => 16,
        _ => 32,
    };
    let mut wavefronts = 0;
    let mut phases = 0;
    for warp in 0..4u32 {
        for phase in 0..32 / lanes_per_phase {
            let mut words_in_bank: HashMap<u32, HashSet<u32>> = HashMap::new();
            for lane in phase * lanes_per_phase..(phase + 1) * lanes_per_phase {
                let byte = warp * 8192 + lane * stride * width;
                for k in 0..width / 4 {
                    let word = byte / 4 + k;
                    words_in_bank.entry(word % 32).or_default().insert(word);
                }
            }
            wavefronts += words_in_bank
                .values()
                .map(|s| s.len() as u64)
                .max()
                .unwrap();
            phases += 1;
        }
    }
    (wavefronts, phases)
}

#[test]
fn bank_probe_counts_match_the_model() {
    let device = Device::emulator();
    for width in [4u32, 8, 16] {
        for stride in [1u32, 2, 4, 8, 16, 32, 33] {
            let mut out = DeviceBuffer::zeros(&device, (128 * width / 4) as usize).unwrap();
            let st = BankProbe::launch(&device, LaunchConfig::new(1, 128), &mut out, stride, width)
                .unwrap();
            assert_eq!(out.to_vec().unwrap(), bank_probe::reference(stride, width));
            let (wavefronts, phases) = expected_wavefronts(stride, width);
            assert_eq!(
                st.shared_store_wavefronts, wavefronts,
                "W={width} S={stride}"
            );
            assert_eq!(
                st.shared_load_wavefronts, wavefronts,
                "W={width} S={stride}"
            );
            assert_eq!(st.shared_store_conflicts, wavefronts - phases);
            assert_eq!(st.shared_load_conflicts, wavefronts - phases);
            // 128 threads × W contiguous bytes = 4·W sectors of 32 bytes.
            assert_eq!(st.global_store_sectors, 4 * width as u64);
            assert_eq!(st.global_load_sectors, 0);
        }
    }
    // Spot values from the closed form: stride 32 words·W/4 puts a whole phase in one bank.
    assert_eq!(expected_wavefronts(32, 4), (4 * 32, 4));
    assert_eq!(expected_wavefronts(33, 4), (4, 4));
    assert_eq!(expected_wavefronts(1, 16), (16, 16));
}
