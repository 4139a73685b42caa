//! Identities and RBAC: a restricted identity (bearer token from `kubeconfig_as`, or
//! impersonation) may read and write only what its rules allow, and everything else gets
//! kube-apiserver's own 401/403 Status; odd spellings of a path never serve a refused resource;
//! the access reviews answer for the caller; the access log sees every request.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use informant_devserver::audit::AllowRule;
use informant_devserver::{DevServer, DevServerConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview,
    SelfSubjectAccessReviewSpec, SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
    SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ListParams, PostParams, WatchParams};
use kube::discovery::{Discovery, verbs};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

const GUARD: Duration = Duration::from_secs(30);
const SA: &str = "system:serviceaccount:informant:informant";
/// The secret's value, base64: no refused request may ever answer with it.
const SECRET_DATA: &str = "aHVudGVyMg==";

fn rule(verbs: &[&str], resource: &str, namespace: Option<&str>) -> AllowRule {
    AllowRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource: resource.into(),
        namespace: namespace.map(String::from),
        ..AllowRule::default()
    }
}

/// A server with two namespaces, a ConfigMap and a Secret in each, and [`SA`] allowed to read
/// ConfigMaps and Deployments anywhere.
async fn server() -> DevServer {
    let srv = DevServer::start(DevServerConfig::default()).await.unwrap();
    for ns in ["team-a", "team-b"] {
        srv.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
        srv.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": ns}, "data": {"k": "v"}}))
            .unwrap();
        srv.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": ns}, "data": {"password": SECRET_DATA}}))
            .unwrap();
    }
    srv.restrict(
        SA,
        vec![
            rule(&["get", "list", "watch"], "configmaps", None),
            rule(&["get", "list", "watch"], "deployments.apps", None),
        ],
    );
    srv
}

fn status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Asserts the error is kube-apiserver's 403 with exactly this message and these details.
fn assert_forbidden(e: kube::Error, message: &str, kind: &str, name: &str) {
    let s = status(e);
    assert_eq!(s.code, 403, "{s:?}");
    assert_eq!(s.reason, "Forbidden", "{s:?}");
    assert_eq!(s.message, message);
    let details = s.details.expect("a Forbidden carries details");
    assert_eq!(details.kind, kind);
    assert_eq!(details.group, "");
    assert_eq!(details.name, name);
}

