//! Typed services from a `program` block ([`GenOptions::services`]): per version, a module
//! holding a type per procedure (`xdr_spec_rt::rpc::Procedure`), a `Client` calling them
//! through a transport, and the `Service` trait a server implements, served by `Server`
//! (an `xdr_spec_rt::rpc::Program`). See `xdr_spec_rt::rpc` for the runtime half.

mod binding;

use super::writer::Code;
use super::*;

/// One procedure as the services of its version use it.
struct Proc {
    /// The procedure's XDR name, its constant and its marker type.
    xdr: String,
    constant: String,
    marker: String,
    /// The method name, and the async method's.
    method: String,
    method_async: String,
    number: u32,
    /// Rust types of the arguments and results, with lifetime `'a` where they borrow, and
    /// whether there are none (`void`).
    args: String,
    args_void: bool,
    results: String,
    results_void: bool,
}

impl<'s> Gen<'s> {
    /// The services of each version of program `p` (after its constants).
    pub(super) fn emit_services(&mut self, def: &Definition, p: &Program) -> Result<(), GenError> {
        let program = &def.name.name;
        let origin = self.origin(def.name.span);
        for v in &p.versions {
            let procs = v.procedures.iter().map(|proc| self.service_proc(proc)).collect::<Result<Vec<_>, _>>()?;
            let binding = self.version_binding(v)?;
            let version = &v.name.name;
            let module = snake(version);
            let version_const = format!("super::{}", screaming(version));
            let program_const = format!("super::{}", screaming(program));
            let c = &mut self.out;
            c.line(format!("/// Version `{version}` of program `{program}` as typed services ({origin}): a type"));
            c.line(format!("/// per procedure, a [`Client`]({module}::Client) that calls them through a transport,"));
            c.line(format!("/// and the [`Service`]({module}::Service) a server implements, served by"));
            c.line(format!("/// [`Server`]({module}::Server) (see `xdr_spec_rt::rpc`)."));
            c.line(format!("pub mod {module} {{"));
            c.indent();
            c.line("use core::future::Future;");
            c.line("use xdr_spec_rt::rpc;");
            c.blank();
            for p in &procs {
                emit_marker(c, p, &program_const, &version_const);
            }
            emit_client(c, version, &procs);
            emit_service(c, version, &procs);
            emit_server(c, version, program, &program_const, &version_const, &procs);
            emit_async(c, version, program, &program_const, &version_const, &procs);
            binding::emit_binding(c, version, &program_const, &version_const, &binding);
            c.trim_blank();
            c.dedent();
            c.line("}");
            c.blank();
        }
        Ok(())
    }

    fn service_proc(&self, proc: &Procedure) -> Result<Proc, GenError> {
        let ty = |t: &TypeSpec| -> Result<String, GenError> {
            if matches!(t, TypeSpec::InlineStruct(_) | TypeSpec::InlineUnion(_) | TypeSpec::InlineEnum(_)) {
                let what = format!(
                    "procedure `{}` declares a type inline; typed services need it named (define it, then name it here)",
                    proc.name.name
                );
                return Err(self.err(proc.name.span, what));
            }
            let rust = self.scalar_type(t, proc.name.span)?;
            // The specification's own types live in the module around the services'.
            Ok(if rust.starts_with(|c: char| c.is_ascii_uppercase()) { format!("super::{rust}") } else { rust })
        };
        // Several arguments go one after another (RFC 5531 section 12): a tuple of them.
        let args = match proc.args.as_slice() {
            [] => "rpc::Void".to_string(),
            [one] => ty(one)?,
            many => format!("({})", many.iter().map(ty).collect::<Result<Vec<_>, _>>()?.join(", ")),
        };
        if proc.args.len() > 8 {
            let n = proc.args.len();
            let what = format!("procedure `{}` takes {n} arguments; typed services take at most 8", proc.name.name);
            return Err(self.err(proc.name.span, what));
        }
        let results = match &proc.result {
            None => "rpc::Void".to_string(),
            Some(t) => ty(t)?,
        };
        let method = snake(&proc.name.name);
        Ok(Proc {
            xdr: proc.name.name.clone(),
            constant: format!("super::{}", screaming(&proc.name.name)),
            marker: marker_name(&proc.name.name),
            method_async: format!("{}_async", method.trim_start_matches("r#")),
            method,
            number: self.bound(&proc.number)?,
            args,
            args_void: proc.args.is_empty(),
            results,
            results_void: proc.result.is_none(),
        })
    }
}

