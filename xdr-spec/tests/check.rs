//! The semantic checker, one test (or more) per rule, on small XDR texts and
//! on the real RPC-over-RDMA specifications.

use xdr_spec::check::{check, has_errors, Diagnostic, Severity};
use xdr_spec::extract::{extract, ExtractOptions};
use xdr_spec::parse::parse;

/// Parse and check, rendering every diagnostic as `LINE:COL: SEVERITY: MESSAGE`.
fn run(src: &str) -> Vec<String> {
    let spec = parse(src).unwrap_or_else(|e| panic!("parse error {e}"));
    check(&spec).iter().map(|d| render(d, src)).collect()
}

fn render(d: &Diagnostic, src: &str) -> String {
    d.render("t.x", src).strip_prefix("t.x:").unwrap().to_string()
}

#[track_caller]
fn expect(src: &str, expected: &[&str]) {
    let got = run(src);
    assert_eq!(got, expected, "\ngot:\n{}\n", got.join("\n"));
}

// ---- rule 1: undefined names ---------------------------------------------------

#[test]
fn rule1_undefined_type_name_suggests_the_closest() {
    expect(
        "struct point { int x; };\nstruct line { pointt a; point b; };",
        &["2:15: error: undefined name `pointt` (did you mean `point`?)"],
    );
}

#[test]
fn rule1_undefined_name_without_a_close_one() {
    expect("struct s {\n  quaternion x;\n};", &["2:3: error: undefined name `quaternion`"]);
}

/// A fixed-width integer name no definition gives (the RPC-over-RDMA drafts' `uint32`,
/// `uint64`) is told what XDR calls it and the typedef that defines it, not "did you mean".
#[test]
fn rule1_an_undefined_fixed_width_integer_name_is_told_its_xdr_type() {
    expect(
        "struct s {\n  uint32 x;\n  uint64 y;\n  int64_t z;\n};",
        &[
            "2:3: error: undefined name `uint32` (XDR has no `uint32`: a 32-bit unsigned integer is `unsigned int` (RFC 4506 section 4.2); `typedef unsigned int uint32;` defines it)",
            "3:3: error: undefined name `uint64` (XDR has no `uint64`: a 64-bit unsigned integer is `unsigned hyper` (RFC 4506 section 4.5); `typedef unsigned hyper uint64;` defines it)",
            "4:3: error: undefined name `int64_t` (XDR has no `int64_t`: a 64-bit integer is `hyper` (RFC 4506 section \
             4.5); `typedef hyper int64_t;` defines it)",
        ],
    );
    expect("struct s { uint16 x; };", &["1:12: error: undefined name `uint16`"]);
}

#[test]
fn rule1_undefined_constants_in_bounds_enum_values_labels_and_programs() {
    expect(
        "const MAX_LEN = 4;\n\
         typedef int a[MAXLEN];\n\
         enum e { E1 = ONE };\n\
         union u switch (int d) { case TWO: void; };\n\
         program P { version V { void NUL(void) = ZERO; } = 1; } = PROGNUM;",
        &[
            "2:15: error: undefined name `MAXLEN` (did you mean `MAX_LEN`?)",
            "3:15: error: undefined name `ONE`",
            "4:31: error: undefined name `TWO`",
            "5:42: error: undefined name `ZERO`",
            "5:59: error: undefined name `PROGNUM`",
        ],
    );
}

#[test]
fn rule1_v2_body_excerpt_suggests_chunk_lists() {
    // Hand-copied from draft-cel-nfsv4-rpcrdma-version-two-00, section 4.2:
    // the union refers to `rpcrdma2_chunks`, which the draft never defines.
    let src = "\
typedef unsigned int uint32;
typedef unsigned hyper uint64;
struct rpcrdma2_segment { uint32 rdma_handle; uint32 rdma_length; uint64 rdma_offset; };
struct rpcrdma2_read_segment { uint32 rdma_position; struct rpcrdma2_segment rdma_target; };
struct rpcrdma2_read_list { struct rpcrdma2_read_segment rdma_entry; struct rpcrdma2_read_list *rdma_next; };
struct rpcrdma2_write_chunk { struct rpcrdma2_segment rdma_target<>; };
struct rpcrdma2_write_list { struct rpcrdma2_write_chunk rdma_entry; struct rpcrdma2_write_list *rdma_next; };
struct rpcrdma2_chunk_lists {
    struct rpcrdma2_read_list *rdma_reads;
    struct rpcrdma2_write_list *rdma_writes;
    struct rpcrdma2_write_chunk *rdma_reply;
};
enum rpcrdma2_proc { RDMA_MSG = 0, RDMA_NOMSG = 1, RDMA_MSGP = 2, RDMA_DONE = 3, RDMA_ERROR = 4, RDMA_OPTIONAL = 5 };
union rpcrdma2_body switch (rpcrdma2_proc rdma_proc) {
    case RDMA_MSG:
      rpcrdma2_chunks rdma_chunks;
    case RDMA_NOMSG:
      rpcrdma2_chunks rdma_chunks;
    case RDMA_MSGP:
      void;
    case RDMA_DONE:
      void;
};
";
    let got = run(src);
    let errors: Vec<_> = got.iter().filter(|d| d.contains(": error: ")).collect();
    assert_eq!(
        errors,
        [
            "16:7: error: undefined name `rpcrdma2_chunks` (did you mean `rpcrdma2_chunk_lists`?)",
            "18:7: error: undefined name `rpcrdma2_chunks` (did you mean `rpcrdma2_chunk_lists`?)",
        ],
        "{got:#?}"
    );
}

