//! Writes a hostile tenant would try: names that carry a query or a fragment, look-alike and
//! encoded spellings, a dry-run host asked to persist, Namespaces of other tenants, and a write
//! grant used to read. Each is refused before any request leaves the host, or comes back
//! without what the tenant may not see; other tenants' events keep flowing.

use std::path::Path;

use informant_runtime::config;
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::create_namespaces;
use informant_tests::plugins::PluginEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use serde_json::{Value, json};

use crate::writes::{self, audited, err_kind, go, id, results};

/// [`writes::writer`] with `writes` given as JSON objects (see the hostile plugin's docs).
fn writer(tag: &str, watch_ns: &str, declared: &str, writes: &[Value]) -> String {
    let writes: Vec<String> = writes.iter().map(toml_inline).collect();
    let writes: Vec<&str> = writes.iter().map(String::as_str).collect();
    writes::writer(tag, watch_ns, declared, &writes)
}

/// A JSON value as a TOML inline value (JSON strings are valid TOML basic strings).
fn toml_inline(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{} = {}", Value::from(k.as_str()), toml_inline(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// Names that must never reach a request: a query, a fragment, encoded and look-alike
/// spellings, trailing spaces, a subresource, a parent.
const HOSTILE_NAMES: &[&str] = &[
    "a-cm?dryRun=All&x=",
    "a-cm?fieldManager=kubectl-edit&x=",
    "a-cm#",
    "a-cm&x=1",
    "a-cm%3F",
    "a-cm%2Fstatus",
    "a-cm/status",
    "a-cm ",
    " a-cm",
    "a\u{2010}cm",
    "a-\u{0441}m",
    "A-CM",
    "..",
    "a-cm\n",
];

/// Every verb on `name` in `ns`, and a create naming it in the body.
fn every_verb(ns: &str, name: &str) -> Vec<Value> {
    vec![
        json!({"op": "delete", "namespace": ns, "name": name}),
        json!({"op": "patch", "namespace": ns, "name": name,
               "patch": {"metadata": {"labels": {"pwned": "1"}}}}),
        json!({"op": "apply", "namespace": ns, "name": name,
               "object": {"data": {"pwned": "1"}}}),
        json!({"op": "status", "namespace": ns, "name": name, "object": {}}),
        json!({"op": "create", "namespace": ns,
               "object": {"metadata": {"name": name}, "data": {"pwned": "1"}}}),
    ]
}

/// Installs a plugin echoing the ConfigMaps of namespace `bystander`.
fn install_bystander(env: &PluginEnv) {
    create_namespaces(&env.server, &["bystander"]);
    env.install(
        None,
        "bystander",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"bystander\"\n[config]\nmode = \"echo\"\ntag = \"by\"\n",
    );
}

/// The bystander gets every one of five new ConfigMaps while the hostile writes run.
async fn bystander_keeps_getting_events(env: &PluginEnv) {
    for i in 0..5 {
        env.server
            .create(go("bystander", &format!("b{i}")))
            .unwrap();
    }
    env.logs
        .wait_until("the bystander gets its events", || {
            let keys = env.logs.keys_of("bystander", "by");
            (0..5).all(|i| keys.contains(&format!("bystander/b{i}")))
        })
        .await;
}

/// Loads an operator plugin making `writes` (every ConfigMap verb declared, in namespace `w`)
/// beside the bystander, sets it off with `w/go-1`, and returns its results once the
/// bystander has had its events meanwhile.
async fn run_operator_writer(env: &PluginEnv, tag: &str, writes: &[Value]) -> Vec<Value> {
    env.install(
        None,
        "writer",
        "hostile",
        &writer(tag, "w", ALL_VERBS, writes),
    );
    install_bystander(env);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server.create(go("w", "go-1")).unwrap();
    bystander_keeps_getting_events(env).await;
    results(env, "writer", "w/go-1").await
}

const ALL_VERBS: &str = "[[write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"create\", \"apply\", \"patch\", \"delete\", \"update-status\"]\n";

#[tokio::test]
async fn names_with_a_query_a_fragment_or_another_spelling_never_reach_a_request() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["w"]);
    env.server.create(go("w", "a-cm")).unwrap();
    let mut writes: Vec<Value> = HOSTILE_NAMES
        .iter()
        .flat_map(|name| every_verb("w", name))
        .collect();
    // Last, a write that is allowed: the plugin does write, and its results are in order.
    writes.push(json!({"op": "patch", "namespace": "w", "name": "a-cm",
                       "patch": {"metadata": {"labels": {"fine": "1"}}}}));
    let results = run_operator_writer(&env, "h", &writes).await;
    assert_eq!(results.len(), writes.len());
    let (hostile, fine) = results.split_at(results.len() - 1);
    for (w, r) in writes.iter().zip(hostile) {
        assert_eq!(err_kind(r), "denied", "{w} -> {r}");
        let message = r["err"]["message"].as_str().unwrap();
        assert!(
            message.contains("is not a valid ConfigMap name"),
            "{w} -> {message}"
        );
    }
    assert_eq!(err_kind(&fine[0]), "ok", "{fine:?}");

    // One request left the host: the allowed patch, under the plugin's own field manager.
    let seen = env.server.audit();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].name.as_deref(), Some("a-cm"));
    assert_eq!(seen[0].field_manager.as_deref(), Some("informant/writer"));
    assert!(!seen[0].dry_run);
    let cms: Api<ConfigMap> = Api::namespaced(env.server.client(), "w");
    let cm = cms.get("a-cm").await.expect("a-cm survives");
    let labels = cm.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("fine").map(String::as_str), Some("1"));
    assert!(!labels.contains_key("pwned"), "{labels:?}");
    assert!(!cm.data.unwrap_or_default().contains_key("pwned"));
    let managers: Vec<String> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        !managers.iter().any(|m| m == "kubectl-edit"),
        "field ownership forged: {managers:?}"
    );
    let names: Vec<String> = cms
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["a-cm", "go-1"], "nothing else was created");
}

