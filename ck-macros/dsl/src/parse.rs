//! Parse: tokens → [`DistributionDef`], keeping the span of every length, index and list so the
//! checker can point at the exact token. Both spellings end in the same raw lists; the named one
//! also records the names, for messages.
//!
//! Raw spelling (CK's `tile_distribution_encoding`, field for field):
//! ```text
//! struct RmsX { warp_size: 64, block_size: 256, r: [], h: [[2, 2, 4, 1], [2, 2, 16, 8]],
//!               p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
//!               y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3] }
//! ```
//! Named spelling (components have names; P and Y list them as `x.component` or `r.name`):
//! ```text
//! struct RmsX { warp_size: 32,
//!               h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
//!               p: [[m.warp, n.warp], [m.lane, n.lane]],
//!               y: [m.repeat, m.vec, n.repeat, n.vec] }
//! ```

use crate::diag::Diagnostic;
use ck_core::rules;
use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{braced, bracketed, Attribute, Expr, Generics, Ident, Token, Visibility};

/// A length: a literal (checked at expansion time) or any const expression (checked in const
/// evaluation).
#[derive(Clone, Debug)]
pub struct Len {
    /// The literal value, if the expression is an integer literal (possibly negated).
    pub value: Option<i64>,
    /// The expression as written.
    pub expr: Expr,
    /// Where it is.
    pub span: Span,
}

/// An integer index (majors, minors) and where it is.
#[derive(Clone, Copy, Debug)]
pub struct Int {
    /// The value.
    pub value: i64,
    /// Where it is.
    pub span: Span,
}

/// A bracketed list and the span of its brackets.
#[derive(Clone, Debug)]
pub struct List<T> {
    /// The entries.
    pub items: Vec<T>,
    /// The whole list.
    pub span: Span,
}

impl<T> List<T> {
    fn empty(span: Span) -> Self {
        List {
            items: Vec::new(),
            span,
        }
    }
}

/// Names of the named spelling.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// R component names.
    pub r: Vec<String>,
    /// X names.
    pub x: Vec<String>,
    /// H component names per X.
    pub h: Vec<Vec<String>>,
}

/// Which spelling was used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// CK's six lists.
    Raw,
    /// Named components.
    Named,
}

/// A parsed `tile_distribution!` body.
#[derive(Clone, Debug)]
pub struct DistributionDef {
    /// Outer attributes (doc comments pass through).
    pub attrs: Vec<Attribute>,
    /// Visibility of the generated struct.
    pub vis: Visibility,
    /// Its name.
    pub ident: Ident,
    /// Its generics (const parameters only).
    pub generics: Generics,
    /// `warp_size`.
    pub warp_size: Option<Len>,
    /// `block_size`.
    pub block_size: Option<Len>,
    /// `shape`.
    pub shape: Option<List<Len>>,
    /// Which spelling.
    pub spelling: Spelling,
    /// R lengths.
    pub r: List<Len>,
    /// H lengths.
    pub h: List<List<Len>>,
    /// P majors.
    pub p_major: List<List<Int>>,
    /// P minors.
    pub p_minor: List<List<Int>>,
    /// Y majors.
    pub y_major: List<Int>,
    /// Y minors.
    pub y_minor: List<Int>,
    /// Component names (named spelling).
    pub names: Option<Names>,
}

const RAW_FIELDS: &[&str] = &[
    "warp_size",
    "block_size",
    "shape",
    "r",
    "h",
    "p_major",
    "p_minor",
    "y_major",
    "y_minor",
];
const NAMED_FIELDS: &[&str] = &["warp_size", "block_size", "shape", "r", "h", "p", "y"];

/// A component reference of the named spelling, resolved once every field is read.
#[derive(Clone, Debug)]
struct Ref {
    x: Ident,
    component: Ident,
    span: Span,
}

