//! Macro-emitted code against the ck-core model at every (thread, Y) point, for fixed encodings
//! in both spellings, warp 32 and 64, with R dims, with NP = 1, with non-power-of-two digits and
//! with const-generic lengths; plus the spec vectors through the macro.

use ck_macros::tile_distribution;
use ck_tests::assert_matches_model;

tile_distribution! {
    /// Spec TV1: RMSNorm X, wave64.
    pub struct Tv1Raw {
        warp_size: 64, block_size: 256, r: [],
        h: [[2, 2, 4, 1], [2, 2, 16, 8]],
        p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3],
    }
}

tile_distribution! {
    pub struct Tv1Named {
        warp_size: 64, block_size: 256, shape: [16, 512],
        h: { m: [repeat: 2, warp: 2, lane: 4, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [m.repeat, m.vec, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// Spec TV1b: the example driver's instance.
    struct Tv1b {
        warp_size: 64, r: [],
        h: [[1, 2, 1, 1], [2, 2, 64, 4]],
        p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3],
    }
}

tile_distribution! {
    /// Spec TV1c: TV1 re-derived for 32-lane warps.
    struct Tv1c {
        warp_size: 32, block_size: 128,
        h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [m.repeat, m.vec, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// Spec TV2: RMSNorm gamma, replicated over M through R.
    struct Tv2Gamma {
        warp_size: 64, block_size: 256,
        r: [2, 4],
        h: [[2, 2, 16, 8]],
        p_major: [[0, 1], [0, 1]], p_minor: [[0, 1], [1, 2]],
        y_major: [1, 1], y_minor: [0, 3],
    }
}

tile_distribution! {
    /// Spec TV2b: TV1 reduced over X1.
    struct Tv2b {
        warp_size: 64,
        r: [2, 16],
        h: [[2, 2, 4, 1]],
        p_major: [[1, 0], [1, 0]], p_minor: [[1, 0], [2, 1]],
        y_major: [1, 1], y_minor: [0, 3],
    }
}

tile_distribution! {
    /// TV9's structure with one P (lanes), re-sized for 32-lane warps.
    struct OneP32 {
        warp_size: 32,
        h: [[4, 32, 2]],
        p_major: [[1]], p_minor: [[1]],
        y_major: [1, 1], y_minor: [2, 0],
    }
}

tile_distribution! {
    struct OneP64Named {
        warp_size: 64, block_size: 64,
        h: { row: [lane: 64, vec: 4] },
        p: [[row.lane]],
        y: [row.vec],
    }
}

tile_distribution! {
    /// Named R: a 1-D vector replicated over 2 warps.
    struct NamedR {
        warp_size: 32, block_size: 128,
        r: [warps_m: 2],
        h: { n: [repeat: 2, warp: 2, lane: 32, vec: 4] },
        p: [[r.warps_m, n.warp], [n.lane]],
        y: [n.repeat, n.vec],
    }
}

tile_distribution! {
    /// Three X dims, lanes spread over all of them.
    struct ThreeD {
        warp_size: 32,
        h: [[2, 4], [2, 4], [2, 4]],
        p_major: [[1, 2], [1, 2, 3]], p_minor: [[0, 0], [1, 1, 0]],
        y_major: [3], y_minor: [1],
    }
}

tile_distribution! {
    /// Non-power-of-two digits: 5 warps, a 3-long repeat (magic-number division).
    struct NonPow2 {
        warp_size: 32, block_size: 160,
        h: [[3, 32], [5, 2]],
        p_major: [[2], [1]], p_minor: [[0], [1]],
        y_major: [1, 2], y_minor: [0, 1],
    }
}

tile_distribution! {
    /// Three-component warp dim with a non-power-of-two middle digit.
    struct MixedWarps {
        warp_size: 32,
        h: [[2, 3, 8], [2, 4, 3]],
        p_major: [[1, 1, 2], [1, 2]], p_minor: [[0, 1, 0], [2, 1]],
        y_major: [2], y_minor: [2],
    }
}

tile_distribution! {
    /// Const-generic vector length: checked and evaluated in const evaluation.
    struct Param<const VEC: i32> {
        warp_size: 32, block_size: 128,
        h: [[2, 2, 2, 1], [2, 2, 16, VEC]],
        p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3],
    }
}

#[test]
fn every_fixed_encoding_matches_the_model_everywhere() {
    assert_matches_model::<Tv1Raw>();
    assert_matches_model::<Tv1Named>();
    assert_matches_model::<Tv1b>();
    assert_matches_model::<Tv1c>();
    assert_matches_model::<Tv2Gamma>();
    assert_matches_model::<Tv2b>();
    assert_matches_model::<OneP32>();
    assert_matches_model::<OneP64Named>();
    assert_matches_model::<NamedR>();
    assert_matches_model::<ThreeD>();
    assert_matches_model::<NonPow2>();
    assert_matches_model::<MixedWarps>();
    assert_matches_model::<Param<8>>();
    assert_matches_model::<Param<4>>();
}

#[test]
fn both_spellings_give_the_same_encoding() {
    assert_eq!(Tv1Raw::ENCODING, Tv1Named::ENCODING);
    assert_eq!(Param::<8>::ENCODING, Tv1c::ENCODING);
    assert_eq!(Param::<8>::X_LENGTHS, [8, 512]);
    assert_eq!(Param::<4>::X_LENGTHS, [8, 256]);
}

#[test]
fn spec_vectors_through_the_macro() {
    // TV1 rows: (warp, lane, y) -> (x, d).
    let tv1 = [
        (0, 0, [0, 0, 0, 0], [0, 0], 0),
        (0, 1, [0, 0, 0, 0], [0, 8], 0),
        (0, 15, [0, 0, 0, 7], [0, 127], 7),
        (0, 16, [0, 0, 0, 0], [1, 0], 0),
        (1, 0, [0, 0, 0, 0], [0, 128], 0),
        (2, 0, [0, 0, 0, 0], [4, 0], 0),
        (3, 63, [1, 0, 1, 7], [15, 511], 31),
        (2, 37, [1, 0, 0, 3], [14, 43], 19),
    ];
    for (warp, lane, y, x, d) in tv1 {
        let p = Tv1Raw::partition_index(warp * 64 + lane);
        assert_eq!(Tv1Raw::x_index(p, y), x);
        assert_eq!(Tv1Named::x_index(p, y), x);
        assert_eq!(Tv1Raw::d_index(y), d);
    }
    assert_eq!(Tv1Raw::Y_LENGTHS, [2, 1, 2, 8]);
    assert_eq!(Tv1Raw::THREAD_BUFFER_SIZE, 32);
    // TV1b, TV1c.
    assert_eq!(Tv1b::X_LENGTHS, [2, 1024]);
    assert_eq!(Tv1b::x_index([1, 0], [0, 0, 0, 0]), [0, 256]);
    assert_eq!(Tv1b::x_index([2, 0], [0, 0, 0, 0]), [1, 0]);
    assert_eq!(Tv1b::x_index([3, 5], [0, 0, 1, 2]), [1, 790]);
    assert_eq!(
        Tv1c::x_index(Tv1c::partition_index(17), [0, 0, 0, 0]),
        [1, 8]
    );
    assert_eq!(
        Tv1c::x_index(Tv1c::partition_index(3 * 32 + 31), [1, 0, 1, 7]),
        [7, 511]
    );
    // TV2: x and rs.
    let tv2 = [
        (0, 0, [0, 0], 0, [0, 0]),
        (2, 0, [0, 0], 0, [1, 0]),
        (0, 16, [0, 0], 0, [0, 1]),
        (0, 48, [0, 0], 0, [0, 3]),
        (1, 5, [1, 3], 427, [0, 0]),
        (3, 21, [1, 3], 427, [1, 1]),
    ];
    for (warp, lane, y, x, rs) in tv2 {
        let p = Tv2Gamma::partition_index(warp * 64 + lane);
        assert_eq!(Tv2Gamma::x_index(p, y), [x]);
        assert_eq!(Tv2Gamma::rs_index(p), rs);
    }
    // TV2b.
    for (warp, lane, x, rs) in [
        (0, 0, 8, [0, 0]),
        (1, 0, 8, [1, 0]),
        (0, 15, 8, [0, 15]),
        (3, 63, 15, [1, 15]),
    ] {
        let p = Tv2b::partition_index(warp * 64 + lane);
        assert_eq!(Tv2b::x_index(p, [1, 0]), [x]);
        assert_eq!(Tv2b::rs_index(p), rs);
    }
    assert_eq!(Tv2b::x_index([0, 16], [1, 0]), [9]);
}

tile_distribution! {
    /// Spec TV9's X0 (a 16-lane P); the P is widened to a 32-lane warp by one extra digit in
    /// X1, so lane 6 here plays TV9's lane 3.
    struct Tv9 {
        warp_size: 32,
        h: [[4, 16, 2], [2]],
        p_major: [[1, 2]], p_minor: [[1, 0]],
        y_major: [1, 1], y_minor: [2, 0],
    }
}

#[test]
fn tv9_sweep_order_through_the_macro() {
    // Lane 3 of TV9 is lane 2·3 = 6 here (the extra X1 digit is the least significant of P0).
    let mut seen = Vec::new();
    Tv9::sweep(|y, d| seen.push((y, d, Tv9::x_index([6], y)[0])));
    let expect = [
        ([0, 0], 0, 6),
        ([1, 0], 4, 7),
        ([0, 1], 1, 38),
        ([1, 1], 5, 39),
        ([0, 2], 2, 70),
        ([1, 2], 6, 71),
        ([0, 3], 3, 102),
        ([1, 3], 7, 103),
    ];
    assert_eq!(seen, expect);
}
