//! HTTP: routing of Kubernetes REST paths to the API layer, discovery documents, query
//! parameters, body limits, and errors as metav1.Status. One fallback handler parses the path
//! itself because resource paths are dynamic (CRDs come and go).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use super::admission::Admit;
use super::api::{Sub, WriteOpts};
use super::identity::{self, Identity};
use super::patch::PatchType;
use super::rbac;
use super::resources::ResourceType;
use super::selector::{FieldSelector, LabelSelector, parse_labels};
use super::watch::{self, WatchRequest};
use super::{
    Error, Result, Shared, discovery, openapi, portforward, protobuf, review, server, strategy,
    table, validation,
};

mod list;
mod target;
use list::list;
use target::{Action, Target, authorize, parse_target};

/// The router for one server.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

fn json_bytes(code: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut resp = (code, Body::from(body.into())).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn json_value(code: StatusCode, v: &Value) -> Response {
    json_bytes(code, serde_json::to_vec(v).unwrap_or_default())
}

fn error_response(e: &Error) -> Response {
    let (code, _) = e.code_and_reason();
    json_value(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
}

/// An admitted write's response, success or error, with its webhooks' warnings as `Warning`
/// headers either way (kube-apiserver sends them with a denial too).
fn admitted(adm: &Admit<'_>, result: Result<Response>) -> Response {
    let mut resp = result.unwrap_or_else(|e| error_response(&e));
    for warning in adm.warning_headers() {
        resp.headers_mut().append(header::WARNING, warning);
    }
    resp
}

fn success(message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "message": message, "code": 200})
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    // Authentication and impersonation come first, as in the apiserver's filter chain.
    let who = match identity::identify(&shared, req.headers()) {
        Ok(who) => who,
        Err(e) => return error_response(&e),
    };
    if let Some(fault) = req.uri().path().strip_prefix("/_informant/faults/") {
        // The test's own controls are no part of the API a restricted identity was granted.
        if let Err(e) = check_path(&shared, &who, req.method(), req.uri().path()) {
            return error_response(&e);
        }
        let fault = fault.trim_end_matches('/').to_string();
        return faults_endpoint(&shared, req.method(), &fault);
    }
    // The partition: hold every ordinary request until resumed.
    shared.faults.wait_resumed().await;
    match dispatch(&shared, &who, req).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

fn faults_endpoint(shared: &Arc<Shared>, method: &Method, fault: &str) -> Response {
    if method != Method::POST {
        return error_response(&Error::MethodNotAllowed(format!(
            "{method} /_informant/faults/{fault}"
        )));
    }
    match fault {
        "close-watches" => shared.faults.close_watches(),
        "compact" => shared.api.store.compact(),
        "pause" => shared.faults.set_paused(true),
        "resume" => shared.faults.set_paused(false),
        "restart" => {
            // Restarting drops this very connection: answer first, restart once the body is out.
            let (done, sent) = tokio::sync::oneshot::channel::<()>();
            let mut done = Some(done);
            let body = futures::stream::iter([Ok::<_, Infallible>(Bytes::from(
                serde_json::to_vec(&success("restarting")).unwrap_or_default(),
            ))])
            .chain(futures::stream::poll_fn(move |_| {
                if let Some(done) = done.take() {
                    let _ = done.send(());
                }
                Poll::Ready(None)
            }));
            let shared = shared.clone();
            tokio::spawn(async move {
                // Err means the response was dropped unsent: restart all the same.
                let _ = sent.await;
                server::restart(&shared).await;
            });
            let mut resp = (StatusCode::OK, Body::from_stream(body)).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return resp;
        }
        other => {
            return error_response(&Error::UnknownResource {
                what: format!("fault {other:?}"),
            });
        }
    }
    json_value(StatusCode::OK, &success(fault))
}

fn version_doc() -> Value {
    json!({
        "major": "1", "minor": "33", "emulationMajor": "1", "emulationMinor": "33",
        "minCompatibilityMajor": "1", "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0", "gitCommit": "informant-devserver", "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// The response media type of the protobuf OpenAPI v2. kubectl asks for
/// `...spec.v2@v1.0+protobuf`, but Go's mime parser rejects the `@` in a response, so (like
/// kube-apiserver) we answer with a `.`.
const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn wants_aggregated(req: &Request) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(discovery::wants_v2)
}

fn wants_openapi_v2_protobuf(req: &Request) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/com.github.proto-openapi.spec.v2"))
}

/// A non-resource path: refused to a restricted identity unless it is discovery.
fn check_path(shared: &Shared, who: &Identity, method: &Method, path: &str) -> Result<()> {
    let verb = method.as_str().to_ascii_lowercase();
    let user = who.user.as_deref();
    if shared.rbac.allows_path(user, &verb, path) {
        return Ok(());
    }
    Err(rbac::forbidden_path(user.unwrap_or_default(), &verb, path))
}

async fn dispatch(shared: &Arc<Shared>, who: &Identity, req: Request) -> Result<Response> {
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get_only = |doc: Value| {
        if req.method() == Method::GET {
            Ok(json_value(StatusCode::OK, &doc))
        } else {
            Err(Error::MethodNotAllowed(format!("{} {path}", req.method())))
        }
    };
    match segs.as_slice() {
        ["version"] => get_only(version_doc()),
        ["healthz" | "readyz" | "livez", ..] => Ok((StatusCode::OK, "ok").into_response()),
        ["api" | "apis"] if req.method() == Method::GET && wants_aggregated(&req) => {
            let doc = discovery::list(&shared.api.registry(), segs[0] == "api");
            let mut resp = json_value(StatusCode::OK, &doc);
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(discovery::CONTENT_TYPE),
            );
            resp.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("Accept"));
            Ok(resp)
        }
        ["api"] => get_only(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.listener.addr().to_string()}]
        })),
        ["apis"] => get_only(shared.api.registry().group_list()),
        ["api", "v1"] => get_only(shared.api.registry().resource_list("", "v1")),
        ["apis", group] => {
            let doc = shared.api.registry().group(group);
            match doc {
                Some(doc) => get_only(doc),
                None => Err(Error::UnknownResource { what: path.clone() }),
            }
        }
        ["apis", group, version] => {
            let doc = {
                let reg = shared.api.registry();
                reg.serves_group_version(group, version)
                    .then(|| reg.resource_list(group, version))
            };
            match doc {
                Some(doc) => get_only(doc),
                None => Err(Error::UnknownResource { what: path.clone() }),
            }
        }
        ["openapi", "v2"] if wants_openapi_v2_protobuf(&req) => {
            if req.method() != Method::GET {
                return Err(Error::MethodNotAllowed(format!("{} {path}", req.method())));
            }
            let mut resp = (
                StatusCode::OK,
                Body::from(openapi::v2_protobuf(&shared.api.registry())),
            )
                .into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(OPENAPI_V2_PROTOBUF),
            );
            Ok(resp)
        }
        ["openapi", "v2"] => get_only(openapi::v2_json(&shared.api.registry())),
        ["openapi", "v3"] => get_only(openapi::index(&shared.api.registry())),
        ["openapi", "v3", "api", version] => {
            let doc = openapi::document(&shared.api.registry(), "", version);
            doc.map_or_else(
                || Err(Error::UnknownResource { what: path.clone() }),
                get_only,
            )
        }
        ["openapi", "v3", "apis", group, version] => {
            let doc = openapi::document(&shared.api.registry(), group, version);
            doc.map_or_else(
                || Err(Error::UnknownResource { what: path.clone() }),
                get_only,
            )
        }
        ["api", version, rest @ ..] => {
            let target = parse_target(shared, "", version, rest, &path)?;
            resource(shared, who, target, req).await
        }
        ["apis", group, version, rest @ ..] => {
            let target = parse_target(shared, group, version, rest, &path)?;
            resource(shared, who, target, req).await
        }
        _ => {
            check_path(shared, who, req.method(), &path)?;
            Err(Error::UnknownResource { what: path.clone() })
        }
    }
}

