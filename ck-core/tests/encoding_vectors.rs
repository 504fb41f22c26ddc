#![allow(clippy::type_complexity)] // table-driven tests: rows of tuples read best inline
//! Spec vectors TV1, TV1b, TV1c, TV2, TV2b, TV3 and TV9 against the ck-core encoding model.
//! Every expected value is copied from the spec (§13), which took it from an independent model.

use ck_core::encoding::{Checks, Encoding, UncheckedEncoding, Violation};
use ck_core::Dims;

fn d(s: &[i32]) -> Dims {
    Dims::from_slice(s)
}

fn rmsnorm_x(h0: &[i32], h1: &[i32]) -> Encoding {
    Encoding::new(
        &[],
        &[h0, h1],
        &[&[1, 2], &[1, 2]],
        &[&[1, 1], &[2, 2]],
        &[1, 1, 2, 2],
        &[0, 3, 0, 3],
    )
    .unwrap()
}

/// `(warp, lane, y) -> x` through the model, with `P = partition_index(warp·W + lane)`.
fn x_of(e: &Encoding, w: u32, warp: u32, lane: u32, y: &[i32]) -> Vec<i32> {
    let p = e.partition_index(warp * w + lane, w);
    assert_eq!(p.as_slice(), &[warp as i32, lane as i32]);
    let x = e.x_index(&p, &d(y));
    assert_eq!(
        x,
        e.x_index_closed_form(&p, &d(y)),
        "closed form vs adaptor"
    );
    x.as_slice().to_vec()
}

fn errors(e: &UncheckedEncoding, c: &Checks) -> Vec<Violation> {
    e.errors(c).iter().copied().collect()
}

fn rule_names(e: &UncheckedEncoding, c: &Checks) -> Vec<&'static str> {
    errors(e, c).iter().map(|v| v.rule.name()).collect()
}

#[test]
fn tv1_rmsnorm_wave64() {
    let e = rmsnorm_x(&[2, 2, 4, 1], &[2, 2, 16, 8]);
    assert!(errors(&e.unchecked(), &Checks::warp(64).block(256)).is_empty());
    assert_eq!(e.x_lengths().as_slice(), &[16, 512]);
    assert_eq!(e.y_lengths().as_slice(), &[2, 1, 2, 8]);
    assert_eq!(e.thread_buffer_size(), 32);
    assert_eq!(e.block_size(), 256);
    // The adaptor's exact hidden-id numbering (spec TV1).
    let a = e.adaptor();
    assert_eq!(a.num_transforms(), 5);
    let ids = |k: usize| {
        (
            a.lower_ids(k).as_slice().to_vec(),
            a.upper_ids(k).as_slice().to_vec(),
        )
    };
    assert_eq!(ids(0), (vec![], vec![]));
    assert_eq!(ids(1), (vec![0], vec![2, 3, 4, 5]));
    assert_eq!(ids(2), (vec![1], vec![6, 7, 8, 9]));
    assert_eq!(ids(3), (vec![3, 7], vec![10]));
    assert_eq!(ids(4), (vec![4, 8], vec![11]));
    assert_eq!(a.bottom_ids().as_slice(), &[0, 1]);
    assert_eq!(a.top_ids().as_slice(), &[10, 11, 2, 5, 6, 9]);
    assert_eq!(e.span(0).as_slice(), &[2, 1]);
    assert_eq!(e.span(1).as_slice(), &[2, 8]);
    assert_eq!(
        (0..4).map(|y| e.y_to_span(y)).collect::<Vec<_>>(),
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    );
    let rows: [(u32, u32, [i32; 4], [i32; 2], i32); 8] = [
        (0, 0, [0, 0, 0, 0], [0, 0], 0),
        (0, 1, [0, 0, 0, 0], [0, 8], 0),
        (0, 15, [0, 0, 0, 7], [0, 127], 7),
        (0, 16, [0, 0, 0, 0], [1, 0], 0),
        (1, 0, [0, 0, 0, 0], [0, 128], 0),
        (2, 0, [0, 0, 0, 0], [4, 0], 0),
        (3, 63, [1, 0, 1, 7], [15, 511], 31),
        (2, 37, [1, 0, 0, 3], [14, 43], 19),
    ];
    for (warp, lane, y, x, dd) in rows {
        assert_eq!(
            x_of(&e, 64, warp, lane, &y),
            x,
            "warp {warp} lane {lane} y {y:?}"
        );
        assert_eq!(e.d_index(&d(&y)), dd);
    }
    // Closed form over all 256 threads x 32 elements, bijective onto 16x512.
    let mut seen = vec![false; 16 * 512];
    for tid in 0..256u32 {
        let (warp, lane) = ((tid / 64) as i32, (tid % 64) as i32);
        for y0 in 0..2 {
            for y3 in 0..8 {
                for y2 in 0..2 {
                    let y = [y0, 0, y2, y3];
                    let x = e.x_index(&e.partition_index(tid, 64), &d(&y));
                    let m = y0 * 8 + (warp / 2) * 4 + lane / 16;
                    let n = y2 * 256 + (warp % 2) * 128 + (lane % 16) * 8 + y3;
                    assert_eq!(x.as_slice(), &[m, n]);
                    assert!(!seen[(m * 512 + n) as usize]);
                    seen[(m * 512 + n) as usize] = true;
                }
            }
        }
    }
    // With W = 32 it must fail: P1 spans 64 lanes.
    assert_eq!(
        rule_names(&e.unchecked(), &Checks::warp(32)),
        ["warp-size-mismatch"]
    );
}

