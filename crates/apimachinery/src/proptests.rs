//! Property tests over the two parsers of this crate: label selectors and field paths.
//!
//! What they pin: no input makes either parser (or `values_in`) panic; a refusal says where the
//! input is wrong; what the grammar allows parses to what was meant and survives a round trip
//! through `Display`; and `matches` agrees with a reference model written from the API server's
//! documented semantics, not from this crate's code.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::{FieldPath, FieldPathError, LabelSelector, Requirement};

/// Text that looks like selectors often enough to reach every branch of the parser.
fn selectorish() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9./_ =!,()-]{0,40}",
        "[a-c]{0,3}( ?(=|==|!=| in | notin |!)( ?\\(?[a-c,]{0,4}\\)?)?,?){0,4}",
    ]
}

/// Whether a refusal's reason locates the problem: it quotes a piece of the input, gives an
/// offset inside it, or says the input ended early.
fn locates(reason: &str, input: &str) -> bool {
    // Every non-empty piece of the input, so that a backtick inside it cannot confuse the check.
    let bounds: Vec<usize> = input
        .char_indices()
        .map(|(i, _)| i)
        .chain([input.len()])
        .collect();
    let quoted = bounds.iter().enumerate().any(|(n, &a)| {
        bounds[n + 1..]
            .iter()
            .any(|&b| reason.contains(&format!("`{}`", &input[a..b])))
    });
    let offset = reason
        .split("offset ")
        .skip(1)
        .filter_map(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .filter_map(|n| n.parse::<usize>().ok())
        .any(|n| n <= input.len());
    quoted || offset || reason.contains("ended")
}

// ---- label selectors: the grammar, as a generator ----

/// A DNS subdomain segment, as a key prefix's parts must be.
fn dns_segment() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?"
}

/// A name part: 1-63 characters of [A-Za-z0-9_.-], alphanumeric at both ends.
fn name_part() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9]([A-Za-z0-9_.-]{0,12}[A-Za-z0-9])?",
        "[A-Za-z0-9][A-Za-z0-9_.-]{61}[A-Za-z0-9]",
        // A small pool, so that generated labels hit generated selectors.
        prop::sample::select(vec!["a", "b", "web", "db", "x.y", "v1"]).prop_map(String::from),
    ]
}

fn label_key() -> impl Strategy<Value = String> {
    let prefixed = (prop::collection::vec(dns_segment(), 1..4), name_part())
        .prop_map(|(segs, name)| format!("{}/{name}", segs.join(".")));
    prop_oneof![3 => name_part(), 1 => prefixed, 1 => Just("example.com/key".to_string())]
        .prop_filter("`in` and `notin` are operators", |k| {
            !matches!(k.as_str(), "in" | "notin")
        })
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![1 => Just(String::new()), 6 => name_part()]
}

fn value_set() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::btree_set(label_value(), 1..4)
        .prop_filter("a set of only the empty value is refused", |s| {
            !(s.len() == 1 && s.contains(""))
        })
}

fn requirement() -> impl Strategy<Value = Requirement> {
    prop_oneof![
        (label_key(), label_value()).prop_map(|(k, v)| Requirement::Equals(k, v)),
        (label_key(), label_value()).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
        (label_key(), value_set()).prop_map(|(k, vs)| Requirement::In(k, vs)),
        (label_key(), value_set()).prop_map(|(k, vs)| Requirement::NotIn(k, vs)),
        label_key().prop_map(Requirement::Exists),
        label_key().prop_map(Requirement::DoesNotExist),
    ]
}

/// Whitespace the grammar allows between tokens.
fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", " ", "  ", "\t"])
}

/// Writes a requirement as a person might: `=` or `==`, spaces around tokens.
fn render(r: &Requirement) -> BoxedStrategy<String> {
    let set = |vs: &BTreeSet<String>| {
        let vs: Vec<String> = vs.iter().cloned().collect();
        (Just(vs).prop_shuffle(), ws(), ws())
            .prop_map(|(vs, a, b)| format!("({a}{}{b})", vs.join(&format!("{a},{b}"))))
    };
    match r.clone() {
        Requirement::Equals(k, v) => (prop::sample::select(vec!["=", "=="]), ws(), ws())
            .prop_map(move |(op, a, b)| format!("{k}{a}{op}{b}{v}"))
            .boxed(),
        Requirement::NotEquals(k, v) => (ws(), ws())
            .prop_map(move |(a, b)| format!("{k}{a}!={b}{v}"))
            .boxed(),
        Requirement::In(k, vs) => (set(&vs), ws())
            .prop_map(move |(s, b)| format!("{k} in{b}{s}"))
            .boxed(),
        Requirement::NotIn(k, vs) => (set(&vs), ws())
            .prop_map(move |(s, b)| format!("{k} notin{b}{s}"))
            .boxed(),
        Requirement::Exists(k) => Just(k).boxed(),
        Requirement::DoesNotExist(k) => ws().prop_map(move |a| format!("!{a}{k}")).boxed(),
    }
}

