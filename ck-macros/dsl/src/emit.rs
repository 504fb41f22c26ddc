//! Emit: the generated struct, its inherent items and its `ck_core::TileDistribution` impl.
//!
//! One frame (`frame`) with three kinds of bodies: straight-line code for literal encodings
//! (`literal_bodies`: every index is a constant, P digits are shifts, masks or magic-number
//! multiplications, no loop and no division), calls into ck-core's generic evaluators for
//! encodings with const-expression lengths (`parametric_bodies`, checked in const evaluation),
//! and a stub for encodings with errors ([`stub`]) so the rest of the crate still type-checks.

use crate::check::Checked;
use crate::lower::{Lowered, PDigit, Term};
use crate::parse::{DistributionDef, Len};
use ck_core::magic::magic;
use ck_core::rules;
use ck_core::Index;
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

struct Bodies {
    encoding: TokenStream,
    x_lengths: TokenStream,
    y_lengths: TokenStream,
    r_lengths: TokenStream,
    thread_buffer_size: TokenStream,
    warp_size: TokenStream,
    block_size: TokenStream,
    partition_index: TokenStream,
    x_index: TokenStream,
    d_index: TokenStream,
    rs_index: TokenStream,
    for_each_y: TokenStream,
    sweep: TokenStream,
    extra: TokenStream,
    /// The register buffer type (`[T; THREAD_BUFFER_SIZE]`).
    buffer: TokenStream,
}

fn int(v: impl Into<i64>) -> Literal {
    Literal::i64_unsuffixed(v.into())
}

