//! Diagnostics: a rule name, a message that says what to change, and the token it points at.

pub use ck_core::rules::Severity;
use ck_core::rules::{self, RuleId};
use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;

/// One finding of the front end.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// The rule (`unclaimed`, `warp-size-mismatch`, …), which says error or warning.
    pub rule: RuleId,
    /// What is wrong and what to change.
    pub message: String,
    /// The offending token.
    pub span: Span,
}

impl Diagnostic {
    /// A finding under `rule` (an error or a warning, as the rule is).
    pub fn new(rule: RuleId, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            rule,
            message: message.into(),
            span,
        }
    }

    /// Error or warning.
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }

    /// `error[rule]: message` / `warning[rule]: message`.
    pub fn headline(&self) -> String {
        format!("{}: {}", self.rule, self.message)
    }

    /// Line and column (1-based) of the token, where the span knows them.
    pub fn line_column(&self) -> (usize, usize) {
        let start = self.span.start();
        (start.line, start.column + 1)
    }

    /// Tokens that make rustc report this diagnostic at its span: `compile_error!` for errors;
    /// for warnings (stable Rust has no warning API for proc macros) the use of a deprecated
    /// item whose note carries the message.
    pub fn to_tokens(&self) -> TokenStream {
        let text = self.headline();
        let span = self.span;
        match self.severity() {
            Severity::Error => quote_spanned!(span=> ::core::compile_error! { #text }),
            Severity::Warning => {
                let name = syn::Ident::new(&self.rule.name().replace('-', "_"), span);
                quote_spanned! {span=>
                    const _: () = {
                        #[deprecated(note = #text)]
                        #[allow(non_upper_case_globals)]
                        const #name: () = ();
                        #name
                    };
                }
            }
        }
    }
}

impl From<syn::Error> for Diagnostic {
    fn from(e: syn::Error) -> Diagnostic {
        Diagnostic::new(rules::SYNTAX, e.span(), e.to_string())
    }
}
