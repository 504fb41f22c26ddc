#![allow(clippy::type_complexity)] // table-driven tests: rows of tuples read best inline
//! `ck encoding` against the CLI contract and the spec vectors (TV1, TV1b, TV1c, TV2, TV2b,
//! TV9, TV3), through files and stdin, in both spellings.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn ck_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(src: &str, map: bool) -> Value {
    let mut args = vec!["encoding", "-", "--json"];
    if map {
        args.push("--map");
    }
    let (code, out, err) = ck_stdin(&args, src);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// The map entry of (thread, y).
fn entry<'a>(doc: &'a Value, thread: i64, y: &[i64]) -> &'a Value {
    doc["map"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["thread"] == thread && ints(&e["y"]) == y)
        .unwrap_or_else(|| panic!("no entry for thread {thread} y {y:?}"))
}

const TV1: &str = "tile_distribution! { pub struct RmsX { warp_size: 64, block_size: 256, r: [],
    h: [[2, 2, 4, 1], [2, 2, 16, 8]], p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
    y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3] } }";

#[test]
fn tv1_summary_and_map() {
    let doc = json(TV1, true);
    assert_eq!(ints(&doc["x_lengths"]), [16, 512]);
    assert_eq!(ints(&doc["y_lengths"]), [2, 1, 2, 8]);
    assert_eq!(ints(&doc["r_lengths"]), Vec::<i64>::new());
    assert_eq!(doc["thread_buffer_size"], 32);
    assert_eq!(doc["warp_size"], 64);
    assert_eq!(doc["block_size"], 256);
    assert_eq!(doc["spans"], serde_json::json!([[2, 1], [2, 8]]));
    let map = doc["map"].as_array().unwrap();
    assert_eq!(map.len(), 256 * 32);
    // One entry per thread and Y point, in D order within a thread.
    for (i, e) in map.iter().enumerate() {
        assert_eq!(e["thread"].as_i64().unwrap(), i as i64 / 32);
        assert_eq!(e["d"].as_i64().unwrap(), i as i64 % 32);
    }
    let rows: [(i64, i64, [i64; 4], [i64; 2], i64); 8] = [
        (0, 0, [0, 0, 0, 0], [0, 0], 0),
        (0, 1, [0, 0, 0, 0], [0, 8], 0),
        (0, 15, [0, 0, 0, 7], [0, 127], 7),
        (0, 16, [0, 0, 0, 0], [1, 0], 0),
        (1, 0, [0, 0, 0, 0], [0, 128], 0),
        (2, 0, [0, 0, 0, 0], [4, 0], 0),
        (3, 63, [1, 0, 1, 7], [15, 511], 31),
        (2, 37, [1, 0, 0, 3], [14, 43], 19),
    ];
    for (warp, lane, y, x, d) in rows {
        let e = entry(&doc, warp * 64 + lane, &y);
        assert_eq!(ints(&e["p"]), [warp, lane]);
        assert_eq!(ints(&e["x"]), x);
        assert_eq!(e["d"], d);
    }
}

#[test]
fn tv1b_tv1c_tv2_tv2b() {
    let tv1b = "struct B { warp_size: 64, r: [], h: [[1, 2, 1, 1], [2, 2, 64, 4]],
        p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]], y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3] }";
    let doc = json(tv1b, true);
    assert_eq!(ints(&doc["x_lengths"]), [2, 1024]);
    assert_eq!(ints(&entry(&doc, 64, &[0, 0, 0, 0])["x"]), [0, 256]);
    assert_eq!(ints(&entry(&doc, 128, &[0, 0, 0, 0])["x"]), [1, 0]);
    assert_eq!(ints(&entry(&doc, 3 * 64 + 5, &[0, 0, 1, 2])["x"]), [1, 790]);

    let tv1c = "struct C { warp_size: 32, block_size: 128,
        h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]], y: [m.repeat, m.vec, n.repeat, n.vec] }";
    let doc = json(tv1c, true);
    assert_eq!(ints(&doc["x_lengths"]), [8, 512]);
    assert_eq!(ints(&entry(&doc, 17, &[0, 0, 0, 0])["x"]), [1, 8]);
    assert_eq!(ints(&entry(&doc, 127, &[1, 0, 1, 7])["x"]), [7, 511]);

    let tv2 = "struct G { warp_size: 64, block_size: 256, r: [2, 4], h: [[2, 2, 16, 8]],
        p_major: [[0, 1], [0, 1]], p_minor: [[0, 1], [1, 2]], y_major: [1, 1], y_minor: [0, 3] }";
    let doc = json(tv2, true);
    assert_eq!(ints(&doc["x_lengths"]), [512]);
    assert_eq!(ints(&doc["r_lengths"]), [2, 4]);
    for (warp, lane, y, x, rs) in [
        (0, 0, [0, 0], 0, [0, 0]),
        (2, 0, [0, 0], 0, [1, 0]),
        (0, 16, [0, 0], 0, [0, 1]),
        (0, 48, [0, 0], 0, [0, 3]),
        (1, 5, [1, 3], 427, [0, 0]),
        (3, 21, [1, 3], 427, [1, 1]),
    ] {
        let e = entry(&doc, warp * 64 + lane, &y);
        assert_eq!(ints(&e["x"]), [x]);
        assert_eq!(ints(&e["rs"]), rs);
    }

    let tv2b = "struct R { warp_size: 64, r: [2, 16], h: [[2, 2, 4, 1]],
        p_major: [[1, 0], [1, 0]], p_minor: [[1, 0], [2, 1]], y_major: [1, 1], y_minor: [0, 3] }";
    let doc = json(tv2b, true);
    for (thread, x, rs) in [
        (0, 8, Some([0, 0])),
        (64, 8, Some([1, 0])),
        (15, 8, Some([0, 15])),
        (16, 9, None),
        (255, 15, Some([1, 15])),
    ] {
        let e = entry(&doc, thread, &[1, 0]);
        assert_eq!(ints(&e["x"]), [x]);
        if let Some(rs) = rs {
            assert_eq!(ints(&e["rs"]), rs);
        }
    }
}

