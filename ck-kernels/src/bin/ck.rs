//! The `ck` command; see `ck --help`.
fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(ck_kernels::cli::main_with_args(&argv));
}
