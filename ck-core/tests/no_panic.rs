//! The public host API on arbitrary input returns errors, never panics: proptest strategies
//! (shrinking; failures persisted beside this file, in `no_panic.proptest-regressions`) over
//! the constructors of multi-indices, encodings (arbitrary and nearly valid lists),
//! transforms, descriptors, space-filling curves, LDS layouts, the bank model and device
//! buffers, and — for whatever they accept — the derived tables and maps callers use next.
//! An [`Encoding`] is checked once, when it is made: its tables are then total.

use ck_core::encoding::{Checks, UncheckedEncoding, Violations};
use ck_core::lds::LdsLayout;
use ck_core::{Dims, Encoding, SpaceFillingCurve, TensorDescriptor, Transform};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

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

/// A `Dims` entry: mostly small (sums and products in range), sometimes any.
fn entry() -> impl Strategy<Value = i32> {
    prop_oneof![3 => -9i32..10, 1 => any::<i32>()]
}

fn slices(v: &[Vec<i32>]) -> Vec<&[i32]> {
    v.iter().map(Vec::as_slice).collect()
}

/// Everything an unchecked encoding offers, and — when it checks — every derived table at
/// the corners of its P and Y boxes.
fn use_encoding(u: &UncheckedEncoding, warp_size: u32) {
    let checks = Checks::warp(warp_size);
    let errors = u.errors(&checks);
    // The one-pass list and the early-stopping scan agree, and nothing is lost silently.
    assert_eq!(errors.first(), u.first_error(&checks));
    assert_eq!(
        errors.iter().len(),
        errors.found().min(Violations::CAPACITY)
    );
    // Errors and warnings are told apart by the rule itself.
    for v in &errors {
        assert!(!v.rule.is_warning(), "{:?} reported as an error", v.rule);
        let _ = v.message(u);
    }
    for w in &u.warnings() {
        assert!(w.rule.is_warning(), "{:?} reported as a warning", w.rule);
    }
    let structural = errors.iter().find(|v| v.rule.is_structural());
    let e = match u.check() {
        Ok(e) => e,
        Err(v) => {
            assert!(v.rule.is_structural(), "{:?} refused by check", v.rule);
            return;
        }
    };
    // What `check` accepts breaks no structural rule, and only the others remain to report.
    assert_eq!(structural, None);
    if let Some(v) = e.first_error(&checks) {
        assert!(
            !v.rule.is_structural(),
            "{:?} on a checked encoding",
            v.rule
        );
    }
    let corner = |lengths: Dims, last: bool| {
        let v: Vec<i32> = lengths
            .as_slice()
            .iter()
            .map(|&l| if last { l - 1 } else { 0 })
            .collect();
        Dims::from_slice(&v)
    };
    let ps = Dims::from_slice(&(0..e.np()).map(|p| e.p_length(p)).collect::<Vec<_>>());
    let _ = (
        e.x_lengths(),
        e.thread_buffer_size(),
        e.block_size(),
        e.adaptor(),
    );
    for last in [false, true] {
        let (p, y) = (corner(ps, last), corner(e.y_lengths(), last));
        assert_eq!(e.x_index(&p, &y), e.x_index_closed_form(&p, &y));
        let _ = (e.rs_index(&p), e.d_index(&y));
    }
    let _ = e.partition_index(0, warp_size);
    for x in 0..e.nx() {
        let _ = (e.span(x), e.reduce(&[x as i32]), e.slice_x(x, 1));
    }
}

/// CK's six lists.
type Lists = (
    Vec<i32>,
    Vec<Vec<i32>>,
    Vec<Vec<i32>>,
    Vec<Vec<i32>>,
    Vec<i32>,
    Vec<i32>,
);