#[test]
fn tv1b_and_tv1c() {
    let e = rmsnorm_x(&[1, 2, 1, 1], &[2, 2, 64, 4]);
    assert!(errors(&e.unchecked(), &Checks::warp(64).block(256)).is_empty());
    assert_eq!(e.x_lengths().as_slice(), &[2, 1024]);
    assert_eq!(x_of(&e, 64, 0, 0, &[0, 0, 0, 0]), [0, 0]);
    assert_eq!(x_of(&e, 64, 1, 0, &[0, 0, 0, 0]), [0, 256]);
    assert_eq!(x_of(&e, 64, 2, 0, &[0, 0, 0, 0]), [1, 0]);
    assert_eq!(x_of(&e, 64, 3, 5, &[0, 0, 1, 2]), [1, 790]);

    let e = rmsnorm_x(&[2, 2, 2, 1], &[2, 2, 16, 8]);
    assert!(errors(&e.unchecked(), &Checks::warp(32).block(128)).is_empty());
    assert_eq!(e.x_lengths().as_slice(), &[8, 512]);
    assert_eq!(x_of(&e, 32, 0, 17, &[0, 0, 0, 0]), [1, 8]);
    assert_eq!(x_of(&e, 32, 3, 31, &[1, 0, 1, 7]), [7, 511]);
}

fn gamma() -> Encoding {
    Encoding::new(
        &[2, 4],
        &[&[2, 2, 16, 8]],
        &[&[0, 1], &[0, 1]],
        &[&[0, 1], &[1, 2]],
        &[1, 1],
        &[0, 3],
    )
    .unwrap()
}

#[test]
fn tv2_replication() {
    let e = gamma();
    assert!(errors(&e.unchecked(), &Checks::warp(64).block(256)).is_empty());
    assert_eq!(e.x_lengths().as_slice(), &[512]);
    assert_eq!(e.y_lengths().as_slice(), &[2, 8]);
    assert_eq!(
        [
            [e.ps_over_rs_derivative(0, 0), e.ps_over_rs_derivative(0, 1)],
            [e.ps_over_rs_derivative(1, 0), e.ps_over_rs_derivative(1, 1)]
        ],
        [[2, 0], [0, 16]]
    );
    let rows: [(u32, u32, [i32; 2], i32, [i32; 2]); 6] = [
        (0, 0, [0, 0], 0, [0, 0]),
        (2, 0, [0, 0], 0, [1, 0]),
        (0, 16, [0, 0], 0, [0, 1]),
        (0, 48, [0, 0], 0, [0, 3]),
        (1, 5, [1, 3], 427, [0, 0]),
        (3, 21, [1, 3], 427, [1, 1]),
    ];
    for (warp, lane, y, x, rs) in rows {
        assert_eq!(x_of(&e, 64, warp, lane, &y), [x]);
        let p = e.partition_index(warp * 64 + lane, 64);
        assert_eq!(e.rs_index(&p).as_slice(), &rs);
    }
}

