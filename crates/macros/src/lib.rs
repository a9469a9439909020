//! `#[tickscope::profile]`: measures a function with a tickscope scope.
//!
//! Use it through the `tickscope` crate, which re-exports it. It expands to the same code as
//! `tickscope::scope!` at the top of the function body — one code path for both.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

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
/// On an `async fn`, the future the call returns is measured instead (as
/// `tickscope::future::FutureExt::profiled` does): each poll a scope on the thread that ran
/// it, the first poll to ready its wall time, a drop before ready a cancellation.
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
    if let (Some(_), Some(g)) = (&name, &group) {
        return Err(syn::Error::new(
            g.span(),
            "give either `name` or `group`, not both: a group's row is named after the group",
        ));
    }
    if func.sig.asyncness.is_some() {
        let site = match (name, group) {
            (Some(n), _) => quote!((#n)),
            (None, Some(g)) => quote!((group = #g)),
            (None, None) => quote!(()),
        };
        // The body becomes an `async move` block measured as a future; its value is typed
        // with the function's return type (so that `?` and `return` convert as in the
        // function), except where that type is `impl Trait`, which a `let` cannot name.
        let block = &func.block;
        let body = match &func.sig.output {
            syn::ReturnType::Type(_, ty) if !mentions_impl(ty) => quote! {
                async move {
                    #[allow(clippy::let_and_return)]
                    let __tickscope_ret: #ty = #block;
                    __tickscope_ret
                }
            },
            syn::ReturnType::Default => quote! {
                async move {
                    let __tickscope_ret: () = #block;
                    __tickscope_ret
                }
            },
            syn::ReturnType::Type(..) => quote!(async move #block),
        };
        let new_block: syn::Block = syn::parse2(quote! {
            { ::tickscope::__tickscope_profiled!(#site, #body).await }
        })
        .map_err(|e| syn::Error::new(Span::call_site(), e))?;
        *func.block = new_block;
        return Ok(());
    }
    let scope = match (name, group) {
        (Some(n), _) => quote!(::tickscope::scope!(#n);),
        (None, Some(g)) => quote!(::tickscope::scope!(group = #g);),
        (None, None) => quote!(::tickscope::scope!();),
    };
    let stmt: syn::Stmt = syn::parse2(scope).map_err(|e| syn::Error::new(Span::call_site(), e))?;
    func.block.stmts.insert(0, stmt);
    Ok(())
}

/// Whether a type contains `impl Trait` anywhere (which a `let` annotation cannot name).
fn mentions_impl(ty: &syn::Type) -> bool {
    quote!(#ty)
        .into_iter()
        .any(|t| matches!(t, proc_macro2::TokenTree::Ident(i) if i == "impl"))
}
