//! The Upper-Layer Binding of each program version ([`GenOptions::binding`], a
//! [`BindingFile`](crate::binding::BindingFile)): a `Binding` type in the version's services module implementing
//! `xdr_spec_rt::rpc::Binding`, and a private `walk` module of functions that find each
//! declared item by decoding what comes before it with the generated types' own decoders.
//!
//! A walk never decodes the item itself, only up to its length word: so it finds a result
//! in a reduced reply, whose data went into a Write chunk (RFC 8166 section 3.4.6.1: "at the
//! known XDR position").

use super::{emit_numbers, signature};
use crate::binding::{Declared, Max, What};
use crate::gen::writer::Code;
use crate::gen::*;

/// What a walk ends on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A variable-length opaque or string: the item after its length word.
    Item,
    /// A number: its value.
    Number,
}

/// One generated walk function.
struct Walk {
    name: String,
    doc: String,
    target: Target,
    body: Vec<String>,
}

/// The binding of one version, ready to write.
#[derive(Default)]
pub(super) struct VersionCode {
    walks: Vec<Walk>,
    /// Match arms of `argument_items`, `result_maxima`, `max_reply`, `result_items`:
    /// (procedure constant, expression or statement).
    arguments: Vec<(String, Vec<String>)>,
    maxima: Vec<(String, MaxCode)>,
    replies: Vec<(String, MaxCode)>,
    results: Vec<(String, String)>,
    default_reply: u64,
    source: Option<String>,
}

/// A largest size as generated code computes it.
enum MaxCode {
    /// A number.
    Literal(u64),
    /// An `Option<usize>` expression of `args`: `None` where the argument cannot be read.
    Read(String),
}

/// What a `Binding` states where its file says nothing: a reply fits the smallest inline
/// threshold (RFC 8166 section 3.3.2: 1024 bytes).
const DEFAULT_REPLY: u64 = 1024;

impl<'s> Gen<'s> {
    fn binding_err(&self, at: Span, line: usize, message: impl Into<String>) -> GenError {
        let name = self.opts.binding.as_ref().map_or("", |(n, _)| n.as_str());
        self.err(at, format!("{name}, line {line}: {}", message.into()))
    }

    /// The binding of version `v` (whose procedures are `procs`): its file's section, or
    /// nothing DDP-eligible and the default reply where there is none.
    pub(super) fn version_binding(&self, v: &Version) -> Result<VersionCode, GenError> {
        let mut code = VersionCode { default_reply: DEFAULT_REPLY, ..VersionCode::default() };
        let Some((source, file)) = &self.opts.binding else { return Ok(code) };
        let mut sections = file.versions.iter().filter(|b| b.version == v.name.name);
        let Some(section) = sections.next() else { return Ok(code) };
        if let Some(again) = sections.next() {
            let message = format!("a second `version {}` section (the first is at line {})", v.name.name, section.line);
            return Err(self.binding_err(v.name.span, again.line, message));
        }
        code.source = Some(source.clone());
        if let Some(max) = &section.default_reply {
            match self.max_code(max, None, v.name.span, section.line, &mut code.walks, "reply")? {
                MaxCode::Literal(n) => code.default_reply = n,
                MaxCode::Read(_) => unreachable!("refused by max_code without a procedure"),
            }
        }
        for d in &section.declarations {
            self.declaration(v, d, &mut code)?;
        }
        Ok(code)
    }

    /// Every version a binding file names is one of the specification's.
    pub(in crate::gen) fn check_binding_versions(&self, spec: &Spec) -> Result<(), GenError> {
        let Some((_, file)) = &self.opts.binding else { return Ok(()) };
        let versions: Vec<&Version> = spec
            .definitions
            .iter()
            .filter_map(|d| if let DefinitionKind::Program(p) = &d.kind { Some(p) } else { None })
            .flat_map(|p| &p.versions)
            .collect();
        for b in &file.versions {
            if !versions.iter().any(|v| v.name.name == b.version) {
                let known: Vec<&str> = versions.iter().map(|v| v.name.name.as_str()).collect();
                let at = spec.definitions.first().map_or(Span::default(), |d| d.name.span);
                let message =
                    format!("`{}` is not a version of a program here (versions: {})", b.version, known.join(", "));
                return Err(self.binding_err(at, b.line, message));
            }
        }
        Ok(())
    }