/// The names the services module defines, imports or writes unqualified besides its
/// procedures' types: a procedure's type of one of these names would shadow it.
const MODULE_NAMES: &[&str] = &[
    "Client",
    "Service",
    "Server",
    "AsyncService",
    "AsyncServer",
    "Binding",
    "Future",
    "Result",
    "Ok",
    "Err",
    "Send",
    "Sync",
    "Vec",
    // (Traits whose methods the module calls: a type of the name would take them out of scope.)
    "Clone",
    "Into",
];

/// The type of procedure `xdr`: its CamelCase name, with `Proc` after it where that is one of
/// the module's own names (a procedure `CLIENT`).
fn marker_name(xdr: &str) -> String {
    let name = camel(xdr);
    if MODULE_NAMES.contains(&name.as_str()) {
        format!("{name}Proc")
    } else {
        name
    }
}

/// `'a` -> `'_`: a type as a method's parameter names it.
fn elided(ty: &str) -> String {
    ty.replace("<'a>", "<'_>")
}

/// A function's signature, then `end` (` {` to open its body, `;` for a trait method's
/// declaration): on one line when it fits, else one parameter per line, as rustfmt lays it
/// out.
pub(super) fn signature(c: &mut Code, head: &str, params: &[String], ret: &str, end: &str) {
    let one = format!("{head}({}){ret}{end}", params.join(", "));
    if c.fits(&one) {
        c.line(one);
        return;
    }
    c.line(format!("{head}("));
    c.indent();
    for p in params {
        c.line(format!("{p},"));
    }
    c.dedent();
    c.line(format!("){ret}{end}"));
}

fn emit_marker(c: &mut Code, p: &Proc, program: &str, version: &str) {
    c.line(format!("/// Procedure `{}` ({}).", p.xdr, p.number));
    c.line(format!("pub struct {};", p.marker));
    c.blank();
    c.line(format!("impl rpc::Procedure for {} {{", p.marker));
    c.indent();
    c.line(format!("const PROGRAM: u32 = {program};"));
    c.line(format!("const VERSION: u32 = {version};"));
    c.line(format!("const PROCEDURE: u32 = {};", p.constant));
    c.line(format!("const NAME: &'static str = \"{}\";", p.xdr));
    c.line(format!("type Args<'a> = {};", p.args));
    c.line(format!("type Results<'a> = {};", p.results));
    c.dedent();
    c.line("}");
    c.blank();
}

fn emit_client(c: &mut Code, version: &str, procs: &[Proc]) {
    c.line(format!("/// Calls the procedures of version `{version}` through a transport ([`rpc::Caller`]),"));
    c.line("/// one method per procedure and its `_async` twin.");
    c.line("pub struct Client<C>(pub C);");
    c.blank();
    c.line("impl<C: rpc::Caller> Client<C> {");
    c.indent();
    for p in procs {
        let params: Vec<String> = if p.args_void {
            vec!["&self".into()]
        } else {
            vec!["&self".into(), format!("args: &{}", elided(&p.args))]
        };
        let args = if p.args_void { "&rpc::Void" } else { "args" };
        let ret = format!(" -> Result<rpc::Results<{}>, C::Error>", p.marker);
        c.line(format!("/// Calls `{}` ({}) and waits for its results.", p.xdr, p.number));
        signature(c, &format!("pub fn {}", p.method), &params, &ret, " {");
        c.indent();
        c.line(format!("self.0.call::<{}>({args})", p.marker));
        c.dedent();
        c.line("}");
        c.blank();
        // Encoded here, so that the future holds the call and not the borrowed arguments:
        // it can be spawned (rpc::Caller).
        c.line(format!("/// Calls `{}` ({}): its results, as a future.", p.xdr, p.number));
        let ret = format!(" -> impl Future<Output = Result<rpc::Results<{}>, C::Error>> + Send + '_", p.marker);
        signature(c, &format!("pub fn {}", p.method_async), &params, &ret, " {");
        c.indent();
        c.line(format!("let call = self.0.encode::<{}>({args});", p.marker));
        c.line("async move { self.0.send_async(call?).await }");
        c.dedent();
        c.line("}");
        c.blank();
    }
    c.trim_blank();
    c.dedent();
    c.line("}");
    c.blank();
}

