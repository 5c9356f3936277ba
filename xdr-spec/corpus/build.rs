//! Check and generate every XDR file of the corpus into OUT_DIR, one Rust
//! module per file. A checker error or a generator refusal fails the build.

use std::path::{Path, PathBuf};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("xdr");
    println!("cargo:rerun-if-changed={}", dir.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("read xdr/").map(|e| e.expect("entry").path()).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "x")) {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_name().expect("file name").to_string_lossy().into_owned();
        let xdr = std::fs::read_to_string(path).expect("read .x");
        match xdr_spec::pipeline::xdr_to_rust(&name, &xdr, Vec::new()) {
            Ok((rust, _notes)) => {
                let stem = path.file_stem().expect("stem").to_string_lossy().into_owned();
                std::fs::write(out.join(format!("{stem}.rs")), rust).expect("write generated Rust");
            }
            Err(e) => panic!("{e}"),
        }
    }
}
