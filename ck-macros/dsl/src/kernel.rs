//! `#[tile_kernel]`: a plain Rust function becomes a kernel.
//!
//! From
//! ```text
//! #[tile_kernel(block = 128)]
//! pub fn reverse(input: Global<f32>, output: GlobalMut<f32>) { let t = shared!(f32; 128); … }
//! ```
//! it emits
//! * the body as `__ck_kernel_reverse`, with every `shared!(T; N)` replaced by a
//!   [`SharedArray`](ck_core::device::SharedArray) at a fixed, 16-byte aligned offset;
//! * `struct Reverse` with `SPEC` (name, shared bytes = the sum of the arrays, block size) and,
//!   on the host, a typed launcher `Reverse::launch(&device, cfg, &input, &mut output)` that
//!   checks the configuration and arguments before running;
//! * on `nvptx64`, the `#[no_mangle] extern "ptx-kernel" fn reverse(ptr, len, ptr, len)` entry.
//!
//! Options (`options`): `block = N` (the block size the kernel is written for; launches
//! with another size are refused), `min_blocks_per_sm = N` (launch bounds: `ck build-ptx` gives
//! the entry `.maxntid block` and `.minnctapersm N`, capping its registers so that N blocks fit
//! on an SM), `cluster = N` (thread-block clusters of N blocks, 1 to 8: `ck build-ptx` gives the
//! entry `.reqnctapercluster N, 1, 1`; the grid must be a multiple of N) and
//! `distributions(A, B, ..)` (tile distributions whose `BLOCK_SIZE` must equal `block`, checked
//! at compile time).
//!
//! The kernel's module is its crate's (`CARGO_CRATE_NAME`). Where the crate's `build.rs` ran
//! `ck_build::embed_ptx()` and the module exists, `CK_EMBED_PTX` names its deflated copy and
//! that is embedded in the launcher's spec.

mod options;

use ck_core::rules;
use options::Options;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Expr, FnArg, Ident, ItemFn, Pat, Token, Type};

/// How a kernel parameter crosses the launch.
enum Param {
    Global {
        name: Ident,
        elem: Type,
        mutable: bool,
    },
    Scalar {
        name: Ident,
        ty: Type,
    },
    /// `Tma<T, R>` (`mutable: false`) or `TmaMut<T, R>`: a host `TensorMap` or `TensorMapMut`
    /// (on the GPU: its map's address and box bytes).
    Tma {
        name: Ident,
        elem: Type,
        rank: Box<syn::GenericArgument>,
        mutable: bool,
    },
}

const SCALARS: &[&str] = &[
    "u32", "i32", "f32", "u64", "i64", "f64", "u16", "i16", "u8", "i8", "bool",
];

struct SharedDecl {
    elem: Type,
    len: Expr,
}

struct SharedArgs {
    elem: Type,
    len: Expr,
}

impl Parse for SharedArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let elem: Type = input.parse()?;
        input.parse::<Token![;]>()?;
        let len: Expr = input.parse()?;
        Ok(SharedArgs { elem, len })
    }
}

/// Replaces `shared!(T; N)` by `SharedArray::<T, {N}>::at_offset(Launcher::SHARED_OFFSETS[k])`.
struct SharedRewriter {
    launcher: Ident,
    decls: Vec<SharedDecl>,
    errors: Vec<syn::Error>,
}

impl VisitMut for SharedRewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Macro(m) = e {
            if m.mac
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "shared")
            {
                match m.mac.parse_body::<SharedArgs>() {
                    Ok(SharedArgs { elem, len }) => {
                        let k = self.decls.len();
                        let launcher = &self.launcher;
                        let span = m.span();
                        *e = syn::parse_quote_spanned! {span=>
                            ::ck_core::device::SharedArray::<#elem, { #len }>::at_offset(#launcher::SHARED_OFFSETS[#k])
                        };
                        self.decls.push(SharedDecl { elem, len });
                    }
                    Err(err) => self.errors.push(syn::Error::new(
                        err.span(),
                        format!(
                            "{}: expected `shared!(ElementType; length)`: {err}",
                            rules::SHARED_SYNTAX
                        ),
                    )),
                }
                return;
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
}