fn emit_service(c: &mut Code, version: &str, procs: &[Proc]) {
    c.line(format!("/// Version `{version}` as a server implements it: one method per procedure, each"));
    c.line("/// answering through its [`rpc::Reply`] (results, or a failure). Serve it with [`Server`].");
    c.line("pub trait Service: Send + Sync {");
    c.indent();
    for p in procs {
        let mut params = vec!["&self".to_string()];
        if !p.args_void {
            params.push(format!("args: {}", elided(&p.args)));
        }
        params.push(format!("reply: rpc::Reply<'_, {}>", p.marker));
        let head = format!("fn {}", p.method);
        // Procedure 0 with nothing in and nothing out is the NULL procedure every program
        // answers by convention: answered unless the server says otherwise.
        if p.number == 0 && p.args_void && p.results_void {
            c.line(format!("/// `{}` ({}): answered with no results unless overridden.", p.xdr, p.number));
            signature(c, &head, &params, " -> rpc::Replied", " {");
            c.indent();
            c.line("reply.ok(&rpc::Void)");
            c.dedent();
            c.line("}");
        } else {
            c.line(format!("/// `{}` ({}).", p.xdr, p.number));
            signature(c, &head, &params, " -> rpc::Replied", ";");
        }
        c.blank();
    }
    c.trim_blank();
    c.dedent();
    c.line("}");
    c.blank();
}

fn emit_server(c: &mut Code, version: &str, program: &str, program_const: &str, version_const: &str, procs: &[Proc]) {
    c.line(format!("/// Serves a [`Service`] as version `{version}` of program `{program}`: decodes each"));
    c.line("/// call's arguments, runs its method, and encodes the results into the reply.");
    c.line("pub struct Server<S>(pub S);");
    c.blank();
    c.line("impl<S: Service> rpc::Program for Server<S> {");
    c.indent();
    emit_numbers(c, program_const, version_const);
    c.line("fn dispatch(&self, procedure: u32, args: &[u8], results: &mut Vec<u8>) -> rpc::Dispatched {");
    c.indent();
    emit_dispatch_arms(
        c,
        procs,
        |p| format!("rpc::decode_args::<{}>(args)", p.marker),
        // (Called by the type's path, where only the trait's methods are found: as a method, one
        // named like the wrapper's own, a procedure `CLONE` or `INTO`, would resolve to that.)
        |p, args| {
            let args = if args.is_empty() { String::new() } else { format!("{args}, ") };
            format!("S::{}(&self.0, {args}rpc::Reply::new(results)).into()", p.method)
        },
        |refusal| refusal.to_string(),
    );
    c.dedent();
    c.line("}");
    c.dedent();
    c.line("}");
    c.blank();
}

/// An implementation's `program` and `version` methods, which the `Server`, the `AsyncServer`
/// and the `Binding` of a version all have.
pub(super) fn emit_numbers(c: &mut Code, program_const: &str, version_const: &str) {
    c.line("fn program(&self) -> u32 {");
    c.line(format!("    {program_const}"));
    c.line("}");
    c.blank();
    c.line("fn version(&self) -> u32 {");
    c.line(format!("    {version_const}"));
    c.line("}");
    c.blank();
}

