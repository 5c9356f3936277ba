//! Generates KV's types, typed services and Upper-Layer Binding from kv.x and kv.binding.
fn main() {
    if let Err(e) = xdr_spec::pipeline::Build::xdr("kv.x").binding("kv.binding").run() {
        panic!("generating KV from kv.x failed:\n{e}");
    }
}
