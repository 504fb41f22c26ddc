//! The spec's test vectors TV4 (space-filling curves), TV5 (transforms) and TV6 (descriptors and
//! coordinate movement), exactly as written in `shared/spec/ck-tile-semantics.md` §13.

use ck_core::magic::{magic, magic_div};
use ck_core::{Coordinate, Dims, SpaceFillingCurve, TensorDescriptor, Transform};

fn d(s: &[i32]) -> Dims {
    Dims::from_slice(s)
}

fn path(c: &SpaceFillingCurve) -> Vec<Vec<i32>> {
    (0..c.num_access())
        .map(|t| c.index(t).as_slice().to_vec())
        .collect()
}

fn pts(s: &[&[i32]]) -> Vec<Vec<i32>> {
    s.iter().map(|p| p.to_vec()).collect()
}

#[test]
fn tv4_curves_without_snake() {
    let c = SpaceFillingCurve::new(&[4, 6], &[0, 1], &[1, 1], false).unwrap();
    assert_eq!(c.num_access(), 24);
    assert_eq!(
        path(&c)[..10],
        pts(&[
            &[0, 0],
            &[0, 1],
            &[0, 2],
            &[0, 3],
            &[0, 4],
            &[0, 5],
            &[1, 0],
            &[1, 1],
            &[1, 2],
            &[1, 3]
        ])
    );
    let c = SpaceFillingCurve::new(&[4, 6], &[1, 0], &[1, 1], false).unwrap();
    assert_eq!(c.num_access(), 24);
    assert_eq!(
        path(&c)[..10],
        pts(&[
            &[0, 0],
            &[1, 0],
            &[2, 0],
            &[3, 0],
            &[0, 1],
            &[1, 1],
            &[2, 1],
            &[3, 1],
            &[0, 2],
            &[1, 2]
        ])
    );
    let c = SpaceFillingCurve::new(&[4, 8], &[0, 1], &[1, 4], false).unwrap();
    assert_eq!(
        path(&c),
        pts(&[
            &[0, 0],
            &[0, 4],
            &[1, 0],
            &[1, 4],
            &[2, 0],
            &[2, 4],
            &[3, 0],
            &[3, 4]
        ])
    );
}

#[test]
fn tv4_curves_with_snake() {
    let c = SpaceFillingCurve::new(&[4, 8], &[0, 1], &[1, 4], true).unwrap();
    assert_eq!(
        path(&c),
        pts(&[
            &[0, 0],
            &[0, 4],
            &[1, 4],
            &[1, 0],
            &[2, 0],
            &[2, 4],
            &[3, 4],
            &[3, 0]
        ])
    );
    assert_eq!(c.step_between(0, 5).as_slice(), &[2, 4]);

    let c = SpaceFillingCurve::new(&[4, 3], &[0, 1], &[1, 1], true).unwrap();
    assert_eq!(
        path(&c),
        pts(&[
            &[0, 0],
            &[0, 1],
            &[0, 2],
            &[1, 2],
            &[1, 1],
            &[1, 0],
            &[2, 0],
            &[2, 1],
            &[2, 2],
            &[3, 2],
            &[3, 1],
            &[3, 0]
        ])
    );
    let c = SpaceFillingCurve::new(&[4, 3], &[1, 0], &[1, 1], true).unwrap();
    assert_eq!(
        path(&c),
        pts(&[
            &[0, 0],
            &[1, 0],
            &[2, 0],
            &[3, 0],
            &[3, 1],
            &[2, 1],
            &[1, 1],
            &[0, 1],
            &[0, 2],
            &[1, 2],
            &[2, 2],
            &[3, 2]
        ])
    );
}

