//! The Helm chart (`deploy/helm/informant`) rendered by Helm's own Go engine: every kind renders,
//! RBAC grants nothing beyond get/list/watch except on the election Lease, the Deployment runs
//! active/standby with probes, and bad values fail with Helm's message naming the field.
//!
//! The rendering harness is [`informant_tests::chart`]; without helm-python-sdk each test skips
//! with a printed reason (fails under `INFORMANT_REQUIRE_ALL=1`).

use std::collections::{BTreeMap, BTreeSet};

use informant_tests::chart::{
    Rendered, Rule, allow_rules, granted, python, render, root, rules, service_account, strings,
};
use serde_json::{Value, json};

/// What the host's own ServiceAccount is granted, through every binding that names it: reads
/// (get, list, watch) and nothing else, except on Leases in the release namespace (election or
/// membership) and creating TokenReviews and SubjectAccessReviews (the admin server asks who a
/// caller is and what it may see); no wildcards anywhere.
fn assert_least_privilege(r: &Rendered) {
    let read: BTreeSet<&str> = ["get", "list", "watch"].into();
    let lease: BTreeSet<&str> = ["get", "list", "watch", "create", "update"].into();
    let review: BTreeSet<&str> = ["create"].into();
    for g in granted(r, &service_account(r).0) {
        for s in g.groups.iter().chain(&g.resources).chain(&g.verbs) {
            assert!(!s.contains('*'), "{} grants a wildcard: {s}", g.role);
        }
        assert!(g.urls.is_empty(), "{} grants URLs {:?}", g.role, g.urls);
        let on = |group: &str, resource: &str| g.groups == [group] && g.resources == [resource];
        let on_leases = on("coordination.k8s.io", "leases");
        let reviews = on("authentication.k8s.io", "tokenreviews")
            || on("authorization.k8s.io", "subjectaccessreviews");
        let allowed = if on_leases {
            &lease
        } else if reviews {
            &review
        } else {
            &read
        };
        for v in &g.verbs {
            assert!(
                allowed.contains(v.as_str()),
                "{} grants `{v}` on {:?}/{:?}",
                g.role,
                g.groups,
                g.resources
            );
        }
        if on_leases {
            assert_eq!(
                g.namespace.as_deref(),
                Some("ops"),
                "{} on {:?} must be namespaced",
                g.role,
                g.resources
            );
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
        "Service",
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
    let cluster: BTreeSet<(String, String)> = granted(&r, &service_account(&r).0)
        .into_iter()
        .filter(|g| g.role == "ClusterRole/demo-informant")
        .map(|g| (g.groups.join(","), g.resources.join(",")))
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("", "pods"),
        ("", "configmaps"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        // Namespace selectors follow the Namespaces' labels.
        ("", "namespaces"),
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
    // Every binding names the chart's ServiceAccount: the read role, the Lease role and the
    // built-in system:auth-delegator (TokenReviews and SubjectAccessReviews for the admin
    // server). With `admin.access` empty, nobody else is bound to anything.
    let sa = r.one("ServiceAccount")["metadata"]["name"].clone();
    for binding in r
        .kind("ClusterRoleBinding")
        .into_iter()
        .chain(r.kind("RoleBinding"))
    {
        assert_eq!(
            binding["subjects"].as_array().unwrap().len(),
            1,
            "{binding}"
        );
        assert_eq!(binding["subjects"][0]["name"], sa, "{binding}");
    }
    assert!(
        r.kind("ClusterRoleBinding")
            .iter()
            .any(|b| b["roleRef"]["name"] == "system:auth-delegator")
    );

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
        "--health-addr=0.0.0.0:8081",
        "--admin-tls=self-signed",
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
    // The probes on their own plain port; the admin port is HTTPS with authentication.
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "health");
    assert!(c["readinessProbe"]["httpGet"]["scheme"].is_null());
    // The Service is headless: it lists the pods for a ServiceMonitor, balances nothing.
    assert_eq!(r.one("Service")["spec"]["clusterIP"], "None");
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
    let cluster: Vec<_> = granted(&r, &service_account(&r).0)
        .into_iter()
        .filter(|g| g.role == "ClusterRole/demo-informant" && g.resources != ["namespaces"])
        .map(|g| (g.groups, g.resources, g.verbs))
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

    // Registry logins and a CA for the config's sources: mounted by the kubelet into the event
    // and the admission replicas alike, and no right to read Secrets for the host.
    let r = render(json!({
        "registry": {
            "pullSecrets": ["team-a-registry"],
            "caSecret": {"name": "registry-ca"},
            "trustKeys": ["team-a-keys"],
        },
        "admission": {"enabled": true},
    }))
    .expect("render");
    for deployment in r.kind("Deployment") {
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert!(
            strings(&container["args"])
                .contains(&"--pulled-dir=/var/cache/informant/pulled".to_string()),
            "{}",
            container["args"]
        );
        let mounts: Vec<(String, bool)> = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                m["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("registry-"))
            })
            .map(|m| {
                (
                    m["mountPath"].as_str().unwrap().to_string(),
                    m["readOnly"] == true,
                )
            })
            .collect();
        assert_eq!(
            mounts,
            [
                ("/etc/informant-registry/team-a-registry".to_string(), true),
                ("/etc/informant-registry-ca".to_string(), true),
                ("/etc/informant-keys/team-a-keys".to_string(), true),
            ]
        );
        let key_maps: Vec<&str> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["configMap"]["name"].as_str())
            .filter(|n| n.contains("keys"))
            .collect();
        assert_eq!(key_maps, ["team-a-keys"]);
        let secrets: Vec<&str> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["secret"]["secretName"].as_str())
            .filter(|n| n.contains("registry"))
            .collect();
        assert_eq!(secrets, ["team-a-registry", "registry-ca"]);
    }
    for (kind, _, resources, _, names) in rules(&r) {
        assert!(
            !resources.iter().any(|res| res == "secrets")
                || (!names.is_empty() && names.iter().all(|n| n.contains("admission"))),
            "a {kind} rule on Secrets beyond the admission certificate's: {resources:?} {names:?}"
        );
    }

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
    // A StatefulSet: each member keeps its name (its identity) across restarts.
    let sts = r.one("StatefulSet");
    assert_eq!(sts["spec"]["replicas"], 3);
    assert_eq!(sts["spec"]["serviceName"], "demo-informant");
    assert!(r.kind("Deployment").is_empty());
    // Pods carry the group's label: membership counts only Leases a Pod of the group backs.
    assert_eq!(
        sts["spec"]["template"]["metadata"]["labels"]["informant.dev/shard-group"],
        "demo-informant"
    );
    let args = r.args();
    for want in [
        "--shard-group=demo-informant",
        "--lease-namespace=$(POD_NAMESPACE)",
        "--lease-duration=20",
        "--identity=$(POD_NAME)",
        "--pod-uid=$(POD_UID)",
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
    // `watch` too: a member follows the group; one that cannot runs nothing. No `delete`: a
    // member's Lease is owned by its Pod and goes with it.
    assert_eq!(verbs, &["create", "get", "list", "watch", "update"]);
    assert!(names.is_empty());
    assert_least_privilege(&r);
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
    for g in granted(&r, &service_account(&r).0) {
        let lease = g.groups == ["coordination.k8s.io"] && g.resources == ["leases"];
        let review =
            ["tokenreviews", "subjectaccessreviews"].contains(&g.resources.join(",").as_str());
        for v in &g.verbs {
            assert!(
                ["get", "list", "watch"].contains(&v.as_str()) || lease || review,
                "{} grants `{v}` on {:?}/{:?}",
                g.role,
                g.groups,
                g.resources
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
    // A tenant's access role: a name no tenant can have (it would name the ClusterRole), or
    // nobody to bind it to, is refused before anything renders.
    let who = json!([{"kind": "User", "name": "alice"}]);
    for tenant in [
        json!({"name": "Team-A", "subjects": who}),
        json!({"name": "team-a ", "subjects": who}),
        json!({"name": "../team-b", "subjects": who}),
        json!({"name": "team-a"}),
        json!({"name": "team-a", "subjects": []}),
    ] {
        let err = render(json!({"admin": {"access": {"tenants": [tenant]}}}))
            .err()
            .unwrap_or_else(|| panic!("rendered {tenant}"));
        assert!(err.contains("tenants"), "{tenant}: {err}");
    }
    render(json!({"admin": {"access": {"tenants": [{"name": "team-a", "subjects": who}]}}}))
        .expect("a good tenant renders");
}

/// `helm install` with default values and the three example plugins, as a new user would: the
/// host runs as the chart's ServiceAccount with exactly the chart's RBAC, and is ready with every
/// plugin handling events; kubediff's wildcard watches what the chart grants and reports the
/// rest as not permitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_rbac_runs_the_example_plugins() {
    use informant_devserver::{DevServer, DevServerConfig};
    use informant_runtime::plugin::load::host_config::HostConfig;
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

/// A values-table cell's items: `a, b` split at top-level commas (not inside backticks or
/// braces).
fn cell_items(cell: &str) -> Vec<String> {
    let (mut items, mut cur, mut tick, mut brace) = (Vec::new(), String::new(), false, 0);
    for c in cell.chars() {
        match c {
            '`' => tick = !tick,
            '{' if !tick => brace += 1,
            '}' if !tick => brace -= 1,
            ',' if !tick && brace == 0 => {
                items.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        items.push(cur.trim().to_string());
    }
    items
}

/// `` `a.{b,c}` `` as `["a.b", "a.c"]`.
fn expand_keys(item: &str) -> Vec<String> {
    let key = item.trim().trim_matches('`');
    match (key.find('{'), key.strip_suffix('}')) {
        (Some(open), Some(body)) => body[open + 1..]
            .split(',')
            .map(|k| format!("{}{}", &key[..open], k.trim()))
            .collect(),
        _ => vec![key.to_string()],
    }
}

/// Every leaf of `values.yaml` as a dotted path: scalars, lists and empty maps.
fn leaves(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match v.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(child, &path, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

/// A default as the table writes it in backticks.
fn as_cell(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "\"\"".to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "[]".to_string(),
        Value::Object(o) if o.is_empty() => "{}".to_string(),
        other => other.to_string(),
    }
}

/// The book's Helm values table and `values.yaml` agree: every value has a row, every row
/// names a value, and every default written in backticks is the file's.
#[test]
fn the_values_table_in_the_book_matches_values_yaml() {
    let yaml = std::fs::read_to_string(root().join("deploy/helm/informant/values.yaml")).unwrap();
    let values: Value = serde_saphyr::from_str(&yaml).expect("values.yaml");
    let mut all = BTreeMap::new();
    leaves(&values, "", &mut all);
    let book = std::fs::read_to_string(root().join("docs/src/deploying.md")).unwrap();
    let table = book
        .split("| value | default | |")
        .nth(1)
        .expect("the Helm values table in docs/src/deploying.md");
    let mut covered = BTreeSet::new();
    let mut problems = Vec::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
        let keys: Vec<String> = cell_items(cells[0])
            .iter()
            .flat_map(|k| expand_keys(k))
            .collect();
        let defaults = cell_items(cells.get(1).copied().unwrap_or_default());
        for (i, key) in keys.iter().enumerate() {
            let under: Vec<&String> = all
                .keys()
                .filter(|p| *p == key || p.starts_with(&format!("{key}.")))
                .collect();
            if under.is_empty() {
                problems.push(format!("the table names `{key}`, which values.yaml lacks"));
                continue;
            }
            covered.extend(under.into_iter().cloned());
            let Some(default) = defaults.get(i).filter(|_| defaults.len() == keys.len()) else {
                continue;
            };
            let (Some(written), Some(value)) = (
                default.strip_prefix('`').and_then(|d| d.strip_suffix('`')),
                all.get(key),
            ) else {
                continue;
            };
            if written != as_cell(value) {
                problems.push(format!(
                    "`{key}`: the table says `{written}`, values.yaml `{}`",
                    as_cell(value)
                ));
            }
        }
    }
    for path in all.keys().filter(|p| !covered.contains(*p)) {
        problems.push(format!("values.yaml has `{path}`, which the table lacks"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The admission replicas run under exactly the RBAC the chart renders for them: they fill the
/// Secret the chart made empty, apply the webhook configurations the chart lets them name, and
/// answer through the embedded server's webhook calls; nothing they ask is refused. (The chart
/// points the webhooks at its Service, which the embedded server cannot resolve: here they are
/// reached by URL, the only difference from the rendered arguments.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_replicas_run_under_the_charts_rbac() {
    use informant_devserver::{DevServer, DevServerConfig};
    use informant_runtime::admission::webhooks::Endpoint;
    use informant_runtime::admission::{AdmissionOptions, CertSecret};
    use informant_runtime::runtime::{Runtime, RuntimeOptions};
    use informant_runtime::tls::ServerTls;
    use informant_tests::plugins::wasm;
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::ConfigMap;

    if python().is_none() {
        return;
    }
    let r = render(json!({"admission": {"enabled": true}})).expect("render");
    let deployment = r
        .kind("Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "demo-informant-admission")
        .expect("the admission Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let args = strings(&pod["containers"][0]["args"]);
    for expected in [
        "--admission-only",
        "--admission-addr=0.0.0.0:8443",
        "--admission-webhook=demo-informant",
        "--admission-endpoint=service:$(POD_NAMESPACE)/demo-informant-admission:443",
        "--admission-cert-secret=$(POD_NAMESPACE)/demo-informant-admission-tls",
    ] {
        assert!(
            args.iter().any(|a| a == expected),
            "{expected} not in {args:?}"
        );
    }
    // The event replicas' selector does not take the admission pods.
    let events = r
        .kind("Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "demo-informant")
        .unwrap();
    let selector = &events["spec"]["selector"]["matchLabels"];
    let labels = &pod_labels(deployment);
    assert!(
        selector
            .as_object()
            .unwrap()
            .iter()
            .any(|(k, v)| labels.get(k) != Some(v)),
        "{selector} selects the admission pods {labels:?}"
    );
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let user = format!("system:serviceaccount:ops:{sa}");
    let subject = json!({"kind": "ServiceAccount", "name": sa, "namespace": "ops"});
    // Beyond reads, only that Secret and those two configurations, by name; never `create`.
    for g in granted(&r, &subject) {
        let writes: Vec<&String> = g
            .verbs
            .iter()
            .filter(|v| !["get", "list", "watch"].contains(&v.as_str()))
            .collect();
        assert!(
            !g.verbs.iter().any(|v| v == "create" || v.contains('*')),
            "{g:?}"
        );
        if writes.is_empty() {
            continue;
        }
        let named = match g.resources[..].first().map(String::as_str) {
            Some("secrets") => {
                g.names == ["demo-informant-admission-tls"] && g.namespace.as_deref() == Some("ops")
            }
            Some("validatingwebhookconfigurations" | "mutatingwebhookconfigurations") => {
                g.names == ["demo-informant"]
            }
            _ => false,
        };
        assert!(
            named,
            "{} grants {writes:?} beyond what admission needs: {g:?}",
            g.role
        );
    }
    let rules = informant_tests::chart::allow_rules_for(&r, &subject);
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    informant_tests::create_namespaces(&server, &["ops", "team-a"]);
    let secret = r
        .kind("Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "demo-informant-admission-tls")
        .expect("the empty Secret")
        .clone();
    server.create(secret).unwrap();
    server.restrict(&user, rules);

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(wasm("admit"), dir.path().join("deny.wasm")).unwrap();
    std::fs::write(
        dir.path().join("deny.toml"),
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n\
         [[admit]]\nname = \"deny\"\napi-version = \"v1\"\nkind = \"ConfigMap\"\n\
         [config]\nmode = \"deny-label\"\n",
    )
    .unwrap();
    let runtime = informant_tests::guarded(
        "the admission replica to start",
        Runtime::start(
            server.client_as(&user),
            RuntimeOptions {
                plugins: Some(dir.path().to_path_buf()),
                admission: Some(AdmissionOptions {
                    addr: "127.0.0.1:0".parse().unwrap(),
                    tls: ServerTls::Plain,
                    register: Some(("demo-informant".into(), Endpoint::Url(String::new()))),
                    cert_secret: Some(CertSecret {
                        namespace: "ops".into(),
                        name: "demo-informant-admission-tls".into(),
                        options: Default::default(),
                    }),
                    record: None,
                }),
                admission_only: true,
                ..Default::default()
            },
        ),
    )
    .await
    .expect("starts under the chart's RBAC");
    let configs: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(server.client());
    informant_tests::guarded("the webhook configuration", async {
        while configs
            .get_opt("demo-informant")
            .await
            .ok()
            .flatten()
            .and_then(|c| c.webhooks)
            .is_none()
        {
            // Applied by the host's own task: poll for it.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "team-a");
    let denied: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "x", "labels": {"deny": "by-the-chart"}}}))
    .unwrap();
    match cms.create(&Default::default(), &denied).await {
        Err(kube::Error::Api(e)) => assert!(e.message.ends_with("by-the-chart"), "{e:?}"),
        other => panic!("expected a denial: {other:?}"),
    }
    let refused: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(user.as_str()) && !r.allowed)
        .collect();
    assert!(
        refused.is_empty(),
        "refused under the chart's RBAC: {refused:?}"
    );
    runtime.stop().await;
    server.shutdown().await;
}

/// A Deployment's pod template labels.
fn pod_labels(deployment: &Value) -> serde_json::Map<String, Value> {
    deployment["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}
