//! `ck sfc` against the CLI contract: the spec's TV4 through the binary, an independent reference
//! curve on pseudo-random parameters, and the error lines.

use serde_json::Value;
use std::process::Command;

fn ck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn sfc_json(lengths: &str, order: &str, scalars: &str, snake: bool) -> Value {
    let mut args = vec![
        "sfc",
        "--lengths",
        lengths,
        "--order",
        order,
        "--scalars",
        scalars,
        "--json",
    ];
    if snake {
        args.push("--snake");
    }
    let (code, out, err) = ck(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn ints(v: &Value) -> Vec<Vec<i64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn tv4_through_the_command() {
    let v = sfc_json("2,2,3", "0,1,2", "1,1,1", true);
    assert_eq!(v["num_access"], 12);
    assert_eq!(v["access_lengths"], serde_json::json!([2, 2, 3]));
    assert_eq!(
        ints(&v["indices"]),
        [
            [0, 0, 0],
            [0, 0, 1],
            [0, 0, 2],
            [0, 1, 2],
            [0, 1, 1],
            [0, 1, 0],
            [1, 1, 0],
            [1, 1, 1],
            [1, 1, 2],
            [1, 0, 2],
            [1, 0, 1],
            [1, 0, 0]
        ]
    );
    assert_eq!(
        ints(&v["forward_steps"]),
        [
            [0, 0, 1],
            [0, 0, 1],
            [0, 1, 0],
            [0, 0, -1],
            [0, 0, -1],
            [1, 0, 0],
            [0, 0, 1],
            [0, 0, 1],
            [0, -1, 0],
            [0, 0, -1],
            [0, 0, -1]
        ]
    );
    let v = sfc_json("4,8", "0,1", "1,4", false);
    assert_eq!(v["access_lengths"], serde_json::json!([4, 2]));
    assert_eq!(
        ints(&v["indices"]),
        [
            [0, 0],
            [0, 4],
            [1, 0],
            [1, 4],
            [2, 0],
            [2, 4],
            [3, 0],
            [3, 4]
        ]
    );
}

/// The spec's definition of `get_index`, written independently: digits by successive division,
/// a dim reverses when the un-snaked linear index of the slower dims is odd.
fn reference_index(
    t: i64,
    lengths: &[i64],
    order: &[usize],
    scalars: &[i64],
    snake: bool,
) -> Vec<i64> {
    let b: Vec<i64> = order.iter().map(|&o| lengths[o] / scalars[o]).collect();
    let mut out = vec![0; lengths.len()];
    let mut prefix = 0;
    for k in 0..b.len() {
        let stride: i64 = b[k + 1..].iter().product();
        let c = (t / stride) % b[k];
        let o = if snake && prefix % 2 == 1 {
            b[k] - 1 - c
        } else {
            c
        };
        out[order[k]] = o * scalars[order[k]];
        prefix = prefix * b[k] + c;
    }
    out
}

#[test]
fn random_curves_agree_with_an_independent_reference() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: u64| {
        seed ^= seed << 7;
        seed ^= seed >> 9;
        seed % n
    };
    for _ in 0..40 {
        let ndim = 1 + next(4) as usize;
        let mut lengths = vec![];
        let mut scalars = vec![];
        for _ in 0..ndim {
            let s = 1 + next(4) as i64;
            scalars.push(s);
            lengths.push(s * (1 + next(4) as i64));
        }
        let mut order: Vec<usize> = (0..ndim).collect();
        for i in (1..ndim).rev() {
            order.swap(i, next(i as u64 + 1) as usize);
        }
        let snake = next(2) == 1;
        let join = |v: &[i64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let order_i: Vec<i64> = order.iter().map(|&o| o as i64).collect();
        let v = sfc_json(&join(&lengths), &join(&order_i), &join(&scalars), snake);
        let n: i64 = lengths.iter().zip(&scalars).map(|(l, s)| l / s).product();
        assert_eq!(v["num_access"].as_i64().unwrap(), n);
        let indices = ints(&v["indices"]);
        let steps = ints(&v["forward_steps"]);
        assert_eq!(indices.len() as i64, n);
        assert_eq!(steps.len() as i64, n - 1);
        for t in 0..n {
            let r = reference_index(t, &lengths, &order, &scalars, snake);
            assert_eq!(
                indices[t as usize], r,
                "{lengths:?} {order:?} {scalars:?} {snake} t={t}"
            );
            if t + 1 < n {
                let r1 = reference_index(t + 1, &lengths, &order, &scalars, snake);
                let step: Vec<i64> = r1.iter().zip(&r).map(|(a, b)| a - b).collect();
                assert_eq!(steps[t as usize], step);
            }
        }
    }
}

#[test]
fn errors_name_the_rule_and_exit_1() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["sfc", "--lengths", "5,7", "--scalars", "2,3"],
            "error[sfc-not-divisible]: ",
        ),
        (
            &["sfc", "--lengths", "4,6", "--order", "1,1"],
            "error[sfc-order-not-permutation]: ",
        ),
        (&["sfc", "--lengths", "4,0"], "error[length-not-positive]: "),
        (
            &["sfc", "--lengths", "4,-3"],
            "error[length-not-positive]: ",
        ),
        (
            &["sfc", "--lengths", "4,x"],
            "error[usage]: --lengths: `x` is not an integer; give a comma-separated list",
        ),
        (
            &["sfc", "--lengths", "4,4294967296"],
            "error[usage]: --lengths: 4294967296 is out of range; give at most 2147483647",
        ),
        (&["sfc", "--order", "0"], "error[usage]: "),
    ];
    for (args, prefix) in cases {
        let (code, out, err) = ck(args);
        assert_eq!(code, 1, "{args:?}");
        assert!(out.is_empty());
        assert!(err.starts_with(prefix), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1);
    }
}

#[test]
fn the_readable_table_lists_every_access() {
    let (code, out, _) = ck(&["sfc", "--lengths", "4,3", "--snake"]);
    assert_eq!(code, 0);
    assert!(out.contains("12 accesses"));
    let rows: Vec<&str> = out.lines().skip(3).collect();
    assert_eq!(rows.len(), 12);
    assert!(
        rows[3].contains("[1, 2]") && rows[3].contains("[0, -1]"),
        "{}",
        rows[3]
    );
}
