//! Typed services generated from `program` blocks (`Build::services`): what is generated for
//! each shape of procedure, compiled and run against the runtime (`xdr_spec_rt::rpc`), and
//! what the generator refuses.

use std::path::Path;
use std::process::Command;

use xdr_spec::pipeline::Build;

#[path = "support/files.rs"]
mod files;
#[path = "support/rustc.rs"]
mod rustc_support;
use rustc_support::compile_with_rt;

/// A program with every shape the services take: the NULL procedure, one argument, several
/// (a tuple), none with results, a procedure named like a Rust keyword and one named like
/// the module's own `Client`, in two versions.
const SPEC: &str = "\
typedef string name<8>;
struct pair { int a; int b; };
program SHAPES {
    version SHAPES_V1 {
        void SHAPES_NULL(void) = 0;
        int SUM(pair) = 1;
        int ADD(int, int, hyper) = 2;
        name ECHO(name) = 3;
        void TYPE(void) = 4;
        unsigned int CLIENT(void) = 5;
        void CLONE(void) = 6;
        int INTO(int) = 7;
    } = 1;
    version SHAPES_V2 {
        void SHAPES_NULL(void) = 0;
    } = 2;
} = 0x20000077;
";

/// A program using the services of [`SPEC`]: a server dispatching encoded arguments, and a
/// client over a transport that is that server, in the same process.
const MAIN: &str = r#"
use xdr_spec_rt::rpc::{self, Caller, Program, Replied, Reply};
use xdr_spec_rt::Xdr;

include!("shapes.rs");

struct Impl;
impl shapes_v1::Service for Impl {
    fn sum(&self, args: Pair, reply: Reply<'_, shapes_v1::Sum>) -> Replied {
        reply.ok(&(args.a + args.b))
    }
    fn add(&self, (a, b, c): (i32, i32, i64), reply: Reply<'_, shapes_v1::Add>) -> Replied {
        reply.ok(&(a + b + c as i32))
    }
    fn echo(&self, args: Name<'_>, reply: Reply<'_, shapes_v1::Echo>) -> Replied {
        if args.0 == "fail" {
            return reply.system_err();
        }
        // A name longer than its bound has no encoding: SYSTEM_ERR, with the cause.
        let longer = format!("{}{}", args.0, args.0);
        reply.ok(&Name(&longer))
    }
    fn r#type(&self, reply: Reply<'_, shapes_v1::Type>) -> Replied {
        reply.ok(&rpc::Void)
    }
    fn client(&self, reply: Reply<'_, shapes_v1::ClientProc>) -> Replied {
        reply.ok(&5)
    }
    // (Named like the methods of the wrappers around a service.)
    fn clone(&self, reply: Reply<'_, shapes_v1::CloneProc>) -> Replied {
        reply.ok(&rpc::Void)
    }
    fn into(&self, n: i32, reply: Reply<'_, shapes_v1::IntoProc>) -> Replied {
        reply.ok(&(n + 1))
    }
}

/// A transport that is the server itself: the call's arguments dispatched straight in.
struct Local(shapes_v1::Server<Impl>);
impl Caller for Local {
    type Error = rpc::Dispatched;
    fn call<P: rpc::Procedure>(&self, args: &P::Args<'_>) -> Result<rpc::Results<P>, rpc::Dispatched> {
        let (_, message) = self.encode::<P>(args)?.into_parts();
        let mut results = Vec::new();
        match self.0.dispatch(P::PROCEDURE, &message, &mut results) {
            rpc::Dispatched::Replied => Ok(rpc::Results::new(results, 0).unwrap()),
            other => Err(other),
        }
    }
    fn encode<P: rpc::Procedure>(&self, args: &P::Args<'_>) -> Result<rpc::Call<P>, rpc::Dispatched> {
        Ok(rpc::Call::new(1, args.to_vec().unwrap()))
    }
    fn send_async<P: rpc::Procedure>(
        &self,
        call: rpc::Call<P>,
    ) -> impl std::future::Future<Output = Result<rpc::Results<P>, rpc::Dispatched>> + Send {
        let (_, message) = call.into_parts();
        let mut results = Vec::new();
        let answer = match self.0.dispatch(P::PROCEDURE, &message, &mut results) {
            rpc::Dispatched::Replied => Ok(rpc::Results::new(results, 0).unwrap()),
            other => Err(other),
        };
        std::future::ready(answer)
    }
}