#[tokio::test]
async fn a_restricted_identity_reads_what_its_rules_allow_and_nothing_else() {
    let srv = server().await;
    let client = srv.client_as(SA);
    let all_cms: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        all_cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    assert_eq!(cms.get("cm").await.unwrap().data.unwrap()["k"], "v");
    let mut events = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let first = timeout(GUARD, events.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(_))), "{first:?}");
    let deployments: Api<Deployment> = Api::all(client.clone());
    assert!(
        deployments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let who = format!("User \"{SA}\"");
    let all_secrets: Api<Secret> = Api::all(client.clone());
    let e = all_secrets.list(&ListParams::default()).await.unwrap_err();
    assert_forbidden(
        e,
        &format!(
            "secrets is forbidden: {who} cannot list resource \"secrets\" in API group \"\" at the cluster scope"
        ),
        "secrets",
        "",
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "team-a");
    let e = secrets.list(&ListParams::default()).await.unwrap_err();
    assert_forbidden(
        e,
        &format!(
            "secrets is forbidden: {who} cannot list resource \"secrets\" in API group \"\" in the namespace \"team-a\""
        ),
        "secrets",
        "",
    );
    let e = secrets.get("s").await.unwrap_err();
    assert_forbidden(
        e,
        &format!(
            "secrets \"s\" is forbidden: {who} cannot get resource \"secrets\" in API group \"\" in the namespace \"team-a\""
        ),
        "secrets",
        "s",
    );
    let e = match secrets.watch(&WatchParams::default(), "0").await {
        Err(e) => e,
        Ok(stream) => timeout(GUARD, stream.boxed().next())
            .await
            .unwrap()
            .expect("the watch answers")
            .expect_err("a refused watch is an error"),
    };
    assert_forbidden(
        e,
        &format!(
            "secrets is forbidden: {who} cannot watch resource \"secrets\" in API group \"\" in the namespace \"team-a\""
        ),
        "secrets",
        "",
    );
    // A list of one object by name is refused by that name, as the apiserver words it.
    let by_name = ListParams::default().fields("metadata.name=s");
    assert_forbidden(
        secrets.list(&by_name).await.unwrap_err(),
        &format!(
            "secrets \"s\" is forbidden: {who} cannot list resource \"secrets\" in API group \"\" in the namespace \"team-a\""
        ),
        "secrets",
        "s",
    );
    // Writes are held to the same rules.
    let e = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "new"}})).unwrap(),
        )
        .await
        .unwrap_err();
    assert_forbidden(
        e,
        &format!(
            "configmaps is forbidden: {who} cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
        ),
        "configmaps",
        "",
    );
    // The unauthenticated admin is as unrestricted as ever.
    let admin: Api<Secret> = Api::all(srv.client());
    assert_eq!(
        admin
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn a_namespaced_rule_allows_its_namespace_and_not_the_cluster() {
    let srv = server().await;
    srv.restrict("alice", vec![rule(&["list"], "secrets", Some("team-a"))]);
    let client = srv.client_as("alice");
    let in_a: Api<Secret> = Api::namespaced(client.clone(), "team-a");
    assert_eq!(
        in_a.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let in_b: Api<Secret> = Api::namespaced(client.clone(), "team-b");
    assert_eq!(
        status(in_b.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
    let all: Api<Secret> = Api::all(client.clone());
    assert_forbidden(
        all.list(&ListParams::default()).await.unwrap_err(),
        "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" at the cluster scope",
        "secrets",
        "",
    );
    // The rule names one verb; the others stay refused in its namespace too.
    assert_eq!(status(in_a.get("s").await.unwrap_err()).code, 403);
    // A namespace is in itself: a rule for team-a reaches the Namespace object team-a.
    srv.restrict("carol", vec![rule(&["get"], "namespaces", Some("team-a"))]);
    let namespaces: Api<Namespace> = Api::all(srv.client_as("carol"));
    namespaces.get("team-a").await.unwrap();
    assert_forbidden(
        namespaces.get("team-b").await.unwrap_err(),
        "namespaces \"team-b\" is forbidden: User \"carol\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"team-b\"",
        "namespaces",
        "team-b",
    );
    srv.shutdown().await;
}

/// One HTTP/1.1 request on a fresh connection, with extra header lines; the status code and
/// the body as text.
async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    timeout(GUARD, s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (code, body.to_string())
}

fn json_of(body: &str) -> Value {
    match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) => serde_json::from_str(&body[a..=b]).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

#[tokio::test]
async fn odd_spellings_of_a_path_never_serve_a_refused_resource() {
    let srv = server().await;
    let token = srv.token_for(SA);
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    // The same paths serve the admin, so a refusal is the rules' doing, not a 404 by accident.
    let (code, body) = raw(srv.addr(), "GET", "/api/v1/namespaces/team-a/secrets/", &[]).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(SECRET_DATA));
    for path in [
        "/api/v1/namespaces/team-a/secrets/",
        "/api/v1/namespaces/team-a/secrets/s/",
        "//api/v1/namespaces/team-a/secrets",
        "/api/v1/namespaces/team-a/secrets%2Fs",
        "/api/v1/namespaces/team-a/configmaps%2F..%2Fsecrets",
        "/api/v1/namespaces/team-a/configmaps/..%2Fsecrets%2Fs",
        "/api/v1/namespaces/team-a/configmaps/../secrets/s",
        "/api/v1/namespaces/team-a/Secrets",
        "/api/v1/namespaces/team-a/SECRETS/s",
        "/api/v1/secrets?x=/configmaps",
        "/api/v1/secrets?watch=0&x=/api/v1/configmaps",
        "/api/v1/namespaces/team-a/secrets?fieldSelector=metadata.name%3Ds",
        "/api/v1/namespaces/team-a/secrets?watch=1",
        "/api/v1/namespaces/team-a/secrets?watch=true&resourceVersion=0",
        "/apis/apps/v1/../../api/v1/secrets",
        "/api/v1/namespaces/team-a/secrets/s/status",
    ] {
        let (code, body) = raw(srv.addr(), "GET", path, &auth).await;
        assert!(code == 403 || code == 404, "{path}: {code} {body}");
        assert!(
            !body.contains(SECRET_DATA),
            "{path} served the secret: {body}"
        );
    }
    // The fault endpoints are the test's, not a restricted identity's.
    let (code, body) = raw(srv.addr(), "POST", "/_informant/faults/pause", &auth).await;
    assert_eq!(code, 403, "{body}");
    let (code, _) = raw(srv.addr(), "GET", "/api/v1/configmaps", &auth).await;
    assert_eq!(code, 200, "the server is not paused and the token is good");
    // Discovery is everyone's.
    for path in [
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/version",
        "/openapi/v2",
        "/healthz",
    ] {
        let (code, body) = raw(srv.addr(), "GET", path, &auth).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn an_unknown_token_is_unauthorized() {
    let srv = server().await;
    for auth in ["Bearer nope", "Bearer ", "Basic YWRtaW46YWRtaW4="] {
        let (code, body) = raw(
            srv.addr(),
            "GET",
            "/api/v1/configmaps",
            &[("Authorization", auth)],
        )
        .await;
        assert_eq!(code, 401, "{auth}: {body}");
        assert_eq!(
            json_of(&body),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn impersonation_needs_the_right_to_impersonate() {
    let srv = server().await;
    srv.restrict("bob", vec![rule(&["list"], "secrets", Some("team-a"))]);
    let sa_token = format!("Bearer {}", srv.token_for(SA));
    let as_bob = [
        ("Authorization", sa_token.as_str()),
        ("Impersonate-User", "bob"),
    ];
    let (code, body) = raw(
        srv.addr(),
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        &as_bob,
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        json_of(&body),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("users \"bob\" is forbidden: User \"{SA}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
            "reason": "Forbidden", "details": {"name": "bob", "kind": "users"}, "code": 403})
    );

    srv.restrict("impersonator", vec![rule(&["impersonate"], "users", None)]);
    let token = format!("Bearer {}", srv.token_for("impersonator"));
    let as_bob = [
        ("Authorization", token.as_str()),
        ("Impersonate-User", "bob"),
    ];
    let (code, body) = raw(
        srv.addr(),
        "GET",
        "/api/v1/namespaces/team-a/secrets",
        &as_bob,
    )
    .await;
    assert_eq!(code, 200, "evaluated as bob: {body}");
    let (code, body) = raw(
        srv.addr(),
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        &as_bob,
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        json_of(&body)["message"],
        "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
    );
    // Groups need their own right.
    let with_group = [
        ("Authorization", token.as_str()),
        ("Impersonate-User", "bob"),
        ("Impersonate-Group", "admins"),
    ];
    let (code, body) = raw(
        srv.addr(),
        "GET",
        "/api/v1/namespaces/team-a/secrets",
        &with_group,
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        json_of(&body)["message"],
        "groups \"admins\" is forbidden: User \"impersonator\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
    );
    // A service account is impersonated through `serviceaccounts` in its namespace.
    let as_sa = [("Authorization", token.as_str()), ("Impersonate-User", SA)];
    let (code, body) = raw(srv.addr(), "GET", "/api/v1/configmaps", &as_sa).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        json_of(&body)["message"],
        "serviceaccounts \"informant\" is forbidden: User \"impersonator\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"informant\""
    );
    // The unrestricted admin may be anyone, and is then held to that one's rules.
    let (code, _) = raw(
        srv.addr(),
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        &[("Impersonate-User", "bob")],
    )
    .await;
    assert_eq!(code, 403);
    let (code, _) = raw(
        srv.addr(),
        "GET",
        "/api/v1/configmaps",
        &[("Impersonate-User", SA)],
    )
    .await;
    assert_eq!(code, 200);
    srv.shutdown().await;
}

fn ssar(
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(String::from),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    }
}

async fn allowed(client: &kube::Client, review: SelfSubjectAccessReview) -> bool {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answered = api.create(&PostParams::default(), &review).await.unwrap();
    answered.status.expect("a review has a status").allowed
}

#[tokio::test]
async fn access_reviews_answer_for_the_caller() {
    let srv = server().await;
    let sa = srv.client_as(SA);
    let admin = srv.client();
    assert!(allowed(&sa, ssar("list", "", "configmaps", None)).await);
    assert!(allowed(&sa, ssar("watch", "apps", "deployments", Some("team-a"))).await);
    assert!(!allowed(&sa, ssar("list", "", "secrets", None)).await);
    assert!(!allowed(&sa, ssar("get", "", "secrets", Some("team-a"))).await);
    assert!(!allowed(&sa, ssar("delete", "", "configmaps", Some("team-a"))).await);
    assert!(
        !allowed(&sa, ssar("list", "", "deployments", None)).await,
        "wrong group"
    );
    assert!(allowed(&admin, ssar("list", "", "secrets", None)).await);
    assert!(allowed(&admin, ssar("delete", "apps", "deployments", Some("x"))).await);

    let rules: Api<SelfSubjectRulesReview> = Api::all(sa.clone());
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some("team-a".into()),
        },
        ..SelfSubjectRulesReview::default()
    };
    let answered = rules.create(&PostParams::default(), &review).await.unwrap();
    let status = answered.status.expect("a rules review has a status");
    assert!(!status.incomplete);
    let rules: Vec<Value> = status
        .resource_rules
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    for want in [
        json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}),
        json!({"verbs": ["get", "list", "watch"], "apiGroups": ["apps"], "resources": ["deployments"]}),
    ] {
        assert!(rules.contains(&want), "{want} in {rules:?}");
    }
    assert!(
        !rules
            .iter()
            .any(|r| r["resources"].to_string().contains("secrets")),
        "{rules:?}"
    );

    // Only `create`, and not listable by a client that looks for every listable kind.
    let list: Api<SelfSubjectAccessReview> = Api::all(admin.clone());
    assert_eq!(
        status_code(list.list(&ListParams::default()).await.unwrap_err()),
        405
    );
    let discovery = Discovery::new(admin.clone()).run().await.unwrap();
    let mut seen = 0;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if ar.group == "authorization.k8s.io" || ar.group == "authentication.k8s.io" {
                seen += 1;
                assert!(!caps.supports_operation(verbs::LIST), "{ar:?} listable");
                assert!(caps.supports_operation(verbs::CREATE), "{ar:?}");
            }
        }
    }
    assert_eq!(
        seen, 4,
        "the self reviews, SubjectAccessReview and TokenReview"
    );
    srv.shutdown().await;
}

