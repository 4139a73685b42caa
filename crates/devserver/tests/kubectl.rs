//! The embedded API server driven by the machine's real `kubectl`: namespaces, client-side and
//! server-side apply (with the server computing the merge), CRDs and their objects, output
//! formats, watches, label/annotate/patch, delete and api-resources. Each kubectl gets a fresh
//! `--cache-dir` so discovery is never served from another test's cache. kubectl missing is a
//! failure, not a skip.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::time::timeout;

const GUARD: Duration = Duration::from_secs(60);
const VERSIONED: &str = "/usr/lib/google-cloud-sdk/bin";

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
}

impl Kubectl {
    fn new(bin: impl Into<PathBuf>, kubeconfig: &Path) -> Kubectl {
        let bin = bin.into();
        assert!(
            bin.is_absolute() && bin.exists() || which(&bin).is_some(),
            "kubectl binary {bin:?} is missing: these tests need a real kubectl"
        );
        Kubectl {
            bin,
            kubeconfig: kubeconfig.to_path_buf(),
            cache: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path());
        c.args(args).kill_on_drop(true);
        c
    }

    /// Runs kubectl (optionally with stdin); asserts exit 0 and a clean stderr; returns stdout.
    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (code, out, err) = self.run(args, stdin).await;
        assert_eq!(
            code,
            Some(0),
            "kubectl {args:?} failed ({:?}):\nstdout: {out}\nstderr: {err}",
            self.bin
        );
        assert_clean(&err, args);
        out
    }

    async fn run(&self, args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", self.bin));
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.unwrap();
        }
        drop(input);
        let out = timeout(GUARD, child.wait_with_output())
            .await
            .expect("kubectl finished")
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&full, None).await).expect("kubectl -o json prints JSON")
    }
}

fn which(bin: &Path) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_string_lossy()
        .split(':')
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.exists())
}

fn assert_clean(stderr: &str, args: &[&str]) {
    let bad: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        bad.is_empty(),
        "kubectl {args:?} wrote to stderr:\n{}",
        bad.join("\n")
    );
}

const DEPLOYMENT: &str = "
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        ports:
        - containerPort: 80
      - name: sidecar
        image: busybox:1
";

const CRD: &str = "
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wg]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

fn widget(name: &str, size: u32) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: demo}}\nspec: {{size: {size}}}\n"
    )
}

async fn start() -> (DevServer, tempfile::TempDir, PathBuf) {
    let srv = DevServer::start(DevServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    srv.write_kubeconfig(&kc).unwrap();
    (srv, dir, kc)
}

/// Namespace, apply twice (server-computed merge), CRD + custom object, api-resources, delete.
async fn key_flow(k: &Kubectl, srv: &DevServer) {
    assert_eq!(
        k.ok(&["create", "namespace", "demo"], None).await.trim(),
        "namespace/demo created"
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(DEPLOYMENT))
            .await
            .contains("deployment.apps/web created")
    );
    let changed = DEPLOYMENT
        .replace("nginx:1.25", "nginx:1.26")
        .replace("replicas: 2", "replicas: 3");
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&changed))
            .await
            .contains("deployment.apps/web configured")
    );

    // The server applied kubectl's strategic merge patch: containers merged by name.
    let d = k.json(&["get", "deployment", "web", "-n", "demo"]).await;
    assert_eq!(d["spec"]["replicas"], 3);
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    assert_eq!(images, ["nginx:1.26", "busybox:1"]);
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80);
    assert_eq!(d["metadata"]["generation"], 2);
    // The same object seen directly in the store.
    let rv = d["metadata"]["resourceVersion"].as_str().unwrap();
    assert!(srv.url().starts_with("http://127.0.0.1:") && rv.parse::<u64>().is_ok());

    assert!(
        k.ok(&["apply", "-f", "-"], Some(CRD))
            .await
            .contains("widgets.example.com created")
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&widget("w1", 3)))
            .await
            .contains("widget.example.com/w1 created")
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&widget("w1", 4)))
            .await
            .contains("widget.example.com/w1 configured")
    );
    let w = k.json(&["get", "wg", "w1", "-n", "demo"]).await;
    assert_eq!(w["spec"]["size"], 4);
    let resources = k.ok(&["api-resources"], None).await;
    assert!(
        resources.lines().any(|l| l.starts_with("widgets ")
            && l.contains("example.com/v1")
            && l.contains("Widget")),
        "{resources}"
    );

    assert!(
        k.ok(&["delete", "widget", "w1", "-n", "demo"], None)
            .await
            .contains("\"w1\" deleted")
    );
    let (code, _, err) = k.run(&["get", "widget", "w1", "-n", "demo"], None).await;
    assert_eq!(code, Some(1));
    assert!(
        err.contains("NotFound") && err.contains("\"w1\" not found"),
        "{err}"
    );
}