// ---- rule 2: duplicates ----------------------------------------------------------

#[test]
fn rule2_duplicate_definitions_name_the_first() {
    expect(
        "struct a { int x; };\nunion a switch (int d) { default: void; };",
        &["1:8: note: `a` is first defined here", "2:7: error: duplicate name `a` (already defined as a struct)"],
    );
}

#[test]
fn rule2_each_later_duplicate_is_an_error_and_the_first_is_noted_once() {
    expect(
        "const N = 1;\ntypedef int N;\nenum N { X = 1 };",
        &[
            "1:7: note: `N` is first defined here",
            "2:13: error: duplicate name `N` (already defined as a constant)",
            "3:6: error: duplicate name `N` (already defined as a constant)",
        ],
    );
}

#[test]
fn rule2_enumerators_share_the_global_namespace() {
    expect(
        "enum e1 { A = 1, B = 2 };\nenum e2 { B = 3 };\nconst A = 4;",
        &[
            "1:11: note: `A` is first defined here",
            "1:18: note: `B` is first defined here",
            "2:11: error: duplicate name `B` (already defined as an enumerator of enum `e1`)",
            "3:7: error: duplicate name `A` (already defined as an enumerator of enum `e1`)",
        ],
    );
}

#[test]
fn rule2_duplicate_struct_fields() {
    expect(
        "struct s {\n  int x;\n  hyper x;\n};",
        &["2:7: note: `x` is first declared here", "3:9: error: duplicate field `x` in struct `s`"],
    );
}

#[test]
fn rule2_union_arms_may_share_a_name_only_with_the_same_type() {
    expect(
        "union u switch (int d) {\n case 1: hyper v;\n case 2: hyper v;\n case 3: int v;\n};",
        &[
            "2:16: note: `v` is first declared here",
            "3:16: note: union `u` has more than one arm named `v`, all `hyper v`; allowed, as the types are identical \
             (RFC 4506 section 6.4 wants names unique in a union, and the C rpcgen makes of it does not compile: one \
             arm with several case labels says the same)",
            "4:14: error: union arm `v` of union `u` is declared again with a different type: `int v`, not `hyper v`",
        ],
    );
}

#[test]
fn rule2_duplicate_enum_values() {
    expect(
        "enum e {\n  A = 1,\n  B = 2,\n  C = 1\n};",
        &["2:3: note: `A` is defined here", "4:3: error: enumerator `C` of enum `e` has the same value 1 as `A`"],
    );
}

// ---- rule 3: unions --------------------------------------------------------------

#[test]
fn rule3_case_label_from_another_enum_even_with_the_same_value() {
    expect(
        "enum color { RED = 0, GREEN = 1 };\n\
         enum shape { ROUND = 0 };\n\
         union u switch (color c) {\n case RED: void;\n case ROUND: int x;\n};",
        &["5:7: error: case label `ROUND` is a member of enum `shape`, not of enum `color`, the type of the \
           discriminant of union `u`"],
    );
}

#[test]
fn rule3_case_value_not_in_the_enum() {
    expect(
        "enum color { RED = 0, GREEN = 1 };\nconst ONE = 1;\nconst SEVEN = 7;\n\
         union u switch (color c) {\n case ONE: void;\n case 7: void;\n case SEVEN: void;\n};",
        &[
            "6:7: error: case value 7 is not a value of enum `color`",
            "7:7: error: case value `SEVEN` (= 7) is not a value of enum `color`",
        ],
    );
}

#[test]
fn rule3_duplicate_case_values() {
    expect(
        "const ONE = 1;\nunion u switch (int d) {\n case 1: int a;\n case ONE: int b;\n};",
        &[
            "3:7: note: the first case with value 1 is here",
            "4:7: error: duplicate case value `ONE` (= 1) in union `u`",
        ],
    );
}