#[test]
fn tv4_three_dimensional_snakes() {
    let c = SpaceFillingCurve::new(&[2, 2, 3], &[0, 1, 2], &[1, 1, 1], true).unwrap();
    assert_eq!(
        path(&c),
        pts(&[
            &[0, 0, 0],
            &[0, 0, 1],
            &[0, 0, 2],
            &[0, 1, 2],
            &[0, 1, 1],
            &[0, 1, 0],
            &[1, 1, 0],
            &[1, 1, 1],
            &[1, 1, 2],
            &[1, 0, 2],
            &[1, 0, 1],
            &[1, 0, 0]
        ])
    );
    let steps: Vec<Vec<i32>> = (0..11)
        .map(|t| c.forward_step(t).as_slice().to_vec())
        .collect();
    assert_eq!(
        steps,
        pts(&[
            &[0, 0, 1],
            &[0, 0, 1],
            &[0, 1, 0],
            &[0, 0, -1],
            &[0, 0, -1],
            &[1, 0, 0],
            &[0, 0, 1],
            &[0, 0, 1],
            &[0, -1, 0],
            &[0, 0, -1],
            &[0, 0, -1]
        ])
    );
    let c = SpaceFillingCurve::new(&[2, 3, 2], &[2, 0, 1], &[1, 1, 1], true).unwrap();
    assert_eq!(
        path(&c),
        pts(&[
            &[0, 0, 0],
            &[0, 1, 0],
            &[0, 2, 0],
            &[1, 2, 0],
            &[1, 1, 0],
            &[1, 0, 0],
            &[1, 0, 1],
            &[1, 1, 1],
            &[1, 2, 1],
            &[0, 2, 1],
            &[0, 1, 1],
            &[0, 0, 1]
        ])
    );
}

#[test]
fn tv4_non_divisible_lengths_are_rejected() {
    let e = SpaceFillingCurve::new(&[5, 7], &[0, 1], &[2, 3], false).unwrap_err();
    assert_eq!(e.rule.name(), "sfc-not-divisible");
    assert_eq!(e.at, Some(0));
}

fn xor_row(t: &Transform, u0: i32, b: i32) -> Vec<i32> {
    (0..b).map(|u1| t.lower(&d(&[u0, u1])).get(1)).collect()
}