/// A dispatch's `match procedure`: per procedure, its arguments checked by `check` (an
/// expression of the procedure's marker) and, when they are its, `call` (of the method and
/// the arguments passed, if any); `refuse` wraps a `rpc::Dispatched` refusal.
fn emit_dispatch_arms(
    c: &mut Code,
    procs: &[Proc],
    check: impl Fn(&Proc) -> String,
    call: impl Fn(&Proc, &str) -> String,
    refuse: impl Fn(&str) -> String,
) {
    c.line("match procedure {");
    c.indent();
    for p in procs {
        c.line(format!("{} => match {} {{", p.constant, check(p)));
        c.indent();
        let bind = if p.args_void { "_" } else { "args" };
        let body = call(p, if p.args_void { "" } else { "args" });
        let arm = format!("Ok({bind}) => {body},");
        if c.fits(&arm) {
            c.line(arm);
        } else {
            c.line(format!("Ok({bind}) => {{"));
            c.indent();
            c.line(body);
            c.dedent();
            c.line("}");
        }
        c.line(format!("Err(_) => {},", refuse("rpc::Dispatched::GarbageArgs")));
        c.dedent();
        c.line("},");
    }
    c.line(format!("_ => {},", refuse("rpc::Dispatched::ProcUnavail")));
    c.dedent();
    c.line("}");
}

fn emit_async(c: &mut Code, version: &str, program: &str, program_const: &str, version_const: &str, procs: &[Proc]) {
    c.line(format!("/// Version `{version}` as an async server implements it: one method per procedure, each"));
    c.line("/// the future of its answer ([`rpc::Answer`]), free to run on any executor: its arguments");
    c.line("/// are owned ([`rpc::Args`]). Serve it with [`AsyncServer`].");
    c.line("pub trait AsyncService: Send + Sync + 'static {");
    c.indent();
    let ret = " -> impl Future<Output = rpc::Answer> + Send";
    for p in procs {
        let mut params = vec!["&self".to_string()];
        if !p.args_void {
            params.push(format!("args: rpc::Args<{}>", p.marker));
        }
        let head = format!("fn {}", p.method);
        if p.number == 0 && p.args_void && p.results_void {
            c.line(format!("/// `{}` ({}): answered with no results unless overridden.", p.xdr, p.number));
            signature(c, &head, &params, ret, " {");
            c.indent();
            c.line(format!("async {{ rpc::Answer::ok::<{}>(&rpc::Void) }}", p.marker));
            c.dedent();
            c.line("}");
        } else {
            c.line(format!("/// `{}` ({}).", p.xdr, p.number));
            signature(c, &head, &params, ret, ";");
        }
        c.blank();
    }
    c.trim_blank();
    c.dedent();
    c.line("}");
    c.blank();
    c.line(format!("/// Serves an [`AsyncService`] as version `{version}` of program `{program}`: each call's"));
    c.line("/// arguments checked, then its method's future, which holds the service and the call.");
    c.line("pub struct AsyncServer<S>(pub rpc::Arc<S>);");
    c.blank();
    c.line("impl<S: AsyncService> rpc::AsyncProgram for AsyncServer<S> {");
    c.indent();
    emit_numbers(c, program_const, version_const);
    c.line("fn dispatch(&self, procedure: u32, message: Vec<u8>, at: usize) -> rpc::AnswerFuture {");
    c.indent();
    c.line("let service = self.0.clone();");
    emit_dispatch_arms(
        c,
        procs,
        |p| format!("rpc::Args::<{}>::new(message, at)", p.marker),
        |p, args| {
            let args = if args.is_empty() { String::new() } else { format!(", {args}") };
            format!("rpc::boxed(async move {{ S::{}(&service{args}).await }})", p.method)
        },
        |refusal| format!("rpc::ready({refusal})"),
    );
    c.dedent();
    c.line("}");
    c.dedent();
    c.line("}");
    c.blank();
}
