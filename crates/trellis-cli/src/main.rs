//! The `trellis` binary: validate, run, observe and control typed workflow graphs.

fn main() {
    println!("trellis");
}