type Params = HashMap<String, String>;

fn params(req: &Request) -> Result<Params> {
    Query::<Params>::try_from_uri(req.uri())
        .map(|q| q.0)
        .map_err(|e| Error::BadRequest(format!("invalid query: {e}")))
}

fn flag(q: &Params, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

fn write_opts(q: &Params, version: &str, user_agent: Option<&str>) -> WriteOpts {
    WriteOpts {
        default_manager: Some(
            user_agent
                .unwrap_or_default()
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string(),
        ),
        force: flag(q, "force"),
        dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
        http: true,
        version: Some(version.to_string()),
        field_manager: q.get("fieldManager").cloned(),
        ..WriteOpts::default()
    }
}

async fn read_body(shared: &Shared, req: Request) -> Result<(Bytes, Option<String>)> {
    let limit = shared.config.max_body_bytes;
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    let mut stream = req.into_body().into_data_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::BadRequest(format!("reading request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(Error::TooLarge { limit });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok((buf.freeze(), content_type))
}

fn parse_object(body: &[u8], content_type: Option<&str>) -> Result<Value> {
    if content_type.is_some_and(|ct| ct.starts_with(protobuf::CONTENT_TYPE)) {
        return protobuf::decode(body);
    }
    let yaml = content_type.is_some_and(|ct| ct.contains("yaml"));
    let v: Value = if yaml {
        serde_saphyr::from_slice(body)
            .map_err(|e| Error::BadRequest(format!("error decoding YAML body: {e}")))?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            Error::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))
        })?
    };
    Ok(v)
}