fn camel(name: &str) -> String {
    name.split('_')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut c = s.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn classify(arg: &FnArg) -> syn::Result<Param> {
    let FnArg::Typed(pt) = arg else {
        return Err(syn::Error::new(
            arg.span(),
            format!("{}: a kernel has no `self`", rules::KERNEL_ARGUMENT),
        ));
    };
    let Pat::Ident(pi) = &*pt.pat else {
        return Err(syn::Error::new(
            pt.pat.span(),
            format!(
                "{}: kernel arguments must be plain names",
                rules::KERNEL_ARGUMENT
            ),
        ));
    };
    let name = pi.ident.clone();
    let unsupported = || {
        syn::Error::new(
            pt.ty.span(),
            format!("{}: unsupported kernel argument type; use Global<T>, GlobalMut<T>, Tma<T, R>, TmaMut<T, R> or a scalar (u32, i32, f32, ..)", rules::KERNEL_ARGUMENT),
        )
    };
    let Type::Path(tp) = &*pt.ty else {
        return Err(unsupported());
    };
    let last = tp.path.segments.last().ok_or_else(unsupported)?;
    let id = last.ident.to_string();
    match (id.as_str(), &last.arguments) {
        ("Global" | "GlobalMut", syn::PathArguments::AngleBracketed(a)) if a.args.len() == 1 => {
            let syn::GenericArgument::Type(elem) = &a.args[0] else {
                return Err(unsupported());
            };
            Ok(Param::Global {
                name,
                elem: elem.clone(),
                mutable: id == "GlobalMut",
            })
        }
        ("Tma" | "TmaMut", syn::PathArguments::AngleBracketed(a)) if a.args.len() == 2 => {
            let syn::GenericArgument::Type(elem) = &a.args[0] else {
                return Err(unsupported());
            };
            Ok(Param::Tma {
                name,
                elem: elem.clone(),
                rank: Box::new(a.args[1].clone()),
                mutable: id == "TmaMut",
            })
        }
        (s, syn::PathArguments::None) if SCALARS.contains(&s) => Ok(Param::Scalar {
            name,
            ty: (*pt.ty).clone(),
        }),
        _ => Err(unsupported()),
    }
}

/// The module file to embed (`<crate>.deflate`): `CK_EMBED_PTX` as `ck_build::embed_ptx()` sets
/// it for the crate being compiled (rustc's environment, which the macro shares), if it names
/// this crate's module.
fn embedded_ptx() -> Option<String> {
    let path = std::env::var("CK_EMBED_PTX").ok()?;
    let krate = std::env::var("CARGO_CRATE_NAME").ok()?;
    let stem = std::path::Path::new(&path)
        .file_stem()?
        .to_str()?
        .to_string();
    (stem == krate).then_some(path)
}

/// The launcher's parameter for a kernel parameter: a device buffer or a tensor map, borrowed
/// mutably where the kernel writes it (`GlobalMut`, `TmaMut`), or the scalar itself.
fn host_param(p: &Param) -> TokenStream {
    match p {
        Param::Global {
            name,
            elem,
            mutable: true,
        } => {
            quote!(#name: &mut ::ck_core::host::DeviceBuffer<#elem>)
        }
        Param::Global {
            name,
            elem,
            mutable: false,
        } => {
            quote!(#name: &::ck_core::host::DeviceBuffer<#elem>)
        }
        Param::Scalar { name, ty } => quote!(#name: #ty),
        Param::Tma {
            name,
            elem,
            rank,
            mutable: false,
        } => {
            quote!(#name: &::ck_core::host::TensorMap<'_, #elem, #rank>)
        }
        Param::Tma {
            name,
            elem,
            rank,
            mutable: true,
        } => {
            quote!(#name: &mut ::ck_core::host::TensorMapMut<'_, #elem, #rank>)
        }
    }
}

/// What a kernel with errors still defines, so that the rest of the user's crate type-checks and
/// only the kernel's own errors are reported: the function, with its body replaced, and its
/// launcher — with `launch` when every argument is one a kernel takes.
fn stub(f: &ItemFn, params: Option<&[Param]>) -> TokenStream {
    let (attrs, vis, sig) = (&f.attrs, &f.vis, &f.sig);
    let launcher = format_ident!("{}", camel(&sig.ident.to_string()), span = sig.ident.span());
    let launch = params.map(|params| {
        let host_params = params.iter().map(host_param);
        quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            impl #launcher {
                /// Stands in for the launcher of a kernel that did not compile.
                #[allow(clippy::too_many_arguments, unused_variables)]
                pub fn launch(
                    device: &::ck_core::host::Device,
                    cfg: ::ck_core::host::LaunchConfig,
                    #(#host_params),*
                ) -> ::core::result::Result<::ck_core::host::LaunchStats, ::ck_core::host::LaunchError> {
                    ::core::unreachable!("the kernel did not compile")
                }
            }
        }
    });
    quote! {
        #(#attrs)*
        #[allow(unused_variables, dead_code)]
        #vis #sig {
            ::core::unreachable!("the kernel did not compile")
        }

        #[allow(non_camel_case_types, dead_code)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #launcher;

        #launch
    }
}

/// Expands `#[tile_kernel(args)] item`.
pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand_inner(args, item) {
        Ok(t) => t,
        Err(errors) => errors,
    }
}

fn expand_inner(args: TokenStream, item: TokenStream) -> Result<TokenStream, TokenStream> {
    let mut f: ItemFn = syn::parse2(item).map_err(|e| e.to_compile_error())?;
    let opts = match Options::parse(args) {
        Ok(o) => o,
        Err(errors) => {
            let errors = errors.iter().map(syn::Error::to_compile_error);
            let stub = stub(&f, None);
            return Err(quote!(#(#errors)* #stub));
        }
    };
    let mut errors: Vec<syn::Error> = Vec::new();
    if let Some((b, at)) = opts.block {
        if b == 0 || b > 1024 {
            errors.push(syn::Error::new(
                at,
                format!(
                    "{}: block = {b}; a block has 1 to 1024 threads",
                    rules::BLOCK_SIZE
                ),
            ));
        }
    }
    if let Some((n, at)) = opts.min_blocks_per_sm {
        if opts.block.is_none() {
            errors.push(syn::Error::new(
                at,
                format!("{}: min_blocks_per_sm needs `block = N` (launch bounds are a block size and a block count)", rules::KERNEL_OPTIONS),
            ));
        } else if n == 0 || n > 32 {
            errors.push(syn::Error::new(
                at,
                format!(
                    "{}: min_blocks_per_sm = {n}; an SM holds 1 to 32 blocks",
                    rules::KERNEL_OPTIONS
                ),
            ));
        }
    }
    if let Some((n, at)) = opts.cluster {
        let max = ck_core::kernel::MAX_CLUSTER_BLOCKS;
        if !(1..=max).contains(&n) {
            errors.push(syn::Error::new(
                at,
                format!(
                    "{}: cluster = {n}; a cluster has 1 to {max} blocks (the portable limit)",
                    rules::KERNEL_OPTIONS,
                ),
            ));
        }
    }
    let sig = &f.sig;
    if sig.asyncness.is_some()
        || sig.constness.is_some()
        || !matches!(sig.safety, syn::Safety::Default)
    {
        errors.push(syn::Error::new(
            sig.fn_token.span(),
            format!(
                "{}: a kernel is a plain `fn` (not async, const or unsafe)",
                rules::KERNEL_SIGNATURE
            ),
        ));
    }
    if !sig.generics.params.is_empty() {
        errors.push(syn::Error::new(
            sig.generics.span(),
            format!(
                "{}: kernels cannot be generic; write one kernel per instance",
                rules::KERNEL_SIGNATURE
            ),
        ));
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        errors.push(syn::Error::new(
            ty.span(),
            format!(
                "{}: a kernel returns nothing; write results through a GlobalMut",
                rules::KERNEL_SIGNATURE
            ),
        ));
    }
    let mut params = Vec::new();
    let mut all_classified = true;
    for a in &sig.inputs {
        match classify(a) {
            Ok(p) => params.push(p),
            Err(e) => {
                all_classified = false;
                errors.push(e);
            }
        }
    }
    let name = sig.ident.clone();
    let launcher = format_ident!("{}", camel(&name.to_string()), span = name.span());
    let body_name = format_ident!("__ck_kernel_{}", name);
    let mut rewriter = SharedRewriter {
        launcher: launcher.clone(),
        decls: Vec::new(),
        errors: Vec::new(),
    };
    rewriter.visit_block_mut(&mut f.block);
    errors.extend(rewriter.errors);
    if !errors.is_empty() {
        let errs = errors.iter().map(syn::Error::to_compile_error);
        let stub = stub(&f, all_classified.then_some(&params[..]));
        return Err(quote!(#(#errs)* #stub));
    }

    // Shared-memory layout: 16-byte aligned offsets, in declaration order.
    let nshared = rewriter.decls.len();
    let sizes: Vec<TokenStream> = rewriter
        .decls
        .iter()
        .map(|d| {
            let (t, n) = (&d.elem, &d.len);
            quote!(::core::mem::size_of::<[#t; #n]>())
        })
        .collect();
    let offsets = quote!(::ck_core::kernel::shared_offsets::<#nshared>([#(#sizes),*]));
    let shared_bytes = quote!(::ck_core::kernel::shared_bytes::<#nshared>([#(#sizes),*]));

    let vis = &f.vis;
    let attrs = &f.attrs;
    let block = &f.block;
    let inputs = &f.sig.inputs;
    let name_str = name.to_string();
    let some_or_none = |v: Option<(u32, Span)>| match v {
        Some((b, _)) => quote!(::core::option::Option::Some(#b)),
        None => quote!(::core::option::Option::None),
    };
    let block_opt = some_or_none(opts.block);
    let min_blocks_opt = some_or_none(opts.min_blocks_per_sm);
    let cluster_opt = some_or_none(opts.cluster);
    let embedded = match embedded_ptx() {
        // One function per kernel holds the text, so it is compiled only into the kernel's own
        // codegen unit, not into every unit and crate that reads the launcher's SPEC.
        Some(path) => quote!(::core::option::Option::Some({
            #[inline(never)]
            fn embedded_ptx() -> &'static [u8] {
                ::core::include_bytes!(#path)
            }
            embedded_ptx as fn() -> &'static [u8]
        })),
        None => quote!(::core::option::Option::None),
    };
    let info_name = format_ident!("__ck_kernel_info_{}", name);
    let dist_checks = opts.distributions.iter().map(|d| {
        let msg = format!("{}: kernel `{name_str}` is declared with block = {} but distribution `{}` needs a different block size", rules::BLOCK_SIZE_MISMATCH, opts.block.map_or(0, |b| b.0), quote!(#d));
        // A lane group that divides the hardware warp runs as written whatever warp size the
        // distribution declares (its partition index does not read the hardware warp); a lane
        // dim that spans a 64-lane wave does not fit a 32-lane warp.
        let warp = format!("{}: distribution `{}` of kernel `{name_str}` spreads its lane dim over more lanes than the 32 of an NVIDIA warp (and the emulator's); write it with warp_size: 32, or with a lane group of at most 32 lanes", rules::WARP_SIZE_MISMATCH, quote!(#d));
        let warp_check = quote_spanned!(d.span()=> const _: () = ::core::assert!(::ck_core::device::WARP_SIZE.is_multiple_of(<#d as ::ck_core::TileDistribution>::LANES), #warp););
        match opts.block {
            Some((b, _)) => quote_spanned!(d.span()=> const _: () = ::core::assert!(#d::BLOCK_SIZE == #b, #msg); #warp_check),
            None => {
                let m = format!("{}: distributions(..) needs `block = N` to check against", rules::KERNEL_OPTIONS);
                quote_spanned!(d.span()=> ::core::compile_error!(#m);)
            }
        }
    });

    // Host launcher parameters and device handles.
    let mut host_params = Vec::new();
    let mut host_checks = Vec::new();
    let mut host_handles = Vec::new();
    let mut host_args = Vec::new();
    let mut call_args = Vec::new();
    let mut ptx_params = Vec::new();
    // The PTX entry's handles: `from_raw` is unsafe, and its contract is the entry point's
    // `# Safety` (the launcher passes each buffer's pointer with its own length).
    let mut ptx_handles = Vec::new();
    for p in &params {
        host_params.push(host_param(p));
        match p {
            Param::Global {
                name,
                elem,
                mutable,
            } => {
                let n = name.to_string();
                let (ptr, len) = (format_ident!("{}_ptr", name), format_ident!("{}_len", name));
                if *mutable {
                    host_handles.push(quote!(let #name = #name.global_mut();));
                    host_args.push(quote!(#name.arg()));
                    ptx_params.push(quote!(#ptr: *mut #elem, #len: u32));
                    // SAFETY (emitted): the entry point's contract, see its `# Safety`.
                    ptx_handles.push(quote!(let #name = unsafe { ::ck_core::device::GlobalMut::<#elem>::from_raw(#ptr, #len) };));
                } else {
                    host_handles.push(quote!(let #name = #name.global();));
                    host_args.push(quote!(#name.arg()));
                    ptx_params.push(quote!(#ptr: *const #elem, #len: u32));
                    // SAFETY (emitted): the entry point's contract, see its `# Safety`.
                    ptx_handles.push(quote!(let #name = unsafe { ::ck_core::device::Global::<#elem>::from_raw(#ptr, #len) };));
                }
                host_checks.push(quote!(#name.check_argument(#n)?;));
                call_args.push(quote!(#name));
            }
            Param::Scalar { name, ty } => {
                host_args.push(quote!(::ck_core::host::KernelArg::from(#name)));
                ptx_params.push(quote!(#name: #ty));
                call_args.push(quote!(#name));
            }
            Param::Tma {
                name,
                elem,
                rank,
                mutable,
            } => {
                let (map, bytes) = (
                    format_ident!("{}_map", name),
                    format_ident!("{}_box_bytes", name),
                );
                let (handle, device_ty) = if *mutable {
                    (format_ident!("tma_mut"), format_ident!("TmaMut"))
                } else {
                    (format_ident!("tma"), format_ident!("Tma"))
                };
                host_handles.push(quote!(let #name = #name.#handle();));
                // SAFETY (emitted): the entry point's contract, see its `# Safety`.
                ptx_handles.push(quote!(let #name = unsafe { ::ck_core::device::#device_ty::<#elem, #rank>::from_raw(#map, #bytes) };));
                host_args.push(quote!(#name.arg()));
                ptx_params.push(quote!(#map: *const u8, #bytes: u32));
                call_args.push(quote!(#name));
            }
        }
    }
    let shared_memory_msg = format!(
        "{}: the kernel's shared! arrays exceed the 227 KiB a block may use",
        rules::SHARED_MEMORY
    );
    let launch_doc = format!(
        "Launches `{name_str}` on `device` (the configuration and arguments are checked first)."
    );
    Ok(quote! {
        #(#attrs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #launcher;

        impl #launcher {
            /// Byte offset of each `shared!` array in the block's shared memory.
            #[doc(hidden)]
            pub const SHARED_OFFSETS: [usize; #nshared] = #offsets;
            /// Name, shared memory and block size of the kernel.
            pub const SPEC: ::ck_core::kernel::KernelSpec = ::ck_core::kernel::KernelSpec {
                name: #name_str,
                module: ::ck_core::kernel::Module {
                    crate_name: ::core::env!("CARGO_CRATE_NAME"),
                    manifest_dir: ::core::env!("CARGO_MANIFEST_DIR"),
                    embedded: #embedded,
                },
                shared_bytes: #shared_bytes,
                block: #block_opt,
                min_blocks_per_sm: #min_blocks_opt,
                cluster: #cluster_opt,
            };
        }

        const _: () = ::core::assert!(
            #launcher::SPEC.shared_bytes <= ::ck_core::kernel::MAX_SHARED_BYTES,
            #shared_memory_msg
        );
        #(#dist_checks)*

        #[cfg(not(target_arch = "nvptx64"))]
        impl #launcher {
            #[doc = #launch_doc]
            #[allow(clippy::too_many_arguments)]
            pub fn launch(
                device: &::ck_core::host::Device,
                cfg: ::ck_core::host::LaunchConfig,
                #(#host_params),*
            ) -> ::core::result::Result<::ck_core::host::LaunchStats, ::ck_core::host::LaunchError> {
                #(#host_checks)*
                let args = [#(#host_args),*];
                // SAFETY: `args`, `SPEC` and the body come from this one signature, as the PTX
                // entry point below does: the entry takes exactly these arguments.
                unsafe {
                    ::ck_core::host::launch(device, &Self::SPEC, cfg, &args, &|| {
                        #(#host_handles)*
                        #body_name(#(#call_args),*)
                    })
                }
            }
        }

        #[doc(hidden)]
        #[allow(non_snake_case, unused_braces, clippy::too_many_arguments)]
        #[inline(always)]
        #vis fn #body_name(#inputs) #block

        /// What `ck build-ptx` reads from the module (`ck_core::kernel::kernel_info`).
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub static #info_name: [u32; 5] = ::ck_core::kernel::kernel_info(&#launcher::SPEC);

        /// The PTX entry point, called by the CUDA driver with the arguments the launcher
        /// passes.
        ///
        /// # Safety
        /// Each pointer addresses its length's elements of device memory for the whole kernel
        /// (the launcher passes every buffer's pointer with its own length, and a writable
        /// buffer is borrowed mutably for the launch); each tensor-map pointer addresses a
        /// driver-encoded map of the parameter's rank and element, with its box's bytes, over a
        /// buffer borrowed for the launch.
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn #name(#(#ptx_params),*) {
            #(#ptx_handles)*
            #body_name(#(#call_args),*)
        }
    })
}