fn tokens(l: Literal) -> TokenStream {
    quote!(#l)
}

fn list(v: &[Index]) -> TokenStream {
    let v = v.iter().map(|&x| int(x));
    quote!([#(#v),*])
}

/// The struct, its inherent items and the trait impl around `b`.
fn frame(def: &DistributionDef, counts: [usize; 4], b: Bodies) -> TokenStream {
    let [np, ny, nx, nr] = counts.map(Literal::usize_unsuffixed);
    let (attrs, vis, ident) = (&def.attrs, &def.vis, &def.ident);
    let (impl_g, ty_g, where_c) = def.generics.split_for_impl();
    let generics = &def.generics;
    let Bodies {
        encoding,
        x_lengths,
        y_lengths,
        r_lengths,
        thread_buffer_size,
        warp_size,
        block_size,
        partition_index,
        x_index,
        d_index,
        rs_index,
        for_each_y,
        sweep,
        extra,
        buffer,
    } = b;
    quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #vis struct #ident #generics #where_c;

        #[allow(clippy::identity_op, clippy::erasing_op, unused_variables, unused_mut)]
        impl #impl_g #ident #ty_g #where_c {
            /// The checked encoding.
            pub const ENCODING: ::ck_core::Encoding = #encoding;
            /// Tile lengths `[Π H[x]]`.
            pub const X_LENGTHS: [::ck_core::Index; #nx] = #x_lengths;
            /// Y lengths (the per-thread box).
            pub const Y_LENGTHS: [::ck_core::Index; #ny] = #y_lengths;
            /// R lengths.
            pub const R_LENGTHS: [::ck_core::Index; #nr] = #r_lengths;
            /// Registers per thread.
            pub const THREAD_BUFFER_SIZE: usize = #thread_buffer_size;
            /// Threads per warp.
            pub const WARP_SIZE: u32 = #warp_size;
            /// Threads per block.
            pub const BLOCK_SIZE: u32 = #block_size;
            #extra

            /// `[warp, lane]` (or `[lane]`) of a thread of a 1-D block; with a lane group of G
            /// lanes, `[tid / G, tid % G]`.
            #[inline(always)]
            pub fn partition_index(thread_id: u32) -> [::ck_core::Index; #np] {
                #partition_index
            }

            /// The tile index that thread `p` holds at register index `y`.
            #[inline(always)]
            pub fn x_index(p: [::ck_core::Index; #np], y: [::ck_core::Index; #ny]) -> [::ck_core::Index; #nx] {
                #x_index
            }

            /// The register slot of `y` (row-major over Y, last fastest).
            #[inline(always)]
            pub fn d_index(y: [::ck_core::Index; #ny]) -> usize {
                #d_index
            }

            /// The R digits of thread `p`.
            #[inline(always)]
            pub fn rs_index(p: [::ck_core::Index; #np]) -> [::ck_core::Index; #nr] {
                #rs_index
            }

            /// Calls `f(y, d)` for every point of the Y box, in D order.
            #[inline(always)]
            pub fn for_each_y<F: FnMut([::ck_core::Index; #ny], usize)>(mut f: F) {
                #for_each_y
            }

            /// Calls `f(y, d)` for every point of the Y box, in span (sweep) order.
            #[inline(always)]
            pub fn sweep<F: FnMut([::ck_core::Index; #ny], usize)>(mut f: F) {
                #sweep
            }
        }

        impl #impl_g ::ck_core::TileDistribution for #ident #ty_g #where_c {
            type P = [::ck_core::Index; #np];
            type Y = [::ck_core::Index; #ny];
            type X = [::ck_core::Index; #nx];
            type R = [::ck_core::Index; #nr];
            type Buffer<T: Copy> = #buffer;
            const ENCODING: ::ck_core::Encoding = Self::ENCODING;
            const X_LENGTHS: Self::X = Self::X_LENGTHS;
            const Y_LENGTHS: Self::Y = Self::Y_LENGTHS;
            const R_LENGTHS: Self::R = Self::R_LENGTHS;
            const THREAD_BUFFER_SIZE: usize = Self::THREAD_BUFFER_SIZE;
            const WARP_SIZE: u32 = Self::WARP_SIZE;
            const BLOCK_SIZE: u32 = Self::BLOCK_SIZE;
            #[inline(always)]
            fn partition_index(thread_id: u32) -> Self::P {
                Self::partition_index(thread_id)
            }
            #[inline(always)]
            fn x_index(p: Self::P, y: Self::Y) -> Self::X {
                Self::x_index(p, y)
            }
            #[inline(always)]
            fn d_index(y: Self::Y) -> usize {
                Self::d_index(y)
            }
            #[inline(always)]
            fn rs_index(p: Self::P) -> Self::R {
                Self::rs_index(p)
            }
            #[inline(always)]
            fn for_each_y<F: FnMut(Self::Y, usize)>(f: F) {
                Self::for_each_y(f)
            }
            #[inline(always)]
            fn sweep<F: FnMut(Self::Y, usize)>(f: F) {
                Self::sweep(f)
            }
        }
    }
}

fn counts(def: &DistributionDef) -> [usize; 4] {
    [
        def.p_major.items.len(),
        def.y_major.items.len(),
        def.h.items.len(),
        def.r.items.len(),
    ]
}

/// The `ENCODING` constant's expression, lengths as written (literals or const expressions).
/// Literal lengths were checked at expansion; const-generic ones are checked here, in const
/// evaluation, against `Self::CHECKS` (a compile error names the violated rule).
fn encoding_expr(def: &DistributionDef, parametric: bool) -> TokenStream {
    let len = |l: &Len| {
        let e = &l.expr;
        match l.value {
            Some(v) => {
                let v = int(v);
                quote!(#v)
            }
            None => quote!((#e) as ::ck_core::Index),
        }
    };
    let r = def.r.items.iter().map(len);
    let h = def.h.items.iter().map(|l| {
        let v = l.items.iter().map(len);
        quote!(&[#(#v),*])
    });
    let ints = |l: &crate::parse::List<crate::parse::Int>| {
        let v = l.items.iter().map(|i| int(i.value));
        quote!(&[#(#v),*])
    };
    let pm = def.p_major.items.iter().map(ints);
    let pn = def.p_minor.items.iter().map(ints);
    let ym = ints(&def.y_major);
    let yn = ints(&def.y_minor);
    let lists = quote!(&[#(#r),*], &[#(#h),*], &[#(#pm),*], &[#(#pn),*], #ym, #yn);
    if parametric {
        quote! {
            match ::ck_core::encoding::UncheckedEncoding::new(#lists) {
                ::core::result::Result::Ok(u) => u.expect_valid(&Self::CHECKS),
                ::core::result::Result::Err(_) => ::core::panic!("tile_distribution!: capacities are checked at expansion"),
            }
        }
    } else {
        quote! {
            match ::ck_core::Encoding::new(#lists) {
                ::core::result::Result::Ok(e) => e,
                ::core::result::Result::Err(_) => ::core::panic!("tile_distribution!: the encoding was checked at expansion"),
            }
        }
    }
}

fn digit_name(d: &PDigit) -> proc_macro2::Ident {
    format_ident!("p{}_{}", d.p, d.k)
}

/// `p / divisor` then `% length` without a division: shifts and masks for powers of two, the
/// merge's magic-number multiplication otherwise.
fn digit_expr(d: &PDigit) -> TokenStream {
    let pv = format_ident!("p{}", d.p);
    let q = if d.divisor == 1 {
        quote!(#pv)
    } else if (d.divisor as u32).is_power_of_two() {
        let s = int(d.divisor.trailing_zeros());
        quote!(#pv >> #s)
    } else {
        let (m, s) = magic(d.divisor as u32);
        let (m, s) = (Literal::u32_suffixed(m), Literal::u32_suffixed(s));
        quote!(::ck_core::magic::magic_div(#pv, (#m, #s)))
    };
    let v = if d.top {
        q
    } else if d.length == 1 {
        quote!(0u32)
    } else if (d.length as u32).is_power_of_two() {
        let mask = int(d.length - 1);
        if d.divisor == 1 {
            quote!(#q & #mask)
        } else {
            quote!((#q) & #mask)
        }
    } else {
        let (m, s) = magic(d.length as u32);
        let (m, s) = (Literal::u32_suffixed(m), Literal::u32_suffixed(s));
        let l = int(d.length);
        quote!({ let q = #q; q - ::ck_core::magic::magic_div(q, (#m, #s)) * #l })
    };
    if d.top && d.divisor == 1 {
        quote!(#v as ::ck_core::Index)
    } else {
        quote!((#v) as ::ck_core::Index)
    }
}

fn scaled(value: TokenStream, place: Index) -> TokenStream {
    if place == 1 {
        value
    } else {
        let p = int(place);
        quote!(#value * #p)
    }
}

fn sum(terms: Vec<TokenStream>) -> TokenStream {
    if terms.is_empty() {
        quote!(0)
    } else {
        quote!(#(#terms)+*)
    }
}

/// Bindings `let pK = p[K] as u32; let pK_J = digit;` for the digits `used`.
fn digit_bindings(used: &[PDigit]) -> TokenStream {
    let mut ps: Vec<usize> = used.iter().map(|d| d.p).collect();
    ps.sort_unstable();
    ps.dedup();
    let pv = ps.iter().map(|&p| {
        let name = format_ident!("p{}", p);
        let i = int(p as i64);
        quote!(let #name = p[#i] as u32;)
    });
    let digits = used.iter().map(|d| {
        let name = digit_name(d);
        let e = digit_expr(d);
        quote!(let #name = #e;)
    });
    quote!(#(#pv)* #(#digits)*)
}

fn dedup_digits(it: impl Iterator<Item = PDigit>) -> Vec<PDigit> {
    let mut v: Vec<PDigit> = Vec::new();
    for d in it {
        if !v.contains(&d) {
            v.push(d);
        }
    }
    v.sort_by_key(|d| (d.p, d.k));
    v
}

fn literal_bodies(def: &DistributionDef, l: &Lowered) -> Bodies {
    // `[tid / G, tid % G]` with G the lanes of a lane group (NP = 2), `[tid % W]` (NP = 1);
    // both powers of two (the checks ask that G divide the warp size, 32 or 64).
    let w = if l.np == 2 { l.lanes } else { l.warp_size };
    let shift = int(w.trailing_zeros());
    let mask = int(w - 1);
    let partition_index = if l.np == 2 {
        quote!([(thread_id >> #shift) as ::ck_core::Index, (thread_id & #mask) as ::ck_core::Index])
    } else {
        quote!([(thread_id & #mask) as ::ck_core::Index])
    };
    let used = dedup_digits(l.x_terms.iter().flatten().filter_map(|t| match t {
        Term::P(d, _) => Some(*d),
        Term::Y(..) => None,
    }));
    let bindings = digit_bindings(&used);
    let xs = l.x_terms.iter().map(|terms| {
        sum(terms
            .iter()
            .map(|t| match t {
                Term::Y(i, place) => {
                    let i = int(*i as i64);
                    scaled(quote!(y[#i]), *place)
                }
                Term::P(d, place) => {
                    let n = digit_name(d);
                    scaled(quote!(#n), *place)
                }
            })
            .collect())
    });
    let x_index = quote! { #bindings [#(#xs),*] };
    let d_terms = l.d_places.iter().enumerate().map(|(i, &place)| {
        let i = int(i as i64);
        scaled(quote!(y[#i]), place)
    });
    let d_sum = sum(d_terms.collect());
    let d_index = quote!((#d_sum) as usize);
    let rs_used = dedup_digits(l.rs_digits.iter().flatten().copied());
    let rs_bindings = digit_bindings(&rs_used);
    let rs = l.rs_digits.iter().map(|d| match d {
        Some(d) => {
            let n = digit_name(d);
            quote!(#n)
        }
        None => quote!(0),
    });
    let rs_index = quote! { #rs_bindings [#(#rs),*] };
    let for_each_y = l.y_d_order.iter().enumerate().map(|(d, y)| {
        let y = list(y);
        let d = Literal::usize_unsuffixed(d);
        quote!(f(#y, #d);)
    });
    let sweep = l.y_span_order.iter().map(|(y, d)| {
        let y = list(y);
        let d = Literal::usize_unsuffixed(*d);
        quote!(f(#y, #d);)
    });
    Bodies {
        encoding: encoding_expr(def, false),
        x_lengths: list(&l.x_lengths),
        y_lengths: list(&l.y_lengths),
        r_lengths: list(&l.r_lengths),
        thread_buffer_size: tokens(Literal::usize_unsuffixed(l.thread_buffer_size)),
        warp_size: tokens(int(w)),
        block_size: tokens(int(l.block_size)),
        partition_index,
        x_index,
        d_index,
        rs_index,
        for_each_y: quote!(#(#for_each_y)*),
        sweep: quote!(#(#sweep)*),
        extra: TokenStream::new(),
        buffer: {
            let n = Literal::usize_unsuffixed(l.thread_buffer_size);
            quote!([T; #n])
        },
    }
}

fn opt_expr(l: &Option<Len>) -> TokenStream {
    match l {
        Some(l) => {
            let e = &l.expr;
            quote!((#e) as u32)
        }
        None => quote!(0),
    }
}

fn parametric_bodies(def: &DistributionDef) -> Bodies {
    let warp = opt_expr(&def.warp_size);
    let block = opt_expr(&def.block_size);
    let shape = match &def.shape {
        Some(s) => {
            let v = s.items.iter().map(|l| {
                let e = &l.expr;
                quote!((#e) as ::ck_core::Index)
            });
            quote!(::ck_core::Dims::from_slice(&[#(#v),*]))
        }
        None => quote!(::ck_core::Dims::EMPTY),
    };
    let arr = |e: TokenStream| quote!(::ck_core::distribution::array(&#e));
    let extra = quote! {
        /// What the encoding was checked against.
        pub const CHECKS: ::ck_core::encoding::Checks =
            ::ck_core::encoding::Checks { warp_size: #warp, block_size: #block, shape: #shape };
    };
    let capacity_msg = format!(
        "{}: a distribution with const-generic lengths holds at most 256 registers per thread",
        rules::CAPACITY_EXCEEDED
    );
    let dims = |n: &str| {
        let n = format_ident!("{}", n);
        quote!(::ck_core::Dims::from_slice(&#n))
    };
    let (pd, yd) = (dims("p"), dims("y"));
    Bodies {
        encoding: encoding_expr(def, true),
        x_lengths: arr(quote!(Self::ENCODING.x_lengths())),
        y_lengths: arr(quote!(Self::ENCODING.y_lengths())),
        r_lengths: arr(quote!(Self::ENCODING.r_lengths())),
        thread_buffer_size: quote! {{
            let n = Self::ENCODING.thread_buffer_size() as usize;
            ::core::assert!(
                n <= ::ck_core::distribution::PARAMETRIC_BUFFER_CAPACITY,
                #capacity_msg
            );
            n
        }},
        warp_size: warp,
        block_size: quote!(Self::ENCODING.block_size() as u32),
        partition_index: arr(quote!(
            Self::ENCODING.partition_index(thread_id, Self::WARP_SIZE)
        )),
        x_index: arr(quote!(Self::ENCODING.x_index_closed_form(&#pd, &#yd))),
        d_index: quote!(Self::ENCODING.d_index(&#yd) as usize),
        rs_index: arr(quote!(Self::ENCODING.rs_index_closed_form(&#pd))),
        for_each_y: quote!(::ck_core::distribution::for_each_y(
            &Self::ENCODING,
            |y, d| f(::ck_core::distribution::array(y), d)
        )),
        sweep: quote!(::ck_core::distribution::sweep(&Self::ENCODING, |y, d| f(
            ::ck_core::distribution::array(y),
            d
        ))),
        extra,
        // Generic lengths cannot size an array on stable Rust: a fixed capacity, checked.
        buffer: quote!([T; ::ck_core::distribution::PARAMETRIC_BUFFER_CAPACITY]),
    }
}

/// The full expansion of a checked definition.
pub fn emit(def: &DistributionDef, checked: &Checked) -> TokenStream {
    let bodies = match &checked.encoding {
        Some(e) => literal_bodies(def, &crate::lower::lower(checked, e)),
        None => parametric_bodies(def),
    };
    let items = frame(def, counts(def), bodies);
    let warnings = checked.warnings.iter().map(|w| w.to_tokens());
    quote!(#items #(#warnings)*)
}

/// The same items with bodies that never run, so code using the distribution still
/// type-checks while the errors are reported.
pub fn stub(def: &DistributionDef) -> TokenStream {
    let [_, ny, nx, nr] = counts(def);
    let never = quote!(::core::panic!(
        "tile_distribution!: the encoding has errors"
    ));
    let zeros = |n: usize| quote!([0; #n]);
    let bodies = Bodies {
        encoding: quote!(::ck_core::Encoding::UNIT),
        x_lengths: zeros(nx),
        y_lengths: zeros(ny),
        r_lengths: zeros(nr),
        thread_buffer_size: quote!(0),
        warp_size: quote!(0),
        block_size: quote!(0),
        partition_index: never.clone(),
        x_index: never.clone(),
        d_index: never.clone(),
        rs_index: never.clone(),
        for_each_y: never.clone(),
        sweep: never,
        extra: TokenStream::new(),
        buffer: quote!([T; 0]),
    };
    frame(def, counts(def), bodies)
}
