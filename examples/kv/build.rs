//! Generates KV's types and typed services from kv.x into OUT_DIR.
fn main() {
    if let Err(e) = xdr_spec::pipeline::Build::xdr("kv.x").services(true).run() {
        panic!("generating KV from kv.x failed:\n{e}");
    }
}