    fn declaration(&self, v: &Version, d: &Declared, code: &mut VersionCode) -> Result<(), GenError> {
        let Some(proc) = v.procedures.iter().find(|p| p.name.name == d.procedure) else {
            let known: Vec<&str> = v.procedures.iter().map(|p| p.name.name.as_str()).collect();
            let message =
                format!("`{}` is not a procedure of version {} ({})", d.procedure, v.name.name, known.join(", "));
            return Err(self.binding_err(v.name.span, d.line, message));
        };
        let constant = format!("super::{}", screaming(&proc.name.name));
        let at = proc.name.span;
        let method = snake(&proc.name.name).trim_start_matches("r#").to_string();
        match &d.what {
            What::Argument(path) => {
                let arg = self.single_argument(proc, d.line)?;
                let name = format!("{method}_argument_{}", d.line);
                let doc = format!("`{}`'s argument {}", proc.name.name, shown(path));
                code.walks.push(self.walk(arg, path, Target::Item, name.clone(), doc, at, d.line)?);
                let arm = code.arguments.iter_mut().find(|(c, _)| *c == constant);
                let call = format!("out.extend(walk::{name}(args, false).ok().flatten());");
                match arm {
                    Some((_, calls)) => calls.push(call),
                    None => code.arguments.push((constant, vec![call])),
                }
            }
            What::Result(path, max) => {
                if code.results.iter().any(|(c, _)| *c == constant) {
                    let message = format!("a second DDP-eligible result for `{}`: one is supported", proc.name.name);
                    return Err(self.binding_err(at, d.line, message));
                }
                let Some(result) = &proc.result else {
                    return Err(self.binding_err(at, d.line, format!("`{}` returns void", proc.name.name)));
                };
                let name = format!("{method}_result_{}", d.line);
                let doc = format!("`{}`'s result {}", proc.name.name, shown(path));
                code.walks.push(self.walk(result, path, Target::Item, name.clone(), doc, at, d.line)?);
                code.results
                    .push((constant.clone(), format!("out.extend(walk::{name}(results, reduced > 0).ok().flatten())")));
                let max = self.max_code(max, Some(proc), at, d.line, &mut code.walks, "result")?;
                code.maxima.push((constant, max));
            }
            What::Reply(max) => {
                if code.replies.iter().any(|(c, _)| *c == constant) {
                    let message = format!("a second `reply at most` for `{}`", proc.name.name);
                    return Err(self.binding_err(at, d.line, message));
                }
                let max = self.max_code(max, Some(proc), at, d.line, &mut code.walks, "reply")?;
                code.replies.push((constant, max));
            }
        }
        Ok(())
    }

