//! Admission webhooks end to end: the embedded API server calls a real HTTPS webhook (a hyper
//! server over rustls on 127.0.0.1, its certificate made here by rcgen and handed over as the
//! configuration's `caBundle`) whose answers each test decides, and clients see what a cluster
//! would show them: denials, patched objects, failed calls under each failure policy, dry-run
//! refusals and warnings. One test drives it with the `kubectl` on PATH (skipped without one).

#[path = "admission/kubectl.rs"]
mod kubectl;
#[path = "admission/webhook.rs"]
mod webhook;

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use webhook::{
    Reply, Webhook, admit, closed_port, config_map, mutating, patch, refuse, response, server,
    status, validating,
};

#[tokio::test]
async fn a_validating_denial_reaches_the_client_with_the_webhooks_message() {
    let hook = Webhook::start(|path, review| match path {
        "/deny" => refuse(review, "configmaps need an owner"),
        _ => Reply::Json(response(
            review,
            json!({"allowed": false, "status": {"code": 422, "reason": "Invalid"}}),
        )),
    })
    .await;
    let srv = server().await;
    srv.create(validating(
        "policy",
        vec![hook.hook("owner.example.com", "/deny", json!({}))],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let s = status(
        cms.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    // No code from the webhook: kube-apiserver's floor for a rejection.
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "admission webhook \"owner.example.com\" denied the request: configmaps need an owner"
    );
    // kube-apiserver passes the webhook's (absent) reason on as it is.
    assert_eq!(s.reason, "");
    assert!(cms.get_opt("a").await.unwrap().is_none());

    // The webhook's own code and reason, and the message when it gives none.
    srv.create(validating(
        "strict",
        vec![hook.hook("strict.example.com", "/coded", json!({}))],
    ))
    .unwrap();
    srv.delete(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        None,
        "policy",
    )
    .unwrap();
    let s = status(
        cms.create(&PostParams::default(), &config_map("b"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "admission webhook \"strict.example.com\" denied the request: Invalid"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn a_mutating_patch_is_stored_and_the_review_describes_the_request() {
    // The answer kube-core's own AdmissionResponse makes (its patch as an array of bytes).
    let hook = Webhook::start(|_, review| {
        use kube::core::DynamicObject;
        use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_value(review.clone()).unwrap();
        let req: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
        let ops: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels/stamped", "value": "yes"}
        ]))
        .unwrap();
        let answer = AdmissionResponse::from(&req)
            .with_patch(ops)
            .unwrap()
            .into_review();
        Reply::Json(serde_json::to_value(answer).unwrap())
    })
    .await;
    let srv = server().await;
    srv.create(mutating(
        "stamp",
        vec![hook.hook("stamp.example.com", "/stamp", json!({}))],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let created = cms
        .create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    let labels = created.metadata.labels.unwrap();
    assert_eq!(labels.get("stamped").map(String::as_str), Some("yes"));
    let stored = cms.get("a").await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["stamped"], "yes");

    let calls = hook.calls("/stamp");
    assert_eq!(calls.len(), 1);
    let (path, _) = hook.seen.lock()[0].clone();
    assert_eq!(path, "/stamp?timeout=10s");
    let r = &calls[0]["request"];
    assert_eq!(calls[0]["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(r["operation"], "CREATE");
    assert_eq!(
        r["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        r["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(r["requestKind"], r["kind"]);
    assert_eq!(
        (r["name"].as_str(), r["namespace"].as_str()),
        (Some("a"), Some("default"))
    );
    assert_eq!(r["userInfo"]["username"], "system:admin");
    assert_eq!(r["object"]["data"]["k"], "v");
    assert!(r["oldObject"].is_null());
    assert_eq!(r["dryRun"], false);
    assert_eq!(r["options"]["kind"], "CreateOptions");
    assert_eq!(r["options"]["apiVersion"], "meta.k8s.io/v1");
    srv.shutdown().await;
}

#[tokio::test]
async fn mutating_webhooks_run_before_validating_ones_which_see_the_patched_object() {
    let hook = Webhook::start(|path, review| match path {
        "/mutate" => patch(
            review,
            json!([{"op": "add", "path": "/metadata/labels/tier", "value": "gold"}]),
        ),
        _ if review["request"]["object"]["metadata"]["labels"]["tier"] == "gold" => admit(review),
        _ => refuse(review, "no tier"),
    })
    .await;
    let srv = server().await;
    // The validating configuration sorts first by name; kind order decides all the same.
    srv.create(validating(
        "a-check",
        vec![hook.hook("check.example.com", "/validate", json!({}))],
    ))
    .unwrap();
    // Registered by server-side apply, as a webhook server keeps its configuration; applied
    // twice, the second time a no-op.
    let configs: Api<MutatingWebhookConfiguration> = Api::all(srv.client());
    let apply = PatchParams::apply("registrar").force();
    let config = mutating(
        "z-tier",
        vec![hook.hook("tier.example.com", "/mutate", json!({}))],
    );
    for _ in 0..2 {
        configs
            .patch("z-tier", &apply, &Patch::Apply(&config))
            .await
            .unwrap();
    }
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let created = cms
        .create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    assert_eq!(created.metadata.labels.unwrap()["tier"], "gold");
    let order: Vec<String> = hook.seen.lock().iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(order, ["/mutate?timeout=10s", "/validate?timeout=10s"]);
    let seen = &hook.calls("/validate")[0]["request"]["object"];
    assert_eq!(seen["metadata"]["labels"]["tier"], "gold");
    srv.shutdown().await;
}

#[tokio::test]
async fn apply_and_replace_are_admitted_as_create_then_update() {
    let hook = Webhook::start(|_, review| {
        let op = review["request"]["operation"].clone();
        patch(
            review,
            json!([{"op": "add", "path": "/metadata/labels/admitted", "value": op}]),
        )
    })
    .await;
    let srv = server().await;
    srv.create(mutating(
        "ops",
        vec![hook.hook(
            "ops.example.com",
            "/ops",
            json!({"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                              "apiVersions": ["v1"], "resources": ["configmaps"]}]}),
        )],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let apply = PatchParams::apply("tester");
    let created = cms
        .patch("a", &apply, &Patch::Apply(config_map("a")))
        .await
        .unwrap();
    assert_eq!(
        created.metadata.labels.as_ref().unwrap()["admitted"],
        "CREATE"
    );
    let fields = created.metadata.managed_fields.unwrap();
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].manager.as_deref(), Some("tester"));
    assert_eq!(fields[0].operation.as_deref(), Some("Apply"));

    let mut changed = config_map("a");
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let applied = cms
        .patch("a", &apply, &Patch::Apply(changed))
        .await
        .unwrap();
    assert_eq!(
        applied.metadata.labels.as_ref().unwrap()["admitted"],
        "UPDATE"
    );
    assert_eq!(applied.data.as_ref().unwrap()["k"], "w");

    let mut replaced = cms.get("a").await.unwrap();
    replaced
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("admitted");
    replaced.data = Some([("k".to_string(), "x".to_string())].into());
    let replaced = cms
        .replace("a", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(
        replaced.metadata.labels.as_ref().unwrap()["admitted"],
        "UPDATE"
    );
    assert_eq!(replaced.data.as_ref().unwrap()["k"], "x");

    let calls = hook.calls("/ops");
    let ops: Vec<&str> = calls
        .iter()
        .map(|c| c["request"]["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["CREATE", "UPDATE", "UPDATE"]);
    assert_eq!(calls[0]["request"]["options"]["kind"], "CreateOptions");
    assert_eq!(calls[0]["request"]["options"]["fieldManager"], "tester");
    assert_eq!(calls[1]["request"]["options"]["kind"], "UpdateOptions");
    assert_eq!(calls[1]["request"]["oldObject"]["data"]["k"], "v");
    assert_eq!(calls[2]["request"]["oldObject"]["data"]["k"], "w");
    srv.shutdown().await;
}

#[tokio::test]
async fn a_write_changed_under_its_webhooks_is_admitted_again_and_loses_nothing() {
    let srv = Arc::new(server().await);
    let other = srv.clone();
    let first = std::sync::atomic::AtomicBool::new(true);
    let hook = Webhook::start(move |_, review| {
        if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            // Another writer gets in while the webhook is being asked.
            other
                .update(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "a", "namespace": "default"},
                    "data": {"k": "v", "other": "writer"}}))
                .unwrap();
        }
        admit(review)
    })
    .await;
    srv.create(serde_json::to_value(config_map("a")).unwrap())
        .unwrap();
    srv.create(validating(
        "updates",
        vec![hook.hook(
            "updates.example.com",
            "/",
            json!({"rules": [{"operations": ["UPDATE"], "apiGroups": [""],
                              "apiVersions": ["v1"], "resources": ["configmaps"]}]}),
        )],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let patched = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"mine": "1"}})),
        )
        .await
        .unwrap();
    let data = patched.data.unwrap();
    assert_eq!(
        (data["other"].as_str(), data["mine"].as_str()),
        ("writer", "1")
    );
    let calls = hook.calls("/");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1]["request"]["oldObject"]["data"]["other"], "writer");
    assert_eq!(calls[1]["request"]["object"]["data"]["other"], "writer");
}

#[tokio::test]
async fn an_unreachable_webhook_fails_the_write_under_fail_and_is_skipped_under_ignore() {
    let hook = Webhook::start(|_, review| admit(review)).await;
    let port = closed_port().await;
    let mut gone = hook.hook("gone.example.com", "/", json!({}));
    gone["clientConfig"]["url"] = format!("https://127.0.0.1:{port}/admit").into();
    let srv = server().await;
    srv.create(validating("gone", vec![gone.clone()])).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let s = status(
        cms.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    assert_eq!(
        s.message,
        format!(
            "Internal error occurred: failed calling webhook \"gone.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/admit?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    gone["failurePolicy"] = "Ignore".into();
    srv.update(validating("gone", vec![gone])).unwrap();
    cms.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    srv.shutdown().await;
}

#[tokio::test]
async fn a_webhook_that_hangs_past_its_timeout_fails_or_is_ignored() {
    let hook = Webhook::start(|_, _| Reply::Hang).await;
    let srv = server().await;
    let slow = |policy: &str| {
        hook.hook(
            "slow.example.com",
            "/hang",
            json!({"timeoutSeconds": 1, "failurePolicy": policy}),
        )
    };
    srv.create(validating("slow", vec![slow("Fail")])).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let s = status(
        cms.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 500);
    assert_eq!(
        s.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"{}/hang?timeout=1s\": context deadline exceeded",
            hook.base
        )
    );
    srv.update(validating("slow", vec![slow("Ignore")]))
        .unwrap();
    cms.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    srv.shutdown().await;
}

#[tokio::test]
async fn an_answer_for_another_request_is_a_failed_call() {
    let hook = Webhook::start(|_, review| {
        let mut r = response(review, json!({}));
        r["response"]["uid"] = "not-the-request".into();
        Reply::Json(r)
    })
    .await;
    let srv = server().await;
    srv.create(validating(
        "confused",
        vec![hook.hook("confused.example.com", "/", json!({}))],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let s = status(
        cms.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    let uid = hook.calls("/")[0]["request"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.code, 500);
    assert_eq!(
        s.message,
        format!(
            "Internal error occurred: failed calling webhook \"confused.example.com\": received invalid webhook response: expected response.uid=\"{uid}\", got \"not-the-request\""
        )
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn rules_and_namespace_selectors_that_do_not_match_call_nothing() {
    let hook = Webhook::start(|_, review| refuse(review, "called")).await;
    let srv = server().await;
    let rule = |operations: Value, resources: Value| {
        json!({"rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": resources}]})
    };
    srv.create(validating(
        "elsewhere",
        vec![
            hook.hook(
                "updates.example.com",
                "/updates",
                rule(json!(["UPDATE"]), json!(["configmaps"])),
            ),
            hook.hook(
                "secrets.example.com",
                "/secrets",
                rule(json!(["*"]), json!(["secrets"])),
            ),
            hook.hook(
                "team-a.example.com",
                "/team-a",
                json!({"namespaceSelector": {"matchLabels": {"team": "a"}}}),
            ),
        ],
    ))
    .unwrap();
    for (ns, team) in [("ns-a", "a"), ("ns-b", "b")] {
        srv.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"team": team}}}))
            .unwrap();
    }
    let in_b: Api<ConfigMap> = Api::namespaced(srv.client(), "ns-b");
    in_b.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    assert!(hook.seen.lock().is_empty());
    let in_a: Api<ConfigMap> = Api::namespaced(srv.client(), "ns-a");
    let s = status(
        in_a.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    assert!(s.message.contains("team-a.example.com"), "{}", s.message);
    assert_eq!(hook.calls("/team-a").len(), 1);
    assert!(hook.calls("/updates").is_empty() && hook.calls("/secrets").is_empty());
    srv.shutdown().await;
}

#[tokio::test]
async fn a_delete_shows_the_old_object_and_no_object() {
    let hook = Webhook::start(|_, review| admit(review)).await;
    let srv = server().await;
    srv.create(validating(
        "deletes",
        vec![hook.hook(
            "deletes.example.com",
            "/delete",
            json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""],
                              "apiVersions": ["v1"], "resources": ["configmaps"]}]}),
        )],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    cms.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    assert!(hook.seen.lock().is_empty());
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("a").await.unwrap().is_none());
    let calls = hook.calls("/delete");
    assert_eq!(calls.len(), 1);
    let r = &calls[0]["request"];
    assert_eq!(r["operation"], "DELETE");
    assert_eq!(r["name"], "a");
    assert!(r["object"].is_null());
    assert_eq!(r["oldObject"]["metadata"]["name"], "a");
    assert_eq!(r["oldObject"]["data"]["k"], "v");
    assert_eq!(r["options"]["kind"], "DeleteOptions");
    srv.shutdown().await;
}

#[tokio::test]
async fn a_dry_run_never_reaches_a_webhook_with_side_effects() {
    let hook = Webhook::start(|_, review| admit(review)).await;
    let srv = server().await;
    srv.create(validating(
        "effects",
        vec![hook.hook(
            "effects.example.com",
            "/effects",
            json!({"sideEffects": "Some"}),
        )],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let s = status(cms.create(&dry, &config_map("a")).await.unwrap_err());
    assert_eq!(s.code, 400);
    assert!(
        s.message.contains("does not support dry run"),
        "{}",
        s.message
    );
    assert!(hook.seen.lock().is_empty());

    // One without side effects is asked, told it is a dry run, and nothing is stored.
    srv.update(validating(
        "effects",
        vec![hook.hook(
            "effects.example.com",
            "/effects",
            json!({"sideEffects": "None"}),
        )],
    ))
    .unwrap();
    cms.create(&dry, &config_map("a")).await.unwrap();
    let r = &hook.calls("/effects")[0]["request"];
    assert_eq!(r["dryRun"], true);
    assert_eq!(r["options"]["dryRun"], json!(["All"]));
    assert!(cms.get_opt("a").await.unwrap().is_none());
    srv.shutdown().await;
}

#[tokio::test]
async fn a_patch_that_renames_the_object_is_refused() {
    let hook = Webhook::start(|_, review| {
        patch(
            review,
            json!([{"op": "replace", "path": "/metadata/name", "value": "hijacked"}]),
        )
    })
    .await;
    let srv = server().await;
    srv.create(mutating(
        "rename",
        vec![hook.hook("rename.example.com", "/", json!({}))],
    ))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let s = status(
        cms.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 500);
    assert_eq!(
        s.message,
        "Internal error occurred: admission webhook \"rename.example.com\" may not change metadata.name (from \"a\" to \"hijacked\")"
    );
    assert!(cms.get_opt("a").await.unwrap().is_none());
    assert!(cms.get_opt("hijacked").await.unwrap().is_none());
    srv.shutdown().await;
}

#[tokio::test]
async fn warnings_arrive_as_warning_headers_on_success_and_denial() {
    let hook = Webhook::start(|path, review| {
        let warnings = json!(["label \"app\" is \\ deprecated"]);
        let allowed = path == "/allow";
        Reply::Json(response(
            review,
            json!({"allowed": allowed, "warnings": warnings, "status": {"message": "no"}}),
        ))
    })
    .await;
    let srv = server().await;
    srv.create(validating(
        "warn",
        vec![hook.hook("warn.example.com", "/allow", json!({}))],
    ))
    .unwrap();
    let client = srv.client();
    let post = |name: &str| {
        http::Request::post("/api/v1/namespaces/default/configmaps")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&config_map(name)).unwrap())
            .unwrap()
    };
    let resp = client.send(post("a").map(Into::into)).await.unwrap();
    assert_eq!(resp.status(), 201);
    let warnings: Vec<&str> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(warnings, [r#"299 - "label \"app\" is \\ deprecated""#]);

    srv.update(validating(
        "warn",
        vec![hook.hook("warn.example.com", "/deny", json!({}))],
    ))
    .unwrap();
    let resp = client.send(post("b").map(Into::into)).await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers().get_all("warning").iter().count(), 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn status_and_scale_writes_are_admitted_when_a_rule_names_them() {
    let hook = Webhook::start(|_, review| admit(review)).await;
    let srv = server().await;
    let on = |resources: Value| {
        json!({"rules": [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                          "resources": resources}]})
    };
    srv.create(validating(
        "subresources",
        vec![
            hook.hook(
                "status.example.com",
                "/status",
                on(json!(["deployments/status"])),
            ),
            hook.hook("scale.example.com", "/scale", on(json!(["*/scale"]))),
            hook.hook("main.example.com", "/main", on(json!(["deployments"]))),
        ],
    ))
    .unwrap();
    srv.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
        .unwrap();
    let deploys: Api<Deployment> = Api::namespaced(srv.client(), "default");
    let pp = PatchParams::default();
    deploys
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"replicas": 1}})),
        )
        .await
        .unwrap();
    deploys
        .patch_scale("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(hook.calls("/main").len(), 0);
    let status = &hook.calls("/status")[0]["request"];
    assert_eq!(status["subResource"], "status");
    assert_eq!(status["object"]["status"]["replicas"], 1);
    let scale = &hook.calls("/scale")[0]["request"];
    assert_eq!(scale["subResource"], "scale");
    assert_eq!(scale["kind"]["kind"], "Scale");
    assert_eq!(scale["object"]["spec"]["replicas"], 3);
    assert_eq!(scale["oldObject"]["spec"]["replicas"], 1);
    let web = deploys.get("web").await.unwrap();
    assert_eq!(web.spec.unwrap().replicas, Some(3));
    srv.shutdown().await;
}

#[tokio::test]
async fn a_service_reference_is_a_failed_call_that_says_why() {
    let srv = server().await;
    let hook = json!({
        "name": "svc.example.com",
        "clientConfig": {"service": {"namespace": "default", "name": "webhook"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"],
    });
    srv.create(validating("svc", vec![hook])).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let s = status(
        cms.create(&PostParams::default(), &config_map("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 500);
    assert!(
        s.message.contains("cannot resolve services"),
        "{}",
        s.message
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn a_configuration_the_api_would_refuse_is_refused() {
    let srv = server().await;
    let mut bad = json!({
        "name": "plain.example.com",
        "clientConfig": {"url": "http://127.0.0.1:1/"},
        "rules": [], "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 31,
    });
    let err = srv
        .create(validating("bad", vec![bad.clone()]))
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("webhooks[0].clientConfig.url"), "{text}");
    assert!(text.contains("webhooks[0].timeoutSeconds"), "{text}");
    bad["clientConfig"]["url"] = "https://127.0.0.1:1/".into();
    bad["timeoutSeconds"] = 30.into();
    srv.create(validating("bad", vec![bad])).unwrap();
    srv.shutdown().await;
}
