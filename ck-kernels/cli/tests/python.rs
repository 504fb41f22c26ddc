//! Python under `cargo test`: builds the `ck_rs` package (`python/`) into a virtual environment
//! (maturin, the dev profile, its own target directory so it does not wait for this build's
//! lock) and runs its pytest suite (`python/tests`: the operators against fp64 references, bad
//! input, and — where torch is installed — torch tensors and `torch.compile`); then makes a
//! crate with `ck new --python` in a temporary folder, builds its Python module the same way
//! and runs the tests it was generated with (its kernel on numpy arrays, bad input).
//!
//! Skipped, saying why, where the machine has no `python3` with `venv`, or no package index
//! for maturin, numpy and pytest; once those are there, a failing build or test fails.
//! `CK_PYTHON` names another interpreter.
//!
//! A slow tier, left out of `cargo test --workspace` (`#[ignore]`): `.ci/run` runs it after the
//! test command, with `cargo test -p ck-cli --test python --test cli_new -- --ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> Result<String, String> {
    let what = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{what} failed ({}):\n{text}", out.status))
    }
}

/// Adds to a `ck new --python` crate a kernel with a bug — it writes one element past the end
/// of its output — its export, and a test that the emulator's sanitizer reports it as a
/// `KernelFault` naming the rule, the thread and the element.
fn add_faulty_kernel(user: &Path) {
    let append = |file: &str, text: &str| {
        let path = user.join(file);
        let old = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, old + text).unwrap();
    };
    append(
        "src/lib.rs",
        r#"
/// Thread 0 writes element `n` of `y`, one past its end (a bug for the sanitizer to find).
#[tile_kernel(block = 32)]
pub fn off_by_one(y: GlobalMut<f32>, n: u32) {
    if thread_idx() == 0 {
        y.store(n, 1.0);
    }
}
"#,
    );
    let glue = user.join("python/src/lib.rs");
    let text = std::fs::read_to_string(&glue).unwrap().replace(
        "    m.add_function(wrap_pyfunction!(saxpy, m)?)?;",
        "    m.add_function(wrap_pyfunction!(saxpy, m)?)?;\n    m.add_function(wrap_pyfunction!(off_by_one, m)?)?;",
    ) + r#"
#[pyfunction]
fn off_by_one(y: &Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(&[("y", y)])?;
    let n = call.len("y")?;
    let mut yb = call.input::<f32>("y")?;
    launched(kernels::OffByOne::launch(call.device(), LaunchConfig::new(1, 32), &mut yb, n))?;
    call.finish("y", &yb)
}
"#;
    std::fs::write(&glue, text).unwrap();
    std::fs::write(
        user.join("python/tests/test_fault.py"),
        r#"import numpy as np
import pytest

import my_kernels


def test_a_kernel_bug_is_a_kernel_fault():
    with pytest.raises(my_kernels.KernelFault) as e:
        my_kernels.off_by_one(np.zeros(8, np.float32))
    message = str(e.value)
    assert isinstance(e.value, RuntimeError)
    assert message.startswith("error[out-of-bounds]"), message
    assert "thread 0" in message and "element 8" in message, message
"#,
    )
    .unwrap();
}

fn skip(why: &str) {
    eprintln!("skipped: the Python package's tests ({why})");
}

#[test]
#[ignore = "slow tier (minutes: a second build of the workspace into the wheel); .ci/run runs it \
            with `cargo test -p ck-cli --test python --test cli_new -- --ignored`"]
fn python_package() {
    // This crate is `ck-kernels/cli` in the checkout.
    let root = &Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    // Run from outside the checkout, so that `python/ck_rs` (without its native module) is not
    // on the path ahead of the installed package.
    let dir: PathBuf = root.join("target/python-tests");
    let python = std::env::var("CK_PYTHON").unwrap_or_else(|_| "python3".into());
    if run(Command::new(&python).arg("--version")).is_err() {
        return skip(&format!("no `{python}` on this machine"));
    }
    let venv = dir.join("venv");
    let bin = |name: &str| venv.join("bin").join(name);
    if !bin("python").exists() {
        if let Err(e) = run(Command::new(&python).args(["-m", "venv"]).arg(&venv)) {
            return skip(&format!("cannot make a virtual environment: {e}"));
        }
    }
    let tools = ["maturin>=1.9.4,<2", "numpy", "pytest"];
    if let Err(e) = run(Command::new(bin("pip")).args(["install", "-q"]).args(tools)) {
        return skip(&format!("cannot install maturin, numpy and pytest: {e}"));
    }
    run(Command::new(bin("pip"))
        .args(["install", "-q", "--force-reinstall", "--no-deps"])
        .arg(root.join("python"))
        .env("CARGO_TARGET_DIR", dir.join("cargo"))
        .env("MATURIN_PEP517_ARGS", "--profile dev"))
    .unwrap_or_else(|e| panic!("building the package: {e}"));
    let pytest = |tests: &Path| {
        let report = run(Command::new(bin("pytest"))
            .args(["-q", "-p", "no:cacheprovider"])
            .arg(tests)
            .current_dir(&dir))
        .unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{report}");
    };
    pytest(&root.join("python/tests"));

    // A user's crate, outside the workspace.
    let user = dir.join("new/my-kernels");
    let _ = std::fs::remove_dir_all(&user);
    run(Command::new(env!("CARGO_BIN_EXE_ck"))
        .arg("new")
        .arg(&user)
        .arg("--python")
        .arg("--ck-path")
        .arg(root))
    .unwrap_or_else(|e| panic!("{e}"));
    add_faulty_kernel(&user);
    run(Command::new(bin("pip"))
        .args(["install", "-q", "--force-reinstall", "--no-deps"])
        .arg(user.join("python"))
        .env("CARGO_TARGET_DIR", dir.join("cargo"))
        .env("MATURIN_PEP517_ARGS", "--profile dev"))
    .unwrap_or_else(|e| panic!("building the new crate's module: {e}"));
    pytest(&user.join("python/tests"));
}
