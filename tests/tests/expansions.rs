//! insta snapshots of `tile_distribution!` expansions (prettyplease-formatted), one per input
//! file in `tests/expand/`. Review changes with `cargo insta review`.

use std::path::Path;

fn expand(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expand")
        .join(file);
    let src = std::fs::read_to_string(&path).unwrap();
    let tokens: proc_macro2::TokenStream = src.parse().unwrap();
    let out = ck_dsl::tile_distribution(tokens);
    let file = syn::parse2::<syn::File>(out).expect("the expansion parses as items");
    prettyplease::unparse(&file)
}

macro_rules! snapshot {
    ($name:ident) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(
                stringify!($name),
                expand(concat!(stringify!($name), ".txt"))
            );
        }
    };
}

snapshot!(tv1_raw);
snapshot!(tv1c_named);
snapshot!(tv2_replicated);
snapshot!(one_p);
snapshot!(non_pow2);
snapshot!(parametric);
snapshot!(error_stub);
snapshot!(warning);

#[test]
fn literal_expansions_have_no_loops_and_no_division() {
    for f in [
        "tv1_raw",
        "tv1c_named",
        "tv2_replicated",
        "one_p",
        "non_pow2",
    ] {
        let text = expand(&format!("{f}.txt"));
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("///") && !l.contains("panic!("))
            .collect::<Vec<_>>()
            .join("\n");
        let body = code
            .split("impl ::ck_core::TileDistribution")
            .next()
            .unwrap();
        for banned in [" for ", "while ", "loop ", " / ", " % "] {
            assert!(
                !body.contains(banned),
                "{f}: emitted code contains `{banned}`"
            );
        }
    }
}
