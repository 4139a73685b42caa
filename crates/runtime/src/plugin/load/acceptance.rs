//! Whether a manifest fits what its tenant and the host allow, and the limits it gets: one check
//! serving the loader and `informant check`, so both refuse the same things for the same reasons.

use crate::tenancy::TenantPolicy;

use crate::manifest::Manifest;
use crate::plugin::load::host_config::HostConfig;

/// A watched resource as the checker knows it: resolved by discovery in the loader, as written
/// (with the built-in scope table, if the kind is there) in `informant check`.
#[derive(Debug, Clone)]
pub(crate) struct WatchFacts {
    /// API group, empty for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Whether the resource is namespaced; `None` when unknown (the scope check is skipped).
    pub namespaced: Option<bool>,
}

impl WatchFacts {
    /// The kind as a manifest writes it, with the scope if known.
    pub(crate) fn as_written(
        api_version: &crate::manifest::ApiVersion,
        kind: &str,
        namespaced: Option<bool>,
    ) -> Self {
        let (group, version) = api_version.split();
        WatchFacts {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            namespaced,
        }
    }
}

/// One thing the manifest asks that it may not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The manifest field, e.g. `watch[1]` or `limits.memory-mib`.
    pub field: String,
    /// What was asked and what is allowed.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.reason)
    }
}

/// Refusals as one line, each naming its field.
pub(crate) fn describe(refusals: &[Refusal]) -> String {
    refusals
        .iter()
        .map(Refusal::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The limits an admitted plugin runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Linear memory cap (MiB).
    pub memory_mib: u32,
    /// Per-event deadline (ms).
    pub deadline_ms: u32,
}

/// What discovery (or the built-in table) says about the kinds a manifest names: one entry per
/// `[[watch]]` and one per `[[write]]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// Per `manifest.watch`.
    pub watch: Vec<WatchFacts>,
    /// Per `manifest.write`.
    pub write: Vec<WatchFacts>,
    /// Per `manifest.admit`.
    pub admit: Vec<WatchFacts>,
}

