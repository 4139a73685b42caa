//! A TypeScript admission hook end to end: `plugins/image-policy-ts`, built by the JS SDK's
//! toolchain with its own manifest, answers the embedded API server's webhook calls (registered
//! by the host, over HTTPS verified with the CA it made). kube-rs creates Pods through them: one
//! with an image from outside the allowed registries is denied with the plugin's message, one
//! from inside is stored, labelled with its namespace's team by the mutating table. Skipped, as
//! every JS plugin test is, when Node.js or the toolchain cannot be had.

use std::path::Path;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_tests::admission::{loopback_admission, registered};
use informant_tests::create_namespaces;
use informant_tests::plugins::{js_wasm, never_quarantined};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

/// The plugin's name, and its directory in the workspace.
const PLUGIN: &str = "image-policy-ts";

struct Host {
    server: DevServer,
    runtime: Runtime,
    _dir: tempfile::TempDir,
}

impl Host {
    /// The embedded server with namespaces `team-a` (labelled `team=alpha`) and `team-b`, and a
    /// host running the `component` under the example's own manifest, with admission on,
    /// registered with that server.
    async fn start(component: &Path) -> Host {
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
        let example = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../plugins")
            .join(PLUGIN);
        std::fs::copy(
            example.join(format!("{PLUGIN}.toml")),
            dir.path().join(format!("{PLUGIN}.toml")),
        )
        .unwrap();
        std::fs::copy(component, dir.path().join(format!("{PLUGIN}.wasm"))).unwrap();
        let mut config: HostConfig = informant_runtime::config::parse(
            "operator-plugins = true\n",
            Path::new("informant.toml"),
        )
        .expect("config");
        config.restart = never_quarantined();
        let runtime = Runtime::start(
            server.client(),
            RuntimeOptions {
                plugins: Some(dir.path().to_path_buf()),
                config,
                admission: Some(loopback_admission()),
                ..Default::default()
            },
        )
        .await
        .expect("runtime");
        let host = Host {
            server,
            runtime,
            _dir: dir,
        };
        host.wait_registered().await;
        host
    }

    /// Waits until the configurations hold a webhook for every hook that runs (the example has
    /// four).
    async fn wait_registered(&self) {
        let hooks: usize = (self.runtime.host.as_ref().unwrap().admitters().iter())
            .map(|(_, a)| a.hooks().len())
            .sum();
        assert_eq!(hooks, 4, "the example's [[admit]] tables all run");
        registered(self.server.client(), &self.runtime).await;
    }

    /// Creates a Pod through the API server (and so through the webhooks).
    async fn create_pod(&self, ns: &str, name: &str, image: &str) -> Result<Pod, kube::Error> {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "web", "image": image}]},
        }))
        .unwrap();
        Api::namespaced(self.server.client(), ns)
            .create(&PostParams::default(), &pod)
            .await
    }

    async fn stop(self) {
        self.runtime.stop().await;
        self.server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_hook_denies_foreign_images_with_its_message_and_labels_the_rest() {
    let Some(component) = js_wasm(&format!("plugins/{PLUGIN}")) else {
        return;
    };
    let host = Host::start(&component).await;

    let (code, message) = match host.create_pod("team-a", "foreign", "nginx:1.27").await {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(code, 403, "{message}");
    assert_eq!(
        message,
        format!(
            "admission webhook \"images-pods.{PLUGIN}.operator.admit.informant.dev\" denied the \
             request: images not from an allowed registry (registry.example.com, \
             ghcr.io/example): container `web` uses `nginx:1.27`"
        )
    );
    let pods: Api<Pod> = Api::namespaced(host.server.client(), "team-a");
    assert!(
        pods.get_opt("foreign").await.unwrap().is_none(),
        "a denied Pod is not stored"
    );

    let stored = host
        .create_pod("team-a", "allowed", "registry.example.com/web:1.4")
        .await
        .expect("an image from an allowed registry is admitted");
    // What the API server stored, labelled by the mutating table from the cached Namespace.
    let read = pods.get("allowed").await.unwrap();
    for pod in [&stored, &read] {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("team").map(String::as_str),
            Some("alpha"),
            "{labels:?}"
        );
    }
    // team-b has no team label: admitted unlabelled.
    let plain = host
        .create_pod("team-b", "plain", "ghcr.io/example/app@sha256:ab")
        .await
        .unwrap();
    assert!(
        !(plain.metadata.labels.unwrap_or_default()).contains_key("team"),
        "no team to copy"
    );
    host.stop().await;
}
