//! `ck new PATH`: a kernel crate that builds and tests as it is (see `templates/new/`): a
//! `tile_distribution!`, a `#[tile_kernel]` on a tile window, a host launcher, an emulator test
//! against a CPU reference, and the build script that embeds its PTX module.

use super::CliError;
use std::path::{Path, PathBuf};

const CARGO_TOML: &str = include_str!("../templates/new/Cargo.toml.in");
const BUILD_RS: &str = include_str!("../templates/new/build.rs.in");
const LIB_RS: &str = include_str!("../templates/new/lib.rs.in");
const TEST_RS: &str = include_str!("../templates/new/test.rs.in");
const PY_CARGO_TOML: &str = include_str!("../templates/new/python/Cargo.toml.in");
const PY_PROJECT: &str = include_str!("../templates/new/python/pyproject.toml.in");
const PY_LIB_RS: &str = include_str!("../templates/new/python/lib.rs.in");
const PY_TEST: &str = include_str!("../templates/new/python/test.py.in");

/// The ck-rs checkout this `ck` was built from, if it is still there.
fn checkout() -> Option<PathBuf> {
    // This crate is ck-kernels/cli in the checkout.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?.parent()?;
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

/// Why the crate (its name with `-` as `_`) cannot be named in Rust code — `use self::host::…`
/// in its own test, `use core::…` — or `None`: a keyword (strict or reserved, edition 2021),
/// a crate every build already has, or one the new crate depends on.
fn unusable_name(name: &str) -> Option<&'static str> {
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
        "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
        "true", "try", "type", "unsafe", "use", "where", "while", "abstract", "become", "box",
        "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield",
    ];
    const TAKEN: &[&str] = &[
        "core",
        "std",
        "alloc",
        "proc_macro",
        "test",
        "ck_core",
        "ck_macros",
        "ck_build",
        "pyo3",
    ];
    let ident = name.replace('-', "_");
    if KEYWORDS.contains(&ident.as_str()) {
        Some("a Rust keyword")
    } else if TAKEN.contains(&ident.as_str()) {
        Some("the name of a crate it would build with")
    } else {
        None
    }
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

/// `ck new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The new crate's folder (new, or empty)
    path: PathBuf,
    /// The package name [default: the folder's name]
    #[arg(long)]
    name: Option<String>,
    /// The ck-rs checkout to depend on by path [default: the one this ck was built from, if it
    /// is still there; else crates.io versions]
    #[arg(long, value_name = "CHECKOUT")]
    ck_path: Option<PathBuf>,
    /// Also a Python package (`python/`: pyo3 and maturin) exporting the kernel to numpy arrays
    /// and torch tensors
    #[arg(long)]
    python: bool,
}

pub fn run(args: &NewArgs) -> Result<(), CliError> {
    let path = &args.path;
    let name = match args.name.as_deref() {
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
    if let Some(why) = unusable_name(&name) {
        return Err(CliError::usage(format!(
            "`{name}` is {why}: the crate's own code could not name it; give another with --name"
        )));
    }
    if path.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        return Err(CliError::new(
            ck_core::rules::NEW_EXISTS,
            format!(
                "{} exists and is not empty; give a new folder",
                path.display()
            ),
        ));
    }
    let ck = match &args.ck_path {
        Some(p) => {
            if !p.join("ck-core/Cargo.toml").is_file() {
                return Err(CliError::usage(format!(
                    "--ck-path {}: no ck-rs checkout there (no ck-core/Cargo.toml)",
                    p.display()
                )));
            }
            Some(p.canonicalize().unwrap_or(p.clone()))
        }
        None => checkout(),
    };
    let krate = name.replace('-', "_");
    let fill = |t: &str| {
        t.replace("{{name}}", &name)
            .replace("{{crate}}", &krate)
            .replace("{{deps}}", &deps(&["ck-core", "ck-macros"], ck.as_deref()))
            .replace("{{build_deps}}", &deps(&["ck-build"], ck.as_deref()))
            .replace(
                "{{python_deps}}",
                &deps(&["ck-core", "ck-python"], ck.as_deref()),
            )
            .replace(
                "{{members}}",
                if args.python {
                    "members = [\"python\"]\n"
                } else {
                    ""
                },
            )
    };
    let mut files = vec![
        ("Cargo.toml".to_string(), fill(CARGO_TOML)),
        ("build.rs".into(), fill(BUILD_RS)),
        ("src/lib.rs".into(), fill(LIB_RS)),
        (format!("tests/{krate}.rs"), fill(TEST_RS)),
    ];
    if args.python {
        files.extend([
            ("python/Cargo.toml".to_string(), fill(PY_CARGO_TOML)),
            ("python/pyproject.toml".into(), fill(PY_PROJECT)),
            ("python/src/lib.rs".into(), fill(PY_LIB_RS)),
            (format!("python/tests/test_{krate}.py"), fill(PY_TEST)),
        ]);
    }
    for (file, text) in &files {
        let at = path.join(file);
        std::fs::create_dir_all(at.parent().unwrap_or(path))
            .and_then(|()| std::fs::write(&at, text))
            .map_err(|e| {
                CliError::new(
                    ck_core::rules::IO,
                    format!("cannot write {}: {e}", at.display()),
                )
            })?;
    }
    println!(
        "created kernel crate `{name}` in {}\n  cd {0}\n  cargo test                                # the kernel on the CPU emulator\n  ck build-ptx --manifest-path Cargo.toml   # target/ptx/{krate}.ptx for the GPU",
        path.display()
    );
    if args.python {
        println!("  pip install ./python                      # `import {krate}`: the kernel on numpy arrays and torch tensors\n  pytest python/tests");
    }
    Ok(())
}
