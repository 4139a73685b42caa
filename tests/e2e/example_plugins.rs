//! The example plugins (`plugins/`), compiled to components and run by the host against the
//! embedded API server: kubediff (through kube-rs, kubectl and a CRD; posting to a webhook and
//! Slack on 127.0.0.1), orphans (by-index on owner
//! uid), label-policy (list-by-selector summaries that match the store).

use std::path::Path;
use std::process::Command;

use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::plugins::PluginEnv;
use informant_tests::receiver::{Answer, Receiver};
use informant_tests::{create_namespaces, guarded};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

fn manifest(plugin: &str) -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../plugins/{plugin}/{plugin}.toml"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn deployment(ns: &str, name: &str, replicas: i64, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}})
}

fn has_change(line: &Value, path: &str, old: Value, new: Value) -> bool {
    line["changes"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["path"] == path && c["old"] == old && c["new"] == new)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubediff_logs_diffs_for_kube_rs_kubectl_and_crds() {
    let Some(kubectl) = informant_test_tools::need("kubectl", None) else {
        return;
    };
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo", "p", "prod"]);
    env.server
        .create(deployment("demo", "web", 1, json!({"app": "web"})))
        .unwrap();
    env.install(None, "kubediff", "kubediff", &manifest("kubediff"));
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let logs = &env.logs;
    let lines = || logs.json_of("kubediff");
    logs.wait_until("the initial add", || {
        lines()
            .iter()
            .any(|l| l["event"] == "added" && l["name"] == "web")
    })
    .await;
    let added = lines().into_iter().find(|l| l["name"] == "web").unwrap();
    assert_eq!(
        (
            added["apiVersion"].as_str(),
            added["kind"].as_str(),
            added["namespace"].as_str()
        ),
        (Some("apps/v1"), Some("Deployment"), Some("demo"))
    );

    // Through kube-rs.
    let api: Api<Deployment> = Api::namespaced(env.server.client(), "demo");
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    logs.wait_until("the kube-rs update's diff", || {
        lines()
            .iter()
            .any(|l| has_change(l, "/spec/replicas", json!(1), json!(3)))
    })
    .await;

    // Through kubectl.
    let kubeconfig = env.dir().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig).unwrap();
    let out = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "-n",
            "demo",
            "patch",
            "deployment",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":5}}"#,
        ])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    logs.wait_until("the kubectl update's diff", || {
        lines()
            .iter()
            .any(|l| has_change(l, "/spec/replicas", json!(3), json!(5)))
    })
    .await;
    for l in lines() {
        for c in l["changes"].as_array().into_iter().flatten() {
            let path = c["path"].as_str().unwrap();
            assert!(
                path != "/metadata/resourceVersion" && !path.starts_with("/status"),
                "noise in {l}"
            );
        }
    }

    // A CRD's objects reach a second kubediff watching it.
    env.server
        .create(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
        .unwrap();
    env.install(
        None,
        "crd-diff",
        "kubediff",
        "[[watch]]\napi-version = \"example.com/v1\"\nkind = \"Widget\"\n",
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let widget = |size: i64| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "demo"}, "spec": {"size": size}});
    env.server.create(widget(1)).unwrap();
    // Wait for the add: an update arriving before the plugin saw the add merges into it.
    logs.wait_until("the widget add", || {
        logs.json_of("crd-diff")
            .iter()
            .any(|l| l["event"] == "added")
    })
    .await;
    env.server.update(widget(2)).unwrap();
    logs.wait_until("the widget diff", || {
        logs.json_of("crd-diff")
            .iter()
            .any(|l| l["kind"] == "Widget" && has_change(l, "/spec/size", json!(1), json!(2)))
    })
    .await;
}

