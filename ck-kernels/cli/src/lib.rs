//! The `ck` command: one binary for people and scripts. Every subcommand prints a readable report
//! or, with `--json`, a JSON document; errors go to stderr as `error[rule-name]: message` and the
//! exit status is 1. The command line is declared with clap ([`Cli`]): `ck --help`,
//! `ck <command> --help` and `ck completions bash|zsh|fish` come from the same declarations.

mod attention;
mod bench;
mod bench_gemm;
mod build_ptx;
mod common;
mod encoding;
mod gemm_peer;
mod lds;
mod new;
pub mod npy;
mod operator;
mod run;
mod sfc;
mod timing;

use ck_core::rules::{self, RuleId};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// An error for the user: the rule, printed as `error[rule]`, and a message saying what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// The rule (`usage`, or any rule of [`ck_core::rules`] such as `sfc-not-divisible`).
    pub rule: RuleId,
    /// What went wrong and how to fix it.
    pub message: String,
    /// Further complete `error[..]: ..` lines (a front end reports every violation at once).
    pub more: Vec<String>,
}

impl CliError {
    /// An error under rule `rule`.
    pub fn new(rule: RuleId, message: impl Into<String>) -> CliError {
        CliError {
            rule,
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// A malformed command line.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new(rules::USAGE, message)
    }
}

impl From<ck_core::Error> for CliError {
    fn from(e: ck_core::Error) -> CliError {
        CliError::new(e.rule.id(), e.to_string())
    }
}

/// `--name a,b,c` as integers (`None` when the option is absent).
fn int_list(name: &str, value: Option<&str>) -> Result<Option<Vec<i32>>, CliError> {
    let Some(v) = value else {
        return Ok(None);
    };
    v.split(',')
        .map(|s| common::integer(name, s, "give a comma-separated list like 4,6"))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// ck-rs: CK Tile's tile-programming model in Rust — check tile distributions, run and time
/// kernels on the CPU emulator or an NVIDIA GPU, build kernel crates for the GPU.
#[derive(Debug, Parser)]
#[command(name = "ck", version, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a tile_distribution! body (either spelling) and print its tables
    Encoding(encoding::EncodingArgs),
    /// An LDS tile layout (XOR-swizzled or plain): offsets and bank conflicts of k-read/k-write
    Lds(lds::LdsArgs),
    /// Run a kernel on random or .npy input, check it against its CPU reference, print the
    /// launch statistics
    Run {
        #[command(subcommand)]
        kernel: run::RunCommand,
    },
    /// Achieved bandwidth or TFLOP/s, next to the peers measured in the same job
    Bench(bench::BenchArgs),
    /// Every exercise kernel on the emulator and on CUDA device 0, compared
    CrossCheck(run::CrossCheckArgs),
    /// The access sequence of a space-filling curve
    Sfc(sfc::SfcArgs),
    /// Scaffold a kernel crate: a #[tile_kernel] on a tile window, its emulator test and build
    /// script
    New(new::NewArgs),
    /// Build a kernel crate's PTX module (target/ptx/<crate>.ptx), assemble it with ptxas, and
    /// report registers, spills and shared memory per kernel
    BuildPtx(build_ptx::BuildPtxArgs),
    /// Print a shell completion script (e.g. `ck completions bash > /etc/bash_completion.d/ck`)
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Runs the command line `argv` (without the program name); returns the process exit status.
pub fn main_with_args(argv: &[String]) -> i32 {
    let args = std::iter::once("ck".to_string()).chain(argv.iter().cloned());
    let matches = match command().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => return clap_error(&e, argv),
    };
    // `ck run OP …`: the registry's operators, whose options come from their descriptions.
    if let Some(("run", run)) = matches.subcommand() {
        if let Some(result) = run.subcommand().and_then(|(k, m)| operator::dispatch(k, m)) {
            return exit_status(result);
        }
    }
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return clap_error(&e, argv),
    };
    let result = match cli.command {
        Command::Encoding(a) => encoding::run(&a),
        Command::Lds(a) => lds::run(&a),
        Command::Run { kernel } => run::run(&kernel),
        Command::Bench(a) => bench::run(&a),
        Command::CrossCheck(a) => run::cross_check(&a),
        Command::Sfc(a) => sfc::run(&a),
        Command::New(a) => new::run(&a),
        Command::BuildPtx(a) => build_ptx::run(&a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "ck", &mut std::io::stdout());
            Ok(())
        }
    };
    exit_status(result)
}

/// Prints a command's error; the exit status.
fn exit_status(result: Result<(), CliError>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{}: {}", e.rule, e.message);
            for more in &e.more {
                eprintln!("{more}");
            }
            1
        }
    }
}

/// `--help` and `--version` (exit status 0), or a malformed command line (1).
fn clap_error(e: &clap::Error, argv: &[String]) -> i32 {
    if !e.use_stderr() {
        print!("{e}");
        return 0;
    }
    eprintln!("{}", usage_line(e, argv));
    1
}

/// The command line as clap parses it: [`Cli`]'s declaration, `ck run`'s operators from the
/// registry, and negative numbers accepted as option values in every subcommand (`--beta
/// -1.0`, `--alpha -0.5`): clap's default reads a value that starts with `-` as the next option.
fn command() -> clap::Command {
    fn negatives_everywhere(cmd: clap::Command) -> clap::Command {
        cmd.allow_negative_numbers(true)
            .mut_subcommands(negatives_everywhere)
    }
    let cli = Cli::command().mut_subcommand("run", |run| run.subcommands(operator::commands()));
    negatives_everywhere(cli)
}

/// clap's first paragraph as one `error[usage]` line, like every other error, naming the help
/// to read.
fn usage_line(e: &clap::Error, argv: &[String]) -> String {
    let text = e.to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("error: "))
        .collect();
    let command = ["ck".to_string(), subcommand_of(argv)].join(" ");
    format!(
        "error[usage]: {}; see `{} --help`",
        first.join(" "),
        command.trim()
    )
}

/// The command words of `argv` before its first option (`run bank-probe`), for the help hint.
fn subcommand_of(argv: &[String]) -> String {
    let words: Vec<&str> = argv
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .take(2)
        .map(String::as_str)
        .collect();
    let known = command();
    match words.first().and_then(|w| known.find_subcommand(w)) {
        Some(sub) => match words.get(1).filter(|w| sub.find_subcommand(w).is_some()) {
            Some(kernel) => format!("{} {kernel}", sub.get_name()),
            None => sub.get_name().to_string(),
        },
        None => String::new(),
    }
    .trim()
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_declaration_is_consistent() {
        super::command().debug_assert();
    }

    #[test]
    fn every_command_takes_negative_numbers_as_option_values() {
        fn check(cmd: &clap::Command, path: &str) {
            assert!(
                cmd.is_allow_negative_numbers_set(),
                "`{path}` reads `--opt -1` as two options"
            );
            for sub in cmd.get_subcommands() {
                check(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        check(&super::command(), "ck");
    }
}