/// Checks every watch and write against the tenant's grant and the limits against the
/// ceilings; returns every refusal, not just the first.
pub(crate) fn accept(
    manifest: &Manifest,
    tenant: &str,
    policy: &TenantPolicy,
    host: &HostConfig,
    facts: &Facts,
) -> Result<Accepted, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let who = if tenant.is_empty() {
        "the operator".to_string()
    } else {
        format!("tenant `{tenant}`")
    };
    if let Err(refusal) = watch_count(manifest, host) {
        refusals.push(refusal);
    }
    if let Err(too_many) =
        informant_manifest::schedule::check_count(&manifest.schedule, host.max_schedules)
    {
        refusals.push(Refusal {
            field: "schedule".into(),
            reason: too_many.to_string(),
        });
    }
    if manifest.schedule.len() > policy.max_schedules {
        refusals.push(Refusal {
            field: "schedule".into(),
            reason: format!(
                "{} [[schedule]] tables; {who}'s plugins may declare at most {} together (`max-schedules`)",
                manifest.schedule.len(),
                policy.max_schedules
            ),
        });
    }
    let indexes: usize = manifest.watch.iter().map(|w| w.indexes.len()).sum();
    if indexes > policy.max_field_indexes {
        refusals.push(Refusal {
            field: "watch.indexes".into(),
            reason: format!(
                "{indexes} field indexes; {who}'s plugins may declare at most {} together (`max-field-indexes`)",
                policy.max_field_indexes
            ),
        });
    }
    for (index, w) in manifest.watch.iter().enumerate() {
        if !tenant.is_empty() && w.jq_filter.is_some() {
            refusals.push(Refusal {
                field: format!("watch[{index}].jq-filter"),
                reason: format!(
                    "only operator plugins may use jq filters (jq programs run on the host without a step limit); {who}'s may use `ignore`"
                ),
            });
        }
    }
    if let Some(ceiling) = &policy.allowed_outbound_hosts {
        for (at, origin) in manifest.allowed_outbound_hosts.iter().enumerate() {
            if !ceiling.iter().any(|c| c.covers(origin)) {
                refusals.push(Refusal {
                    field: format!("allowed-outbound-hosts[{at}]"),
                    reason: format!(
                        "`{origin}` is outside {who}'s `allowed-outbound-hosts` ceiling ({})",
                        if ceiling.is_empty() {
                            "empty: no outbound HTTP".to_string()
                        } else {
                            ceiling
                                .iter()
                                .map(|c| format!("`{c}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ),
                });
            }
        }
    }
    refusals.extend(write_refusals(manifest, &who, policy, &facts.write));
    refusals.extend(admit_refusals(manifest, &who, policy, &facts.admit));
    for (index, (w, f)) in manifest.watch.iter().zip(&facts.watch).enumerate() {
        if w.namespace_selector.is_some() && f.namespaced == Some(false) {
            refusals.push(Refusal {
                field: format!("watch[{index}].namespace-selector"),
                reason: format!(
                    "`{}` is cluster-scoped: its objects are in no namespace to select",
                    f.kind
                ),
            });
        }
        // Each listed namespace is checked on its own, so the refusal names the one outside.
        for (at, ns) in w.scopes().into_iter().enumerate() {
            // A wildcard covers only the kinds the grant allows (see `wildcard::expand`); what
            // it may still ask beyond the grant is namespaces.
            let checked = if w.is_wildcard() {
                match ns {
                    Some(_) => policy.grant.check_namespace(ns),
                    None => Ok(()),
                }
            } else {
                policy
                    .grant
                    .check_watch((&f.group, &f.version, &f.kind), f.namespaced, ns)
            };
            if let Err(outside) = checked {
                let reason = outside.to_string();
                let field = if w.namespaces.is_empty() {
                    format!("watch[{index}]")
                } else {
                    format!("watch[{index}].namespaces[{at}]")
                };
                let duplicate = refusals.iter().any(|r: &Refusal| {
                    r.reason == reason && r.field.starts_with(&format!("watch[{index}]"))
                });
                if !duplicate {
                    refusals.push(Refusal { field, reason });
                }
            }
        }
    }
    let mut limit =
        |asked, default, host_max, tenant_max, (field, unit): (&str, &'static str)| match ceiling(
            asked,
            default,
            host_max,
            tenant_max,
            (tenant, unit),
        ) {
            Ok(v) => v,
            Err(above) => {
                refusals.push(Refusal {
                    field: field.into(),
                    reason: above.to_string(),
                });
                0
            }
        };
    let memory_mib = limit(
        manifest.limits.memory_mib,
        host.default_memory_mib,
        host.max_memory_mib,
        policy.max_memory_mib,
        ("limits.memory-mib", "MiB"),
    );
    let deadline_ms = limit(
        manifest.limits.deadline_ms,
        host.default_deadline_ms,
        host.max_deadline_ms,
        policy.max_deadline_ms,
        ("limits.deadline-ms", "ms"),
    );
    if refusals.is_empty() {
        Ok(Accepted {
            memory_mib,
            deadline_ms,
        })
    } else {
        Err(refusals)
    }
}

/// A component cannot serve its manifest's `[[admit]]` tables: it lacks the `admission-hook`
/// export (built for the `plugin` world, or by an SDK from before admission).
#[derive(Debug, thiserror::Error)]
#[error(
    "the manifest declares [[admit]] tables, but the component does not export \
     `informant:plugin/admission-hook` (build it for the `admitting-plugin` world, as the \
     informant-sdk of this release does)"
)]
pub(crate) struct NoAdmissionExport;

/// Whether `component` can serve the `[[admit]]` tables of `manifest` (if it has any).
pub(crate) fn admission_export(
    manifest: &Manifest,
    component: &crate::plugin::exec::engine::LoadedComponent,
) -> Result<(), NoAdmissionExport> {
    if manifest.admit.is_empty() || component.admission_hook.is_some() {
        return Ok(());
    }
    Err(NoAdmissionExport)
}

/// What a manifest's `[[admit]]` tables ask beyond its tenant's grant: requests for a kind it
/// may not read, and mutations it could not make as writes (a `patch` of that kind in the
/// tenant's write ceiling; a cluster-scoped kind only where the ceiling names it as one). Which
/// namespaces' requests reach it is the grant's, decided per request.
fn admit_refusals(
    manifest: &Manifest,
    who: &str,
    policy: &TenantPolicy,
    facts: &[WatchFacts],
) -> Vec<Refusal> {
    use informant_manifest::admit::Mode;
    let mut refusals = Vec::new();
    for (index, (a, f)) in manifest.admit.iter().zip(facts).enumerate() {
        let field = format!("admit[{index}]");
        let gvk = (f.group.as_str(), f.version.as_str(), f.kind.as_str());
        if let Err(outside) = policy.grant.check_watch(gvk, f.namespaced, None) {
            refusals.push(Refusal {
                field: field.clone(),
                reason: format!("answering its requests means reading it: {outside}"),
            });
            continue;
        }
        let Some(ceiling) = &policy.writes else {
            continue;
        };
        if a.mode == Mode::Mutate {
            let cluster_scoped = f.namespaced == Some(false);
            let ok = ceiling.iter().any(|c| {
                c.allows_kind(crate::manifest::Verb::Patch, gvk)
                    && (!cluster_scoped || c.covers_cluster_scoped(gvk))
            });
            if !ok {
                refusals.push(Refusal {
                    field: format!("{field}.mode"),
                    reason: format!(
                        "mutating `{}/{}` is a `patch` of it, which {who}'s write ceiling does not allow{}",
                        a.api_version.as_str(),
                        a.kind,
                        if cluster_scoped { " for a cluster-scoped kind" } else { "" }
                    ),
                });
            }
        }
    }
    refusals
}

/// Why each `[[write]]` is outside the tenant's grant: every namespace it names must be one
/// the tenant may see, and every (verb, namespace) one of the tenant's `write` tables allows. A
/// table naming no namespace needs a tenant table for its verbs on that kind; the calls are
/// then held to both at run time.
fn write_refusals(
    manifest: &Manifest,
    who: &str,
    policy: &TenantPolicy,
    facts: &[WatchFacts],
) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    for (index, (w, f)) in manifest.write.iter().zip(facts).enumerate() {
        let field = format!("write[{index}]");
        let api_version = w.api_version.as_str();
        let gvk = (f.group.as_str(), f.version.as_str(), f.kind.as_str());
        let namespaces = w.namespace_list();
        // A Namespace object is its namespace: a list names the Namespaces written.
        let is_namespace = gvk == ("", "v1", "Namespace");
        let cluster_scoped = f.namespaced == Some(false);
        if cluster_scoped && !is_namespace && namespaces.is_some() {
            refusals.push(Refusal {
                field: format!("{field}.namespaces"),
                reason: format!(
                    "`{api_version}/{}` is cluster-scoped: its objects have no namespace",
                    w.kind
                ),
            });
            continue;
        }
        let scopes: Vec<Option<&str>> = match (&namespaces, f.namespaced) {
            (Some(list), _) => list.iter().map(|ns| Some(*ns)).collect(),
            (None, Some(false)) if !is_namespace => vec![None],
            // Every namespace: checked per call against the grant.
            (None, _) => vec![],
        };
        for ns in &scopes {
            if let Err(outside) = policy.grant.check_namespace(*ns) {
                refusals.push(Refusal {
                    field: field.clone(),
                    reason: outside.to_string(),
                });
            }
        }
        let Some(ceiling) = &policy.writes else {
            continue;
        };
        // A cluster-scoped kind only where a ceiling table names it as one.
        let covers = |c: &crate::manifest::Write| !cluster_scoped || c.covers_cluster_scoped(gvk);
        for verb in &w.verbs {
            let ok = if scopes.is_empty() {
                ceiling
                    .iter()
                    .any(|c| c.allows_kind(*verb, gvk) && covers(c))
            } else {
                scopes.iter().all(|ns| {
                    ceiling
                        .iter()
                        .any(|c| c.allows(*verb, gvk, *ns) && covers(c))
                })
            };
            if !ok {
                let ceiling_text = if ceiling.is_empty() {
                    "none: it may not write".to_string()
                } else {
                    ceiling
                        .iter()
                        .map(|c| format!("`{}`", c.describe()))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                refusals.push(Refusal {
                    field: format!("{field}.verbs"),
                    reason: format!(
                        "`{verb}` of `{api_version}/{}`{} is outside {who}'s write grant ({ceiling_text}){}",
                        w.kind,
                        namespaces.as_ref().map_or(String::new(), |l| format!(" in {}", l.join(", "))),
                        if cluster_scoped {
                            "; a cluster-scoped kind is writable only where the grant names it with `cluster-scoped = true`"
                        } else {
                            ""
                        }
                    ),
                });
            }
        }
    }
    refusals
}

/// Refuses a manifest with more watches than the host allows — a `[[watch]]` counts once per
/// namespace it lists, since each is an informer: checked first, before any of them is
/// resolved through discovery.
pub(crate) fn watch_count(manifest: &Manifest, host: &HostConfig) -> Result<(), Refusal> {
    let count: usize = manifest.watch.iter().map(|w| w.scopes().len()).sum();
    if count <= host.max_watches as usize {
        return Ok(());
    }
    let tables = manifest.watch.len();
    let what = if count == tables {
        format!("{tables} [[watch]] tables")
    } else {
        format!("{count} watches ({tables} [[watch]] tables, one watch per namespace listed)")
    };
    Err(Refusal {
        field: "watch".into(),
        reason: format!(
            "{what}; a manifest may have at most {} (`limits.max-watches` in informant.toml)",
            host.max_watches
        ),
    })
}

/// What a plugin gets: what it asks, else the host default lowered to the tenant's ceiling.
/// Asking above the host's or the tenant's ceiling is refused rather than clamped, so nobody
/// runs with less than they think.
fn ceiling(
    asked: Option<u32>,
    default: u32,
    host_max: u32,
    tenant_max: Option<u32>,
    (tenant, unit): (&str, &'static str),
) -> Result<u32, AboveCeiling> {
    let ceiling = tenant_max.map_or(host_max, |t| t.min(host_max));
    match asked {
        None => Ok(default.min(ceiling)),
        Some(v) if v <= ceiling => Ok(v),
        Some(asked) => Err(match tenant_max {
            Some(t) if t <= host_max && !tenant.is_empty() => AboveCeiling::Tenant {
                asked,
                ceiling,
                unit,
                tenant: tenant.to_string(),
            },
            _ => AboveCeiling::Host {
                asked,
                ceiling,
                unit,
            },
        }),
    }
}

/// A limit asked above the ceiling that applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum AboveCeiling {
    /// The tenant's ceiling, lower than the host's.
    #[error("{asked} {unit} is above tenant `{tenant}`'s ceiling of {ceiling} {unit}")]
    Tenant {
        asked: u32,
        ceiling: u32,
        unit: &'static str,
        tenant: String,
    },
    /// The host's ceiling.
    #[error("{asked} {unit} is above the host's ceiling of {ceiling} {unit}")]
    Host {
        asked: u32,
        ceiling: u32,
        unit: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::tenancy::{Grant, NamespacePattern, ResourceRule};

    fn policy() -> TenantPolicy {
        let ns = NamespacePattern::try_from("team-a".to_string()).unwrap();
        let r = ResourceRule::try_from("v1/*".to_string()).unwrap();
        TenantPolicy {
            grant: Arc::new(Grant::new("a", vec![ns], vec![r], false)),
            max_memory_mib: Some(32),
            ..TenantPolicy::operator()
        }
    }

    fn watching(watch: &[WatchFacts]) -> Facts {
        Facts {
            watch: watch.to_vec(),
            write: Vec::new(),
            admit: Vec::new(),
        }
    }

    fn facts(kind: &str, namespaced: Option<bool>) -> WatchFacts {
        WatchFacts {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            namespaced,
        }
    }

    #[test]
    fn every_refusal_is_listed_with_its_field() {
        let m = Manifest::parse(
            "[limits]\nmemory-mib = 64\ndeadline-ms = 999999\n[[watch]]\napi-version = \"v1\"\nkind = \"Node\"\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"team-b\"\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let host = HostConfig::default();
        let refusals = accept(
            &m,
            "a",
            &policy(),
            &host,
            &watching(&[facts("Node", Some(false)), facts("Pod", Some(true))]),
        )
        .unwrap_err();
        let fields: Vec<&str> = refusals.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "watch[0]",
                "watch[1]",
                "limits.memory-mib",
                "limits.deadline-ms"
            ]
        );
        assert!(
            refusals[2]
                .reason
                .contains("tenant `a`'s ceiling of 32 MiB")
        );
        assert!(refusals[3].reason.contains("the host's ceiling"));
    }

    #[test]
    fn many_watches_and_indexes_are_refused_before_any_informer() {
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&format!(
                "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[watch.indexes]\ni{i} = \"data.k{i}\"\n"
            ));
        }
        let m = Manifest::parse(&text, Path::new("p.toml")).unwrap();
        let policy = TenantPolicy {
            max_field_indexes: 16,
            ..policy()
        };
        let facts = vec![facts("ConfigMap", Some(true)); 300];
        let refusals =
            accept(&m, "a", &policy, &HostConfig::default(), &watching(&facts)).unwrap_err();
        assert_eq!(refusals[0].field, "watch");
        assert!(
            refusals[0]
                .reason
                .contains("300 [[watch]] tables; a manifest may have at most 16")
        );
        assert_eq!(refusals[1].field, "watch.indexes");
        assert!(
            refusals[1]
                .reason
                .contains("300 field indexes; tenant `a`'s plugins may declare at most 16"),
            "{}",
            refusals[1].reason
        );
    }

    #[test]
    fn every_listed_namespace_is_checked_and_counted() {
        let m = Manifest::parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"team-a\", \"team-b\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let host = HostConfig::default();
        let refusals = accept(
            &m,
            "a",
            &policy(),
            &host,
            &watching(&[facts("Pod", Some(true))]),
        )
        .unwrap_err();
        assert_eq!(refusals.len(), 1, "{refusals:?}");
        assert_eq!(refusals[0].field, "watch[0].namespaces[1]");
        assert!(refusals[0].reason.contains("namespace `team-b` is outside"));

        let many = Manifest::parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"b\", \"c\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let host = HostConfig {
            max_watches: 2,
            ..HostConfig::default()
        };
        let refusal = watch_count(&many, &host).unwrap_err();
        assert!(
            refusal
                .reason
                .contains("3 watches (1 [[watch]] tables, one watch per namespace listed); a manifest may have at most 2"),
            "{}",
            refusal.reason
        );
    }

    #[test]
    fn outbound_origins_must_sit_under_the_tenants_ceiling() {
        let m = Manifest::parse(
            "allowed-outbound-hosts = [\"http://127.0.0.1:8080\", \"https://hooks.slack.com\", \"http://127.0.0.1:*\"]\n\
             [[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let ceiling = |list: &[&str]| TenantPolicy {
            allowed_outbound_hosts: Some(
                list.iter()
                    .map(|o| crate::manifest::Origin::try_from(o.to_string()).unwrap())
                    .collect(),
            ),
            ..policy()
        };
        let facts = [facts("ConfigMap", Some(true))];
        let host = HostConfig::default();
        let refusals = accept(
            &m,
            "a",
            &ceiling(&["http://127.0.0.1:8080"]),
            &host,
            &watching(&facts),
        )
        .unwrap_err();
        let fields: Vec<&str> = refusals.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(
            fields,
            ["allowed-outbound-hosts[1]", "allowed-outbound-hosts[2]"]
        );
        assert!(
            refusals[1].reason.contains(
                "`http://127.0.0.1:*` is outside tenant `a`'s `allowed-outbound-hosts` ceiling (`http://127.0.0.1:8080`)"
            ),
            "{}",
            refusals[1].reason
        );
        let none = accept(&m, "a", &ceiling(&[]), &host, &watching(&facts)).unwrap_err();
        assert_eq!(none.len(), 3);
        assert!(none[0].reason.contains("empty: no outbound HTTP"));
        let wide = ceiling(&["http://127.0.0.1:*", "https://hooks.slack.com"]);
        assert!(accept(&m, "a", &wide, &host, &watching(&facts)).is_ok());
        // The operator's plugins have no ceiling: the manifest alone decides.
        assert!(accept(&m, "", &TenantPolicy::operator(), &host, &watching(&facts)).is_ok());
    }

    #[test]
    fn only_operator_plugins_may_use_jq_filters() {
        let m = Manifest::parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\njq-filter = \".spec\"\nignore = [\"status\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let host = HostConfig::default();
        let refusals = accept(
            &m,
            "a",
            &policy(),
            &host,
            &watching(&[facts("Pod", Some(true))]),
        )
        .unwrap_err();
        assert_eq!(refusals.len(), 1, "{refusals:?}");
        assert_eq!(refusals[0].field, "watch[0].jq-filter");
        assert!(refusals[0].reason.contains("only operator plugins"));
        let operator = TenantPolicy::operator();
        accept(
            &m,
            "",
            &operator,
            &host,
            &watching(&[facts("Pod", Some(true))]),
        )
        .unwrap();
    }

    #[test]
    fn defaults_fall_to_the_tenant_ceiling_and_unknown_scope_is_not_refused() {
        let m = Manifest::parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Widget\"\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let host = HostConfig::default();
        let ok = accept(
            &m,
            "a",
            &policy(),
            &host,
            &watching(&[facts("Widget", None)]),
        )
        .unwrap();
        assert_eq!(ok.memory_mib, 32);
        assert_eq!(ok.deadline_ms, host.default_deadline_ms);
    }
}
