//! Change filters: jq programs (run by jaq) that project an object onto what a plugin cares
//! about, so an update is delivered only when that projection changed.
//!
//! jaq has no step, fuel or time limit, and evaluation cannot be interrupted, so what a program
//! may do is bounded before it runs:
//! - at most [`MAX_PROGRAM_BYTES`] of text, nested at most [`MAX_DEPTH`] deep (parsing, checking
//!   and evaluating recurse over the program);
//! - no `def` (no recursion), no `reduce`/`foreach`, no `*` (string repetition), and only the
//!   builtins in [`ALLOWED`]: no generators of unbounded length (`range`, `repeat`, `recurse`,
//!   `while`, `until`), no access to the host (`env`, `input`, `halt`, `now`, `debug`), no
//!   regular expressions and no `fromjson` (whose cost would depend on the object's text);
//! - at most [`MAX_OUTPUTS`] outputs, written as at most [`MAX_OUTPUT_BYTES`] of JSON.
//!
//! What remains is work exponential in the program's length at worst (`[.,.] | [.,.] | ...`),
//! not endless loops: fine for a program the operator wrote, not for one an untrusted tenant
//! wrote, which is why the runtime lets only operator plugins use them.

use std::fmt::Write as _;

use jaq_core::load::parse::{BinaryOp, Pattern, Term};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, Vars, data};
use jaq_json::Val;

/// Longest program accepted.
pub const MAX_PROGRAM_BYTES: usize = 1024;
/// Deepest nesting of a program's syntax tree.
pub const MAX_DEPTH: usize = 32;
/// Stack for parsing and checking a program (reserved, touched only as deep as it goes).
const PARSE_STACK_BYTES: usize = 64 << 20;
/// Most outputs one evaluation may give.
pub const MAX_OUTPUTS: usize = 64;
/// Most bytes of JSON one evaluation's outputs may take.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;

/// Builtins a change filter may call: each ends, in time bounded by its input's size.
pub const ALLOWED: &[&str] = &[
    "true",
    "false",
    "null",
    "not",
    "empty",
    "error",
    "length",
    "utf8bytelength",
    "keys",
    "keys_unsorted",
    "values",
    "has",
    "in",
    "contains",
    "inside",
    "map",
    "map_values",
    "select",
    "to_entries",
    "from_entries",
    "with_entries",
    "any",
    "all",
    "flatten",
    "type",
    "arrays",
    "objects",
    "iterables",
    "booleans",
    "numbers",
    "strings",
    "nulls",
    "scalars",
    "sort",
    "sort_by",
    "group_by",
    "unique",
    "unique_by",
    "min",
    "max",
    "min_by",
    "max_by",
    "reverse",
    "startswith",
    "endswith",
    "ltrimstr",
    "rtrimstr",
    "trim",
    "ltrim",
    "rtrim",
    "ascii_downcase",
    "ascii_upcase",
    "tostring",
    "tonumber",
    "tojson",
    "split",
    "join",
    "first",
    "last",
    "nth",
    "limit",
    "isempty",
    "getpath",
    "paths",
    "leaf_paths",
    "path",
    "del",
    "delpaths",
    "pick",
    "abs",
    "floor",
    "ceil",
    "round",
    "sqrt",
    "walk",
    "indices",
    "index",
    "rindex",
    "add",
    "toarray",
    "infinite",
    "nan",
    "isinfinite",
    "isnan",
    "isnormal",
];

type Data = data::JustLut<Val>;

// Shared by every informer thread that evaluates it.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<JqFilter>();
};

/// A compiled change filter.
pub struct JqFilter {
    text: String,
    filter: jaq_core::Filter<Data>,
}

impl std::fmt::Debug for JqFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JqFilter({:?})", self.text)
    }
}

