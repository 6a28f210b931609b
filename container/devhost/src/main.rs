//! placeholder: see the issue that owns this crate.
fn main() {}
