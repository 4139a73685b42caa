//! The Helm chart (`deploy/helm/informant`) rendered by Helm's own Go engine: every kind renders,
//! RBAC grants nothing beyond get/list/watch except on the election Lease, the Deployment runs
//! active/standby with probes, and bad values fail with Helm's message naming the field.
//!
//! No helm binary is needed: `deploy/helm/render.py` drives helm-python-sdk (PyPI), which bundles
//! Helm v4's Go SDK as a shared library. The first run installs it into a virtualenv under
//! `target/helm-sdk/` (or uses a `python3` that already has it); without `python3` or PyPI each
//! test skips with a printed reason (fails under `INFORMANT_REQUIRE_ALL=1`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

/// The pinned helm-python-sdk (Helm v4.2.3 inside).
const SDK: &str = "helm-python-sdk==0.2.2";

fn root() -> &'static Path {
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
fn python() -> Option<&'static Path> {
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
struct Rendered {
    /// Every object, in template order.
    objects: Vec<Value>,
    /// `helm lint --strict` findings.
    lint: Value,
}

impl Rendered {
    /// The objects of one kind.
    fn kind(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The only object of `kind`.
    fn one(&self, kind: &str) -> &Value {
        let all = self.kind(kind);
        assert_eq!(all.len(), 1, "one {kind} expected, got {}", all.len());
        all[0]
    }

    /// The Deployment's container args.
    fn args(&self) -> Vec<String> {
        strings(&self.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])
    }
}

/// Renders with `values` merged over values.yaml; Helm's error message otherwise.
fn render(values: Value) -> Result<Rendered, String> {
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

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().expect("string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Every RBAC rule of every ClusterRole and Role, as (kind, apiGroups, resources, verbs, names).
type Rule = (String, Vec<String>, Vec<String>, Vec<String>, Vec<String>);

fn rules(r: &Rendered) -> Vec<Rule> {
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

/// The rule: no verb beyond get/list/watch, except get/create/update on Leases, and no
/// wildcards anywhere.
fn assert_least_privilege(r: &Rendered) {
    let read: BTreeSet<&str> = ["get", "list", "watch"].into();
    let lease: BTreeSet<&str> = ["get", "create", "update"].into();
    for (kind, groups, resources, verbs, _) in rules(r) {
        for s in groups.iter().chain(&resources).chain(&verbs) {
            assert!(!s.contains('*'), "{kind} grants a wildcard: {s}");
        }
        let on_leases = groups == ["coordination.k8s.io"] && resources == ["leases"];
        let allowed = if on_leases { &lease } else { &read };
        for v in &verbs {
            assert!(
                allowed.contains(v.as_str()),
                "{kind} grants `{v}` on {groups:?}/{resources:?}"
            );
        }
        if on_leases {
            assert_eq!(kind, "Role", "lease access must be namespaced");
        }
    }
}

#[test]
fn default_values_render_every_kind_with_least_privilege() {
    if python().is_none() {
        return;
    }
    let r = render(json!({})).expect("render");
    let kinds: BTreeSet<&str> = r
        .objects
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    let want: BTreeSet<&str> = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    .into();
    assert_eq!(kinds, want);
    let problems: Vec<_> = r.lint["messages"]
        .as_array()
        .expect("lint messages")
        .iter()
        .filter(|m| m["severity"].as_i64().unwrap_or(0) >= 2)
        .collect();
    assert!(problems.is_empty(), "helm lint --strict: {problems:?}");

    assert_least_privilege(&r);
    let rules = rules(&r);
    // The ClusterRole is exactly the watched resources, read-only, and the CRDs (list, watch)
    // that tell the host a waiting plugin's kind is served.
    let cluster: BTreeSet<(String, String)> = rules
        .iter()
        .filter(|x| x.0 == "ClusterRole")
        .map(|x| (x.1.join(","), x.2.join(",")))
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("", "pods"),
        ("", "configmaps"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    ]
    .map(|(g, r)| (g.to_string(), r.to_string()))
    .into();
    assert_eq!(cluster, expected);
    // The Lease: create (cannot be narrowed by name), get and update on this one Lease only.
    let lease_rules: Vec<_> = rules.iter().filter(|x| x.0 == "Role").collect();
    assert!(lease_rules.iter().any(|x| x.3 == ["create"]));
    assert!(
        lease_rules
            .iter()
            .any(|x| x.3 == ["get", "update"] && x.4 == ["demo-informant"])
    );
    // Both bindings name the chart's ServiceAccount.
    let sa = r.one("ServiceAccount")["metadata"]["name"].clone();
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(r.one(binding)["subjects"][0]["name"], sa, "{binding}");
    }

    // Two replicas, active/standby, probes on the admin server, non-root.
    let deploy = r.one("Deployment");
    assert_eq!(deploy["spec"]["replicas"], 2);
    let args = r.args();
    for want in [
        "run",
        "--leader-elect",
        "--lease-name=demo-informant",
        "--lease-namespace=$(POD_NAMESPACE)",
        "--identity=$(POD_NAME)",
        "--lease-duration=15",
        "--admin=0.0.0.0:9090",
        "--plugins=/plugins",
        "--cache-dir=/var/cache/informant/components",
    ] {
        assert!(
            args.iter().any(|a| a == want),
            "{want} missing from {args:?}"
        );
    }
    assert!(!args.iter().any(|a| a.starts_with("--config")), "{args:?}");
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(pod["serviceAccountName"], sa);
    let volumes: BTreeSet<String> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        volumes,
        ["compile-cache", "config", "plugins"]
            .map(String::from)
            .into()
    );
    // The compile cache is a subdirectory the process creates in its own emptyDir.
    let cache = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "compile-cache")
        .unwrap();
    assert_eq!(cache["emptyDir"], json!({}));
    let mounts = c["volumeMounts"].as_array().unwrap();
    let mount = mounts
        .iter()
        .find(|m| m["name"] == "compile-cache")
        .unwrap();
    assert_eq!(mount["mountPath"], "/var/cache/informant");
    assert_ne!(mount["readOnly"], true);
}

