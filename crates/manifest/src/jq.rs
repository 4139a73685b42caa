//! Change filters: jq programs (run by jaq) that project an object onto what a plugin cares
//! about, so an update is delivered only when that projection changed.
//!
//! jaq has no fuel or time limit of its own, so what a program may do is bounded twice.
//!
//! Before it runs:
//! - at most [`MAX_PROGRAM_BYTES`] of text, nested at most [`MAX_DEPTH`] deep (parsing, checking
//!   and evaluating recurse over the program);
//! - no `def` (no recursion), no `reduce`/`foreach`, no `*` (string repetition), and only the
//!   builtins in [`ALLOWED`]: no generators of unbounded length (`range`, `repeat`, `recurse`,
//!   `while`, `until`), no access to the host (`env`, `input`, `halt`, `now`, `debug`), no
//!   regular expressions and no `fromjson` (whose cost would depend on the object's text).
//!
//! What passes can still do work exponential in the program's length (`(.,.,.,.) | (.,.,.,.) |
//! ...` gives 4^n outputs), so each evaluation also runs under a budget:
//! - at most [`MAX_STEPS`] steps (a step is one term of the program evaluated on one input, a
//!   builtin call included) and at most [`MAX_EVAL_TIME`] of wall time, checked every
//!   [`CLOCK_EVERY`] steps; the first exceeded ends the evaluation with an error
//!   ([`OVER_BUDGET`] in its text);
//! - at most [`MAX_OUTPUTS`] outputs, written as at most [`MAX_OUTPUT_BYTES`] of JSON.
//!
//! The budget is counted where jaq looks up the term it evaluates next, and an evaluation over it
//! is unwound from there (caught in [`JqFilter::eval`]; nothing shared is left half-changed,
//! since a compiled program is immutable and the values are the evaluation's own). What the
//! budget cannot stop is one step that is long by itself: a builtin or operator that walks a
//! whole value (`==`, `sort`, `tojson`, string interpolation, `[..]`, `[paths]`) on a value
//! built to share one part exponentially often (`[.,.] | [.,.] | ...`) runs to its end. That is
//! why the runtime lets only operator plugins use change filters, and evaluates them off the
//! informer's distribution path, on the watching plugin's own task.

use std::fmt::Write as _;

use std::cell::Cell;
use std::time::{Duration, Instant};

use jaq_core::data::{DataT, HasLut};
use jaq_core::load::parse::{BinaryOp, Pattern, Term};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, Lut, Vars};
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
/// Most steps one evaluation may take: a projection of a Kubernetes object takes hundreds to a
/// few thousand. Steps ran at about 1,300 per ms in a debug test build on a busy machine, so
/// there [`MAX_EVAL_TIME`] ends an evaluation first; the count keeps the bound independent of
/// how fast the clock says the machine is.
pub const MAX_STEPS: u64 = 1_000_000;
/// Longest one evaluation may run.
pub const MAX_EVAL_TIME: Duration = Duration::from_millis(50);
/// Steps between two looks at the clock (reading it costs about as much as a step).
pub const CLOCK_EVERY: u64 = 1024;
/// In the error of an evaluation that exceeded [`MAX_STEPS`] or [`MAX_EVAL_TIME`].
pub const OVER_BUDGET: &str = "over its budget";

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

