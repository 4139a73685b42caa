//! Property tests over the manifest parser: no text panics it, and every refusal names the
//! file and the field. Documents come from mutating a valid manifest (see [`crate::mutate`]),
//! and a small model of the schema says, where it can, whether the result must be accepted or
//! refused.

use std::path::Path;

use proptest::prelude::*;
use toml::Value;

use crate::mutate::{self, Applied, Seg};
use crate::{BUILTIN_INDEXES, FieldPath, LabelSelector, Manifest};

const PATH: &str = "plugins/demo.toml";

const GOOD: &str = r#"
description = "demo"
resync-seconds = 30
[limits]
memory-mib = 16
deadline-ms = 50
[[watch]]
api-version = "apps/v1"
kind = "Deployment"
namespace = "default"
label-selector = "app in (web,db)"
[watch.indexes]
by-node = "spec.nodeName"
by-team = 'metadata.annotations["example.com/team"]'
[[watch]]
api-version = "v1"
kind = "ConfigMap"
[config]
ignore-status = true
nested = { list = [1, "two"] }
"#;

/// The start of a document for a failure message: some are 100 KB.
fn head(text: &str) -> &str {
    &text[..text.floor_char_boundary(600)]
}

fn parse(text: &str) -> Result<Manifest, String> {
    Manifest::parse(text, Path::new(PATH)).map_err(|e| e.to_string())
}

/// What the schema says of a document after one mutation.
#[derive(Debug, PartialEq)]
enum Expect {
    Accept,
    Refuse,
    /// Depends on more than this model knows.
    Either,
}

fn verdict(ok: bool) -> Expect {
    if ok { Expect::Accept } else { Expect::Refuse }
}

