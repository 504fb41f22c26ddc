//! `ck lds` against spec TV8/TV8b (offsets, patterns) and its error lines.

use serde_json::Value;
use std::process::Command;

fn ck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Value {
    let mut a = vec!["lds"];
    a.extend_from_slice(args);
    a.push("--json");
    let (code, out, err) = ck(&a);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn pattern(v: &Value, name: &str) -> (i64, i64, i64) {
    let p = v["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap();
    (
        p["bytes_per_lane"].as_i64().unwrap(),
        p["wavefronts"].as_i64().unwrap(),
        p["conflicts"].as_i64().unwrap(),
    )
}

#[test]
fn tv8_through_the_command() {
    let base = [
        "--m-per-block",
        "128",
        "--k-per-block",
        "32",
        "--k-pack",
        "8",
        "--elem-bytes",
        "2",
    ];
    let x = json(&base);
    assert_eq!(x["mlds_layer"], 2);
    assert_eq!(x["element_space_size"], 4096);
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
        assert_eq!(x["offsets"][m][k], off, "({m},{k})");
    }
    // 16-byte lanes, 4 phases of 8: TV8's k-read is 2-way in every phase (8 wavefronts), k-write
    // conflict-free; plain k-read 4-way (16).
    assert_eq!(pattern(&x, "k-read"), (16, 8, 4));
    assert_eq!(pattern(&x, "k-write"), (16, 4, 0));
    let mut plain = base.to_vec();
    plain.push("--plain");
    let p = json(&plain);
    assert_eq!(p["offsets"][5][17], 5 * 32 + 17);
    assert_eq!(pattern(&p, "k-read"), (16, 16, 12));
    assert_eq!(pattern(&p, "k-write"), (16, 4, 0));
    // TV8b: M = K = 64, conflict-free xor vs 8-way plain column reads.
    let b = [
        "--m-per-block",
        "64",
        "--k-per-block",
        "64",
        "--k-pack",
        "8",
        "--elem-bytes",
        "2",
    ];
    assert_eq!(pattern(&json(&b), "k-read"), (16, 4, 0));
    let mut bp = b.to_vec();
    bp.push("--plain");
    assert_eq!(pattern(&json(&bp), "k-read"), (16, 32, 28));
}

#[test]
fn bad_layouts_are_rule_errors() {
    for (args, prefix) in [
        (
            &[
                "--m-per-block",
                "128",
                "--k-per-block",
                "30",
                "--k-pack",
                "8",
                "--elem-bytes",
                "2",
            ][..],
            "error[lds-k-pack]: ",
        ),
        (
            &[
                "--m-per-block",
                "130",
                "--k-per-block",
                "32",
                "--k-pack",
                "8",
                "--elem-bytes",
                "2",
                "--mlds-layer",
                "4",
            ][..],
            "error[lds-mlds-layer]: ",
        ),
        (
            &[
                "--m-per-block",
                "96",
                "--k-per-block",
                "24",
                "--k-pack",
                "8",
                "--elem-bytes",
                "2",
                "--mlds-layer",
                "1",
            ][..],
            "error[xor-not-power-of-two]: ",
        ),
        (&["--m-per-block", "96"][..], "error[usage]: "),
    ] {
        let mut a = vec!["lds"];
        a.extend_from_slice(args);
        let (code, _, err) = ck(&a);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.starts_with(prefix), "{args:?}: {err}");
    }
}