async fn resource(
    shared: &Arc<Shared>,
    who: &Identity,
    t: Target,
    req: Request,
) -> Result<Response> {
    let q = params(&req)?;
    authorize(shared, who, &t, &req, &q)?;
    if t.res.review {
        if req.method() != Method::POST || t.name.is_some() {
            return Err(Error::MethodNotAllowed(format!(
                "{} {}",
                req.method(),
                t.res.plural
            )));
        }
        let (body, ct) = read_body(shared, req).await?;
        let obj = parse_object(&body, ct.as_deref())?;
        let answered = review::answer(shared, who, &t.res.plural, obj)?;
        return Ok(json_value(StatusCode::CREATED, &answered));
    }
    let ns = t.namespace.clone().unwrap_or_default();
    let method = req.method().clone();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let ua = user_agent.as_deref();
    let wants_table = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    if let (Some(Action::PortForward), Some(name)) = (t.action, &t.name) {
        if method != Method::GET {
            return Err(Error::MethodNotAllowed(format!(
                "{method} pods/portforward (a websocket upgrade is a GET)"
            )));
        }
        let ports = q.get("ports").map(String::as_str);
        return portforward::serve(shared, &t.res, &ns, name, ports, req);
    }
    if let (Some(a), Some(name)) = (t.action, &t.name) {
        return action(shared, &t, a, name, &q, ua, &method);
    }
    if let (Sub::Scale, Some(name)) = (t.sub, &t.name) {
        return scale(shared, who, &t, name, &q, ua, req).await;
    }
    match (&method, &t.name) {
        (&Method::GET, None) if flag(&q, "watch") => watch_response(shared, &t, &q, wants_table),
        (&Method::GET, None) => list(shared, &t, &q, wants_table),
        (&Method::GET, Some(name)) => {
            let obj = shared.api.get(&t.res, &ns, name)?;
            if wants_table {
                return Ok(json_value(
                    StatusCode::OK,
                    &table::table(&t.res, &[obj], shared.api.store.current_rv()),
                ));
            }
            Ok(json_bytes(StatusCode::OK, obj.json.clone()))
        }
        (&Method::POST, None) => {
            if t.res.namespaced && t.namespace.is_none() {
                return Err(Error::MethodNotAllowed(format!(
                    "POST {} without a namespace",
                    t.res.plural
                )));
            }
            let opts = write_opts(&q, &t.version, ua);
            let (body, ct) = read_body(shared, req).await?;
            let obj = parse_object(&body, ct.as_deref())?;
            let mut adm = Admit::new(shared, who, &t.res, &t.version, t.sub);
            let created = adm.create(&ns, obj, &opts).await;
            Ok(admitted(
                &adm,
                created.map(|v| json_value(StatusCode::CREATED, &v)),
            ))
        }
        (&Method::PUT, Some(name)) => {
            let opts = write_opts(&q, &t.version, ua);
            let (body, ct) = read_body(shared, req).await?;
            let obj = parse_object(&body, ct.as_deref())?;
            let mut adm = Admit::new(shared, who, &t.res, &t.version, t.sub);
            let updated = adm.update(&ns, name, obj, &opts).await;
            Ok(admitted(
                &adm,
                updated.map(|v| json_value(StatusCode::OK, &v)),
            ))
        }
        (&Method::PATCH, Some(name)) => {
            let opts = write_opts(&q, &t.version, ua);
            let (body, ct) = read_body(shared, req).await?;
            let ptype = PatchType::from_content_type(ct.as_deref().unwrap_or_default())?;
            let mut adm = Admit::new(shared, who, &t.res, &t.version, t.sub);
            let patched = adm.patch(&ns, name, ptype, &body, &opts).await;
            let respond = |(obj, created): (Value, bool)| {
                let code = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                json_value(code, &obj)
            };
            Ok(admitted(&adm, patched.map(respond)))
        }
        (&Method::DELETE, Some(name)) => {
            let mut opts = write_opts(&q, &t.version, ua);
            let (body, ct) = read_body(shared, req).await?;
            delete_options(&body, ct.as_deref(), &mut opts)?;
            let mut adm = Admit::new(shared, who, &t.res, &t.version, t.sub);
            let deleted = adm.delete(&ns, name, &opts).await.map(|obj| {
                if strategy::returns_deleted_object(&t.res) {
                    json_value(StatusCode::OK, &obj)
                } else {
                    json_value(StatusCode::OK, &strategy::delete_success(&t.res, &obj))
                }
            });
            Ok(admitted(&adm, deleted))
        }
        (&Method::DELETE, None) if !t.res.delete_collection() => Err(Error::MethodNotAllowed(
            format!("DELETE {} (deletecollection)", t.res.plural),
        )),
        (&Method::DELETE, None) => {
            let mut opts = write_opts(&q, &t.version, ua);
            let (labels, fields) = selectors(&q, &t.res)?;
            let (body, ct) = read_body(shared, req).await?;
            delete_options(&body, ct.as_deref(), &mut opts)?;
            let mut adm = Admit::new(shared, who, &t.res, &t.version, t.sub);
            let deleted = adm
                .delete_collection(t.namespace.as_deref(), &labels, &fields, &opts)
                .await
                .map(|n| {
                    let message = format!("deleted {n} {}", t.res.plural);
                    json_value(StatusCode::OK, &success(&message))
                });
            Ok(admitted(&adm, deleted))
        }
        _ => Err(Error::MethodNotAllowed(format!(
            "{method} {}",
            t.res.plural
        ))),
    }
}