fn status_code(e: kube::Error) -> u16 {
    status(e).code
}

#[tokio::test]
async fn the_access_log_sees_every_request_and_the_audit_only_writes() {
    let srv = server().await;
    let sa = srv.client_as(SA);
    let cms: Api<ConfigMap> = Api::all(sa.clone());
    for _ in 0..3 {
        cms.list(&ListParams::default()).await.unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), "team-a");
    secrets.list(&ListParams::default()).await.unwrap_err();
    let admin: Api<ConfigMap> = Api::namespaced(srv.client(), "team-b");
    admin.get("cm").await.unwrap();
    admin
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "new"}})).unwrap(),
        )
        .await
        .unwrap();
    assert!(allowed(&sa, ssar("list", "", "configmaps", None)).await);
    let (code, _) = raw(srv.addr(), "GET", "/apis", &[]).await;
    assert_eq!(code, 200);

    let log = srv.requests();
    let lists: Vec<_> = log
        .iter()
        .filter(|r| r.user.as_deref() == Some(SA) && r.verb == "list" && r.resource == "configmaps")
        .collect();
    assert_eq!(lists.len(), 3, "{log:?}");
    assert!(lists.iter().all(|r| r.allowed && r.namespace.is_none()));
    assert!(lists.windows(2).all(|w| w[0].at <= w[1].at));
    let refused: Vec<_> = log.iter().filter(|r| !r.allowed).collect();
    assert_eq!(refused.len(), 1, "{log:?}");
    assert_eq!(refused[0].resource, "secrets");
    assert_eq!(refused[0].namespace.as_deref(), Some("team-a"));
    let admin_get = log
        .iter()
        .find(|r| r.user.is_none() && r.verb == "get")
        .expect("the admin's get is logged");
    assert_eq!(admin_get.name.as_deref(), Some("cm"));
    let review = log.last().expect("the review is logged");
    assert_eq!(
        (
            review.verb.as_str(),
            review.resource.as_str(),
            review.allowed
        ),
        (
            "create",
            "selfsubjectaccessreviews.authorization.k8s.io",
            true
        )
    );
    assert_eq!(log.len(), 7, "discovery is not logged: {log:?}");
    // The audit stays what it was: writes only, and a review is no write.
    let audit = srv.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].verb, "create");
    assert_eq!(audit[0].user, None);
    srv.shutdown().await;
}

