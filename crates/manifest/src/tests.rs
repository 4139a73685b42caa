use super::*;

fn parse(text: &str) -> Result<Manifest, String> {
    Manifest::parse(text, Path::new("plugins/demo.toml")).map_err(|e| e.to_string())
}

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
[config]
ignore-status = true
"#;

const POD_WATCH: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n";

#[test]
fn manifest_version_1_is_read_and_the_default() {
    assert_eq!(
        parse(POD_WATCH).unwrap().manifest_version,
        version::FormatVersion
    );
    let m = parse(&format!("manifest-version = 1\n{POD_WATCH}")).unwrap();
    assert_eq!(m.manifest_version, version::FormatVersion);
}

#[test]
fn other_manifest_versions_are_refused_naming_file_field_and_reason() {
    for (value, reason) in [
        ("2", "version 2 is not one this Informant reads"),
        ("-1", "version -1 is not one this Informant reads"),
        ("0", "version 0 is not one this Informant reads"),
        ("\"1\"", "must be the integer 1, not the string \"1\""),
        ("1.0", "expected the integer 1"),
    ] {
        let err = parse(&format!("manifest-version = {value}\n{POD_WATCH}")).unwrap_err();
        assert!(
            err.starts_with(
                "manifest `plugins/demo.toml`: line 1, column 20: field `manifest-version`: "
            ) && err.contains(reason),
            "{value}: {err}"
        );
    }
}

/// The book's manifest reference lists every key the parser reads and no other, and its
/// complete example is a manifest this parser accepts.
#[test]
fn the_books_manifest_reference_matches_the_parser() {
    const PAGE: &str = include_str!("../../../docs/src/manifest.md");
    let mut code = std::collections::BTreeSet::new();
    for key in keys::of::<Manifest>().unwrap() {
        let nested = match *key {
            // Read only to refuse it: not a key a manifest may have.
            "tenant" => continue,
            "limits" => keys::of::<Limits>(),
            "retry" => keys::of::<Retry>(),
            "watch" => keys::of::<Watch>(),
            "write" => keys::of::<Write>(),
            "schedule" => keys::of::<Schedule>(),
            "admit" => keys::of::<crate::Admit>(),
            _ => None,
        };
        code.insert(key.to_string());
        for field in nested.into_iter().flatten() {
            code.insert(format!("{key}.{field}"));
        }
    }
    let book: std::collections::BTreeSet<String> =
        keys::table_column(PAGE, "## Keys").into_iter().collect();
    let missing: Vec<_> = code.difference(&book).collect();
    let extra: Vec<_> = book.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/src/manifest.md's `## Keys` table: rows missing for {missing:?}; rows for nothing the code has: {extra:?}"
    );
    let example = PAGE
        .split_once("## Example")
        .and_then(|(_, rest)| rest.split_once("```toml\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a ```toml block under `## Example`")
        .0;
    parse(example).unwrap();
}

#[test]
fn parses_a_full_manifest() {
    let m = parse(GOOD).unwrap();
    assert_eq!(m.resync_period(), Some(Duration::from_secs(30)));
    assert_eq!(m.limits.memory_mib, Some(16));
    assert_eq!(m.watch[0].api_version.split(), ("apps", "v1"));
    assert_eq!(m.watch[0].field_indexes().next().unwrap().0, "by-node");
    assert_eq!(m.config_json(), r#"{"ignore-status":true}"#);
}

#[test]
fn a_watch_covers_its_namespaces() {
    let m = parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"b\"]\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"c\"\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
        )
        .unwrap();
    assert_eq!(m.watch[0].scopes(), [Some("a"), Some("b")]);
    assert_eq!(m.watch[1].scopes(), [Some("c")]);
    assert_eq!(m.watch[2].scopes(), [None]);
}