#[test]
fn rule3_discriminant_must_be_int_unsigned_bool_or_enum() {
    expect(
        "typedef hyper h;\n\
         union a switch (h d) { default: void; };\n\
         union b switch (void) { default: void; };\n\
         union c switch (int d[2]) { default: void; };",
        &[
            "2:19: error: the discriminant `d` of union `a` has type `h`: it must be int, unsigned int, bool or an enum",
            "3:17: error: the discriminant of union `b` cannot be `void`",
            "4:21: error: the discriminant `d` of union `c` must be a single value, not an array or optional",
        ],
    );
}

#[test]
fn rule3_legal_discriminants_through_typedefs() {
    expect(
        "enum color { RED = 0, GREEN = 1 };\ntypedef color hue;\ntypedef unsigned int uint32;\n\
         union a switch (hue d) { case GREEN: void; };\n\
         union b switch (uint32 d) { case 4294967295: void; };\n\
         union c switch (bool d) { case TRUE: int x; case FALSE: void; };",
        &[],
    );
}

#[test]
fn rule3_case_values_must_fit_the_discriminant() {
    expect(
        "union a switch (unsigned int d) { case -1: void; };\n\
         union b switch (bool d) { case 2: void; };\n\
         union c switch (int d) { case 2147483648: void; };",
        &[
            "1:40: error: case value -1 does not fit the unsigned int discriminant of union `a`",
            "2:32: error: case value 2 is not a bool (TRUE = 1 or FALSE = 0)",
            "3:31: error: case value 2147483648 does not fit the int discriminant of union `c`",
        ],
    );
}

// ---- rule 4: types outside RFC 4506 ----------------------------------------------

#[test]
fn rule4_non_standard_types_say_what_rpcgen_makes_of_them() {
    expect(
        "struct s {\n  unsigned short a;\n  u_int b;\n  long c;\n  quad_t d;\n};",
        &[
            "2:3: error: `unsigned short` is not an RFC 4506 type (rpcgen accepts it as `u_short`, a 4-byte unsigned \
             int on the wire via xdr_u_short; write `unsigned int`)",
            "3:3: error: `u_int` is not an RFC 4506 type (rpcgen accepts it as `unsigned int` via xdr_u_int; write \
             `unsigned int`)",
            "4:3: error: `long` is not an RFC 4506 type (rpcgen accepts it as `long`, a 4-byte int on the wire via \
             xdr_long; write `int`)",
            "5:3: error: `quad_t` is not an RFC 4506 type (rpcgen accepts it as `hyper` via xdr_quad_t; write `hyper`)",
        ],
    );
}

#[test]
fn rule4_rpcgen_names_defined_by_the_spec_are_fine() {
    expect("typedef unsigned int u_int;\nstruct s { u_int b; };", &[]);
}

// ---- rule 5: recursion -----------------------------------------------------------

#[test]
fn rule5_optional_data_list_is_a_note() {
    expect(
        "struct entry { int v; };\nstruct list {\n  entry e;\n  struct list *next;\n};",
        &["2:8: note: `list` is an optional-data list; generated as a sequence decoded in a loop"],
    );
}

#[test]
fn rule5_optional_data_list_only_through_a_pointer() {
    // The generator refused these after the checker had accepted them.
    expect(
        "struct l { int v; l *next; };\ntypedef l arr<1>;\ntypedef l alias;\nstruct s { l *ok; l direct; };",
        &[
            "1:8: note: `l` is an optional-data list; generated as a sequence decoded in a loop",
            "2:9: error: `l` is an optional-data list; the generator supports it only through a pointer (`l *arr`), \
             which is how RFC 4506 section 4.19 uses it",
            "3:9: error: `l` is an optional-data list; the generator supports it only through a pointer (`l *alias`), \
             which is how RFC 4506 section 4.19 uses it",
            "4:19: error: `l` is an optional-data list; the generator supports it only through a pointer (`l \
             *direct`), which is how RFC 4506 section 4.19 uses it",
        ],
    );
}

#[test]
fn rule5_direct_cycle_has_infinite_size() {
    expect(
        "struct a { int n; b x; };\nstruct b { a y[2]; };",
        &["1:8: error: type `a` contains itself (a -> b -> a) with no optional (`*`) or variable-length array on the \
           way, so its size is infinite"],
    );
    expect(
        "typedef b a;\ntypedef a b;",
        &["1:11: error: type `a` contains itself (a -> b -> a) with no optional (`*`) or variable-length array on \
           the way, so its size is infinite"],
    );
}

