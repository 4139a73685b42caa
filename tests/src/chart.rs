//! The Helm chart (`deploy/helm/informant`) rendered by Helm's own Go engine, for the tests that
//! check what it renders and the ones that run replicas exactly as it configures them.
//!
//! No helm binary is needed: `deploy/helm/render.py` drives helm-python-sdk (PyPI), which bundles
//! Helm v4's Go SDK as a shared library. The first run installs it into a virtualenv under
//! `target/helm-sdk/` (or uses a `python3` that already has it); without `python3` or PyPI,
//! [`python`] prints a skip (a failure under `INFORMANT_REQUIRE_ALL=1`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The pinned helm-python-sdk (Helm v4.2.3 inside).
const SDK: &str = "helm-python-sdk==0.2.2";

/// The workspace root (the chart is under `deploy/helm/`).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
}

fn has_sdk(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import helm_python"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A Python with helm-python-sdk, installing it into `target/helm-sdk/` on first use; `None`
/// after a printed skip when there is no `python3` or the install fails (no PyPI). Each test
/// asks first; [`render`] then finds it settled.
pub fn python() -> Option<&'static Path> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let outcome = PYTHON.get_or_init(|| {
        if has_sdk(Path::new("python3")) {
            return Ok("python3".into());
        }
        let venv = root().join("target").join("helm-sdk");
        let python = venv.join("bin").join("python");
        if has_sdk(&python) {
            return Ok(python);
        }
        if informant_test_tools::find("python3", None).is_none() {
            return Err("`python3` is not on PATH".to_string());
        }
        let run = |cmd: &mut Command, what: &str| {
            let out = cmd
                .output()
                .map_err(|e| format!("{what}: cannot run: {e}"))?;
            if out.status.success() {
                return Ok(());
            }
            Err(format!(
                "{what} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        };
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv target/helm-sdk (the chart test renders with helm-python-sdk)",
        )?;
        run(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                SDK,
            ]),
            &format!("pip install {SDK}"),
        )?;
        Ok(python)
    });
    match outcome {
        Ok(python) => Some(python),
        Err(why) => informant_test_tools::skip(
            why,
            format!("install Python 3 and let the first run reach PyPI ({SDK}) to run it"),
        ),
    }
}

/// The chart rendered as release `demo` in namespace `ops`.
pub struct Rendered {
    /// Every object, in template order.
    pub objects: Vec<Value>,
    /// `helm lint --strict` findings.
    pub lint: Value,
}

impl Rendered {
    /// The objects of one kind.
    pub fn kind(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The only object of `kind`.
    pub fn one(&self, kind: &str) -> &Value {
        let all = self.kind(kind);
        assert_eq!(all.len(), 1, "one {kind} expected, got {}", all.len());
        all[0]
    }

    /// The workload's container args.
    pub fn args(&self) -> Vec<String> {
        strings(&self.workload()["spec"]["template"]["spec"]["containers"][0]["args"])
    }
}

/// Renders with `values` merged over values.yaml; Helm's error message otherwise.
pub fn render(values: Value) -> Result<Rendered, String> {
    let python = python().expect("each test checks for helm-python-sdk first");
    let out = Command::new(python)
        .arg(root().join("deploy/helm/render.py"))
        .arg(root().join("deploy/helm/informant"))
        .args(["demo", "ops", &values.to_string(), "--json"])
        .output()
        .expect("run deploy/helm/render.py");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let result: Value = serde_json::from_slice(&out.stdout).expect("render.py JSON");
    let manifests: BTreeMap<String, String> =
        serde_json::from_value(result["manifests"].clone()).expect("manifests");
    let mut objects = Vec::new();
    for (path, text) in &manifests {
        if path.ends_with("NOTES.txt") {
            continue;
        }
        let docs: Vec<Value> = serde_saphyr::from_multiple(text)
            .unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}\n{text}"));
        objects.extend(docs.into_iter().filter(|v| !v.is_null()));
    }
    Ok(Rendered {
        objects,
        lint: result["lint"].clone(),
    })
}

