//! trybuild: every checker rule fails the build at the offending token (see the `.stderr`
//! files in `tests/ui/` for the caret), plus const-evaluation checks, unknown names, all
//! violations in one compile, and the typed stub.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