#[test]
fn configured_values_flow_into_rbac_config_and_volumes() {
    if python().is_none() {
        return;
    }
    let config = "# tenants\n[tenants.team-a]\nnamespaces = [\"team-a\"]\n";
    let r = render(json!({
        "watchedResources": [
            {"apiGroup": "", "resource": "services"},
            {"apiGroup": "example.com", "resource": "widgets"},
        ],
        "config": config,
        "plugins": {"volume": "persistentVolumeClaim", "existingClaim": "plugins"},
        "leaderElection": {"leaseName": "hooks", "leaseDurationSeconds": 30},
    }))
    .expect("render");
    assert_least_privilege(&r);
    let cluster: Vec<_> = rules(&r)
        .into_iter()
        .filter(|x| x.0 == "ClusterRole")
        .map(|x| (x.1, x.2, x.3))
        .collect();
    let read = ["get", "list", "watch"].map(String::from).to_vec();
    assert_eq!(
        cluster,
        vec![
            (vec![String::new()], vec!["services".into()], read.clone()),
            (vec!["example.com".into()], vec!["widgets".into()], read),
            (
                vec!["apiextensions.k8s.io".into()],
                vec!["customresourcedefinitions".into()],
                vec!["list".into(), "watch".into()],
            ),
        ]
    );
    assert_eq!(
        r.one("ConfigMap")["data"]["informant.toml"].as_str(),
        Some(config),
        "informant.toml is values.config verbatim"
    );
    let args = r.args();
    for want in [
        "--config=/etc/informant/informant.toml",
        "--lease-name=hooks",
        "--lease-duration=30",
    ] {
        assert!(
            args.iter().any(|a| a == want),
            "{want} missing from {args:?}"
        );
    }
    let template = &r.one("Deployment")["spec"]["template"];
    assert!(
        template["metadata"]["annotations"]["checksum/config"].is_null(),
        "config changes apply live: no rollout by default"
    );
    let mount = template["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "config")
        .unwrap();
    assert!(
        mount["subPath"].is_null(),
        "a subPath mount never sees the kubelet's updates"
    );
    let pod = &template["spec"];
    let plugins = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "plugins")
        .unwrap();
    assert_eq!(plugins["persistentVolumeClaim"]["claimName"], "plugins");

    let rolled = render(json!({"config": config, "rollOnConfigChange": true})).expect("render");
    let annotations = &rolled.one("Deployment")["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations["checksum/config"].as_str().map(str::len),
        Some(64)
    );

    // Plugins from an image: an init container copies them into the emptyDir.
    let r = render(
        json!({"plugins": {"image": {"repository": "registry.example/hooks", "tag": "v3"}}}),
    )
    .expect("render");
    let pod = &r.one("Deployment")["spec"]["template"]["spec"];
    assert_eq!(
        pod["initContainers"][0]["image"],
        "registry.example/hooks:v3"
    );
    assert_eq!(
        strings(&pod["initContainers"][0]["command"]),
        ["cp", "-R", "/plugins/.", "/plugins/"]
    );

    // Secrets for config references: mounted read-only, and as environment variables.
    let r = render(json!({
        "secretFiles": [{"name": "slack"}],
        "secretEnv": [{"name": "SLACK_WEBHOOK_URL", "secret": "slack", "key": "url"}],
    }))
    .expect("render");
    let pod = &r.one("Deployment")["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "secret-slack")
        .expect("the Secret's volume");
    assert_eq!(volume["secret"]["secretName"], "slack");
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "secret-slack")
        .expect("the Secret's mount");
    assert_eq!(mount["mountPath"], "/etc/informant-secrets/slack");
    assert_eq!(mount["readOnly"], true);
    let env = pod["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "SLACK_WEBHOOK_URL")
        .expect("the Secret's variable");
    assert_eq!(
        env["valueFrom"]["secretKeyRef"],
        json!({"name": "slack", "key": "url"})
    );

    // Durable delivery: off by default; on, a state directory on its own volume.
    assert!(!r.args().iter().any(|a| a.starts_with("--state-dir")));
    let r = render(json!({"state": {"enabled": true}})).expect("render");
    assert!(
        r.args()
            .contains(&"--state-dir=/var/lib/informant/state".to_string())
    );
    let pod = &r.one("Deployment")["spec"]["template"]["spec"];
    let state = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "state")
        .expect("the state volume");
    assert_eq!(state["emptyDir"]["sizeLimit"], "2Gi");
    assert!(
        pod["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "state" && m["mountPath"] == "/var/lib/informant")
    );
    let r = render(
        json!({"state": {"enabled": true, "volume": "persistentVolumeClaim", "existingClaim": "informant-state"}}),
    )
    .expect("render");
    let pod = &r.one("Deployment")["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "state"
                && v["persistentVolumeClaim"]["claimName"] == "informant-state")
    );
    let refused = render(json!({"state": {"enabled": true, "volume": "persistentVolumeClaim"}}))
        .err()
        .expect("a claim is required");
    assert!(
        refused.contains("state.existingClaim is required"),
        "{refused}"
    );

    // A single replica may run without election.
    let r =
        render(json!({"replicaCount": 1, "leaderElection": {"enabled": false}})).expect("render");
    assert!(r.kind("Role").is_empty() && r.kind("RoleBinding").is_empty());
    assert!(
        !r.args()
            .iter()
            .any(|a| a.starts_with("--lease") || a == "--leader-elect")
    );
}

