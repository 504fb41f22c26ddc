//! The `ck` command; see `ck --help`.
fn main() {
    // Die quietly when the reader of our output goes away (`ck … | head`), like other tools.
    // SAFETY: restores the default disposition of SIGPIPE before any output is written.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(ck_cli::main_with_args(&argv));
}
