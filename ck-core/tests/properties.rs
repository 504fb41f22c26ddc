//! Whole-domain properties of the index algebra: every point of every domain is checked, not a
//! sample (CuTe's way). Expected values come from independent reference computations written
//! here (division/modulo digit splitting, recursive boustrophedon curves), never from the code
//! under test.

use ck_core::magic::{magic, magic_div};
use ck_core::{Coordinate, Dims, SpaceFillingCurve, TensorAdaptor, TensorDescriptor, Transform};

fn d(s: &[i32]) -> Dims {
    Dims::from_slice(s)
}

/// Every point of the box `0..lengths` in row-major order.
fn box_points(lengths: &[i32]) -> Vec<Vec<i32>> {
    let mut out = vec![vec![]];
    for &l in lengths {
        out = out
            .into_iter()
            .flat_map(|p| (0..l).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

/// Division/modulo digit splitting (CK's merge_v3), the reference for magic-division merges.
fn divmod_digits(mut u: i32, lengths: &[i32]) -> Vec<i32> {
    let mut digits = vec![0; lengths.len()];
    for i in (1..lengths.len()).rev() {
        digits[i] = u % lengths[i];
        u /= lengths[i];
    }
    digits[0] = u;
    digits
}

#[test]
fn magic_division_is_exact_below_2_pow_31() {
    let mut seed = 0x2545_f491_u64;
    for dv in 1u32..=3000 {
        let m = magic(dv);
        let top = (1u32 << 31) - 1;
        let mut ns = vec![
            0,
            1,
            dv - 1,
            dv,
            dv + 1,
            top,
            top - 1,
            top / dv * dv,
            top / dv * dv - 1,
        ];
        for _ in 0..64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ns.push((seed % (1 << 31)) as u32);
        }
        for n in ns {
            assert_eq!(magic_div(n, m), n / dv, "n={n} d={dv}");
        }
    }
    for dv in [(1u32 << 31) - 1, 1 << 30, 65_537, 1_000_003] {
        for n in [0u32, dv - 1, dv, (1 << 31) - 1] {
            assert_eq!(magic_div(n, magic(dv)), n / dv);
        }
    }
}

#[test]
fn merge_equals_divmod_and_unmerge_inverts_it() {
    for lengths in [
        &[7][..],
        &[4, 5],
        &[2, 4, 8],
        &[3, 1, 5],
        &[6, 7, 3, 2],
        &[1, 1],
        &[13, 11],
    ] {
        let m = Transform::merge(lengths).unwrap();
        let u = Transform::unmerge(lengths).unwrap();
        let n: i32 = lengths.iter().product();
        assert_eq!(m.up_lengths().as_slice(), &[n]);
        for x in 0..n {
            let digits = m.lower(&d(&[x]));
            assert_eq!(digits.as_slice(), divmod_digits(x, lengths).as_slice());
            assert_eq!(u.lower(&digits).as_slice(), &[x], "unmerge(merge({x}))");
        }
        for digits in box_points(lengths) {
            let x = u.lower(&d(&digits));
            assert_eq!(
                m.lower(&x).as_slice(),
                digits.as_slice(),
                "merge(unmerge(..))"
            );
        }
    }
}

#[test]
fn xor_is_a_bijection_exactly_when_its_length_is_a_power_of_two() {
    for b in 1..=32 {
        let pow2 = b & (b - 1) == 0;
        assert_eq!(Transform::xor(4, b).is_ok(), pow2, "b={b}");
        // With a ≥ b every key 0..b occurs, so the raw map stays in range iff b is a power of 2.
        for a in [b, b + 3] {
            let mut hit = vec![false; (a * b) as usize];
            let mut in_range = true;
            for u0 in 0..a {
                for u1 in 0..b {
                    let l1 = u1 ^ (u0 % b);
                    if l1 >= b {
                        in_range = false;
                    } else {
                        hit[(u0 * b + l1) as usize] = true;
                    }
                }
            }
            let bijective = in_range && hit.iter().all(|&h| h);
            assert_eq!(bijective, pow2, "a={a} b={b}");
            if pow2 {
                let x = Transform::xor(a, b).unwrap();
                for p in box_points(&[a, b]) {
                    let low = x.lower(&d(&p));
                    assert_eq!(low.get(1), p[1] ^ (p[0] % b));
                }
            }
        }
    }
}

/// The GEMM LDS layout of spec §11 (fp16, M=16, K=32, KPack=8, MLdsLayer=2): xor → unmerge →
/// merge, a chain with every kind of update.
fn lds_xor_descriptor() -> TensorDescriptor {
    let (m, k, kpack, l) = (16, 32, 8, 2);
    let k0 = k / kpack;
    let d0 =
        TensorDescriptor::naive(&[k0 * l, m / l, kpack], &[kpack, k * l, 1], kpack, 1).unwrap();
    let d1 = d0
        .transform(
            &[
                Transform::xor(m / l, k0 * l).unwrap(),
                Transform::pass_through(kpack).unwrap(),
            ],
            &[&[1, 0], &[2]],
            &[&[1, 0], &[2]],
        )
        .unwrap();
    let d2 = d1
        .transform(
            &[
                Transform::unmerge(&[k0, l]).unwrap(),
                Transform::pass_through(m / l).unwrap(),
                Transform::pass_through(kpack).unwrap(),
            ],
            &[&[0], &[1], &[2]],
            &[&[0, 2], &[1], &[3]],
        )
        .unwrap();
    d2.transform(
        &[
            Transform::merge(&[m / l, l]).unwrap(),
            Transform::merge(&[k0, kpack]).unwrap(),
        ],
        &[&[1, 2], &[0, 3]],
        &[&[0], &[1]],
    )
    .unwrap()
}

fn descriptors() -> Vec<(&'static str, TensorDescriptor)> {
    let strided = TensorDescriptor::naive(&[3, 4, 5], &[41, 9, 1], -1, -1).unwrap();
    let padded = TensorDescriptor::naive(&[4, 5], &[5, 1], -1, -1)
        .unwrap()
        .transform(
            &[
                Transform::pad(4, 1, 2).unwrap(),
                Transform::left_pad(5, 3).unwrap(),
            ],
            &[&[0], &[1]],
            &[&[0], &[1]],
        )
        .unwrap();
    let merged = TensorDescriptor::naive(&[5, 7], &[8, 1], -1, -1)
        .unwrap()
        .transform(&[Transform::merge(&[5, 7]).unwrap()], &[&[0, 1]], &[&[0]])
        .unwrap();
    let mixed = TensorDescriptor::naive_packed(&[6, 10], -1)
        .unwrap()
        .transform(
            &[
                Transform::modulo(4, 6).unwrap(),
                Transform::slice(10, 2, 9).unwrap(),
            ],
            &[&[0], &[1]],
            &[&[0], &[1]],
        )
        .unwrap()
        .transform(
            &[
                Transform::unmerge(&[2, 3]).unwrap(),
                Transform::right_pad(7, 2).unwrap(),
            ],
            &[&[0], &[1]],
            &[&[0, 1], &[2]],
        )
        .unwrap();
    vec![
        ("strided 3x4x5", strided),
        ("padded 4x5", padded),
        ("merged 5x7", merged),
        ("mixed", mixed),
        (
            "with offset",
            TensorDescriptor::naive_with_offset(&[3, 4], &[6, 1], 100, 4, 1).unwrap(),
        ),
        (
            "packed with offset",
            TensorDescriptor::packed_with_offset(&[3, 4], 7, 4).unwrap(),
        ),
        (
            "aligned",
            TensorDescriptor::naive_aligned(&[2, 3, 5], 4).unwrap(),
        ),
        ("lds xor", lds_xor_descriptor()),
    ]
}

#[test]
fn every_coordinate_move_equals_the_fresh_coordinate() {
    for (name, desc) in descriptors() {
        let a = desc.adaptor();
        let points = box_points(desc.lengths().as_slice());
        for from in &points {
            for to in &points {
                let diff: Vec<i32> = to.iter().zip(from).map(|(t, f)| t - f).collect();
                let mut c = Coordinate::new(a, &d(from));
                let bottom_diff = a.move_coordinate(&mut c, &d(&diff));
                let fresh = Coordinate::new(a, &d(to));
                assert_eq!(c, fresh, "{name}: {from:?} -> {to:?}");
                assert_eq!(
                    bottom_diff.get(0),
                    desc.calculate_offset(&d(to)) - desc.calculate_offset(&d(from)),
                    "{name}: bottom diff {from:?} -> {to:?}"
                );
                assert_eq!(
                    a.is_valid_assuming_top_valid(&c),
                    a.is_valid_assuming_top_valid(&fresh)
                );
            }
        }
    }
}

#[test]
fn descriptor_offsets_match_closed_forms() {
    let all = descriptors();
    let get = |n: &str| all.iter().find(|(name, _)| *name == n).unwrap().1;
    for p in box_points(&[3, 4, 5]) {
        let off = get("strided 3x4x5").calculate_offset(&d(&p));
        assert_eq!(off, p[0] * 41 + p[1] * 9 + p[2]);
    }
    let padded = get("padded 4x5");
    assert_eq!(padded.lengths().as_slice(), &[7, 8]);
    for p in box_points(&[7, 8]) {
        let c = Coordinate::new(padded.adaptor(), &d(&p));
        assert_eq!(padded.offset(&c), (p[0] - 1) * 5 + (p[1] - 3));
        let valid = (1..5).contains(&p[0]) && p[1] >= 3;
        assert_eq!(
            padded.adaptor().is_valid_assuming_top_valid(&c),
            valid,
            "{p:?}"
        );
    }
    for p in box_points(&[3, 4]) {
        assert_eq!(
            get("with offset").calculate_offset(&d(&p)),
            100 + p[0] * 6 + p[1]
        );
        assert_eq!(
            get("packed with offset").calculate_offset(&d(&p)),
            7 + p[0] * 4 + p[1]
        );
    }
    // aligned: last stride 1, second-last ceil(5/4)*4 = 8, first 8*3 = 24.
    for p in box_points(&[2, 3, 5]) {
        assert_eq!(
            get("aligned").calculate_offset(&d(&p)),
            p[0] * 24 + p[1] * 8 + p[2]
        );
    }
    // The spec's closed form of the LDS xor layout (§11), and bijectivity onto [0, M*K).
    let lds = get("lds xor");
    let (kpack, l, k_per_block, k0) = (8, 2, 32, 4);
    let mut seen = vec![false; 16 * 32];
    for p in box_points(&[16, 32]) {
        let (m, k) = (p[0], p[1]);
        let row = ((k / kpack) * l + m % l) ^ ((m / l) % (k0 * l));
        let expect = row * kpack + (m / l) * (k_per_block * l) + k % kpack;
        let off = lds.calculate_offset(&d(&p));
        assert_eq!(off, expect, "{p:?}");
        assert!(!seen[off as usize]);
        seen[off as usize] = true;
    }
    // Vector guarantees: with-offset loses it (embed has no rule), packed keeps gcd(4, 4).
    assert_eq!(get("with offset").top_safe_vector().0.as_slice(), &[-1, -1]);
    assert_eq!(
        get("packed with offset").top_safe_vector().0.as_slice(),
        &[-1, 4]
    );
    assert_eq!(lds.top_safe_vector().0.as_slice(), &[-1, 8]);
    assert_eq!(lds.top_safe_vector().1.as_slice(), &[-1, 1]);
}

/// Reference curve: recursive boustrophedon over the ordered access grid — with `snake`, the
/// whole sub-path of the faster dims is reversed on every odd step of the slowest dim.
fn reference_curve(ordered: &[i32], snake: bool) -> Vec<Vec<i32>> {
    if ordered.is_empty() {
        return vec![vec![]];
    }
    let inner = reference_curve(&ordered[1..], snake);
    let mut out = vec![];
    for c in 0..ordered[0] {
        let sub: Vec<&Vec<i32>> = if snake && c % 2 == 1 {
            inner.iter().rev().collect()
        } else {
            inner.iter().collect()
        };
        out.extend(sub.into_iter().map(|s| [vec![c], s.clone()].concat()));
    }
    out
}

fn permutations(n: usize) -> Vec<Vec<i32>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = vec![];
    for p in permutations(n - 1) {
        for pos in 0..=p.len() {
            let mut q = p.clone();
            q.insert(pos, (n - 1) as i32);
            out.push(q);
        }
    }
    out
}

fn divisors(n: i32) -> Vec<i32> {
    (1..=n).filter(|s| n % s == 0).collect()
}

#[test]
fn every_curve_visits_each_access_once_and_its_steps_sum_to_the_path() {
    let length_sets: Vec<Vec<i32>> = vec![
        vec![1],
        vec![6],
        vec![4, 6],
        vec![3, 4],
        vec![2, 1, 4],
        vec![2, 3, 4],
        vec![4, 2, 2, 3],
    ];
    let mut curves = 0;
    for lengths in &length_sets {
        let n = lengths.len();
        let mut scalar_sets = vec![vec![]];
        for &l in lengths {
            scalar_sets = scalar_sets
                .into_iter()
                .flat_map(|s: Vec<i32>| {
                    divisors(l)
                        .into_iter()
                        .map(move |v| [s.clone(), vec![v]].concat())
                })
                .collect();
        }
        for order in permutations(n) {
            for scalars in &scalar_sets {
                for snake in [false, true] {
                    let c = SpaceFillingCurve::new(lengths, &order, scalars, snake).unwrap();
                    curves += 1;
                    let access: Vec<i32> =
                        lengths.iter().zip(scalars).map(|(l, s)| l / s).collect();
                    let ordered: Vec<i32> = order.iter().map(|&o| access[o as usize]).collect();
                    let reference = reference_curve(&ordered, snake);
                    assert_eq!(c.num_access() as usize, reference.len());
                    let mut seen = std::collections::HashSet::new();
                    let first = c.index(0);
                    let mut walked = first;
                    for (t, r) in reference.iter().enumerate() {
                        let mut expect = vec![0; n];
                        for k in 0..n {
                            let dim = order[k] as usize;
                            expect[dim] = r[k] * scalars[dim];
                        }
                        let got = c.index(t as i32);
                        assert_eq!(
                            got.as_slice(),
                            expect.as_slice(),
                            "{lengths:?} {order:?} {scalars:?} {snake} t={t}"
                        );
                        assert!(seen.insert(expect), "visited twice");
                        if t > 0 {
                            walked = walked.add(&c.forward_step(t as i32 - 1));
                            assert_eq!(walked, got, "forward steps must sum to the path");
                            let back = c.backward_step(t as i32);
                            assert_eq!(back.add(&c.forward_step(t as i32 - 1)), d(&vec![0; n]));
                        }
                    }
                    assert_eq!(seen.len(), access.iter().product::<i32>() as usize);
                }
            }
        }
    }
    assert!(curves > 500, "only {curves} curves checked");
}

#[test]
fn bad_curves_name_their_rule() {
    type Case<'a> = (&'a [i32], &'a [i32], &'a [i32], &'a str);
    let cases: [Case; 6] = [
        (&[4, 6], &[0, 0], &[1, 1], "sfc-order-not-permutation"),
        (&[4, 6], &[0, 2], &[1, 1], "sfc-order-not-permutation"),
        (&[4, 6], &[0, 1], &[1, 4], "sfc-not-divisible"),
        (&[4, 0], &[0, 1], &[1, 1], "length-not-positive"),
        (&[4, -2], &[0, 1], &[1, 1], "length-not-positive"),
        (&[4, 6], &[0, 1], &[1], "list-length-mismatch"),
    ];
    for (l, o, s, rule) in cases {
        let e = SpaceFillingCurve::new(l, o, s, false).unwrap_err();
        assert_eq!(e.rule.name(), rule, "{l:?} {o:?} {s:?}");
        assert!(!e.to_string().is_empty());
    }
    let c = SpaceFillingCurve::new(&[4, 6], &[0, 1], &[1, 1], false).unwrap();
    assert_eq!(
        c.try_index(24).unwrap_err().rule.name(),
        "index-out-of-range"
    );
    assert_eq!(
        c.try_index(-1).unwrap_err().rule.name(),
        "index-out-of-range"
    );
}

#[test]
fn malformed_adaptors_name_their_rule() {
    let pt = Transform::pass_through(4).unwrap();
    let um = Transform::unmerge(&[2, 2]).unwrap();
    let rep = Transform::replicate(&[3]).unwrap();
    let cases: Vec<(&str, Result<TensorAdaptor, ck_core::Error>)> = vec![
        (
            "adaptor-arity",
            TensorAdaptor::new(&[um], &[&[0]], &[&[1]], &[0], &[1]),
        ),
        (
            "adaptor-order",
            TensorAdaptor::new(&[pt, pt], &[&[0], &[2]], &[&[1], &[3]], &[0], &[1, 3]),
        ),
        (
            "adaptor-hidden-reused",
            TensorAdaptor::new(&[pt, pt], &[&[0], &[0]], &[&[1], &[2]], &[0], &[1, 2]),
        ),
        (
            "adaptor-hidden-reused",
            TensorAdaptor::new(&[pt, pt], &[&[0], &[1]], &[&[1], &[1]], &[0, 1], &[1]),
        ),
        (
            "adaptor-top-bottom",
            TensorAdaptor::new(&[pt], &[&[0]], &[&[1]], &[0], &[1, 1]),
        ),
        (
            "adaptor-top-bottom",
            TensorAdaptor::new(&[pt, pt], &[&[0], &[1]], &[&[1], &[2]], &[0], &[1, 2]),
        ),
        (
            "adaptor-dangling",
            TensorAdaptor::new(&[um], &[&[0]], &[&[1, 2]], &[0], &[1]),
        ),
        (
            "index-out-of-range",
            TensorAdaptor::new(&[pt], &[&[0]], &[&[99]], &[0], &[99]),
        ),
        (
            "list-length-mismatch",
            TensorAdaptor::new(&[pt], &[], &[&[1]], &[0], &[1]),
        ),
    ];
    for (rule, r) in cases {
        assert_eq!(r.unwrap_err().rule.name(), rule);
    }
    // Replicate's upper dims are ignored by its lower index: leaving them unconsumed is fine.
    assert!(TensorAdaptor::new(&[rep, pt], &[&[], &[0]], &[&[2], &[1]], &[0], &[1]).is_ok());
    let base = TensorDescriptor::naive(&[4, 5], &[5, 1], -1, -1).unwrap();
    let e = base
        .transform(&[Transform::pass_through(4).unwrap()], &[&[0]], &[&[0]])
        .unwrap_err();
    assert_eq!(e.rule.name(), "adaptor-ids-not-permutation");
    let e = base
        .transform(
            &[pt, Transform::pass_through(5).unwrap()],
            &[&[0], &[0]],
            &[&[0], &[1]],
        )
        .unwrap_err();
    assert_eq!(e.rule.name(), "adaptor-ids-not-permutation");
    let bad = [
        ("length-not-positive", Transform::merge(&[4, 0]).map(|_| ())),
        ("empty-list", Transform::unmerge(&[]).map(|_| ())),
        (
            "list-length-mismatch",
            Transform::embed(&[2, 3], &[1]).map(|_| ()),
        ),
        ("negative-parameter", Transform::pad(4, -1, 0).map(|_| ())),
        (
            "slice-out-of-range",
            Transform::slice(10, 3, 11).map(|_| ()),
        ),
        (
            "index-overflow",
            Transform::merge(&[65536, 65536]).map(|_| ()),
        ),
        ("xor-not-power-of-two", Transform::xor(8, 12).map(|_| ())),
    ];
    for (rule, r) in bad {
        assert_eq!(r.unwrap_err().rule.name(), rule);
    }
}

#[test]
fn chaining_adaptors_composes_them() {
    // a0: 2-D (4, 6) -> offset (strides 10, 1); a1: 1-D u (0..24) -> (row, col) via merge.
    let a0 = *TensorDescriptor::naive(&[4, 6], &[10, 1], -1, -1)
        .unwrap()
        .adaptor();
    let a1 =
        TensorAdaptor::single_stage(&[Transform::merge(&[4, 6]).unwrap()], &[&[0, 1]], &[&[0]])
            .unwrap();
    let c = a0.chain(&a1).unwrap();
    for u in 0..24 {
        let direct = a0.calculate_bottom_index(&a1.calculate_bottom_index(&d(&[u])));
        assert_eq!(c.calculate_bottom_index(&d(&[u])), direct);
        assert_eq!(direct.get(0), (u / 6) * 10 + u % 6);
    }
    assert_eq!(a1.chain(&a1).unwrap_err().rule.name(), "chain-mismatch");
}
