//! Helpers shared by the workspace-level tests.

use ck_core::encoding::{Encoding, EncodingRule};
use ck_core::{Dims, Index, TileDistribution};

/// Checks a macro-generated distribution against the ck-core model at every (thread, Y) point:
/// constants, partition index, X (the model evaluates the spec §5.1 adaptor), D, R index, and
/// that `for_each_y` / `sweep` visit every Y point once, in D order and in span order.
pub fn assert_matches_model<D: TileDistribution>() {
    let e: Encoding = D::ENCODING;
    let w = D::WARP_SIZE;
    assert_eq!(D::X_LENGTHS.as_ref(), e.x_lengths().as_slice());
    assert_eq!(D::Y_LENGTHS.as_ref(), e.y_lengths().as_slice());
    assert_eq!(D::R_LENGTHS.as_ref(), e.r_lengths().as_slice());
    assert_eq!(D::THREAD_BUFFER_SIZE as Index, e.thread_buffer_size());
    assert_eq!(D::BLOCK_SIZE as Index, e.block_size());
    let adaptor = e.adaptor();
    let mut visited_d = Vec::new();
    D::for_each_y(|y, d| visited_d.push((y, d)));
    assert_eq!(visited_d.len(), D::THREAD_BUFFER_SIZE);
    for (i, (y, d)) in visited_d.iter().enumerate() {
        assert_eq!(*d, i, "for_each_y must run in D order");
        assert_eq!(D::d_index(*y), *d);
        assert_eq!(e.d_index(&Dims::from_slice(y.as_ref())) as usize, *d);
    }
    // Sweep: every point once, ordered by the span index (X0's span digits most significant).
    let mut swept = Vec::new();
    D::sweep(|y, d| swept.push((y, d)));
    assert_eq!(swept.len(), D::THREAD_BUFFER_SIZE);
    let span_key = |y: &D::Y| -> Vec<Index> {
        let mut key = vec![Vec::new(); e.nx()];
        for (i, &v) in y.as_ref().iter().enumerate() {
            let (sx, sm) = e.y_to_span(i);
            key[sx].push((sm, v));
        }
        key.into_iter()
            .flat_map(|mut k| {
                k.sort();
                k.into_iter().map(|(_, v)| v)
            })
            .collect()
    };
    for pair in swept.windows(2) {
        assert!(
            span_key(&pair[0].0) < span_key(&pair[1].0),
            "sweep must follow span order"
        );
    }
    for (y, d) in &swept {
        assert_eq!(D::d_index(*y), *d);
    }
    for tid in 0..D::BLOCK_SIZE {
        let p = D::partition_index(tid);
        assert_eq!(
            p.as_ref(),
            e.partition_index(tid, w).as_slice(),
            "thread {tid}"
        );
        let pd = Dims::from_slice(p.as_ref());
        assert_eq!(
            D::rs_index(p).as_ref(),
            e.rs_index(&pd).as_slice(),
            "rs of thread {tid}"
        );
        for (y, _) in &visited_d {
            let mut top = pd;
            for &v in y.as_ref() {
                top = top.push(v);
            }
            let model = adaptor.calculate_bottom_index(&top);
            assert_eq!(
                D::x_index(p, *y).as_ref(),
                model.as_slice(),
                "thread {tid} y {y:?}"
            );
        }
    }
}

/// The rule names of every expansion-time error for a `tile_distribution!` body.
pub fn error_rules(src: &str) -> Vec<&'static str> {
    match ck_dsl::analyze_source(src) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .iter()
            .filter(|d| d.severity() == ck_dsl::Severity::Error)
            .map(|d| d.rule.name())
            .collect(),
    }
}

/// True if `rule` is one of ck-core's encoding rules (so a test cannot pass on a typo).
pub fn is_encoding_rule(rule: &str) -> bool {
    use EncodingRule as R;
    [
        R::LengthNotPositive,
        R::EmptyX,
        R::EmptyH,
        R::NoY,
        R::ListLengthMismatch,
        R::IndexOutOfRange,
        R::YMapsToR,
        R::EmptyP,
        R::PCount,
        R::ClaimedTwice,
        R::Unclaimed,
        R::WarpSizeMismatch,
        R::BlockSizeMismatch,
        R::ShapeMismatch,
    ]
    .iter()
    .any(|r| r.name() == rule)
}

/// The README's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

// The examples of the docs/ pages that have Rust code blocks, run as doctests, one struct per
// page; they build against this crate's dev-dependencies (`ck-kernels` among them).
#[cfg(doctest)]
#[doc = include_str!("../../docs/distributions.md")]
struct DocsDistributions;

#[cfg(doctest)]
#[doc = include_str!("../../docs/kernels-and-emulator.md")]
struct DocsKernelsAndEmulator;

#[cfg(doctest)]
#[doc = include_str!("../../docs/tiles-and-windows.md")]
struct DocsTilesAndWindows;

#[cfg(doctest)]
#[doc = include_str!("../../docs/shared-memory.md")]
struct DocsSharedMemory;

#[cfg(doctest)]
#[doc = include_str!("../../docs/writing-kernels.md")]
struct DocsWritingKernels;

#[cfg(doctest)]
#[doc = include_str!("../../docs/operators.md")]
struct DocsOperators;

#[cfg(doctest)]
#[doc = include_str!("../../docs/core.md")]
struct DocsCore;

/// The files under the workspace's source folders (not its tests) whose extension is one of
/// `extensions`: what the source-wide checks (SAFETY comments, the rule vocabulary) read.
pub fn workspace_sources(extensions: &[&str]) -> Vec<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = [
        "ck-core/src",
        "ck-kernels/src",
        "ck-kernels/cli/src",
        "ck-build/src",
        "ck-macros",
        "examples/src",
        "ck-python/src",
        "python/src",
        "python/ck_rs",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|e| extensions.iter().any(|x| e == *x))
            {
                out.push(path);
            }
        }
    }
    assert!(out.len() > 20, "found only {} source files", out.len());
    out
}