#[test]
fn rule5_mutual_recursion_through_optional_is_unsupported() {
    expect(
        "struct a { int n; b *x; };\nstruct b { a *y; };",
        &["1:8: error: recursive type `a` (a -> b -> a): the generator decodes without recursion and supports only \
           the optional-data list idiom"],
    );
}

#[test]
fn rule5_tree_variable_array_union_and_misplaced_link_are_unsupported() {
    let tail = "the generator decodes without recursion and supports only the optional-data list idiom";
    expect(
        "struct tree { int v; tree *left; tree *right; };",
        &[format!("1:8: error: recursive type `tree` (tree -> tree): {tail}").as_str()],
    );
    expect("struct n { int v; n kids<>; };", &[format!("1:8: error: recursive type `n` (n -> n): {tail}").as_str()]);
    expect("struct s { s *next; int v; };", &[format!("1:8: error: recursive type `s` (s -> s): {tail}").as_str()]);
    expect(
        "union u switch (int d) { case 0: void; case 1: u inner; };",
        &[format!("1:7: error: recursive type `u` (u -> u): {tail}").as_str()],
    );
    expect(
        "struct l { int v; union switch (int d) { case 1: l *more; } ext; l *next; };",
        &[format!("1:8: error: recursive type `l` (l -> l): {tail}").as_str()],
    );
}

// ---- rule 6: other misuse ----------------------------------------------------------

#[test]
fn rule6_string_must_be_variable_length() {
    expect(
        "struct s {\n  string name[10];\n};",
        &["2:10: error: `string name[...]` is not XDR: strings are variable-length; write `string name<N>` (or \
           `opaque name[N]` for fixed-length bytes)"],
    );
}

#[test]
fn rule6_array_bounds() {
    expect(
        "const BIG = 4294967296;\n\
         typedef int a[-1];\n\
         typedef int b<BIG>;\n\
         typedef opaque c[0];\n\
         typedef opaque d<4294967295>;",
        &[
            "1:13: error: constant `BIG` = 4294967296 does not fit in 32 bits (an int or an unsigned int)",
            "2:15: error: the size of array `a`, -1, is negative",
            "3:15: error: the size of array `b`, `BIG` (= 4294967296), does not fit in an unsigned int",
            "4:18: warning: fixed-length array `c` has size 0",
        ],
    );
}

#[test]
fn rule6_void_struct_field() {
    expect(
        "struct s {\n  int a;\n  void;\n};",
        &["3:3: error: `void` is not allowed as a struct field (only a union arm may be void)"],
    );
}

#[test]
fn rule6_enum_and_constant_ranges() {
    expect(
        "enum e { BIG = 2147483648, SMALL = -2147483648 };\n\
         const U = 0xFFFFFFFF;\n\
         const NEG = -2147483649;\n\
         enum f { ALIAS = U };",
        &[
            "1:16: error: the value 2147483648 of enumerator `BIG` does not fit in a 32-bit signed int",
            "3:13: error: constant `NEG` = -2147483649 does not fit in 32 bits (an int or an unsigned int)",
            "4:18: error: the value `U` (= 4294967295) of enumerator `ALIAS` does not fit in a 32-bit signed int",
        ],
    );
}

#[test]
fn rule6_unresolvable_constants() {
    expect(
        "const A = B;\nconst B = A;",
        &[
            "1:7: error: the value of constant `A` cannot be resolved: constants refer to each other in a cycle, or \
             in a chain longer than 64",
            "2:7: error: the value of constant `B` cannot be resolved: constants refer to each other in a cycle, or \
             in a chain longer than 64",
        ],
    );
}

#[test]
fn rule6_keyword_mismatch() {
    expect(
        "union u switch (int d) { default: void; };\ntypedef int t;\nstruct s {\n  struct u x;\n  enum t y;\n  union u z;\n};",
        &[
            "4:10: error: `struct u` refers to a union, not a struct",
            "5:8: error: `enum t` refers to a typedef, not an enum",
        ],
    );
}

#[test]
fn rule6_names_of_the_wrong_kind() {
    expect(
        "const N = 3;\nenum e { A = 1 };\nstruct t { int a; };\n\
         struct s {\n  N x;\n  A y;\n  int z[t];\n};",
        &[
            "5:3: error: `N` is a constant, not a type",
            "6:3: error: `A` is an enumerator of enum `e`, not a type",
            "7:9: error: `t` is a struct, not a constant",
        ],
    );
}