#[test]
fn tv2b_reduce() {
    let e = rmsnorm_x(&[2, 2, 4, 1], &[2, 2, 16, 8])
        .reduce(&[1])
        .unwrap();
    let expect = Encoding::new(
        &[2, 16],
        &[&[2, 2, 4, 1]],
        &[&[1, 0], &[1, 0]],
        &[&[1, 0], &[2, 1]],
        &[1, 1],
        &[0, 3],
    )
    .unwrap();
    assert_eq!(e, expect);
    assert!(errors(&e.unchecked(), &Checks::warp(64).block(256)).is_empty());
    let rows: [(u32, u32, [i32; 2], i32, Option<[i32; 2]>); 5] = [
        (0, 0, [1, 0], 8, Some([0, 0])),
        (1, 0, [1, 0], 8, Some([1, 0])),
        (0, 15, [1, 0], 8, Some([0, 15])),
        (0, 16, [1, 0], 9, None),
        (3, 63, [1, 0], 15, Some([1, 15])),
    ];
    for (warp, lane, y, x, rs) in rows {
        assert_eq!(x_of(&e, 64, warp, lane, &y), [x], "w{warp} l{lane}");
        if let Some(rs) = rs {
            let p = e.partition_index(warp * 64 + lane, 64);
            assert_eq!(e.rs_index(&p).as_slice(), &rs);
        }
    }
}

