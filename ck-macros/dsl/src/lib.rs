//! The front end of ck-rs's macros, as a plain library: usable from the proc-macro crate, from
//! the `ck` command and from unit tests, with no compiler involved.
//!
//! `tile_distribution!` runs four stages, one file each:
//! [`parse`] (tokens → definition, every span kept) → [`check`] (ck-core's encoding rules, each
//! violation located at its token, all reported at once) → [`lower`] (tables computed by ck-core)
//! → [`emit`] (`quote!`). On errors a typed stub is still emitted so the rest of the crate
//! type-checks.

pub mod check;
pub mod diag;
pub mod emit;
pub mod kernel;
pub mod lower;
pub mod parse;
pub mod static_for;

pub use diag::{Diagnostic, Severity};

use ck_core::rules;
use proc_macro2::TokenStream;
use quote::quote;

/// A definition that passed the expansion-time checks.
pub struct Analysis {
    /// The parsed definition.
    pub def: parse::DistributionDef,
    /// What the checks found (encoding, sizes, warnings).
    pub checked: check::Checked,
}

/// Parses and checks a `tile_distribution!` body.
pub fn analyze_tokens(tokens: TokenStream) -> Result<Analysis, Vec<Diagnostic>> {
    let def = parse::parse(tokens)?;
    let checked = check::check(&def)?;
    Ok(Analysis { def, checked })
}

/// Parses and checks source text: the body of a `tile_distribution!` invocation, optionally
/// still wrapped in `tile_distribution! { .. }` (what the `ck encoding` command reads).
pub fn analyze_source(src: &str) -> Result<Analysis, Vec<Diagnostic>> {
    let tokens: TokenStream = src.parse().map_err(|e: proc_macro2::LexError| {
        vec![Diagnostic::new(
            rules::SYNTAX,
            e.span(),
            format!("cannot tokenize the input: {e}"),
        )]
    })?;
    analyze_tokens(unwrap_invocation(tokens))
}

/// `tile_distribution! { body }` → `body`; anything else is returned unchanged.
fn unwrap_invocation(tokens: TokenStream) -> TokenStream {
    use proc_macro2::TokenTree;
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    match trees.as_slice() {
        [TokenTree::Ident(i), TokenTree::Punct(bang), TokenTree::Group(g)]
            if i == "tile_distribution" && bang.as_char() == '!' =>
        {
            g.stream()
        }
        [TokenTree::Ident(i), TokenTree::Punct(bang), TokenTree::Group(g), TokenTree::Punct(semi)]
            if i == "tile_distribution" && bang.as_char() == '!' && semi.as_char() == ';' =>
        {
            g.stream()
        }
        _ => tokens,
    }
}

/// The expansion of `tile_distribution! { input }`.
pub fn tile_distribution(input: TokenStream) -> TokenStream {
    match parse::parse(input) {
        Err(diags) => {
            let errs = diags.iter().map(Diagnostic::to_tokens);
            quote!(#(#errs)*)
        }
        Ok(def) => match check::check(&def) {
            Ok(checked) => emit::emit(&def, &checked),
            Err(diags) => {
                let stub = emit::stub(&def);
                let errs = diags.iter().map(Diagnostic::to_tokens);
                quote!(#stub #(#errs)*)
            }
        },
    }
}
