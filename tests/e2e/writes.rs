//! Plugins that write to the cluster: the `kube` import behind its three locks (the manifest's
//! `[[write]]`, the tenant's write grant, the identity the cluster judges), on the embedded API
//! server, which records who sent each write.

use std::path::Path;
use std::time::{Duration, Instant};

use informant_devserver::audit::{AllowRule, AuditRecord};
use informant_runtime::config;
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::imports::write::{Call, Outcome};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::create_namespaces;
use informant_tests::plugins::PluginEnv;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};

pub(crate) fn id(tenant: &str, name: &str) -> PluginId {
    PluginId {
        tenant: tenant.into(),
        name: name.into(),
    }
}

/// A `write`-mode test plugin watching ConfigMaps in `watch_ns`, with `writes` (TOML tables) to
/// make on each `go-*` ConfigMap created there, and `declared` `[[write]]` tables.
pub(crate) fn writer(tag: &str, watch_ns: &str, declared: &str, writes: &[&str]) -> String {
    format!(
        "[limits]\ndeadline-ms = 10000\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{watch_ns}\"\n{declared}\n[config]\nmode = \"write\"\ntag = \"{tag}\"\nwrites = [{}]\n",
        writes.join(", ")
    )
}

/// `[[write]]` of ConfigMaps with `verbs`, in `namespace` if given.
fn configmap_writes(verbs: &str, namespace: Option<&str>) -> String {
    let ns = namespace.map_or(String::new(), |ns| format!("namespace = \"{ns}\"\n"));
    format!("[[write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = {verbs}\n{ns}")
}

/// The results the plugin logged for its writes on `key`, once it has.
pub(crate) async fn results(env: &PluginEnv, plugin: &str, key: &str) -> Vec<Value> {
    let found = || {
        env.logs
            .json_of(plugin)
            .into_iter()
            .find(|l| l["key"] == key && l.get("writes").is_some())
    };
    env.logs
        .wait_until(&format!("{plugin}'s writes for {key}"), || {
            found().is_some()
        })
        .await;
    found().expect("waited for it")["writes"]
        .as_array()
        .expect("a list")
        .clone()
}

pub(crate) fn err_kind(result: &Value) -> &str {
    result["err"]["kind"].as_str().unwrap_or("ok")
}

pub(crate) fn go(ns: &str, name: &str) -> Value {
    informant_tests::configmap(ns, name, "v")
}

/// Writes the server received with this field manager.
pub(crate) fn audited(env: &PluginEnv, manager: &str) -> Vec<AuditRecord> {
    env.server
        .audit()
        .into_iter()
        .filter(|r| r.field_manager.as_deref() == Some(manager))
        .collect()
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn deployment(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    })
}

#[tokio::test]
async fn label_policy_with_fix_labels_an_unlabelled_deployment_and_records_an_event() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["shop"]);
    let manifest = "[[watch]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\n\
        [[write]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\nverbs = [\"apply\"]\n\
        [[write]]\napi-version = \"events.k8s.io/v1\"\nkind = \"Event\"\nverbs = [\"create\"]\n\
        [config]\nrequired = [\"team\"]\nsummary-every = 0\nfix = true\ndefaults = { team = \"unknown\" }\n";
    env.install(None, "label-policy", "label-policy", manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let plugin = env
        .host
        .supervisor(&id("", "label-policy"))
        .expect("loaded");

    env.server.create(deployment("shop", "web")).unwrap();
    let api: Api<Deployment> = Api::namespaced(env.server.client(), "shop");
    let labelled = eventually("the Deployment labelled", async || {
        let d = api.get("web").await.ok()?;
        let labels = d.metadata.labels.clone().unwrap_or_default();
        (labels.get("team").map(String::as_str) == Some("unknown")).then_some(d)
    })
    .await;
    // The plugin's field manager owns just the label it applied; the spec stays its creator's.
    let managers: Vec<(String, String)> = labelled
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("informant/label-policy".into(), "Apply".into())),
        "{managers:?}"
    );
    assert_eq!(
        labelled.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx")
    );

    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.server.client(), "shop");
    let event = eventually("the Event recorded", async || {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web"))
    })
    .await;
    assert_eq!(event.reason.as_deref(), Some("MissingLabelsAdded"));
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        event.note.as_deref(),
        Some("label-policy added team=unknown")
    );
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("informant/label-policy")
    );

    // The labelled Deployment comes back as an update that passes: fixing settles.
    eventually("the labelled update handled", async || {
        (plugin.handled() >= 2).then_some(())
    })
    .await;
    let writes = plugin.writes();
    assert_eq!(
        writes.get(
            Call::Verb(informant_runtime::manifest::Verb::Apply),
            Outcome::Ok
        ),
        1
    );
    assert_eq!(writes.get(Call::Event, Outcome::Ok), 1);
    assert_eq!(plugin.failed(), 0, "{:?}", plugin.last_error());
}