#[test]
fn tv9_d_order_and_spans() {
    // TV9's X0 with the 16-lane P widened to a warp of 32 by an extra X1 digit (lane 6 = TV9's 3).
    let src = "struct T { warp_size: 32, r: [], h: [[4, 16, 2], [2]], p_major: [[1, 2]], p_minor: [[1, 0]],
        y_major: [1, 1], y_minor: [2, 0] }";
    let doc = json(src, true);
    assert_eq!(doc["spans"], serde_json::json!([[4, 2], []]));
    let x_of = |y: [i64; 2]| ints(&entry(&doc, 6, &y)["x"])[0];
    let d_of = |y: [i64; 2]| entry(&doc, 6, &y)["d"].as_i64().unwrap();
    for (y, d, x) in [
        ([0, 0], 0, 6),
        ([1, 0], 4, 7),
        ([0, 1], 1, 38),
        ([1, 1], 5, 39),
        ([0, 3], 3, 102),
        ([1, 3], 7, 103),
    ] {
        assert_eq!((d_of(y), x_of(y)), (d, x), "y {y:?}");
    }
}

#[test]
fn tv3_rejections_name_their_rules() {
    let cases: [(&str, &[&str]); 5] = [
        (
            "struct A { warp_size: 64, r: [], h: [[2, 2], [4, 4]], p_major: [[1], [1]], p_minor: [[0], [0]], y_major: [2, 4], y_minor: [1, 1] }",
            &["claimed-twice", "index-out-of-range", "unclaimed"],
        ),
        (
            "struct A { warp_size: 64, r: [], h: [[4, 2], [4, 2]], p_major: [[1], [1]], p_minor: [[0], [0]], y_major: [1, 1], y_minor: [1, 1] }",
            &["claimed-twice", "unclaimed"],
        ),
        ("struct A { warp_size: 64, r: [4], h: [[64]], p_major: [[1]], p_minor: [[0]], y_major: [0], y_minor: [0] }", &["y-maps-to-r"]),
        ("struct A { warp_size: 64, r: [], h: [[0, 4]], p_major: [[1]], p_minor: [[1]], y_major: [1], y_minor: [0] }", &["length-not-positive"]),
        (
            "struct A { warp_size: 64, r: [], h: [[2, 2], [3, 2]], p_major: [[1], [2]], p_minor: [[0], [0]], y_major: [1, 2], y_minor: [1, 1] }",
            &["warp-size-mismatch"],
        ),
    ];
    for (src, rules) in cases {
        let (code, out, err) = ck_stdin(&["encoding", "-"], src);
        assert_eq!(code, 1, "{src}");
        assert!(out.is_empty());
        for rule in rules {
            assert!(
                err.contains(&format!("error[{rule}]: ")),
                "{rule} missing in {err}"
            );
        }
        for line in err.lines() {
            assert!(line.starts_with("error["), "{line}");
            assert!(line.contains("(at -:"), "location missing: {line}");
        }
    }
}

