//! Every type the corpus defines, decoded and re-encoded: random word streams
//! that decode must re-encode to exactly the bytes consumed, and values built
//! by hand must come back equal. Also the encoder's bound checks.

#[path = "../../tests/support/mod.rs"]
#[macro_use]
mod support;

use proptest::prelude::*;
use xdr_spec_corpus::{arrays, lists, program, scalars, unions};
use xdr_spec_rt::{Error, List, Seq, Xdr};

roundtrip_props! {
    scalars_struct: scalars::Scalars,
    scalars_painted: scalars::Painted,
    scalars_colour: scalars::Colour,
    arrays_point: arrays::Point,
    arrays_handle: arrays::Handle<'_>,
    arrays_blob: arrays::Blob<'_>,
    arrays_name: arrays::Name<'_>,
    arrays_triangle: arrays::Triangle<'_>,
    arrays_polygon: arrays::Polygon<'_>,
    arrays_arrays: arrays::Arrays<'_>,
    unions_shape: unions::Shape,
    unions_by_int: unions::ByInt<'_>,
    unions_by_unsigned: unions::ByUnsigned,
    unions_by_bool: unions::ByBool,
    unions_container: unions::Container<'_>,
    lists_segment: lists::Segment,
    lists_seglist: lists::Seglist<'_>,
    lists_namelist: lists::Namelist<'_>,
    lists_holder: lists::Holder<'_>,
    lists_taglist: lists::Taglist<'_>,
    lists_tagged: lists::Tagged<'_>,
    program_args: program::Args<'_>,
    program_result: program::Result,
}

#[test]
fn constants_in_every_base() {
    assert_eq!((scalars::DECIMAL, scalars::HEX, scalars::OCTAL), (42, 42, 42));
    assert_eq!(scalars::NEGATIVE, -7);
    assert_eq!(scalars::BIG, u32::MAX);
    assert_eq!(scalars::Colour::Blue.value(), -7);
    assert_eq!(scalars::Colour::from_value(42), Some(scalars::Colour::Green));
    assert_eq!(scalars::GREEN, 42);
}

#[test]
fn scalars_have_their_rfc_4506_encodings() {
    let s = scalars::Scalars {
        i: -2,
        u: 3,
        h: -4,
        uh: 5,
        f: 1.5,
        d: -2.25,
        q: xdr_spec_rt::Quadruple([9; 16]),
        b: true,
        alias: 6,
    };
    let buf = roundtrip!(scalars::Scalars, s);
    assert_eq!(buf.len(), 4 + 4 + 8 + 8 + 4 + 8 + 16 + 4 + 4);
    assert_eq!(&buf[..4], &(-2i32).to_be_bytes());
    assert_eq!(&buf[16..24], &5u64.to_be_bytes());
    assert_eq!(&buf[24..28], &1.5f32.to_bits().to_be_bytes());
    assert_eq!(<scalars::Scalars as Xdr>::FIXED_LEN, Some(60));
}

