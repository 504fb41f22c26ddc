//! `ck build-ptx`: a kernel crate → its checked PTX module.
//!
//! 1. `cargo metadata` finds the crate's target directory and library name;
//! 2. the crate is built for `nvptx64-nvidia-cuda` as a `cdylib` (release, fat LTO, one codegen
//!    unit, `panic = "abort"`; `-Z build-std=core` with the installed toolchain) into
//!    `<target>/ptx-build`, apart from host builds; compiler errors are explained
//!    ([`diagnose`]);
//! 3. the kernels' launch bounds are written into the module ([`launch_bounds`]) and the module is
//!    saved as `<target>/ptx/<crate>.ptx`, where launches and `embed_ptx()` look for it;
//! 4. `ptxas -v` assembles it (`<crate>.cubin`, log in `<crate>.ptxas.log`) and its report is
//!    checked ([`ptxas`]): a register spill or a local stack frame is an error (a run-time indexed
//!    register array or an outlined closure put registers in local memory) unless the kernel
//!    declares `min_blocks_per_sm` (an accepted trade for occupancy) or `--allow-spills` is
//!    given; serialised wgmma is always an error, and so is a kernel whose registers times its
//!    block size pass an SM's register file (no launch could start it).

pub mod diagnose;
pub mod launch_bounds;
pub mod ptxas;
pub mod toolchain;

use ck_core::rules::{self, RuleId};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An error for the user: its rule and what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError {
    /// The rule (`no-ptx-toolchain`, `ptx-needs-no-std`, `ptx-spill`, …).
    pub rule: RuleId,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl BuildError {
    /// An error under `rule`.
    pub fn new(rule: RuleId, message: String) -> BuildError {
        BuildError { rule, message }
    }
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

/// What to build.
#[derive(Clone, Debug)]
pub struct Options {
    /// The kernel crate's `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// The GPU architecture (`sm_90a`: wgmma needs the `a`).
    pub arch: String,
    /// Install the project's PTX toolchain if none is found.
    pub install_toolchain: bool,
    /// Report spills and stack frames as warnings instead of errors.
    pub allow_spills: bool,
    /// Where to look for (and install) the toolchain before the default cache folder.
    pub preferred_tools: Option<PathBuf>,
}

/// One kernel of the built module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelReport {
    /// What `#[tile_kernel]` declared.
    pub info: launch_bounds::KernelInfo,
    /// What ptxas made of it.
    pub stats: ptxas::FunctionStats,
}

/// A built module.
#[derive(Clone, Debug)]
pub struct Report {
    /// The crate's name (the module's).
    pub crate_name: String,
    /// The module: `<target>/ptx/<crate>.ptx`.
    pub ptx: PathBuf,
    /// Its kernels, in module order.
    pub kernels: Vec<KernelReport>,
    /// Non-entry functions ptxas reported with a stack frame or spills.
    pub helpers: Vec<ptxas::FunctionStats>,
    /// Accepted problems (spills under launch bounds or `--allow-spills`).
    pub warnings: Vec<String>,
    /// The toolchain used.
    pub toolchain: String,
}

fn run_error(what: &str, e: std::io::Error) -> BuildError {
    BuildError::new(rules::PTX_BUILD, format!("cannot run {what}: {e}"))
}

/// The crate of `manifest`: (library name, target directory, crate folder).
fn locate(manifest: &Path) -> Result<(String, PathBuf, PathBuf), BuildError> {
    if !manifest.is_file() {
        return Err(BuildError::new(
            rules::MANIFEST_NOT_FOUND,
            format!(
                "{} does not exist; pass the kernel crate's Cargo.toml with --manifest-path",
                manifest.display()
            ),
        ));
    }
    let manifest = manifest
        .canonicalize()
        .map_err(|e| run_error("canonicalize", e))?;
    let out = Command::new(cargo())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .map_err(|e| run_error("cargo metadata", e))?;
    if !out.status.success() {
        return Err(BuildError::new(
            rules::MANIFEST_INVALID,
            format!(
                "cargo cannot read {}: {}",
                manifest.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    let meta: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| BuildError::new(rules::MANIFEST_INVALID, format!("cargo metadata: {e}")))?;
    let target = PathBuf::from(meta["target_directory"].as_str().unwrap_or("target"));
    let package = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["manifest_path"].as_str().map(Path::new) == Some(manifest.as_path()))
        .ok_or_else(|| {
            BuildError::new(
                rules::MANIFEST_INVALID,
                format!(
                    "{} is a workspace manifest; pass the kernel crate's own Cargo.toml",
                    manifest.display()
                ),
            )
        })?;
    let lib = package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "lib" || k == "rlib" || k == "cdylib"))
        })
        .and_then(|t| t["name"].as_str())
        .ok_or_else(|| {
            BuildError::new(
                rules::PTX_NO_LIB,
                format!("package `{}` has no library target: kernels live in a library crate (src/lib.rs)", package["name"].as_str().unwrap_or("?")),
            )
        })?;
    let dir = manifest.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok((lib.replace('-', "_"), target, dir))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Builds the crate for nvptx64 and returns the path of the linked PTX.
