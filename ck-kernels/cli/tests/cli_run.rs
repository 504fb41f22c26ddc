//! `ck run` end to end: the command reads its .npy inputs, runs the kernel on the emulator and
//! writes or prints what the library's launch gives (the kernels themselves are checked against
//! their references in ck-kernels' tests).

use ck_cli::npy::{read, write, Array};
use ck_core::device::{Bf16, Real};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::gemm::fused::reference;
use ck_kernels::gemm::mma_sync::host::reference as product;

/// Writes an array of `shape` of random values to the .npy file `path`; returns the values.
fn save_random(path: &str, shape: Vec<usize>, rng: &mut Rng) -> Vec<f32> {
    let data: Vec<f32> = (0..shape.iter().product()).map(|_| rng.f32()).collect();
    let array = Array {
        shape,
        data: data.clone(),
    };
    write(path, &array).unwrap();
    data
}

fn round<O: Real>(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| O::from_f32(x).to_f32()).collect()
}

#[test]
fn ck_run_bank_probe_prints_the_counters() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "bank-probe",
            "--stride",
            "2",
            "--width",
            "8",
            "--backend",
            "emu",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Stride 2 of 8-byte words: a phase is 16 lanes, lane l writes words 4l and 4l + 1, so
    // lanes l and l + 8 meet in a bank: 2 wavefronts per phase, 2 phases per warp, 4 warps.
    let (wavefronts, phases) = (16, 8);
    assert_eq!(v["shared_load_wavefronts"], wavefronts);
    assert_eq!(v["shared_load_conflicts"], wavefronts - phases);
    assert_eq!(v["shared_store_wavefronts"], wavefronts);
    assert_eq!(v["shared_store_conflicts"], wavefronts - phases);
    assert_eq!(v["global_load_sectors"], 0);
    assert_eq!(v["global_store_sectors"], 32);
    for (args, rule) in [
        (
            &["run", "bank-probe", "--stride", "2", "--width", "12"][..],
            "error[probe-parameters]: ",
        ),
        (
            &["run", "bank-probe", "--stride", "2"][..],
            "error[usage]: ",
        ),
        (
            &[
                "run",
                "bank-probe",
                "--stride",
                "2",
                "--width",
                "4",
                "--backend",
                "tpu",
            ][..],
            "error[backend]: ",
        ),
        (&["run", "nope"][..], "error[usage]: "),
        (
            &["run", "rmsnorm-bf16", "--n", "4294967296"][..],
            "error[usage]: --n: 4294967296 is out of range; give 0 to 4294967295",
        ),
        (
            &["run", "reverse", "--seed", "-1"][..],
            "error[usage]: --seed: `-1` is not a whole number",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with(rule),
            "{args:?}"
        );
    }
}