#[test]
fn a_wildcard_watch_covers_what_its_pattern_names_minus_excludes() {
    let m = parse(
            "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"events.k8s.io/Event\"]\n[[watch]]\napi-version = \"example.com/*\"\nkind = \"*\"\n[[watch]]\napi-version = \"apps/v1\"\nkind = \"*\"\nnamespaces = [\"a\"]\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
        )
        .unwrap();
    let [all, group, gv, pod] = &m.watch[..] else {
        panic!()
    };
    assert!(all.covers("", "v1", "Pod", true));
    assert!(!all.covers("", "v1", "Event", true));
    assert!(!all.covers("events.k8s.io", "v1", "Event", true));
    assert!(!all.covers("apps", "v1beta1", "Deployment", false));
    assert!(group.covers("example.com", "v1", "Widget", true));
    assert!(!group.covers("other.io", "v1", "Widget", true));
    assert!(gv.covers("apps", "v1", "Deployment", false));
    assert!(!gv.covers("batch", "v1", "Job", true));
    assert!(!pod.is_wildcard() && !pod.covers("", "v1", "Pod", true));
    assert_eq!(pod.kind_pattern(), None);
}

#[test]
fn config_references_are_resolved_and_escapes_undone() {
    let m = parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\nplain = \"$${env:X}\"\nn = 1\n[config.slack]\nurl = \"${env:SLACK}\"\nkeys = [\"${file:/run/k}\"]\n",
        )
        .unwrap();
    let json = m
        .config_json_resolved(|r| Ok::<_, String>(format!("<{r}>")))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"plain": "${env:X}", "n": 1,
                "slack": {"url": "<${env:SLACK}>", "keys": ["<${file:/run/k}>"]}})
    );
    let refused = m
        .config_json_resolved(|r| match r {
            ConfigRef::Env(_) => Err(format!("`{r}`: not set")),
            ConfigRef::File(_) => Ok(String::new()),
        })
        .unwrap_err();
    assert_eq!(
        (refused.field, refused.reason.to_string()),
        ("config.slack.url".into(), "`${env:SLACK}`: not set".into())
    );
}

#[test]
fn config_dates_reach_the_plugin_as_text() {
    let m = parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\nsince = 1979-05-27T07:32:00Z\nday = 1979-05-27\nnested = [{ at = 07:32:00 }]\n",
        )
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&m.config_json()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"since": "1979-05-27T07:32:00Z", "day": "1979-05-27",
                "nested": [{"at": "07:32:00"}]})
    );
}

