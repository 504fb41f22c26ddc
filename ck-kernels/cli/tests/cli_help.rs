//! `ck --help`, `ck <command> --help` and `ck completions` list every command and kernel that
//! exists; a bad command line is one `error[usage]` line with exit status 1.

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

const COMMANDS: &[&str] = &[
    "encoding",
    "lds",
    "run",
    "bench",
    "cross-check",
    "sfc",
    "new",
    "build-ptx",
    "completions",
];

#[test]
fn help_lists_every_command_and_every_kernel() {
    let (code, out, _) = ck(&["--help"]);
    assert_eq!(code, 0);
    for c in COMMANDS {
        assert!(
            out.contains(&format!("  {c} ")),
            "`{c}` missing from ck --help:\n{out}"
        );
    }
    let (code, out, _) = ck(&["run", "--help"]);
    assert_eq!(code, 0);
    let kernels = ck_kernels::checks::EXERCISES.iter().chain(&[
        "bank-probe",
        "rmsnorm",
        "layernorm",
        "add-rmsnorm",
        "softmax",
        "lds-probe",
        "gemm",
        "gemm-lds",
    ]);
    for k in kernels {
        assert!(
            out.contains(&format!("  {k} ")),
            "`{k}` missing from ck run --help:\n{out}"
        );
    }
    for c in COMMANDS.iter().filter(|c| **c != "run") {
        let (code, out, err) = ck(&[c, "--help"]);
        assert_eq!(code, 0, "ck {c} --help: {err}");
        assert!(out.contains("Usage: ck "), "ck {c} --help:\n{out}");
    }
}

#[test]
fn completions_know_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = ck(&["completions", shell]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("build-ptx") && out.contains("gemm-wgmma-n128"),
            "{shell}"
        );
    }
}

#[test]
fn bad_command_lines_are_one_usage_line() {
    for (args, expected) in [
        (&["frobnicate"][..], "see `ck --help`"),
        (&["run"][..], "see `ck run --help`"),
        (
            &["run", "reverse", "--n"][..],
            "see `ck run reverse --help`",
        ),
        (&["lds", "--m-per-block"][..], "see `ck lds --help`"),
        (&["completions", "tcsh"][..], "see `ck completions --help`"),
        (
            &["encoding"][..],
            "required arguments were not provided: <FILE|->; see `ck encoding --help`",
        ),
    ] {
        let (code, out, err) = ck(args);
        assert_eq!(code, 1, "{args:?}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.starts_with("error[usage]: "), "{args:?}: {err}");
        assert!(err.trim_end().ends_with(expected), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}
