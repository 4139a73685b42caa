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

    /// The Deployment's container args.
    pub fn args(&self) -> Vec<String> {
        strings(&self.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])
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

/// The chart's RBAC for its ServiceAccount as the embedded API server's rules: the ClusterRole's
/// cluster-wide, the Role's in the release namespace (names dropped: the server's rules have
/// none), plus the self access reviews every authenticated identity may create on a real
/// cluster (the built-in `system:basic-user`).
pub fn allow_rules(r: &Rendered) -> Vec<informant_devserver::audit::AllowRule> {
    let mut out = Vec::new();
    for (kind, groups, resources, verbs, _) in rules(r) {
        for group in &groups {
            for resource in &resources {
                out.push(informant_devserver::audit::AllowRule {
                    verbs: verbs.clone(),
                    resource: if group.is_empty() {
                        resource.clone()
                    } else {
                        format!("{resource}.{group}")
                    },
                    namespace: (kind == "Role").then(|| "ops".to_string()),
                });
            }
        }
    }
    for review in ["selfsubjectaccessreviews", "selfsubjectrulesreviews"] {
        out.push(informant_devserver::audit::AllowRule {
            verbs: vec!["create".into()],
            resource: format!("{review}.authorization.k8s.io"),
            namespace: None,
        });
    }
    out
}