#[tokio::test]
async fn a_dry_run_host_persists_nothing_through_any_spelling() {
    let env = PluginEnv::start_with(HostConfig::default(), true).await;
    create_namespaces(&env.server, &["w"]);
    for name in ["dr-victim", "dr-victim2", "dr-victim3"] {
        env.server.create(go("w", name)).unwrap();
    }
    let label = json!({"metadata": {"labels": {"pwned": "1"}}});
    let writes = [
        json!({"op": "delete", "namespace": "w", "name": "dr-victim#"}),
        json!({"op": "patch", "namespace": "w", "name": "dr-victim2#", "patch": label}),
        json!({"op": "delete", "namespace": "w", "name": "dr-victim?dryRun=None"}),
        json!({"op": "delete", "namespace": "w", "name": "dr-victim%23"}),
        // Allowed spellings: sent, and dry-run all the same.
        json!({"op": "delete", "namespace": "w", "name": "dr-victim"}),
        json!({"op": "patch", "namespace": "w", "name": "dr-victim2", "patch": label}),
        json!({"op": "apply", "namespace": "w", "name": "dr-victim3", "object": {"data": {"pwned": "1"}}}),
        json!({"op": "create", "namespace": "w", "object": {"metadata": {"name": "dr-new"}}}),
    ];
    let results = run_operator_writer(&env, "t", &writes).await;
    let kinds: Vec<&str> = results.iter().map(err_kind).collect();
    assert_eq!(kinds[..4], ["denied"; 4], "{results:?}");
    assert!(
        kinds[4..].iter().all(|k| *k != "denied"),
        "allowed spellings are sent: {results:?}"
    );
    // Four writes were sent (a delete carries no field manager); every one a dry run.
    let seen = env.server.audit();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.iter().all(|r| r.dry_run), "{seen:?}");
    assert_eq!(audited(&env, "informant/writer").len(), 3);
    let cms: Api<ConfigMap> = Api::namespaced(env.server.client(), "w");
    for name in ["dr-victim", "dr-victim2", "dr-victim3"] {
        let cm = cms
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            !cm.metadata.labels.unwrap_or_default().contains_key("pwned"),
            "{name}"
        );
        assert!(!cm.data.unwrap_or_default().contains_key("pwned"), "{name}");
    }
    assert!(cms.get_opt("dr-new").await.unwrap().is_none());
}

