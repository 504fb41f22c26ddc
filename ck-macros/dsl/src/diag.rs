//! Diagnostics: a rule name, a message that says what to change, and the token it points at.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;

/// Error or warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Fails the build.
    Error,
    /// Reported, the expansion still succeeds.
    Warning,
}

/// One finding of the front end.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// Stable rule name (`unclaimed`, `warp-size-mismatch`, …).
    pub rule: &'static str,
    /// What is wrong and what to change.
    pub message: String,
    /// The offending token.
    pub span: Span,
    /// Error or warning.
    pub severity: Severity,
}

impl Diagnostic {
    /// An error.
    pub fn error(rule: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            rule,
            message: message.into(),
            span,
            severity: Severity::Error,
        }
    }

    /// A warning.
    pub fn warning(rule: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            rule,
            message: message.into(),
            span,
            severity: Severity::Warning,
        }
    }

    /// `error[rule]: message` / `warning[rule]: message`.
    pub fn headline(&self) -> String {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        format!("{kind}[{}]: {}", self.rule, self.message)
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
        match self.severity {
            Severity::Error => quote_spanned!(span=> ::core::compile_error! { #text }),
            Severity::Warning => {
                let name = syn::Ident::new(&self.rule.replace('-', "_"), span);
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
        Diagnostic::error("syntax", e.span(), e.to_string())
    }
}
