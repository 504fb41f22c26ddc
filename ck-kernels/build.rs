fn main() {
    ck_build::embed_ptx();
}
