//! `ck build-ptx`: a kernel crate → its checked PTX module (see `ck_build::builder`).

use super::CliError;
use ck_build::builder::{self, BuildError, Options, Report};
use serde_json::json;
use std::path::PathBuf;

impl From<BuildError> for CliError {
    fn from(e: BuildError) -> CliError {
        CliError::new(e.rule, e.message)
    }
}

/// `ck build-ptx`.
#[derive(Debug, clap::Args)]
pub struct BuildPtxArgs {
    /// The kernel crate's Cargo.toml
    #[arg(long, value_name = "PATH", default_value = "Cargo.toml")]
    manifest_path: PathBuf,
    /// GPU architecture: sm_90a (H100/H200, needed for wgmma), sm_80, …
    #[arg(long, value_name = "sm_XX", default_value = "sm_90a")]
    arch: String,
    /// Install the PTX toolchain (Debian rustc-web 1.96, llvm-22, ptxas; about 1.5 GB) into
    /// $CK_PTX_TOOLS or ~/.cache/ck-rs/ptx-tools when none is found (a checkout's
    /// target/ptx-tools, from scripts/build-ptx.sh, is used as it is)
    #[arg(long)]
    install_toolchain: bool,
    /// Report register spills and stack frames as warnings, not errors
    #[arg(long)]
    allow_spills: bool,
    /// Print {crate, ptx, toolchain, warnings, kernels} as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(args: &BuildPtxArgs) -> Result<(), CliError> {
    let arch = args.arch.clone();
    if !arch.starts_with("sm_") || arch.len() < 5 {
        return Err(CliError::usage(format!(
            "--arch {arch}: give a GPU architecture like sm_90a (H100, wgmma) or sm_80"
        )));
    }
    let opts = Options {
        manifest_path: args.manifest_path.clone(),
        arch,
        install_toolchain: args.install_toolchain,
        allow_spills: args.allow_spills,
        // The toolchain scripts/build-ptx.sh installed into the checkout this ck was built in.
        preferred_tools: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(|root| root.join("target/ptx-tools")),
    };
    let json = args.json;
    let report = builder::build(&opts, &mut |step| eprintln!("[build-ptx] {step}"))?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        println!("{}", to_json(&report));
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

fn opt(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

/// One row per kernel: what it declared and what ptxas gave it.
fn table(r: &Report) -> String {
    let mut s = format!(
        "{} ({} kernel(s), {} bytes; {})\n{:<28} {:>6} {:>10} {:>6} {:>6} {:>6} {:>8} {:>7}\n",
        r.ptx.display(),
        r.kernels.len(),
        std::fs::metadata(&r.ptx).map(|m| m.len()).unwrap_or(0),
        r.toolchain,
        "kernel",
        "block",
        "min blk/SM",
        "regs",
        "spill",
        "stack",
        "shared",
        "cluster",
    );
    for k in &r.kernels {
        s += &format!(
            "{:<28} {:>6} {:>10} {:>6} {:>6} {:>6} {:>8} {:>7}\n",
            k.info.name,
            opt(k.info.block),
            opt(k.info.min_blocks_per_sm),
            k.stats.registers,
            k.stats.spill_stores,
            k.stats.stack_frame,
            k.info.shared_bytes,
            opt(k.info.cluster)
        );
    }
    s
}

fn to_json(r: &Report) -> serde_json::Value {
    json!({
        "crate": r.crate_name,
        "ptx": r.ptx,
        "toolchain": r.toolchain,
        "warnings": r.warnings,
        "kernels": r.kernels.iter().map(|k| json!({
            "name": k.info.name,
            "block": k.info.block,
            "min_blocks_per_sm": k.info.min_blocks_per_sm,
            "cluster": k.info.cluster,
            "shared_bytes": k.info.shared_bytes,
            "registers": k.stats.registers,
            "spill_stores": k.stats.spill_stores,
            "spill_loads": k.stats.spill_loads,
            "stack_frame": k.stats.stack_frame,
        })).collect::<Vec<_>>(),
    })
}