    fn single_argument<'p>(&self, proc: &'p Procedure, line: usize) -> Result<&'p TypeSpec, GenError> {
        match proc.args.as_slice() {
            [one] => Ok(one),
            [] => Err(self.binding_err(proc.name.span, line, format!("`{}` takes no argument", proc.name.name))),
            _ => Err(self.binding_err(
                proc.name.span,
                line,
                format!("`{}` takes several arguments: bindings name items of one", proc.name.name),
            )),
        }
    }

    /// A `MAX` as a `usize` expression of `args` (an argument field's walk, added to
    /// `walks`) or a literal.
    fn max_code(
        &self,
        max: &Max,
        proc: Option<&Procedure>,
        at: Span,
        line: usize,
        walks: &mut Vec<Walk>,
        what: &str,
    ) -> Result<MaxCode, GenError> {
        let number = |v: &str| -> Result<u64, GenError> {
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse::<u64>().ok(),
            };
            parsed.or_else(|| self.syms.value_of_name(v).and_then(|n| u64::try_from(n).ok())).ok_or_else(|| {
                self.binding_err(at, line, format!("`{v}` is not a number or a constant of the specification"))
            })
        };
        match max {
            Max::Value(v) => Ok(MaxCode::Literal(number(v)?)),
            Max::Argument { path, plus, capped } => {
                let Some(proc) = proc else {
                    return Err(self.binding_err(at, line, "a version's `reply at most` cannot read an argument"));
                };
                let arg = self.single_argument(proc, line)?;
                let method = snake(&proc.name.name).trim_start_matches("r#").to_string();
                let name = format!("{method}_{what}_max_{line}");
                let doc = format!("`{}`'s argument {}, a number", proc.name.name, shown(path));
                walks.push(self.walk(arg, path, Target::Number, name.clone(), doc, at, line)?);
                let plus = plus.as_deref().map(number).transpose()?.unwrap_or(0);
                let capped = match capped.as_deref().map(number).transpose()? {
                    Some(c) => c.to_string(),
                    None => "usize::MAX".into(),
                };
                Ok(MaxCode::Read(format!("rpc::capped(walk::{name}(args), {plus}, {capped})")))
            }
        }
    }

    /// The walk from a value of type `ty` along `path` to `target`.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        ty: &TypeSpec,
        path: &[String],
        target: Target,
        name: String,
        doc: String,
        at: Span,
        line: usize,
    ) -> Result<Walk, GenError> {
        let mut body = Vec::new();
        self.walk_type(ty, path, target, &mut body).map_err(|m| self.binding_err(at, line, m))?;
        Ok(Walk { name, doc, target, body })
    }

    fn walk_type(&self, ty: &TypeSpec, path: &[String], target: Target, out: &mut Vec<String>) -> Result<(), String> {
        let ty = self.syms.resolve_alias(ty);
        let Some((first, rest)) = path.split_first() else {
            return match (target, ty) {
                (Target::Number, TypeSpec::Int | TypeSpec::UnsignedInt) => {
                    out.push("rpc::number(u64::from(r.u32()?))".into());
                    Ok(())
                }
                (Target::Number, TypeSpec::Hyper | TypeSpec::UnsignedHyper) => {
                    out.push("rpc::number(r.u64()?)".into());
                    Ok(())
                }
                (Target::Item, TypeSpec::Named { name, .. }) => match self.syms.type_def(&name.name) {
                    Some(Definition { kind: DefinitionKind::Typedef(d), .. }) => self.walk_decl(d, &[], target, out),
                    _ => Err(format!("`{}` is not a variable-length opaque or string", name.name)),
                },
                (Target::Item, _) => Err("the item is not a variable-length opaque or string".into()),
                (Target::Number, _) => Err("the size is not an int, unsigned int or hyper".into()),
            };
        };
        let (struct_body, union_body, type_name) = match ty {
            TypeSpec::Named { name, .. } => match self.syms.type_def(&name.name).map(|d| &d.kind) {
                Some(DefinitionKind::Struct(b)) => (Some(b), None, name.name.as_str()),
                Some(DefinitionKind::Union(u)) => (None, Some(u), name.name.as_str()),
                Some(DefinitionKind::Typedef(d)) => return self.walk_decl(d, path, target, out),
                _ => return Err(format!("`{}` has no fields to find `{first}` in", name.name)),
            },
            TypeSpec::InlineStruct(b) => (Some(b), None, "an inline struct"),
            TypeSpec::InlineUnion(u) => (None, Some(&**u), "an inline union"),
            _ => return Err(format!("a value with no fields has no `{first}`")),
        };
        if let Some(b) = struct_body {
            let names: Vec<&str> = b.fields.iter().filter_map(|f| f.name()).map(|n| n.name.as_str()).collect();
            let Some(i) = names.iter().position(|n| n == first) else {
                return Err(format!("struct `{type_name}` has no field `{first}` (its fields: {})", names.join(", ")));
            };
            // What comes before the field, decoded by the generated types' decoders.
            for f in &b.fields[..i] {
                let what = f.name().map_or("", |n| n.name.as_str());
                let codec = self.codec(f, what).map_err(|e| e.message)?;
                // (The walk has no lifetime of its own to name: `'_` wherever the types say `'a`.)
                if let Some(c) = codec {
                    out.push(format!("let _: {} = {};", c.ty.replace("'a", "'_"), c.decode.flat().replace("'a", "'_")));
                }
            }
            return self.walk_decl(&b.fields[i], rest, target, out);
        }
        let u = union_body.expect("a struct or a union");
        let arm = u.arms.iter().find(|a| a.decl.name().is_some_and(|n| n.name == *first));
        let Some(arm) = arm else {
            let arms: Vec<&str> = u.arms.iter().filter_map(|a| a.decl.name()).map(|n| n.name.as_str()).collect();
            return Err(format!("union `{type_name}` has no arm `{first}` (its arms: {})", arms.join(", ")));
        };
        let cases: Vec<String> = arm
            .cases
            .iter()
            .map(|c| self.value(c).map(|v| (v as u32).to_string()).map_err(|e| e.message))
            .collect::<Result<_, _>>()?;
        // The discriminant is one XDR word whatever its type; another arm means no item.
        out.push("let discriminant = r.u32()?;".into());
        out.push(format!("if !matches!(discriminant, {}) {{", cases.join(" | ")));
        out.push("    return rpc::elsewhere();".into());
        out.push("}".into());
        self.walk_decl(&arm.decl, rest, target, out)
    }

    fn walk_decl(&self, d: &Declaration, path: &[String], target: Target, out: &mut Vec<String>) -> Result<(), String> {
        let Declaration::Named { name, ty, shape } = d else { return Err("the path reaches a void".into()) };
        match shape {
            Shape::Scalar if path.is_empty() && target == Target::Item => self
                .walk_type(ty, path, target, out)
                .map_err(|_| format!("`{}` is not a variable-length opaque or string", name.name)),
            Shape::Scalar => self.walk_type(ty, path, target, out),
            Shape::VarArray(_)
                if path.is_empty()
                    && target == Target::Item
                    && matches!(self.syms.resolve_alias(ty), TypeSpec::Opaque | TypeSpec::String) =>
            {
                out.push("rpc::Item::at(r, reduced)".into());
                Ok(())
            }
            _ if path.is_empty() => Err(format!("`{}` is not a variable-length opaque or string", name.name)),
            _ => Err(format!("`{}` is an array or optional-data: a path cannot go into it", name.name)),
        }
    }
}

