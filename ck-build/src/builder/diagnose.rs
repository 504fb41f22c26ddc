//! A failed nvptx build, told in the user's terms: which rule, which kernel, what to change.
//!
//! The compiler's own message follows ours, so nothing is lost; what we add is the fix for the
//! mistakes everyone makes once (a kernel crate that is not `no_std` on the GPU, `std` inside a
//! kernel, the `abi_ptx` feature missing).

use super::BuildError;
use ck_core::rules;
use std::path::Path;

/// One error the compiler reported (from cargo's JSON messages).
#[derive(Clone, Debug, Default)]
pub struct CompilerError {
    /// `E0463`, … (empty when none).
    pub code: String,
    /// The first line of the message.
    pub message: String,
    /// The message as rustc renders it.
    pub rendered: String,
    /// The primary span's file (as the compiler names it) and line.
    pub at: Option<(String, usize)>,
}

/// The `#[tile_kernel]` function whose body holds line `line` (1-based) of `source`, if any: the
/// nearest `#[tile_kernel` attribute above the line, if its function's braces are still open at
/// the start of that line.
pub fn enclosing_kernel(source: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = source.lines().collect();
    let before = line.checked_sub(1)?.min(lines.len());
    let attr = (0..before)
        .rev()
        .find(|&i| lines[i].contains("#[tile_kernel"))?;
    let mut name: Option<String> = None;
    let mut depth: i64 = 0;
    for l in &lines[attr..before] {
        if name.is_none() {
            name = l.split("fn ").nth(1).map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            });
        }
        if name.is_some() {
            let opened_before = depth > 0;
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            if opened_before && depth <= 0 {
                return None; // the kernel ended above the line
            }
        }
    }
    if depth > 0 {
        name
    } else {
        None
    }
}

/// Our error for a failed build of crate `krate` (at `dir`) with these compiler errors.
pub fn explain(krate: &str, dir: &Path, errors: &[CompilerError]) -> BuildError {
    let lib_rs = dir.join("src/lib.rs");
    let where_ = |e: &CompilerError| -> String {
        let Some((file, line)) = &e.at else {
            return String::new();
        };
        // rustc names files relative to the directory cargo ran it in: the package's, or its
        // workspace's for a member.
        let kernel = dir
            .ancestors()
            .map(|a| a.join(file))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|s| enclosing_kernel(&s, *line));
        match kernel {
            Some(k) => format!(" in kernel `{k}` ({file}:{line})"),
            None => format!(" ({file}:{line})"),
        }
    };
    let rendered: String = errors
        .iter()
        .take(3)
        .map(|e| e.rendered.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let first = errors.first().cloned().unwrap_or_default();
    let uses_std = |e: &CompilerError| {
        matches!(e.code.as_str(), "E0433" | "E0432" | "E0412" | "E0425")
            && (e.message.contains("`std`") || e.message.contains("std::"))
    };
    let (rule, what) = if let Some(e) = errors
        .iter()
        .find(|e| e.code == "E0463" && e.message.contains("`std`"))
    {
        (
            rules::PTX_NEEDS_NO_STD,
            format!(
                "crate `{krate}` needs std{}, which the GPU does not have: make the crate no_std on the GPU with `#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx))]` at the top of {}, and gate host-only code and dependencies with `#[cfg(not(target_arch = \"nvptx64\"))]`",
                where_(e),
                lib_rs.display()
            ),
        )
    } else if let Some(e) = errors.iter().find(|e| uses_std(e)) {
        (
            rules::PTX_USES_STD,
            format!(
                "crate `{krate}` uses std{}, which does not exist on the GPU: use `core::` (kernels cannot allocate: fixed-size arrays instead of Vec), or move the code out of the kernel behind `#[cfg(not(target_arch = \"nvptx64\"))]`",
                where_(e)
            ),
        )
    } else if let Some(e) = errors
        .iter()
        .find(|e| e.code == "E0658" && e.message.contains("ptx-kernel"))
    {
        (
            rules::PTX_NEEDS_FEATURE,
            format!(
                "crate `{krate}`{}: kernel entry points need the `abi_ptx` feature on the GPU: add `#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx))]` at the top of {}",
                where_(e),
                lib_rs.display()
            ),
        )
    } else {
        (
            rules::PTX_COMPILE,
            format!(
                "crate `{krate}` does not compile for nvptx64-nvidia-cuda{}: {}",
                where_(&first),
                first.message
            ),
        )
    };
    BuildError::new(rule, format!("{what}\n{rendered}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "\
use ck_macros::tile_kernel;

#[tile_kernel(block = 64)]
pub fn scale(x: GlobalMut<f32>, a: f32) {
    let t = thread_idx();
    let v = std::vec::Vec::<f32>::new();
    x.store(t, a);
}

pub fn host_helper() {
    let v = 1;
}
";

    #[test]
    fn a_line_inside_a_kernel_body_names_the_kernel() {
        assert_eq!(enclosing_kernel(SRC, 6).as_deref(), Some("scale"));
        assert_eq!(enclosing_kernel(SRC, 5).as_deref(), Some("scale"));
    }

    #[test]
    fn lines_outside_kernels_name_none() {
        assert_eq!(enclosing_kernel(SRC, 11), None);
        assert_eq!(enclosing_kernel(SRC, 1), None);
    }

    #[test]
    fn std_in_a_kernel_is_ptx_uses_std_with_the_kernel_and_the_fix() {
        let dir = std::env::temp_dir().join(format!("ck-build-diag-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), SRC).unwrap();
        let e = explain(
            "k",
            &dir,
            &[CompilerError {
                code: "E0433".into(),
                message: "failed to resolve: use of unresolved module or unlinked crate `std`"
                    .into(),
                rendered: "error[E0433]: …".into(),
                at: Some(("src/lib.rs".into(), 6)),
            }],
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(e.rule, "ptx-uses-std");
        assert!(
            e.message.contains("in kernel `scale` (src/lib.rs:6)"),
            "{}",
            e.message
        );
        assert!(e.message.contains("use `core::`"), "{}", e.message);
        assert!(e.message.ends_with("error[E0433]: …"), "{}", e.message);
    }
}