/// Parses a whole body. Syntax errors stop at the first; field-level errors are collected.
pub fn parse(tokens: TokenStream) -> Result<DistributionDef, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let result = (|input: ParseStream| parse_def(input, &mut diags)).parse2(tokens);
    match result {
        Ok(def) if diags.is_empty() => Ok(def),
        Ok(_) => Err(diags),
        Err(e) => {
            diags.push(e.into());
            Err(diags)
        }
    }
}

fn parse_len(input: ParseStream) -> syn::Result<Len> {
    let expr: Expr = input.parse()?;
    let span = expr.span();
    let value = literal_value(&expr);
    Ok(Len { value, expr, span })
}

fn literal_value(e: &Expr) -> Option<i64> {
    match e {
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse::<i64>().ok(),
            _ => None,
        },
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => literal_value(&u.expr).map(|v| -v),
        Expr::Paren(p) => literal_value(&p.expr),
        Expr::Group(g) => literal_value(&g.expr),
        _ => None,
    }
}

fn parse_int(input: ParseStream) -> syn::Result<Int> {
    let neg = input.peek(Token![-]);
    if neg {
        input.parse::<Token![-]>()?;
    }
    let lit: syn::LitInt = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected an integer index (majors and minors must be literals)",
        )
    })?;
    let v: i64 = lit.base10_parse()?;
    Ok(Int {
        value: if neg { -v } else { v },
        span: lit.span(),
    })
}

fn list<T>(
    input: ParseStream,
    item: impl Fn(ParseStream) -> syn::Result<T>,
) -> syn::Result<List<T>> {
    let content;
    let bracket = bracketed!(content in input);
    let mut items = Vec::new();
    while !content.is_empty() {
        items.push(item(&content)?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(List {
        items,
        span: bracket.span.join(),
    })
}

/// `[name: len, ...]`.
fn named_lens(input: ParseStream) -> syn::Result<(List<Len>, Vec<Ident>)> {
    let mut names = Vec::new();
    let l = list(input, |c| {
        let name: Ident = c.parse()?;
        c.parse::<Token![:]>()?;
        let len = parse_len(c)?;
        Ok((name, len))
    })?;
    let items = l
        .items
        .into_iter()
        .map(|(n, len)| {
            names.push(n);
            len
        })
        .collect();
    Ok((
        List {
            items,
            span: l.span,
        },
        names,
    ))
}

fn parse_ref(input: ParseStream) -> syn::Result<Ref> {
    let x: Ident = input.parse()?;
    input.parse::<Token![.]>().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected `x.component` (e.g. `m.lane`) or `r.name`",
        )
    })?;
    let component: Ident = input.parse()?;
    let span = x
        .span()
        .join(component.span())
        .unwrap_or_else(|| component.span());
    Ok(Ref { x, component, span })
}

/// Named H: the lists, the X names, the component names per X.
type NamedH = (List<List<Len>>, Vec<Ident>, Vec<Vec<Ident>>);

#[derive(Default)]
struct Fields {
    warp_size: Option<Len>,
    block_size: Option<Len>,
    shape: Option<List<Len>>,
    r: Option<List<Len>>,
    r_names: Option<Vec<Ident>>,
    h_raw: Option<List<List<Len>>>,
    h_named: Option<NamedH>,
    p_major: Option<List<List<Int>>>,
    p_minor: Option<List<List<Int>>>,
    y_major: Option<List<Int>>,
    y_minor: Option<List<Int>>,
    p: Option<List<List<Ref>>>,
    y: Option<List<Ref>>,
}

