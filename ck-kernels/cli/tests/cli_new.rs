//! `ck new` makes a kernel crate outside the workspace that tests on the emulator as it is, and
//! `ck build-ptx` builds its PTX module; broken crates get errors that name the rule, the kernel
//! and the fix. The PTX part needs the toolchain that `scripts/build-ptx.sh` installs (CI does);
//! without it that part says it skips.
//!
//! Building the new crate is a slow tier, left out of `cargo test --workspace` (`#[ignore]`):
//! `.ci/run` runs it after the test command, with
//! `cargo test -p ck-cli --test python --test cli_new -- --ignored`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The checkout: this crate is `ck-kernels/cli` in it.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Where the new crate builds: kept between runs (like trybuild's), apart from the workspace's.
fn target_dir() -> PathBuf {
    workspace().join("target/tests/ck-new")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(args)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap()
}

/// The installed PTX toolchain, if any.
fn ptx_tools() -> Option<PathBuf> {
    let tools = std::env::var_os("CK_PTX_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/ptx-tools"));
    tools
        .join("bin/llvm-bitcode-linker")
        .is_file()
        .then_some(tools)
}

fn build_ptx(manifest: &Path, tools: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ck"))
        .args(["build-ptx", "--manifest-path"])
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CK_PTX_TOOLS", tools)
        .output()
        .unwrap()
}

/// A fresh folder outside the workspace.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ck-new-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
#[ignore = "slow tier (builds a crate outside the workspace); .ci/run runs it with \
            `cargo test -p ck-cli --test python --test cli_new -- --ignored`"]
fn a_new_crate_tests_on_the_emulator_and_builds_its_module() {
    let root = scratch("ok");
    let dir = root.join("my-kernels");
    let out = ck(&["new", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    // The workspace's lock file: the same dependency versions, no resolution from scratch.
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    let test = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap();
    let log = text(&test);
    assert!(test.status.success(), "{log}");
    assert!(log.contains("2 passed"), "{log}");

    let Some(tools) = ptx_tools() else {
        eprintln!(
            "skipped the PTX build: no PTX toolchain installed (scripts/build-ptx.sh installs it)"
        );
        std::fs::remove_dir_all(&root).unwrap();
        return;
    };
    let manifest = dir.join("Cargo.toml");
    let out = build_ptx(&manifest, &tools);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("saxpy"),
        "{}",
        text(&out)
    );
    let ptx = std::fs::read_to_string(target_dir().join("ptx/my_kernels.ptx")).unwrap();
    assert!(
        ptx.contains(".visible .entry saxpy("),
        "the module lacks the kernel"
    );
    assert!(
        !ptx.contains("__ck_kernel_info"),
        "the kernel facts were not removed"
    );

    // std inside a kernel: named, with the kernel and the fix.
    let lib = dir.join("src/lib.rs");
    let good = std::fs::read_to_string(&lib).unwrap();
    let with_std = good.replace(
        "    let yt = yw.load::<f32>();",
        "    let yt = yw.load::<f32>();\n    let _scratch: std::vec::Vec<f32> = std::vec::Vec::new();",
    );
    assert_ne!(with_std, good);
    std::fs::write(&lib, &with_std).unwrap();
    let out = build_ptx(&manifest, &tools);
    let log = text(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("error[ptx-uses-std]"), "{log}");
    assert!(log.contains("in kernel `saxpy` (src/lib.rs:"), "{log}");
    assert!(log.contains("use `core::`"), "{log}");

    // A crate that is not no_std on the GPU.
    let not_no_std = good.replace(
        "#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx))]",
        "",
    );
    assert_ne!(not_no_std, good);
    std::fs::write(&lib, &not_no_std).unwrap();
    let out = build_ptx(&manifest, &tools);
    let log = text(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("error[ptx-needs-no-std]"), "{log}");
    assert!(
        log.contains("#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx))]"),
        "{log}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn new_refuses_bad_names_and_folders_in_use() {
    let root = scratch("bad");
    let out = ck(&["new", root.join("9lives").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("error[usage]: `9lives` is not a crate name"),
        "{}",
        text(&out)
    );
    // Names its own test could not `use`: a keyword, a crate every build has, a dependency.
    for (name, why) in [
        ("self", "a Rust keyword"),
        ("async", "a Rust keyword"),
        ("core", "the name of a crate it would build with"),
        ("ck-core", "the name of a crate it would build with"),
    ] {
        let out = ck(&["new", root.join(name).to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out).contains(&format!("error[usage]: `{name}` is {why}")),
            "{}",
            text(&out)
        );
        assert!(!root.join(name).exists());
    }
    std::fs::create_dir_all(root.join("taken")).unwrap();
    std::fs::write(root.join("taken/notes.txt"), "mine").unwrap();
    let out = ck(&["new", root.join("taken").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("error[new-exists]"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("taken/notes.txt")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn build_ptx_errors_name_the_rule() {
    let out = ck(&["build-ptx", "--manifest-path", "/nonexistent/Cargo.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("error[manifest-not-found]"),
        "{}",
        text(&out)
    );
    let out = ck(&["build-ptx", "--arch", "hopper"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("error[usage]: --arch hopper"),
        "{}",
        text(&out)
    );
}