/// A path as a binding file writes it, quoted; the whole value when empty.
fn shown(path: &[String]) -> String {
    if path.is_empty() {
        "(the whole of it)".into()
    } else {
        format!("`{}`", path.join("."))
    }
}

/// Writes `code`: the `walk` module and the `Binding` type, in the services module of version
/// `version` of program `program`.
pub(super) fn emit_binding(c: &mut Code, version: &str, program_const: &str, version_const: &str, code: &VersionCode) {
    let from = match &code.source {
        Some(file) => format!("as `{file}` declares it"),
        None => "with nothing DDP-eligible (no binding file declares it)".into(),
    };
    c.line(format!("/// Version `{version}`'s Upper-Layer Binding (RFC 8166 section 6), {from}:"));
    c.line("/// which items of its calls and replies are DDP-eligible, and how large a reply may be.");
    c.line("pub struct Binding;");
    c.blank();
    c.line("impl rpc::Binding for Binding {");
    c.indent();
    emit_numbers(c, program_const, version_const);
    c.line("fn argument_items(&self, procedure: u32, args: &[u8], out: &mut Vec<rpc::Item>) {");
    c.indent();
    emit_statement_match(c, &code.arguments, "let _ = (procedure, args, out);");
    c.dedent();
    c.line("}");
    c.blank();
    c.line("fn result_maxima(&self, procedure: u32, args: &[u8], out: &mut Vec<usize>) {");
    c.indent();
    let maxima: Vec<(String, Vec<String>)> = code
        .maxima
        .iter()
        .map(|(p, m)| {
            let statement = match m {
                MaxCode::Literal(n) => format!("out.push({n});"),
                MaxCode::Read(e) => format!("out.extend({e});"),
            };
            (p.clone(), vec![statement])
        })
        .collect();
    if !maxima.is_empty() && code.maxima.iter().all(|(_, m)| matches!(m, MaxCode::Literal(_))) {
        c.line("let _ = args;");
    }
    emit_statement_match(c, &maxima, "let _ = (procedure, args, out);");
    c.dedent();
    c.line("}");
    c.blank();
    c.line("fn max_reply(&self, procedure: u32, args: &[u8]) -> usize {");
    c.indent();
    if code.replies.is_empty() {
        c.line("let _ = (procedure, args);");
        c.line(code.default_reply.to_string());
    } else {
        if code.replies.iter().all(|(_, m)| matches!(m, MaxCode::Literal(_))) {
            c.line("let _ = args;");
        }
        c.line("match procedure {");
        c.indent();
        for (p, m) in &code.replies {
            match m {
                MaxCode::Literal(n) => c.arm(p, &n.to_string()),
                MaxCode::Read(e) => c.arm(p, &format!("{e}.unwrap_or({})", code.default_reply)),
            }
        }
        c.line(format!("_ => {},", code.default_reply));
        c.dedent();
        c.line("}");
    }
    c.dedent();
    c.line("}");
    c.blank();
    let params =
        ["&self", "procedure: u32", "_args: &[u8]", "results: &[u8]", "reduced: usize", "out: &mut Vec<rpc::Item>"];
    let params: Vec<String> = params.map(String::from).to_vec();
    signature(c, "fn result_items", &params, "", " {");
    c.indent();
    let results: Vec<(String, Vec<String>)> =
        code.results.iter().map(|(p, e)| (p.clone(), vec![format!("{e};")])).collect();
    emit_statement_match(c, &results, "let _ = (procedure, results, reduced, out);");
    c.dedent();
    c.line("}");
    c.dedent();
    c.line("}");
    c.blank();
    if code.walks.is_empty() {
        return;
    }
    c.line("/// Where the binding's items are: each found by decoding what comes before it.");
    c.line("mod walk {");
    c.indent();
    c.line("#[allow(unused_imports)]");
    c.line("use super::super::*;");
    c.line("use xdr_spec_rt::rpc;");
    for w in &code.walks {
        c.blank();
        c.line(format!("/// {}.", w.doc));
        // (Paths in full: the specification's types, imported here, may shadow the prelude's.)
        let (params, ret) = match w.target {
            Target::Item => ("bytes: &[u8], reduced: bool", "xdr_spec_rt::Result<::core::option::Option<rpc::Item>>"),
            Target::Number => ("bytes: &[u8]", "xdr_spec_rt::Result<::core::option::Option<usize>>"),
        };
        let params: Vec<String> = params.split(", ").map(String::from).collect();
        signature(c, &format!("pub(super) fn {}", w.name), &params, &format!(" -> {ret}"), " {");
        c.indent();
        c.line("let r = &mut xdr_spec_rt::Reader::new(bytes);");
        for line in &w.body {
            c.line(line);
        }
        c.dedent();
        c.line("}");
    }
    c.dedent();
    c.line("}");
    c.blank();
}

/// `match procedure { P => { statements } ... _ => {} }`, or `unused` (naming the
/// parameters) when there are no arms.
fn emit_statement_match(c: &mut Code, arms: &[(String, Vec<String>)], unused: &str) {
    if arms.is_empty() {
        c.line(unused);
        return;
    }
    if let [(p, statements)] = arms {
        // (One arm: an `if`, as clippy's `single_match` asks.)
        c.line(format!("if procedure == {p} {{"));
        c.indent();
        for s in statements {
            c.line(s);
        }
        c.dedent();
        c.line("}");
        return;
    }
    c.line("match procedure {");
    c.indent();
    for (p, statements) in arms {
        c.line(format!("{p} => {{"));
        c.indent();
        for s in statements {
            c.line(s);
        }
        c.dedent();
        c.line("}");
    }
    c.line("_ => {}");
    c.dedent();
    c.line("}");
}