#[tokio::test]
async fn writes_outside_the_manifest_are_denied_before_any_request() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["w", "other"]);
    let declared = configmap_writes("[\"apply\"]", Some("w"));
    let apply = |ns: &str, name: &str, object_ns: &str| {
        format!(
            "{{ op = \"apply\", namespace = \"{ns}\", name = \"{name}\", object = {{ metadata = {{ namespace = \"{object_ns}\" }}, data = {{ k = \"v\" }} }} }}"
        )
    };
    let writes = [
        apply("w", "out-$NAME", "w"),
        // A verb it did not declare.
        "{ op = \"delete\", namespace = \"w\", name = \"$NAME\" }".to_string(),
        // Another namespace, and odd spellings of this one.
        apply("other", "x", "other"),
        apply("W", "x", "W"),
        apply("w/../other", "x", "w"),
        apply("w ", "x", "w"),
        // A name that is a path.
        apply("w", "../../secrets/x", "w"),
        // The body naming another namespace than the call.
        apply("w", "x", "other"),
        // A kind it did not declare.
        "{ op = \"apply\", kind = \"Secret\", namespace = \"w\", name = \"x\", object = {} }"
            .to_string(),
        // Recording an Event is a declared create of events.k8s.io/v1 Event, like any write.
        "{ op = \"event\" }".to_string(),
    ];
    let writes: Vec<&str> = writes.iter().map(String::as_str).collect();
    env.install(
        None,
        "writer",
        "hostile",
        &writer("t", "w", &declared, &writes),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    env.server.create(go("w", "go-1")).unwrap();
    let results = results(&env, "writer", "w/go-1").await;
    let kinds: Vec<&str> = results.iter().map(err_kind).collect();
    assert_eq!(kinds[0], "ok", "{results:?}");
    assert!(kinds[1..].iter().all(|k| *k == "denied"), "{results:?}");
    let message = |i: usize| results[i]["err"]["message"].as_str().unwrap().to_string();
    for (i, want) in [
        (
            1,
            "`delete` of `v1/ConfigMap` in namespace `w` is not declared in the manifest's [[write]] tables (v1/ConfigMap (apply) in w)",
        ),
        (2, "in namespace `other` is not declared"),
        (3, "is not a namespace name"),
        (4, "is not a namespace name"),
        (5, "is not a namespace name"),
        (6, "is not a valid ConfigMap name"),
        (7, "metadata.namespace is \"other\", but the call names `w`"),
        (8, "`v1/Secret`"),
        (9, "`events.k8s.io/v1/Event`"),
    ] {
        assert!(message(i).contains(want), "write {i}: {}", message(i));
    }

    // The server saw the one allowed write, and nothing else from this plugin.
    let seen = audited(&env, "informant/writer");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (
            seen[0].verb.as_str(),
            seen[0].name.as_deref(),
            seen[0].namespace.as_deref()
        ),
        ("patch", Some("out-go-1"), Some("w"))
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.server.client(), "other");
    assert!(cms.get_opt("x").await.unwrap().is_none());
    let plugin = env.host.supervisor(&id("", "writer")).unwrap();
    let denied: u64 = Call::ALL
        .iter()
        .map(|c| plugin.writes().get(*c, Outcome::Denied))
        .sum();
    assert_eq!(denied, 9);
}