/// A JSON array of strings as a `Vec` (empty for anything else).
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().expect("string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Every RBAC rule of every ClusterRole and Role, as (kind, apiGroups, resources, verbs, names).
pub type Rule = (String, Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// Every rule of every ClusterRole and Role `r` rendered.
pub fn rules(r: &Rendered) -> Vec<Rule> {
    let mut all = Vec::new();
    for role in r
        .objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        let kind = role["kind"].as_str().unwrap().to_string();
        for rule in role["rules"].as_array().expect("rules") {
            all.push((
                kind.clone(),
                strings(&rule["apiGroups"]),
                strings(&rule["resources"]),
                strings(&rule["verbs"]),
                strings(&rule["resourceNames"]),
            ));
        }
    }
    all
}

/// One rule granted to a subject through a binding: the role's rule and where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    /// The role's kind and name (`ClusterRole/demo-informant`).
    pub role: String,
    /// The binding's namespace for a RoleBinding; `None` for a ClusterRoleBinding.
    pub namespace: Option<String>,
    /// API groups.
    pub groups: Vec<String>,
    /// Resources (`plural` or `plural/subresource`).
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: Vec<String>,
    /// resourceNames (empty: every name).
    pub names: Vec<String>,
    /// nonResourceURLs.
    pub urls: Vec<String>,
}

/// The rules of the roles Kubernetes defines itself that the chart binds.
fn builtin_role(name: &str) -> Option<Value> {
    match name {
        // What kube-rbac-proxy and controller-runtime's secure metrics need: ask the API server
        // who a token is and what it may do.
        "system:auth-delegator" => Some(serde_json::json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ])),
        _ => None,
    }
}

/// Every rule the rendered bindings grant `subject` (`{"kind", "name", "namespace"}` as a
/// binding names it), each scoped as its binding scopes it; a binding to a role neither
/// rendered nor built in fails the test.
pub fn granted(r: &Rendered, subject: &Value) -> Vec<Granted> {
    let mut out = Vec::new();
    for b in r
        .objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let binds = b["subjects"].as_array().into_iter().flatten().any(|s| {
            s["kind"] == subject["kind"]
                && s["name"] == subject["name"]
                && (s["kind"] != "ServiceAccount" || s["namespace"] == subject["namespace"])
        });
        if !binds {
            continue;
        }
        let namespace = (b["kind"] == "RoleBinding").then(|| {
            b["metadata"]["namespace"]
                .as_str()
                .unwrap_or("ops")
                .to_string()
        });
        let (kind, name) = (
            b["roleRef"]["kind"].as_str().expect("roleRef kind"),
            b["roleRef"]["name"].as_str().expect("roleRef name"),
        );
        let role_ns = namespace.as_deref();
        let rendered = r.objects.iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && (kind == "ClusterRole" || o["metadata"]["namespace"].as_str() == role_ns)
        });
        let rules = match rendered {
            Some(role) => role["rules"].clone(),
            None => builtin_role(name).unwrap_or_else(|| {
                panic!(
                    "{} binds {kind} {name}, which nothing defines",
                    b["metadata"]["name"]
                )
            }),
        };
        for rule in rules.as_array().expect("rules") {
            out.push(Granted {
                role: format!("{kind}/{name}"),
                namespace: namespace.clone(),
                groups: strings(&rule["apiGroups"]),
                resources: strings(&rule["resources"]),
                verbs: strings(&rule["verbs"]),
                names: strings(&rule["resourceNames"]),
                urls: strings(&rule["nonResourceURLs"]),
            });
        }
    }
    out
}

/// The chart's ServiceAccount as a binding subject, and as the user its token authenticates.
pub fn service_account(r: &Rendered) -> (Value, String) {
    let sa = r.one("ServiceAccount");
    let (ns, name) = (
        sa["metadata"]["namespace"].as_str().unwrap_or("ops"),
        sa["metadata"]["name"]
            .as_str()
            .expect("ServiceAccount name"),
    );
    (
        serde_json::json!({"kind": "ServiceAccount", "name": name, "namespace": ns}),
        format!("system:serviceaccount:{ns}:{name}"),
    )
}

/// What the rendered bindings grant `subject`, as the embedded API server's rules (names and
/// non-resource URLs kept), plus the self access reviews every authenticated identity may
/// create on a real cluster (the built-in `system:basic-user`).
pub fn allow_rules_for(
    r: &Rendered,
    subject: &Value,
) -> Vec<informant_devserver::audit::AllowRule> {
    use informant_devserver::audit::AllowRule;
    let mut out = Vec::new();
    for g in granted(r, subject) {
        if !g.urls.is_empty() {
            out.push(AllowRule {
                verbs: g.verbs.clone(),
                non_resource_urls: g.urls.clone(),
                ..AllowRule::default()
            });
        }
        for group in &g.groups {
            for resource in &g.resources {
                out.push(AllowRule {
                    verbs: g.verbs.clone(),
                    resource: if group.is_empty() || (group == "*" && resource == "*") {
                        resource.clone()
                    } else {
                        format!("{resource}.{group}")
                    },
                    namespace: g.namespace.clone(),
                    resource_names: g.names.clone(),
                    ..AllowRule::default()
                });
            }
        }
    }
    for review in ["selfsubjectaccessreviews", "selfsubjectrulesreviews"] {
        out.push(AllowRule::new(
            &["create"],
            &format!("{review}.authorization.k8s.io"),
        ));
    }
    out
}

