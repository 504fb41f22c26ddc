//! Prints the expansion of a `tile_distribution!` body read from stdin (for reviewing output).
use std::io::Read;
fn main() {
    let mut src = String::new();
    std::io::stdin().read_to_string(&mut src).unwrap();
    let tokens: proc_macro2::TokenStream = src.parse().unwrap();
    let out = ck_dsl::tile_distribution(tokens);
    match syn::parse2::<syn::File>(out.clone()) {
        Ok(f) => print!("{}", prettyplease::unparse(&f)),
        Err(_) => println!("{out}"),
    }
}