#[test]
fn tv5_xor() {
    let x = Transform::xor(4, 8).unwrap();
    assert_eq!(xor_row(&x, 0, 8), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(xor_row(&x, 1, 8), [1, 0, 3, 2, 5, 4, 7, 6]);
    assert_eq!(xor_row(&x, 2, 8), [2, 3, 0, 1, 6, 7, 4, 5]);
    assert_eq!(xor_row(&x, 3, 8), [3, 2, 1, 0, 7, 6, 5, 4]);
    let x = Transform::xor(16, 8).unwrap();
    assert_eq!(xor_row(&x, 13, 8), [5, 4, 7, 6, 1, 0, 3, 2]);
    // xor(4,6) at u0 = 3 (key 3 % 6 = 3): the raw formula leaves 0..6, so it is refused.
    let (u0, b) = (3, 6);
    let key = u0 % b;
    assert_eq!(
        (0..6).map(|u1| u1 ^ key).collect::<Vec<_>>(),
        [3, 2, 1, 0, 7, 6]
    );
    assert_eq!(
        Transform::xor(4, 6).unwrap_err().rule.name(),
        "xor-not-power-of-two"
    );
}

#[test]
fn tv5_merge_and_magic() {
    let m = Transform::merge(&[4, 5]).unwrap();
    assert_eq!(m.lower(&d(&[13])).as_slice(), &[2, 3]);
    assert_eq!(m.lower(&d(&[19])).as_slice(), &[3, 4]);
    assert_eq!(m.lower(&d(&[23])).as_slice(), &[4, 3]);
    let m = Transform::merge(&[2, 4, 8]).unwrap();
    assert_eq!(m.lower(&d(&[45])).as_slice(), &[1, 1, 5]);
    let expected = [
        (1, 0x1, 0),
        (3, 0x55555556, 2),
        (5, 0x9999999a, 3),
        (7, 0x24924925, 3),
        (12, 0x55555556, 4),
        (48, 0x55555556, 6),
        (100, 0x47ae147b, 7),
    ];
    for (dv, mult, shift) in expected {
        assert_eq!(magic(dv), (mult, shift), "magic({dv})");
        for n in [0u32, 1, 99, 12345, (1 << 31) - 1] {
            assert_eq!(magic_div(n, magic(dv)), n / dv);
        }
    }
    assert_eq!(magic(4), (1, 2));
}

#[test]
fn tv5_linear_transforms_and_pads() {
    let u = Transform::unmerge(&[3, 4, 2]).unwrap();
    assert_eq!(u.lower(&d(&[1, 3, 0])).as_slice(), &[14]);
    let e = Transform::embed(&[2, 3], &[12, 1]).unwrap();
    assert_eq!(e.lower(&d(&[1, 2])).as_slice(), &[14]);
    let p = Transform::pad(3, 1, 1).unwrap();
    assert_eq!(p.up_lengths().as_slice(), &[5]);
    let lows: Vec<i32> = (0..5).map(|u| p.lower(&d(&[u])).get(0)).collect();
    assert_eq!(lows, [-1, 0, 1, 2, 3]);
    let valid: Vec<bool> = (0..5).map(|u| p.valid(&d(&[u]))).collect();
    assert_eq!(valid, [false, true, true, true, false]);
    let r = Transform::right_pad(7, 1).unwrap();
    assert!(r.valid(&d(&[6])));
    assert!(!r.valid(&d(&[7])));
    let s = Transform::slice(10, 3, 8).unwrap();
    let lows: Vec<i32> = (0..5).map(|u| s.lower(&d(&[u])).get(0)).collect();
    assert_eq!(lows, [3, 4, 5, 6, 7]);
    let o = Transform::offset(48, 16).unwrap();
    assert_eq!(o.lower(&d(&[5])).as_slice(), &[21]);
}

fn padded_5x8() -> TensorDescriptor {
    let d0 = TensorDescriptor::naive(&[5, 7], &[8, 1], 4, 1).unwrap();
    d0.transform(
        &[
            Transform::pass_through(5).unwrap(),
            Transform::right_pad(7, 1).unwrap(),
        ],
        &[&[0], &[1]],
        &[&[0], &[1]],
    )
    .unwrap()
}

#[test]
fn tv6_descriptor_and_movement() {
    let d0 = TensorDescriptor::naive(&[5, 7], &[8, 1], 4, 1).unwrap();
    assert_eq!(d0.element_space_size(), 39);
    let d1 = padded_5x8();
    assert_eq!(d1.lengths().as_slice(), &[5, 8]);
    let (vl, vs) = d1.top_safe_vector();
    assert_eq!(vl.as_slice(), &[-1, 4]);
    assert_eq!(vs.as_slice(), &[-1, 1]);

    let a = d1.adaptor();
    let mut c = Coordinate::new(a, &d(&[2, 5]));
    assert_eq!(d1.offset(&c), 21);
    assert!(a.is_valid_assuming_top_valid(&c));
    assert_eq!(a.move_coordinate(&mut c, &d(&[1, 2])).as_slice(), &[10]);
    assert_eq!(c.top_index(a).as_slice(), &[3, 7]);
    assert_eq!(d1.offset(&c), 31);
    assert!(!a.is_valid_assuming_top_valid(&c));
    assert_eq!(a.move_coordinate(&mut c, &d(&[0, -3])).as_slice(), &[-3]);
    assert_eq!(c.top_index(a).as_slice(), &[3, 4]);
    assert_eq!(d1.offset(&c), 28);
    assert!(a.is_valid_assuming_top_valid(&c));
}

#[test]
fn tv6_merged_view() {
    let d0 = TensorDescriptor::naive(&[5, 7], &[8, 1], -1, -1).unwrap();
    let m = d0
        .transform(&[Transform::merge(&[5, 7]).unwrap()], &[&[0, 1]], &[&[0]])
        .unwrap();
    let mut c = Coordinate::new(m.adaptor(), &d(&[16]));
    assert_eq!(m.offset(&c), 18);
    assert_eq!(
        m.adaptor().move_coordinate(&mut c, &d(&[5])).as_slice(),
        &[6]
    );
    assert_eq!(m.offset(&c), 24);
}