/// [`allow_rules_for`] the chart's own ServiceAccount.
pub fn allow_rules(r: &Rendered) -> Vec<informant_devserver::audit::AllowRule> {
    allow_rules_for(r, &service_account(r).0)
}

/// One pod of the rendered workload, laid out on this machine as a kubelet would start it: its
/// volumes as directories, its container's arguments and environment with the downward API
/// filled in, and its wildcard listen addresses bound to an address of its own (each pod has
/// its own network namespace on a cluster; here each gets its own loopback address).
#[derive(Debug, Clone)]
pub struct PodRun {
    /// The pod's name, as its controller names it (`NAME-0` for a StatefulSet).
    pub name: String,
    /// Its namespace (the release's).
    pub namespace: String,
    /// Its address (`status.podIP`): a loopback address of its own.
    pub ip: std::net::Ipv4Addr,
    /// The pod template's labels.
    pub labels: BTreeMap<String, String>,
    /// Volume name to the directory standing for it.
    pub volumes: BTreeMap<String, PathBuf>,
    /// The container's mounts: mount path to the directory standing for it.
    pub mounts: Vec<(String, PathBuf)>,
    /// The container's arguments, paths and addresses mapped to this machine, `$(VAR)`
    /// still unexpanded (the pod's uid is known only once the Pod object exists).
    pub args: Vec<String>,
    /// The container's environment: literal values, and `fieldRef`s as `(name, fieldPath)`.
    pub env: Vec<(String, EnvValue)>,
}

/// Where one environment variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvValue {
    /// A literal.
    Value(String),
    /// The downward API: `metadata.name`, `metadata.namespace`, `metadata.uid`, `status.podIP`.
    Field(String),
    /// A Secret's key: `(secret, key)`.
    Secret(String, String),
}

impl Rendered {
    /// The one workload: the Deployment, or the StatefulSet of sharded mode.
    pub fn workload(&self) -> &Value {
        let all: Vec<&Value> = self
            .objects
            .iter()
            .filter(|o| o["kind"] == "Deployment" || o["kind"] == "StatefulSet")
            .collect();
        assert_eq!(all.len(), 1, "one workload expected");
        all[0]
    }

