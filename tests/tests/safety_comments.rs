//! Every `unsafe` block and `unsafe impl` in the workspace's sources says why it holds (a
//! `// SAFETY:` comment on it or just above), and every `unsafe fn` states its contract (a
//! `# Safety` section in its documentation) — the rule a reviewer checks by grepping.

use std::path::PathBuf;

/// The workspace's Rust sources (not tests: they exercise the contracts, they do not add any).
fn sources() -> Vec<PathBuf> {
    ck_tests::workspace_sources(&["rs"])
}

/// The code of a line: without its `//` comment (string literals containing `//` are rare
/// enough here not to matter).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// Whether the code declares or opens something unsafe: `(block, fn)`.
fn unsafe_kind(code: &str) -> (bool, bool) {
    let mut block = false;
    let mut func = false;
    for (i, _) in code.match_indices("unsafe") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = code[i + "unsafe".len()..].trim_start();
        block |= rest.starts_with('{') || rest.starts_with("impl");
        func |= rest.starts_with("fn") || rest.starts_with("extern");
    }
    (block, func)
}

#[test]
fn every_unsafe_block_has_a_safety_comment_and_every_unsafe_fn_a_contract() {
    let mut missing = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let (block, func) = unsafe_kind(code(line));
            let above = |n: usize| lines[i.saturating_sub(n)..=i].join("\n");
            if block && !above(6).contains("SAFETY") {
                missing.push(format!(
                    "{}:{}: unsafe without a SAFETY comment: {}",
                    path.display(),
                    i + 1,
                    line.trim()
                ));
            }
            if func && !above(16).contains("# Safety") {
                missing.push(format!(
                    "{}:{}: unsafe fn without a `# Safety` section: {}",
                    path.display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_check_sees_what_it_looks_for() {
    assert_eq!(unsafe_kind("    unsafe { x.read() }"), (true, false));
    assert_eq!(
        unsafe_kind("unsafe impl<T> Send for H<T> {}"),
        (true, false)
    );
    assert_eq!(
        unsafe_kind("pub unsafe fn from_raw(p: *const T) -> Self {"),
        (false, true)
    );
    assert_eq!(unsafe_kind("let not_unsafe = 1;"), (false, false));
    assert_eq!(code("x // unsafe { }"), "x ");
}