/// Polls a future that is ready at once.
fn now<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("pending"),
    }
}

fn main() {
    let client = shapes_v1::Client(Local(shapes_v1::Server(Impl)));
    client.shapes_null().unwrap();
    assert_eq!(client.sum(&Pair { a: 2, b: 3 }).unwrap().get(), 5);
    assert_eq!(client.add(&(1, 2, 3)).unwrap().get(), 6);
    assert_eq!(now(client.add_async(&(4, 5, 6))).unwrap().get(), 15);
    assert_eq!(client.echo(&Name("ab")).unwrap().get(), Name("abab"));
    assert_eq!(client.echo(&Name("fail")).err(), Some(rpc::Dispatched::SystemErr));
    assert!(matches!(client.echo(&Name("abcdefg")).err(), Some(rpc::Dispatched::BadResults(_))));
    client.r#type().unwrap();
    assert_eq!(client.client().unwrap().get(), 5);
    client.clone().unwrap();
    // (`client.into(..)` would be `Into::into`, found first: the method by its path.)
    assert_eq!(shapes_v1::Client::into(&client, &41).unwrap().get(), 42);
    // The numbers and names the procedures carry.
    use rpc::Procedure;
    assert_eq!((shapes_v1::Add::PROGRAM, shapes_v1::Add::VERSION, shapes_v1::Add::PROCEDURE), (0x20000077, 1, 2));
    assert_eq!(shapes_v1::Add::NAME, "ADD");
    assert_eq!(shapes_v2::ShapesNull::VERSION, 2);
    // Dispatch by number: an unknown procedure, and arguments that are not the procedure's.
    let server = shapes_v1::Server(Impl);
    assert_eq!((server.program(), server.version()), (0x20000077, 1));
    assert_eq!(server.dispatch(9, &[], &mut Vec::new()), rpc::Dispatched::ProcUnavail);
    assert_eq!(server.dispatch(1, &[0, 0, 0, 1], &mut Vec::new()), rpc::Dispatched::GarbageArgs);
    assert_eq!(server.dispatch(0, &[0, 0, 0, 1], &mut Vec::new()), rpc::Dispatched::GarbageArgs);
    println!("ok");
}
"#;

fn generate(spec: &str, dir: &Path) -> Result<String, String> {
    let x = files::write(dir, "shapes.x", spec);
    Build::xdr(&x).services(true).generate().map(|g| g.rust).map_err(|e| e.to_string())
}

/// Each shape compiles and behaves: the client's methods reach the server's, several
/// arguments travel as a tuple, a result over its bound is SYSTEM_ERR with the cause, the
/// NULL procedure is answered by default, and a name Rust keeps or the module uses is
/// written so that it compiles.
#[test]
fn each_shape_of_procedure_compiles_and_runs() {
    let dir = files::scratch("services", "shapes");
    let rust = generate(SPEC, &dir).unwrap();
    assert!(rust.contains("pub mod shapes_v1 {") && rust.contains("pub mod shapes_v2 {"), "{rust}");
    assert!(rust.contains("type Args<'a> = (i32, i32, i64);"), "{rust}");
    assert!(rust.contains("pub struct ClientProc;"), "{rust}");
    assert!(rust.contains("fn r#type(&self, reply: rpc::Reply<'_, Type>) -> rpc::Replied;"), "{rust}");
    files::write(&dir, "shapes.rs", &rust);
    let src = files::write(&dir, "main.rs", MAIN);
    let exe = dir.join("shapes");
    let built = compile_with_rt(&src, "bin", "shapes", &exe, false);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&exe).output().expect("run");
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "ok\n");
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