impl JqFilter {
    /// Checks and compiles `text`; `Err` says why it is refused (jaq's message for a syntax
    /// or compile error).
    pub fn compile(text: &str) -> Result<JqFilter, String> {
        if text.len() > MAX_PROGRAM_BYTES {
            return Err(format!(
                "the program is {} bytes; at most {MAX_PROGRAM_BYTES}",
                text.len()
            ));
        }
        // Nesting is bounded before anything recursive (jaq's parser) sees the text: every
        // bracket counts, whether in a string or not, which only ever refuses more.
        let mut depth = 0usize;
        for c in text.chars() {
            match c {
                '(' | '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(format!("nested more than {MAX_DEPTH} deep"));
                    }
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        // jaq's parser recurses once per unary operator or keyword too (`- - - ...`, `try try
        // ...`), which the bracket count does not see: parse and check on a thread whose stack
        // holds any program of MAX_PROGRAM_BYTES, whatever thread loads the manifest.
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("jq-check".into())
                .stack_size(PARSE_STACK_BYTES)
                .spawn_scoped(scope, || {
                    let term = jaq_core::load::parse(text, |p| p.term())
                        .ok_or_else(|| format!("`{text}` is not a jq program"))?;
                    check(&term, 0)
                })
                .map_err(|e| format!("cannot start the checking thread: {e}"))?
                .join()
                .map_err(|_| "the jq parser failed".to_string())?
        })?;
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let arena = Arena::default();
        let modules = Loader::new(defs)
            .load(
                &arena,
                File {
                    code: text,
                    path: (),
                },
            )
            .map_err(|errs| format!("`{text}` is not a jq program: {errs:?}"))?;
        let filter = jaq_core::Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| {
                let names: Vec<String> = errs
                    .iter()
                    .flat_map(|(_, es)| es.iter().map(|(name, _)| format!("`{name}`")))
                    .collect();
                format!("`{text}`: undefined {}", names.join(", "))
            })?;
        Ok(JqFilter {
            text: text.to_string(),
            filter,
        })
    }

    /// The program's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The program's outputs for the object `json`, as JSON lines: what two versions of an
    /// object are compared by. `Err` for a runtime error or an output over the bounds.
    pub fn eval(&self, json: &str) -> Result<String, String> {
        let input = jaq_json::read::parse_single(json.as_bytes())
            .map_err(|e| format!("input is not JSON: {e}"))?;
        let ctx = Ctx::<Data>::new(&self.filter.lut, Vars::new([]));
        let mut out = String::new();
        for (n, result) in self.filter.id.run((ctx, input)).enumerate() {
            if n >= MAX_OUTPUTS {
                return Err(format!("more than {MAX_OUTPUTS} outputs"));
            }
            // Never `unwrap_valr`: it exits the process on `halt`.
            let value = result.map_err(|e| match e.get_err() {
                Ok(err) => err.to_string(),
                Err(_) => "halted".to_string(),
            })?;
            let _ = writeln!(Bounded(&mut out), "{value}");
            if out.len() > MAX_OUTPUT_BYTES {
                return Err(format!("outputs over {MAX_OUTPUT_BYTES} bytes"));
            }
        }
        Ok(out)
    }
}

/// A `String` that refuses to grow past [`MAX_OUTPUT_BYTES`], so writing a huge (shared,
/// cheaply built) value stops early instead of materialising it.
struct Bounded<'a>(&'a mut String);

impl std::fmt::Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.0.len() + s.len() > MAX_OUTPUT_BYTES + 1 {
            self.0.push_str(
                &s[..s.floor_char_boundary((MAX_OUTPUT_BYTES + 1).saturating_sub(self.0.len()))],
            );
            return Err(std::fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

/// Refuses what could run without end (or beyond the stack).
fn check(t: &Term<&str>, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested more than {MAX_DEPTH} deep"));
    }
    let sub = |t: &Term<&str>| check(t, depth + 1);
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => Ok(()),
        Term::Str(_, parts) => parts.iter().try_for_each(|p| match p {
            jaq_core::load::lex::StrPart::Term(t) => sub(t),
            _ => Ok(()),
        }),
        Term::Arr(inner) => inner.as_deref().map_or(Ok(()), sub),
        Term::Obj(entries) => entries.iter().try_for_each(|(k, v)| {
            sub(k)?;
            v.as_ref().map_or(Ok(()), sub)
        }),
        Term::Neg(t) | Term::Label(_, t) => sub(t),
        Term::BinOp(l, op, r) => {
            match op {
                BinaryOp::Math(jaq_core::ops::Math::Mul) => {
                    return Err("`*` is not allowed (string repetition has no bound)".into());
                }
                BinaryOp::Pipe(Some(p)) => pattern(p, depth + 1)?,
                _ => {}
            }
            sub(l)?;
            sub(r)
        }
        Term::Fold(..) => Err("`reduce` and `foreach` are not allowed".into()),
        Term::TryCatch(t, c) => {
            sub(t)?;
            c.as_deref().map_or(Ok(()), sub)
        }
        Term::IfThenElse(branches, otherwise) => {
            for (cond, then) in branches {
                sub(cond)?;
                sub(then)?;
            }
            otherwise.as_deref().map_or(Ok(()), sub)
        }
        Term::Def(..) => Err("`def` is not allowed (a definition could recurse forever)".into()),
        Term::Call(name, args) => {
            if !ALLOWED.contains(name) {
                return Err(format!(
                    "`{name}` is not allowed in a change filter (allowed: paths, operators other than `*`, and {})",
                    "the builtins listed in the README"
                ));
            }
            args.iter().try_for_each(sub)
        }
        Term::Path(t, path) => {
            sub(t)?;
            path.0.iter().try_for_each(|(part, _)| match part {
                jaq_core::path::Part::Index(i) => sub(i),
                jaq_core::path::Part::Range(from, to) => {
                    from.as_ref().map_or(Ok(()), sub)?;
                    to.as_ref().map_or(Ok(()), sub)
                }
            })
        }
    }
}