/// Requirements and one way of writing them.
fn written_selector() -> impl Strategy<Value = (Vec<Requirement>, String)> {
    prop::collection::vec(requirement(), 0..5).prop_flat_map(|reqs| {
        let parts: Vec<_> = reqs.iter().map(render).collect();
        (Just(reqs), parts, ws(), ws()).prop_map(|(reqs, parts, a, b)| {
            let text = format!("{a}{}{b}", parts.join(&format!("{b},{a}")));
            (reqs, text)
        })
    })
}

/// Labels drawn from the same small pools the selectors use, so requirements often hold.
fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    let key = prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "web", "db", "x.y", "v1", "example.com/key"])
            .prop_map(String::from),
        1 => label_key(),
    ];
    prop::collection::btree_map(key, label_value(), 0..6)
}

/// The API server's semantics, stated once more from its documentation: `!=` and `notin` hold
/// for an absent label, `in` and `=` need it present.
fn reference_matches(reqs: &[Requirement], labels: &BTreeMap<String, String>) -> bool {
    reqs.iter().all(|r| match r {
        Requirement::Equals(k, v) => labels.get(k) == Some(v),
        Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
        Requirement::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
        Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|x| vs.contains(x)),
        Requirement::Exists(k) => labels.contains_key(k),
        Requirement::DoesNotExist(k) => !labels.contains_key(k),
    })
}

// The default of 256 cases each keeps this fast; `PROPTEST_CASES=100000` searches harder.
proptest! {
    /// No text panics the parser. What it accepts survives `Display` unchanged; what it refuses
    /// is named whole in the error, with a reason that points at the bad part.
    #[test]
    fn any_text_parses_or_is_refused_with_a_location(text in selectorish()) {
        match LabelSelector::parse(&text) {
            Ok(s) => {
                let again = LabelSelector::parse(&s.to_string());
                prop_assert_eq!(again.as_ref(), Ok(&s), "display: `{}`", s);
            }
            Err(e) => {
                prop_assert_eq!(&e.selector, &text);
                prop_assert!(e.to_string().contains(&format!("`{text}`")), "{}", e);
                prop_assert!(locates(&e.reason.to_string(), &text), "`{}`: {}", text, e.reason);
            }
        }
    }

    /// Every selector the grammar allows parses to the requirements it was written from, and
    /// prints to text that parses back to the same selector.
    #[test]
    fn grammar_selectors_parse_to_what_was_written((reqs, text) in written_selector()) {
        let s = LabelSelector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(s.requirements(), &reqs[..], "`{}`", text);
        prop_assert_eq!(LabelSelector::parse(&s.to_string()), Ok(s.clone()));
    }

    /// `matches` agrees with the reference model on random label sets.
    #[test]
    fn matches_agrees_with_the_reference((reqs, text) in written_selector(), labels in labels()) {
        let s = LabelSelector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = s.matches(|k| labels.get(k).map(String::as_str));
        prop_assert_eq!(got, reference_matches(&reqs, &labels), "`{}` on {:?}", text, labels);
        // The index shortcut never excludes a match: every required pair is on every match.
        if got {
            for (k, v) in s.required_pairs() {
                prop_assert_eq!(labels.get(k).map(String::as_str), Some(v));
            }
        }
    }

    /// A bad key or value anywhere in an otherwise good selector is refused, and the error
    /// quotes it.
    #[test]
    fn a_bad_key_or_value_is_refused_and_quoted(
        (_, good) in written_selector(),
        bad in ("[A-Za-z0-9]{0,3}", prop::sample::select(vec!['#', '@', 'ä', '*', '~', '$', ':', '"', '`', '{', '\'']))
            .prop_map(|(ok, c)| format!("{ok}{c}")),
        as_key in any::<bool>(),
    ) {
        let piece = if as_key { format!("{bad}=x") } else { format!("k={bad}") };
        let text = if good.trim().is_empty() { piece } else { format!("{good},{piece}") };
        let e = LabelSelector::parse(&text).expect_err(&text);
        prop_assert!(e.reason.to_string().contains(&format!("`{bad}")), "`{}`: {}", text, e);
    }
}