/// Without `services` a program is its constants only, as before.
#[test]
fn no_services_unless_asked() {
    let dir = files::scratch("services", "off");
    let x = files::write(&dir, "shapes.x", SPEC);
    let rust = Build::xdr(&x).generate().unwrap().rust;
    assert!(rust.contains("pub const SUM: u32 = 1;") && !rust.contains("pub mod shapes_v1"), "{rust}");
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

/// More arguments than a tuple holds: refused at the procedure, saying why.
#[test]
fn nine_arguments_are_refused_with_the_reason() {
    let dir = files::scratch("services", "nine");
    let spec = "program P { version V { void NINE(int, int, int, int, int, int, int, int, int) = 1; } = 1; } = 9;\n";
    let e = generate(spec, &dir).unwrap_err();
    assert!(e.contains("procedure `NINE` takes 9 arguments; typed services take at most 8"), "{e}");
    assert!(e.contains(":1:"), "it names the line: {e}");
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

/// Names a procedure may have that the services module uses itself (`RESULT`, `OK`, `SEND`,
/// `BINDING`, ...), and a binding whose path passes an array of borrowing elements before
/// its item: both compile, and the walk finds the item where it is.
#[test]
fn clashing_names_and_a_walk_past_borrowing_arrays_compile_and_find_the_item() {
    let dir = files::scratch("services", "clash");
    let spec = "\
typedef string tag<8>;
struct pair { int x; };
struct args { tag tags<4>; pair some; opaque data<>; };
program P {
    version P_V1 {
        void RESULT(void) = 1;
        void OK(void) = 2;
        void SEND(void) = 3;
        void BINDING(void) = 4;
        void VEC(void) = 5;
        int PUT(args) = 6;
    } = 1;
} = 0x20000078;
";
    let x = files::write(&dir, "clash.x", spec);
    let binding = files::write(&dir, "clash.binding", "version P_V1\nPUT argument data\n");
    let rust = Build::xdr(&x).binding(&binding).generate().map_err(|e| e.to_string()).unwrap().rust;
    assert!(rust.contains("pub struct ResultProc;") && rust.contains("pub struct OkProc;"), "{rust}");
    files::write(&dir, "clash.rs", &rust);
    let main = r#"
use xdr_spec_rt::rpc::{Binding, Item};
use xdr_spec_rt::{Seq, Xdr};
include!("clash.rs");
fn main() {
    let tags = [Tag("a"), Tag("bcd")];
    let args = Args { tags: Seq::from_slice(&tags), some: Pair { x: 7 }, data: b"hello" };
    let bytes = args.to_vec().unwrap();
    let mut items = Vec::new();
    p_v1::Binding.argument_items(PUT, &bytes, &mut items);
    // tags: count, "a" padded, "bcd" padded (4 + 8 + 8); some: 4; then data's length word.
    assert_eq!(items, [Item { offset: 28, len: 5 }]);
    assert_eq!(&bytes[28..33], b"hello");
    println!("ok");
}
"#;
    let src = files::write(&dir, "main.rs", main);
    let exe = dir.join("clash");
    let built = compile_with_rt(&src, "bin", "clash", &exe, false);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&exe).output().expect("run");
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

/// What the generator refuses, each at its place and saying why: an inline type as a
/// procedure's argument, a binding file's second section for a version, a procedure it does
/// not have, a path that is not there.
#[test]
fn refusals_say_where_and_why() {
    let dir = files::scratch("services", "refusals");
    let inline = "program P { version V { int GET(struct { int a; }) = 1; } = 1; } = 9;\n";
    let e = generate(inline, &dir).unwrap_err();
    assert!(e.contains("procedure `GET` declares a type inline; typed services need it named"), "{e}");
    let spec = "struct args { int a; opaque data<>; };\nprogram P { version V { void PUT(args) = 1; } = 1; } = 9;\n";
    let x = files::write(&dir, "p.x", spec);
    for (binding, want) in [
        ("version V\nPUT argument data\nversion V\n", "line 3: a second `version V` section (the first is at line 1)"),
        ("version V\nGET argument data\n", "line 2: `GET` is not a procedure of version V (PUT)"),
        ("version V\nPUT argument dat\n", "line 2: struct `args` has no field `dat` (its fields: a, data)"),
        ("version V\nPUT argument a\n", "line 2: `a` is not a variable-length opaque or string"),
        ("version W\nPUT argument data\n", "line 1: `W` is not a version of a program here (versions: V)"),
    ] {
        let b = files::write(&dir, "p.binding", binding);
        let e = Build::xdr(&x).binding(&b).generate().map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(want), "{binding:?}: {e}");
        assert!(e.contains("p.binding"), "names the binding file: {e}");
    }
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}