/// team-a may see and write its own namespaces (`team-a`, `team-a-*`) and cluster-scoped
/// objects, with `kind = "*"` in v1; team-b owns `team-b`, `team-b-*`.
const NAMESPACE_TENANTS: &str = r#"
[tenants.team-a]
namespaces = ["team-a", "team-a-*"]
cluster-scoped = true
[[tenants.team-a.write]]
api-version = "v1"
kind = "*"
verbs = ["create", "patch", "delete"]
[[tenants.team-a.write]]
api-version = "v1"
kind = "Namespace"
verbs = ["create", "patch", "delete"]
cluster-scoped = true

[tenants.team-b]
namespaces = ["team-b", "team-b-*"]

[tenants.team-c]
namespaces = ["team-c"]
cluster-scoped = true
[[tenants.team-c.write]]
api-version = "v1"
kind = "*"
verbs = ["create", "patch", "delete"]
"#;

const NAMESPACE_WRITES: &str = "[[write]]\napi-version = \"v1\"\nkind = \"Namespace\"\nverbs = [\"create\", \"patch\", \"delete\"]\n";

#[tokio::test]
async fn namespace_writes_stay_inside_the_tenants_own_namespaces() {
    let cfg = config::parse(NAMESPACE_TENANTS, Path::new("informant.toml")).unwrap();
    let env = PluginEnv::start(cfg).await;
    create_namespaces(
        &env.server,
        &["team-a", "team-b", "team-b-victim", "team-c"],
    );
    env.server.create(go("team-b-victim", "kept")).unwrap();
    let label = json!({"metadata": {"labels": {"pwned-by": "team-a"}}});
    let ns = |op: &str, name: &str| -> Value {
        match op {
            "create" => json!({"op": "create", "version": "v1", "kind": "Namespace",
                               "object": {"metadata": {"name": name}}}),
            "patch" => json!({"op": "patch", "version": "v1", "kind": "Namespace",
                              "name": name, "patch": label}),
            _ => json!({"op": "delete", "version": "v1", "kind": "Namespace", "name": name}),
        }
    };
    let writes = [
        ns("patch", "team-b"),
        ns("delete", "team-b-victim"),
        ns("create", "team-b-squat"),
        ns("create", "kube-system-2"),
        ns("patch", "team-b\u{2010}x"),
        json!({"op": "create", "version": "v1", "kind": "Namespace",
               "object": {"metadata": {"generateName": "team-a-"}}}),
        ns("create", "team-a-new"),
        ns("patch", "team-a-new"),
        ns("delete", "team-a-new"),
    ];
    env.install(
        Some("team-a"),
        "nsw",
        "hostile",
        &writer("a", "team-a", NAMESPACE_WRITES, &writes),
    );
    // A grant of `kind = "*"` never covers a cluster-scoped kind: refused at load.
    env.install(
        Some("team-c"),
        "nsw",
        "hostile",
        &writer("c", "team-c", NAMESPACE_WRITES, &[]),
    );
    env.install(
        Some("team-a"),
        "nodes",
        "hostile",
        &writer(
            "n",
            "team-a",
            "[[write]]\napi-version = \"v1\"\nkind = \"Node\"\nverbs = [\"patch\"]\n",
            &[],
        ),
    );
    env.install(
        Some("team-b"),
        "echo",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"b\"\n",
    );
    let report = env.reconcile().await;
    let error = |who: PluginId| {
        report
            .errors
            .iter()
            .find(|(i, _)| *i == who)
            .map(|(_, e)| e.to_string())
            .unwrap_or_else(|| panic!("no error for {who}: {:?}", report.errors))
    };
    for who in [id("team-c", "nsw"), id("team-a", "nodes")] {
        let e = error(who.clone());
        assert!(
            e.contains("is outside tenant")
                && e.contains(
                    "writable only where the grant names it with `cluster-scoped = true`"
                ),
            "{who}: {e}"
        );
    }
    assert_eq!(report.loaded.len(), 2, "{:?}", report.loaded);

    env.server.create(go("team-a", "go-1")).unwrap();
    for i in 0..5 {
        env.server.create(go("team-b", &format!("b{i}"))).unwrap();
    }
    let results = results(&env, "nsw", "team-a/go-1").await;
    let kinds: Vec<&str> = results.iter().map(err_kind).collect();
    assert_eq!(
        kinds,
        [
            "denied", "denied", "denied", "denied", "denied", "denied", "ok", "ok", "ok"
        ],
        "{results:?}"
    );
    assert!(
        results[0]["err"]["message"]
            .as_str()
            .unwrap()
            .contains("namespace `team-b` is outside the namespaces tenant `team-a` was granted"),
        "{results:?}"
    );
    assert!(
        results[5]["err"]["message"]
            .as_str()
            .unwrap()
            .contains("generateName"),
        "{results:?}"
    );
    let namespaces: Api<Namespace> = Api::all(env.server.client());
    let team_b = namespaces.get("team-b").await.unwrap();
    assert!(
        !team_b
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("pwned-by")
    );
    assert!(namespaces.get_opt("team-b-victim").await.unwrap().is_some());
    assert!(namespaces.get_opt("team-b-squat").await.unwrap().is_none());
    let kept: Api<ConfigMap> = Api::namespaced(env.server.client(), "team-b-victim");
    assert!(kept.get_opt("kept").await.unwrap().is_some());
    // Only team-a's own Namespace was ever sent.
    let sent: Vec<(String, Option<String>)> = env
        .server
        .audit()
        .into_iter()
        .map(|r| (r.verb, r.name))
        .collect();
    let new = Some("team-a-new".to_string());
    assert_eq!(
        sent,
        [
            ("create".to_string(), None),
            ("patch".to_string(), new.clone()),
            ("delete".to_string(), new)
        ],
        "{sent:?}"
    );
    env.logs
        .wait_until("team-b's echo plugin gets its events", || {
            let keys = env.logs.keys_of("echo", "b");
            (0..5).all(|i| keys.contains(&format!("team-b/b{i}")))
        })
        .await;
}

