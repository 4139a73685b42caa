//! `kubectl` against the admitted server (the one on PATH; skipped without one).

use std::time::Duration;

use serde_json::json;

use super::webhook::{Reply, Webhook, config_map, response, server, validating};

/// `kubectl apply` of the configuration and of a ConfigMap the webhook denies: kubectl prints
/// the webhook's message and its warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_prints_the_denial_and_the_warning() {
    let Some(kubectl) = informant_test_tools::need("kubectl", None) else {
        return;
    };
    let hook = Webhook::start(|_, review| {
        Reply::Json(response(
            review,
            json!({"allowed": false, "warnings": ["configmaps are watched"],
                   "status": {"message": "configmaps need an owner"}}),
        ))
    })
    .await;
    let srv = server().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    let run = |stdin: String| {
        let mut cmd = tokio::process::Command::new(&kubectl);
        cmd.arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(["apply", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        async move {
            use tokio::io::AsyncWriteExt as _;
            let mut child = cmd.spawn().unwrap();
            let mut input = child.stdin.take().unwrap();
            input.write_all(stdin.as_bytes()).await.unwrap();
            drop(input);
            tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
                .await
                .expect("kubectl finishes")
                .unwrap()
        }
    };
    let config = validating(
        "owners",
        vec![hook.hook("owner.example.com", "/", json!({}))],
    );
    let out = run(config.to_string()).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(serde_json::to_string(&config_map("a")).unwrap()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "admission webhook \"owner.example.com\" denied the request: configmaps need an owner"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Warning: configmaps are watched"),
        "{stderr}"
    );
    srv.shutdown().await;
}
