//! What the generated Rust looks like to a person reading it: labels by
//! name, no checks that cannot fail. (That it compiles is
//! `generated_compiles.rs`'s property; that it round-trips, the corpus's.)

fn generate(src: &str) -> String {
    let spec = xdr_spec::parse::parse(src).unwrap();
    xdr_spec::gen::generate(&spec, src, &Default::default()).unwrap()
}

/// The lines of `rust` from the one that contains `start` to the next line
/// that is exactly `}` (the end of a top-level item).
fn item<'r>(rust: &'r str, start: &str) -> &'r str {
    let from = rust.find(start).unwrap_or_else(|| panic!("no `{start}` in:\n{rust}"));
    let len = rust[from..].find("\n}\n").map_or(rust.len() - from, |n| n + 3);
    &rust[from..from + len]
}

#[test]
fn union_arms_match_and_write_labels_by_name() {
    let rust = generate(
        "enum msg_type { RDMA_MSG = 0, RDMA_DONE = 3 };\n\
         const KIND_ONE = 1;\n\
         union body switch (msg_type proc) { case RDMA_MSG: unsigned int x; case RDMA_DONE: void; };\n\
         union by_const switch (unsigned int kind) { case KIND_ONE: int one; case 2: void; };\n",
    );
    let body = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for Body");
    assert!(body.contains("self::RDMA_MSG => Self::RdmaMsg("), "{body}");
    assert!(body.contains("self::RDMA_DONE => Self::RdmaDone,"), "{body}");
    assert!(body.contains("w.put_i32(self::RDMA_DONE)"), "{body}");
    assert!(!body.contains(" 0 =>") && !body.contains(" 3 =>"), "{body}");
    // An `unsigned int` discriminant: a constant by name, a literal as written.
    let by_const = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for ByConst");
    assert!(by_const.contains("self::KIND_ONE => Self::KindOne("), "{by_const}");
    assert!(by_const.contains("2 => Self::Case2,"), "{by_const}");
}

#[test]
fn no_fixed_length_check_that_cannot_fail() {
    let rust = generate(
        "struct seg { unsigned int handle; unsigned hyper offset; };\n\
         struct blob { opaque data<>; };\n\
         struct pair { seg a; seg b; };\n",
    );
    // Known here to be 12 bytes: the length is the literal.
    let seg = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for Seg");
    assert!(seg.contains("fn encoded_len(&self) -> usize {\n        12\n    }"), "{seg}");
    // Known here to vary: no `FIXED_LEN` check, whose answer is always `None`.
    let blob = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for Blob");
    assert!(!blob.contains("Self::FIXED_LEN"), "{blob}");
    // Made of other types: still known here, as every layout is.
    let pair = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for Pair");
    assert!(pair.contains("fn encoded_len(&self) -> usize {\n        24\n    }"), "{pair}");
    assert!(!pair.contains("Self::FIXED_LEN"), "{pair}");
}

/// The layout constants are literals the generator worked out, not
/// expressions over other types' constants.
#[test]
fn layout_constants_are_literals() {
    let rust = generate(
        "struct seg { unsigned int handle; unsigned hyper offset; };\n\
         struct chunk { unsigned int position; seg target; };\n\
         struct list { chunk entry; list *next; };\n\
         struct hdr { list *reads; seg segs<4>; opaque tag[3]; };\n\
         union u switch (int d) { case 1: seg s; case 2: hdr h; default: void; };\n",
    );
    let chunk = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for Chunk");
    assert!(
        chunk.contains("const MIN_LEN: usize = 16;\n    const FIXED_LEN: Option<usize> = Some(16);\n    const PLAIN: bool = true;\n"),
        "{chunk}"
    );
    let hdr = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for Hdr");
    assert!(hdr.contains("const MIN_LEN: usize = 12;\n    const FIXED_LEN: Option<usize> = None;\n"), "{hdr}");
    assert!(hdr.contains("const PLAIN: bool = false;\n    const BOUNDED: bool = true;\n"), "{hdr}");
    let u = item(&rust, "impl<'a> xdr_spec_rt::Xdr<'a> for U");
    assert!(u.contains("const MIN_LEN: usize = 4;\n    const FIXED_LEN: Option<usize> = None;\n"), "{u}");
    assert!(!rust.contains("xdr_spec_rt::fixed_add") && !rust.contains("::MIN_LEN"), "{rust}");
}

/// An enum's `from_value` matches the enumerators' constants by name.
#[test]
fn enum_values_match_by_name() {
    let rust = generate("enum errcode { ERR_VERS = 1, ERR_CHUNK = 2 };\n");
    let from = item(&rust, "impl Errcode {");
    assert!(from.contains("self::ERR_VERS => Some(Self::ErrVers),"), "{from}");
    assert!(from.contains("self::ERR_CHUNK => Some(Self::ErrChunk),"), "{from}");
    assert!(!from.contains(" 1 =>"), "{from}");
}

/// A list struct whose name says it is one entry keeps that name for the
/// entry, and the list is `...List`: not `TkvsEntryEntry`.
#[test]
fn a_list_entry_struct_does_not_double_its_suffix() {
    let rust = generate(
        "struct tkvs_entry { string key<>; unsigned int value; tkvs_entry *next; };\n\
         struct tkvs { tkvs_entry *entries; };\n\
         struct seg_list { unsigned int handle; unsigned int length; seg_list *next; };\n",
    );
    assert!(!rust.contains("EntryEntry"), "{rust}");
    assert!(rust.contains("pub type TkvsList<'a> = xdr_spec_rt::List<'a, TkvsEntry<'a>>;"), "{rust}");
    assert!(rust.contains("pub struct TkvsEntry<'a> {"), "{rust}");
    assert!(rust.contains("pub entries: xdr_spec_rt::List<'a, TkvsEntry<'a>>,"), "{rust}");
    // Other names keep `...Entry` for the entry.
    assert!(rust.contains("pub type SegList<'a> = xdr_spec_rt::List<'a, SegListEntry>;"), "{rust}");
    assert!(rust.contains("pub struct SegListEntry {"), "{rust}");
}
