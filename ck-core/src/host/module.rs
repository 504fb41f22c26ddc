//! Where a kernel crate's PTX module is found on the host.
//!
//! `ck build-ptx` writes the module of crate `my_kernels` to `<target dir>/ptx/my_kernels.ptx`.
//! A launch on the GPU takes the first of:
//! 1. `CK_PTX`: a list of files and folders (`:`-separated): a file named after the crate
//!    (`my_kernels.ptx`; `my-kernels.ptx` too), or `my_kernels.ptx` inside a folder;
//! 2. the module embedded in the binary (`ck_build::embed_ptx()` in the crate's `build.rs`);
//! 3. `my_kernels.ptx` beside the executable, or in `ptx/` of one of the executable's first four
//!    parent folders — so `target/release/app`, `target/debug/deps/test-…` and
//!    `target/release/examples/app` all find `target/ptx/my_kernels.ptx`;
//! 4. `target/ptx/my_kernels.ptx` under the current directory.
//!
//! None found is `error[no-ptx]`, naming the folders searched and the command that builds it.

use super::LaunchError;
use crate::kernel::Module;
use crate::rules;
use std::path::{Path, PathBuf};
use std::prelude::rust_2021::*;

/// Where a module was found, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtxSource {
    /// Embedded in the binary at build time.
    Embedded,
    /// Read from this file.
    File(PathBuf),
}

impl std::fmt::Display for PtxSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PtxSource::Embedded => write!(f, "embedded in the executable"),
            PtxSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

fn file_name(m: &Module) -> String {
    format!("{}.ptx", m.crate_name)
}

/// Whether `path` names the module of `m` (hyphens and underscores alike).
fn names_module(path: &Path, m: &Module) -> bool {
    path.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s.replace('-', "_") == m.crate_name)
}

/// The files that `CK_PTX` (`ck_ptx`) offers for `m`, in order.
fn override_candidates(m: &Module, ck_ptx: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let Some(list) = ck_ptx else {
        return Vec::new();
    };
    std::env::split_paths(list)
        .filter_map(|p| {
            if p.is_dir() {
                Some(p.join(file_name(m)))
            } else if names_module(&p, m) {
                Some(p)
            } else {
                None
            }
        })
        .collect()
}

/// The PTX text of `m`'s embedded module, which `ck_build::embed_ptx` deflated.
fn inflate(m: &Module, deflated: &[u8]) -> Result<String, LaunchError> {
    let damaged = |why: String| {
        LaunchError::invalid(
            rules::NO_PTX,
            format!("the PTX module embedded for crate `{}` is damaged ({why}); rebuild it with `ck build-ptx --manifest-path {}/Cargo.toml` and the binary after it", m.crate_name, m.manifest_dir),
        )
    };
    let bytes = miniz_oxide::inflate::decompress_to_vec(deflated)
        .map_err(|e| damaged(format!("{:?}", e.status)))?;
    String::from_utf8(bytes).map_err(|e| damaged(e.to_string()))
}

/// The files searched for `m` after `CK_PTX` and the embedded module, in order, for an
/// executable at `exe`.
pub fn search_path(m: &Module, exe: Option<&Path>) -> Vec<PathBuf> {
    let name = file_name(m);
    let mut v = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        v.push(dir.join(&name));
        v.extend(dir.ancestors().take(4).map(|a| a.join("ptx").join(&name)));
    }
    v.push(Path::new("target").join("ptx").join(&name));
    v
}

