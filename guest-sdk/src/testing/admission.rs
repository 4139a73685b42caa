//! Admission requests in the harness: [`admission_request`] builds one as the host would hand it
//! over, [`Harness::admit`] answers it with the plugin against the harness's cache.

use serde::Serialize;
use serde_json::Value;

use super::{Harness, HarnessError, State, cache, run_in};
use crate::admission::{GroupVersionResource, Operation, UserInfo};
use crate::event::Head;
use crate::wit::informant::plugin::admission as wit;
use crate::{Admission, AdmissionRequest, HandlerError, Plugin, Resource};

/// The message of a write made during [`Harness::admit`], refused as the host refuses it.
pub(crate) const WRITE_REFUSED: &str =
    "writes are refused during admission: an admission hook has no side effects";

impl<P: Plugin> Harness<P> {
    /// Answers one admission request as the host's webhook server does: [`Plugin::admit`] on
    /// the instance, reading the harness's cache (the request's object is not stored: admission
    /// comes before the write). Writes are refused with
    /// [`WriteError::Denied`](crate::kube::WriteError::Denied), as the host refuses them; the
    /// harness never sends HTTP at all.
    ///
    /// A harness built from a manifest refuses a request whose kind and operation none of its
    /// `[[admit]]` tables declares (the host never sends one), and names the table that takes it
    /// in [`AdmissionRequest::hook`] unless the request names one. The answer is the plugin's as it
    /// is: the host's checks of it (a validating table's patch, a patch that renames the
    /// object, the bounds on warnings) are not made here.
    pub fn admit(
        &mut self,
        request: impl Into<AdmissionRequest>,
    ) -> Result<Admission, HandlerError> {
        /// Ends the admission even if the plugin panics, so the harness stays usable.
        struct Admitting<'a>(&'a mut State);
        impl Drop for Admitting<'_> {
            fn drop(&mut self) {
                self.0.admitting = false;
            }
        }
        let mut request = request.into();
        if let Some(tables) = &self.state.admits {
            let named = |t: &&informant_manifest::Admit| {
                request.hook.is_empty() || t.name.as_str() == request.hook
            };
            match tables.iter().filter(named).find(|t| declares(t, &request)) {
                None => {
                    return Err(format!(
                        "no [[admit]] table of the manifest admits {} of {}",
                        request.operation(),
                        request.kind()
                    )
                    .into());
                }
                Some(t) => request.hook = t.name.to_string(),
            }
        }
        let plugin = &mut self.plugin;
        let state = Admitting(&mut self.state);
        state.0.admitting = true;
        run_in(state.0, || plugin.admit(&request))
    }
}

/// Starts an admission request for `operation` on `object` (JSON text, a `serde_json::Value` or
/// a `k8s-openapi` object; `managedFields` removed). For [`Operation::Delete`], `object` is the
/// stored object: the request has no object, its old object is this one, as the API server
/// sends it.
///
/// The kind, namespace and name come from the object (`apiVersion` and `kind` are required, the
/// name may be absent as on a create with `generateName`), the header as the host encodes it,
/// the plural resource name from the kind (override with
/// [`AdmissionRequestBuilder::resource`]). The user is `tester` in `system:authenticated`.
///
/// ```
/// use informant_sdk::admission::{Admission, AdmissionRequest, Operation};
/// use informant_sdk::testing::{Harness, admission_request};
/// use informant_sdk::{HandlerError, Plugin};
///
/// struct NoDefault;
/// impl Plugin for NoDefault {
///     fn init(_: serde_json::Value) -> Result<Self, HandlerError> { Ok(NoDefault) }
///     fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
///         Ok(match req.namespace() {
///             Some("default") => Admission::deny("not in `default`").with_code(403),
///             _ => Admission::allow(),
///         })
///     }
/// }
///
/// let mut h = Harness::<NoDefault>::new("{}").unwrap();
/// let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"namespace": "default", "name": "cfg"}});
/// let answer = h.admit(admission_request(Operation::Create, &cm)).unwrap();
/// assert_eq!((answer.is_allowed(), answer.message()), (false, "not in `default`"));
/// ```
pub fn admission_request<T: Serialize + ?Sized>(
    operation: Operation,
    object: &T,
) -> AdmissionRequestBuilder {
    AdmissionRequestBuilder {
        operation,
        object: cache::to_object(object),
        old_object: None,
        uid: "test-request".to_string(),
        hook: None,
        namespace: None,
        name: None,
        resource: None,
        sub_resource: String::new(),
        user_info: UserInfo {
            username: "tester".to_string(),
            groups: vec!["system:authenticated".to_string()],
            ..UserInfo::default()
        },
        dry_run: false,
        options: None,
    }
}

