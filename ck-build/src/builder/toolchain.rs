//! Finding (or installing) a Rust → PTX toolchain and `ptxas`.
//!
//! In order:
//! 1. the project's installer (`ptx-toolchain.sh`, embedded here): Debian's rustc-web 1.96
//!    (LLVM 22) with its core sources, llvm-22, `llvm-bitcode-linker` built from those sources,
//!    and `ptxas` from the `nvidia-cuda-nvcc` wheel, unpacked into `$CK_PTX_TOOLS` (default: the
//!    ck-rs checkout's `target/ptx-tools` where `scripts/build-ptx.sh` installed it, else
//!    `~/.cache/ck-rs/ptx-tools`; nothing outside it changes). Used when installed there, and
//!    installed with `--install-toolchain`;
//! 2. a rustup nightly with the `nvptx64-nvidia-cuda` target and the `llvm-bitcode-linker`
//!    component, with `ptxas` from `$PTXAS`, `PATH` or `/usr/local/cuda/bin`.
//!
//! Neither is `error[no-ptx-toolchain]` with the commands that install one.

use super::BuildError;
use ck_core::rules;
use std::path::{Path, PathBuf};
use std::process::Command;

const INSTALLER: &str = include_str!("../../ptx-toolchain.sh");

/// A toolchain that builds a crate for `nvptx64-nvidia-cuda`.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// The command that runs cargo (`cargo`, or `rustup run nightly cargo`).
    pub cargo: Vec<String>,
    /// Environment of the cargo run (`RUSTC`, `PATH`, the linker, …).
    pub env: Vec<(String, String)>,
    /// Whether `core` must be built from source (`-Z build-std=core`).
    pub build_std: bool,
    /// The `ptxas` to assemble with.
    pub ptxas: PathBuf,
    /// What this is, for the report.
    pub description: String,
}

/// Where the installer puts the tools: `CK_PTX_TOOLS`, else `preferred` (e.g. a checkout's
/// `target/ptx-tools`) where a toolchain is installed there, else `~/.cache/ck-rs/ptx-tools`.
pub fn tools_dir(preferred: Option<&Path>) -> PathBuf {
    if let Some(d) = std::env::var_os("CK_PTX_TOOLS") {
        return PathBuf::from(d);
    }
    if let Some(p) = preferred.filter(|p| installed(p)) {
        return p.to_path_buf();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("ck-rs").join("ptx-tools")
}

fn installed(tools: &Path) -> bool {
    tools.join("root/usr/bin/rustc").is_file() && tools.join("bin/llvm-bitcode-linker").is_file()
}

/// Runs the installer into `tools` (installing what is missing; quick when all is there) and
/// reads the environment it prints.
fn from_installer(tools: &Path, progress: &mut dyn FnMut(&str)) -> Result<Toolchain, BuildError> {
    std::fs::create_dir_all(tools).map_err(|e| {
        BuildError::new(
            rules::NO_PTX_TOOLCHAIN,
            format!("cannot create {}: {e}", tools.display()),
        )
    })?;
    let script = tools.join("ptx-toolchain.sh");
    std::fs::write(&script, INSTALLER).map_err(|e| {
        BuildError::new(
            rules::NO_PTX_TOOLCHAIN,
            format!("cannot write {}: {e}", script.display()),
        )
    })?;
    if !installed(tools) {
        progress(&format!(
            "installing the PTX toolchain into {} (Debian rustc-web 1.96, llvm-22, ptxas; about 1.5 GB, once)",
            tools.display()
        ));
    }
    let out = Command::new("bash")
        .arg(&script)
        .env("CK_PTX_TOOLS", tools)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| BuildError::new(rules::NO_PTX_TOOLCHAIN, format!("cannot run bash: {e}")))?;
    if !out.status.success() {
        return Err(BuildError::new(
            rules::NO_PTX_TOOLCHAIN,
            format!("the PTX toolchain installer failed ({}; its output is above); it needs apt-get (Debian packages) and pip (PyPI)", out.status),
        ));
    }
    let mut env = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((k, v)) = line.strip_prefix("export ").and_then(|l| l.split_once('=')) {
            env.push((k.to_string(), v.to_string()));
        }
    }
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let (Some(linker), Some(ptxas)) = (get("CK_LLVM_BITCODE_LINKER"), get("PTXAS")) else {
        return Err(BuildError::new(
            rules::NO_PTX_TOOLCHAIN,
            "the installer did not report a linker and ptxas".to_string(),
        ));
    };
    env.push((
        "CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER".to_string(),
        linker,
    ));
    Ok(Toolchain {
        cargo: vec![super::cargo()],
        env,
        build_std: true,
        ptxas: PathBuf::from(ptxas),
        description: format!("Debian rustc-web 1.96 + llvm-22 in {}", tools.display()),
    })
}

/// `ptxas` from `$PTXAS`, `PATH` or the CUDA toolkit.
fn system_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/local/cuda/bin")])
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

/// A rustup nightly that has the nvptx64 target, if there is one.
fn rustup_nightly() -> Option<PathBuf> {
    let out = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && sysroot.join("lib/rustlib/nvptx64-nvidia-cuda").is_dir())
        .then_some(sysroot)
}

/// The toolchain to build with (see the module docs); `install` allows running the installer.
pub fn find(
    install: bool,
    preferred: Option<&Path>,
    progress: &mut dyn FnMut(&str),
) -> Result<Toolchain, BuildError> {
    let tools = tools_dir(preferred);
    if installed(&tools) || install {
        return from_installer(&tools, progress);
    }
    if let Some(sysroot) = rustup_nightly() {
        let ptxas = system_ptxas().ok_or_else(|| {
            BuildError::new(
                rules::NO_PTX_TOOLCHAIN,
                "no ptxas: install the CUDA toolkit, or `pip install nvidia-cuda-nvcc` and set PTXAS to its bin/ptxas".to_string(),
            )
        })?;
        return Ok(Toolchain {
            cargo: ["rustup", "run", "nightly", "cargo"]
                .map(String::from)
                .to_vec(),
            env: Vec::new(),
            build_std: false,
            ptxas,
            description: format!("rustup nightly ({})", sysroot.display()),
        });
    }
    Err(BuildError::new(
        rules::NO_PTX_TOOLCHAIN,
        format!(
            "no Rust toolchain for nvptx64-nvidia-cuda; either run `ck build-ptx --install-toolchain` (installs Debian's rustc-web 1.96, llvm-22 and ptxas into {}, about 1.5 GB; nothing outside it changes; set CK_PTX_TOOLS for another folder), or `rustup toolchain install nightly --target nvptx64-nvidia-cuda --component llvm-bitcode-linker --component llvm-tools` with ptxas from the CUDA toolkit",
            tools.display()
        ),
    ))
}
