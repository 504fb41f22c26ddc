fn main() {
    let _s = ck_core::shared!(f32; 64);
}