/// An [`AdmissionRequest`] being built: see [`admission_request`].
#[derive(Debug, Clone)]
pub struct AdmissionRequestBuilder {
    operation: Operation,
    // Kept as messages, so the builder stays `Clone`; `try_build` makes them `HarnessError`s.
    object: Result<Value, String>,
    old_object: Option<Result<Value, String>>,
    uid: String,
    hook: Option<String>,
    namespace: Option<Option<String>>,
    name: Option<String>,
    resource: Option<GroupVersionResource>,
    sub_resource: String,
    user_info: UserInfo,
    dry_run: bool,
    options: Option<String>,
}

impl AdmissionRequestBuilder {
    /// The stored object an update replaces (for a delete, [`admission_request`]'s object is
    /// already the stored one; this replaces it).
    pub fn old_object<T: Serialize + ?Sized>(mut self, old: &T) -> Self {
        self.old_object = Some(cache::to_object(old));
        self
    }

    /// The request's namespace (default: the object's; `None` for cluster-scoped).
    pub fn namespace(mut self, namespace: Option<&str>) -> Self {
        self.namespace = Some(namespace.map(String::from));
        self
    }

    /// The request's name (default: the object's `metadata.name`, or empty).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// The `[[admit]]` table the request comes through (default: the first of the harness's
    /// manifest that takes it, else empty).
    pub fn hook(mut self, hook: &str) -> Self {
        self.hook = Some(hook.to_string());
        self
    }

    /// The request's uid (default `test-request`).
    pub fn uid(mut self, uid: &str) -> Self {
        self.uid = uid.to_string();
        self
    }

    /// The user asking, and the groups they are in.
    pub fn user(mut self, username: &str, groups: &[&str]) -> Self {
        self.user_info.username = username.to_string();
        self.user_info.groups = groups.iter().map(|g| g.to_string()).collect();
        self
    }

    /// The user asking, in full (uid and extra attributes too).
    pub fn user_info(mut self, user_info: UserInfo) -> Self {
        self.user_info = user_info;
        self
    }

    /// Marks the request as a dry run.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// The subresource addressed, e.g. `status`.
    pub fn sub_resource(mut self, sub_resource: &str) -> Self {
        self.sub_resource = sub_resource.to_string();
        self
    }

    /// The resource addressed (default: the kind's group and version, and its plural).
    pub fn resource(mut self, group: &str, version: &str, resource: &str) -> Self {
        self.resource = Some(GroupVersionResource {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
        });
        self
    }

    /// The operation's options (e.g. `{"kind": "CreateOptions", ...}`), as JSON.
    pub fn options(mut self, options: &Value) -> Self {
        self.options = Some(options.to_string());
        self
    }

    /// The request, or why the objects cannot make one.
    pub fn try_build(self) -> Result<AdmissionRequest, HarnessError> {
        self.try_build_wit().map(AdmissionRequest::from_wit)
    }