const TENANTS: &str = r#"
[tenants.team-a]
namespaces = ["team-a"]
impersonate = "system:serviceaccount:team-a:hooks"
impersonate-groups = ["hooks"]
[[tenants.team-a.write]]
api-version = "v1"
kind = "ConfigMap"
verbs = ["apply", "create"]

[tenants.team-b]
namespaces = ["team-b"]
"#;

#[tokio::test]
async fn a_tenants_writes_stay_in_its_grant_and_carry_its_identity() {
    let cfg = config::parse(TENANTS, Path::new("informant.toml")).unwrap();
    let env = PluginEnv::start(cfg).await;
    create_namespaces(&env.server, &["team-a", "team-b"]);
    // The cluster's RBAC, as the third lock: team-a's identity may patch (apply) ConfigMaps in
    // team-a, and nothing else.
    env.server.allow_impersonated(
        "system:serviceaccount:team-a:hooks",
        vec![AllowRule {
            verbs: vec!["patch".into()],
            resource: "configmaps".into(),
            namespace: Some("team-a".into()),
            ..AllowRule::default()
        }],
    );
    let declared = configmap_writes("[\"apply\", \"create\"]", None);
    let writes = [
        "{ op = \"apply\", namespace = \"team-a\", name = \"out-$NAME\", object = { data = { k = \"v\" } } }",
        // Declared (no namespace: any the tenant may write), but outside the tenant's grant.
        "{ op = \"apply\", namespace = \"team-b\", name = \"stolen\", object = { data = { k = \"v\" } } }",
        "{ op = \"apply\", namespace = \"team-b-x\", name = \"stolen\", object = {} }",
        // Allowed by the manifest and the grant; the cluster's RBAC says no.
        "{ op = \"create\", namespace = \"team-a\", object = { metadata = { name = \"new-$NAME\" } } }",
    ];
    env.install(
        Some("team-a"),
        "writer",
        "hostile",
        &writer("a", "team-a", &declared, &writes),
    );
    // Over the ceiling: a verb the tenant was not granted, and a tenant granted no writes.
    env.install(
        Some("team-a"),
        "deleter",
        "hostile",
        &writer(
            "d",
            "team-a",
            &configmap_writes("[\"delete\"]", Some("team-a")),
            &[],
        ),
    );
    env.install(
        Some("team-b"),
        "writer",
        "hostile",
        &writer("b", "team-b", &configmap_writes("[\"apply\"]", None), &[]),
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
    let deleter = error(id("team-a", "deleter"));
    assert!(
        deleter.contains("deleter.toml")
            && deleter.contains("field `write[0].verbs`: `delete` of `v1/ConfigMap` in team-a is outside tenant `team-a`'s write grant (`v1/ConfigMap (apply, create)`)"),
        "{deleter}"
    );
    let b = error(id("team-b", "writer"));
    assert!(
        b.contains("outside tenant `team-b`'s write grant (none: it may not write)"),
        "{b}"
    );
    assert_eq!(report.loaded.len(), 2, "{:?}", report.loaded);

    env.server.create(go("team-a", "go-1")).unwrap();
    let results = results(&env, "writer", "team-a/go-1").await;
    let kinds: Vec<&str> = results.iter().map(err_kind).collect();
    assert_eq!(
        kinds,
        ["ok", "denied", "denied", "forbidden"],
        "{results:?}"
    );
    assert!(
        results[1]["err"]["message"]
            .as_str()
            .unwrap()
            .contains("namespace `team-b` is outside the namespaces tenant `team-a` was granted"),
        "{results:?}"
    );
    assert_eq!(results[3]["err"]["code"], 403);
    assert!(
        results[3]["err"]["message"].as_str().unwrap().contains(
            "User \"system:serviceaccount:team-a:hooks\" cannot create resource \"configmaps\""
        ),
        "{results:?}"
    );
    // Both requests that left the host carried the tenant's identity and field manager.
    let seen = audited(&env, "informant/team-a/writer");
    assert_eq!(seen.len(), 2, "{seen:?}");
    for r in &seen {
        assert_eq!(
            r.user.as_deref(),
            Some("system:serviceaccount:team-a:hooks")
        );
        assert_eq!(r.groups, ["hooks"]);
        assert_eq!(r.namespace.as_deref(), Some("team-a"));
    }
    assert_eq!((seen[0].allowed, seen[1].allowed), (true, false));
    // Nothing reached team-b, whose own plugin kept getting its events.
    let cms: Api<ConfigMap> = Api::namespaced(env.server.client(), "team-b");
    assert!(cms.get_opt("stolen").await.unwrap().is_none());
    for i in 0..5 {
        env.server.create(go("team-b", &format!("b{i}"))).unwrap();
    }
    env.logs
        .wait_until("team-b's echo plugin gets its events", || {
            env.logs.keys_of("echo", "b").len() == 5
        })
        .await;
}

#[tokio::test]
async fn dry_run_writes_change_nothing() {
    let env = PluginEnv::start_with(HostConfig::default(), true).await;
    create_namespaces(&env.server, &["w"]);
    let writes = [
        "{ op = \"apply\", namespace = \"w\", name = \"out-$NAME\", object = { data = { k = \"v\" } } }",
        "{ op = \"delete\", namespace = \"w\", name = \"$NAME\" }",
    ];
    let declared = configmap_writes("[\"apply\", \"delete\"]", Some("w"));
    env.install(
        None,
        "writer",
        "hostile",
        &writer("t", "w", &declared, &writes),
    );
    env.reconcile().await;
    env.server.create(go("w", "go-1")).unwrap();
    let results = results(&env, "writer", "w/go-1").await;
    assert_eq!(
        results.iter().map(err_kind).collect::<Vec<_>>(),
        ["ok", "ok"],
        "{results:?}"
    );
    // The server answered with what it would have stored, and stored nothing.
    let answered: Value = serde_json::from_str(results[0]["ok"].as_str().unwrap()).unwrap();
    assert_eq!(answered["data"]["k"], "v");
    let cms: Api<ConfigMap> = Api::namespaced(env.server.client(), "w");
    assert!(cms.get_opt("out-go-1").await.unwrap().is_none());
    assert!(cms.get_opt("go-1").await.unwrap().is_some());
    // A delete carries no field manager: both writes, as the server saw them.
    let seen = env.server.audit();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|r| r.dry_run), "{seen:?}");
}

