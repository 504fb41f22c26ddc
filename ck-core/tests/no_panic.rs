//! The public host API on arbitrary input returns errors, never panics: proptest strategies
//! (shrinking, failures persisted under `proptest-regressions/`) over the constructors of
//! encodings, transforms, descriptors, space-filling curves, LDS layouts, the bank model and
//! device buffers, and — for whatever they accept — the derived tables and maps callers use next.

use ck_core::encoding::Checks;
use ck_core::lds::LdsLayout;
use ck_core::{Dims, Encoding, SpaceFillingCurve, TensorDescriptor, Transform};
use proptest::prelude::*;

/// Lengths and indices around the interesting edges: negative, zero, small, and large enough to
/// overflow products.
fn int() -> impl Strategy<Value = i32> {
    prop_oneof![4 => -2i32..=9, 1 => Just(i32::MAX), 1 => 1i32 << 16..1 << 20]
}

fn list(max: usize) -> impl Strategy<Value = Vec<i32>> {
    prop::collection::vec(int(), 0..=max)
}

fn lists(outer: usize, inner: usize) -> impl Strategy<Value = Vec<Vec<i32>>> {
    prop::collection::vec(list(inner), 0..=outer)
}

fn slices(v: &[Vec<i32>]) -> Vec<&[i32]> {
    v.iter().map(Vec::as_slice).collect()
}

/// Everything an accepted, checked encoding offers.
fn use_encoding(e: &Encoding, warp_size: u32) {
    let checks = Checks::warp(warp_size);
    for n in 0..4 {
        // Errors and warnings are told apart by the rule itself.
        if let Some(v) = e.error(&checks, n) {
            assert!(!v.rule.is_warning(), "{:?} reported as an error", v.rule);
        }
        if let Some(w) = e.warning(n) {
            assert!(w.rule.is_warning(), "{:?} reported as a warning", w.rule);
        }
    }
    if e.first_error(&checks).is_some() {
        return;
    }
    let ys = e.y_lengths();
    let _ = (e.x_lengths(), e.thread_buffer_size(), e.block_size());
    let _ = e.adaptor();
    for t in [0, 1, 31, 255] {
        let p = e.partition_index(t, warp_size);
        let last = Dims::from_slice(&ys.as_slice().iter().map(|l| l - 1).collect::<Vec<_>>());
        let _ = (e.x_index(&p, &last), e.rs_index(&p), e.d_index(&last));
    }
    for x in 0..e.nx() {
        let _ = e.reduce(&[x as i32]);
        let _ = e.slice_x(x, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn encodings(r in list(3), h in lists(3, 4), pm in lists(3, 3), pn in lists(3, 3),
                 ym in list(5), yn in list(5), warp_size in prop_oneof![Just(32u32), Just(64), Just(16)]) {
        if let Ok(e) = Encoding::new(&r, &slices(&h), &slices(&pm), &slices(&pn), &ym, &yn) {
            use_encoding(&e, warp_size);
        }
    }

    #[test]
    fn transforms_and_descriptors(a in list(4), b in list(4), x in int(), y in int(), z in int()) {
        let _ = (Transform::pass_through(x), Transform::pad(x, y, z), Transform::embed(&a, &b));
        let _ = (Transform::merge(&a), Transform::unmerge(&a), Transform::replicate(&a));
        let _ = (Transform::slice(x, y, z), Transform::offset(x, y), Transform::modulo(x, y));
        let _ = (Transform::xor(x, y), Transform::insert(x));
        if let Ok(d) = TensorDescriptor::naive(&a, &b, y, z) {
            let _ = d.adaptor();
        }
        let _ = TensorDescriptor::naive_aligned(&a, x);
    }

    #[test]
    fn space_filling_curves(lengths in list(3), order in list(3), spa in list(3), snake in any::<bool>(), t in int()) {
        if let Ok(c) = SpaceFillingCurve::new(&lengths, &order, &spa, snake) {
            let _ = (c.num_access(), c.try_index(t), c.try_index(0));
        }
    }

    #[test]
    fn lds_layouts(m in int(), k in int(), k_pack in int(), elem_bytes in int(),
                   layer in prop::option::of(int()), at in (0i32..64, 0i32..64)) {
        for l in [LdsLayout::xor(m, k, k_pack, elem_bytes, layer), LdsLayout::plain(m, k, k_pack, elem_bytes)]
            .into_iter()
            .flatten()
        {
            let _ = (l.element_space_size(), l.offset(at.0 % l.m_per_block(), at.1 % l.k_per_block()));
        }
    }

    #[test]
    fn bank_model(lanes in prop::collection::vec((0u32..40, any::<u64>(), 0u32..=16), 0..40),
                  phase in 0u32..40, per_phase in 0u32..40) {
        let accesses: Vec<ck_core::bank::LaneAccess> = lanes
            .iter()
            .map(|&(lane, byte_address, bytes)| ck_core::bank::LaneAccess {
                lane,
                byte_address: byte_address >> 8,
                bytes,
            })
            .collect();
        let _ = ck_core::bank::worst_bank(&accesses, phase, per_phase);
        let _ = ck_core::bank::shared_wavefronts(&accesses);
    }

    #[test]
    fn device_buffers(len in prop_oneof![0usize..64, Just(usize::MAX), Just(usize::MAX / 2)]) {
        let device = ck_core::host::Device::emulator();
        match ck_core::host::DeviceBuffer::<f32>::zeros(&device, len) {
            Ok(b) => prop_assert_eq!(b.len(), len),
            Err(e) => prop_assert_eq!(e.rule(), "argument-size"),
        }
    }
}

#[test]
fn a_tile_past_32_bit_indices_is_an_error() {
    use ck_core::encoding::EncodingRule;
    // 65536 × 65536 elements: every length valid, the product 2³² past index_t.
    let e = Encoding::new(
        &[],
        &[&[65536], &[64, 1024]],
        &[&[2, 2]],
        &[&[0, 1]],
        &[1, 2],
        &[0, 0],
    )
    .unwrap();
    let v = e.first_error(&Checks::warp(32)).expect("too large");
    assert_eq!(v.rule, EncodingRule::TileTooLarge);
    assert_eq!(v.rule.name(), "tile-too-large");
}
