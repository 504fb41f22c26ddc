//! Check: the rules of ck-core's encoding checker, located at the exact tokens.
//!
//! The rules themselves live once, in `ck_core::encoding` (also used by const evaluation for
//! non-literal lengths); this file only builds the encoding from the parsed lists, asks for every
//! violation and maps each [`Loc`] to the span of the token it names.

use crate::diag::Diagnostic;
use crate::parse::{DistributionDef, Int, Len, List, Spelling};
use ck_core::encoding::{
    Checks, ComponentNames, Encoding, EncodingRule, Loc, UncheckedEncoding, Violation,
    MAX_COMPONENTS, MAX_P, MAX_X,
};
use ck_core::rules;
use ck_core::{Dims, Index};
use proc_macro2::Span;

/// A definition that passed every check that can run at expansion time.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The encoding, when every length is a literal (`None` when `parametric`: const
    /// evaluation checks and derives it).
    pub encoding: Option<Encoding>,
    /// True if some length, the warp size or the block size is not a literal: the remaining
    /// checks then run in const evaluation and the emitted code is generic.
    pub parametric: bool,
    /// Literal warp size.
    pub warp_size: Option<u32>,
    /// Literal block size (declared or derived).
    pub block_size: Option<u32>,
    /// Warnings to report.
    pub warnings: Vec<Diagnostic>,
}

/// Placeholder for a non-literal length: positive and > 1, so structural rules see a real
/// component; every rule that depends on the value is left to const evaluation.
const PLACEHOLDER: Index = 2;

fn len_value(l: &Len) -> Index {
    match l.value {
        Some(v) => v.clamp(Index::MIN as i64, Index::MAX as i64) as Index,
        None => PLACEHOLDER,
    }
}

fn int_value(i: &Int) -> Index {
    i.value.clamp(-1, 1 << 20) as Index
}

/// Runs every expansion-time check; errors are returned all at once.
pub fn check(def: &DistributionDef) -> Result<Checked, Vec<Diagnostic>> {
    let mut errors = capacity(def);
    if !errors.is_empty() {
        return Err(errors);
    }
    let r: Vec<Index> = def.r.items.iter().map(len_value).collect();
    let h: Vec<Vec<Index>> = def
        .h
        .items
        .iter()
        .map(|l| l.items.iter().map(len_value).collect())
        .collect();
    let pm: Vec<Vec<Index>> = def
        .p_major
        .items
        .iter()
        .map(|l| l.items.iter().map(int_value).collect())
        .collect();
    let pn: Vec<Vec<Index>> = def
        .p_minor
        .items
        .iter()
        .map(|l| l.items.iter().map(int_value).collect())
        .collect();
    let ym: Vec<Index> = def.y_major.items.iter().map(int_value).collect();
    let yn: Vec<Index> = def.y_minor.items.iter().map(int_value).collect();
    let hs: Vec<&[Index]> = h.iter().map(Vec::as_slice).collect();
    let pms: Vec<&[Index]> = pm.iter().map(Vec::as_slice).collect();
    let pns: Vec<&[Index]> = pn.iter().map(Vec::as_slice).collect();
    let unchecked = match UncheckedEncoding::new(&r, &hs, &pms, &pns, &ym, &yn) {
        Ok(e) => e,
        Err(v) => return Err(vec![diagnostic(def, None, &v)]),
    };

    let lengths_literal = def
        .r
        .items
        .iter()
        .chain(def.h.items.iter().flat_map(|l| &l.items))
        .all(|l| l.value.is_some())
        && def
            .shape
            .as_ref()
            .is_none_or(|s| s.items.iter().all(|l| l.value.is_some()));
    let warp_size = def
        .warp_size
        .as_ref()
        .and_then(|l| l.value)
        .map(|v| v.clamp(0, u32::MAX as i64) as u32);
    let declared_block = def
        .block_size
        .as_ref()
        .and_then(|l| l.value)
        .map(|v| v.clamp(0, u32::MAX as i64) as u32);
    let parametric = !lengths_literal
        || (def.warp_size.is_some() && warp_size.is_none())
        || (def.block_size.is_some() && declared_block.is_none());
    let shape = match &def.shape {
        Some(s) => Dims::from_slice(&s.items.iter().map(len_value).collect::<Vec<_>>()),
        None => Dims::EMPTY,
    };
    let checks = Checks {
        warp_size: warp_size.unwrap_or(32),
        block_size: declared_block.unwrap_or(0),
        shape,
    };

    let violations = unchecked.errors(&checks);
    for &v in &violations {
        if parametric && v.rule.depends_on_lengths() && !located_at_literal(def, v.loc) {
            continue; // left to const evaluation
        }
        if v.rule == EncodingRule::WarpSizeMismatch && warp_size.is_none() {
            continue;
        }
        errors.push(diagnostic(def, Some(&unchecked), &v));
    }
    let unlisted = violations.found() - violations.iter().len();
    if let (Some(last), true) = (errors.last_mut(), unlisted > 0) {
        last.message += &format!(" ({unlisted} more violations are not listed: fix these first)");
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if parametric {
        return Ok(Checked {
            encoding: None,
            parametric,
            warp_size,
            block_size: None,
            warnings: Vec::new(),
        });
    }
    // No error was found, so no structural rule is broken: `check` builds the adaptor.
    let encoding = unchecked
        .check()
        .map_err(|v| vec![diagnostic(def, Some(&unchecked), &v)])?;
    let warnings = unchecked
        .warnings()
        .iter()
        .map(|v| diagnostic(def, Some(&unchecked), v))
        .collect();
    Ok(Checked {
        encoding: Some(encoding),
        parametric,
        warp_size,
        block_size: Some(encoding.block_size() as u32),
        warnings,
    })
}

/// Lists longer than ck-core's fixed capacities, reported before building the encoding.
fn capacity(def: &DistributionDef) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut over = |n: usize, max: usize, span: Span, what: &str| {
        if n > max {
            out.push(Diagnostic::new(
                rules::CAPACITY_EXCEEDED,
                span,
                format!("{what} has {n} entries; at most {max} are supported"),
            ));
        }
    };
    over(def.h.items.len(), MAX_X, def.h.span, "h");
    over(def.r.items.len(), MAX_COMPONENTS, def.r.span, "r");
    for l in &def.h.items {
        over(l.items.len(), MAX_COMPONENTS, l.span, "this H list");
    }
    for l in def.p_major.items.iter().chain(&def.p_minor.items) {
        over(l.items.len(), MAX_COMPONENTS, l.span, "this P list");
    }
    over(
        def.y_major.items.len(),
        MAX_COMPONENTS,
        def.y_major.span,
        "the Y list",
    );
    over(
        def.y_minor.items.len(),
        MAX_COMPONENTS,
        def.y_minor.span,
        "the Y list",
    );
    for (l, what) in [
        (def.p_major.items.len(), def.p_major.span),
        (def.p_minor.items.len(), def.p_minor.span),
    ] {
        if l > MAX_P {
            out.push(Diagnostic::new(rules::P_COUNT,
                what,
                format!("the encoding has {l} P dimensions; the partition index supports 1 ([lane]) or 2 ([warp, lane])"),
            ));
        }
    }
    out
}

