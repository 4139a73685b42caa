//! Admission hooks end to end: the embedded API server calls the host's webhooks (registered by
//! the host itself, over HTTPS verified with the CA it made), the host answers from the `admit`
//! test plugin's `admission-hook` export. Requests come from kube-rs, kubectl, and, for what no
//! API server would send, straight to the webhook server.

use std::path::Path;
use std::sync::Arc;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::admission::AdmissionOptions;
use informant_runtime::admission::webhooks::Endpoint;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_runtime::tls::ServerTls;
use informant_tests::admission::{WEBHOOK, Webhook, loopback_admission, registered, review};
use informant_tests::http::{free_addr, get};
use informant_tests::plugins::{never_quarantined, wasm};
use informant_tests::{create_namespaces, guarded};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// A plugin to install: (tenant, name, manifest).
type Install<'a> = (&'a str, &'a str, String);

/// The `admit` plugin's manifest: `tables` are its `[[admit]]` tables, `config` its `[config]`.
fn manifest(tables: &str, config: &str) -> String {
    format!(
        "[limits]\nmemory-mib = 32\n[[watch]]\napi-version = \"v1\"\nkind = \"Namespace\"\n\
         [[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n{tables}\n[config]\n{config}\n"
    )
}

/// As [`manifest`], for a tenant: no Namespaces (cluster-scoped), only its ConfigMaps.
fn tenant_manifest(tables: &str, config: &str) -> String {
    format!(
        "[limits]\nmemory-mib = 32\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n{tables}\n[config]\n{config}\n"
    )
}

/// One `[[admit]]` table for ConfigMaps.
fn table(name: &str, mode: &str, policy: &str, extra: &str) -> String {
    format!(
        "[[admit]]\nname = \"{name}\"\napi-version = \"v1\"\nkind = \"ConfigMap\"\n\
         mode = \"{mode}\"\nfailure-policy = \"{policy}\"\n{extra}\n"
    )
}

struct Host {
    server: DevServer,
    runtime: Runtime,
    dir: tempfile::TempDir,
    admin: std::net::SocketAddr,
    webhook: Webhook,
}

impl Host {
    /// The embedded server with namespaces `team-a` (labelled `team=alpha`) and `team-b`, and a
    /// host running `plugins` with admission on, registered with that server.
    async fn start(config: &str, plugins: &[Install<'_>]) -> Host {
        Host::start_with(config, plugins, false, None).await
    }

    /// As [`Host::start`]; `admission_only` runs no events (`--admission-only`), `record`
    /// appends the requests there (`--admission-record`).
    async fn start_with(
        config: &str,
        plugins: &[Install<'_>],
        admission_only: bool,
        record: Option<std::path::PathBuf>,
    ) -> Host {
        informant_tests::init_tracing();
        let server = DevServer::start(DevServerConfig::default())
            .await
            .expect("start API server");
        create_namespaces(&server, &["team-b"]);
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"team": "alpha"}}}))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (tenant, name, manifest) in plugins {
            install(dir.path(), tenant, name, manifest);
        }
        let config = format!("operator-plugins = true\n{config}");
        let mut host_config: HostConfig =
            informant_runtime::config::parse(&config, Path::new("informant.toml")).expect("config");
        host_config.restart = never_quarantined();
        let admin = free_addr();
        let runtime = Runtime::start(
            server.client(),
            RuntimeOptions {
                plugins: Some(dir.path().to_path_buf()),
                config: host_config,
                admin: Some(admin),
                admission: Some(AdmissionOptions {
                    record,
                    ..loopback_admission()
                }),
                admission_only,
                ..Default::default()
            },
        )
        .await
        .expect("runtime");
        let webhook = Webhook::new(
            runtime.admission_addr().unwrap(),
            &runtime.admission_ca_bundle().unwrap(),
        );
        let host = Host {
            server,
            runtime,
            dir,
            admin,
            webhook,
        };
        host.wait_registered().await;
        host
    }

    /// Waits until the configurations hold a webhook for every hook that runs.
    async fn wait_registered(&self) {
        registered(self.server.client(), &self.runtime).await;
    }

    fn configmaps(&self, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(self.server.client(), ns)
    }

    /// Creates a ConfigMap through the API server (and so through the webhooks).
    async fn create(&self, ns: &str, name: &str, labels: Value) -> Result<ConfigMap, kube::Error> {
        let cm: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"k": "v"},
        }))
        .unwrap();
        self.configmaps(ns)
            .create(&PostParams::default(), &cm)
            .await
    }

    async fn metrics(&self) -> String {
        get(self.admin, "/metrics").await.2
    }

    async fn stop(self) {
        self.runtime.stop().await;
        self.server.shutdown().await;
    }
}