/// Why a program is refused, or why its evaluation gave no projection.
#[derive(Debug, thiserror::Error)]
pub enum JqError {
    /// Longer than [`MAX_PROGRAM_BYTES`].
    #[error("the program is {0} bytes; at most {MAX_PROGRAM_BYTES}")]
    TooLong(usize),
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("nested more than {MAX_DEPTH} deep")]
    TooDeep,
    /// jaq's parser found no program.
    #[error("`{0}` is not a jq program")]
    NotJq(String),
    /// jaq's loader refused the program.
    #[error("`{text}` is not a jq program: {detail}")]
    NotLoaded {
        /// The program.
        text: String,
        /// jaq's errors.
        detail: String,
    },
    /// The program calls what jaq does not define.
    #[error("`{text}`: undefined {names}")]
    Undefined {
        /// The program.
        text: String,
        /// The names, quoted and comma-separated.
        names: String,
    },
    /// The thread that parses and checks the program could not start.
    #[error("cannot start the checking thread: {0}")]
    CheckThread(#[source] std::io::Error),
    /// jaq's parser panicked.
    #[error("the jq parser failed")]
    ParserFailed,
    /// String repetition.
    #[error("`*` is not allowed (string repetition has no bound)")]
    Repetition,
    /// `reduce` or `foreach`.
    #[error("`reduce` and `foreach` are not allowed")]
    Fold,
    /// A definition.
    #[error("`def` is not allowed (a definition could recurse forever)")]
    Def,
    /// A builtin not in [`ALLOWED`].
    #[error(
        "`{0}` is not allowed in a change filter (allowed: paths, operators other than `*`, and the builtins listed in the README)"
    )]
    NotAllowed(String),
    /// The object given is not JSON.
    #[error("input is not JSON: {0}")]
    Input(#[source] jaq_json::read::Error),
    /// The program raised an error.
    #[error("{0}")]
    Runtime(String),
    /// The program called `halt`.
    #[error("halted")]
    Halted,
    /// More than [`MAX_OUTPUTS`] outputs.
    #[error("more than {MAX_OUTPUTS} outputs")]
    TooManyOutputs,
    /// Outputs over [`MAX_OUTPUT_BYTES`] of JSON.
    #[error("outputs over {MAX_OUTPUT_BYTES} bytes")]
    OutputTooLarge,
    /// More than [`MAX_STEPS`] steps.
    #[error("{OVER_BUDGET}: more than {MAX_STEPS} steps")]
    OverSteps,
    /// Longer than [`MAX_EVAL_TIME`].
    #[error("{OVER_BUDGET}: still running after {} ms ({steps} steps)", MAX_EVAL_TIME.as_millis())]
    OverTime {
        /// The steps taken by then.
        steps: u64,
    },
}

impl JqError {
    /// Whether the evaluation was ended by its budget ([`MAX_STEPS`] or [`MAX_EVAL_TIME`]).
    pub fn is_over_budget(&self) -> bool {
        matches!(self, JqError::OverSteps | JqError::OverTime { .. })
    }
}

/// What jaq evaluates on: JSON values, and a lookup table that counts the steps taken.
struct Data;

impl DataT for Data {
    type V<'a> = Val;
    type Data<'a> = Metered<'a>;
}

/// The program's lookup table, handed out once per step against the evaluation's budget.
#[derive(Clone)]
struct Metered<'a> {
    lut: &'a Lut<Data>,
    budget: &'a Budget,
}

impl<'a> HasLut<'a, Data> for Metered<'a> {
    fn lut(&self) -> &'a Lut<Data> {
        self.budget.step();
        self.lut
    }
}

/// One evaluation's budget: steps left, and when it must have ended.
struct Budget {
    steps: Cell<u64>,
    deadline: Instant,
}

/// The unwind payload of an evaluation over its budget.
struct Exceeded(JqError);

impl Budget {
    fn new() -> Self {
        Budget {
            steps: Cell::new(0),
            deadline: Instant::now() + MAX_EVAL_TIME,
        }
    }