fn pattern(p: &Pattern<&str>, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested more than {MAX_DEPTH} deep"));
    }
    match p {
        Pattern::Var(_) => Ok(()),
        Pattern::Arr(ps) => ps.iter().try_for_each(|p| pattern(p, depth + 1)),
        Pattern::Obj(entries) => entries.iter().try_for_each(|(k, v)| {
            check(k, depth + 1)?;
            pattern(v, depth + 1)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projections_compare_versions() {
        let f = JqFilter::compile(".spec").unwrap();
        let a = f
            .eval(r#"{"metadata":{"labels":{"a":"1"}},"spec":{"x":1}}"#)
            .unwrap();
        let b = f
            .eval(r#"{"metadata":{"labels":{"a":"2"}},"spec":{"x":1}}"#)
            .unwrap();
        let c = f.eval(r#"{"metadata":{},"spec":{"x":2}}"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let f =
            JqFilter::compile("{spec, labels: .metadata.labels} | del(.spec.replicas)").unwrap();
        assert_eq!(
            f.eval(r#"{"metadata":{"labels":{"a":"1"}},"spec":{"replicas":3,"x":1}}"#)
                .unwrap(),
            "{\"spec\":{\"x\":1},\"labels\":{\"a\":\"1\"}}\n"
        );
        let err = JqFilter::compile(".spec.x | tonumber")
            .unwrap()
            .eval(r#"{"spec":{"x":"abc"}}"#)
            .unwrap_err();
        assert!(err.contains("abc"), "{err}");
    }

    #[test]
    fn programs_that_could_run_forever_are_refused() {
        for (program, why) in [
            ("def f: f; f", "`def` is not allowed"),
            ("def f: 1 + f; f", "`def` is not allowed"),
            ("repeat(1)", "`repeat` is not allowed"),
            ("range(1e18)", "`range` is not allowed"),
            ("[limit(3; repeat(1))]", "`repeat` is not allowed"),
            ("last(range(1e18))", "`range` is not allowed"),
            ("recurse(.)", "`recurse` is not allowed"),
            ("1 | while(true; .)", "`while` is not allowed"),
            ("until(false; .)", "`until` is not allowed"),
            (
                "reduce .[] as $x (.; . + .)",
                "`reduce` and `foreach` are not allowed",
            ),
            ("\"x\" * 1e18", "`*` is not allowed"),
            ("env", "`env` is not allowed"),
            ("$ENV", "undefined"),
            ("input", "`input` is not allowed"),
            ("halt", "`halt` is not allowed"),
            ("now", "`now` is not allowed"),
            ("debug", "`debug` is not allowed"),
            (".spec | test(\"(a+)+$\")", "`test` is not allowed"),
            (".x | fromjson", "`fromjson` is not allowed"),
            ("import \"x\" as x; .", "is not a jq program"),
            (".spec |", "is not a jq program"),
            ("no_such_function", "`no_such_function` is not allowed"),
            (&"[".repeat(100), "nested more than 32 deep"),
            (&"try ".repeat(200), "is not a jq program"),
            (
                &format!("{}1", "try ".repeat(200)),
                "nested more than 32 deep",
            ),
            (
                &format!("{}1", "-".repeat(1000)),
                "nested more than 32 deep",
            ),
            (&".a".repeat(600), "at most 1024"),
        ] {
            let err = JqFilter::compile(program).unwrap_err();
            assert!(err.contains(why), "`{program}` -> `{err}` lacks `{why}`");
        }
    }

    #[test]
    fn outputs_are_bounded() {
        let many = JqFilter::compile("[.[]] | .[], .[]").unwrap();
        let input = format!("[{}]", vec!["1"; 40].join(","));
        assert!(
            many.eval(&input)
                .unwrap_err()
                .contains("more than 64 outputs")
        );
        // Built cheaply by sharing, huge once written: refused while being written.
        let wide = format!(".{}", " | [., .]".repeat(30));
        let err = JqFilter::compile(&wide)
            .unwrap()
            .eval(r#""0123456789""#)
            .unwrap_err();
        assert!(err.contains("over 1048576 bytes"), "{err}");
    }
}
