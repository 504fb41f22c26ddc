//! `ck run rmsnorm` (and `ck run attention`, the flags of a description) with `.npy` files:
//! results against an fp64 reference, and every bad input a clear `error[rule]` with exit
//! status 1. The `.npy` bytes are built here from the format's
//! definition (magic, version, little-endian header length, a Python-dict header padded to 64).

use ck_cli::npy;
use std::process::Command;

fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn ck(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn rmsnorm_through_npy_files() {
    let dir = std::env::temp_dir().join(format!("ck-rmsnorm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let (m, n) = (3usize, 1000usize);
    let x: Vec<f32> = (0..m * n)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let g: Vec<f32> = (0..n).map(|j| 0.5 + (j % 13) as f32 / 10.0).collect();
    std::fs::write(
        p("x.npy"),
        npy_bytes("<f4", &format!("({m}, {n})"), &f32_bytes(&x)),
    )
    .unwrap();
    std::fs::write(
        p("g.npy"),
        npy_bytes("<f4", &format!("({n},)"), &f32_bytes(&g)),
    )
    .unwrap();
    for dtype in ["f32", "bf16"] {
        let (code, err) = ck(&[
            "run",
            "rmsnorm",
            "--input",
            &p("x.npy"),
            "--gamma",
            &p("g.npy"),
            "--output",
            &p("y.npy"),
            "--dtype",
            dtype,
        ]);
        assert_eq!(code, 0, "{err}");
        let y = npy::read(&p("y.npy")).unwrap();
        assert_eq!(y.shape, [m, n]);
        let round = |v: f32| {
            if dtype == "bf16" {
                ck_core::device::Bf16::from_f32(v).to_f32()
            } else {
                v
            }
        };
        for i in 0..m {
            let row: Vec<f64> = x[i * n..(i + 1) * n]
                .iter()
                .map(|&v| round(v) as f64)
                .collect();
            let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + 1e-6).sqrt();
            for j in 0..n {
                let want = row[j] * r * round(g[j]) as f64;
                let tol = if dtype == "bf16" { 1e-2 } else { 1e-5 };
                assert!(
                    (y.data[i * n + j] as f64 - want).abs() <= tol * want.abs().max(1e-3),
                    "{dtype} ({i},{j})"
                );
            }
        }
    }
    // Bad inputs.
    std::fs::write(p("d.npy"), npy_bytes("<f8", "(2, 2)", &[0u8; 32])).unwrap();
    std::fs::write(p("short.npy"), npy_bytes("<f4", "(2, 2)", &[0u8; 12])).unwrap();
    std::fs::write(p("junk.npy"), b"hello").unwrap();
    let cases: [(&[&str], &str); 7] = [
        (
            &["--input", &p("d.npy"), "--gamma", &p("g.npy")],
            "error[npy]: ",
        ),
        (
            &["--input", &p("short.npy"), "--gamma", &p("g.npy")],
            "error[npy]: ",
        ),
        (
            &["--input", &p("junk.npy"), "--gamma", &p("g.npy")],
            "error[npy]: ",
        ),
        (
            &[
                "--input",
                &p("x.npy"),
                "--gamma",
                &p("g.npy"),
                "--eps",
                "-1",
            ],
            "error[bad-eps]: ",
        ),
        (
            &["--input", &p("x.npy"), "--gamma", &p("x.npy")],
            "error[shape-mismatch]: ",
        ),
        (
            &[
                "--input",
                &p("x.npy"),
                "--gamma",
                &p("g.npy"),
                "--dtype",
                "f16",
            ],
            "error[dtype]: ",
        ),
        (
            &["--input", &p("missing.npy"), "--gamma", &p("g.npy")],
            "error[npy]: ",
        ),
    ];
    let out = p("o.npy");
    for (extra, prefix) in cases {
        let mut args = vec!["run", "rmsnorm", "--output", out.as_str()];
        args.extend_from_slice(extra);
        let (code, err) = ck(&args);
        assert_eq!(code, 1, "{extra:?}");
        assert!(err.starts_with(prefix), "{extra:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn npy_round_trip() {
    let a = npy::Array {
        shape: vec![2, 3],
        data: vec![1.0, -2.5, 3.25, 0.0, 1e-8, f32::MAX],
    };
    let path = std::env::temp_dir().join(format!("ck-npy-{}.npy", std::process::id()));
    npy::write(path.to_str().unwrap(), &a).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    assert_eq!(
        (10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64,
        0,
        "header padded to 64 bytes"
    );
    assert_eq!(npy::parse(&bytes).unwrap(), a);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn layernorm_through_npy_files_with_statistics() {
    let dir = std::env::temp_dir().join(format!("ck-layernorm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let (m, n) = (5usize, 300usize);
    let x: Vec<f32> = (0..m * n)
        .map(|i| 3.0 + ((i * 7919) % 1000) as f32 / 250.0)
        .collect();
    let g: Vec<f32> = (0..n).map(|j| 0.5 + (j % 13) as f32 / 10.0).collect();
    let b: Vec<f32> = (0..n).map(|j| (j % 7) as f32 / 7.0 - 0.5).collect();
    let write = |f: &str, shape: String, v: &[f32]| {
        std::fs::write(p(f), npy_bytes("<f4", &shape, &f32_bytes(v))).unwrap()
    };
    write("x.npy", format!("({m}, {n})"), &x);
    write("g.npy", format!("({n},)"), &g);
    write("b.npy", format!("({n},)"), &b);
    let (code, err) = ck(&[
        "run",
        "layernorm",
        "--input",
        &p("x.npy"),
        "--gamma",
        &p("g.npy"),
        "--beta",
        &p("b.npy"),
        "--output",
        &p("y.npy"),
        "--mean-out",
        &p("mean.npy"),
        "--rstd-out",
        &p("rstd.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let (y, mean, rstd) = (
        npy::read(&p("y.npy")).unwrap(),
        npy::read(&p("mean.npy")).unwrap(),
        npy::read(&p("rstd.npy")).unwrap(),
    );
    assert_eq!(
        (y.shape.clone(), mean.shape.clone(), rstd.shape.clone()),
        (vec![m, n], vec![m], vec![m])
    );
    for i in 0..m {
        let row: Vec<f64> = x[i * n..(i + 1) * n].iter().map(|&v| v as f64).collect();
        let mu = row.iter().sum::<f64>() / n as f64;
        let r = 1.0 / (row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / n as f64 + 1e-5).sqrt();
        assert!((mean.data[i] as f64 - mu).abs() <= 1e-6 * mu, "mean {i}");
        assert!((rstd.data[i] as f64 - r).abs() <= 1e-5 * r, "rstd {i}");
        for j in 0..n {
            let t = (row[j] - mu) * r * g[j] as f64;
            let want = t + b[j] as f64;
            let tol = 1e-5 * (t.abs() + (b[j] as f64).abs());
            assert!((y.data[i * n + j] as f64 - want).abs() <= tol, "({i},{j})");
        }
    }
    // A beta of the wrong length.
    write("b.npy", format!("({},)", n + 1), &vec![0.0; n + 1]);
    let (code, err) = ck(&[
        "run",
        "layernorm",
        "--input",
        &p("x.npy"),
        "--gamma",
        &p("g.npy"),
        "--beta",
        &p("b.npy"),
        "--output",
        &p("y.npy"),
    ]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error[shape-mismatch]: "), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two query heads on one key/value head, two tokens, D 64, causal, O written `[B, Sq, H, D]`.
/// Head 0's queries are 0 (every visible key scores 0), head 1's are 1 (key 0, all ones, scores
/// 64/8 = 8; key 1, zeros, 0); values all 1 and all 3. Row 0 sees key 0 only: O = 1, LSE 0 and
/// 8. Row 1 sees both: head 0 averages them (O = 2, LSE ln 2), head 1 weights key 0 by
/// e⁸/(e⁸ + 1) (O = 1.00067, 1.0 in bf16; LSE 8 + ln(1 + e⁻⁸) = 8.000335).
#[test]
fn attention_through_npy_files_with_its_flags() {
    let dir = std::env::temp_dir().join(format!("ck-attention-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let q: Vec<f32> = (0..2 * 2 * 64).map(|i| (i >= 128) as u8 as f32).collect();
    let k: Vec<f32> = (0..2 * 64).map(|i| (i < 64) as u8 as f32).collect();
    let v: Vec<f32> = (0..2 * 64)
        .map(|i| if i < 64 { 1.0 } else { 3.0 })
        .collect();
    for (name, shape, data) in [("q", "(1, 2, 2, 64)", &q), ("k", "(1, 1, 2, 64)", &k)] {
        std::fs::write(
            p(&format!("{name}.npy")),
            npy_bytes("<f4", shape, &f32_bytes(data)),
        )
        .unwrap();
    }
    std::fs::write(
        p("v.npy"),
        npy_bytes("<f4", "(1, 1, 2, 64)", &f32_bytes(&v)),
    )
    .unwrap();
    // `ck run attention` on `q.npy` and the files `(k, v)`, writing O, with `extra` options.
    let attention = |(k, v): (&str, &str), extra: &[&str]| {
        let (q, k, v, o) = (p("q.npy"), p(k), p(v), p("o.npy"));
        let args = [
            "run",
            "attention",
            "--q",
            &q,
            "--k",
            &k,
            "--v",
            &v,
            "--output",
            &o,
        ];
        ck(&[&args[..], extra].concat())
    };
    let flags = ["--lse", &p("l.npy"), "--causal", "--o-seq-first"];
    let (code, stderr) = attention(("k.npy", "v.npy"), &flags);
    assert_eq!(code, 0, "{stderr}");
    let o = npy::read(&p("o.npy")).unwrap();
    assert_eq!(o.shape, [1, 2, 2, 64]); // [B, Sq, H, D]
    let firsts: Vec<f32> = o.data.chunks(64).map(|row| row[0]).collect();
    assert_eq!(firsts, [1.0, 1.0, 2.0, 1.0]); // (s0 h0, s0 h1, s1 h0, s1 h1)
    let lse = npy::read(&p("l.npy")).unwrap();
    let want = [0.0, std::f32::consts::LN_2, 8.0, 8.000_335];
    for (got, want) in lse.data.iter().zip(want) {
        assert!((got - want).abs() < 1e-3, "{:?}", lse.data);
    }
    // A key/value head count that does not divide the query heads: the description's constraint.
    std::fs::write(
        p("k3.npy"),
        npy_bytes("<f4", "(1, 3, 1, 64)", &[0; 3 * 64 * 4]),
    )
    .unwrap();
    let (code, stderr) = attention(("k3.npy", "k3.npy"), &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("error[gqa-heads]"), "{stderr}");
}