fn located_at_literal(def: &DistributionDef, loc: Loc) -> bool {
    match loc {
        Loc::R(j) => def
            .r
            .items
            .get(j as usize)
            .is_some_and(|l| l.value.is_some()),
        Loc::H(x, j) => def
            .h
            .items
            .get(x as usize)
            .and_then(|l| l.items.get(j as usize))
            .is_some_and(|l| l.value.is_some()),
        _ => false,
    }
}

fn item<T>(l: &List<T>, i: u8, span: impl Fn(&T) -> Span) -> Span {
    l.items.get(i as usize).map(span).unwrap_or(l.span)
}

fn nested<T>(l: &List<List<T>>, i: u8, j: u8, span: impl Fn(&T) -> Span) -> Span {
    match l.items.get(i as usize) {
        Some(inner) => item(inner, j, span),
        None => l.span,
    }
}

/// The span of the token a location names.
pub fn span_of(def: &DistributionDef, loc: Loc) -> Span {
    let whole = def.ident.span();
    match loc {
        Loc::Whole => whole,
        Loc::R(j) => item(&def.r, j, |l| l.span),
        Loc::H(x, j) => nested(&def.h, x, j, |l| l.span),
        Loc::HList(x) => item(&def.h, x, |l| l.span),
        Loc::HAll => def.h.span,
        Loc::PMajor(p, k) => nested(&def.p_major, p, k, |i| i.span),
        Loc::PMinor(p, k) => nested(&def.p_minor, p, k, |i| i.span),
        Loc::PMajorList(p) => item(&def.p_major, p, |l| l.span),
        Loc::PMinorList(p) => item(&def.p_minor, p, |l| l.span),
        Loc::PMajorAll => def.p_major.span,
        Loc::PMinorAll => def.p_minor.span,
        Loc::YMajor(y) => item(&def.y_major, y, |i| i.span),
        Loc::YMinor(y) => item(&def.y_minor, y, |i| i.span),
        Loc::YMajorAll => def.y_major.span,
        Loc::YMinorAll => def.y_minor.span,
        Loc::WarpSize => def.warp_size.as_ref().map(|l| l.span).unwrap_or(whole),
        Loc::BlockSize => def.block_size.as_ref().map(|l| l.span).unwrap_or(whole),
        Loc::Shape(x) => def
            .shape
            .as_ref()
            .map(|s| item(s, x, |l| l.span))
            .unwrap_or(whole),
        Loc::ShapeAll => def.shape.as_ref().map(|s| s.span).unwrap_or(whole),
    }
}