    /// Pod `index` of the workload with its volumes under `root` (shared claims under
    /// `root/claims`, per-pod volumes under `root/pods/NAME`), created on first use.
    pub fn pod(&self, index: usize, root: &Path) -> PodRun {
        let w = self.workload();
        let name = w["metadata"]["name"].as_str().expect("workload name");
        let namespace = w["metadata"]["namespace"]
            .as_str()
            .unwrap_or("ops")
            .to_string();
        let pod_name = match w["kind"].as_str() {
            Some("StatefulSet") => format!("{name}-{index}"),
            // A ReplicaSet hash and a random suffix, as a Deployment's pods are named.
            _ => format!(
                "{name}-5d9c7b8f4-{}",
                ["bx7kq", "m2hzd", "p9wtc", "r4nvj", "t6xfs"][index % 5]
            ),
        };
        let pod_dir = root.join("pods").join(&pod_name);
        let spec = &w["spec"]["template"]["spec"];
        let mut volumes = BTreeMap::new();
        let mut claim = |vol: &str, dir: PathBuf| {
            std::fs::create_dir_all(&dir).expect("volume dir");
            volumes.insert(vol.to_string(), dir);
        };
        for v in spec["volumes"].as_array().into_iter().flatten() {
            let vol = v["name"].as_str().expect("volume name");
            let dir = if let Some(c) = v["persistentVolumeClaim"]["claimName"].as_str() {
                root.join("claims").join(c)
            } else if let Some(cm) = v["configMap"]["name"].as_str() {
                let dir = pod_dir.join("configmaps").join(cm);
                std::fs::create_dir_all(&dir).expect("configmap dir");
                for m in self.kind("ConfigMap") {
                    if m["metadata"]["name"] == cm {
                        for (k, text) in m["data"].as_object().into_iter().flatten() {
                            std::fs::write(dir.join(k), text.as_str().unwrap_or_default())
                                .expect("configmap key");
                        }
                    }
                }
                dir
            } else {
                pod_dir.join("volumes").join(vol)
            };
            claim(vol, dir);
        }
        for t in w["spec"]["volumeClaimTemplates"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let vol = t["metadata"]["name"].as_str().expect("claim template name");
            claim(vol, root.join("claims").join(format!("{vol}-{pod_name}")));
        }
        let c = &spec["containers"][0];
        let mut mounts: Vec<(String, PathBuf)> = c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let path = m["mountPath"].as_str().expect("mountPath").to_string();
                let dir = volumes[m["name"].as_str().expect("mount name")].clone();
                (path, dir)
            })
            .collect();
        // The longest mount path first: a path maps through its deepest mount.
        mounts.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        let ip = std::net::Ipv4Addr::new(127, 0, 0, 2 + index as u8);
        let args = strings(&c["args"])
            .into_iter()
            .map(|a| map_arg(&a, &mounts, ip))
            .collect();
        let env = c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let name = e["name"].as_str().expect("env name").to_string();
                let value = if let Some(v) = e["value"].as_str() {
                    EnvValue::Value(v.to_string())
                } else if let Some(f) = e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                    EnvValue::Field(f.to_string())
                } else {
                    let s = &e["valueFrom"]["secretKeyRef"];
                    EnvValue::Secret(
                        s["name"].as_str().unwrap_or_default().to_string(),
                        s["key"].as_str().unwrap_or_default().to_string(),
                    )
                };
                (name, value)
            })
            .collect();
        let labels = serde_json::from_value(w["spec"]["template"]["metadata"]["labels"].clone())
            .expect("pod labels");
        PodRun {
            name: pod_name,
            namespace,
            ip,
            labels,
            volumes,
            mounts,
            args,
            env,
        }
    }
}

/// `arg` with a path under a mount mapped to the mount's directory, and a wildcard listen
/// address (`0.0.0.0:PORT`) bound to the pod's own address.
fn map_arg(arg: &str, mounts: &[(String, PathBuf)], ip: std::net::Ipv4Addr) -> String {
    let (flag, value) = match arg.split_once('=') {
        Some((f, v)) => (Some(f), v),
        None => (None, arg),
    };
    let value = if let Some(port) = value.strip_prefix("0.0.0.0:") {
        format!("{ip}:{port}")
    } else if let Some((path, dir)) = mounts
        .iter()
        .find(|(p, _)| value == p || value.starts_with(&format!("{p}/")))
    {
        format!("{}{}", dir.display(), &value[path.len()..])
    } else {
        value.to_string()
    };
    match flag {
        Some(f) => format!("{f}={value}"),
        None => value,
    }
}

impl PodRun {
    /// The environment with the downward API answered for a Pod of `uid` (Secrets left out).
    pub fn environment(&self, uid: &str) -> Vec<(String, String)> {
        self.env
            .iter()
            .filter_map(|(name, v)| {
                let value = match v {
                    EnvValue::Value(v) => v.clone(),
                    EnvValue::Field(f) => match f.as_str() {
                        "metadata.name" => self.name.clone(),
                        "metadata.namespace" => self.namespace.clone(),
                        "metadata.uid" => uid.to_string(),
                        "status.podIP" => self.ip.to_string(),
                        other => panic!("the chart asks for the unknown field {other}"),
                    },
                    EnvValue::Secret(..) => return None,
                };
                Some((name.clone(), value))
            })
            .collect()
    }

    /// The arguments with `$(VAR)` expanded from `env`, as the kubelet expands them.
    pub fn expanded_args(&self, env: &[(String, String)]) -> Vec<String> {
        self.args
            .iter()
            .map(|a| {
                let mut out = a.clone();
                for (k, v) in env {
                    out = out.replace(&format!("$({k})"), v);
                }
                out
            })
            .collect()
    }

    /// The Pod object a cluster would hold for this pod (its status says running at [`ip`]).
    ///
    /// [`ip`]: Self::ip
    pub fn object(&self) -> Value {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
            "spec": {"containers": [{"name": "informant", "image": "informant"}]},
            "status": {"phase": "Running", "podIP": self.ip.to_string(),
                "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    /// The directory standing for volume `name`.
    pub fn volume(&self, name: &str) -> &Path {
        &self.volumes[name]
    }
}