fn install(dir: &Path, tenant: &str, name: &str, manifest: &str) {
    let dir = dir.join(tenant);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    std::fs::copy(wasm("admit"), dir.join(format!("{name}.wasm"))).unwrap();
}

/// The API server's refusal of a write: (code, message).
fn refusal(result: Result<ConfigMap, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse().expect("a counter"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validating_hook_denies_with_its_message_and_a_mutating_hooks_patch_is_stored() {
    let host = Host::start(
        "",
        &[
            (
                "",
                "deny",
                manifest(
                    &table("deny", "validate", "fail", ""),
                    "mode = \"deny-label\"\ntag = \"v1\"",
                ),
            ),
            (
                "",
                "team",
                manifest(
                    &table("team", "mutate", "fail", ""),
                    "mode = \"team-label\"",
                ),
            ),
        ],
    )
    .await;
    let (code, message) = refusal(
        host.create("team-a", "no", json!({"deny": "not-today"}))
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert_eq!(
        message,
        "admission webhook \"deny.deny.operator.admit.informant.dev\" denied the request: not-today"
    );
    let stored = host
        .create("team-a", "yes", json!({"app": "web"}))
        .await
        .unwrap();
    let labels = stored.metadata.labels.unwrap();
    assert_eq!(
        labels.get("team").map(String::as_str),
        Some("alpha"),
        "{labels:?}"
    );
    // What the API server stored, not only what it answered.
    let read = host.configmaps("team-a").get("yes").await.unwrap();
    assert_eq!(read.metadata.labels.unwrap()["team"], "alpha");
    // team-b has no team label: allowed without a patch.
    let plain = host.create("team-b", "plain", json!({})).await.unwrap();
    assert!(
        !plain
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("team")
    );

    let plugins: Value = serde_json::from_str(&get(host.admin, "/plugins").await.2).unwrap();
    let hooks = |name: &str| {
        plugins["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["admission"].clone())
    };
    assert_eq!(hooks("deny").unwrap()[0]["mode"], "validate", "{plugins}");
    assert_eq!(
        hooks("team").unwrap()[0]["kind"],
        "v1/ConfigMap",
        "{plugins}"
    );
    assert_eq!(
        hooks("team").unwrap()[0]["failure_policy"],
        "fail",
        "{plugins}"
    );

    let metrics = host.metrics().await;
    assert_eq!(
        counter(
            &metrics,
            "informant_admission_requests_total{plugin=\"deny\",tenant=\"\",hook=\"deny\",operation=\"create\",decision=\"deny\"}"
        ),
        1,
        "{metrics}"
    );
    assert_eq!(
        counter(
            &metrics,
            "informant_admission_requests_total{plugin=\"team\",tenant=\"\",hook=\"team\",operation=\"create\",decision=\"allow\"}"
        ),
        3,
        "mutating hooks run first: the denied create was patched before it was denied"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_is_denied_with_the_hooks_message_and_shows_its_warnings() {
    let Some(kubectl) = informant_test_tools::kubectl("1.32") else {
        return;
    };
    let host = Host::start(
        "",
        &[(
            "",
            "deny",
            manifest(
                &table("deny", "validate", "fail", ""),
                "mode = \"deny-label\"\ntag = \"dev\"",
            ),
        )],
    )
    .await;
    let kubeconfig = host.dir.path().join("kubeconfig");
    host.server.write_kubeconfig(&kubeconfig).unwrap();
    let apply = |name: &str, labels: &str| {
        let file = host.dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: team-a\n  labels: {labels}\ndata:\n  k: v\n"
            ),
        )
        .unwrap();
        std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["apply", "-f"])
            .arg(&file)
            .output()
            .expect("kubectl runs")
    };
    // Names YAML cannot take for booleans.
    let denied = tokio::task::block_in_place(|| apply("refused", "{deny: policy-says-no}"));
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(!denied.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "admission webhook \"deny.deny.operator.admit.informant.dev\" denied the request: policy-says-no"
        ),
        "{stderr}"
    );
    let allowed = tokio::task::block_in_place(|| apply("accepted", "{app: web}"));
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert!(allowed.status.success(), "{stderr}");
    assert!(stderr.contains("Warning: seen by dev"), "{stderr}");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_gets_its_own_failure_policy_while_another_keeps_answering() {
    let selected = |hook: &str| format!("object-selector = \"hook={hook}\"");
    let plugins = [
        ("trap", "validate", "ignore", "trap", ""),
        (
            "hang",
            "validate",
            "fail",
            "hang",
            "timeout-ms = 400\ntimeout-seconds = 2\n",
        ),
        ("garbage", "mutate", "fail", "garbage", ""),
        ("rename", "mutate", "fail", "rename", ""),
        ("move", "mutate", "fail", "move", ""),
        ("vpatch", "validate", "fail", "validate-patch", ""),
        ("write", "validate", "fail", "write", ""),
    ];
    let mut installs: Vec<Install> = plugins
        .iter()
        .map(|(name, mode, policy, plugin_mode, extra)| {
            (
                "",
                *name,
                manifest(
                    &table(name, mode, policy, &format!("{}\n{extra}", selected(name))),
                    &format!("mode = \"{plugin_mode}\""),
                ),
            )
        })
        .collect();
    installs.push((
        "",
        "deny",
        manifest(
            &table("deny", "validate", "fail", ""),
            "mode = \"deny-label\"",
        ),
    ));
    let host = Arc::new(Host::start("", &installs).await);

    // A trap under `ignore`: stored.
    host.create("team-a", "trapped", json!({"hook": "trap"}))
        .await
        .unwrap();
    // A hang under `fail`, and meanwhile the other plugin answers its own request.
    let hanging = {
        let host = host.clone();
        tokio::spawn(async move { host.create("team-a", "hung", json!({"hook": "hang"})).await })
    };
    let (code, message) = refusal(
        host.create("team-a", "denied", json!({"deny": "meanwhile"}))
            .await,
    );
    assert_eq!(
        (code, message.ends_with("denied the request: meanwhile")),
        (403, true),
        "{message}"
    );
    let (code, message) = refusal(hanging.await.unwrap());
    assert_eq!(code, 500, "{message}");
    assert!(
        message.contains("hook `hang` failed: missed its"),
        "{message}"
    );

    for (hook, expected) in [
        ("garbage", "its patch is not a JSON Patch"),
        ("rename", "its patch changes `metadata.name`"),
        ("move", "its patch changes `metadata.namespace`"),
        ("vpatch", "a validating hook answered with a patch"),
    ] {
        let (code, message) = refusal(
            host.create("team-a", &format!("x-{hook}"), json!({"hook": hook}))
                .await,
        );
        assert_eq!(code, 500, "{hook}: {message}");
        assert!(
            message.contains(&format!("hook `{hook}` failed: {expected}")),
            "{hook}: {message}"
        );
    }
    let (code, message) = refusal(
        host.create("team-a", "x-write", json!({"hook": "write"}))
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("writes are refused during admission"),
        "{message}"
    );
    assert!(
        host.configmaps("team-a")
            .get_opt("admit-write")
            .await
            .unwrap()
            .is_none(),
        "the write made during admission did not happen"
    );

    let metrics = host.metrics().await;
    for (plugin, reason) in [
        ("trap", "trap"),
        ("hang", "timeout"),
        ("garbage", "invalid"),
    ] {
        assert_eq!(
            counter(
                &metrics,
                &format!(
                    "informant_admission_failures_total{{plugin=\"{plugin}\",tenant=\"\",hook=\"{plugin}\",reason=\"{reason}\"}}"
                )
            ),
            1,
            "{plugin}"
        );
    }
    Arc::into_inner(host).unwrap().stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_hook_never_sees_nor_denies_another_tenants_requests() {
    let config = "[tenants.team-a]\nnamespaces = [\"team-a\"]\nresources = [\"v1/*\"]\n\
                  [tenants.team-b]\nnamespaces = [\"team-b\"]\nresources = [\"v1/*\"]\n";
    let host = Host::start(
        config,
        &[(
            "team-a",
            "deny",
            tenant_manifest(
                &table("deny", "validate", "fail", ""),
                "mode = \"deny-label\"",
            ),
        )],
    )
    .await;
    let (code, _) = refusal(host.create("team-a", "no", json!({"deny": "mine"})).await);
    assert_eq!(code, 403);
    // The same label in another tenant's namespace: the hook is not asked.
    host.create("team-b", "no", json!({"deny": "not-yours"}))
        .await
        .unwrap();
    // Forged straight to its path: allowed without asking the plugin.
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "forged", "namespace": "team-b", "labels": {"deny": "x"}}});
    let answer = host
        .webhook
        .review("/admit/team-a/deny/deny", &review("u-1", "CREATE", &object))
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert!(
        answer.allowed() && answer.response()["uid"] == "u-1",
        "{:?}",
        answer.body
    );
    let metrics = host.metrics().await;
    assert_eq!(
        counter(
            &metrics,
            "informant_admission_requests_total{plugin=\"deny\",tenant=\"team-a\",hook=\"deny\",operation=\"create\",decision=\"skip\"}"
        ),
        1,
        "only the forged request reached the host: the API server sent it nothing from team-b"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_reviews_are_answered_or_refused_and_the_hook_keeps_answering() {
    let host = Host::start(
        "",
        &[(
            "",
            "deny",
            manifest(
                &table("deny", "validate", "fail", ""),
                "mode = \"deny-label\"",
            ),
        )],
    )
    .await;
    let w = &host.webhook;
    let cm = |labels: Value, data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "team-a", "labels": labels}, "data": data})
    };
    // Several MB: answered.
    let big = cm(json!({"deny": "big"}), json!({"k": "x".repeat(6 << 20)}));
    let answer = w
        .review("/admit/deny/deny", &review("big", "CREATE", &big))
        .await;
    assert_eq!(
        (answer.status, answer.allowed(), answer.message()),
        (200, false, "big")
    );
    // Past the cap: refused before it is read.
    let huge = cm(json!({}), json!({"k": "x".repeat(17 << 20)}));
    let answer = w
        .review("/admit/deny/deny", &review("huge", "CREATE", &huge))
        .await;
    assert_eq!(answer.status, 413, "{:?}", answer.body);
    // Nested deeper than any object: not a review.
    let nested = format!(
        "{{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{{\"object\":{}1{}}}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let answer = w.post("/admit/deny/deny", nested.as_bytes()).await;
    assert_eq!(answer.status, 400, "{:?}", answer.body);
    assert_eq!(w.post("/admit/deny/deny", b"not json").await.status, 400);
    // A kind it did not register: allowed without asking it.
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "team-a", "labels": {"deny": "x"}}});
    let answer = w
        .review("/admit/deny/deny", &review("s", "CREATE", &secret))
        .await;
    assert!(answer.allowed(), "{:?}", answer.body);
    // Paths that name no hook.
    for path in [
        "/admit/deny/other",
        "/admit/../deny/deny",
        "/admit/deny%2Fdeny",
        "/admit/x/deny/deny",
        "/admit/deny/deny/extra/segment",
        "/admit/deny/deny%20",
        "/admit/deny/deny/",
    ] {
        let answer = w
            .review(path, &review("p", "CREATE", &cm(json!({}), json!({}))))
            .await;
        assert_eq!(answer.status, 404, "{path}: {:?}", answer.body);
    }
    // And it still answers.
    let answer = w
        .review(
            "/admit/deny/deny",
            &review("after", "CREATE", &cm(json!({"deny": "still"}), json!({}))),
        )
        .await;
    assert_eq!((answer.allowed(), answer.message()), (false, "still"));
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_slow_requests_to_one_plugin_leaves_anothers_answers_alone() {
    let host = Arc::new(
        Host::start(
            "",
            &[
                (
                    "",
                    "slow",
                    manifest(
                        &table(
                            "slow",
                            "validate",
                            "fail",
                            "timeout-ms = 600\ntimeout-seconds = 2",
                        ),
                        "mode = \"sleep\"\nsleep-ms = 400",
                    ),
                ),
                (
                    "",
                    "quick",
                    manifest(
                        &table("quick", "validate", "fail", ""),
                        "mode = \"deny-label\"",
                    ),
                ),
            ],
        )
        .await,
    );
    let cm = |name: String, labels: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels}})
    };
    let flood: Vec<_> = (0..40)
        .map(|i| {
            let w = host.webhook.clone();
            let object = cm(format!("slow-{i}"), json!({}));
            tokio::spawn(async move {
                w.review(
                    "/admit/slow/slow",
                    &review(&format!("s{i}"), "CREATE", &object),
                )
                .await
            })
        })
        .collect();
    for i in 0..20 {
        let object = cm(format!("quick-{i}"), json!({"deny": format!("q{i}")}));
        let answer = host
            .webhook
            .review(
                "/admit/quick/quick",
                &review(&format!("q{i}"), "CREATE", &object),
            )
            .await;
        assert_eq!(
            (answer.allowed(), answer.message()),
            (false, format!("q{i}").as_str())
        );
    }
    let mut refused = 0;
    for answer in futures::future::join_all(flood).await {
        let answer = answer.unwrap();
        assert_eq!(answer.status, 200);
        if !answer.allowed() {
            assert!(
                answer.message().contains("hook `slow` failed"),
                "{}",
                answer.message()
            );
            refused += 1;
        }
    }
    // Four instances at 400 ms each cannot answer forty requests within 600 ms: the rest
    // waited for an instance in vain (busy), or got one too late to finish (timeout).
    let metrics = host.metrics().await;
    let failures = |reason: &str| {
        counter(
            &metrics,
            &format!(
                "informant_admission_failures_total{{plugin=\"slow\",tenant=\"\",hook=\"slow\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert!(failures("busy") > 0, "the pool bounded the flood");
    assert_eq!(failures("busy") + failures("timeout"), refused);
    Arc::into_inner(host).unwrap().stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_swap_under_a_stream_of_requests_loses_none_and_mixes_no_versions() {
    let host = Arc::new(
        Host::start(
            "",
            &[(
                "",
                "deny",
                manifest(
                    &table("deny", "validate", "fail", ""),
                    "mode = \"deny-label\"\ntag = \"v1\"",
                ),
            )],
        )
        .await,
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stream = {
        let (w, stop) = (host.webhook.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("c{i}"), "namespace": "team-a"}});
                let answer = w
                    .review(
                        "/admit/deny/deny",
                        &review(&format!("u{i}"), "CREATE", &object),
                    )
                    .await;
                assert_eq!(answer.status, 200, "request {i}: {:?}", answer.body);
                assert!(answer.allowed(), "request {i}: {:?}", answer.body);
                seen.push(answer.warnings());
                i += 1;
            }
            seen
        })
    };
    let runtime_host = host.runtime.host.clone().unwrap();
    std::fs::write(
        host.dir.path().join("deny.toml"),
        manifest(
            &table("deny", "validate", "fail", ""),
            "mode = \"deny-label\"\ntag = \"v2\"",
        ),
    )
    .unwrap();
    let report = runtime_host.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // Until the stream has seen the new version answer.
    let w = host.webhook.clone();
    guarded("the new version to answer", async {
        loop {
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "probe", "namespace": "team-a"}});
            if w.review("/admit/deny/deny", &review("probe", "CREATE", &object))
                .await
                .warnings()
                == ["seen by v2"]
            {
                return;
            }
        }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = stream.await.unwrap();
    assert!(!seen.is_empty());
    let first_v2 = seen
        .iter()
        .position(|w| w == &["seen by v2"])
        .unwrap_or(seen.len());
    for (i, w) in seen.iter().enumerate() {
        let expected = if i < first_v2 {
            "seen by v1"
        } else {
            "seen by v2"
        };
        assert_eq!(w, &[expected.to_string()], "answer {i} of {}", seen.len());
    }
    Arc::into_inner(host).unwrap().stop().await;
}

