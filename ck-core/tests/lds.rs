//! Spec §11 / TV8: the XOR LDS layout's offsets and per-lane banks exactly, its descriptor chain
//! equal to its closed form, bijectivity over whole parameter domains, and the rule names.

use ck_core::lds::{LdsLayout, Pattern};
use ck_core::Dims;

/// Start bank of each lane's access (bank = (byte / 4) % 32).
fn start_banks(l: &LdsLayout, p: Pattern) -> Vec<u64> {
    let (acc, n) = l.pattern_accesses(p);
    acc[..n].iter().map(|a| (a.byte_address / 4) % 32).collect()
}

fn max_phase_ways(l: &LdsLayout, p: Pattern) -> u32 {
    (1..=32)
        .find(|&w| std::panic::catch_unwind(|| l.assert_max_ways(p, w)).is_ok())
        .unwrap()
}

#[test]
fn tv8_offsets_and_banks() {
    let xor = LdsLayout::xor(128, 32, 8, 2, None).unwrap();
    assert_eq!(xor.mlds_layer(), 2);
    assert_eq!(xor.element_space_size(), 4096);
    for ((m, k), off) in [
        ((0, 0), 0),
        ((0, 8), 16),
        ((1, 0), 8),
        ((1, 8), 24),
        ((2, 0), 72),
        ((3, 0), 64),
        ((5, 17), 185),
        ((127, 31), 4039),
    ] {
        assert_eq!(xor.offset(m, k), off, "({m},{k})");
    }
    let (vl, vs) = xor.descriptor().unwrap().top_safe_vector();
    assert_eq!((vl.as_slice(), vs.as_slice()), (&[-1, 8][..], &[-1, 1][..]));
    let plain = LdsLayout::plain(128, 32, 8, 2).unwrap();
    let tv8_read_plain: Vec<u64> = (0..32).map(|i| if i % 2 == 0 { 0 } else { 16 }).collect();
    assert_eq!(start_banks(&plain, Pattern::KRead), tv8_read_plain);
    let tv8_read_xor: Vec<u64> =
        [0, 4, 4, 0, 8, 12, 12, 8, 16, 20, 20, 16, 24, 28, 28, 24].repeat(2);
    assert_eq!(start_banks(&xor, Pattern::KRead), tv8_read_xor);
    assert_eq!(max_phase_ways(&plain, Pattern::KRead), 4);
    assert_eq!(max_phase_ways(&xor, Pattern::KRead), 2);
    let tv8_write_plain: Vec<u64> = [0, 4, 8, 12, 16, 20, 24, 28].repeat(4);
    assert_eq!(start_banks(&plain, Pattern::KWrite), tv8_write_plain);
    let tv8_write_xor = vec![
        0, 8, 16, 24, 4, 12, 20, 28, 4, 12, 20, 28, 0, 8, 16, 24, 8, 0, 24, 16, 12, 4, 28, 20, 12,
        4, 28, 20, 8, 0, 24, 16,
    ];
    assert_eq!(start_banks(&xor, Pattern::KWrite), tv8_write_xor);
    assert_eq!(max_phase_ways(&plain, Pattern::KWrite), 1);
    assert_eq!(max_phase_ways(&xor, Pattern::KWrite), 1);
}

#[test]
fn tv8b_mlds_layer_1() {
    let xor = LdsLayout::xor(64, 64, 8, 2, None).unwrap();
    assert_eq!(xor.mlds_layer(), 1);
    for m in 0..64 {
        for k in 0..64 {
            assert_eq!(xor.offset(m, k), ((k / 8) ^ (m % 8)) * 8 + m * 64 + k % 8);
        }
    }
    let plain = LdsLayout::plain(64, 64, 8, 2).unwrap();
    assert_eq!(start_banks(&plain, Pattern::KRead), vec![0; 32]);
    assert_eq!(max_phase_ways(&plain, Pattern::KRead), 8);
    assert_eq!(
        start_banks(&xor, Pattern::KRead),
        [0, 4, 8, 12, 16, 20, 24, 28].repeat(4)
    );
    assert_eq!(max_phase_ways(&xor, Pattern::KRead), 1);
    // 4-byte reads (m = i, k = 0, 1): plain 16-way, xor 4-way over the 32-lane phase (TV8).
    let plain4 = LdsLayout::plain(128, 32, 2, 2).unwrap();
    assert_eq!(max_phase_ways(&plain4, Pattern::KRead), 16);
}

#[test]
fn every_valid_layout_is_a_bijection_and_matches_its_descriptor() {
    let mut checked = 0;
    for elem_bytes in [1, 2, 4] {
        for k in [8, 16, 32, 64, 128] {
            for k_pack in [1, 2, 4, 8, 16] {
                for m in [8, 16, 32, 64, 128] {
                    for l in [None, Some(1), Some(2), Some(4)] {
                        let Ok(x) = LdsLayout::xor(m, k, k_pack, elem_bytes, l) else {
                            continue;
                        };
                        let d = x.descriptor().unwrap();
                        let mut seen = vec![false; (m * k) as usize];
                        for mi in 0..m {
                            for ki in 0..k {
                                let off = x.offset(mi, ki);
                                assert_eq!(
                                    d.calculate_offset(&Dims::from_slice(&[mi, ki])),
                                    off,
                                    "{m}x{k} kp{k_pack} {l:?}"
                                );
                                assert!((0..m * k).contains(&off) && !seen[off as usize]);
                                seen[off as usize] = true;
                            }
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 200, "{checked}");
}

#[test]
fn bad_parameters_name_their_rule() {
    assert_eq!(
        LdsLayout::xor(128, 30, 8, 2, None).unwrap_err().rule.name(),
        "lds-k-pack"
    );
    assert_eq!(
        LdsLayout::xor(130, 32, 8, 2, Some(4))
            .unwrap_err()
            .rule
            .name(),
        "lds-mlds-layer"
    );
    assert_eq!(
        LdsLayout::xor(96, 24, 8, 2, Some(1))
            .unwrap_err()
            .rule
            .name(),
        "xor-not-power-of-two"
    );
    assert_eq!(
        LdsLayout::plain(0, 32, 8, 2).unwrap_err().rule.name(),
        "length-not-positive"
    );
    assert_eq!(LdsLayout::default_mlds_layer(32, 2), 2);
    assert_eq!(LdsLayout::default_k_pack(128, 32, 256, 2), 8);
}