// ---- field paths ----

/// A segment that may be written bare: `spec`, `node-name`, `$x`, `名前`.
fn bare_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_$-]{1,10}",
        "[\\p{L}\\p{N}]{1,4}",
        prop::sample::select(vec!["spec", "metadata", "items", "name"]).prop_map(String::from),
    ]
}

/// Any segment: bare, or a key such as `example.com/team` that needs brackets.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => bare_segment(),
        1 => "[^'\"]{1,12}",
        1 => "[^']{1,6}",
        1 => "[^\"]{1,6}",
    ]
}

fn is_bare(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '$'))
}

/// Segments and one way of writing them as a path.
fn written_path() -> impl Strategy<Value = (Vec<String>, String)> {
    prop::collection::vec((segment(), any::<bool>(), any::<bool>()), 1..6)
        .prop_flat_map(|segs| (Just(segs), any::<bool>()))
        .prop_map(|(segs, leading_dot)| {
            let mut text = String::from(if leading_dot { "." } else { "" });
            for (i, (s, bracket, double)) in segs.iter().enumerate() {
                if is_bare(s) && !bracket {
                    if i > 0 {
                        text.push('.');
                    }
                    text.push_str(s);
                } else {
                    let q = if (*double && !s.contains('"')) || s.contains('\'') {
                        '"'
                    } else {
                        '\''
                    };
                    text.push_str(&format!("[{q}{s}{q}]"));
                }
            }
            (segs.into_iter().map(|(s, ..)| s).collect(), text)
        })
}

fn pathish() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[a-z.\\[\\]'\" ]{0,20}"]
}

/// Any JSON value, small.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec!["spec", "metadata", "items", "name", "a"])
                    .prop_map(String::from),
                inner,
                0..4,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn scalar_count(v: &Value) -> usize {
    match v {
        Value::Null => 0,
        Value::Object(m) => m.values().map(scalar_count).sum(),
        Value::Array(items) => items.iter().map(scalar_count).sum(),
        _ => 1,
    }
}

proptest! {
    /// No text panics the field path parser; a refusal gives a reason that says where.
    #[test]
    fn any_text_is_a_path_or_refused_with_a_location(text in pathish()) {
        match text.parse::<FieldPath>() {
            Ok(p) => {
                prop_assert!(!p.segments().is_empty());
                prop_assert!(p.segments().iter().all(|s| !s.is_empty()));
                prop_assert_eq!(p.to_string(), text);
            }
            Err(reason) => prop_assert!(
                locates(&reason.to_string(), &text)
                    || reason.to_string().contains("empty")
                    || reason.to_string().contains("ends with"),
                "`{}`: {}", text, reason
            ),
        }
    }

    /// Paths written with dots and quoted brackets parse to their segments, and print as
    /// written.
    #[test]
    fn written_paths_parse_to_their_segments((segs, text) in written_path()) {
        let p: FieldPath = text.parse().map_err(|e| TestCaseError::fail(format!("`{text}`: {e}")))?;
        prop_assert_eq!(p.segments(), &segs[..], "`{}`", text);
        prop_assert_eq!(p.to_string().parse::<FieldPath>(), Ok(p.clone()));
    }

    /// `values_in` never panics, and finds no more values than the object holds scalars.
    #[test]
    fn values_in_any_json_is_bounded((_, text) in written_path(), root in json_value()) {
        let p: FieldPath = text.parse().map_err(|e: FieldPathError| TestCaseError::fail(e.to_string()))?;
        prop_assert!(p.values_in(&root).len() <= scalar_count(&root));
    }

    /// A value placed at a path is found there, through any arrays on the way.
    #[test]
    fn a_value_at_the_path_is_found(
        (segs, text) in written_path(),
        wrap in prop::collection::vec(any::<bool>(), 6),
        leaf in prop_oneof![
            "[a-z]{0,4}".prop_map(Value::String),
            any::<i32>().prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool),
        ],
    ) {
        let p: FieldPath = text.parse().map_err(|e: FieldPathError| TestCaseError::fail(e.to_string()))?;
        let expected = match &leaf {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut v = leaf;
        for (s, wrap) in segs.iter().zip(&wrap).rev() {
            v = Value::Object([(s.clone(), v)].into_iter().collect());
            if *wrap {
                // Siblings that hold nothing at the rest of the path.
                v = json!([null, v, 7, "s"]);
            }
        }
        prop_assert_eq!(p.values_in(&v), vec![expected]);
    }
}
