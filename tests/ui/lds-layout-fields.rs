use ck_core::lds::LdsLayout;

// A layout built field by field would skip the constructors' checks (k_pack = 0 would divide by
// zero in `offset`): the fields are private.
fn main() {
    let _ = LdsLayout { m_per_block: 64, k_per_block: 32, k_pack: 0, elem_bytes: 2, mlds_layer: 1, swizzled: true };
}
