//! `embed_ptx()`: a kernel crate's module, embedded in release builds of the crate.

use std::path::{Path, PathBuf};

/// Call from a kernel crate's `build.rs`. In a release build for the host, where
/// `ck build-ptx` has written `<target dir>/ptx/<crate>.ptx`, it sets `CK_EMBED_PTX` for the
/// crate so that `#[tile_kernel]` embeds the module in every launcher (one copy per binary), and
/// rebuilds the crate when the module changes. Otherwise it does nothing: the nvptx build of the
/// crate itself, debug builds (which find the module in `target/ptx` at run time, see
/// `ck_core::host::module`) and crates whose module has not been built. It never fails.
pub fn embed_ptx() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("TARGET").starts_with("nvptx") || var("PROFILE") != "release" {
        return;
    }
    let Some(target_dir) = target_dir(Path::new(&var("OUT_DIR"))) else {
        println!("cargo:warning=ck-build: cannot tell the target directory from OUT_DIR; the PTX module is not embedded");
        return;
    };
    let ptx_dir = target_dir.join("ptx");
    // Watching the folder (created if missing, so the watch is stable) catches a module that
    // appears later; watching the file catches a rebuilt one.
    let _ = std::fs::create_dir_all(&ptx_dir);
    println!("cargo:rerun-if-changed={}", ptx_dir.display());
    let module = ptx_dir.join(format!("{}.ptx", var("CARGO_PKG_NAME").replace('-', "_")));
    if module.is_file() {
        println!("cargo:rerun-if-changed={}", module.display());
        println!("cargo:rustc-env=CK_EMBED_PTX={}", module.display());
    }
}

/// The cargo target directory that holds `out_dir` (the first ancestor with cargo's
/// `CACHEDIR.TAG`), else `CARGO_TARGET_DIR`.
fn target_dir(out_dir: &Path) -> Option<PathBuf> {
    out_dir
        .ancestors()
        .find(|a| a.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_dir_is_the_folder_with_cargos_tag() {
        let root = std::env::temp_dir().join(format!("ck-build-embed-{}", std::process::id()));
        let out = root.join("x86_64-unknown-linux-gnu/release/build/k-0123/out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(
            root.join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55",
        )
        .unwrap();
        assert_eq!(target_dir(&out), Some(root.clone()));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