/// `sharding.enabled`: every replica runs `--shard-group` (not `--leader-elect`), and the
/// Lease rights it needs (its own, the group's list, a dead member's delete) stay in the
/// release namespace.
#[test]
fn sharding_runs_every_replica_in_the_group_with_namespaced_lease_rights() {
    if python().is_none() {
        return;
    }
    let r = render(json!({
        "replicaCount": 3,
        "leaderElection": {"enabled": false},
        "sharding": {"enabled": true, "leaseDurationSeconds": 20},
    }))
    .expect("render");
    assert_eq!(r.one("Deployment")["spec"]["replicas"], 3);
    let args = r.args();
    for want in [
        "--shard-group=demo-informant",
        "--lease-namespace=$(POD_NAMESPACE)",
        "--lease-duration=20",
        "--identity=$(POD_NAME)",
    ] {
        assert!(
            args.iter().any(|a| a == want),
            "{want} missing from {args:?}"
        );
    }
    assert!(!args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    let leases: Vec<Rule> = rules(&r)
        .into_iter()
        .filter(|(_, g, res, _, _)| g == &["coordination.k8s.io"] && res == &["leases"])
        .collect();
    assert_eq!(leases.len(), 1, "{leases:?}");
    let (kind, _, _, verbs, names) = &leases[0];
    assert_eq!(kind, "Role", "lease access must be namespaced");
    assert_eq!(verbs, &["create", "get", "list", "update", "delete"]);
    assert!(names.is_empty());
    // Sharding alone (election left on) still shards; replicas > 1 need one of the two.
    let r = render(json!({"replicaCount": 2, "sharding": {"enabled": true, "group": "hooks"}}))
        .expect("render");
    assert!(r.args().iter().any(|a| a == "--shard-group=hooks"));
    assert!(!r.args().iter().any(|a| a == "--leader-elect"));
    let refused = render(json!({"sharding": {"enabled": true, "group": "Not A Label"}}))
        .err()
        .expect("a bad group is refused");
    assert!(refused.contains("group"), "{refused}");
}

#[test]
fn writes_grant_impersonation_of_exactly_the_named_identities() {
    if python().is_none() {
        return;
    }
    let r = render(json!({
        "writes": {
            "impersonate": {
                "users": [
                    "system:serviceaccount:team-a:hooks",
                    "system:serviceaccount:team-b:hooks",
                    "alice@example.com",
                ],
                "groups": ["hooks"],
            },
            "operatorRules": [
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]},
            ],
        },
    }))
    .expect("render");
    let writes = r
        .kind("ClusterRole")
        .into_iter()
        .find(|o| o["metadata"]["name"] == "demo-informant-writes")
        .expect("the writes ClusterRole");
    assert_eq!(
        writes["rules"],
        json!([
            {"apiGroups": [""], "resources": ["users"], "resourceNames": ["alice@example.com"], "verbs": ["impersonate"]},
            {"apiGroups": [""], "resources": ["groups"], "resourceNames": ["hooks"], "verbs": ["impersonate"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]},
        ])
    );
    // A service account is impersonated through a Role in its own namespace, naming just it.
    let roles: Vec<(String, Value)> = r
        .kind("Role")
        .into_iter()
        .filter(|o| o["metadata"]["name"] == "demo-informant-impersonate")
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap().to_string(),
                o["rules"].clone(),
            )
        })
        .collect();
    let sa = json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["hooks"], "verbs": ["impersonate"]}]);
    assert_eq!(
        roles,
        vec![("team-a".into(), sa.clone()), ("team-b".into(), sa)]
    );
    let bindings: Vec<&Value> = r
        .kind("RoleBinding")
        .into_iter()
        .filter(|o| o["metadata"]["name"] == "demo-informant-impersonate")
        .collect();
    assert_eq!(bindings.len(), 2);
    for b in bindings {
        assert_eq!(b["subjects"][0]["namespace"], "ops");
    }
    // By default the host can write nothing.
    let defaults = render(json!({})).expect("render");
    assert!(
        !defaults.objects.iter().any(|o| o["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-writes") || n.ends_with("-impersonate"))),
        "no write RBAC by default"
    );
}