/// The host's identity when it delegates authentication: allowed exactly what the
/// `system:auth-delegator` ClusterRole allows.
const DELEGATOR: &str = "system:serviceaccount:informant:admin";

async fn token_review(
    client: &kube::Client,
    token: &str,
) -> Result<TokenReviewStatus, kube::Error> {
    let api: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    };
    let answered = api.create(&PostParams::default(), &review).await?;
    Ok(answered.status.expect("a token review has a status"))
}

#[tokio::test]
async fn token_reviews_tell_known_tokens_from_unknown_expired_and_revoked_ones() {
    let srv = server().await;
    // Hostile first: an identity without `create` on tokenreviews learns nothing, not even
    // whether a token is valid.
    let sa = srv.client_as(SA);
    let someone = srv.token_for("alice");
    let refused = token_review(&sa, &someone).await.unwrap_err();
    assert_eq!(status_code(refused), 403);

    srv.restrict(DELEGATOR, AllowRule::auth_delegator());
    let host = srv.client_as(DELEGATOR);
    let expiring = srv.issue_token(
        "alice",
        &["team-a-readers"],
        Some(Duration::from_millis(300)),
    );
    let revoked = srv.issue_token("bob", &[], None);
    assert!(srv.revoke_token(&revoked));
    assert!(!srv.revoke_token(&revoked), "already gone");
    for garbage in [
        "nope",
        &format!("{someone} "),
        &someone.to_uppercase(),
        &someone[..someone.len() - 1],
        &revoked,
        "informant-",
    ] {
        let status = token_review(&host, garbage).await.unwrap();
        assert_eq!(status.authenticated, Some(false), "{garbage:?}");
        let user = status.user.unwrap_or_default();
        assert_eq!(user.username, None, "{garbage:?}");
        assert!(status.error.is_some(), "{garbage:?}");
    }
    // An empty token is a malformed review, as the apiserver's validation says.
    assert_eq!(status_code(token_review(&host, "").await.unwrap_err()), 422);

    let status = token_review(&host, &expiring).await.unwrap();
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("alice"));
    assert_eq!(
        user.groups.unwrap(),
        ["team-a-readers", "system:authenticated"]
    );
    assert!(user.uid.is_some_and(|u| !u.is_empty()));
    let sa_status = token_review(&host, &srv.token_for(SA)).await.unwrap();
    assert_eq!(
        sa_status.user.unwrap().groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:informant",
            "system:authenticated"
        ]
    );

    // The expiring token stops working for reviews and for requests alike.
    let deadline = tokio::time::Instant::now() + GUARD;
    while token_review(&host, &expiring).await.unwrap().authenticated == Some(true) {
        assert!(tokio::time::Instant::now() < deadline, "never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for token in [&expiring, &revoked] {
        let (code, _) = raw(
            srv.addr(),
            "GET",
            "/api/v1/configmaps",
            &[("Authorization", &format!("Bearer {token}"))],
        )
        .await;
        assert_eq!(code, 401);
    }
    srv.shutdown().await;
}

