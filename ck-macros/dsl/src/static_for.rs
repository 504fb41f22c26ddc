//! `static_for!(i in 0..4 => { body })`: one copy of `body` per value, with `i` a constant in
//! each — CK's `static_for`, for kernels' own unrolled loops (register arrays must only be
//! indexed by constants on GPUs).
//!
//! Forms: `i in A..B`, `i in A..=B`, optionally `step S` after the range, optionally a type
//! `i: i32 in ..` (default `usize`). Bounds and step are integer literals.

use crate::diag::Diagnostic;
use ck_core::rules;
use proc_macro2::{Literal, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Block, Ident, LitInt, Token, Type};

struct StaticFor {
    var: Ident,
    ty: Option<Type>,
    start: LitInt,
    end: LitInt,
    inclusive: bool,
    step: Option<LitInt>,
    body: Block,
}

mod kw {
    syn::custom_keyword!(step);
}

impl Parse for StaticFor {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let var: Ident = input.parse()?;
        let ty = if input.peek(Token![:]) {
            input.parse::<Token![:]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        input.parse::<Token![in]>()?;
        let start: LitInt = input.parse()?;
        let inclusive = if input.peek(Token![..=]) {
            input.parse::<Token![..=]>()?;
            true
        } else {
            input.parse::<Token![..]>()?;
            false
        };
        let end: LitInt = input.parse()?;
        let step = if input.peek(kw::step) {
            input.parse::<kw::step>()?;
            Some(input.parse()?)
        } else {
            None
        };
        input.parse::<Token![=>]>()?;
        let body: Block = input.parse()?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the loop body"));
        }
        Ok(StaticFor {
            var,
            ty,
            start,
            end,
            inclusive,
            step,
            body,
        })
    }
}

/// Most copies one `static_for!` may make.
const MAX_COPIES: i128 = 4096;

/// Expands a `static_for!` invocation.
pub fn expand(input: TokenStream) -> TokenStream {
    match syn::parse2::<StaticFor>(input).and_then(unroll) {
        Ok(t) => t,
        Err(e) => Diagnostic::from(e).to_tokens(),
    }
}

fn unroll(s: StaticFor) -> syn::Result<TokenStream> {
    let start: i128 = s.start.base10_parse()?;
    let end: i128 = s.end.base10_parse()?;
    let step: i128 = match &s.step {
        Some(l) => l.base10_parse()?,
        None => 1,
    };
    if step <= 0 {
        let at = s
            .step
            .as_ref()
            .map(|l| l.span())
            .unwrap_or_else(|| s.end.span());
        return Err(syn::Error::new(
            at,
            format!("{}: the step must be at least 1", rules::STATIC_FOR_STEP),
        ));
    }
    let last = if s.inclusive { end } else { end - 1 };
    let count = if last < start {
        0
    } else {
        (last - start) / step + 1
    };
    if count > MAX_COPIES {
        return Err(syn::Error::new(
            s.end.span(),
            format!(
                "{}: {count} copies of the body; at most {MAX_COPIES} (use a plain loop)",
                rules::STATIC_FOR_TOO_LONG
            ),
        ));
    }
    let ty = s.ty.map(|t| quote!(#t)).unwrap_or_else(|| quote!(usize));
    let (var, body) = (&s.var, &s.body);
    let copies = (0..count).map(|k| {
        let v = Literal::i128_unsuffixed(start + k * step);
        quote! {
            {
                #[allow(non_upper_case_globals)]
                const #var: #ty = #v;
                #body
            }
        }
    });
    Ok(quote!({ #(#copies)* }))
}