#[test]
fn rule6_program_numbers() {
    expect(
        "program P {\n\
         \x20 version V1 { void NUL(void) = 0; int GET(int) = 1; } = 1;\n\
         \x20 version V2 { void NUL(void) = 0; int GET(int) = 1; int PUT(int) = 1; } = 1;\n\
         } = 100;\n\
         program Q { version W { undefined_t Z(void) = 0; } = 1; } = 100;\n\
         program R { version X { void Y(void) = 0; } = NOPE; } = 4294967296;",
        &[
            "1:9: note: `P` is defined here",
            "2:11: note: `V1` is defined here",
            "3:40: note: `GET` is defined here",
            "3:69: error: procedure number 1 of version `V2` is already used by procedure `GET`",
            "3:76: error: version number 1 of program `P` is already used by version `V1`",
            "5:25: error: undefined name `undefined_t`",
            "5:61: error: program number 100 of `Q` is already used by program `P`",
            "6:47: error: undefined name `NOPE`",
            "6:57: error: the number of program `R`, 4294967296, does not fit in an unsigned int",
        ],
    );
}

// ---- rule 7: names distinct in XDR but not in the generated Rust ----------------
//
// Each of these specifications checked clean before the rule, and its
// generated Rust did not compile (E0428, E0124, E0107).

#[test]
fn rule7_types_that_convert_to_one_rust_name() {
    expect(
        "struct foo_bar { int a; };\nstruct FooBar { int a; };\ntypedef int fooBar;",
        &[
            "1:8: note: struct `foo_bar` is defined here",
            "2:8: error: struct `FooBar` and struct `foo_bar` both become `FooBar` in the generated Rust, where they \
             share the type namespace of one module; rename one of them",
            "3:13: error: typedef `fooBar` and struct `foo_bar` both become `FooBar` in the generated Rust, where \
             they share the type namespace of one module; rename one of them",
        ],
    );
}

#[test]
fn rule7_constants_and_enumerators_share_one_rust_namespace() {
    expect(
        "const foo = 1;\nenum E { FOO = 2 };",
        &[
            "1:7: note: constant `foo` is defined here",
            "2:10: error: enumerator `FOO` of enum `E` and constant `foo` both become `FOO` in the generated Rust, \
             where they share the value (constant or constructor) namespace of one module; rename one of them",
        ],
    );
    // A typedef with a bound is a tuple struct, whose constructor is a value.
    expect(
        "typedef int a_b<3>;\nconst AB = 1;",
        &[
            "1:13: note: the constructor of typedef `a_b` is defined here",
            "2:7: error: constant `AB` and the constructor of typedef `a_b` both become `AB` in the generated Rust, \
             where they share the value (constant or constructor) namespace of one module; rename one of them",
        ],
    );
    // A plain typedef is an alias, which is no value: no collision.
    expect("typedef int a_b;\nconst AB = 1;", &[]);
}

#[test]
fn rule7_generated_helper_names_collide_too() {
    // The entry struct of a list whose entry has more than one field.
    expect(
        "struct node { int a; int b; node *next; };\nstruct node_entry { int c; };",
        &[
            "1:8: note: the entry struct of list struct `node` is defined here",
            "1:8: note: `node` is an optional-data list; generated as a sequence decoded in a loop",
            "2:8: error: struct `node_entry` and the entry struct of list struct `node` both become `NodeEntry` in \
             the generated Rust, where they share the type namespace of one module; rename one of them",
        ],
    );
    // A list of one field has no entry struct.
    expect(
        "struct node { int a; node *next; };\nstruct node_entry { int c; };",
        &["1:8: note: `node` is an optional-data list; generated as a sequence decoded in a loop"],
    );
    // An inline body is named after its parent and field.
    expect(
        "struct a { struct { int x; } b; };\nstruct a_b { int y; };",
        &[
            "1:30: note: the anonymous struct of field `b` is defined here",
            "2:8: error: struct `a_b` and the anonymous struct of field `b` both become `AB` in the generated Rust, \
             where they share the type namespace of one module; rename one of them",
        ],
    );
    // Two arms of one name and one inline type: legal XDR, one Rust name.
    expect(
        "union u switch (int d) { case 1: struct { int x; } v; case 2: struct { int x; } v; };",
        &[
            "1:52: note: the anonymous struct of field `v` is defined here",
            "1:81: error: the anonymous struct of field `v` and the anonymous struct of field `v` both become `UV` \
             in the generated Rust, where they share the type namespace of one module; rename one of them",
            "1:81: note: union `u` has more than one arm named `v`, all `struct { int x; } v`; allowed, as the \
             types are identical (RFC 4506 section 6.4 wants names unique in a union, and the C rpcgen makes of it \
             does not compile: one arm with several case labels says the same)",
        ],
    );
}