/// `.../scale`: GET, PUT and PATCH of the autoscaling/v1 Scale.
/// `pods/eviction`, `pods/log` and `serviceaccounts/token`.
fn action(
    shared: &Arc<Shared>,
    t: &Target,
    a: Action,
    name: &str,
    q: &Params,
    user_agent: Option<&str>,
    method: &Method,
) -> Result<Response> {
    let ns = t.namespace.clone().unwrap_or_default();
    let wrong_method = || {
        Err(Error::MethodNotAllowed(format!(
            "{method} {}/{}",
            t.res.plural,
            a.name()
        )))
    };
    match a {
        Action::Eviction => {
            if method != Method::POST {
                return wrong_method();
            }
            let opts = write_opts(q, &t.version, user_agent);
            shared.api.delete(&t.res, Some(&ns), name, &opts)?;
            Ok(json_value(
                StatusCode::CREATED,
                &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Success", "code": 201}),
            ))
        }
        Action::Log => {
            if method != Method::GET {
                return wrong_method();
            }
            shared.api.get(&t.res, &ns, name)?;
            Err(Error::BadRequest(format!(
                "pod {name:?} has no logs: the embedded API server runs no kubelet, so no container ever starts"
            )))
        }
        // Served before `action` is reached (it needs the request for its upgrade).
        Action::PortForward => wrong_method(),
        Action::Token => {
            if method != Method::POST {
                return wrong_method();
            }
            shared.api.get(&t.res, &ns, name)?;
            Ok(json_value(StatusCode::CREATED, &token_request(&ns, name)))
        }
    }
}

/// A TokenRequest's answer: an unsigned JWT for `system:serviceaccount:NS:NAME`, valid an hour
/// (the server does not take it as a credential: only the tokens it maps to users count).
fn token_request(ns: &str, name: &str) -> Value {
    use base64::Engine as _;
    let b64 = |v: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
    };
    let now = jiff::Timestamp::now();
    let expires = now.as_second() + 3600;
    let audience = "https://kubernetes.default.svc.cluster.local";
    let claims = serde_json::json!({
        "aud": [audience], "iss": audience, "iat": now.as_second(), "nbf": now.as_second(),
        "exp": expires, "sub": format!("system:serviceaccount:{ns}:{name}"),
    });
    let token = format!(
        "{}.{}.",
        b64(&serde_json::json!({"alg": "none", "typ": "JWT"})),
        b64(&claims)
    );
    let expiry = jiff::Timestamp::from_second(expires)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    serde_json::json!({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
        "spec": {"audiences": [audience], "expirationSeconds": 3600, "boundObjectRef": null},
        "status": {"token": token, "expirationTimestamp": expiry},
    })
}