fn parse_def(input: ParseStream, diags: &mut Vec<Diagnostic>) -> syn::Result<DistributionDef> {
    let attrs = input.call(Attribute::parse_outer)?;
    let vis: Visibility = input.parse()?;
    input.parse::<Token![struct]>()?;
    let ident: Ident = input.parse()?;
    let mut generics: Generics = input.parse()?;
    generics.where_clause = input.parse()?;
    for p in &generics.params {
        if !matches!(p, syn::GenericParam::Const(_)) {
            diags.push(Diagnostic::new(
                rules::UNSUPPORTED_GENERIC,
                p.span(),
                "a distribution can only be generic over const parameters (e.g. `const VEC: i32`)",
            ));
        }
    }
    let content;
    braced!(content in input);
    if !input.is_empty() {
        return Err(input.error("unexpected tokens after the struct body"));
    }
    let mut f = Fields::default();
    let mut seen: Vec<String> = Vec::new();
    while !content.is_empty() {
        let name: Ident = content.parse()?;
        content.parse::<Token![:]>()?;
        let key = name.to_string();
        if seen.contains(&key) {
            diags.push(Diagnostic::new(
                rules::DUPLICATE_FIELD,
                name.span(),
                format!("`{key}` is given twice; keep one"),
            ));
        }
        seen.push(key.clone());
        match key.as_str() {
            "warp_size" => f.warp_size = Some(parse_len(&content)?),
            "block_size" => f.block_size = Some(parse_len(&content)?),
            "shape" => f.shape = Some(list(&content, parse_len)?),
            "r" => {
                // `[]` and `[wm: 2, ..]` are named; `[2, 4]` is raw.
                if content.fork().call(named_lens).is_ok() {
                    let (l, names) = named_lens(&content)?;
                    f.r = Some(l);
                    f.r_names = Some(names).filter(|n| !n.is_empty());
                } else {
                    f.r = Some(list(&content, parse_len)?);
                }
            }
            "h" => {
                if content.peek(syn::token::Brace) {
                    let inner;
                    let brace = braced!(inner in content);
                    let mut lists = Vec::new();
                    let mut xnames = Vec::new();
                    let mut cnames = Vec::new();
                    while !inner.is_empty() {
                        let x: Ident = inner.parse()?;
                        inner.parse::<Token![:]>()?;
                        let (l, names) = named_lens(&inner)?;
                        lists.push(l);
                        xnames.push(x);
                        cnames.push(names);
                        if inner.is_empty() {
                            break;
                        }
                        inner.parse::<Token![,]>()?;
                    }
                    f.h_named = Some((
                        List {
                            items: lists,
                            span: brace.span.join(),
                        },
                        xnames,
                        cnames,
                    ));
                } else {
                    f.h_raw = Some(list(&content, |c| list(c, parse_len))?);
                }
            }
            "p_major" => f.p_major = Some(list(&content, |c| list(c, parse_int))?),
            "p_minor" => f.p_minor = Some(list(&content, |c| list(c, parse_int))?),
            "y_major" => f.y_major = Some(list(&content, parse_int)?),
            "y_minor" => f.y_minor = Some(list(&content, parse_int)?),
            "p" => f.p = Some(list(&content, |c| list(c, parse_ref))?),
            "y" => f.y = Some(list(&content, parse_ref)?),
            _ => {
                diags.push(Diagnostic::new(
                    rules::UNKNOWN_FIELD,
                    name.span(),
                    format!(
                        "unknown field `{key}`; the raw spelling has {}, the named spelling {}",
                        RAW_FIELDS.join(", "),
                        NAMED_FIELDS.join(", ")
                    ),
                ));
                // Skip the value so the remaining fields are still checked.
                while !content.is_empty() && !content.peek(Token![,]) {
                    content.parse::<proc_macro2::TokenTree>()?;
                }
            }
        }
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    assemble(attrs, vis, ident, generics, f, diags)
}

fn assemble(
    attrs: Vec<Attribute>,
    vis: Visibility,
    ident: Ident,
    generics: Generics,
    f: Fields,
    diags: &mut Vec<Diagnostic>,
) -> syn::Result<DistributionDef> {
    let at = ident.span();
    let raw_used =
        f.p_major.is_some() || f.p_minor.is_some() || f.y_major.is_some() || f.y_minor.is_some();
    let named_used = f.p.is_some() || f.y.is_some();
    if raw_used && named_used {
        diags.push(Diagnostic::new(rules::MIXED_SPELLING,
            at,
            "use either the raw fields (p_major, p_minor, y_major, y_minor) or the named ones (p, y), not both",
        ));
    }
    if f.warp_size.is_none() {
        diags.push(Diagnostic::new(
            rules::MISSING_FIELD,
            at,
            "`warp_size` is required: 32 for NVIDIA GPUs, 64 for AMD CDNA",
        ));
    }
    let spelling = if named_used || (f.h_named.is_some() && !raw_used) {
        Spelling::Named
    } else {
        Spelling::Raw
    };
    let r = f.r.clone().unwrap_or_else(|| List::empty(at));
    match spelling {
        Spelling::Raw => {
            if f.h_named.is_some() {
                diags.push(Diagnostic::new(rules::MIXED_SPELLING,
                    f.h_named.as_ref().map(|h| h.0.span).unwrap_or(at),
                    "the raw spelling lists H as `[[..], [..]]`; named H components (`{ m: [..] }`) need the named `p` and `y` fields",
                ));
            }
            if f.r_names.is_some() {
                diags.push(Diagnostic::new(
                    rules::MIXED_SPELLING,
                    r.span,
                    "the raw spelling lists R as plain lengths, e.g. `r: [2, 4]`",
                ));
            }
            for (field, present) in [
                ("h", f.h_raw.is_some() || f.h_named.is_some()),
                ("p_major", f.p_major.is_some()),
                ("p_minor", f.p_minor.is_some()),
                ("y_major", f.y_major.is_some()),
                ("y_minor", f.y_minor.is_some()),
            ] {
                if !present {
                    diags.push(Diagnostic::new(rules::MISSING_FIELD,
                        at,
                        format!("`{field}` is required (raw spelling: r, h, p_major, p_minor, y_major, y_minor)"),
                    ));
                }
            }
            Ok(DistributionDef {
                attrs,
                vis,
                ident,
                generics,
                warp_size: f.warp_size,
                block_size: f.block_size,
                shape: f.shape,
                spelling,
                r,
                h: f.h_raw.unwrap_or_else(|| List::empty(at)),
                p_major: f.p_major.unwrap_or_else(|| List::empty(at)),
                p_minor: f.p_minor.unwrap_or_else(|| List::empty(at)),
                y_major: f.y_major.unwrap_or_else(|| List::empty(at)),
                y_minor: f.y_minor.unwrap_or_else(|| List::empty(at)),
                names: None,
            })
        }
        Spelling::Named => {
            if f.h_raw.is_some() {
                diags.push(Diagnostic::new(
                    rules::MIXED_SPELLING,
                    f.h_raw.as_ref().map(|h| h.span).unwrap_or(at),
                    "the named spelling gives H as `{ m: [repeat: 2, lane: 16, ..], n: [..] }`",
                ));
            }
            if !r.items.is_empty() && f.r_names.is_none() {
                diags.push(Diagnostic::new(
                    rules::MIXED_SPELLING,
                    r.span,
                    "the named spelling names R components, e.g. `r: [warps_m: 2, lanes_m: 4]`",
                ));
            }
            for (field, present) in [
                ("h", f.h_named.is_some()),
                ("p", f.p.is_some()),
                ("y", f.y.is_some()),
            ] {
                if !present {
                    diags.push(Diagnostic::new(
                        rules::MISSING_FIELD,
                        at,
                        format!("`{field}` is required (named spelling: h, p, y; r optional)"),
                    ));
                }
            }
            let (h, xnames, cnames) = f
                .h_named
                .unwrap_or_else(|| (List::empty(at), vec![], vec![]));
            let r_names = f.r_names.unwrap_or_default();
            let mut names = Names {
                r: r_names.iter().map(|i| i.to_string()).collect(),
                x: xnames.iter().map(|i| i.to_string()).collect(),
                h: cnames
                    .iter()
                    .map(|l| l.iter().map(|i| i.to_string()).collect())
                    .collect(),
            };
            check_unique_names(&r_names, &xnames, &cnames, diags);
            // Named references become the raw (major, minor) pairs, as two parallel lists.
            let split = |refs: &[Ref], span, diags: &mut Vec<Diagnostic>| {
                let (mut major, mut minor) = (List::empty(span), List::empty(span));
                for r in refs {
                    let (a, b) = resolve_ref(r, &names, diags);
                    major.items.push(Int {
                        value: a,
                        span: r.span,
                    });
                    minor.items.push(Int {
                        value: b,
                        span: r.span,
                    });
                }
                (major, minor)
            };
            let mut p_major = List::empty(at);
            let mut p_minor = List::empty(at);
            if let Some(p) = &f.p {
                p_major.span = p.span;
                p_minor.span = p.span;
                for l in &p.items {
                    let (major, minor) = split(&l.items, l.span, diags);
                    p_major.items.push(major);
                    p_minor.items.push(minor);
                }
            }
            let (y_major, y_minor) = match &f.y {
                Some(y) => split(&y.items, y.span, diags),
                None => (List::empty(at), List::empty(at)),
            };
            names.r.truncate(r.items.len());
            Ok(DistributionDef {
                attrs,
                vis,
                ident,
                generics,
                warp_size: f.warp_size,
                block_size: f.block_size,
                shape: f.shape,
                spelling,
                r,
                h,
                p_major,
                p_minor,
                y_major,
                y_minor,
                names: Some(names),
            })
        }
    }
}

fn check_unique_names(r: &[Ident], x: &[Ident], h: &[Vec<Ident>], diags: &mut Vec<Diagnostic>) {
    let mut dup = |list: &[Ident], what: &str| {
        for (i, a) in list.iter().enumerate() {
            if list[..i].iter().any(|b| b == a) {
                diags.push(Diagnostic::new(
                    rules::DUPLICATE_NAME,
                    a.span(),
                    format!("{what} `{a}` is named twice; give each a distinct name"),
                ));
            }
        }
    };
    dup(r, "R component");
    dup(x, "X dimension");
    for (xi, comps) in h.iter().enumerate() {
        dup(
            comps,
            &format!(
                "component of `{}`",
                x.get(xi).map(|i| i.to_string()).unwrap_or_default()
            ),
        );
    }
    for xi in x {
        if xi == "r" {
            diags.push(Diagnostic::new(
                rules::DUPLICATE_NAME,
                xi.span(),
                "`r` names the R components; choose another name for this X dimension",
            ));
        }
    }
}

fn resolve_ref(r: &Ref, names: &Names, diags: &mut Vec<Diagnostic>) -> (i64, i64) {
    let x = r.x.to_string();
    let c = r.component.to_string();
    let (major, comps) = if x == "r" {
        (0, &names.r)
    } else if let Some(i) = names.x.iter().position(|n| *n == x) {
        (i as i64 + 1, &names.h[i])
    } else {
        let mut known: Vec<String> = names.x.clone();
        if !names.r.is_empty() {
            known.push("r".into());
        }
        diags.push(Diagnostic::new(
            rules::UNKNOWN_NAME,
            r.x.span(),
            format!(
                "no X dimension or R named `{x}`; known: {}",
                known.join(", ")
            ),
        ));
        return (-1, -1);
    };
    match comps.iter().position(|n| *n == c) {
        Some(j) => (major, j as i64),
        None => {
            diags.push(Diagnostic::new(
                rules::UNKNOWN_NAME,
                r.component.span(),
                format!(
                    "`{x}` has no component `{c}`; its components are {}",
                    comps.join(", ")
                ),
            ));
            (-1, -1)
        }
    }
}