#[test]
fn rule7_self_and_prelude_names() {
    expect(
        "struct Option { int x; };\nenum Some { A = 1 };\nconst None = 2;\nunion ok switch (int d) { default: void; };",
        &[
            "1:8: error: struct `Option` becomes `Option` in the generated Rust, which would hide Rust's own `Option` \
             that the generated code uses; rename it",
            "2:6: error: enum `Some` becomes `Some` in the generated Rust, which would hide Rust's own `Some` that \
             the generated code uses; rename it",
            "4:7: error: union `ok` becomes `Ok` in the generated Rust, which would hide Rust's own `Ok` that the \
             generated code uses; rename it",
        ],
    );
    // `Self` is renamed `Self_`, which then collides with `self_`.
    expect(
        "struct Self { int x; };\nstruct self_ { int x; };",
        &[
            "1:8: warning: struct `Self` is generated as `Self_`: `Self` cannot name a Rust type",
            "1:8: note: struct `Self` is defined here",
            "2:8: warning: struct `self_` is generated as `Self_`: `Self` cannot name a Rust type",
            "2:8: error: struct `self_` and struct `Self` both become `Self_` in the generated Rust, where they \
             share the type namespace of one module; rename one of them",
        ],
    );
    // Other prelude names compile, hiding the prelude's item: a warning.
    expect(
        "struct result { int x; };\ntypedef int vec<>;",
        &[
            "1:8: warning: struct `result` becomes `Result` in the generated Rust, which hides the Rust prelude's \
             `Result` there",
            "2:13: warning: typedef `vec` becomes `Vec` in the generated Rust, which hides the Rust prelude's `Vec` \
             there",
        ],
    );
}

#[test]
fn rule7_members_of_one_type_that_convert_to_one_name() {
    expect(
        "struct s { int fooBar; int foo_bar; };",
        &[
            "1:16: note: `fooBar` is declared here",
            "1:28: error: fields `fooBar` and `foo_bar` of struct `s` both become `foo_bar` in the generated Rust; \
             rename one of them",
        ],
    );
    expect(
        "enum e { Foo_bar = 1, foo_Bar = 2 };",
        &[
            "1:10: note: enumerator `Foo_bar` of enum `e` is defined here",
            "1:10: note: `Foo_bar` is declared here",
            "1:23: error: enumerator `foo_Bar` of enum `e` and enumerator `Foo_bar` of enum `e` both become \
             `FOO_BAR` in the generated Rust, where they share the value (constant or constructor) namespace of one \
             module; rename one of them",
            "1:23: error: enumerators `Foo_bar` and `foo_Bar` of enum `e` both become `FooBar` in the generated \
             Rust; rename one of them",
        ],
    );
    expect(
        "union u switch (int d) { case 1: int fooBar; case 2: int foo_bar; };",
        &[
            "1:38: note: `fooBar` is declared here",
            "1:58: error: arms `fooBar` and `foo_bar` of union `u` both become `foo_bar` in the generated Rust; \
             rename one of them",
        ],
    );
    expect(
        "struct t { int self; int _; int type; };",
        &[
            "1:16: warning: field `self` of struct `t` is generated as `self_`: `self` cannot be a Rust identifier, \
             not even a raw one",
            "1:26: error: field `_` of struct `t` cannot be generated: `_` is not a Rust identifier; rename it",
        ],
    );
}

#[test]
fn rule7_a_name_defined_twice_is_reported_once() {
    // The rule on duplicates reports it; the generated names add nothing.
    expect(
        "struct a { int x; };\nunion a switch (int d) { default: void; };",
        &["1:8: note: `a` is first defined here", "2:7: error: duplicate name `a` (already defined as a struct)"],
    );
}

// ---- the real specifications -------------------------------------------------------

/// The `///` convention of RFC 8166 and its drafts: lines whose first
/// non-space characters are `///`, with everything up to and including
/// `/// ` removed.
fn slash_extract(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("///") {
            out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            out.push('\n');
        }
    }
    out
}

const UINT_TYPEDEFS: &str = "typedef unsigned int uint32; typedef unsigned hyper uint64;\n";

