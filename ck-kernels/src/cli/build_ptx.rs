//! `ck build-ptx`: a kernel crate → its checked PTX module (see `ck_build::builder`).

use super::{Args, CliError};
use ck_build::builder::{self, BuildError, Options, Report};
use serde_json::json;
use std::path::PathBuf;

impl From<BuildError> for CliError {
    fn from(e: BuildError) -> CliError {
        CliError::new(e.rule, e.message)
    }
}

pub fn run(argv: &[String]) -> Result<(), CliError> {
    let args = Args::parse(
        argv,
        &["manifest-path", "arch"],
        &["install-toolchain", "allow-spills", "json"],
    )?;
    if let Some(extra) = args.positional().first() {
        return Err(CliError::usage(format!(
            "unexpected argument `{extra}`; give the crate with --manifest-path PATH"
        )));
    }
    let arch = args.value("arch").unwrap_or("sm_90a").to_string();
    if !arch.starts_with("sm_") || arch.len() < 5 {
        return Err(CliError::usage(format!(
            "--arch {arch}: give a GPU architecture like sm_90a (H100, wgmma) or sm_80"
        )));
    }
    let opts = Options {
        manifest_path: PathBuf::from(args.value("manifest-path").unwrap_or("Cargo.toml")),
        arch,
        install_toolchain: args.switch("install-toolchain"),
        allow_spills: args.switch("allow-spills"),
    };
    let json = args.switch("json");
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
        "{} ({} kernels, {} bytes; {})\n{:<28} {:>6} {:>10} {:>6} {:>6} {:>6} {:>8}\n",
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
    );
    for k in &r.kernels {
        s += &format!(
            "{:<28} {:>6} {:>10} {:>6} {:>6} {:>6} {:>8}\n",
            k.info.name,
            opt(k.info.block),
            opt(k.info.min_blocks_per_sm),
            k.stats.registers,
            k.stats.spill_stores,
            k.stats.stack_frame,
            k.info.shared_bytes
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
            "shared_bytes": k.info.shared_bytes,
            "registers": k.stats.registers,
            "spill_stores": k.stats.spill_stores,
            "spill_loads": k.stats.spill_loads,
            "stack_frame": k.stats.stack_frame,
        })).collect::<Vec<_>>(),
    })
}
