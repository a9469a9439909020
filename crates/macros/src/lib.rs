//! `#[tickscope::profile]`: measures a function with a tickscope scope.
//!
//! Use it through the `tickscope` crate, which re-exports it. It expands to the same code as
//! `tickscope::scope!` at the top of the function body — one code path for both.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{parse_macro_input, Expr, ExprLit, ItemFn, Lit, Meta, Token};

/// Measures every call of the function it is placed on.
///
/// - `#[profile]`: a scope named after the function (`Type::method` for methods);
/// - `#[profile(name = "parse")]`: a scope with that name;
/// - `#[profile(group = "alloc")]`: the function joins the group `alloc`.
///
/// `async fn` is refused: a scope is thread-local and cannot be held across `.await`.
#[proc_macro_attribute]
pub fn profile(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = match Punctuated::<Meta, Token![,]>::parse_terminated.parse(args) {
        Ok(a) => a,
        Err(e) => return e.to_compile_error().into(),
    };
    let mut func = parse_macro_input!(item as ItemFn);
    match expand(&args, &mut func) {
        Ok(()) => quote!(#func).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(args: &Punctuated<Meta, Token![,]>, func: &mut ItemFn) -> syn::Result<()> {
    if let Some(a) = &func.sig.asyncness {
        return Err(syn::Error::new_spanned(
            a,
            "#[tickscope::profile] cannot measure an `async fn`: a scope is thread-local and \
             cannot be held across `.await`, where the task may move to another thread; put \
             `tickscope::scope!()` in the synchronous parts of the body instead",
        ));
    }
    if let Some(c) = &func.sig.constness {
        return Err(syn::Error::new_spanned(
            c,
            "#[tickscope::profile] cannot measure a `const fn`: reading the clock is not \
             possible at compile time",
        ));
    }
    let mut name: Option<syn::LitStr> = None;
    let mut group: Option<syn::LitStr> = None;
    for arg in args {
        let Meta::NameValue(nv) = arg else {
            return Err(syn::Error::new_spanned(
                arg,
                "expected `name = \"...\"` or `group = \"...\"`",
            ));
        };
        let value = match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => s.clone(),
            other => {
                return Err(syn::Error::new_spanned(other, "expected a string literal"));
            }
        };
        let slot = if nv.path.is_ident("name") {
            &mut name
        } else if nv.path.is_ident("group") {
            &mut group
        } else {
            return Err(syn::Error::new_spanned(
                &nv.path,
                "unknown argument: expected `name` or `group`",
            ));
        };
        if slot.replace(value).is_some() {
            return Err(syn::Error::new_spanned(&nv.path, "argument given twice"));
        }
    }
    let scope = match (name, group) {
        (Some(_), Some(g)) => {
            return Err(syn::Error::new(
                g.span(),
                "give either `name` or `group`, not both: a group's row is named after the group",
            ));
        }
        (Some(n), None) => quote!(::tickscope::scope!(#n);),
        (None, Some(g)) => quote!(::tickscope::scope!(group = #g);),
        (None, None) => quote!(::tickscope::scope!();),
    };
    let stmt: syn::Stmt = syn::parse2(scope).map_err(|e| syn::Error::new(Span::call_site(), e))?;
    func.block.stmts.insert(0, stmt);
    Ok(())
}