fn spec_text(name: &str) -> String {
    let path = format!("{}/../specs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn v1_spec_checks_clean_with_two_lists() {
    let xdr = format!("{UINT_TYPEDEFS}{}", slash_extract(&spec_text("rfc5666bis-draft-rpcrdma-v1.txt")));
    let spec = parse(&xdr).unwrap();
    let diags = check(&spec);
    assert!(!has_errors(&diags), "{diags:#?}");
    let rendered: Vec<_> = diags.iter().map(|d| (d.severity, d.message.as_str())).collect();
    assert_eq!(
        rendered,
        [
            (Severity::Note, "`xdr_read_list` is an optional-data list; generated as a sequence decoded in a loop"),
            (Severity::Note, "`xdr_write_list` is an optional-data list; generated as a sequence decoded in a loop"),
        ]
    );
}

#[test]
fn v1_spec_without_the_uint_typedefs_reports_uint32() {
    let xdr = slash_extract(&spec_text("rfc5666bis-draft-rpcrdma-v1.txt"));
    let got = run(&xdr);
    let first_use = xdr.find("uint32").unwrap();
    let (line, col) = xdr_spec::ast::line_col(&xdr, first_use);
    assert_eq!((line, col), (31, 4));
    assert_eq!(got[0], "31:4: error: undefined name `uint32` (XDR has no `uint32`: a 32-bit unsigned integer is `unsigned int` (RFC 4506 section 4.2); `typedef unsigned int uint32;` defines it)", "{got:#?}");
    let uint32 = got.iter().filter(|d| d.ends_with("error: undefined name `uint32` (XDR has no `uint32`: a 32-bit unsigned integer is `unsigned int` (RFC 4506 section 4.2); `typedef unsigned int uint32;` defines it)")).count();
    let uint64 = got.iter().filter(|d| d.ends_with("error: undefined name `uint64` (XDR has no `uint64`: a 64-bit unsigned integer is `unsigned hyper` (RFC 4506 section 4.5); `typedef unsigned hyper uint64;` defines it)")).count();
    let notes = got.iter().filter(|d| d.contains(": note: ")).count();
    assert_eq!((uint32, uint64, notes, got.len()), (10, 1, 2, 13), "{got:#?}");
}

#[test]
fn v1_spec_through_the_extractor_checks_clean() {
    let opts = ExtractOptions::new().repair(false);
    let extracted = extract(&spec_text("rfc5666bis-draft-rpcrdma-v1.txt"), &opts).unwrap();
    assert_eq!(extracted.xdr, slash_extract(&spec_text("rfc5666bis-draft-rpcrdma-v1.txt")));
    let spec = parse(&format!("{UINT_TYPEDEFS}{}", extracted.xdr)).unwrap();
    let diags = check(&spec);
    assert!(!has_errors(&diags), "{diags:#?}");
    assert_eq!(diags.iter().filter(|d| d.severity == Severity::Note).count(), 2, "{diags:#?}");
}

#[test]
fn v2_draft_repaired_reports_rpcrdma2_chunks_twice() {
    let text = spec_text("draft-cel-nfsv4-rpcrdma-version-two-00.txt");
    let extracted = extract(&text, &ExtractOptions::new().repair(true)).unwrap();
    let xdr = format!("{UINT_TYPEDEFS}{}", extracted.xdr);
    let spec = parse(&xdr).unwrap_or_else(|e| panic!("{e}\n{xdr}"));
    let diags = check(&spec);
    let got: Vec<_> = diags.iter().map(|d| render(d, &xdr)).collect();
    let errors: Vec<_> = got.iter().filter(|d| d.contains(": error: ")).collect();
    assert_eq!(errors.len(), 2, "{got:#?}");
    let notes: Vec<_> = diags.iter().filter(|d| d.severity == Severity::Note).map(|d| d.message.as_str()).collect();
    assert_eq!(
        notes,
        [
            "`rpcrdma2_read_list` is an optional-data list; generated as a sequence decoded in a loop",
            "`rpcrdma2_write_list` is an optional-data list; generated as a sequence decoded in a loop",
            "union `rpcrdma2_body` has more than one arm named `rdma_chunks`, all `rpcrdma2_chunks rdma_chunks`; \
             allowed, as the types are identical (RFC 4506 section 6.4 wants names unique in a union, and the C \
             rpcgen makes of it does not compile: one arm with several case labels says the same)",
        ]
    );
    for e in errors {
        assert!(
            e.ends_with(": error: undefined name `rpcrdma2_chunks` (did you mean `rpcrdma2_chunk_lists`?)"),
            "{got:#?}"
        );
    }
}

/// Issue 27: draft-ietf-nfsv4-rpcrdma-version-two-07's XDR as published, each defect
/// diagnosed so that a person writing its erratum sees what is wrong, the typedef written
/// backwards said to be so; with the errata beside the spec, it checks clean.
#[test]
fn v2_draft_07_as_published_reports_each_defect_and_the_backwards_typedef() {
    let text = spec_text("draft-ietf-nfsv4-rpcrdma-version-two-07.txt");
    let extracted = extract(&text, &ExtractOptions::new().repair(false)).unwrap();
    let got = run(&extracted.xdr);
    let errors: Vec<&str> = got.iter().map(String::as_str).filter(|d| d.contains(": error: ")).collect();
    assert_eq!(
        errors,
        [
            "65:9: error: undefined name `uint64` (XDR has no `uint64`: a 64-bit unsigned integer is `unsigned hyper` (RFC 4506 section 4.5); `typedef unsigned hyper uint64;` defines it)",
            "94:9: error: `typedef rpcrdma2_propid uint32;` looks written backwards: it declares `uint32` as a new \
             name for `rpcrdma2_propid`, which nothing defines, while `rpcrdma2_propid` is used as a type (by \
             `rpcrdma2_propval`); a typedef names the existing type first: `typedef uint32 rpcrdma2_propid;`",
            "97:9: error: undefined name `rpcrdma2_propid` (the typedef `typedef rpcrdma2_propid uint32;` looks \
             written backwards)",
            "182:34: error: undefined name `rpcrdma2_errcode` (did you mean `rpcrdma2_err_vers`?)",
        ],
        "{got:#?}"
    );
    let errata = xdr_spec::errata::parse(&spec_text("draft-ietf-nfsv4-rpcrdma-version-two-07.errata")).unwrap();
    let (fixed, applied) = errata.apply(&extracted.xdr).unwrap();
    assert_eq!(applied.len(), 4);
    let diags = check(&parse(&fixed).unwrap());
    assert!(!has_errors(&diags), "{diags:#?}");
}

/// A typedef whose base type is undefined is not called backwards unless that base is
/// used as a type elsewhere: an ordinary missing definition stays "undefined name".
#[test]
fn rule1_a_typedef_is_called_backwards_only_when_its_base_is_used_as_a_type_elsewhere() {
    expect(
        "typedef id_t u;\nstruct s { id_t which; u n; };",
        &[
            "1:9: error: `typedef id_t u;` looks written backwards: it declares `u` as a new name for `id_t`, \
             which nothing defines, while `id_t` is used as a type (by `s`); a typedef names the existing type \
             first: `typedef u id_t;`",
            "2:12: error: undefined name `id_t` (the typedef `typedef id_t u;` looks written backwards)",
        ],
    );
    expect("typedef missing u;\nstruct s { u n; };", &["1:9: error: undefined name `missing`"]);
}

// ---- scale -------------------------------------------------------------------------

/// Run `f` on a thread with a small stack: a checker that recursed on the
/// number of definitions would overflow it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(256 * 1024).spawn(f).unwrap().join().unwrap()
}