#[test]
fn arrays_roundtrip_with_padding() {
    let points = [arrays::Point { x: 1, y: 2 }, arrays::Point { x: 3, y: 4 }];
    let ints = [1, 2, 3, 4];
    let flags = [true, false, true];
    let tri = [points[0], points[1], points[0]];
    let a = arrays::Arrays {
        fixed3: b"abc",
        fixed8: b"12345678",
        var_bounded: b"hello",
        var_unbounded: b"",
        text: "name",
        free_text: "some free text",
        fixed_ints: Seq::from_slice(&ints),
        var_ints: Seq::from_slice(&[9, 8]),
        hypers: Seq::from_slice(&[1i64 << 40]),
        fixed_points: Seq::from_slice(&points),
        var_points: Seq::from_slice(&points[..1]),
        h: arrays::Handle(b"twelve bytes"),
        b: arrays::Blob(b"x"),
        n: arrays::Name("n"),
        t: arrays::Triangle(Seq::from_slice(&tri)),
        p: arrays::Polygon(Seq::from_slice(&points)),
        flags: Seq::from_slice(&flags),
    };
    let mut buf = roundtrip!(arrays::Arrays<'_>, a);
    let (back, _) = arrays::Arrays::decode(&buf).unwrap();
    // opaque[3] is padded to 4 with a zero byte.
    assert_eq!(&buf[..4], b"abc\0");
    assert_eq!(back.fixed_points.get(1), Some(points[1]));
    assert_eq!(back.var_points.len(), 1);
    // Non-zero padding is refused.
    buf[3] = 1;
    assert_eq!(arrays::Arrays::decode(&buf).unwrap_err(), Error::NonZeroPadding { at: 3 });
}

#[test]
fn encoding_checks_the_specifications_bounds() {
    let ints = [1, 2, 3];
    let mut out = [0u8; 512];
    let too_long = arrays::Blob(&[0u8; 17]);
    assert!(matches!(too_long.encode(&mut out), Err(Error::OverBound { max: 16, .. })));
    let wrong_fixed = arrays::Triangle(Seq::from_slice(&[arrays::Point { x: 0, y: 0 }]));
    assert!(matches!(wrong_fixed.encode(&mut out), Err(Error::WrongLength { expected: 3, len: 1, .. })));
    let six = [0u32; 6];
    let base = arrays::Arrays {
        fixed3: b"abc",
        fixed8: b"12345678",
        var_bounded: b"",
        var_unbounded: b"",
        text: "",
        free_text: "",
        fixed_ints: Seq::from_slice(&[1, 2, 3, 4]),
        var_ints: Seq::from_slice(&six),
        hypers: Seq::default(),
        fixed_points: Seq::from_slice(&[arrays::Point { x: 0, y: 0 }; 2]),
        var_points: Seq::default(),
        h: arrays::Handle(b"twelve bytes"),
        b: arrays::Blob(b""),
        n: arrays::Name(""),
        t: arrays::Triangle(Seq::from_slice(&[arrays::Point { x: 0, y: 0 }; 3])),
        p: arrays::Polygon(Seq::default()),
        flags: Seq::default(),
    };
    assert!(matches!(base.encode(&mut out), Err(Error::OverBound { what: "arrays.var_ints", max: 5, .. })));
    let bad_fixed_ints = arrays::Arrays { var_ints: Seq::default(), fixed_ints: Seq::from_slice(&ints), ..base };
    assert!(matches!(bad_fixed_ints.encode(&mut out), Err(Error::WrongLength { what: "arrays.fixed_ints", .. })));
    // A default arm may not hold a discriminant that has an arm of its own.
    let stolen = unions::ByInt::Default { discriminant: 7, value: b"" };
    assert!(matches!(stolen.encode(&mut out), Err(Error::BadDiscriminant { value: 7, .. })));
    let ok = unions::ByInt::Default { discriminant: 8, value: b"abcd" };
    roundtrip!(unions::ByInt<'_>, ok);
    // A multi-label arm must hold one of its own labels.
    let bad = unions::Shape::Side { discriminant: unions::ShapeKind::Circle, value: 1 };
    assert!(matches!(bad.encode(&mut out), Err(Error::BadDiscriminant { .. })));
    // Nothing was written by a refused encode, and a short buffer is refused.
    assert!(matches!(ok.encode(&mut out[..3]), Err(Error::BufferTooSmall { need: 12, have: 3 })));
}

#[test]
fn unions_every_discriminant_kind() {
    assert_eq!(roundtrip!(unions::Shape, unions::Shape::Circle(5)), [0, 0, 0, 1, 0, 0, 0, 5]);
    let side = unions::Shape::Side { discriminant: unions::ShapeKind::Triangle, value: 3 };
    assert_eq!(roundtrip!(unions::Shape, side), [0, 0, 0, 3, 0, 0, 0, 3]);
    roundtrip!(unions::Shape, unions::Shape::Nothing);
    assert_eq!(&roundtrip!(unions::ByInt<'_>, unions::ByInt::CaseMinus1(-1))[..4], &[0xff; 4]);
    roundtrip!(unions::ByInt<'_>, unions::ByInt::Case7("seven"));
    roundtrip!(unions::ByUnsigned, unions::ByUnsigned::Case1(1));
    roundtrip!(unions::ByUnsigned, unions::ByUnsigned::Default { discriminant: 0xffff_fff0 });
    roundtrip!(unions::ByBool, unions::ByBool::True(unions::Shape::Circle(1)));
    roundtrip!(unions::ByBool, unions::ByBool::False);
    assert!(matches!(unions::ByBool::decode(&[0, 0, 0, 2]), Err(Error::BadBool { value: 2, at: 0 })));
    assert!(matches!(
        unions::Shape::decode(&[0, 0, 0, 9]),
        Err(Error::BadDiscriminant { type_name: "shape", value: 9, at: 0 })
    ));
    assert!(matches!(scalars::Painted::decode(&[0, 0, 0, 99]), Err(Error::BadEnum { value: 99, at: 0, .. })));
}

/// A default arm's discriminant that is no value of its enum is an error of
/// the enum, named as such (not as the union).
#[test]
fn bad_enum_discriminant_names_the_enum() {
    assert_eq!(
        unions::ByEnumDefault::decode(&[0, 0, 0, 9]),
        Err(Error::BadEnum { type_name: "shape_kind", value: 9, at: 0 })
    );
    roundtrip!(unions::ByEnumDefault, unions::ByEnumDefault::Default { discriminant: unions::ShapeKind::Square });
}

/// A list struct named for one entry: `kv_entry`'s entries are `KvEntry`
/// and the list is `KvList` (the generated names compile and round-trip).
#[test]
fn list_named_for_its_entry() {
    let entries = [lists::KvEntry { key: "a", value: 1 }, lists::KvEntry { key: "bc", value: 2 }];
    let table = lists::KvTable { entries: lists::KvList::from_slice(&entries) };
    let bytes = roundtrip!(lists::KvTable<'_>, table);
    // Each entry: TRUE, the key (length, one padded word), the value; then FALSE.
    assert_eq!(bytes.len(), 2 * (4 + 8 + 4) + 4);
}

/// A list behind a pointer (or a typedef of one) that breaks a limit is
/// named by its field, not only as "a list".
#[test]
fn list_limit_errors_name_their_field() {
    // Two list entries (TRUE, then a segment's four words), then FALSE.
    let two_entries = [1, 1, 2, 0, 3, 1, 4, 5, 0, 6, 0];
    let bytes = |words: &[&[u32]]| -> Vec<u8> { words.concat().iter().flat_map(|w| w.to_be_bytes()).collect() };
    let limits = xdr_spec_rt::Limits::default().max_list_entries(1);
    // `seglist *segs`, the first field of `holder`, then four empty fields.
    let segs = bytes(&[&two_entries, &[0; 5]]);
    assert!(matches!(
        lists::Holder::decode_with_limits(&segs, limits),
        Err(Error::LimitExceeded { what: "holder.segs", limit: 1, .. })
    ));
    // `seglist_ptr again` (a typedef of the pointer), the fourth field.
    let again = bytes(&[&[0; 3], &two_entries, &[0; 2]]);
    assert!(matches!(
        lists::Holder::decode_with_limits(&again, limits),
        Err(Error::LimitExceeded { what: "holder.again", limit: 1, .. })
    ));
    // Both decode without the limit.
    assert!(lists::Holder::decode(&segs).is_ok() && lists::Holder::decode(&again).is_ok());
    let shapes = [unions::Shape::Circle(2), unions::Shape::Nothing];
    let ints = [unions::ByInt::Case0, unions::ByInt::Case7("x")];
    let c = unions::Container {
        inner: unions::ContainerInner { a: 1, choice: unions::ContainerInnerChoice::Case1(0.5) },
        level: unions::ContainerLevel::High,
        shapes: Seq::from_slice(&shapes),
        ints: Seq::from_slice(&ints),
    };
    roundtrip!(unions::Container<'_>, c);
}

#[test]
fn lists_roundtrip_and_walk_in_a_loop() {
    let segs = [lists::Segment { handle: 1, length: 2, offset: 3 }, lists::Segment { handle: 4, length: 5, offset: 6 }];
    let tags = [1u32, 2];
    let names = [
        lists::NamelistEntry { name: "a", tags: Seq::from_slice(&tags) },
        lists::NamelistEntry { name: "bc", tags: Seq::default() },
    ];
    let tagged = [
        lists::TaglistEntry { tags: Seq::from_slice(&tags), note: "x" },
        lists::TaglistEntry { tags: Seq::default(), note: "" },
    ];
    let h = lists::Holder {
        segs: List::from_slice(&segs),
        names: List::from_slice(&names),
        maybe: Some(segs[1]),
        again: List::default(),
        tagged_entries: List::from_slice(&tagged),
        maybe_tagged: Some(lists::Tagged { segs: Seq::from_slice(&segs[..1]), flags: 9 }),
    };
    let buf = roundtrip!(lists::Holder<'_>, h);
    let (back, _) = lists::Holder::decode(&buf).unwrap();
    assert_eq!(back.segs.iter().collect::<Vec<_>>(), segs);
    assert_eq!(back.names.iter().map(|n| n.name).collect::<Vec<_>>(), ["a", "bc"]);
    // The optional-data wire form: TRUE entry TRUE entry FALSE.
    assert_eq!(&buf[..4], &[0, 0, 0, 1]);
    assert_eq!(&buf[20..24], &[0, 0, 0, 1]);
    assert_eq!(&buf[40..44], &[0, 0, 0, 0]);
    assert_eq!(back.tagged_entries, h.tagged_entries);
    assert_eq!(back.maybe_tagged, h.maybe_tagged);
    // An entry that starts with a counted array, written with its TRUE word
    // under one check (`encode_led`): TRUE, count, tags, note, ...
    // After segs (44 bytes), names (24 + 16 + 4), maybe (4 + 16) and again (4).
    let tagged_at = 44 + 44 + 20 + 4;
    assert_eq!(
        &buf[tagged_at..tagged_at + 24],
        &[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, b'x', 0, 0, 0]
    );
    // ... and the optional `tagged` at the end: TRUE, count 1, one segment, flags.
    assert_eq!(&buf[buf.len() - 28..buf.len() - 16], &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(&buf[buf.len() - 4..], &[0, 0, 0, 9]);

    // 100,000 entries: decoded without recursion, then refused by a limit.
    let mut long = Vec::new();
    for i in 0..100_000u32 {
        long.extend_from_slice(&1u32.to_be_bytes());
        long.extend_from_slice(&i.to_be_bytes());
        long.extend_from_slice(&[0; 12]);
    }
    long.extend_from_slice(&0u32.to_be_bytes());
    let (list, used) = lists::Seglist::decode(&long).unwrap();
    assert_eq!((list.len(), used), (100_000, long.len()));
    assert_eq!(list.iter().last().map(|s| s.handle), Some(99_999));
    let limits = xdr_spec_rt::Limits::default().max_list_entries(16);
    assert!(matches!(lists::Seglist::decode_with_limits(&long, limits), Err(Error::LimitExceeded { limit: 16, .. })));
}

#[test]
fn program_numbers_and_keyword_fields() {
    assert_eq!(program::KEYVAL_PROG, 0x2000_0099);
    assert_eq!((program::KEYVAL_V1, program::KEYVAL_V2), (1, 2));
    assert_eq!((program::KEYVAL_NULL, program::KEYVAL_SET, program::KEYVAL_ADD), (0, 1, 2));
    let a = program::Args { r#type: -1, r#match: 2, self_: "me" };
    roundtrip!(program::Args<'_>, a);
}

#[test]
fn huge_counts_are_refused_before_any_work() {
    // A count of 0xffffffff points with 8 bytes of input.
    let bytes = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 2];
    assert!(matches!(
        arrays::Polygon::decode(&bytes),
        Err(Error::CountExceedsInput { count: u32::MAX, remaining: 8, .. })
    ));
    assert!(matches!(arrays::Blob::decode(&bytes), Err(Error::OverBound { max: 16, .. })));
}