#[tokio::test]
async fn the_write_budget_paces_a_flood() {
    let cfg = config::parse(
        &format!("{TENANTS}\n").replace(
            "impersonate-groups = [\"hooks\"]",
            "impersonate-groups = [\"hooks\"]\nwrites-per-second = 5",
        ),
        Path::new("informant.toml"),
    )
    .unwrap();
    let env = PluginEnv::start(cfg).await;
    create_namespaces(&env.server, &["team-a"]);
    // Fifteen creates for one event: five from the full bucket, then five per second.
    let writes: Vec<String> = (0..15)
        .map(|i| format!("{{ op = \"create\", namespace = \"team-a\", object = {{ metadata = {{ name = \"f-$NAME-{i}\" }} }} }}"))
        .collect();
    let writes: Vec<&str> = writes.iter().map(String::as_str).collect();
    let declared = configmap_writes("[\"create\"]", Some("team-a"));
    env.install(
        Some("team-a"),
        "flood",
        "hostile",
        &writer("f", "team-a", &declared, &writes),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let started = Instant::now();
    env.server.create(go("team-a", "go-1")).unwrap();
    let results = results(&env, "flood", "team-a/go-1").await;
    let took = started.elapsed();
    assert!(results.iter().all(|r| err_kind(r) == "ok"), "{results:?}");
    assert!(
        took >= Duration::from_millis(1800),
        "15 writes at 5/s with a burst of 5 take at least 2 s; took {took:?}"
    );
    assert_eq!(audited(&env, "informant/team-a/flood").len(), 15);
}

#[tokio::test]
async fn bad_write_declarations_are_refused_at_load_with_file_field_and_reason() {
    let env = PluginEnv::start(HostConfig::default()).await;
    let install = |name: &str, write: &str| {
        env.install(
            None,
            name,
            "hostile",
            &format!("[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n{write}\n[config]\nmode = \"echo\"\n"),
        )
    };
    install(
        "verb",
        "[[write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"escalate\"]",
    );
    install(
        "kind",
        "[[write]]\napi-version = \"example.com/v1\"\nkind = \"Widget\"\nverbs = [\"apply\"]",
    );
    install(
        "star",
        "[[write]]\napi-version = \"v1\"\nkind = \"*\"\nverbs = [\"apply\"]",
    );
    install(
        "scope",
        // A Namespace's `namespaces` name the Namespaces written; any other cluster-scoped
        // kind's objects have none.
        "[[write]]\napi-version = \"v1\"\nkind = \"Node\"\nverbs = [\"apply\"]\nnamespace = \"a\"",
    );
    let report = env.reconcile().await;
    let error = |name: &str| {
        report
            .errors
            .iter()
            .find(|(i, _)| i.name == name)
            .map(|(_, e)| e.to_string())
            .unwrap_or_else(|| panic!("no error for {name}: {:?}", report.errors))
    };
    let verb = error("verb");
    assert!(
        verb.contains("verb.toml")
            && verb.contains("write")
            && verb.contains("unknown variant `escalate`"),
        "{verb}"
    );
    let kind = error("kind");
    assert!(
        kind.contains("kind.toml") && kind.contains("field `write[0]`") && kind.contains("Widget"),
        "{kind}"
    );
    let star = error("star");
    assert!(
        star.contains("field `write[0].kind`") && star.contains("only for a tenant's ceiling"),
        "{star}"
    );
    let scope = error("scope");
    assert!(
        scope.contains("field `write[0].namespaces`") && scope.contains("cluster-scoped"),
        "{scope}"
    );
    assert!(report.loaded.is_empty());
}

#[tokio::test]
async fn a_write_waiting_for_its_budget_is_cut_at_the_deadline_and_others_flow() {
    let cfg = config::parse(
        &TENANTS.replace(
            "impersonate-groups = [\"hooks\"]",
            "impersonate-groups = [\"hooks\"]\nwrites-per-second = 1",
        ),
        Path::new("informant.toml"),
    )
    .unwrap();
    let env = PluginEnv::start(cfg).await;
    create_namespaces(&env.server, &["team-a", "team-b"]);
    let writes: Vec<String> = (0..20)
        .map(|i| format!("{{ op = \"create\", namespace = \"team-a\", object = {{ metadata = {{ name = \"h-$NAME-{i}\" }} }} }}"))
        .collect();
    let writes: Vec<&str> = writes.iter().map(String::as_str).collect();
    let manifest = writer(
        "h",
        "team-a",
        &configmap_writes("[\"create\"]", Some("team-a")),
        &writes,
    )
    .replace("deadline-ms = 10000", "deadline-ms = 300");
    env.install(Some("team-a"), "hog", "hostile", &manifest);
    env.install(
        Some("team-b"),
        "echo",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"b\"\n",
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let hog = env.host.supervisor(&id("team-a", "hog")).unwrap();

    env.server.create(go("team-a", "go-1")).unwrap();
    for i in 0..5 {
        env.server.create(go("team-b", &format!("b{i}"))).unwrap();
    }
    env.logs
        .wait_until(
            "team-b's events, while team-a's plugin waits on its budget",
            || env.logs.keys_of("echo", "b").len() == 5,
        )
        .await;
    eventually("the hog's event to fail at its deadline", async || {
        (hog.failed() >= 1).then_some(())
    })
    .await;
    assert!(
        hog.last_error().is_some_and(|e| e.contains("deadline")),
        "{:?}",
        hog.last_error()
    );
    // One write from the full bucket, perhaps a second as it refills; never the twenty.
    let sent = audited(&env, "informant/team-a/hog").len();
    assert!((1..=2).contains(&sent), "{sent} writes reached the server");
}

#[tokio::test]
async fn api_errors_come_back_typed() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["w"]);
    env.server
        .create(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}}}}}}]}}))
        .unwrap();
    let declared = format!(
        "{}[[write]]\napi-version = \"example.com/v1\"\nkind = \"Widget\"\nverbs = [\"create\"]\n",
        configmap_writes("[\"create\", \"delete\", \"patch\"]", Some("w"))
    );
    let writes = [
        // The event's own ConfigMap, pinned to a UID it does not have.
        "{ op = \"delete\", namespace = \"w\", name = \"$NAME\", uid = \"not-its-uid\" }",
        "{ op = \"delete\", namespace = \"w\", name = \"nope\" }",
        "{ op = \"create\", namespace = \"w\", object = { metadata = { name = \"$NAME\" } } }",
        "{ op = \"create\", group = \"example.com\", kind = \"Widget\", namespace = \"w\", object = { metadata = { name = \"small\" }, spec = { size = 0 } } }",
        "{ op = \"patch\", namespace = \"w\", name = \"$NAME\", patch-type = \"json\", patch = [{ op = \"test\", path = \"/data/k\", value = \"other\" }] }",
    ];
    env.install(
        None,
        "writer",
        "hostile",
        &writer("t", "w", &declared, &writes),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server.create(go("w", "go-1")).unwrap();
    let results = results(&env, "writer", "w/go-1").await;
    let got: Vec<(&str, i64)> = results
        .iter()
        .map(|r| (err_kind(r), r["err"]["code"].as_i64().unwrap_or(0)))
        .collect();
    assert_eq!(
        got,
        [
            ("conflict", 409),
            ("not-found", 404),
            ("conflict", 409),
            ("invalid", 422),
            ("invalid", 422)
        ],
        "{results:?}"
    );
    assert!(
        results[3]["err"]["message"]
            .as_str()
            .unwrap()
            .contains("spec.size in body should be greater than or equal to 1"),
        "{results:?}"
    );
}

