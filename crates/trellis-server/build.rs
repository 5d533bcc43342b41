//! Rebuilds the crate when the embedded web UI bundle (`ui/dist`) changes.

fn main() {
    println!("cargo:rerun-if-changed=../../ui/dist");
}
