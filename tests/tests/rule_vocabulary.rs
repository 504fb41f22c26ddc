//! One vocabulary of rules: every `error[name]` or `warning[name]` written in the workspace's
//! sources (compile-time assertions, which cannot format a `RuleId`, and the Python package's
//! errors) names a rule of `ck_core::rules`, with the severity it is written with; and no two
//! rules share a name.

use ck_core::rules::{self, Severity};
use std::collections::HashSet;
use std::path::PathBuf;

/// The sources a rule can be written in.
fn sources() -> Vec<PathBuf> {
    ck_tests::workspace_sources(&["rs", "py"])
}

/// `(severity, name)` of every `error[name]` / `warning[name]` in `text` whose name is
/// kebab-case (not a format template like `error[{}]`), and in the Python package (`python`)
/// of every `raise _error(Kind, "name", …)`.
fn written_rules(text: &str, python: bool) -> Vec<(Severity, String)> {
    let kebab = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let mut out = Vec::new();
    for (marker, severity) in [("error[", Severity::Error), ("warning[", Severity::Warning)] {
        for (at, _) in text.match_indices(marker) {
            let rest = &text[at + marker.len()..];
            let Some(end) = rest.find(']') else { continue };
            if kebab(&rest[..end]) {
                out.push((severity, rest[..end].to_string()));
            }
        }
    }
    if python {
        for (at, _) in text.match_indices("raise _error(") {
            let args = &text[at + "raise _error(".len()..];
            let name = args.split('"').nth(1).unwrap_or("");
            if kebab(name) {
                out.push((Severity::Error, name.to_string()));
            }
        }
    }
    out
}

/// Placeholders documentation uses for "some rule".
const PLACEHOLDERS: &[&str] = &["rule", "rule-name", "name"];

#[test]
fn every_written_rule_is_in_the_vocabulary() {
    let mut unknown = Vec::new();
    let mut seen = 0;
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        let python = path.extension().is_some_and(|e| e == "py");
        for (severity, name) in written_rules(&text, python) {
            if PLACEHOLDERS.contains(&name.as_str()) {
                continue;
            }
            seen += 1;
            match rules::by_name(&name) {
                Some(r) if r.severity() == severity => {}
                Some(r) => unknown.push(format!(
                    "{}: {name} is written as {severity:?} but the rule is {:?}",
                    path.display(),
                    r.severity()
                )),
                None => unknown.push(format!("{}: {name}", path.display())),
            }
        }
    }
    assert!(seen > 20, "only {seen} rules found: is the scan broken?");
    assert!(
        unknown.is_empty(),
        "rules written in the sources but not in ck_core::rules:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn rule_names_are_unique() {
    let mut names = HashSet::new();
    for r in rules::ALL {
        assert!(names.insert(r.name()), "{} twice", r.name());
    }
}

#[test]
fn every_typed_rule_maps_into_the_vocabulary() {
    // The enums that carry a message's data name their rule through the table.
    assert_eq!(ck_core::Rule::SwizzleBits.id(), rules::SWIZZLE_BITS);
    assert_eq!(
        ck_core::encoding::EncodingRule::RUnowned.id().severity(),
        Severity::Warning
    );
    assert_eq!(ck_core::host::Fault::Deadlock.id(), rules::DEADLOCK);
    for r in rules::ALL {
        assert_eq!(rules::by_name(r.name()), Some(*r));
    }
}