#[test]
fn readable_report_svg_and_bad_input() {
    let (code, out, _) = ck_stdin(&["encoding", "-"], TV1);
    assert_eq!(code, 0);
    assert!(out.contains("X lengths [16, 512]"));
    assert!(
        out.contains("X1 = y2·256 + (p0%2)·128 + (p1%16)·8 + y3"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.contains(": (")).count(),
        256,
        "one row per thread"
    );
    let dir = std::env::temp_dir().join(format!("ck-encoding-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("t.svg");
    let small = "struct S { warp_size: 32, h: { m: [lane: 8, rep: 2], n: [lane: 4, vec: 2] }, p: [[m.lane, n.lane]], y: [m.rep, n.vec] }";
    let (code, _, err) = ck_stdin(&["encoding", "-", "--svg", svg.to_str().unwrap()], small);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    assert_eq!(
        text.matches("<rect").count(),
        16 * 8,
        "one cell per element"
    );
    assert!(!text.contains("stroke=\"red\""), "every element is owned");
    std::fs::remove_dir_all(&dir).unwrap();

    let (code, _, err) = ck_stdin(&["encoding", "/nonexistent/file.rs"], "");
    assert_eq!(code, 1);
    assert!(err.starts_with("error[io]: "));
    let (code, _, err) = ck_stdin(&["encoding", "-"], "struct P<const V: i32> { warp_size: 32, h: [[32, V]], p_major: [[1]], p_minor: [[0]], y_major: [1], y_minor: [1] }");
    assert_eq!(code, 1);
    assert!(err.starts_with("error[parametric-encoding]: "), "{err}");
    let (code, _, err) = ck_stdin(&["encoding", "-"], "struct [ nonsense");
    assert_eq!(code, 1);
    assert!(err.starts_with("error[syntax]: "), "{err}");
}

/// CK's rmsnorm2d 8 × 8-thread X distribution (one 64-lane wave of eight lane groups): the
/// report names the groups, the map puts thread t on row t / 8, columns 8·(t % 8) .. + 8 (spec
/// derivation in `ck_core::encoding`), the SVG outlines each group.
#[test]
fn lane_groups_in_the_report_the_map_and_the_svg() {
    let src = "struct CkRms8x8 { warp_size: 64, block_size: 64, r: [], h: [[1, 8, 1, 1], [1, 1, 8, 8]], \
               p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]], y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3] }";
    let (code, out, err) = ck_stdin(&["encoding", "-"], src);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().next().unwrap().ends_with(
            "64 threads (64 per warp), P = [group, lane] = [tid / 8, tid % 8]: lane groups of 8 lanes, 8 per warp"
        ),
        "{out}"
    );
    let doc = json(src, true);
    assert_eq!(doc["lanes_per_group"], 8);
    for t in [0i64, 7, 8, 19, 63] {
        for v in [0i64, 5] {
            let e = entry(&doc, t, &[0, 0, 0, v]);
            assert_eq!(ints(&e["p"]), [t / 8, t % 8]);
            assert_eq!(ints(&e["x"]), [t / 8, 8 * (t % 8) + v]);
        }
    }
    let dir = std::env::temp_dir().join(format!("ck-encoding-groups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("g.svg");
    let (code, _, err) = ck_stdin(&["encoding", "-", "--svg", svg.to_str().unwrap()], src);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("lane groups of 8 lanes"));
    assert!(text.contains("thread 19 (group 2, lane 3)"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tile far larger than anyone reads (`repeat: 65536` for 2: 134 M elements, which the
/// listing once built whole — tens of GB): the default listing stops at 65536 elements and says
/// so, and a picture or a JSON map of it is refused with the rule.
#[test]
fn an_oversized_tile_is_listed_in_part_and_not_drawn() {
    let huge = "struct Big { warp_size: 32, block_size: 128, \
        h: { m: [repeat: 65536, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] }, \
        p: [[m.warp, n.warp], [m.lane, n.lane]], y: [m.repeat, m.vec, n.repeat, n.vec] }";
    let (code, out, err) = ck_stdin(&["encoding", "-"], huge);
    assert_eq!(code, 0, "{err}");
    // 128 threads × 1048576 elements each; thread 0's row is cut at 65536.
    assert!(
        out.ends_with(
            "… 65536 of the threads' 134217728 elements listed (--map prints every one)\n"
        ),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
    assert_eq!(out.lines().filter(|l| l.contains(": (")).count(), 1);
    assert_eq!(out.matches(") (").count() + 1, 65536);
    let svg = std::env::temp_dir().join(format!("ck-encoding-huge-{}.svg", std::process::id()));
    let svg_args = ["encoding", "-", "--svg", svg.to_str().unwrap()];
    for args in [&svg_args[..], &["encoding", "-", "--json", "--map"]] {
        let (code, _, err) = ck_stdin(args, huge);
        assert_eq!(code, 1);
        assert!(err.starts_with("error[too-large]: "), "{args:?}: {err}");
        assert!(err.contains("134217728 elements"), "{err}");
    }
    assert!(
        !svg.exists(),
        "nothing is written where the picture is refused"
    );
}
