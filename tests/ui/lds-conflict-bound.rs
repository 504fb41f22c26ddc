use ck_core::lds::{LdsLayout, Pattern};

// Spec TV8b: the plain 64 × 64 layout is 8-way for column reads; a kernel that requires it to be
// conflict-free does not compile, and the error names the lanes and the bank.
const PLAIN: LdsLayout = LdsLayout::plain_or_panic(64, 64, 8, 2);
const _: () = PLAIN.assert_max_ways(Pattern::KRead, 1);

fn main() {}