#[test]
fn bad_values_fail_naming_the_field() {
    if python().is_none() {
        return;
    }
    for (values, want) in [
        (
            json!({"watchedResources": [{"resource": "pods"}]}),
            "apiGroup",
        ),
        (
            json!({"watchedResources": [{"apiGroup": "", "resource": "pods", "verbs": ["delete"]}]}),
            "verbs",
        ),
        (
            json!({"leaderElection": {"enabled": false}}),
            "replicaCount > 1 needs leaderElection.enabled",
        ),
        (
            json!({"plugins": {"volume": "persistentVolumeClaim"}}),
            "plugins.existingClaim is required",
        ),
        (json!({"plugins": {"volume": "hostPath"}}), "volume"),
        (json!({"secretFiles": [{"name": "../etc"}]}), "secretFiles"),
        (
            json!({"secretEnv": [{"name": "A-B", "secret": "s", "key": "k"}]}),
            "secretEnv",
        ),
        (
            json!({"leaderElection": {"leaseDurationSeconds": 1}}),
            "leaseDurationSeconds",
        ),
        (
            json!({"writes": {"impersonate": {"users": ["system:serviceaccount:../x:y"]}}}),
            "writes.impersonate.users[0]",
        ),
        (
            json!({"writes": {"operatorRules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["escalate"]}]}}),
            "verbs",
        ),
    ] {
        let err = render(values.clone())
            .err()
            .unwrap_or_else(|| panic!("{values} rendered"));
        assert!(err.contains(want), "{values}: {err}");
    }
}

/// `rbac.clusterWideRead` (wildcard watches): read on everything and CRDs, and still nothing
/// beyond get/list/watch; off by default, where no rule has a wildcard.
#[test]
fn cluster_wide_read_grants_only_reads_on_everything() {
    if python().is_none() {
        return;
    }
    let r =
        render(json!({"rbac": {"clusterWideRead": true}, "watchCustomResourceDefinitions": false}))
            .expect("render");
    let rules = rules(&r);
    let everything: Vec<&Rule> = rules
        .iter()
        .filter(|(_, g, res, _, _)| g == &["*"] && res == &["*"])
        .collect();
    assert_eq!(everything.len(), 1, "{rules:?}");
    let (kind, _, _, verbs, _) = everything[0];
    assert_eq!(kind, "ClusterRole");
    assert_eq!(verbs, &["get", "list", "watch"]);
    assert!(
        rules
            .iter()
            .any(|(_, g, res, v, _)| g == &["apiextensions.k8s.io"]
                && res == &["customresourcedefinitions"]
                && v.contains(&"watch".to_string())),
        "the CRD watch that finds new kinds: {rules:?}"
    );
    for (kind, groups, resources, verbs, _) in &rules {
        let lease = groups == &["coordination.k8s.io"] && resources == &["leases"];
        for v in verbs {
            assert!(
                ["get", "list", "watch"].contains(&v.as_str()) || lease,
                "{kind} grants `{v}` on {groups:?}/{resources:?}"
            );
        }
    }
    assert_least_privilege(&render(json!({})).expect("render"));
    let err = render(json!({"rbac": {"clusterWideReed": true}}))
        .err()
        .expect("a misspelt key is refused");
    assert!(
        err.contains("clusterWideReed") || err.contains("rbac"),
        "{err}"
    );
}

/// The chart's RBAC for its ServiceAccount as the embedded API server's rules: the ClusterRole's
/// cluster-wide, the Role's in the release namespace (names dropped: the server's rules have
/// none), plus the self access reviews every authenticated identity may create on a real
/// cluster (the built-in `system:basic-user`).
fn allow_rules(r: &Rendered) -> Vec<informant_devserver::audit::AllowRule> {
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
                    ..Default::default()
                });
            }
        }
    }
    for review in ["selfsubjectaccessreviews", "selfsubjectrulesreviews"] {
        out.push(informant_devserver::audit::AllowRule {
            verbs: vec!["create".into()],
            resource: format!("{review}.authorization.k8s.io"),
            namespace: None,
            ..Default::default()
        });
    }
    out
}