/// The key flow, then output formats, label/annotate/patch, server-side apply, watches and
/// namespace deletion.
async fn full_flow(k: &Kubectl, srv: &DevServer) {
    key_flow(k, srv).await;

    // Output formats.
    let yaml = k
        .ok(
            &["get", "deployment", "web", "-n", "demo", "-o", "yaml"],
            None,
        )
        .await;
    assert!(
        yaml.contains("kind: Deployment") && yaml.contains("image: nginx:1.26"),
        "{yaml}"
    );
    let table = k.ok(&["get", "deployments", "-n", "demo"], None).await;
    let mut lines = table.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["NAME", "AGE"])
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("web ")),
        "{table}"
    );

    // label / annotate / merge patch.
    assert!(
        k.ok(
            &["label", "deployment", "web", "-n", "demo", "tier=front"],
            None
        )
        .await
        .contains("labeled")
    );
    assert!(
        k.ok(
            &["annotate", "deployment", "web", "-n", "demo", "note=hi"],
            None
        )
        .await
        // kubectl 1.27 prints "annotate", later ones "annotated".
        .contains("deployment.apps/web annotate")
    );
    let selected = k
        .ok(
            &[
                "get",
                "deployments",
                "-n",
                "demo",
                "-l",
                "tier in (front),app",
                "-o",
                "name",
            ],
            None,
        )
        .await;
    assert_eq!(selected.trim(), "deployment.apps/web");
    let patch = r#"{"spec":{"replicas":5}}"#;
    assert!(
        k.ok(
            &[
                "patch",
                "deployment",
                "web",
                "-n",
                "demo",
                "--type",
                "merge",
                "-p",
                patch
            ],
            None
        )
        .await
        .contains("patched")
    );
    let d = k.json(&["get", "deployment", "web", "-n", "demo"]).await;
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(d["metadata"]["labels"]["tier"], "front");
    assert_eq!(d["metadata"]["annotations"]["note"], "hi");

    // Server-side apply.
    let ssa =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: demo}\ndata: {a: '1'}\n";
    assert!(
        k.ok(&["apply", "--server-side", "-f", "-"], Some(ssa))
            .await
            .contains("serverside-applied")
    );
    let ssa2 = ssa.replace("a: '1'", "a: '2'");
    assert!(
        k.ok(&["apply", "--server-side", "-f", "-"], Some(&ssa2))
            .await
            .contains("serverside-applied")
    );
    assert_eq!(
        k.json(&["get", "configmap", "cfg", "-n", "demo"]).await["data"]["a"],
        "2"
    );

    // get -w sees a later change (plain objects via jsonpath).
    let mut cmd = k.command(&[
        "get",
        "deployment",
        "web",
        "-n",
        "demo",
        "-w",
        "-o",
        "jsonpath={.spec.replicas}{\"\\n\"}",
    ]);
    let mut watch = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = timeout(GUARD, out.next_line()).await.unwrap().unwrap();
    assert_eq!(first.as_deref(), Some("5"));
    let patch = r#"{"spec":{"replicas":7}}"#;
    k.ok(
        &[
            "patch",
            "deployment",
            "web",
            "-n",
            "demo",
            "--type",
            "merge",
            "-p",
            patch,
        ],
        None,
    )
    .await;
    let next = timeout(GUARD, out.next_line()).await.unwrap().unwrap();
    assert_eq!(next.as_deref(), Some("7"));
    watch.kill().await.unwrap();

    // get -w on a custom resource (server-side Table rows) sees a new object.
    k.ok(&["apply", "-f", "-"], Some(CRD)).await;
    let mut cmd = k.command(&["get", "widgets", "-n", "demo", "-w"]);
    let mut watch = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watch.stdout.take().unwrap()).lines();
    k.ok(&["apply", "-f", "-"], Some(&widget("w2", 1))).await;
    let found = timeout(GUARD, async {
        while let Some(line) = out.next_line().await.unwrap() {
            if line.starts_with("w2 ") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "kubectl get -w never printed w2");
    watch.kill().await.unwrap();

    // Namespace deletion takes its objects with it.
    assert!(
        k.ok(&["delete", "namespace", "demo"], None)
            .await
            .contains("namespace \"demo\" deleted")
    );
    let left = k
        .ok(
            &["get", "deployments,configmaps,widgets", "-A", "-o", "name"],
            None,
        )
        .await;
    assert_eq!(left.trim(), "", "objects left after namespace deletion");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_full_flow() {
    let (srv, _dir, kc) = start().await;
    full_flow(&Kubectl::new("kubectl", &kc), &srv).await;
    srv.shutdown().await;
}

/// 1.27 and 1.28 decide on server-side field validation from the protobuf OpenAPI v2, 1.33 from
/// the OpenAPI v3; all run with default validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_old_and_newest_versions() {
    let versions: Vec<PathBuf> = ["1.27", "1.28", "1.33"]
        .iter()
        .map(|v| Path::new(VERSIONED).join(format!("kubectl.{v}")))
        .collect();
    for bin in versions {
        assert!(
            bin.exists(),
            "{bin:?} is missing: these tests need the versioned kubectl binaries"
        );
        let (srv, _dir, kc) = start().await;
        full_flow(&Kubectl::new(&bin, &kc), &srv).await;
        srv.shutdown().await;
    }
}
