//! Property tests over `informant.toml`: no text panics the parser, and every refusal names the
//! file and a field. Documents come from mutating a good config (see
//! [`informant_manifest::mutate`]), so the properties keep holding as the file gains keys; a
//! small model of the schema says where it can that a mutation must be refused.

use std::path::Path;

use informant_manifest::mutate::{self, Applied, Site};
use proptest::prelude::*;
use toml::{Table, Value};

const PATH: &str = "/etc/informant.toml";

const GOOD: &str = r#"
operator-plugins = true
[limits]
default-memory-mib = 32
max-memory-mib = 256
default-deadline-ms = 200
max-deadline-ms = 10000
[tenants.team-a]
namespaces = ["team-a", "team-a-*"]
resources = ["v1/ConfigMap", "apps/v1/*", "*"]
cluster-scoped = false
max-plugins = 2
max-memory-mib = 64
max-deadline-ms = 500
events-per-second = 100
[tenants.ops]
namespaces = ["ops"]
cluster-scoped = true
"#;

fn parse(text: &str) -> Result<(), String> {
    super::parse(text, Path::new(PATH))
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The start of a text for a failure message: some are 100 KB.
fn head(text: &str) -> &str {
    &text[..text.floor_char_boundary(600)]
}

fn base() -> Table {
    toml::from_str(GOOD).expect("GOOD is TOML")
}

fn positive(v: &Value) -> bool {
    v.as_integer()
        .is_some_and(|n| (1..=i64::from(u32::MAX)).contains(&n))
}

fn tenant_name_ok(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

/// Whether the schema says this applied mutation must be refused, whatever else the document
/// holds: a value of the wrong type or out of range, an unknown key, a bad tenant name. Values
/// in range may still be refused against other keys (ceilings, overlaps), so nothing here says
/// "must accept".
fn must_refuse(a: &Applied) -> bool {
    let Some(v) = &a.value else { return false };
    let keys = a.site.keys();
    let in_array = matches!(a.site.0.last(), Some(mutate::Seg::Index(_)));
    match keys.as_slice() {
        ["operator-plugins"] => !v.is_bool(),
        ["limits" | "tenants"] => !v.is_table(),
        [
            "limits",
            "default-memory-mib" | "max-memory-mib" | "default-deadline-ms" | "max-deadline-ms",
        ] => !positive(v),
        ["tenants", name, ..] if !tenant_name_ok(name) => true,
        ["tenants", _] => !v.is_table(),
        ["tenants", _, "namespaces" | "resources"] if in_array => !v.is_str(),
        ["tenants", _, "namespaces" | "resources"] => !v.is_array(),
        ["tenants", _, "cluster-scoped"] => !v.is_bool(),
        [
            "tenants",
            _,
            "max-plugins" | "max-memory-mib" | "max-deadline-ms" | "events-per-second",
        ] => !positive(v),
        // Keys this model does not know: `mutate::key()` makes names no schema has.
        _ => true,
    }
}

/// Whether a refusal names a field: one a mutation touched, or one the document now holds (a
/// key refused against another, such as a default above its ceiling).
fn names_a_field(e: &str, applied: &[Applied], text: &str) -> bool {
    if applied.iter().any(|a| mutate::names_applied(e, a)) {
        return true;
    }
    let doc: Table = toml::from_str(text).expect("the mutated document is TOML");
    mutate::sites(&doc).iter().any(|s| mutate::names(e, s))
}

proptest! {
    /// Any text: no panic, and a refusal names the file and says where in it.
    #[test]
    fn any_text_is_parsed_or_refused_naming_the_file(text in any::<String>()) {
        if let Err(e) = parse(&text) {
            prop_assert!(e.starts_with(&format!("config `{PATH}`: ")), "{}", head(&e));
        }
    }

    /// One mutation of a good config: what the schema rules out is refused, and a refusal names
    /// the file and the field.
    #[test]
    fn one_mutation_is_refused_when_the_schema_says(m in mutate::mutation()) {
        let (text, applied) = mutate::mutated(&base(), std::slice::from_ref(&m));
        let [a] = applied.as_slice() else {
            return Err(TestCaseError::reject("no site for the mutation"));
        };
        match parse(&text) {
            Ok(()) => prop_assert!(!must_refuse(a), "{} accepted:\n{}", a.site, head(&text)),
            Err(e) => {
                prop_assert!(e.starts_with(&format!("config `{PATH}`: ")), "{}", head(&e));
                prop_assert!(
                    names_a_field(&e, &applied, &text),
                    "{} not named: {}\n{}", a.site, head(&e), head(&text)
                );
            }
        }
    }

    /// Several mutations: no panic, and a refusal names a field.
    #[test]
    fn refusals_name_a_field(ms in prop::collection::vec(mutate::mutation(), 1..5)) {
        let (text, applied) = mutate::mutated(&base(), &ms);
        if let Err(e) = parse(&text) {
            prop_assert!(e.starts_with(&format!("config `{PATH}`: ")), "{}", head(&e));
            prop_assert!(
                names_a_field(&e, &applied, &text),
                "none of {:?} named: {}\n{}",
                applied.iter().map(|a| a.site.to_string()).collect::<Vec<_>>(),
                head(&e),
                head(&text)
            );
        }
    }
}

#[test]
fn the_base_document_is_a_good_config() {
    parse(GOOD).unwrap();
    let (text, _) = mutate::mutated(&base(), &[]);
    parse(&text).unwrap();
    let wrong = Applied {
        site: Site(vec![
            mutate::Seg::Key("tenants".into()),
            mutate::Seg::Key("team-a".into()),
            mutate::Seg::Key("max-plugins".into()),
        ]),
        value: Some(Value::Integer(0)),
    };
    assert!(must_refuse(&wrong));
}