/// The PTX text of `m` and where it came from, or `error[no-ptx]` saying where it looked.
pub fn find_ptx(m: &Module) -> Result<(PtxSource, String), LaunchError> {
    let ck_ptx = std::env::var_os("CK_PTX");
    let overrides = override_candidates(m, ck_ptx.as_deref());
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .map(|text| (PtxSource::File(p.to_path_buf()), text))
            .map_err(|e| {
                LaunchError::invalid(rules::NO_PTX, format!("cannot read {}: {e}", p.display()))
            })
    };
    if let Some(p) = overrides.iter().find(|p| p.is_file()) {
        return read(p);
    }
    if let Some(bytes) = m.embedded {
        return inflate(m, bytes()).map(|text| (PtxSource::Embedded, text));
    }
    let exe = std::env::current_exe().ok();
    let searched = search_path(m, exe.as_deref());
    if let Some(p) = searched.iter().find(|p| p.is_file()) {
        return read(p);
    }
    let looked: Vec<String> = overrides
        .iter()
        .chain(&searched)
        .map(|p| p.display().to_string())
        .collect();
    Err(LaunchError::invalid(
        rules::NO_PTX,
        format!(
            "no PTX module for crate `{}`: none embedded, none at {}; build it with `ck build-ptx --manifest-path {}/Cargo.toml` (or point CK_PTX at the .ptx file or its folder)",
            m.crate_name,
            looked.join(", "),
            m.manifest_dir
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Module = Module {
        crate_name: "my_kernels",
        manifest_dir: "/src/my-kernels",
        embedded: None,
    };

    #[test]
    fn executables_in_target_subfolders_find_target_ptx() {
        for exe in [
            "/w/target/release/app",
            "/w/target/debug/deps/app-0123",
            "/w/target/release/examples/app",
        ] {
            let path = search_path(&M, Some(Path::new(exe)));
            assert!(
                path.contains(&PathBuf::from("/w/target/ptx/my_kernels.ptx")),
                "{exe}: {path:?}"
            );
        }
    }

    #[test]
    fn ck_ptx_files_count_only_for_their_crate() {
        let dir = std::env::temp_dir();
        let list = std::env::join_paths([
            PathBuf::from("/x/other.ptx"),
            PathBuf::from("/x/my-kernels.ptx"),
            dir.clone(),
        ])
        .unwrap();
        assert_eq!(
            override_candidates(&M, Some(&list)),
            vec![
                PathBuf::from("/x/my-kernels.ptx"),
                dir.join("my_kernels.ptx")
            ]
        );
    }

    #[test]
    fn a_missing_module_is_no_ptx_naming_the_fix() {
        let m = Module {
            crate_name: "surely_not_built_anywhere",
            ..M
        };
        let e = find_ptx(&m).unwrap_err();
        assert_eq!(e.rule(), "no-ptx");
        let text = e.to_string();
        assert!(
            text.contains("ck build-ptx --manifest-path /src/my-kernels/Cargo.toml"),
            "{text}"
        );
    }

    /// `.version 8.0` deflated (raw DEFLATE, as `ck_build::embed_ptx` writes it: one fixed-
    /// Huffman block of 12 literals, from `miniz_oxide::deflate::compress_to_vec`).
    fn deflated_version() -> &'static [u8] {
        static PACKED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        PACKED.get_or_init(|| miniz_oxide::deflate::compress_to_vec(b".version 8.0", 9))
    }

    #[test]
    fn an_embedded_module_is_used_without_files() {
        let m = Module {
            crate_name: "surely_not_built_anywhere",
            embedded: Some(deflated_version),
            ..M
        };
        assert_eq!(
            find_ptx(&m).unwrap(),
            (PtxSource::Embedded, ".version 8.0".to_string())
        );
    }

    #[test]
    fn a_damaged_embedded_module_is_an_error_that_says_how_to_rebuild() {
        let m = Module {
            crate_name: "surely_not_built_anywhere",
            embedded: Some(|| b".version 8.0, not deflated"),
            ..M
        };
        let e = find_ptx(&m).unwrap_err();
        assert_eq!(e.rule(), rules::NO_PTX);
        let e = e.message();
        assert!(
            e.starts_with(
                "the PTX module embedded for crate `surely_not_built_anywhere` is damaged (Failed)"
            ),
            "{e}"
        );
        assert!(
            e.contains("ck build-ptx --manifest-path /src/my-kernels/Cargo.toml"),
            "{e}"
        );
    }
}
