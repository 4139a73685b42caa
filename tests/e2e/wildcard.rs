//! Wildcard watches (`kind = "*"`) against the embedded API server: kubediff with its default
//! manifest follows a CRD created after the host started (create, update with the diff, delete
//! posted to a webhook on 127.0.0.1) and forgets it when the CRD goes; inside a tenant the
//! wildcard means exactly what the grant allows, kinds and namespaces, while another tenant's
//! events keep flowing.

use std::path::Path;

use informant_runtime::config;
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::plugin::load::loader::PluginHost;
use informant_tests::plugins::PluginEnv;
use informant_tests::receiver::{Answer, Receiver};
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::{Value, json};

fn kubediff_manifest() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/kubediff/kubediff.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn custom(group: &str, kind: &str, ns: &str, name: &str, size: i64) -> Value {
    json!({"apiVersion": format!("{group}/v1"), "kind": kind,
        "metadata": {"name": name, "namespace": ns}, "spec": {"size": size}})
}

fn expanded(host: &PluginHost, tenant: &str, name: &str) -> Vec<String> {
    host.status()
        .into_iter()
        .find(|s| s.tenant == tenant && s.name == name)
        .map(|s| s.expanded)
        .unwrap_or_default()
}

/// The next record the webhook gets for `kind`: kubediff posts every object of every kind.
async fn next_post_of(hook: &mut Receiver, kind: &str) -> Value {
    loop {
        let (head, body) = guarded(&format!("a POST about a {kind}"), hook.requests.recv())
            .await
            .expect("the receiver runs");
        assert!(head.starts_with("POST /hook "), "{head}");
        if body["kind"] == kind {
            return body;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubediff_follows_a_crd_created_after_the_host_started() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo"]);
    let mut hook = Receiver::start(Answer::FailFirst(0)).await;
    let manifest = kubediff_manifest().replace(
        "[config]\n",
        &format!("[config]\nwebhook-url = \"{}/hook\"\n", hook.origin()),
    );
    let manifest = format!(
        "allowed-outbound-hosts = [\"{}\"]\n{}",
        hook.origin(),
        manifest.replace("deadline-ms = 200", "deadline-ms = 5000")
    );
    env.install(None, "kubediff", "kubediff", &manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let kinds = expanded(&env.host, "", "kubediff");
    for k in ["v1/ConfigMap", "apps/v1/Deployment", "v1/Namespace"] {
        assert!(kinds.iter().any(|x| x == k), "{k} not in {kinds:?}");
    }
    for k in [
        "v1/Event",
        "events.k8s.io/v1/Event",
        "coordination.k8s.io/v1/Lease",
    ] {
        assert!(
            !kinds.iter().any(|x| x == k),
            "{k} excluded, yet in {kinds:?}"
        );
    }
    assert!(!kinds.iter().any(|k| k.contains("Gizmo")), "{kinds:?}");

    // The CRD comes after the host started; its first object right after it.
    env.server
        .create(crd("example.com", "Gizmo", "gizmos"))
        .unwrap();
    let created = async {
        // The kind may not be served for an instant after its CRD is stored.
        loop {
            match env
                .server
                .create(custom("example.com", "Gizmo", "demo", "g1", 1))
            {
                Ok(_) => break,
                Err(_) => tokio::task::yield_now().await,
            }
        }
    };
    guarded("creating the first Gizmo", created).await;
    let added = next_post_of(&mut hook, "Gizmo").await;
    assert_eq!(
        added,
        json!({"event": "added", "apiVersion": "example.com/v1", "kind": "Gizmo",
            "namespace": "demo", "name": "g1"})
    );
    assert!(
        expanded(&env.host, "", "kubediff").contains(&"example.com/v1/Gizmo".to_string()),
        "/plugins shows the new kind"
    );

    env.server
        .update(custom("example.com", "Gizmo", "demo", "g1", 2))
        .unwrap();
    let updated = next_post_of(&mut hook, "Gizmo").await;
    assert_eq!(updated["event"], "updated", "{updated}");
    let changes = updated["changes"]
        .as_array()
        .expect("an update has changes");
    assert!(
        changes.contains(&json!({"path": "/spec/size", "old": 1, "new": 2})),
        "{updated}"
    );

    env.server
        .delete("example.com/v1", "Gizmo", Some("demo"), "g1")
        .unwrap();
    let deleted = next_post_of(&mut hook, "Gizmo").await;
    assert_eq!(
        deleted,
        json!({"event": "deleted", "apiVersion": "example.com/v1", "kind": "Gizmo",
            "namespace": "demo", "name": "g1"})
    );

    // The CRD goes with an object left: the plugin hears it deleted, and the kind is dropped.
    env.server
        .create(custom("example.com", "Gizmo", "demo", "g2", 7))
        .unwrap();
    let added = next_post_of(&mut hook, "Gizmo").await;
    assert_eq!(
        (added["event"].as_str(), added["name"].as_str()),
        (Some("added"), Some("g2"))
    );
    env.server
        .delete(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "gizmos.example.com",
        )
        .unwrap();
    let gone = next_post_of(&mut hook, "Gizmo").await;
    assert_eq!(
        (gone["event"].as_str(), gone["name"].as_str()),
        (Some("deleted"), Some("g2"))
    );
    let mut rediscovered = env.host.subscribe_rediscoveries();
    guarded(
        "the Gizmo kind to leave the expansion",
        rediscovered.wait_for(|_| {
            !expanded(&env.host, "", "kubediff").contains(&"example.com/v1/Gizmo".to_string())
        }),
    )
    .await
    .unwrap();
    assert!(
        !env.factory
            .informers()
            .iter()
            .any(|i| i.store().api_resource().kind == "Gizmo"),
        "the Gizmo informer stopped with its last user"
    );

    // A wildcard that makes no sense is refused at load, naming file, field and reason; the
    // running plugin carries on.
    env.install(
        None,
        "bad",
        "kubediff",
        "[[watch]]\napi-version = \"*\"\nkind = \"Pod\"\n",
    );
    let report = env.host.reconcile().await;
    let (_, err) = report
        .errors
        .iter()
        .find(|(id, _)| id.name == "bad")
        .expect("the bad manifest is refused");
    let err = err.to_string();
    for needle in ["bad.toml", "field `watch[0].kind`", "so kind must be `*`"] {
        assert!(err.contains(needle), "`{err}` lacks `{needle}`");
    }
    env.server
        .create(configmap("demo", "still-running", "x"))
        .unwrap();
    while next_post_of(&mut hook, "ConfigMap").await["name"] != "still-running" {}
}

const TENANTS: &str = r#"
[tenants.a]
namespaces = ["team-a"]
resources = ["v1/ConfigMap", "example.com/v1/*"]
[tenants.b]
namespaces = ["team-b"]
resources = ["v1/ConfigMap", "v1/Secret", "example.com/v1/*", "example.org/v1/*"]
"#;

/// Hostile: tenant a's wildcard watch must never receive a kind or a namespace outside its
/// grant — neither what exists at load nor what CRDs bring later — while b's events flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_wildcard_sees_only_its_grant_while_another_tenant_flows() {
    let host_config = config::parse(TENANTS, Path::new("informant.toml")).expect("valid config");
    let env = PluginEnv::start(host_config).await;
    create_namespaces(&env.server, &["team-a", "team-b"]);
    env.server
        .create(configmap("team-b", "b-before", "x"))
        .unwrap();
    env.server
        .create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "a-secret", "namespace": "team-a"}, "data": {"k": "dg=="}}))
        .unwrap();
    let wildcard = "[[watch]]\napi-version = \"*\"\nkind = \"*\"\n";
    env.install(Some("a"), "diff-a", "kubediff", wildcard);
    env.install(Some("b"), "diff-b", "kubediff", wildcard);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(expanded(&env.host, "a", "diff-a"), ["v1/ConfigMap"]);
    assert_eq!(
        expanded(&env.host, "b", "diff-b"),
        ["v1/ConfigMap", "v1/Secret"]
    );

    // Two CRDs after start: a may have one of them, in its own namespace only.
    env.server
        .create(crd("example.com", "Widget", "widgets"))
        .unwrap();
    env.server
        .create(crd("example.org", "Gadget", "gadgets"))
        .unwrap();
    let server = &env.server;
    let create = |v: Value| async move {
        loop {
            match server.create(v.clone()) {
                Ok(_) => break,
                Err(_) => tokio::task::yield_now().await,
            }
        }
    };
    guarded("creating custom objects", async {
        create(custom("example.org", "Gadget", "team-a", "not-for-a", 1)).await;
        create(custom("example.org", "Gadget", "team-b", "for-b", 1)).await;
        create(custom("example.com", "Widget", "team-b", "b-widget", 1)).await;
        create(custom("example.com", "Widget", "team-a", "a-widget", 1)).await;
    })
    .await;
    env.server
        .create(configmap("team-b", "b-after", "x"))
        .unwrap();
    env.server
        .create(configmap("team-a", "a-last", "x"))
        .unwrap();

    let logs = &env.logs;
    let seen = |plugin: &str, kind: &str, name: &str| {
        logs.json_of(plugin)
            .iter()
            .any(|l| l["kind"] == kind && l["name"] == name)
    };
    // b-widget and b-after share an informer with what a waits for, and came before it: had
    // either leaked, it would be there by now.
    logs.wait_until("a's widget and last ConfigMap", || {
        seen("diff-a", "Widget", "a-widget") && seen("diff-a", "ConfigMap", "a-last")
    })
    .await;
    logs.wait_until("b's events, its own CRD's included", || {
        seen("diff-b", "Gadget", "for-b")
            && seen("diff-b", "Widget", "b-widget")
            && seen("diff-b", "ConfigMap", "b-after")
            && seen("diff-b", "ConfigMap", "b-before")
    })
    .await;
    for line in logs.json_of("diff-a") {
        assert_eq!(
            line["namespace"], "team-a",
            "a saw outside its namespaces: {line}"
        );
        assert!(
            line["kind"] == "ConfigMap" || line["kind"] == "Widget",
            "a saw a kind outside its grant: {line}"
        );
    }
    for line in logs.json_of("diff-b") {
        assert_eq!(
            line["namespace"], "team-b",
            "b saw outside its namespaces: {line}"
        );
    }
    assert_eq!(
        expanded(&env.host, "a", "diff-a"),
        ["example.com/v1/Widget", "v1/ConfigMap"],
        "no informer of a kind outside a's grant was ever handed to it"
    );
    let b = expanded(&env.host, "b", "diff-b");
    assert!(b.contains(&"example.org/v1/Gadget".to_string()), "{b:?}");
    let a_id = PluginId {
        tenant: "a".into(),
        name: "diff-a".into(),
    };
    assert_eq!(env.host.supervisor(&a_id).unwrap().failed(), 0);
}