/// The diagnostic for a violation: ck-core's message, components called by the named
/// spelling's names where it was used, at the span of its token.
pub fn diagnostic(
    def: &DistributionDef,
    enc: Option<&UncheckedEncoding>,
    v: &Violation,
) -> Diagnostic {
    let message = match enc {
        Some(e) => {
            let named = (def.spelling == Spelling::Named)
                .then_some(def.names.as_ref())
                .flatten();
            match named {
                Some(names) => {
                    let x: Vec<&str> = names.x.iter().map(String::as_str).collect();
                    let h: Vec<Vec<&str>> = names
                        .h
                        .iter()
                        .map(|c| c.iter().map(String::as_str).collect())
                        .collect();
                    let h: Vec<&[&str]> = h.iter().map(Vec::as_slice).collect();
                    let r: Vec<&str> = names.r.iter().map(String::as_str).collect();
                    let table = ComponentNames {
                        x: &x,
                        h: &h,
                        r: &r,
                    };
                    v.message_named(e, &table).as_str().to_string()
                }
                None => v.message(e).as_str().to_string(),
            }
        }
        None => {
            // Capacity errors raised before an encoding exists.
            let empty =
                UncheckedEncoding::new(&[], &[], &[], &[], &[], &[]).expect("empty encoding fits");
            v.message(&empty).as_str().to_string()
        }
    };
    let span = span_of(def, v.loc);
    Diagnostic::new(v.rule.id(), span, message)
}

#[cfg(test)]
mod tests {
    use crate::analyze_source;

    fn messages(src: &str) -> Vec<String> {
        match analyze_source(src) {
            Ok(_) => vec![],
            Err(diags) => diags.into_iter().map(|d| d.message).collect(),
        }
    }

    /// Messages name components as the definition spelled them: `x.component` and `x`.
    #[test]
    fn named_spelling_messages_use_the_names_raw_ones_the_indices() {
        let named = messages(
            "struct T { warp_size: 32, block_size: 64,
               h: { m: [warp: 2, lane: 32], n: [rep: 4, vec: 2] },
               p: [[m.warp], [m.lane]], y: [n.vec] }",
        );
        assert_eq!(named.len(), 1, "{named:?}");
        assert!(
            named[0].starts_with("`n.rep` (length 4) is claimed by no P and no Y")
                && named[0].contains("positions of `n` would never be touched"),
            "{}",
            named[0]
        );
        let raw = messages(
            "struct T { warp_size: 32, block_size: 64, r: [],
               h: [[2, 32], [4, 2]], p_major: [[1], [1]], p_minor: [[0], [1]],
               y_major: [2], y_minor: [1] }",
        );
        assert_eq!(raw.len(), 1, "{raw:?}");
        assert!(
            raw[0].starts_with("H[1][0] (length 4) is claimed by no P and no Y")
                && raw[0].contains("positions of X1 would never be touched"),
            "{}",
            raw[0]
        );
    }

    /// Past the first `Violations::CAPACITY`, violations are counted, not dropped silently.
    #[test]
    fn violations_past_the_list_are_counted() {
        // 8 lists of 10 zero lengths: 80 `length-not-positive` errors, then `capacity-exceeded`
        // (8 X dims + 80 components + 1 P = 89 hidden dimensions; the adaptor holds 64).
        let zeros = ["[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]"; 8].join(", ");
        let m = messages(&format!(
            "struct T {{ warp_size: 32, r: [], h: [{zeros}], p_major: [[1]], p_minor: [[0]],
               y_major: [1], y_minor: [1] }}"
        ));
        let cap = ck_core::encoding::Violations::CAPACITY;
        assert_eq!(m.len(), cap, "{m:?}");
        assert!(m[..cap - 1].iter().all(|m| !m.contains("not listed")));
        assert!(
            m[cap - 1].ends_with("(17 more violations are not listed: fix these first)"),
            "{}",
            m[cap - 1]
        );
    }
}