fn sar(
    user: &str,
    resource: Option<ResourceAttributes>,
    path: Option<(&str, &str)>,
) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            resource_attributes: resource,
            non_resource_attributes: path.map(|(verb, path)| NonResourceAttributes {
                verb: Some(verb.into()),
                path: Some(path.into()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

fn tenant(verb: &str, name: Option<&str>) -> Option<ResourceAttributes> {
    Some(ResourceAttributes {
        verb: Some(verb.into()),
        group: Some("informant.dev".into()),
        resource: Some("tenants".into()),
        name: name.map(String::from),
        ..ResourceAttributes::default()
    })
}

async fn subject_allowed(client: &kube::Client, review: SubjectAccessReview) -> bool {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answered = api.create(&PostParams::default(), &review).await.unwrap();
    answered.status.expect("a review has a status").allowed
}

#[tokio::test]
async fn subject_access_reviews_judge_resource_names_and_paths_as_rbac_does() {
    let srv = server().await;
    srv.restrict(
        "alice",
        vec![
            AllowRule::new(&["get"], "tenants.informant.dev").named(&["team-a"]),
            AllowRule::paths(&["get"], &["/metrics", "/debug/*"]),
        ],
    );
    srv.restrict("nobody", vec![]);
    // Hostile first: creating a SubjectAccessReview needs its own grant.
    let sa = srv.client_as(SA);
    let api: Api<SubjectAccessReview> = Api::all(sa);
    let refused = api
        .create(
            &PostParams::default(),
            &sar("alice", tenant("get", Some("team-a")), None),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(refused), 403);

    srv.restrict(DELEGATOR, AllowRule::auth_delegator());
    let host = srv.client_as(DELEGATOR);
    assert!(subject_allowed(&host, sar("alice", tenant("get", Some("team-a")), None)).await);
    for (verb, name) in [
        ("get", Some("team-b")),
        ("get", Some("team-a ")),
        ("get", Some("TEAM-A")),
        ("get", Some("team-a/..")),
        ("get", Some("t\u{0435}am-a")),
        // A named rule never allows a request for every object.
        ("get", None),
        ("list", None),
        ("update", Some("team-a")),
    ] {
        assert!(
            !subject_allowed(&host, sar("alice", tenant(verb, name), None)).await,
            "{verb} {name:?}"
        );
    }
    assert!(subject_allowed(&host, sar("alice", None, Some(("get", "/metrics")))).await);
    assert!(subject_allowed(&host, sar("alice", None, Some(("get", "/debug/pprof")))).await);
    for (verb, path) in [
        ("post", "/metrics"),
        ("get", "/metrics/"),
        ("get", "/metricsx"),
        ("get", "/plugins"),
    ] {
        assert!(
            !subject_allowed(&host, sar("alice", None, Some((verb, path)))).await,
            "{verb} {path}"
        );
    }
    // Everyone may read discovery; a user held to no rules may do nothing else.
    assert!(subject_allowed(&host, sar("nobody", None, Some(("get", "/version")))).await);
    assert!(!subject_allowed(&host, sar("nobody", tenant("get", Some("team-a")), None)).await);
    // A review naming groups only is about nobody in particular, never the admin.
    let groups_only = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            groups: Some(vec!["system:masters".into()]),
            resource_attributes: tenant("get", None),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    assert!(!subject_allowed(&host, groups_only).await);
    // Malformed reviews are refused as the apiserver's validation refuses them.
    let api: Api<SubjectAccessReview> = Api::all(host.clone());
    for bad in [
        sar("", tenant("get", None), None),
        sar("alice", None, None),
        sar("alice", tenant("get", None), Some(("get", "/metrics"))),
    ] {
        let e = api.create(&PostParams::default(), &bad).await.unwrap_err();
        assert_eq!(status_code(e), 422);
    }
    // The rules review lists the named and the path rules as RBAC's PolicyRules.
    let rules: Api<SelfSubjectRulesReview> = Api::all(srv.client_as("alice"));
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some("team-a".into()),
        },
        ..SelfSubjectRulesReview::default()
    };
    let status = rules
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    let resource_rules = serde_json::to_value(&status.resource_rules).unwrap();
    assert!(
        resource_rules.as_array().unwrap().contains(&json!({"verbs": ["get"],
            "apiGroups": ["informant.dev"], "resources": ["tenants"], "resourceNames": ["team-a"]})),
        "{resource_rules}"
    );
    let paths = serde_json::to_value(&status.non_resource_rules).unwrap();
    assert!(
        paths.as_array().unwrap().contains(&json!({"verbs": ["get"],
            "nonResourceURLs": ["/metrics", "/debug/*"]})),
        "{paths}"
    );
    srv.shutdown().await;
}