#[test]
fn the_swizzled_layouts_cut_the_gemm_bank_conflicts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(["run", "gemm-lds", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let get = |i: usize, k: &str| rows[i][k].as_u64().unwrap();
    assert_eq!(rows[0]["case"], "gemm xor");
    // Same fragments, fewer conflicts: A's ldmatrix rows are 2-way in TV8's layout (4-way
    // plain), B's ldmatrix.trans rows conflict-free (8-way plain); stores conflict-free in both.
    assert!(get(0, "shared_load_conflicts") * 4 < get(1, "shared_load_conflicts"));
    assert_eq!(get(0, "shared_store_conflicts"), 0);
}

#[test]
fn ck_run_gemm_applies_the_epilogue_and_writes_bf16_c() {
    let dir = std::env::temp_dir().join(format!("ck-gemm-fused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let mut rng = Rng(41);
    let (m, n, k) = (70u32, 136u32, 48u32);
    let mut save = |f: &str, shape: Vec<usize>| save_random(&path(f), shape, &mut rng);
    let a = save("a.npy", vec![m as usize, k as usize]);
    let b = save("b.npy", vec![k as usize, n as usize]);
    let bias = save("bias.npy", vec![n as usize]);
    let d = save("d.npy", vec![m as usize, n as usize]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "gemm",
            "--input-a",
            &path("a.npy"),
            "--input-b",
            &path("b.npy"),
        ])
        .args([
            "--output",
            &path("c.npy"),
            "--dtype",
            "bf16",
            "--bias",
            &path("bias.npy"),
        ])
        .args([
            "--residual",
            &path("d.npy"),
            // Negative values as separate words: clap would read `-0.5` as an option.
            "--alpha",
            "-0.5",
            "--beta",
            "-2",
        ])
        .args(["--activation", "silu"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = read(&path("c.npy")).unwrap();
    assert_eq!(c.shape, [m as usize, n as usize]);
    let (a, b) = (round::<Bf16>(&a), round::<Bf16>(&b));
    let (d, bias) = (round::<Bf16>(&d), round::<Bf16>(&bias));
    let want = reference(
        &product(&a, &b, (m, n, k)),
        (m, n),
        (-0.5, -2.0),
        (Some(&d), Some(&bias)),
        Activation::Silu,
    );
    let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
    for (&g, &w) in c.data.iter().zip(&want) {
        assert!(
            (g as f64 - w).abs() <= w.abs() * 2f64.powi(-8) + 1e-5 * scale,
            "{g} vs {w}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ck run linear` comes from the operator's description: x of any leading dims, the weight as
/// nn.Linear keeps it, the epilogue's optional tensors, a choice by name, a negative scale.
#[test]
fn ck_run_linear_reads_the_weight_as_nn_linear_keeps_it() {
    let dir = std::env::temp_dir().join(format!("ck-linear-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let mut rng = Rng(43);
    let (lead, n, k) = ([2usize, 5], 24usize, 40usize);
    let mut save = |f: &str, shape: Vec<usize>| save_random(&path(f), shape, &mut rng);
    let x = save("x.npy", vec![lead[0], lead[1], k]);
    let w = save("w.npy", vec![n, k]);
    let bias = save("bias.npy", vec![n]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "linear",
            "--x",
            &path("x.npy"),
            "--weight",
            &path("w.npy"),
        ])
        .args(["--bias", &path("bias.npy"), "--output", &path("c.npy")])
        .args(["--alpha", "-2", "--activation", "relu"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("activation relu"), "{stdout}");
    let c = read(&path("c.npy")).unwrap();
    assert_eq!(c.shape, [2, 5, n]);
    // relu(−2 · x·Wᵀ + bias) in fp64 on the bf16 operands; C f32.
    let (x, w) = (round::<Bf16>(&x), round::<Bf16>(&w));
    for (i, &got) in c.data.iter().enumerate() {
        let (row, col) = (i / n, i % n);
        let dot: f64 = (0..k)
            .map(|t| x[row * k + t] as f64 * w[col * k + t] as f64)
            .sum();
        let want = (-2.0 * dot + bias[col] as f64).max(0.0);
        assert!(
            (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{i}: {got} vs {want}"
        );
    }
    // The weight given as (K, N) is refused with the layout it must have.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "linear",
            "--x",
            &path("x.npy"),
            "--weight",
            &path("bias.npy"),
        ])
        .args(["--output", &path("c.npy")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("[out_features, in_features]"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ck run attention-varlen`: the bounds come as a float .npy of whole numbers; with Q all 0
/// every key of a sequence weighs the same, so O is the mean of that sequence's values.
#[test]
fn ck_run_attention_varlen_keeps_each_sequence_to_its_keys() {
    let dir = std::env::temp_dir().join(format!("ck-varlen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let save = |f: &str, shape: Vec<usize>, data: Vec<f32>| {
        write(&path(f), &Array { shape, data }).unwrap();
    };
    // Two sequences: queries rows 0..2 and 2..3; keys rows 0..2 (values 1, 3) and 2..5 (all 5).
    save("q.npy", vec![3, 1, 64], vec![0.0; 3 * 64]);
    save("k.npy", vec![5, 1, 64], vec![0.0; 5 * 64]);
    let v: Vec<f32> = [1.0, 3.0, 5.0, 5.0, 5.0]
        .iter()
        .flat_map(|&x| [x; 64])
        .collect();
    save("v.npy", vec![5, 1, 64], v);
    save("cq.npy", vec![3], vec![0.0, 2.0, 3.0]);
    save("ck.npy", vec![3], vec![0.0, 2.0, 5.0]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "attention-varlen",
            "--q",
            &path("q.npy"),
            "--k",
            &path("k.npy"),
        ])
        .args(["--v", &path("v.npy"), "--cu-seqlens-q", &path("cq.npy")])
        .args(["--cu-seqlens-k", &path("ck.npy"), "--max-seqlen-q", "2"])
        .args(["--output", &path("o.npy")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = read(&path("o.npy")).unwrap();
    assert_eq!(o.shape, [3, 1, 64]);
    let first: Vec<f32> = o.data.chunks(64).map(|row| row[0]).collect();
    assert_eq!(first, [2.0, 2.0, 5.0]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ck_run_gemm_batched_runs_each_product() {
    let dir = std::env::temp_dir().join(format!("ck-gemm-batched-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let mut rng = Rng(61);
    let (batch, m, n, k) = (2usize, 9usize, 16usize, 8usize);
    let mut save = |f: &str, shape: Vec<usize>| save_random(&path(f), shape, &mut rng);
    let a = round::<Bf16>(&save("a.npy", vec![batch, m, k]));
    let b = round::<Bf16>(&save("b.npy", vec![batch, k, n]));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "gemm-batched",
            "--input-a",
            &path("a.npy"),
            "--input-b",
            &path("b.npy"),
        ])
        .args(["--output", &path("c.npy")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = read(&path("c.npy")).unwrap();
    assert_eq!(c.shape, [batch, m, n]);
    for p in 0..batch {
        let want = product(
            &a[p * m * k..][..m * k],
            &b[p * k * n..][..k * n],
            (9, 16, 8),
        );
        for (&g, &w) in c.data[p * m * n..][..m * n].iter().zip(&want) {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "product {p}: {g} vs {w}"
            );
        }
    }
    // Batches must agree.
    write(
        &path("b1.npy"),
        &Array {
            shape: vec![1, k, n],
            data: b[..k * n].to_vec(),
        },
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "run",
            "gemm-batched",
            "--input-a",
            &path("a.npy"),
            "--input-b",
            &path("b1.npy"),
        ])
        .args(["--output", &path("c.npy")])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("error[shape-mismatch]"));
    std::fs::remove_dir_all(&dir).unwrap();
}