/// A host of its own on `server`, sharing the managed certificates of Secret
/// `informant-system/admission-tls` (read every 100 ms; a new CA signs after 1 s).
async fn replica(server: &DevServer, dir: &Path) -> Runtime {
    use informant_runtime::admission::CertSecret;
    use informant_runtime::admission::certs::CertOptions;
    let config =
        informant_runtime::config::parse("operator-plugins = true\n", Path::new("informant.toml"))
            .unwrap();
    Runtime::start(
        server.client(),
        RuntimeOptions {
            plugins: Some(dir.to_path_buf()),
            config,
            admission: Some(AdmissionOptions {
                addr: "127.0.0.1:0".parse().unwrap(),
                tls: ServerTls::Plain,
                register: Some((WEBHOOK.into(), Endpoint::Url(String::new()))),
                cert_secret: Some(CertSecret {
                    namespace: "informant-system".into(),
                    name: "admission-tls".into(),
                    options: CertOptions {
                        refresh: std::time::Duration::from_millis(100),
                        ca_settle: std::time::Duration::from_secs(1),
                        ..Default::default()
                    },
                }),
                record: None,
            }),
            ..Default::default()
        },
    )
    .await
    .expect("replica")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_managed_certificate_and_rotations_under_load_fail_no_request() {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    create_namespaces(&server, &["informant-system", "team-a"]);
    let dir = tempfile::tempdir().unwrap();
    install(
        dir.path(),
        "",
        "deny",
        &manifest(
            &table("deny", "validate", "fail", ""),
            "mode = \"deny-label\"",
        ),
    );
    let (a, b) = (
        Arc::new(replica(&server, dir.path()).await),
        Arc::new(replica(&server, dir.path()).await),
    );
    // Each time trusting the bundle the replica has now, as the API server does.
    let served = |r: Arc<Runtime>| async move {
        Webhook::new(
            r.admission_addr().unwrap(),
            &r.admission_ca_bundle().unwrap(),
        )
        .served_certificate()
        .await
    };
    let first = served(a.clone()).await;
    assert_eq!(
        first,
        served(b.clone()).await,
        "a second replica serves the same certificate"
    );

    // A stream of creates through the API server, which calls the webhooks with the caBundle
    // the hosts keep in the configurations.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stream = {
        let (client, stop) = (server.client(), stop.clone());
        tokio::spawn(async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "team-a");
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("c{n}")}, "data": {"k": "v"}}))
                .unwrap();
                api.create(&PostParams::default(), &cm)
                    .await
                    .unwrap_or_else(|e| panic!("create {n} failed: {e}"));
                n += 1;
            }
            n
        })
    };
    let until_both_serve = |what: &'static str, differs_from: Vec<u8>| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            guarded(what, async {
                loop {
                    let (ca, cb) = (served(a.clone()).await, served(b.clone()).await);
                    if ca == cb && ca != differs_from {
                        return ca;
                    }
                    // The replicas read the Secret on a timer: poll for the condition.
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            })
            .await
        }
    };
    a.admission_certs().unwrap().rotate().await.unwrap();
    let second = until_both_serve("both replicas to serve the rotated certificate", first).await;
    // A CA rollover: the new CA joins the bundle, then signs the serving certificate.
    a.admission_certs().unwrap().roll_ca().await.unwrap();
    let bundle = |r: &Runtime| r.admission_ca_bundle().unwrap();
    guarded("the new CA in both replicas' bundles", async {
        while !(String::from_utf8_lossy(&bundle(&a))
            .matches("BEGIN CERTIFICATE")
            .count()
            == 2
            && bundle(&a) == bundle(&b))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    until_both_serve("the new CA's certificate", second).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let created = stream.await.unwrap();
    assert!(created > 0);
    // And every one of them went through the webhook.
    let api: Api<ValidatingWebhookConfiguration> = Api::all(server.client());
    assert!(
        api.get(WEBHOOK)
            .await
            .unwrap()
            .webhooks
            .is_some_and(|w| w.len() == 1)
    );
    Arc::into_inner(a).unwrap().stop().await;
    Arc::into_inner(b).unwrap().stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_only_host_answers_from_its_caches_and_delivers_no_event() {
    let host = Host::start_with(
        "",
        &[(
            "",
            "team",
            manifest(
                &table("team", "mutate", "fail", ""),
                "mode = \"team-label\"",
            ),
        )],
        true,
        None,
    )
    .await;
    // The hook reads the Namespace from the cache its informer keeps.
    let stored = host.create("team-a", "web", json!({})).await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["team"], "alpha");
    let plugins: Value = serde_json::from_str(&get(host.admin, "/plugins").await.2).unwrap();
    let team = &plugins["plugins"][0];
    assert_eq!(
        (team["name"].as_str(), team["handled"].as_u64()),
        (Some("team"), Some(0)),
        "{team}"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_reads_many_objects_by_index_as_json_as_metadata_or_as_a_count() {
    let host = Host::start(
        "",
        &[
            (
                "",
                "json",
                manifest(
                    &table("json", "validate", "fail", ""),
                    "mode = \"count-index\"",
                ),
            ),
            (
                "",
                "meta",
                manifest(
                    &table("meta", "validate", "fail", ""),
                    "mode = \"count-index-meta\"",
                ),
            ),
            (
                "",
                "count",
                manifest(
                    &table("count", "validate", "fail", ""),
                    "mode = \"count-index-host\"",
                ),
            ),
        ],
    )
    .await;
    for i in 0..5 {
        let labels = if i < 3 {
            json!({"app": "web"})
        } else {
            json!({})
        };
        host.server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("c{i}"), "namespace": "team-b", "labels": labels}}))
            .unwrap();
    }
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "new", "namespace": "team-b"}});
    let ask = |path: &'static str, expected: &'static str| {
        let (w, object) = (host.webhook.clone(), object.clone());
        async move {
            // The informer may not have seen the last create yet: ask until it has.
            informant_tests::guarded(path, async {
                while w
                    .review(path, &review("n", "CREATE", &object))
                    .await
                    .warnings()
                    != [expected]
                {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            })
            .await
        }
    };
    ask("/admit/json/json", "5 objects").await;
    ask("/admit/meta/meta", "3 objects labelled app").await;
    ask("/admit/count/count", "3 objects labelled app").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_reviews_replay_offline_to_the_same_answers() {
    use informant_runtime::replay::{ReplayConfig, replay};
    let recording = tempfile::NamedTempFile::new().unwrap();
    let deny = manifest(
        &table("deny", "validate", "fail", ""),
        "mode = \"deny-label\"",
    );
    let host = Host::start_with(
        "",
        &[("", "deny", deny.clone())],
        false,
        Some(recording.path().to_path_buf()),
    )
    .await;
    refusal(
        host.create("team-a", "no", json!({"deny": "recorded"}))
            .await,
    );
    host.create("team-a", "yes", json!({})).await.unwrap();
    host.stop().await;
    let reviews: Vec<Value> = std::fs::read_to_string(recording.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one review a line"))
        .collect();
    assert_eq!(reviews.len(), 2, "{reviews:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(recording.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the recording holds objects: {mode:o}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("deny.toml"), &deny).unwrap();
    let engine = Arc::new(
        informant_runtime::plugin::exec::engine::PluginEngine::new(Default::default()).unwrap(),
    );
    let config = ReplayConfig {
        wasm: wasm("admit"),
        manifest: Some(dir.path().join("deny.toml")),
        host: HostConfig::default(),
        reviews: reviews.clone(),
    };
    let outcome = replay(engine, &config, Vec::new(), Vec::new(), |_| {})
        .await
        .expect("replay");
    let answers: Vec<(Value, Value, Value)> = outcome
        .admissions
        .iter()
        .map(|a| {
            (
                a["uid"].clone(),
                a["decision"].clone(),
                a["response"]["status"]["message"].clone(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [
            (
                reviews[0]["request"]["uid"].clone(),
                json!("deny"),
                json!("recorded")
            ),
            (
                reviews[1]["request"]["uid"].clone(),
                json!("allow"),
                Value::Null
            ),
        ]
    );
}