/// Mostly valid lists (arbitrary ones almost never are): small R and H lengths, each H
/// component given to P0, P1 or a Y and each R component to P0, P1 or nobody, as drawn; then,
/// half the time, one entry of one list overwritten with an arbitrary value.
fn near_valid() -> impl Strategy<Value = Lists> {
    let r = prop::collection::vec(1i32..=4, 0..=2);
    let h = prop::collection::vec(prop::collection::vec(1i32..=4, 1..=3), 1..=3);
    let owners = prop::collection::vec(0u8..3, 11);
    let mutation = prop::option::of((0usize..6, 0usize..12, int()));
    (r, h, owners, 1usize..=2, mutation).prop_map(|(r, h, owners, np, mutation)| {
        let (mut pm, mut pn) = (vec![Vec::new(); np], vec![Vec::new(); np]);
        let (mut ym, mut yn) = (Vec::new(), Vec::new());
        let components = r.iter().map(|_| 0).chain(
            h.iter()
                .enumerate()
                .flat_map(|(x, l)| l.iter().map(move |_| x as i32 + 1)),
        );
        let mut minor = vec![0i32; h.len() + 1];
        for (major, owner) in components.zip(owners.iter().cycle()) {
            let m = minor[major as usize];
            minor[major as usize] += 1;
            match *owner as usize {
                p if p < np => {
                    pm[p].push(major);
                    pn[p].push(m);
                }
                _ if major > 0 => {
                    ym.push(major);
                    yn.push(m);
                }
                _ => {} // an R component nobody owns
            }
        }
        let mut lists: Lists = (r, h, pm, pn, ym, yn);
        if let Some((list, at, value)) = mutation {
            let flat: Vec<&mut i32> = match list {
                0 => lists.0.iter_mut().collect(),
                1 => lists.1.iter_mut().flatten().collect(),
                2 => lists.2.iter_mut().flatten().collect(),
                3 => lists.3.iter_mut().flatten().collect(),
                4 => lists.4.iter_mut().collect(),
                _ => lists.5.iter_mut().collect(),
            };
            let n = flat.len();
            if let Some(slot) = flat.into_iter().nth(at % n.max(1)) {
                *slot = value;
            }
        }
        lists
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Under miri (CI runs this file there) a case costs ~1000× more: a sample of each.
        cases: if cfg!(miri) { 6 } else { 2000 },
        // Beside this file: a failing case is replayed first on the next run.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn near_valid_encodings((r, h, pm, pn, ym, yn) in near_valid(), warp_size in prop_oneof![Just(32u32), Just(64)]) {
        if let Ok(u) = UncheckedEncoding::new(&r, &slices(&h), &slices(&pm), &slices(&pn), &ym, &yn) {
            use_encoding(&u, warp_size);
        }
    }

    #[test]
    fn encodings(r in list(3), h in lists(3, 4), pm in lists(3, 3), pn in lists(3, 3),
                 ym in list(5), yn in list(5), warp_size in prop_oneof![Just(32u32), Just(64), Just(16)]) {
        if let Ok(u) = UncheckedEncoding::new(&r, &slices(&h), &slices(&pm), &slices(&pn), &ym, &yn) {
            use_encoding(&u, warp_size);
        }
    }

    #[test]
    fn dims(values in prop::collection::vec(entry(), 0..20),
            others in prop::collection::vec(entry(), 0..14), i in 0usize..16) {
        use ck_core::dims::MAX_DIMS;
        let d = Dims::try_from_slice(&values);
        prop_assert_eq!(d.is_some(), values.len() <= MAX_DIMS);
        let pushed = values.iter().try_fold(Dims::EMPTY, |d, &v| d.try_push(v));
        prop_assert_eq!(pushed, d);
        prop_assert_eq!(Dims::try_splat(i, 7).map(|s| s.len()), (i <= MAX_DIMS).then_some(i));
        let (Some(a), Some(b)) = (d, Dims::try_from_slice(&others)) else { return Ok(()) };
        // The checked forms against the same arithmetic in 64 bits.
        let fits = |v: i64| i32::try_from(v).ok();
        prop_assert_eq!(a.try_get(i), values.get(i).copied());
        prop_assert_eq!(a.try_last(), values.last().copied());
        prop_assert_eq!(a.try_with(i, 5).is_some(), i < values.len());
        prop_assert_eq!(
            a.checked_product(),
            values.iter().try_fold(1i64, |p, &v| fits(p * v as i64).map(i64::from)).and_then(fits)
        );
        prop_assert_eq!(
            a.checked_sum(),
            values.iter().try_fold(0i64, |s, &v| fits(s + v as i64).map(i64::from)).and_then(fits)
        );
        let same_len = values.len() == others.len();
        let pairs = || values.iter().zip(&others).map(|(&x, &y)| (x as i64, y as i64));
        let elementwise = |f: fn(i64, i64) -> i64| {
            same_len.then(|| pairs().map(|(x, y)| fits(f(x, y))).collect::<Option<Vec<_>>>()).flatten()
        };
        prop_assert_eq!(a.checked_add(&b).map(|d| d.as_slice().to_vec()), elementwise(|x, y| x + y));
        prop_assert_eq!(a.checked_sub(&b).map(|d| d.as_slice().to_vec()), elementwise(|x, y| x - y));
        let dot = same_len
            .then(|| pairs().try_fold(0i64, |s, (x, y)| fits(x * y).and_then(|t| fits(s + t as i64)).map(i64::from)))
            .flatten()
            .and_then(fits);
        prop_assert_eq!(a.checked_dot(&b), dot);
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

    #[test]
    fn device_buffer_round_trip(data in prop::collection::vec(any::<f32>(), 0..40), other_len in 0usize..40) {
        use ck_core::host::{Device, DeviceBuffer};
        let device = Device::emulator();
        let a = DeviceBuffer::from_slice(&device, &data).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&a.to_vec().unwrap()), bits(&data));
        let mut b = DeviceBuffer::<f32>::zeros(&device, other_len).unwrap();
        match b.copy_from(&a) {
            Ok(_) => prop_assert_eq!(bits(&b.to_vec().unwrap()), bits(&data)),
            Err(e) => {
                prop_assert_ne!(other_len, data.len());
                prop_assert_eq!(e.rule(), "argument-size");
                prop_assert_eq!(b.to_vec().unwrap(), vec![0.0; other_len]);
            }
        }
        // Handles name the buffer; made outside a launch they are inert values.
        let _ = (a.global(), b.global_mut(), a.arg());
    }
}

#[test]
fn a_tile_past_32_bit_indices_is_an_error() {
    use ck_core::encoding::EncodingRule;
    // 65536 × 65536 elements: every length valid, the product 2³² past index_t.
    let v = Encoding::new(
        &[],
        &[&[65536], &[64, 1024]],
        &[&[2, 2]],
        &[&[0, 1]],
        &[1, 2],
        &[0, 0],
    )
    .expect_err("too large");
    assert_eq!(v.rule, EncodingRule::TileTooLarge);
    assert_eq!(v.rule.name(), "tile-too-large");
}
