//! The embedded API server driven by every real `kubectl` on the machine (`kubectl.1.27` …
//! `kubectl.1.33` and the `kubectl` on PATH, found as `informant_test_tools::kubectl` says), one
//! test per binary so they run side by side.
//! Each runs the same everyday session: `create` of each common kind (protobuf bodies from
//! kubectl ≥ 1.32), client- and server-side apply, get, describe, edit, label, annotate, patch,
//! scale, `rollout status` (which must fail at once, saying so, since nothing rolls out here),
//! the status subresource, `metadata.generation`, CRDs and their objects, watches and delete.
//! Each kubectl gets a fresh `--cache-dir` so discovery is never served from another test's
//! cache. A missing kubectl skips its test with a printed reason, or fails it when the run sets
//! `INFORMANT_REQUIRE_ALL=1`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
}

impl Kubectl {
    fn new(bin: PathBuf, kubeconfig: &Path) -> Kubectl {
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
        self.ok_env(args, stdin, &[]).await
    }

    /// [`Kubectl::ok`] with extra environment variables.
    async fn ok_env(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> String {
        let (code, out, err) = self.run_env(args, stdin, env).await;
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
        self.run_env(args, stdin, &[]).await
    }

    async fn run_env(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> (Option<i32>, String, String) {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied())
            .stdin(Stdio::piped())
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
            .unwrap_or_else(|_| panic!("kubectl {args:?} ({:?}) did not finish", self.bin))
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

    /// `kubectl get KIND NAME -n demo -o json`.
    async fn get(&self, kind: &str, name: &str) -> Value {
        self.json(&["get", kind, name, "-n", "demo"]).await
    }
}

fn assert_clean(stderr: &str, args: &[&str]) {
    let bad: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        bad.is_empty(),
        "kubectl {args:?} wrote to stderr:\n{}",
        bad.join("\n")
    );
}

fn generation(obj: &Value) -> Option<i64> {
    obj["metadata"]["generation"].as_i64()
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

/// A CRD with the status and scale subresources.
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
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
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

/// `kubectl create` of each everyday kind; kubectl ≥ 1.32 sends these bodies as protobuf.
/// Kinds without a spec-driven generation (Namespace, Service, Secret, ConfigMap,
/// ServiceAccount) get none; workloads start at 1.
async fn creates(k: &Kubectl) {
    assert_eq!(
        k.ok(&["create", "namespace", "demo"], None).await.trim(),
        "namespace/demo created"
    );
    let ns = k.json(&["get", "namespace", "demo"]).await;
    assert_eq!(
        (generation(&ns), &ns["status"]["phase"]),
        (None, &json!("Active"))
    );

    let creates: [(&[&str], &str); 7] = [
        (
            &["deployment", "made", "--image=nginx"],
            "deployment.apps/made created",
        ),
        (
            &["job", "once", "--image=busybox"],
            "job.batch/once created",
        ),
        (
            &[
                "cronjob",
                "tick",
                "--image=busybox",
                "--schedule=*/5 * * * *",
            ],
            "cronjob.batch/tick created",
        ),
        (
            &["service", "clusterip", "front", "--tcp=80:8080"],
            "service/front created",
        ),
        (
            &["secret", "generic", "creds", "--from-literal=user=admin"],
            "secret/creds created",
        ),
        (
            &["configmap", "settings", "--from-literal=mode=dev"],
            "configmap/settings created",
        ),
        (&["serviceaccount", "robot"], "serviceaccount/robot created"),
    ];
    for (args, printed) in creates {
        let full = [&["create"], args, &["-n", "demo"]].concat();
        assert_eq!(k.ok(&full, None).await.trim(), printed);
    }
    let list = k
        .json(&[
            "get",
            "-n",
            "demo",
            "deployment/made",
            "job/once",
            "cronjob/tick",
            "service/front",
            "secret/creds",
            "configmap/settings",
            "serviceaccount/robot",
        ])
        .await;
    let items = list["items"].as_array().unwrap();
    let item = |kind: &str| {
        items
            .iter()
            .find(|i| i["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {list}"))
    };
    let made = item("Deployment");
    assert_eq!(generation(made), Some(1));
    assert_eq!(made["spec"]["replicas"], 1);
    assert_eq!(
        made["spec"]["selector"],
        json!({"matchLabels": {"app": "made"}})
    );
    assert_eq!(
        made["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
    assert_eq!(made["status"]["observedGeneration"], 1);
    let once = item("Job");
    assert_eq!(generation(once), Some(1));
    assert_eq!(
        once["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox"
    );
    let tick = item("CronJob");
    assert_eq!(generation(tick), Some(1));
    assert_eq!(tick["spec"]["schedule"], "*/5 * * * *");
    let front = item("Service");
    assert_eq!(front["spec"]["ports"][0]["port"], 80);
    assert_eq!(front["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(item("Secret")["data"]["user"], "YWRtaW4=");
    assert_eq!(item("ConfigMap")["data"]["mode"], "dev");
    for kind in ["Service", "Secret", "ConfigMap", "ServiceAccount"] {
        assert_eq!(generation(item(kind)), None, "{kind} has no generation");
    }
}

/// Apply twice (server-computed strategic merge), describe, label/annotate/patch/edit with the
/// generation each should (or should not) start.
async fn deployment_edits(k: &Kubectl) {
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
    let d = k.get("deployment", "web").await;
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
    assert_eq!(generation(&d), Some(2));

    let described = k
        .ok(&["describe", "deployment", "web", "-n", "demo"], None)
        .await;
    for want in ["Name:", "Namespace:", "Replicas:", "nginx:1.26"] {
        assert!(described.contains(want), "{want} in {described}");
    }
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("Name:") && l.ends_with(" web")),
        "{described}"
    );

    // Output formats.
    let yaml = k
        .ok(
            &["get", "deployment", "web", "-n", "demo", "-o", "yaml"],
            None,
        )
        .await;
    assert!(yaml.contains("kind: Deployment"), "{yaml}");
    let table = k.ok(&["get", "deployments", "-n", "demo"], None).await;
    let mut lines = table.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"])
    );
    // No controller runs, so nothing is ready: `0/replicas`, as on a cluster without nodes.
    assert!(
        table.lines().any(|l| l.starts_with("web ")
            && l.split_whitespace()
                .nth(1)
                .is_some_and(|r| r.starts_with("0/"))),
        "{table}"
    );
    let wide = k
        .ok(&["get", "deployments", "-n", "demo", "-o", "wide"], None)
        .await;
    assert_eq!(
        wide.lines()
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec![
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]),
        "{wide}"
    );

    // A label is not a new generation; on a Deployment an annotation is.
    let web = ["deployment", "web", "-n", "demo"];
    assert!(
        k.ok(&[&["label"][..], &web, &["tier=front"]].concat(), None)
            .await
            .contains("labeled")
    );
    assert_eq!(generation(&k.get("deployment", "web").await), Some(2));
    assert!(
        k.ok(&[&["annotate"][..], &web, &["note=hi"]].concat(), None)
            .await
            // kubectl 1.27 prints "annotate", later ones "annotated".
            .contains("deployment.apps/web annotate")
    );
    assert_eq!(generation(&k.get("deployment", "web").await), Some(3));
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
            &[&["patch"][..], &web, &["--type", "merge", "-p", patch]].concat(),
            None
        )
        .await
        .contains("patched")
    );
    let d = k.get("deployment", "web").await;
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(d["metadata"]["labels"]["tier"], "front");
    assert_eq!(d["metadata"]["annotations"]["note"], "hi");
    assert_eq!(generation(&d), Some(4));

    // kubectl edit with a non-interactive editor: sed rewrites the file kubectl hands it.
    let editor = [("KUBE_EDITOR", "sed -i -e /image:/s/nginx:1.26/nginx:1.27/")];
    assert!(
        k.ok_env(&[&["edit"][..], &web].concat(), None, &editor)
            .await
            .contains("deployment.apps/web edited")
    );
    let d = k.get("deployment", "web").await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(generation(&d), Some(5));
}

/// The scale subresource, `rollout status`'s prompt failure, and the status subresource.
async fn scale_rollout_status(k: &Kubectl) {
    let web = ["deployment", "web", "-n", "demo"];
    assert_eq!(
        k.ok(&[&["scale"][..], &web, &["--replicas=3"]].concat(), None)
            .await
            .trim(),
        "deployment.apps/web scaled"
    );
    let scale = k
        .json(&[&["get"][..], &web, &["--subresource=scale"]].concat())
        .await;
    assert_eq!(
        (
            &scale["kind"],
            &scale["spec"]["replicas"],
            &scale["status"]["selector"]
        ),
        (&json!("Scale"), &json!(3), &json!("app=web"))
    );
    // With a precondition kubectl reads the Scale and writes it back whole (PUT).
    k.ok(
        &[
            &["scale"][..],
            &web,
            &["--current-replicas=3", "--replicas=4"],
        ]
        .concat(),
        None,
    )
    .await;
    let d = k.get("deployment", "web").await;
    assert_eq!(d["spec"]["replicas"], 4);
    assert_eq!(generation(&d), Some(7));

    // Nothing rolls a Deployment out here; rollout status says so at once instead of waiting.
    let (code, out, err) = k
        .run(&["rollout", "status", "deployment/web", "-n", "demo"], None)
        .await;
    assert_eq!(code, Some(1), "stdout: {out}\nstderr: {err}");
    assert_eq!(
        err.trim(),
        "error: deployment \"web\" exceeded its progress deadline"
    );
    let status = &d["status"];
    assert_eq!(status["observedGeneration"], 7);
    let progressing = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap();
    assert_eq!(progressing["reason"], "ProgressDeadlineExceeded");
    assert!(
        progressing["message"]
            .as_str()
            .unwrap()
            .contains("runs no controllers"),
        "{progressing}"
    );

    // The status subresource changes status only, and is no new generation.
    let patch = r#"{"status":{"readyReplicas":1},"spec":{"replicas":9}}"#;
    k.ok(
        &[
            &["patch"][..],
            &web,
            &["--subresource=status", "--type=merge", "-p", patch],
        ]
        .concat(),
        None,
    )
    .await;
    let d = k.get("deployment", "web").await;
    assert_eq!(
        (&d["status"]["readyReplicas"], &d["spec"]["replicas"]),
        (&json!(1), &json!(4))
    );
    assert_eq!(generation(&d), Some(7));
    // ...and the main resource ignores status.
    let patch = r#"{"status":{"readyReplicas":9}}"#;
    assert!(
        k.ok(
            &[&["patch"][..], &web, &["--type=merge", "-p", patch]].concat(),
            None
        )
        .await
        .contains("patched (no change)")
    );
    assert_eq!(
        k.get("deployment", "web").await["status"]["readyReplicas"],
        1
    );
}

/// A CRD with status and scale subresources: generation moves on anything but metadata and
/// status; its objects scale; api-resources lists it; delete is 404 afterwards.
async fn custom_resources(k: &Kubectl) {
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
    let w = k.get("wg", "w1").await;
    assert_eq!((&w["spec"]["size"], generation(&w)), (&json!(4), Some(2)));
    let w1 = ["widget", "w1", "-n", "demo"];
    let patch = r#"{"status":{"ready":true}}"#;
    k.ok(
        &[
            &["patch"][..],
            &w1,
            &["--subresource=status", "--type=merge", "-p", patch],
        ]
        .concat(),
        None,
    )
    .await;
    k.ok(&[&["label"][..], &w1, &["color=blue"]].concat(), None)
        .await;
    let w = k.get("widget", "w1").await;
    assert_eq!(
        (&w["status"]["ready"], generation(&w)),
        (&json!(true), Some(2))
    );
    k.ok(&[&["scale"][..], &w1, &["--replicas=2"]].concat(), None)
        .await;
    let w = k.get("widget", "w1").await;
    assert_eq!(
        (&w["spec"]["replicas"], generation(&w)),
        (&json!(2), Some(3))
    );

    let resources = k.ok(&["api-resources"], None).await;
    assert!(
        resources.lines().any(|l| l.starts_with("widgets ")
            && l.contains("example.com/v1")
            && l.contains("Widget")),
        "{resources}"
    );
    assert!(
        k.ok(&[&["delete"][..], &w1].concat(), None)
            .await
            .contains("\"w1\" deleted")
    );
    let (code, _, err) = k.run(&[&["get"][..], &w1].concat(), None).await;
    assert_eq!(code, Some(1));
    assert!(
        err.contains("NotFound") && err.contains("\"w1\" not found"),
        "{err}"
    );
}

/// Server-side apply, `get -w` on a built-in and on a custom resource, delete, and namespace
/// deletion taking its objects along.
async fn apply_watch_delete(k: &Kubectl) {
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
    let cfg = k.get("configmap", "cfg").await;
    assert_eq!((&cfg["data"]["a"], generation(&cfg)), (&json!("2"), None));

    // A second field manager changing kubectl's field is refused with kubectl's own conflict
    // text; --force-conflicts takes the field, and the managedFields say so.
    let ssa3 = ssa.replace("a: '1'", "a: '3'");
    let other = ["apply", "--server-side", "--field-manager=other", "-f", "-"];
    let (code, _, err) = k.run(&other, Some(&ssa3)).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.a")
            && err.contains("--force-conflicts"),
        "{err}"
    );
    k.ok(&[&other[..], &["--force-conflicts"]].concat(), Some(&ssa3))
        .await;
    let cfg = k
        .json(&[
            "get",
            "configmap",
            "cfg",
            "-n",
            "demo",
            "--show-managed-fields",
        ])
        .await;
    let owners: Vec<(&str, &Value)> = cfg["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["manager"].as_str().unwrap_or_default(), &e["fieldsV1"]))
        .collect();
    assert_eq!(cfg["data"]["a"], "3");
    assert_eq!(
        owners,
        [("other", &json!({"f:data": {"f:a": {}}}))],
        "kubectl lost .data.a, its only field, so its entry is gone"
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
    assert_eq!(first.as_deref(), Some("4"));
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

    assert!(
        k.ok(&["delete", "deployment", "made", "-n", "demo"], None)
            .await
            .contains("\"made\" deleted")
    );
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

/// The whole session against a fresh server.
async fn session(bin: PathBuf) {
    let (srv, _dir, kc) = start().await;
    let k = Kubectl::new(bin, &kc);
    creates(&k).await;
    deployment_edits(&k).await;
    scale_rollout_status(&k).await;
    custom_resources(&k).await;
    apply_watch_delete(&k).await;
    srv.shutdown().await;
}

/// The `kubectl` a new user types (on this machine a dispatcher that picks a version by server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_on_path() {
    let Some(bin) = informant_test_tools::need("kubectl", None) else {
        return;
    };
    session(bin).await;
}

macro_rules! versions {
    ($($test:ident => $version:literal,)*) => {$(
        #[doc = concat!("kubectl ", $version, ".")]
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let Some(bin) = informant_test_tools::kubectl($version) else {
                return;
            };
            session(bin).await;
        }
    )*};
}

versions! {
    kubectl_1_27 => "1.27",
    kubectl_1_28 => "1.28",
    kubectl_1_29 => "1.29",
    kubectl_1_30 => "1.30",
    kubectl_1_31 => "1.31",
    kubectl_1_32 => "1.32",
    kubectl_1_33 => "1.33",
}

/// `kubectl auth can-i` (a SelfSubjectAccessReview) and `auth can-i --list` (a
/// SelfSubjectRulesReview) answer for a restricted identity. client-go reads a kubeconfig's
/// credentials only for a TLS server, so over this server's plain HTTP kubectl sends no token
/// at all; the identity travels as impersonation (`--as`), which kubectl does send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_answers_for_a_restricted_identity() {
    const SA: &str = "system:serviceaccount:informant:informant";
    let Some(bin) = informant_test_tools::need("kubectl", None) else {
        return;
    };
    let (srv, _dir, kc) = start().await;
    let rule = |resource: &str| informant_devserver::audit::AllowRule {
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        resource: resource.into(),
        namespace: None,
        ..Default::default()
    };
    srv.restrict(SA, vec![rule("configmaps"), rule("deployments.apps")]);
    let k = Kubectl::new(bin, &kc);
    let yes = k
        .ok(
            &[
                "auth",
                "can-i",
                "list",
                "configmaps",
                "--all-namespaces",
                "--as",
                SA,
            ],
            None,
        )
        .await;
    assert_eq!(yes.trim(), "yes");
    let (code, out, err) = k
        .run(&["auth", "can-i", "list", "secrets", "--as", SA], None)
        .await;
    assert_eq!((code, out.trim()), (Some(1), "no"), "stderr: {err}");
    assert_eq!(
        k.ok(&["auth", "can-i", "list", "secrets"], None)
            .await
            .trim(),
        "yes",
        "the admin may"
    );
    let listed = k
        .ok(
            &["auth", "can-i", "--list", "-n", "default", "--as", SA],
            None,
        )
        .await;
    let row = |resource: &str| {
        listed
            .lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .unwrap_or_else(|| panic!("no {resource} row in:\n{listed}"))
            .to_string()
    };
    assert!(row("configmaps").ends_with("[get list watch]"), "{listed}");
    assert!(
        row("deployments.apps").ends_with("[get list watch]"),
        "{listed}"
    );
    assert!(!listed.contains("secrets"), "{listed}");
    srv.shutdown().await;
}