/// kubediff's sinks: a webhook that fails twice gets each record on the third try (the plugin
/// answers `retry`), and Slack gets its payload; for a CRD created after the host started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubediff_posts_each_record_to_its_sinks_retrying_a_failing_one() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo"]);
    let mut webhook = Receiver::start(Answer::FailFirst(2)).await;
    let mut slack = Receiver::start(Answer::FailFirst(0)).await;
    env.server
        .create(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
        .unwrap();
    env.install(
        None,
        "kubediff",
        "kubediff",
        &format!(
            "allowed-outbound-hosts = [\"{}\", \"{}\"]\n[limits]\ndeadline-ms = 5000\n[retry]\ninitial-backoff-ms = 10\n[[watch]]\napi-version = \"example.com/v1\"\nkind = \"Gadget\"\n[config]\nwebhook-url = \"{}/hook\"\nslack-webhook-url = \"{}/slack\"\n",
            webhook.origin(),
            slack.origin(),
            webhook.origin(),
            slack.origin()
        ),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let gadget = |size: i64| json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1", "namespace": "demo"}, "spec": {"size": size}});
    env.server.create(gadget(1)).unwrap();
    // The webhook fails the first two POSTs (500): the same record comes again each time.
    let mut posts = Vec::new();
    for _ in 0..3 {
        let (head, body) = guarded("a webhook POST", webhook.requests.recv())
            .await
            .unwrap();
        assert!(head.starts_with("POST /hook "), "{head}");
        posts.push(body);
    }
    assert!(posts.iter().all(|p| p == &posts[0]), "{posts:?}");
    assert_eq!(
        posts[0],
        json!({"event": "added", "apiVersion": "example.com/v1", "kind": "Gadget",
            "namespace": "demo", "name": "g1"})
    );
    // Slack is posted after the webhook took it: once, on the third delivery.
    let (head, body) = guarded("the Slack POST", slack.requests.recv())
        .await
        .unwrap();
    assert!(head.starts_with("POST /slack "), "{head}");
    assert_eq!(
        body,
        json!({"text": "*added* example.com/v1 Gadget `demo/g1`"})
    );

    // An update: one POST each (the webhook answers 200 from now on), the diff in both.
    env.server.update(gadget(2)).unwrap();
    let (_, body) = guarded("the update's POST", webhook.requests.recv())
        .await
        .unwrap();
    assert_eq!(body["event"], "updated");
    assert!(
        has_change(&body, "/spec/size", json!(1), json!(2)),
        "{body}"
    );
    let (_, body) = guarded("the update's Slack POST", slack.requests.recv())
        .await
        .unwrap();
    let text = body["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("*updated* example.com/v1 Gadget `demo/g1`\n```")
            && text.contains("/spec/size"),
        "{text}"
    );
    let sup = env
        .host
        .supervisor(&informant_runtime::plugin::id::PluginId {
            tenant: String::new(),
            name: "kubediff".into(),
        })
        .unwrap();
    assert_eq!((sup.retried(), sup.failed()), (2, 0));
    assert_eq!(webhook.connections(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_finds_orphans_through_get_and_by_index() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo", "p", "prod"]);
    let dep = env
        .server
        .create(deployment("prod", "web", 2, json!({"app": "web"})))
        .unwrap();
    let dep_uid = dep["metadata"]["uid"].as_str().unwrap().to_string();
    let rs = |name: &str, owner: &str, uid: &str| {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "prod",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": uid, "controller": true}]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": owner}},
                "template": {"metadata": {"labels": {"app": owner}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    };
    env.server.create(rs("web-5d8f", "web", &dep_uid)).unwrap();
    env.server
        .create(rs("old-1a2b", "old", "uid-of-a-deleted-deployment"))
        .unwrap();
    env.install(None, "orphans", "orphans", &manifest("orphans"));
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let orphans = || -> Vec<String> {
        env.logs
            .json_of("orphans")
            .iter()
            .filter(|l| l["orphan"]["kind"] == "ReplicaSet")
            .map(|l| {
                format!(
                    "{}<-{}",
                    l["orphan"]["name"].as_str().unwrap_or(""),
                    l["owner"]["uid"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    // Found through cache get: its owner was never there.
    env.logs
        .wait_until("the pre-existing orphan", || {
            orphans().contains(&"old-1a2b<-uid-of-a-deleted-deployment".to_string())
        })
        .await;
    // Found through by-index on the owner uid when its Deployment goes.
    env.server
        .delete("apps/v1", "Deployment", Some("prod"), "web")
        .unwrap();
    env.logs
        .wait_until("the new orphan", || {
            orphans().contains(&format!("web-5d8f<-{dep_uid}"))
        })
        .await;
    let all = orphans();
    assert_eq!(
        all.iter().filter(|o| o.starts_with("web-5d8f")).count(),
        1,
        "reported once: {all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_policy_summaries_match_the_store() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo", "p", "prod"]);
    for i in 0..12 {
        let labels = if i % 3 == 0 {
            json!({"team": "a"})
        } else {
            json!({"app": "x"})
        };
        env.server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm{i}"), "namespace": "p", "labels": labels}}))
            .unwrap();
    }
    env.server
        .create(deployment("p", "no-team", 1, json!({"app": "x"})))
        .unwrap();
    env.server
        .create(deployment("p", "has-team", 1, json!({"team": "b"})))
        .unwrap();
    let manifest = manifest("label-policy").replace("summary-every = 100", "summary-every = 7");
    env.install(None, "label-policy", "label-policy", &manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    let lines = || env.logs.json_of("label-policy");
    env.logs
        .wait_until("violations and a summary", || {
            lines()
                .iter()
                .filter(|l| l.get("violation").is_some())
                .count()
                == 9
                && lines().iter().any(|l| l.get("summary").is_some())
        })
        .await;
    // What the store says, through the host's own query path.
    let mut expected = serde_json::Map::new();
    for informer in env.factory.informers() {
        let ar = informer.store().api_resource().clone();
        let missing = informer.store().list(None, &"!team".parse().unwrap()).len();
        expected.insert(
            format!("{}/{}", ar.api_version, ar.kind),
            json!({"missing:team": missing}),
        );
    }
    assert_eq!(expected["v1/ConfigMap"]["missing:team"], 8);
    let summary = lines()
        .into_iter()
        .find_map(|l| l.get("summary").cloned())
        .unwrap();
    assert_eq!(summary, Value::Object(expected));
    let violations: Vec<_> = lines()
        .into_iter()
        .filter_map(|l| l.get("violation").cloned())
        .collect();
    assert!(
        violations
            .iter()
            .any(|v| v["kind"] == "Deployment" && v["name"] == "no-team")
    );
    assert!(
        !violations
            .iter()
            .any(|v| v["name"] == "has-team" || v["name"] == "cm0")
    );
}
