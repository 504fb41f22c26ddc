//! The options of `#[tile_kernel(...)]`: `block = N`, `min_blocks_per_sm = N`, `cluster = N`
//! and `distributions(A, B, ..)`, each at most once, in any order. Every unknown, repeated or
//! malformed option is an `error[kernel-options]` at its token, all of them reported at once;
//! the ranges of the values are checked by the caller.

use ck_core::rules;
use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, Path, Token};

/// The options' names, as the unknown-option error lists them.
const NAMES: &str = "block = N, min_blocks_per_sm = N, cluster = N, distributions(A, B, ..)";

/// The options as written (the number options with their value's span).
#[derive(Default)]
pub(super) struct Options {
    /// Threads per block the kernel is written for.
    pub block: Option<(u32, Span)>,
    /// Blocks per SM the register allocation must allow (launch bounds).
    pub min_blocks_per_sm: Option<(u32, Span)>,
    /// Blocks per thread-block cluster.
    pub cluster: Option<(u32, Span)>,
    /// Distributions whose BLOCK_SIZE must equal `block`.
    pub distributions: Vec<Path>,
}

impl Options {
    /// Parses the attribute's arguments; `Err` holds every error found.
    pub fn parse(args: TokenStream) -> Result<Options, Vec<syn::Error>> {
        let mut opts = Options::default();
        let mut errors = Vec::new();
        let parsed = (|input: ParseStream| {
            while !input.is_empty() {
                let name: Ident = input.parse()?;
                opts.option(&name, input, &mut errors)?;
                if input.is_empty() {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            Ok(())
        })
        .parse2(args);
        if let Err(e) = parsed {
            errors.push(error(
                e.span(),
                format!("{e}; write the options as `{NAMES}`"),
            ));
        }
        if errors.is_empty() {
            Ok(opts)
        } else {
            Err(errors)
        }
    }

    /// One option's value, after its name.
    fn option(
        &mut self,
        name: &Ident,
        input: ParseStream,
        errors: &mut Vec<syn::Error>,
    ) -> syn::Result<()> {
        let key = name.to_string();
        let number = match key.as_str() {
            "block" => Some(&mut self.block),
            "min_blocks_per_sm" => Some(&mut self.min_blocks_per_sm),
            "cluster" => Some(&mut self.cluster),
            _ => None,
        };
        if let Some(slot) = number {
            input.parse::<Token![=]>()?;
            let value: Expr = input.parse()?;
            match whole_number(&value) {
                Some(n) if slot.is_none() => *slot = Some((n, span_of(&value))),
                Some(_) => errors.push(twice(name)),
                None => errors.push(error(
                    span_of(&value),
                    format!("`{key}` takes a whole number, e.g. `{key} = 128`"),
                )),
            }
            return Ok(());
        }
        if key == "distributions" {
            let content;
            syn::parenthesized!(content in input);
            let paths = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
            if !self.distributions.is_empty() {
                errors.push(twice(name));
            }
            self.distributions.extend(paths);
            return Ok(());
        }
        errors.push(error(
            name.span(),
            format!("unknown option `{key}`; the options are {NAMES}"),
        ));
        // Skip the value so that the remaining options are still checked.
        while !input.is_empty() && !input.peek(Token![,]) {
            input.parse::<TokenTree>()?;
        }
        Ok(())
    }
}

/// `value` as a `u32` if it is an integer literal that fits (also as a `macro_rules!`
/// fragment, which arrives in an invisible group).
fn whole_number(value: &Expr) -> Option<u32> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(n), ..
        }) => n.base10_parse().ok(),
        Expr::Group(g) => whole_number(&g.expr),
        _ => None,
    }
}

fn span_of(value: &Expr) -> Span {
    syn::spanned::Spanned::span(value)
}

fn twice(name: &Ident) -> syn::Error {
    error(
        name.span(),
        format!("`{name}` is given twice; keep one of them"),
    )
}

fn error(span: Span, message: String) -> syn::Error {
    syn::Error::new(span, format!("{}: {message}", rules::KERNEL_OPTIONS))
}

#[cfg(test)]
mod tests {
    use super::Options;
    use quote::quote;

    fn errors(args: proc_macro2::TokenStream) -> Vec<String> {
        match Options::parse(args) {
            Ok(_) => vec![],
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn every_option_in_any_order() {
        let o = Options::parse(quote!(
            distributions(A, m::B),
            cluster = 2,
            block = 256,
            min_blocks_per_sm = 1
        ))
        .unwrap_or_else(|_| panic!("valid options refused"));
        assert_eq!(o.block.map(|b| b.0), Some(256));
        assert_eq!(o.min_blocks_per_sm.map(|b| b.0), Some(1));
        assert_eq!(o.cluster.map(|b| b.0), Some(2));
        assert_eq!(o.distributions.len(), 2);
        assert!(Options::parse(quote!()).is_ok());
    }

    /// Values and paths substituted by `macro_rules!` (`block = $block`) come in invisible
    /// groups.
    #[test]
    fn macro_fragments() {
        use proc_macro2::{Delimiter, Group};
        let (n, d) = (
            Group::new(Delimiter::None, quote!(128)),
            Group::new(Delimiter::None, quote!(m::Dist)),
        );
        let o = Options::parse(quote!(block = #n, distributions(#d))).unwrap_or_else(|e| {
            panic!("{:?}", e.iter().map(|e| e.to_string()).collect::<Vec<_>>())
        });
        assert_eq!(o.block.map(|b| b.0), Some(128));
        assert_eq!(o.distributions.len(), 1);
    }

    #[test]
    fn every_mistake_is_reported_at_once() {
        let e = errors(quote!(blocks = 2, block = "many", cluster = 2, cluster = 4));
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("error[kernel-options]: unknown option `blocks`"));
        assert!(e[1].contains("`block` takes a whole number"));
        assert!(e[2].contains("`cluster` is given twice"));
        let e = errors(quote!(block 128));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("write the options as"), "{e:?}");
    }
}