#[test]
fn errors_name_file_field_and_position() {
    for (text, needles) in [
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\ncolour = \"red\"\n",
            &["plugins/demo.toml", "line 4", "unknown field `colour`"][..],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nlabel-selector = \"app in (web\"\n",
            &["line 4", "invalid label selector `app in (web`"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team in (a,b\"\n",
            &[
                "plugins/demo.toml",
                "line 4",
                "namespace-selector",
                "invalid label selector `team in (a,b`",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team=a,=b\"\n",
            &["line 4", "namespace-selector", "invalid label selector"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team=a\"\nnamespace = \"a\"\n",
            &[
                "field `watch[0].namespace-selector`",
                "either `namespace-selector` or namespaces by name",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team=a\"\nnamespaces = [\"a\"]\n",
            &["field `watch[0].namespace-selector`", "not both"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"*\"\nnamespace-selector = \"team=a\"\n",
            &["field `watch[0].namespace-selector`", "wildcard"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \" \"\n",
            &["field `watch[0].namespace-selector`", "every namespace"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"\"\n",
            &[
                "line 4",
                "field `watch[0].namespace`",
                "invalid namespace: `` is not a namespace name: it is empty",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"Team_A\"\n",
            &[
                "field `watch[0].namespace`",
                "invalid namespace: `Team_A` is not a namespace name",
            ],
        ),
        (
            "[[watch]]\napi-version = \"a/b/c\"\nkind = \"Pod\"\n",
            &["line 2", "invalid api-version `a/b/c`"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[watch.indexes]\nx = \"spec..a\"\n",
            &["line 5", "invalid field path `spec..a`"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[watch.indexes]\nlabel = \"spec.a\"\n",
            &["watch[0].indexes", "built-in"],
        ),
        (
            "limits = [1, 1]\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
            &["line 1", "field `limits`", "expected a table"],
        ),
        (
            "watch = [[\"v1\", \"Pod\", \"default\", \"app=x\", {}]]\n",
            &["field `watch[0]`", "expected a table"],
        ),
        (
            "[limits]\nmemory-mib = -1\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
            &["line 2", "field `limits.memory-mib`", "expected u32"],
        ),
        (
            "[limits]\ndeadline-ms = 0\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
            &["limits.deadline-ms", "greater than 0"],
        ),
        (
            "tenant = \"b\"\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
            &["field `tenant`", "the directory it sits in"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"team-a-x/../team-b\"\n",
            &["field `watch[0].namespace`", "not a namespace name", "`/`"],
        ),
        (
            "config = 1979-05-27T07:32:00Z\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
            &["line 1", "field `config`", "datetime, expected a table"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"B\"]\n",
            &[
                "line 4",
                "field `watch[0].namespaces`",
                "invalid namespace at [1]: `B` is not a namespace name",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"b\", \"a\"]\n",
            &[
                "line 4",
                "field `watch[0].namespaces`",
                "namespace `a` is listed twice",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = []\n",
            &[
                "line 4",
                "field `watch[0].namespaces`",
                "at least one namespace",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a/../b\"]\n",
            &["field `watch[0].namespaces`", "not a namespace name"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = \"a\"\n",
            &[
                "line 4",
                "field `watch[0].namespaces`",
                "expected a sequence",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"a\"\nnamespaces = [\"b\"]\n",
            &[
                "field `watch[0].namespaces`",
                "either `namespace` or `namespaces`, not both",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config.slack]\nurl = \"${env:}\"\n",
            &[
                "plugins/demo.toml",
                "field `config.slack.url`",
                "`${env:}`",
                "not an environment variable name",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\nkeys = [\"ok\", \"${file:keys/a}\"]\n",
            &["field `config.keys[1]`", "must be absolute"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\njq-filter = \"def f: f; f\"\n",
            &[
                "plugins/demo.toml",
                "line 4",
                "field `watch[0].jq-filter`",
                "invalid jq filter",
                "`def` is not allowed",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\njq-filter = \".spec |\"\n",
            &[
                "line 4",
                "field `watch[0].jq-filter`",
                "is not a jq program",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nignore = [\"status..x\"]\n",
            &["line 4", "field `watch[0].ignore[0]`", "invalid field path"],
        ),
        (
            "[[watch]]\napi-version = \"*\"\nkind = \"Pod\"\n",
            &[
                "plugins/demo.toml",
                "field `watch[0].kind`",
                "api-version `*` is a wildcard, so kind must be `*`",
            ],
        ),
        (
            "[[watch]]\napi-version = \"example.com/*\"\nkind = \"Widget\"\n",
            &["field `watch[0].kind`", "so kind must be `*`"],
        ),
        (
            "[[watch]]\napi-version = \"*\"\nkind = \"Dep*\"\n",
            &[
                "field `watch[0].kind`",
                "partial wildcards are not supported",
            ],
        ),
        (
            "[[watch]]\napi-version = \"*/v1\"\nkind = \"*\"\n",
            &[
                "line 2",
                "field `watch[0].api-version`",
                "invalid api-version `*/v1`",
            ],
        ),
        (
            "[[watch]]\napi-version = \"ex*.com/*\"\nkind = \"*\"\n",
            &["line 2", "invalid api-version `ex*.com/*`"],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nexclude = [\"v1/Event\"]\n",
            &["field `watch[0].exclude`", "only a wildcard watch"],
        ),
        (
            "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"Lease\"]\n",
            &[
                "line 4",
                "field `watch[0].exclude[1]`",
                "invalid exclude entry `Lease`",
            ],
        ),
        (
            "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"v1/Event\"]\n",
            &["field `watch[0].exclude[1]`", "listed twice"],
        ),
        (
            "[[watch]]\napi-version = \"example.com/*\"\nkind = \"*\"\nexclude = [\"v1/Event\"]\n",
            &[
                "field `watch[0].exclude[0]`",
                "`v1/Event` is not covered by api-version `example.com/*`",
            ],
        ),
        (
            "[[watch]]\napi-version = \"apps/v1\"\nkind = \"*\"\nexclude = [\"apps/v1beta1/Deployment\"]\n",
            &[
                "field `watch[0].exclude[0]`",
                "not covered by api-version `apps/v1`",
            ],
        ),
        (
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[[schedule]]\nname = \"a\"\nevery = \"1s\"\n[[schedule]]\nname = \"a\"\ncron = \"* * * * *\"\n",
            &[
                "plugins/demo.toml",
                "field `schedule[1].name`",
                "schedule `a` is already declared by schedule[0]",
            ],
        ),
        (
            "description = \"x\"\n",
            &["at least one [[watch]] (or [[admit]]) table is required"],
        ),
        ("watch = []\n", &["at least one [[watch]]"]),
        ("[[watch]\n", &["line 1"]),
    ] {
        let err = parse(text).unwrap_err();
        for n in needles {
            assert!(err.contains(n), "`{text}` -> `{err}` lacks `{n}`");
        }
    }
}

const ADMIT: &str = r#"
[[watch]]
api-version = "v1"
kind = "Namespace"

[[admit]]
name = "images"
api-version = "apps/v1"
kind = "Deployment"
mode = "mutate"
failure-policy = "ignore"
timeout-ms = 2500
timeout-seconds = 3
namespace-selector = "team"
"#;

#[test]
fn admit_tables_parse_with_their_defaults() {
    use crate::admit::{FailurePolicy, Mode, Operation};
    let m = parse(ADMIT).unwrap();
    let hook = &m.admit[0];
    assert_eq!(hook.name.as_str(), "images");
    assert_eq!(hook.operations, [Operation::Create, Operation::Update]);
    assert_eq!(
        (hook.mode, hook.failure_policy),
        (Mode::Mutate, FailurePolicy::Ignore)
    );
    assert_eq!((hook.timeout_ms(), hook.timeout_seconds()), (2500, 3));
    let only = parse("[[admit]]\nname = \"a\"\napi-version = \"v1\"\nkind = \"Pod\"\n").unwrap();
    assert!(
        only.watch.is_empty(),
        "a plugin that only admits needs no watch"
    );
    assert_eq!(
        (only.admit[0].timeout_ms(), only.admit[0].timeout_seconds()),
        (1000, 10)
    );
}

#[test]
fn admit_tables_are_refused_naming_the_field() {
    let refused = |edit: &dyn Fn(&str) -> String| match parse(&edit(ADMIT)) {
        Ok(_) => panic!("accepted: {}", edit(ADMIT)),
        Err(e) => e.to_string(),
    };
    for (edit, expect) in [
        (
            &|s: &str| s.replace("timeout-ms = 2500", "timeout-ms = 2501"),
            &["admit[0].timeout-ms", "leaves no room", "at most 2500 ms"][..],
        ),
        (
            &|s: &str| s.replace("timeout-seconds = 3", "timeout-seconds = 31"),
            &["admit[0].timeout-seconds", "1 to 30"],
        ),
        (
            &|s: &str| s.replace("timeout-ms = 2500", "timeout-ms = 0"),
            &["admit[0].timeout-ms"],
        ),
        (
            &|s: &str| s.replace("apps/v1", "apps/*"),
            &["admit[0].api-version"],
        ),
        (
            &|s: &str| s.replace("kind = \"Deployment\"", "kind = \"Deploy ment\""),
            &["admit[0].kind"],
        ),
        (
            &|s: &str| s.replace("mode = \"mutate\"", "mode = \"patch\""),
            &["mode", "unknown variant"],
        ),
        (
            &|s: &str| s.replace("name = \"images\"", "name = \"../x\""),
            &["name", "DNS label"],
        ),
        (
            &|s: &str| format!("{s}operations = []\n"),
            &["operations", "at least one"],
        ),
        (
            &|s: &str| format!("{s}operations = [\"create\", \"create\"]\n"),
            &["listed twice"],
        ),
        (
            &|s: &str| format!("{s}object-selector = \"a in (\"\n"),
            &["object-selector"],
        ),
        (
            &|s: &str| {
                format!("{s}\n[[admit]]\nname = \"images\"\napi-version = \"v1\"\nkind = \"Pod\"\n")
            },
            &["admit[1].name", "already the name of admit[0]"],
        ),
    ] as [(&dyn Fn(&str) -> String, &[&str]); 11]
    {
        let message = refused(edit);
        for part in expect {
            assert!(message.contains(part), "{part:?} not in: {message}");
        }
    }
}
