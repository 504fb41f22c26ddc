//! `embed_ptx()`: a kernel crate's module, embedded in release builds of the crate.

use std::path::{Path, PathBuf};

/// Call from a kernel crate's `build.rs`. In a release build for the host, where
/// `ck build-ptx` has written `<target dir>/ptx/<crate>.ptx`, it deflates the module into
/// `OUT_DIR` and sets `CK_EMBED_PTX` to that file for the crate, so that `#[tile_kernel]` embeds
/// it in its launchers, and rebuilds the crate when the module changes. Otherwise it does
/// nothing: the nvptx build of the crate itself, debug builds (which find the module in
/// `target/ptx` at run time, see `ck_core::host::module`) and crates whose module has not been
/// built. It never fails (a module it cannot read or write is left out, with a warning, and
/// found in `target/ptx` at run time). The module is looked for under the
/// package's name (`my-kernels` → `my_kernels.ptx`); a crate whose `[lib] name` differs from its
/// package name is not embedded and finds its module in `target/ptx` at run time.
pub fn embed_ptx() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let plan = plan(
        &var("TARGET"),
        &var("PROFILE"),
        Path::new(&var("OUT_DIR")),
        &var("CARGO_PKG_NAME"),
    );
    match plan {
        Plan::Skip => {}
        Plan::NoTargetDir => println!(
            "cargo:warning=ck-build: cannot tell the target directory from OUT_DIR; the PTX module is not embedded"
        ),
        Plan::Watch { ptx_dir, module } => {
            // Watching the folder (created if missing, so the watch is stable) catches a module
            // that appears later; watching the file catches a rebuilt one.
            let _ = std::fs::create_dir_all(&ptx_dir);
            println!("cargo:rerun-if-changed={}", ptx_dir.display());
            if let Some(m) = module {
                println!("cargo:rerun-if-changed={}", m.display());
                match deflate_into(&m, Path::new(&var("OUT_DIR"))) {
                    Ok(packed) => println!("cargo:rustc-env=CK_EMBED_PTX={}", packed.display()),
                    Err(e) => println!(
                        "cargo:warning=ck-build: cannot embed {} ({e}); the module is found in target/ptx at run time",
                        m.display()
                    ),
                }
            }
        }
    }
}

/// Deflates `module` (`<crate>.ptx`) into `<out_dir>/<crate>.deflate`, the file the kernels'
/// launchers include (`ck_core::kernel::Module::embedded`): PTX text compresses about 8×, which
/// keeps a binary with the library's kernels under 25 MB.
fn deflate_into(module: &Path, out_dir: &Path) -> std::io::Result<PathBuf> {
    let text = std::fs::read(module)?;
    let stem = module.file_stem().unwrap_or_default();
    let packed = out_dir.join(stem).with_extension("deflate");
    std::fs::write(&packed, miniz_oxide::deflate::compress_to_vec(&text, 9))?;
    Ok(packed)
}

/// What [`embed_ptx`] does for one build.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// Not a release build for the host.
    Skip,
    /// OUT_DIR is not laid out as cargo lays it out.
    NoTargetDir,
    /// Watch `ptx_dir`; embed `module` if it exists.
    Watch {
        ptx_dir: PathBuf,
        module: Option<PathBuf>,
    },
}

fn plan(target: &str, profile: &str, out_dir: &Path, package: &str) -> Plan {
    if target.starts_with("nvptx") || profile != "release" {
        return Plan::Skip;
    }
    let Some(target_dir) = target_dir(out_dir, target) else {
        return Plan::NoTargetDir;
    };
    let ptx_dir = target_dir.join("ptx");
    let module = ptx_dir.join(format!("{}.ptx", package.replace('-', "_")));
    Plan::Watch {
        module: module.is_file().then_some(module),
        ptx_dir,
    }
}

/// The cargo target directory that holds `out_dir`, which cargo lays out as
/// `<target>/[<triple>/]<profile>/build/<package>-<hash>/out` (the triple only when `--target`
/// is given, `triple` being that target).
fn target_dir(out_dir: &Path, triple: &str) -> Option<PathBuf> {
    let dir = out_dir.ancestors().nth(3)?.parent()?;
    if dir.file_name().is_some_and(|n| n == triple) {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "x86_64-unknown-linux-gnu";

    #[test]
    fn the_target_dir_is_found_with_and_without_an_explicit_target() {
        for (out, want) in [
            ("/w/target/release/build/k-0123/out", "/w/target"),
            (
                "/w/target/x86_64-unknown-linux-gnu/release/build/k-0123/out",
                "/w/target",
            ),
            (
                "/w/out-of-tree/profiling/build/k-0123/out",
                "/w/out-of-tree",
            ),
        ] {
            assert_eq!(
                target_dir(Path::new(out), HOST),
                Some(PathBuf::from(want)),
                "{out}"
            );
        }
        assert_eq!(target_dir(Path::new("out"), HOST), None);
    }

    #[test]
    fn only_release_host_builds_embed_and_only_an_existing_module() {
        let root = std::env::temp_dir().join(format!("ck-build-embed-{}", std::process::id()));
        let out = root.join("release/build/my-kernels-0123/out");
        let module = root.join("ptx/my_kernels.ptx");
        assert_eq!(
            plan("nvptx64-nvidia-cuda", "release", &out, "my-kernels"),
            Plan::Skip
        );
        assert_eq!(plan(HOST, "debug", &out, "my-kernels"), Plan::Skip);
        let watch = |module| Plan::Watch {
            ptx_dir: root.join("ptx"),
            module,
        };
        assert_eq!(plan(HOST, "release", &out, "my-kernels"), watch(None));
        std::fs::create_dir_all(root.join("ptx")).unwrap();
        std::fs::write(&module, ".version 8.0").unwrap();
        assert_eq!(
            plan(HOST, "release", &out, "my-kernels"),
            watch(Some(module.clone()))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_embedded_file_is_the_module_deflated_under_the_crates_name() {
        let root = std::env::temp_dir().join(format!("ck-build-deflate-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let module = root.join("my_kernels.ptx");
        let text = ".version 8.0\n.target sm_90a\n".repeat(1000);
        std::fs::write(&module, &text).unwrap();
        let packed = deflate_into(&module, &root).unwrap();
        assert_eq!(packed, root.join("my_kernels.deflate"));
        let bytes = std::fs::read(&packed).unwrap();
        assert!(bytes.len() * 20 < text.len(), "{} bytes", bytes.len());
        let back = miniz_oxide::inflate::decompress_to_vec(&bytes).unwrap();
        assert_eq!(back, text.as_bytes());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
