//! Kernel facts recorded in the module by `#[tile_kernel]` (the exported statics
//! `__ck_kernel_info_<name>` = `[version, block, min_blocks_per_sm, shared_bytes, cluster]`), and
//! the entry directives they turn into.
//!
//! Rust cannot spell PTX launch bounds or cluster dimensions, so the builder writes them: an
//! entry declared with `#[tile_kernel(block = 384, min_blocks_per_sm = 1, cluster = 2)]` gets
//!
//! ```text
//! .visible .entry gemm_tma(
//!     …
//! )
//! .maxntid 384, 1, 1
//! .minnctapersm 1
//! .reqnctapercluster 2, 1, 1
//! {
//! ```
//!
//! and the statics are removed, so the module holds only the kernels.

use super::BuildError;
use ck_core::rules;

const PREFIX: &str = "__ck_kernel_info_";

/// What `#[tile_kernel]` recorded about one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    /// The entry's name.
    pub name: String,
    /// `block = N`, if declared.
    pub block: Option<u32>,
    /// `min_blocks_per_sm = N`, if declared.
    pub min_blocks_per_sm: Option<u32>,
    /// Shared memory of its `shared!` arrays, bytes.
    pub shared_bytes: u32,
    /// `cluster = N`, if declared.
    pub cluster: Option<u32>,
}

/// The values of a PTX global initialiser `name[N] = {a, b, …}` declared as `.b8` (little-endian
/// bytes) or as 32-bit words. LLVM leaves out trailing zeros, so the list is padded to `N`.
fn words(decl: &str) -> Option<Vec<u32>> {
    let len: usize = decl.split_once('[')?.1.split_once(']')?.0.parse().ok()?;
    let init = decl.split_once('{')?.1.split_once('}')?.0;
    let mut values: Vec<u64> = init
        .split(',')
        .map(|v| v.trim().parse().ok())
        .collect::<Option<_>>()?;
    if values.len() > len {
        return None;
    }
    values.resize(len, 0);
    if decl.contains(".b8 ") || decl.contains(".u8 ") {
        Some(
            values
                .chunks(4)
                .map(|c| c.iter().rev().fold(0u32, |w, &b| (w << 8) | b as u32))
                .collect(),
        )
    } else {
        Some(values.into_iter().map(|v| v as u32).collect())
    }
}

/// Reads the kernel facts out of `ptx` and removes their declarations.
pub fn extract(ptx: &str) -> Result<(String, Vec<KernelInfo>), BuildError> {
    let mut kept = String::with_capacity(ptx.len());
    let mut infos = Vec::new();
    for line in ptx.split_inclusive('\n') {
        let Some(at) = line.find(PREFIX).filter(|_| line.contains(".global")) else {
            kept.push_str(line);
            continue;
        };
        let name: String = line[at + PREFIX.len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let w = words(line).filter(|w| w.len() == 5).ok_or_else(|| {
            BuildError::new(
                rules::PTX_KERNEL_INFO,
                format!("cannot read the kernel facts of `{name}` from the module: `{}`; ck-build and ck-macros are of different versions", line.trim()),
            )
        })?;
        if w[0] != ck_core::kernel::KERNEL_INFO_VERSION {
            return Err(BuildError::new(
                rules::PTX_KERNEL_INFO,
                format!("kernel `{name}` was compiled by a ck-macros whose kernel facts are version {} (this ck-build reads version {}); use matching versions of ck-macros and ck-build", w[0], ck_core::kernel::KERNEL_INFO_VERSION),
            ));
        }
        let opt = |v: u32| (v != 0).then_some(v);
        infos.push(KernelInfo {
            name,
            block: opt(w[1]),
            min_blocks_per_sm: opt(w[2]),
            shared_bytes: w[3],
            cluster: opt(w[4]),
        });
    }
    Ok((kept, infos))
}

/// `ptx` with `.maxntid` / `.minnctapersm` on every entry of `infos` that declares
/// `min_blocks_per_sm`, and `.reqnctapercluster` on those that declare `cluster`.
pub fn apply(ptx: &str, infos: &[KernelInfo]) -> Result<String, BuildError> {
    let mut out = ptx.to_string();
    for k in infos {
        let mut directives = String::new();
        if let (Some(block), Some(blocks)) = (k.block, k.min_blocks_per_sm) {
            directives += &format!(".maxntid {block}, 1, 1\n.minnctapersm {blocks}\n");
        }
        if let Some(c) = k.cluster {
            directives += &format!(".reqnctapercluster {c}, 1, 1\n");
        }
        if directives.is_empty() {
            continue;
        }
        let entry = format!(".entry {}(", k.name);
        let start = out.find(&entry).ok_or_else(|| {
            BuildError::new(
                rules::PTX_KERNEL_INFO,
                format!(
                    "kernel `{}` is declared but its entry is not in the module",
                    k.name
                ),
            )
        })?;
        // The body starts at the first `{` after the parameter list's `)`.
        let close = start + out[start..].find(')').unwrap_or(0);
        let brace = close + out[close..].find('{').unwrap_or(0);
        if brace <= close {
            return Err(BuildError::new(
                rules::PTX_KERNEL_INFO,
                format!("cannot find the body of entry `{}`", k.name),
            ));
        }
        out.insert_str(brace, &directives);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.visible .global .align 4 .b8 __ck_kernel_info_gemm[20] = {2, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 32, 1};
.visible .global .align 4 .u32 __ck_kernel_info_copy[5] = {2, 128, 0, 0, 2};
.visible .entry gemm(
\t.param .u64 gemm_param_0
)
{
\tret;
}
.visible .entry copy(
\t.param .u64 copy_param_0
)
{
\tret;
}
";

    #[test]
    fn facts_are_read_in_both_spellings_and_removed() {
        let (kept, infos) = extract(PTX).unwrap();
        assert!(!kept.contains(PREFIX));
        assert_eq!(
            infos,
            vec![
                KernelInfo {
                    name: "gemm".into(),
                    block: Some(256),
                    min_blocks_per_sm: Some(2),
                    shared_bytes: 0x1_2000, // bytes 0, 32, 1, (0) little-endian
                    cluster: None,
                },
                KernelInfo {
                    name: "copy".into(),
                    block: Some(128),
                    min_blocks_per_sm: None,
                    shared_bytes: 0,
                    cluster: Some(2),
                },
            ]
        );
    }

    #[test]
    fn directives_go_between_the_parameters_and_the_body_of_the_entries_that_declare_them() {
        let (kept, infos) = extract(PTX).unwrap();
        let out = apply(&kept, &infos).unwrap();
        assert!(out.contains("gemm_param_0\n)\n.maxntid 256, 1, 1\n.minnctapersm 2\n{"));
        assert!(out.contains("copy_param_0\n)\n.reqnctapercluster 2, 1, 1\n{"));
        assert_eq!(out.matches(".maxntid").count(), 1);
        assert_eq!(out.matches(".reqnctapercluster").count(), 1);
    }

    #[test]
    fn another_version_of_the_facts_is_an_error() {
        let e = extract(".visible .global .align 4 .u32 __ck_kernel_info_k[5] = {1, 1, 0, 0, 0};")
            .unwrap_err();
        assert_eq!(e.rule, "ptx-kernel-info");
    }
}