fn compile(
    opts: &Options,
    tc: &toolchain::Toolchain,
    krate: &str,
    target: &Path,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, BuildError> {
    let mut cmd = Command::new(&tc.cargo[0]);
    cmd.args(&tc.cargo[1..])
        .args([
            "rustc",
            "--lib",
            "--release",
            "--target",
            "nvptx64-nvidia-cuda",
        ])
        .args([
            "--crate-type",
            "cdylib",
            "--message-format",
            "json-diagnostic-rendered-ansi",
        ])
        .arg("--manifest-path")
        .arg(&opts.manifest_path);
    if tc.build_std {
        cmd.args(["-Z", "build-std=core"]);
    }
    // Variables of an enclosing cargo (`cargo run -- build-ptx`, a build script) would leak
    // into this one; the toolchain's own environment comes after.
    for k in [
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("CARGO_TARGET_DIR", target.join("ptx-build"))
        .env(
            "CARGO_TARGET_NVPTX64_NVIDIA_CUDA_RUSTFLAGS",
            format!("-C target-cpu={} -C target-feature=+ptx80", opts.arch),
        )
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .envs(tc.env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    progress(&format!(
        "cargo rustc --target nvptx64-nvidia-cuda ({}, {})",
        opts.arch, tc.description
    ));
    let mut child = cmd.spawn().map_err(|e| run_error("cargo", e))?;
    let stderr = child.stderr.take();
    // Cargo's own errors (a bad manifest, a missing dependency) come on stderr.
    let stderr_text = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = stderr {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    });
    let mut errors = Vec::new();
    let mut ptx = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match msg["reason"].as_str() {
            Some("compiler-message") if msg["message"]["level"] == "error" => {
                let m = &msg["message"];
                let span = m["spans"]
                    .as_array()
                    .and_then(|s| s.iter().find(|s| s["is_primary"] == true));
                errors.push(diagnose::CompilerError {
                    code: m["code"]["code"].as_str().unwrap_or("").to_string(),
                    message: m["message"].as_str().unwrap_or("").to_string(),
                    rendered: strip_ansi(m["rendered"].as_str().unwrap_or("")),
                    at: span.map(|s| {
                        (
                            s["file_name"].as_str().unwrap_or("").to_string(),
                            s["line_start"].as_u64().unwrap_or(0) as usize,
                        )
                    }),
                });
            }
            Some("compiler-artifact") => {
                let files = msg["filenames"].as_array().into_iter().flatten();
                for f in files.filter_map(Value::as_str) {
                    if f.ends_with(".ptx")
                        && msg["target"]["name"].as_str().map(|n| n.replace('-', "_"))
                            == Some(krate.to_string())
                    {
                        ptx = Some(PathBuf::from(f));
                    }
                }
            }
            _ => {}
        }
    }
    let status = child.wait().map_err(|e| run_error("cargo", e))?;
    let stderr_text = stderr_text.join().unwrap_or_default();
    if !errors.is_empty() {
        return Err(diagnose::explain(krate, dir, &errors));
    }
    match ptx {
        Some(p) if status.success() => Ok(p),
        _ => Err(BuildError::new(
            rules::PTX_BUILD,
            format!(
                "building crate `{krate}` for nvptx64-nvidia-cuda failed ({status}):\n{}",
                stderr_text.trim()
            ),
        )),
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `ptx` without its lines that hold only a comment (LLVM's `// %bb.3:` before each basic
/// block, `// -- Begin function`): an eighth of the text, which every binary that embeds the
/// module would carry.
fn without_comment_lines(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.lines() {
        if !line.trim_start().starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Builds, bounds, saves, assembles and checks the module of the crate at `opts.manifest_path`;
/// `progress` gets one line per step.
pub fn build(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report, BuildError> {
    let (krate, target, dir) = locate(&opts.manifest_path)?;
    let tc = toolchain::find(
        opts.install_toolchain,
        opts.preferred_tools.as_deref(),
        progress,
    )?;
    let linked = compile(opts, &tc, &krate, &target, &dir, progress)?;
    let text = std::fs::read_to_string(&linked).map_err(|e| {
        BuildError::new(
            rules::PTX_BUILD,
            format!("cannot read {}: {e}", linked.display()),
        )
    })?;
    let (text, infos) = launch_bounds::extract(&text)?;
    if infos.is_empty() {
        return Err(BuildError::new(
            rules::PTX_NO_KERNELS,
            format!(
                "crate `{krate}` has no #[tile_kernel] functions, so its module would be empty"
            ),
        ));
    }
    let text = without_comment_lines(&launch_bounds::apply(&text, &infos)?);
    let out_dir = target.join("ptx");
    std::fs::create_dir_all(&out_dir).map_err(|e| run_error("mkdir", e))?;
    let ptx = out_dir.join(format!("{krate}.ptx"));
    let tmp = out_dir.join(format!(".{krate}.ptx.tmp"));
    std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::rename(&tmp, &ptx))
        .map_err(|e| run_error("write the module", e))?;

    progress(&format!("ptxas -arch={} -v", opts.arch));
    let out = Command::new(&tc.ptxas)
        .arg(format!("-arch={}", opts.arch))
        .arg("-v")
        .arg(&ptx)
        .arg("-o")
        .arg(out_dir.join(format!("{krate}.cubin")))
        .output()
        .map_err(|e| run_error(&tc.ptxas.display().to_string(), e))?;
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = std::fs::write(out_dir.join(format!("{krate}.ptxas.log")), &log);
    if !out.status.success() {
        return Err(BuildError::new(
            rules::PTXAS,
            format!("ptxas rejected {}:\n{}", ptx.display(), log.trim()),
        ));
    }
    check(opts, krate, ptx, infos, &ptxas::parse(&log), tc.description)
}

/// Joins the declared facts with ptxas's report and applies the rules of the module docs.
fn check(
    opts: &Options,
    crate_name: String,
    ptx: PathBuf,
    infos: Vec<launch_bounds::KernelInfo>,
    stats: &[ptxas::FunctionStats],
    toolchain: String,
) -> Result<Report, BuildError> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut kernels = Vec::new();
    for info in infos {
        let s = stats
            .iter()
            .find(|s| s.name == info.name)
            .cloned()
            .unwrap_or_default();
        if s.wgmma_serialized {
            errors.push(format!("kernel `{}`: ptxas serialised its wgmma instructions (accumulators are read or copied between an MMA and its wgmma_wait); correct but several times slower", info.name));
        }
        if let Some(block) = info.block.filter(|&b| !fits_register_file(s.registers, b)) {
            errors.push(format!(
                "kernel `{}`: {} registers a thread × {block} threads pass the {REGISTER_FILE} registers of an SM: every launch would fail for lack of registers; declare min_blocks_per_sm = 1 (launch bounds: ptxas then keeps to {} a thread) or give it fewer threads",
                info.name,
                s.registers,
                REGISTER_FILE / block / 8 * 8
            ));
        }
        if s.spill_stores + s.stack_frame > 0 {
            let what = format!(
                "kernel `{}`: {} bytes stack frame, {} bytes spill stores at {} registers",
                info.name, s.stack_frame, s.spill_stores, s.registers
            );
            if let Some(k) = info.min_blocks_per_sm {
                warnings.push(format!(
                    "{what} (accepted: launch bounds min_blocks_per_sm = {k})"
                ));
            } else if opts.allow_spills {
                warnings.push(format!("{what} (accepted: --allow-spills)"));
            } else {
                errors.push(format!("{what}: registers went to local memory (a register array indexed at run time, or a closure the compiler did not inline); index with constants (static_for!, unroll) or #[inline(always)], or accept it with min_blocks_per_sm or --allow-spills"));
            }
        }
        kernels.push(KernelReport { info, stats: s });
    }
    let helpers: Vec<_> = stats
        .iter()
        .filter(|s| !s.entry && s.stack_frame + s.spill_stores > 0)
        .cloned()
        .collect();
    for h in &helpers {
        let what = format!(
            "device function `{}` (not inlined): {} bytes stack frame",
            h.name, h.stack_frame
        );
        if opts.allow_spills {
            warnings.push(format!("{what} (accepted: --allow-spills)"));
        } else {
            errors.push(format!("{what}; mark it #[inline(always)]"));
        }
    }
    if let Some(first) = errors.first() {
        let rule = if first.contains("serialised") {
            rules::WGMMA_SERIALIZED
        } else if first.contains("registers of an SM") {
            rules::PTX_REGISTERS
        } else {
            rules::PTX_SPILL
        };
        return Err(BuildError::new(rule, errors.join("\n")));
    }
    Ok(Report {
        crate_name,
        ptx,
        kernels,
        helpers,
        warnings,
        toolchain,
    })
}

/// Registers of an SM (and the most one block may use): 64 K on sm_70 to sm_90.
const REGISTER_FILE: u32 = 65536;

/// Whether a block of `block` threads at `registers` a thread fits an SM's register file: a
/// warp's registers are allocated 256 at a time, 8 a thread.
fn fits_register_file(registers: u32, block: u32) -> bool {
    let warps = block.div_ceil(32);
    registers.next_multiple_of(8) * 32 * warps <= REGISTER_FILE
}

#[cfg(test)]
mod tests {
    use super::{fits_register_file, without_comment_lines};

    /// 65536 registers: 256 threads at up to 255 (248 → 256 a thread, 256 × 256 = 65536), 512
    /// at up to 128, 1024 at up to 64; a warp's share rounds up to 8 a thread (121 → 128).
    #[test]
    fn blocks_fit_the_register_file_up_to_64k_registers() {
        assert!(fits_register_file(255, 256));
        assert!(fits_register_file(128, 512) && !fits_register_file(129, 512));
        assert!(fits_register_file(121, 512));
        assert!(fits_register_file(64, 1024) && !fits_register_file(65, 1024));
        assert!(!fits_register_file(148, 512));
        // A partial warp takes a whole warp's registers: 33 threads at 255 are two warps.
        assert!(fits_register_file(255, 33));
    }

    #[test]
    fn comment_lines_go_and_code_stays() {
        let ptx = "// Generated by LLVM\n.visible .entry k(\n)\n{\n// %bb.0:\n\tmov.u32 \t%r1, 1; // kept\n\t// %bb.1:\n\tret;\n}\n";
        let want = ".visible .entry k(\n)\n{\n\tmov.u32 \t%r1, 1; // kept\n\tret;\n}\n";
        assert_eq!(without_comment_lines(ptx), want);
    }
}