#[test]
fn tv3_rejections() {
    let w64 = Checks::warp(64);
    // docs load_store_traits "RowMajorDist".
    let e = UncheckedEncoding::new(
        &[],
        &[&[2, 2], &[4, 4]],
        &[&[1], &[1]],
        &[&[0], &[0]],
        &[2, 4],
        &[1, 1],
    )
    .unwrap();
    let names = rule_names(&e, &w64);
    assert!(
        names.contains(&"claimed-twice") && names.contains(&"index-out-of-range"),
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "unclaimed").count(),
        2,
        "{names:?}"
    );
    let v = errors(&e, &w64);
    let unclaimed: Vec<_> = v
        .iter()
        .filter(|v| v.rule.name() == "unclaimed")
        .map(|v| v.loc)
        .collect();
    use ck_core::encoding::Loc;
    assert_eq!(unclaimed, [Loc::H(0, 1), Loc::H(1, 0)]);
    // docs tile_window example.
    let e = UncheckedEncoding::new(
        &[],
        &[&[4, 2], &[4, 2]],
        &[&[1], &[1]],
        &[&[0], &[0]],
        &[1, 1],
        &[1, 1],
    )
    .unwrap();
    let v = errors(&e, &w64);
    let claimed: Vec<_> = v
        .iter()
        .filter(|v| v.rule.name() == "claimed-twice")
        .map(|v| v.loc)
        .collect();
    assert_eq!(claimed, [Loc::PMinor(1, 0), Loc::YMinor(1)]);
    let unclaimed: Vec<_> = v
        .iter()
        .filter(|v| v.rule.name() == "unclaimed")
        .map(|v| v.loc)
        .collect();
    assert_eq!(unclaimed, [Loc::H(1, 0), Loc::H(1, 1)]);
    // docs encoding_internals GEMM example: P1 empty, Y1/Y2 collide with P0.
    let e = UncheckedEncoding::new(
        &[],
        &[&[4, 2], &[4, 2]],
        &[&[1, 2], &[]],
        &[&[1, 0], &[]],
        &[1, 1, 2, 2],
        &[0, 1, 0, 1],
    )
    .unwrap();
    let v = errors(&e, &w64);
    assert!(v
        .iter()
        .any(|v| v.rule.name() == "empty-p" && v.loc == Loc::PMajorList(1)));
    let claimed: Vec<_> = v
        .iter()
        .filter(|v| v.rule.name() == "claimed-twice")
        .map(|v| v.loc)
        .collect();
    assert_eq!(claimed, [Loc::YMinor(1), Loc::YMinor(2)]);
    // Y pointing at R.
    let e = UncheckedEncoding::new(&[4], &[&[64]], &[&[1]], &[&[0]], &[0], &[0]).unwrap();
    assert!(rule_names(&e, &w64).contains(&"y-maps-to-r"));
    // Zero length.
    let e = UncheckedEncoding::new(&[], &[&[0, 4]], &[&[1]], &[&[1]], &[1], &[0]).unwrap();
    assert!(rule_names(&e, &w64).contains(&"length-not-positive"));
    // Unclaimed (1,0) of length 4: the C++ pins it to 0 (x(p=1,y=3)=11, x(p=1,y=7)=15).
    let e = UncheckedEncoding::new(&[], &[&[4, 2, 8]], &[&[1]], &[&[1]], &[1], &[2]).unwrap();
    let v = errors(&e, &Checks::warp(64));
    assert_eq!(v[0].rule.name(), "unclaimed");
    assert_eq!(v[0].loc, Loc::H(0, 0));
    let msg = v[0].message(&e);
    assert!(
        msg.as_str().contains("48 of the 64 positions"),
        "{}",
        msg.as_str()
    );
    // C++ would read x(p=1, y=3) = 11 and x(p=1, y=7) = 15, leaving 48 positions untouched;
    // here no `Encoding` exists to derive them from.
    assert_eq!(e.check().unwrap_err().rule.name(), "unclaimed");
    // Minor out of range.
    let e = UncheckedEncoding::new(&[], &[&[4, 16]], &[&[1]], &[&[2]], &[1], &[0]).unwrap();
    let v = errors(&e, &w64);
    assert_eq!(v[0].rule.name(), "index-out-of-range");
    assert_eq!(v[0].loc, Loc::PMinor(0, 0));
    // docs tile_distribution 2x2 example on 64-lane waves: P1 = (2,0) of length 2, launched
    // with 128 threads. As written its lane dim is a lane group of 2 lanes (2 groups: a block of
    // 4 threads), so the docs' 128 threads are the error; CK's hardware partition index
    // ([0, lane]) sends lane 5 outside the 4x4 tile.
    let e = Encoding::new(
        &[],
        &[&[2, 2], &[2, 2]],
        &[&[1], &[2]],
        &[&[0], &[0]],
        &[1, 2],
        &[1, 1],
    )
    .unwrap();
    assert_eq!(
        rule_names(&e.unchecked(), &Checks::warp(64).block(128)),
        ["block-size-mismatch"]
    );
    assert!(errors(&e.unchecked(), &Checks::warp(64).block(4)).is_empty());
    assert_eq!(e.x_index(&d(&[0, 5]), &d(&[0, 0])).as_slice(), &[0, 10]);
    // A lane dim of 3 lanes divides no warp.
    let e = Encoding::new(
        &[],
        &[&[2, 2], &[3, 2]],
        &[&[1], &[2]],
        &[&[0], &[0]],
        &[1, 2],
        &[1, 1],
    )
    .unwrap();
    assert_eq!(
        rule_names(&e.unchecked(), &Checks::warp(64)),
        ["warp-size-mismatch"]
    );
}