async fn scale(
    shared: &Arc<Shared>,
    who: &Identity,
    t: &Target,
    name: &str,
    q: &Params,
    user_agent: Option<&str>,
    req: Request,
) -> Result<Response> {
    let ns = t.namespace.clone().unwrap_or_default();
    let method = req.method().clone();
    let opts = write_opts(q, &t.version, user_agent);
    let mut adm = Admit::new(shared, who, &t.res, &t.version, t.sub);
    let scale = match method {
        Method::GET => shared.api.get_scale(&t.res, &ns, name)?,
        Method::PUT => {
            let (body, ct) = read_body(shared, req).await?;
            let body = parse_object(&body, ct.as_deref())?;
            let scaled = adm.update_scale(&ns, name, body, &opts).await;
            return Ok(admitted(
                &adm,
                scaled.map(|v| json_value(StatusCode::OK, &v)),
            ));
        }
        Method::PATCH => {
            let (body, ct) = read_body(shared, req).await?;
            let ptype = PatchType::from_content_type(ct.as_deref().unwrap_or_default())?;
            let scaled = adm.patch_scale(&ns, name, ptype, &body, &opts).await;
            return Ok(admitted(
                &adm,
                scaled.map(|v| json_value(StatusCode::OK, &v)),
            ));
        }
        _ => {
            return Err(Error::MethodNotAllowed(format!(
                "{method} {}/scale",
                t.res.plural
            )));
        }
    };
    Ok(json_value(StatusCode::OK, &scale))
}

fn delete_options(body: &[u8], content_type: Option<&str>, opts: &mut WriteOpts) -> Result<()> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let v = match content_type {
        Some(ct) if ct.starts_with(protobuf::CONTENT_TYPE) => protobuf::decode(body)?,
        _ => serde_json::from_slice(body)
            .map_err(|e| Error::BadRequest(format!("couldn't decode DeleteOptions: {e}")))?,
    };
    let s = |v: &Value| v.as_str().map(String::from);
    opts.precondition_uid = s(&v["preconditions"]["uid"]);
    opts.precondition_rv = s(&v["preconditions"]["resourceVersion"]);
    if v["dryRun"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == "All"))
    {
        opts.dry_run = true;
    }
    Ok(())
}

fn selectors(q: &Params, res: &ResourceType) -> Result<(LabelSelector, FieldSelector)> {
    let labels = parse_labels(
        q.get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    fields.check_supported(res)?;
    Ok((labels, fields))
}

fn parse_rv(q: &Params) -> Result<Option<u64>> {
    match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => Ok(None),
        Some(rv) => rv.parse().map(Some).map_err(|_| {
            Error::BadRequest(format!(
                "resourceVersion: Invalid value: \"{rv}\": must be a non-negative integer"
            ))
        }),
    }
}

fn watch_response(
    shared: &Arc<Shared>,
    t: &Target,
    q: &Params,
    wants_table: bool,
) -> Result<Response> {
    validation::list_options(q, true)?;
    let (labels, fields) = selectors(q, &t.res)?;
    let timeout = match q.get("timeoutSeconds").map(String::as_str) {
        None | Some("") => None,
        Some(s) => Some(Duration::from_secs(s.parse().map_err(|_| {
            Error::BadRequest(format!("timeoutSeconds: Invalid value: \"{s}\""))
        })?)),
    };
    let req = WatchRequest {
        res: t.res.clone(),
        version: t.version.clone(),
        namespace: t.namespace.clone(),
        labels,
        fields,
        resource_version: parse_rv(q)?,
        send_initial_events: flag(q, "sendInitialEvents"),
        bookmarks: flag(q, "allowWatchBookmarks"),
        timeout,
        table: wants_table,
    };
    let mut resp = (StatusCode::OK, watch::serve(shared.clone(), req)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}