#[test]
fn stress_long_typedef_chain() {
    use std::fmt::Write;
    let mut src = String::from("typedef int t0;\n");
    for i in 1..100_000 {
        writeln!(src, "typedef t{} t{i};", i - 1).unwrap();
    }
    let spec = parse(&src).unwrap();
    let start = std::time::Instant::now();
    let diags = on_small_stack(move || check(&spec));
    assert!(diags.is_empty(), "{:?}", &diags[..diags.len().min(5)]);
    assert!(start.elapsed().as_secs() < 30, "took {:?}", start.elapsed());
}

#[test]
fn stress_long_struct_cycle() {
    use std::fmt::Write;
    const N: usize = 100_000;
    for optional in [false, true] {
        let mut src = String::new();
        for i in 0..N {
            let star = if optional { "*" } else { "" };
            writeln!(src, "struct s{i} {{ int v; s{} {star}next; }};", (i + 1) % N).unwrap();
        }
        let spec = parse(&src).unwrap();
        let start = std::time::Instant::now();
        let diags = on_small_stack(move || check(&spec));
        assert!(start.elapsed().as_secs() < 30, "took {:?}", start.elapsed());
        let path = "s0 -> s1 -> s2 -> s3 -> ... (99994 more) -> s99998 -> s99999 -> s0";
        let expected = if optional {
            format!(
                "recursive type `s0` ({path}): the generator decodes without recursion and supports only the \
                 optional-data list idiom"
            )
        } else {
            format!(
                "type `s0` contains itself ({path}) with no optional (`*`) or variable-length array on the way, so \
                 its size is infinite"
            )
        };
        let messages: Vec<_> = diags.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages, [expected.as_str()]);
        assert_eq!(diags[0].span.offset, "struct ".len());
    }
}

#[test]
fn stress_many_undefined_names() {
    use std::fmt::Write;
    const N: usize = 100_000;
    let mut src = String::new();
    for i in 0..N {
        writeln!(src, "typedef u{i} t{i};").unwrap();
    }
    let spec = parse(&src).unwrap();
    let start = std::time::Instant::now();
    let diags = on_small_stack(move || check(&spec));
    assert!(start.elapsed().as_secs() < 30, "took {:?}", start.elapsed());
    assert_eq!(diags.len(), N);
    assert_eq!(diags[0].message, "undefined name `u0` (did you mean `t0`?)");
    assert!(diags.iter().all(|d| d.message.starts_with("undefined name `u")));
}
