//! The `ck` command: one binary for people and scripts. Every subcommand prints a readable report
//! or, with `--json`, a JSON document; errors go to stderr as `error[rule-name]: message` and the
//! exit status is 1.

mod args;
mod bench;
mod build_ptx;
mod encoding;
mod lds;
mod new;
mod run;
mod sfc;

pub use args::{Args, CliError};

const USAGE: &str = "\
usage: ck <command> [options]

commands:
  encoding FILE|- [--json] [--map] [--svg OUT.svg]
      check a tile_distribution! body (either spelling) and print its tables
  lds --m-per-block M --k-per-block K --k-pack P --elem-bytes B [--mlds-layer L] [--plain] [--json] [--svg FILE]
      an LDS tile layout (XOR-swizzled or plain), its offsets and bank conflicts of k-read/k-write
  run reverse|block-sum|histogram [--n N] [--seed S] [--backend emu|cuda] [--json]
  run bank-probe --stride S --width W [--backend emu|cuda] [--json]
      run a kernel, check it against its CPU reference, print the launch statistics
  run rmsnorm --input X.npy --gamma G.npy --output Y.npy [--eps E] [--dtype f32|bf16] [--backend emu|cuda] [--json]
      RMSNorm of a 2-D f32 .npy (with bf16, inputs are rounded before the kernel)
  bench rmsnorm|copy [--backend emu|cuda] [--shapes MxN,..] [--dtypes f32,bf16] [--iters N] [--peers PEERS.json] [--json]
      achieved GB/s, next to the peers measured by scripts/bench_peers.py in the same job
  new PATH [--name NAME] [--ck-path CHECKOUT]
      scaffold a kernel crate: a tile_kernel on a tile window, its emulator test, its build script
  build-ptx [--manifest-path Cargo.toml] [--arch sm_90a] [--install-toolchain] [--allow-spills] [--json]
      build a kernel crate's PTX module (target/ptx/<crate>.ptx), assemble it with ptxas, report
      registers, spills and shared memory per kernel
  cross-check [--json]
      every exercise kernel on the emulator and on CUDA device 0, compared bit for bit
  sfc --lengths L0,L1,.. [--order O0,O1,..] [--scalars S0,S1,..] [--snake] [--json]
      the access sequence of a space-filling curve (order defaults to 0,1,..; scalars to 1,..)
";

/// Runs the command line `argv` (without the program name); returns the process exit status.
pub fn main_with_args(argv: &[String]) -> i32 {
    let result = match argv.first().map(String::as_str) {
        Some("sfc") => sfc::run(&argv[1..]),
        Some("encoding") => encoding::run(&argv[1..]),
        Some("run") => run::run(&argv[1..]),
        Some("cross-check") => run::cross_check(&argv[1..]),
        Some("bench") => bench::run(&argv[1..]),
        Some("lds") => lds::run(&argv[1..]),
        Some("build-ptx") => build_ptx::run(&argv[1..]),
        Some("new") => new::run(&argv[1..]),
        Some("-h" | "--help" | "help") | None => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(CliError::usage(format!(
            "unknown command `{other}`; run `ck --help` for the list"
        ))),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error[{}]: {}", e.rule, e.message);
            for more in &e.more {
                eprintln!("{more}");
            }
            1
        }
    }
}
