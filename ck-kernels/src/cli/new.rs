//! `ck new PATH`: a kernel crate that builds and tests as it is (see `templates/new/`): a
//! `tile_distribution!`, a `#[tile_kernel]` on a tile window, a host launcher, an emulator test
//! against a CPU reference, and the build script that embeds its PTX module.

use super::{Args, CliError};
use std::path::{Path, PathBuf};

const CARGO_TOML: &str = include_str!("../../templates/new/Cargo.toml.in");
const BUILD_RS: &str = include_str!("../../templates/new/build.rs.in");
const LIB_RS: &str = include_str!("../../templates/new/lib.rs.in");
const TEST_RS: &str = include_str!("../../templates/new/test.rs.in");

/// The ck-rs checkout this `ck` was built from, if it is still there.
fn checkout() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    root.join("ck-core/Cargo.toml")
        .is_file()
        .then(|| root.to_path_buf())
}

/// Whether `name` is a valid package name.
fn valid_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The dependency lines for `crates`: path dependencies into `ck` (a checkout), else versions.
fn deps(crates: &[&str], ck: Option<&Path>) -> String {
    crates
        .iter()
        .map(|c| match ck {
            Some(root) => format!(
                "{c} = {{ path = {:?} }}",
                root.join(c).display().to_string()
            ),
            None => format!("{c} = \"{}\"", env!("CARGO_PKG_VERSION")),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn run(argv: &[String]) -> Result<(), CliError> {
    let args = Args::parse(argv, &["name", "ck-path"], &[])?;
    let [path] = args.positional() else {
        return Err(CliError::usage(
            "give the new crate's folder: ck new PATH [--name NAME] [--ck-path CHECKOUT]",
        ));
    };
    let path = PathBuf::from(path);
    let name = match args.value("name") {
        Some(n) => n.to_string(),
        None => path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string(),
    };
    if !valid_name(&name) {
        return Err(CliError::usage(format!(
            "`{name}` is not a crate name (a letter, then letters, digits, - or _); give one with --name"
        )));
    }
    if path.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        return Err(CliError::new(
            "new-exists",
            format!(
                "{} exists and is not empty; give a new folder",
                path.display()
            ),
        ));
    }
    let ck = match args.value("ck-path") {
        Some(p) => {
            let p = PathBuf::from(p);
            if !p.join("ck-core/Cargo.toml").is_file() {
                return Err(CliError::usage(format!(
                    "--ck-path {}: no ck-rs checkout there (no ck-core/Cargo.toml)",
                    p.display()
                )));
            }
            Some(p.canonicalize().unwrap_or(p))
        }
        None => checkout(),
    };
    let krate = name.replace('-', "_");
    let fill = |t: &str| {
        t.replace("{{name}}", &name)
            .replace("{{crate}}", &krate)
            .replace("{{deps}}", &deps(&["ck-core", "ck-macros"], ck.as_deref()))
            .replace("{{build_deps}}", &deps(&["ck-build"], ck.as_deref()))
    };
    let files = [
        ("Cargo.toml", fill(CARGO_TOML)),
        ("build.rs", fill(BUILD_RS)),
        ("src/lib.rs", fill(LIB_RS)),
        (&*format!("tests/{krate}.rs"), fill(TEST_RS)),
    ];
    for (file, text) in &files {
        let at = path.join(file);
        std::fs::create_dir_all(at.parent().unwrap_or(&path))
            .and_then(|()| std::fs::write(&at, text))
            .map_err(|e| CliError::new("io", format!("cannot write {}: {e}", at.display())))?;
    }
    println!(
        "created kernel crate `{name}` in {}\n  cd {0}\n  cargo test                                # the kernel on the CPU emulator\n  ck build-ptx --manifest-path Cargo.toml   # target/ptx/{krate}.ptx for the GPU",
        path.display()
    );
    Ok(())
}