#[tokio::test]
async fn a_write_grant_is_not_a_read_grant() {
    let cfg = config::parse(
        r#"
[tenants.team-a]
namespaces = ["team-a"]
resources = ["v1/ConfigMap"]
[[tenants.team-a.write]]
api-version = "v1"
kind = "*"
verbs = ["patch"]
[tenants.team-b]
namespaces = ["team-b"]
"#,
        Path::new("informant.toml"),
    )
    .unwrap();
    let env = PluginEnv::start(cfg).await;
    create_namespaces(&env.server, &["team-a"]);
    env.server
        .create(json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s1", "namespace": "team-a"},
                       "data": {"password": "aHVudGVyMg=="}}))
        .unwrap();
    let declared = "[[write]]\napi-version = \"v1\"\nkind = \"Secret\"\nverbs = [\"patch\"]\n\
                    [[write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"patch\"]\n";
    let writes = [
        json!({"op": "patch", "kind": "Secret", "namespace": "team-a", "name": "s1", "patch": {}}),
        json!({"op": "patch", "namespace": "team-a", "name": "$NAME", "patch": {}}),
    ];
    env.install(
        Some("team-a"),
        "peek",
        "hostile",
        &writer("p", "team-a", declared, &writes),
    );
    env.install(
        Some("team-b"),
        "echo",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"b\"\n",
    );
    create_namespaces(&env.server, &["team-b"]);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server.create(go("team-a", "go-1")).unwrap();
    for i in 0..5 {
        env.server.create(go("team-b", &format!("b{i}"))).unwrap();
    }
    env.logs
        .wait_until("team-b's echo plugin gets its events", || {
            env.logs.keys_of("echo", "b").len() == 5
        })
        .await;
    let results = results(&env, "peek", "team-a/go-1").await;
    assert_eq!(
        results.iter().map(err_kind).collect::<Vec<_>>(),
        ["ok", "ok"],
        "{results:?}"
    );
    let secret: Value = serde_json::from_str(results[0]["ok"].as_str().unwrap()).unwrap();
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["metadata"]["name"], "s1");
    assert!(secret["metadata"]["uid"].is_string(), "{secret}");
    assert!(
        secret.get("data").is_none(),
        "a Secret's data leaked: {secret}"
    );
    let keys: Vec<&String> = secret.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"], "{secret}");
    assert!(secret["metadata"].get("managedFields").is_none());
    // A kind the tenant may read comes back whole.
    let cm: Value = serde_json::from_str(results[1]["ok"].as_str().unwrap()).unwrap();
    assert_eq!(cm["data"]["value"], "v", "{cm}");
}