/// A plugin that server-side applies a Deployment reads back the defaults the API server fills
/// (the values `crates/devserver/tests/compat/04-defaults.json` records), and re-applying the
/// same configuration is a no-op: same resourceVersion, no event.
#[tokio::test]
async fn an_applied_deployment_comes_back_defaulted_and_reapplying_changes_nothing() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["w"]);
    let declared = format!(
        "{}[[write]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\nverbs = [\"apply\"]\nnamespace = \"w\"\n",
        configmap_writes("[\"apply\"]", Some("w"))
    );
    let apply = "{ op = \"apply\", group = \"apps\", kind = \"Deployment\", namespace = \"w\", name = \"web\", object = { spec = { selector = { matchLabels = { app = \"web\" } }, template = { metadata = { labels = { app = \"web\" } }, spec = { containers = [{ name = \"app\", image = \"nginx\" }] } } } } }";
    env.install(
        None,
        "writer",
        "hostile",
        &writer("t", "w", &declared, &[apply, apply]),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server.create(go("w", "go-1")).unwrap();
    let results = results(&env, "writer", "w/go-1").await;
    let stored: Vec<Value> = results
        .iter()
        .map(|r| serde_json::from_str(r["ok"].as_str().expect("applied")).unwrap())
        .collect();
    let spec = &stored[0]["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    let managers: Vec<&str> = stored[0]["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["informant/writer"]);
    assert_eq!(
        stored[0]["metadata"]["resourceVersion"], stored[1]["metadata"]["resourceVersion"],
        "the second, identical apply stored nothing"
    );
}