    /// Counts a step; over the budget, unwinds to [`JqFilter::eval`]. `resume_unwind` rather
    /// than `panic!`: no panic hook runs, so nothing is printed for an expected outcome.
    fn step(&self) {
        let n = self.steps.get() + 1;
        self.steps.set(n);
        let why = if n > MAX_STEPS {
            JqError::OverSteps
        } else if n.is_multiple_of(CLOCK_EVERY) && Instant::now() > self.deadline {
            JqError::OverTime { steps: n }
        } else {
            return;
        };
        std::panic::resume_unwind(Box::new(Exceeded(why)));
    }
}

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
    pub fn compile(text: &str) -> Result<JqFilter, JqError> {
        if text.len() > MAX_PROGRAM_BYTES {
            return Err(JqError::TooLong(text.len()));
        }
        // Nesting is bounded before anything recursive (jaq's parser) sees the text: every
        // bracket counts, whether in a string or not, which only ever refuses more.
        let mut depth = 0usize;
        for c in text.chars() {
            match c {
                '(' | '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(JqError::TooDeep);
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
                        .ok_or_else(|| JqError::NotJq(text.to_string()))?;
                    check(&term, 0)
                })
                .map_err(JqError::CheckThread)?
                .join()
                .map_err(|_| JqError::ParserFailed)?
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
            .map_err(|errs| JqError::NotLoaded {
                text: text.to_string(),
                detail: format!("{errs:?}"),
            })?;
        let filter = jaq_core::Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| {
                let names: Vec<String> = errs
                    .iter()
                    .flat_map(|(_, es)| es.iter().map(|(name, _)| format!("`{name}`")))
                    .collect();
                JqError::Undefined {
                    text: text.to_string(),
                    names: names.join(", "),
                }
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
    /// object are compared by. `Err` for a runtime error, an output over the bounds, or an
    /// evaluation over its budget (the text then holds [`OVER_BUDGET`]).
    pub fn eval(&self, json: &str) -> Result<String, JqError> {
        let input = jaq_json::read::parse_single(json.as_bytes()).map_err(JqError::Input)?;
        let budget = Budget::new();
        // Unwind safety: the program is immutable and every value is this evaluation's own, so
        // an evaluation cut short leaves nothing half-changed behind.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run(input, &budget))) {
            Ok(result) => result,
            Err(payload) => match payload.downcast::<Exceeded>() {
                Ok(exceeded) => Err(exceeded.0),
                Err(panic) => std::panic::resume_unwind(panic),
            },
        }
    }

    fn run(&self, input: Val, budget: &Budget) -> Result<String, JqError> {
        let metered = Metered {
            lut: &self.filter.lut,
            budget,
        };
        let ctx = Ctx::<Data>::new(metered, Vars::new([]));
        let mut out = String::new();
        for (n, result) in self.filter.id.run((ctx, input)).enumerate() {
            if n >= MAX_OUTPUTS {
                return Err(JqError::TooManyOutputs);
            }
            // Never `unwrap_valr`: it exits the process on `halt`.
            let value = result.map_err(|e| match e.get_err() {
                Ok(err) => JqError::Runtime(err.to_string()),
                Err(_) => JqError::Halted,
            })?;
            let _ = writeln!(Bounded(&mut out), "{value}");
            if out.len() > MAX_OUTPUT_BYTES {
                return Err(JqError::OutputTooLarge);
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
fn check(t: &Term<&str>, depth: usize) -> Result<(), JqError> {
    if depth > MAX_DEPTH {
        return Err(JqError::TooDeep);
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
                    return Err(JqError::Repetition);
                }
                BinaryOp::Pipe(Some(p)) => pattern(p, depth + 1)?,
                _ => {}
            }
            sub(l)?;
            sub(r)
        }
        Term::Fold(..) => Err(JqError::Fold),
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
        Term::Def(..) => Err(JqError::Def),
        Term::Call(name, args) => {
            if !ALLOWED.contains(name) {
                return Err(JqError::NotAllowed(name.to_string()));
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

fn pattern(p: &Pattern<&str>, depth: usize) -> Result<(), JqError> {
    if depth > MAX_DEPTH {
        return Err(JqError::TooDeep);
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
            .unwrap_err()
            .to_string();
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
            let err = JqFilter::compile(program).unwrap_err().to_string();
            assert!(err.contains(why), "`{program}` -> `{err}` lacks `{why}`");
        }
    }

    /// Programs that pass every check at load but whose work explodes: each ends promptly with
    /// an error naming the budget, and the next evaluation starts with a full one.
    #[test]
    fn exploding_programs_end_over_budget() {
        let four = "(.,.,.,.)";
        let nested = format!(".{}", " | [.,.,.,.]".repeat(24));
        for program in [
            format!("[{}] | length", vec![four; 24].join(" | ")),
            format!("{} | select(false)", vec![four; 24].join(" | ")),
            format!("isempty({} | select(false))", vec![four; 24].join(" | ")),
            format!("{nested} | flatten | length"),
            format!("{nested} | [.. | numbers] | length"),
        ] {
            let f = JqFilter::compile(&program).unwrap();
            let started = Instant::now();
            let err = f.eval(r#"{"spec":{"x":1}}"#).unwrap_err();
            let took = started.elapsed();
            assert!(err.is_over_budget(), "`{program}` -> `{err}`");
            assert!(
                err.to_string().contains(OVER_BUDGET),
                "`{program}` -> `{err}`"
            );
            assert!(
                took < MAX_EVAL_TIME * 20,
                "`{program}` took {took:?} to be stopped"
            );
        }
        let f = JqFilter::compile(".spec").unwrap();
        assert_eq!(f.eval(r#"{"spec":{"x":1}}"#).unwrap(), "{\"x\":1}\n");
    }

    #[test]
    fn outputs_are_bounded() {
        let many = JqFilter::compile("[.[]] | .[], .[]").unwrap();
        let input = format!("[{}]", vec!["1"; 40].join(","));
        assert!(
            many.eval(&input)
                .unwrap_err()
                .to_string()
                .contains("more than 64 outputs")
        );
        // Built cheaply by sharing, huge once written: refused while being written.
        let wide = format!(".{}", " | [., .]".repeat(30));
        let err = JqFilter::compile(&wide)
            .unwrap()
            .eval(r#""0123456789""#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("over 1048576 bytes"), "{err}");
    }
}