/// A namespace name as the API server takes it: a DNS-1123 label.
fn namespace_ok(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

fn int_in(v: &Value, lo: i64, hi: i64) -> Expect {
    verdict(v.as_integer().is_some_and(|n| (lo..=hi).contains(&n)))
}

fn string_with(v: &Value, ok: impl Fn(&str) -> bool) -> Expect {
    verdict(v.as_str().is_some_and(ok))
}

/// The schema's answer for one applied mutation of [`GOOD`].
fn expect(a: &Applied) -> Expect {
    let keys = a.site.keys();
    let Some(v) = &a.value else {
        // Removed: the required fields are refused, removing a watch may leave none.
        return match (keys.as_slice(), a.site.0.last()) {
            (["watch"], Some(Seg::Index(_))) => Expect::Either,
            (["watch"], _) | (["watch", "api-version" | "kind"], _) => Expect::Refuse,
            _ => Expect::Accept,
        };
    };
    match keys.as_slice() {
        // Any value, as long as every string in it is a literal or a well-formed reference.
        ["config", _, ..] => verdict(config_strings_ok(v)),
        ["config"] => verdict(v.is_table()),
        ["description"] => verdict(v.is_str()),
        ["resync-seconds"] => int_in(v, 0, i64::MAX),
        ["limits"] | ["retry"] | ["watch", "indexes"] => {
            if v.is_table() {
                Expect::Either
            } else {
                Expect::Refuse
            }
        }
        ["limits", "memory-mib" | "deadline-ms"]
        | ["retry", "initial-backoff-ms" | "max-backoff-ms"] => int_in(v, 1, u32::MAX.into()),
        ["retry", "max-attempts"] => int_in(v, 0, u32::MAX.into()),
        ["retry", "dead-letter"] => string_with(v, |s| matches!(s, "exhausted" | "failed")),
        ["watch"] if matches!(a.site.0.last(), Some(Seg::Index(_))) => {
            if v.is_table() {
                Expect::Either
            } else {
                Expect::Refuse
            }
        }
        ["watch"] => {
            if v.is_array() {
                Expect::Either
            } else {
                Expect::Refuse
            }
        }
        ["watch", "api-version"] => {
            if v.is_str() {
                Expect::Either
            } else {
                Expect::Refuse
            }
        }
        // `*` alone is a wildcard (under the good manifest's group version); a partial one is
        // refused.
        ["watch", "kind"] => string_with(v, |s| !s.is_empty() && (s == "*" || !s.contains('*'))),
        ["watch", "namespace"] => string_with(v, namespace_ok),
        ["watch", "label-selector"] => string_with(v, |s| LabelSelector::parse(s).is_ok()),
        ["watch", "indexes", name] => {
            let name_ok = !name.is_empty() && !BUILTIN_INDEXES.contains(name);
            string_with(v, |s| name_ok && s.parse::<FieldPath>().is_ok())
        }
        // `tenant` and every key the schema does not know.
        _ => Expect::Refuse,
    }
}

/// Whether every string in `v` (nested ones too) is one `[config]` accepts.
fn config_strings_ok(v: &toml::Value) -> bool {
    match v {
        toml::Value::String(s) => crate::config_ref::parse(s).is_ok(),
        toml::Value::Array(a) => a.iter().all(config_strings_ok),
        toml::Value::Table(t) => t.values().all(config_strings_ok),
        _ => true,
    }
}

fn base() -> toml::Table {
    toml::from_str(GOOD).expect("GOOD is TOML")
}

/// Text near a manifest: the good one with a piece cut out or pasted in.
fn spliced() -> impl Strategy<Value = String> {
    let len = GOOD.len();
    (0..len, 0..len, mutate::string()).prop_map(move |(a, b, paste)| {
        let (a, b) = (a.min(b), a.max(b));
        let (a, b) = (GOOD.floor_char_boundary(a), GOOD.floor_char_boundary(b));
        let cut = b - a <= 16;
        format!(
            "{}{}{}",
            &GOOD[..a],
            if cut { "" } else { &paste },
            &GOOD[b..]
        )
    })
}

proptest! {
    /// Any text: no panic, and a refusal names the file and says where in it.
    #[test]
    fn any_text_is_parsed_or_refused_naming_the_file(text in prop_oneof![any::<String>(), spliced()]) {
        if let Err(e) = parse(&text) {
            prop_assert!(e.starts_with(&format!("manifest `{PATH}`: ")), "{}", head(&e));
            prop_assert!(
                e.contains("line ") || e.contains("field `") || e.contains("missing field `"),
                "`{}` -> {}", head(&text), head(&e)
            );
        }
    }

    /// One mutation of a good manifest: accepted or refused as the schema says, and a refusal
    /// names the file and the field.
    #[test]
    fn one_mutation_is_judged_as_the_schema_says(m in mutate::mutation()) {
        let (text, applied) = mutate::mutated(&base(), std::slice::from_ref(&m));
        let [a] = applied.as_slice() else {
            return Err(TestCaseError::reject("no site for the mutation"));
        };
        let expected = expect(a);
        match parse(&text) {
            Ok(_) => prop_assert_ne!(expected, Expect::Refuse, "{} accepted:\n{}", a.site, head(&text)),
            Err(e) => {
                prop_assert_ne!(expected, Expect::Accept, "{}: {}\n{}", a.site, head(&e), head(&text));
                prop_assert!(e.starts_with(&format!("manifest `{PATH}`: ")), "{}", head(&e));
                prop_assert!(mutate::names_applied(&e, a), "{} not named: {}\n{}", a.site, head(&e), head(&text));
            }
        }
    }

    /// Several mutations: no panic, and a refusal names the field of one of them.
    #[test]
    fn refusals_name_a_mutated_field(ms in prop::collection::vec(mutate::mutation(), 1..5)) {
        let (text, applied) = mutate::mutated(&base(), &ms);
        if let Err(e) = parse(&text) {
            prop_assert!(e.starts_with(&format!("manifest `{PATH}`: ")), "{}", head(&e));
            prop_assert!(
                applied.iter().any(|a| mutate::names_applied(&e, a)),
                "none of {:?} named: {}\n{}",
                applied.iter().map(|a| a.site.to_string()).collect::<Vec<_>>(), head(&e), head(&text)
            );
        }
    }
}

#[test]
fn the_base_document_is_a_good_manifest() {
    let m = parse(GOOD).unwrap();
    assert_eq!(m.watch.len(), 2);
    let (text, applied) = mutate::mutated(&base(), &[]);
    assert!(applied.is_empty());
    assert_eq!(parse(&text).unwrap(), m);
}

#[test]
fn the_schema_model_sees_the_obvious() {
    let ns = Applied {
        site: mutate::Site(vec![
            Seg::Key("watch".into()),
            Seg::Index(0),
            Seg::Key("namespace".into()),
        ]),
        value: Some(Value::String("Not A Namespace".into())),
    };
    assert_eq!(expect(&ns), Expect::Refuse);
    assert!(mutate::names(
        "field `watch[0].namespace`: invalid",
        &ns.site
    ));
    assert!(!mutate::names("field `watch[0].namespaces`: x", &ns.site));
}