#[test]
fn tv9_span_order_versus_d_order() {
    let e = Encoding::new(&[], &[&[4, 16, 2]], &[&[1]], &[&[1]], &[1, 1], &[2, 0]).unwrap();
    assert_eq!(e.span(0).as_slice(), &[4, 2]);
    assert_eq!(e.y_to_span(0), (0, 1));
    assert_eq!(e.y_to_span(1), (0, 0));
    let rows = [
        ([0, 0], [0, 0], 0, 6),
        ([0, 1], [1, 0], 4, 7),
        ([1, 0], [0, 1], 1, 38),
        ([1, 1], [1, 1], 5, 39),
        ([2, 0], [0, 2], 2, 70),
        ([2, 1], [1, 2], 6, 71),
        ([3, 0], [0, 3], 3, 102),
        ([3, 1], [1, 3], 7, 103),
    ];
    for (span_idx, y, dd, x) in rows {
        let yy = e.y_from_span_index(&d(&span_idx));
        assert_eq!(yy.as_slice(), &y);
        assert_eq!(e.d_index(&yy), dd);
        assert_eq!(e.x_index(&d(&[3]), &yy).as_slice(), &[x]);
    }
}

#[test]
fn warnings_and_messages() {
    let e = Encoding::new(&[2, 1], &[&[64, 1]], &[&[1]], &[&[0]], &[1], &[1]).unwrap();
    assert!(errors(&e.unchecked(), &Checks::warp(64)).is_empty());
    let w: Vec<_> = e.warnings().iter().map(|v| v.rule.name()).collect();
    assert_eq!(w, ["r-unowned"]);
    let e = Encoding::new(&[], &[&[64, 1, 4]], &[&[1]], &[&[0]], &[1], &[2]).unwrap();
    let w: Vec<_> = e.warnings().iter().map(|v| v.rule.name()).collect();
    assert_eq!(w, ["unclaimed-unit"]);
}

#[test]
fn embed_shuffle_and_slice() {
    // Block level: 4 warps along M (NP = 1: P0 = warp); warp level: 32 lanes x 4-vector.
    let outer = Encoding::new(&[], &[&[4], &[1]], &[&[1]], &[&[0]], &[2], &[0]).unwrap();
    let inner = Encoding::new(
        &[],
        &[&[2, 4], &[8, 4]],
        &[&[1, 2]],
        &[&[1, 0]],
        &[1, 2],
        &[0, 1],
    )
    .unwrap();
    let e = outer.embed(&inner).unwrap();
    let expect = Encoding::new(
        &[],
        &[&[4, 2, 4], &[1, 8, 4]],
        &[&[1], &[1, 2]],
        &[&[0], &[2, 1]],
        &[2, 1, 2],
        &[0, 1, 2],
    )
    .unwrap();
    assert_eq!(e, expect);
    assert!(errors(&e.unchecked(), &Checks::warp(32).block(128)).is_empty());

    let tv1 = rmsnorm_x(&[2, 2, 4, 1], &[2, 2, 16, 8]);
    let s = tv1.shuffle(&[2, 3, 0, 1]).unwrap();
    assert_eq!(s.y_major().as_slice(), &[2, 2, 1, 1]);
    for tid in [0u32, 77, 255] {
        let p = tv1.partition_index(tid, 64);
        assert_eq!(
            tv1.x_index(&p, &d(&[1, 0, 1, 5])),
            s.x_index(&p, &d(&[1, 5, 1, 0]))
        );
    }
    assert!(tv1.shuffle(&[0, 0, 1, 2]).is_err());
    // Slicing X1 (512) to 256 shrinks the Y-claimed repeat digit; to 200 it does not factor;
    // slicing X0 to 8 cuts through nothing, to 4 would shrink the Y digit Rm to... 1 (fine),
    // and to 2 would shrink the P digit Wm.
    let h1 = tv1.slice_x(1, 256).unwrap().h_lengths(1);
    assert_eq!(h1.as_slice(), &[1, 2, 16, 8]);
    assert_eq!(
        tv1.slice_x(1, 200).unwrap_err().rule.name(),
        "slice-not-factor"
    );
    assert_eq!(
        tv1.slice_x(0, 8).unwrap().h_lengths(0).as_slice(),
        &[1, 2, 4, 1]
    );
    assert_eq!(
        tv1.slice_x(0, 2).unwrap_err().rule.name(),
        "slice-through-p"
    );
}