/// `helm install` with default values and the three example plugins, as a new user would: the
/// host runs as the chart's ServiceAccount with exactly the chart's RBAC, and is ready with every
/// plugin handling events; kubediff's wildcard watches what the chart grants and reports the
/// rest as not permitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_rbac_runs_the_example_plugins() {
    use informant_devserver::{DevServer, DevServerConfig};
    use informant_runtime::plugin::HostConfig;
    use informant_runtime::runtime::{Runtime, RuntimeOptions};
    use informant_tests::http::{free_addr, get, get_until};
    use informant_tests::plugins::{Logs, wasm};

    if python().is_none() {
        return;
    }
    let r = render(json!({})).expect("render");
    let sa = r.one("ServiceAccount");
    let user = format!(
        "system:serviceaccount:{}:{}",
        sa["metadata"]["namespace"].as_str().unwrap_or("ops"),
        sa["metadata"]["name"]
            .as_str()
            .expect("ServiceAccount name")
    );
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    informant_tests::create_namespaces(&server, &["ops", "prod"]);
    server.restrict(&user, allow_rules(&r));

    let dir = tempfile::tempdir().unwrap();
    for (name, package) in [
        ("kubediff", "kubediff"),
        ("label-policy", "label-policy"),
        ("orphans", "orphans"),
    ] {
        std::fs::copy(wasm(package), dir.path().join(format!("{name}.wasm"))).unwrap();
        std::fs::copy(
            root().join(format!("plugins/{name}/{name}.toml")),
            dir.path().join(format!("{name}.toml")),
        )
        .unwrap();
    }
    let addr = free_addr();
    let plugin_logs = tokio::sync::broadcast::channel(4096).0;
    let logs = Logs::record(plugin_logs.subscribe());
    let runtime = informant_tests::guarded(
        "the runtime to start",
        Runtime::start(
            server.client_as(&user),
            RuntimeOptions {
                plugins: Some(dir.path().to_path_buf()),
                admin: Some(addr),
                plugin_logs: Some(plugin_logs),
                config: HostConfig::default(),
                ..Default::default()
            },
        ),
    )
    .await
    .expect("runtime starts");
    get_until(addr, "/readyz", "ready under the chart's RBAC", |s, _| {
        s == 200
    })
    .await;
    let (_, _, body) = get(addr, "/plugins").await;
    let plugins: Value = serde_json::from_str(&body).unwrap();
    let plugins = plugins["plugins"].as_array().unwrap();
    for p in plugins {
        assert_eq!(p["state"], "running", "{p}");
    }
    assert_eq!(plugins.len(), 3, "{plugins:?}");
    let kubediff = plugins.iter().find(|p| p["name"] == "kubediff").unwrap();
    for k in [
        "v1/ConfigMap",
        "v1/Pod",
        "apps/v1/Deployment",
        "apps/v1/ReplicaSet",
    ] {
        assert!(
            kubediff["expanded"].as_array().unwrap().contains(&json!(k)),
            "{k} not watched: {kubediff}"
        );
    }
    assert!(
        kubediff["not-permitted"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x["resource"] == "v1/Secret")),
        "{kubediff}"
    );

    // An unlabelled Deployment and a ReplicaSet whose owner is gone: each plugin has its event.
    server
        .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}))
        .unwrap();
    server
        .create(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "old-1a2b", "namespace": "prod",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "old", "uid": "uid-of-a-deleted-deployment", "controller": true}]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "old"}},
                "template": {"metadata": {"labels": {"app": "old"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
        .unwrap();
    logs.wait_until("each example plugin to handle its event", || {
        logs.json_of("kubediff")
            .iter()
            .any(|l| l["event"] == "added" && l["name"] == "web")
            && logs
                .json_of("label-policy")
                .iter()
                .any(|l| l.get("violation").is_some())
            && logs
                .json_of("orphans")
                .iter()
                .any(|l| l["orphan"]["name"] == "old-1a2b")
    })
    .await;
    let refused = server
        .requests()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(user.as_str()) && !r.allowed)
        .count();
    assert!(refused <= 2, "{refused} refused requests");

    runtime.stop().await;
    server.shutdown().await;
}
