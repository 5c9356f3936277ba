//! Generates CALC's types from calc.txt into OUT_DIR, on every build where calc.txt changed.
fn main() {
    if let Err(e) = xdr_spec::pipeline::Build::new("calc.txt").run() {
        panic!("generating CALC's types from calc.txt failed:\n{e}");
    }
}