    /// The record the host would pass to the `admit` export.
    pub(crate) fn try_build_wit(self) -> Result<wit::Request, HarnessError> {
        let object = self.object.map_err(HarnessError::Object)?;
        let old_object = self.old_object.transpose().map_err(HarnessError::Object)?;
        let (object, old_object) = match self.operation {
            Operation::Delete => (None, Some(old_object.unwrap_or(object))),
            _ => (Some(object), old_object),
        };
        // The header is the object's, or for a delete the stored object's.
        let described = object.as_ref().or(old_object.as_ref()).expect("one is set");
        let kind = kind_of(described).map_err(HarnessError::Object)?;
        let text = |p: &str| described.pointer(p).and_then(Value::as_str);
        let resource = self.resource.unwrap_or_else(|| GroupVersionResource {
            group: kind.group.clone(),
            version: kind.version.clone(),
            resource: plural(&kind.kind),
        });
        let namespace = match self.namespace {
            Some(ns) => ns,
            None => cache::namespace_of(described).map(String::from),
        };
        let name = self
            .name
            .unwrap_or_else(|| text("/metadata/name").unwrap_or_default().to_string());
        // As the host does: the object's metadata, its name and namespace filled in from the
        // request's when it has none.
        let labels = cache::labels_of(described);
        let header = Head::encode_bytes(
            &kind,
            cache::namespace_of(described).or(namespace.as_deref()),
            [
                text("/metadata/name").unwrap_or(&name),
                text("/metadata/uid").unwrap_or_default(),
                text("/metadata/resourceVersion").unwrap_or_default(),
            ],
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let request = wit::Request {
            uid: self.uid,
            hook: self.hook.unwrap_or_default(),
            kind: crate::wit::informant::plugin::types::Resource {
                group: kind.group.clone(),
                version: kind.version.clone(),
                kind: kind.kind.clone(),
            },
            resource: wit::GroupVersionResource {
                group: resource.group,
                version: resource.version,
                resource: resource.resource,
            },
            sub_resource: self.sub_resource,
            operation: self.operation.to_wit(),
            namespace,
            name,
            user_info: wit::UserInfo {
                username: self.user_info.username,
                uid: self.user_info.uid,
                groups: self.user_info.groups,
                extra: self.user_info.extra,
            },
            header,
            object: object.as_ref().map(Value::to_string),
            old_object: old_object.as_ref().map(Value::to_string),
            dry_run: self.dry_run,
            options: self.options,
        };
        Ok(request)
    }

    /// The request; panics on objects that cannot make one.
    pub fn build(self) -> AdmissionRequest {
        match self.try_build() {
            Ok(r) => r,
            Err(e) => panic!("admission_request: {e}"),
        }
    }
}

/// Panics on objects that cannot make a request (see [`admission_request`]).
impl From<AdmissionRequestBuilder> for AdmissionRequest {
    fn from(b: AdmissionRequestBuilder) -> AdmissionRequest {
        b.build()
    }
}

/// Whether the `[[admit]]` table `t` sends `request` to the plugin (its selectors aside).
fn declares(t: &informant_manifest::Admit, request: &AdmissionRequest) -> bool {
    Resource::from_api_version(t.api_version.as_str(), t.kind.as_str()) == *request.kind()
        && t.operations
            .iter()
            .any(|op| op.as_kubernetes() == request.operation().as_str())
}

/// An object's kind, from `apiVersion` and `kind`.
fn kind_of(object: &Value) -> Result<Resource, String> {
    let text = |field: &str| object.get(field).and_then(Value::as_str);
    let api_version = text("apiVersion").ok_or("object has no `apiVersion`")?;
    let kind = text("kind").ok_or("object has no `kind`")?;
    Ok(Resource::from_api_version(api_version, kind))
}

/// The plural resource name the API server most likely serves a kind under: lower case, `-es`
/// after a sibilant, `-ies` for a consonant and `y` (`Ingress` -> `ingresses`, `NetworkPolicy`
/// -> `networkpolicies`); a kind it gets wrong (`Endpoints`) takes
/// [`AdmissionRequestBuilder::resource`].
fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|end| lower.ends_with(end))
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cache as queries;
    use crate::kube;
    use crate::testing::Level;

    /// Answers by `mode` label of the object, to observe the harness.
    struct Gate;

    impl Plugin for Gate {
        fn init(_: Value) -> Result<Self, HandlerError> {
            Ok(Gate)
        }

        fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
            crate::info!(
                "{} {} {} by {}",
                req.operation(),
                req.kind(),
                req.meta().key(),
                req.user_info().username
            );
            match req.meta().label("mode").unwrap_or_default() {
                "read" => {
                    let ns = queries::get(
                        &Resource::new("", "v1", "Namespace"),
                        None,
                        req.namespace().unwrap_or_default(),
                    )?;
                    Ok(Admission::allow().warn(format!("namespace cached: {}", ns.is_some())))
                }
                "write" => {
                    let cm = json!({"metadata": {"name": "side-effect"}});
                    let r = Resource::new("", "v1", "ConfigMap");
                    kube::raw::create(&r, req.namespace(), &cm.to_string())?;
                    Ok(Admission::allow())
                }
                "fail" => Err("told to fail".into()),
                "hook" => Ok(Admission::allow().warn(format!("through {}", req.hook()))),
                _ => Ok(Admission::allow()),
            }
        }
    }

    fn cm(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": "team-a", "name": "cfg", "uid": "u1",
                   "resourceVersion": "5", "labels": labels, "managedFields": [{}]},
               "data": {"k": "v"}})
    }

    #[test]
    fn the_builder_fills_the_request_as_the_host_would() {
        let req = admission_request(Operation::Update, &cm(json!({"z": "1", "a": "2"})))
            .old_object(&cm(json!({})))
            .user("alice", &["devs"])
            .dry_run()
            .options(&json!({"kind": "UpdateOptions"}))
            .build();
        assert_eq!(req.operation(), Operation::Update);
        assert_eq!(req.kind(), &Resource::new("", "v1", "ConfigMap"));
        assert_eq!(
            req.resource(),
            &GroupVersionResource {
                group: String::new(),
                version: "v1".into(),
                resource: "configmaps".into()
            }
        );
        assert_eq!(
            (req.uid(), req.namespace(), req.name(), req.sub_resource()),
            ("test-request", Some("team-a"), "cfg", "")
        );
        assert_eq!(
            (&*req.user_info().username, &req.user_info().groups[..]),
            ("alice", &["devs".to_string()][..])
        );
        assert!(req.dry_run());
        assert_eq!(req.options_json(), Some(r#"{"kind":"UpdateOptions"}"#));
        let meta = req.meta();
        assert_eq!(
            (meta.key(), meta.uid(), meta.resource_version()),
            ("team-a/cfg".to_string(), "u1", "5")
        );
        assert_eq!(
            meta.labels(),
            [("a".into(), "2".into()), ("z".into(), "1".into())]
        );
        assert!(!req.object_json().unwrap().contains("managedFields"));
        let object: Value = req.object().unwrap().unwrap();
        assert_eq!(object["data"]["k"], "v");
        let old: Value = req.old_object().unwrap().unwrap();
        assert_eq!(old["metadata"]["labels"], json!({}));
        let err = req.object::<Vec<u8>>().unwrap_err();
        assert!(!err.is_old());
        assert!(
            err.to_string()
                .starts_with("v1/ConfigMap team-a/cfg: cannot decode the object as"),
            "{err}"
        );
    }

    #[test]
    fn a_delete_carries_the_stored_object_as_old() {
        let req = admission_request(Operation::Delete, &cm(json!({"gone": "yes"}))).build();
        assert_eq!(req.object_json(), None);
        assert_eq!(req.object::<Value>().unwrap(), None);
        assert!(req.old_object_json().unwrap().contains(r#""gone":"yes""#));
        assert_eq!(req.meta().label("gone"), Some("yes"));
        // A create whose name the server generates; a cluster-scoped kind.
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"generateName": "tmp-"}});
        let req = admission_request(Operation::Create, &ns).build();
        assert_eq!((req.name(), req.namespace()), ("", None));
        assert_eq!(req.resource().resource, "namespaces");
        let err = admission_request(Operation::Create, &json!({"kind": "X"})).try_build();
        assert!(matches!(err, Err(HarnessError::Object(_))), "{err:?}");
    }

    #[test]
    fn the_header_is_the_hosts_encoding() {
        let wire = admission_request(Operation::Create, &cm(json!({"b": "2", "a": "1"})))
            .try_build_wit()
            .unwrap();
        let metadata = informant_header::Metadata {
            namespace: "team-a",
            name: "cfg",
            uid: "u1",
            resource_version: "5",
        }
        .encode([("a", "1"), ("b", "2")]);
        assert_eq!(
            wire.header,
            informant_header::encode(["", "v1", "ConfigMap"], &metadata)
        );
        // An object without a name or namespace gets the request's, as the host fills them in.
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        let req = admission_request(Operation::Create, &bare)
            .namespace(Some("ns"))
            .name("given")
            .build();
        assert_eq!(req.meta().key(), "ns/given");
    }

    #[test]
    fn admit_reads_the_cache_and_refuses_writes() {
        let mut h = Harness::<Gate>::new("{}").unwrap();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}});
        h.cache_mut().insert(&ns).unwrap();
        let a = h
            .admit(admission_request(
                Operation::Create,
                &cm(json!({"mode": "read"})),
            ))
            .unwrap();
        assert!(a.is_allowed());
        assert_eq!(a.warnings(), ["namespace cached: true"]);
        // The request's object is not put in the cache.
        assert_eq!(
            h.cache().objects(&Resource::new("", "v1", "ConfigMap")),
            Vec::<String>::new()
        );
        let err = h
            .admit(admission_request(
                Operation::Create,
                &cm(json!({"mode": "write"})),
            ))
            .unwrap_err();
        assert_eq!(err.to_string(), format!("write denied: {WRITE_REFUSED}"));
        assert!(h.writes().is_empty());
        let err = h
            .admit(admission_request(
                Operation::Delete,
                &cm(json!({"mode": "fail"})),
            ))
            .unwrap_err();
        assert_eq!(err.to_string(), "told to fail");
        assert_eq!(
            h.take_logs(),
            [
                (
                    Level::Info,
                    "CREATE v1/ConfigMap team-a/cfg by tester".to_string()
                ),
                (
                    Level::Info,
                    "CREATE v1/ConfigMap team-a/cfg by tester".to_string()
                ),
                (
                    Level::Info,
                    "DELETE v1/ConfigMap team-a/cfg by tester".to_string()
                ),
            ]
        );
        // Events after an admission may write again.
        let r = Resource::new("", "v1", "ConfigMap");
        let run = || kube::raw::create(&r, Some("team-a"), "{}");
        assert!(run_in(&mut h.state, run).is_ok());
    }

    #[test]
    fn a_harness_from_a_manifest_admits_only_what_its_tables_declare() {
        let manifest = r#"
            [[admit]]
            name = "cms"
            api-version = "v1"
            kind = "ConfigMap"
            operations = ["delete"]
        "#;
        let mut h = Harness::<Gate>::from_manifest(manifest).unwrap();
        h.admit(admission_request(Operation::Delete, &cm(json!({}))))
            .unwrap();
        let err = h
            .admit(admission_request(Operation::Create, &cm(json!({}))))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no [[admit]] table of the manifest admits CREATE of v1/ConfigMap"
        );
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let err = h
            .admit(admission_request(Operation::Delete, &pod))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no [[admit]] table of the manifest admits DELETE of v1/Pod"
        );
        assert_eq!(h.logs().len(), 1, "refused requests never reach the plugin");
    }

    #[test]
    fn a_request_names_the_table_it_came_through() {
        let manifest = r#"
            [[admit]]
            name = "on-delete"
            api-version = "v1"
            kind = "ConfigMap"
            operations = ["delete"]
            [[admit]]
            name = "on-create"
            api-version = "v1"
            kind = "ConfigMap"
            mode = "mutate"
        "#;
        let mut h = Harness::<Gate>::from_manifest(manifest).unwrap();
        let labelled = cm(json!({"mode": "hook"}));
        let through = |h: &mut Harness<Gate>, req| h.admit(req).unwrap().warnings().to_vec();
        assert_eq!(
            through(&mut h, admission_request(Operation::Create, &labelled)),
            ["through on-create"]
        );
        assert_eq!(
            through(&mut h, admission_request(Operation::Delete, &labelled)),
            ["through on-delete"]
        );
        let named = admission_request(Operation::Create, &labelled).hook("on-delete");
        assert!(h.admit(named).is_err(), "a table that does not take it");
    }

    #[test]
    fn plurals_follow_the_api_servers_usual_rules() {
        for (kind, plural_name) in [
            ("Pod", "pods"),
            ("Deployment", "deployments"),
            ("Ingress", "ingresses"),
            ("NetworkPolicy", "networkpolicies"),
            ("Gateway", "gateways"),
        ] {
            assert_eq!(plural(kind), plural_name, "{kind}");
        }
    }
}
