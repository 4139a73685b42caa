//! Wildcard watches (`kind = "*"`): which concrete resources one covers right now.
//!
//! The expansion is a pure function of the manifest's watch, what discovery found, and the
//! tenant's grant, recomputed whenever the served kinds may have changed (see
//! [`crate::plugin::load::rediscover`]); the loader starts informers for kinds that appear and retires
//! those of kinds that go (their handler gets `Deleted` for every object it still knows).
//!
//! A resource is covered when discovery serves it with both `list` and `watch`, the watch's
//! pattern covers its group and version (each group's preferred version for `*` and
//! `GROUP/*`), no `exclude` entry names it, and the grant allows it: its kind among the
//! granted resources and, for a cluster-scoped kind, cluster-scoped objects granted. A watch
//! limited to namespaces leaves cluster-scoped kinds out: they cannot be watched in a namespace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::core::ApiResource;

use crate::informer::{ChangeFilter, DiscoveredResource, EventFilter, ResolvedResource};
use crate::manifest::{Manifest, Watch};
use crate::plugin::imports::cache::CacheView;
use crate::tenancy::Grant;

/// What re-expanding a running version's wildcard watches needs: the same registration
/// options, change filters and cache view its load used.
pub(super) struct WildcardWatches {
    pub(super) manifest: Manifest,
    pub(super) cache: Arc<CacheView>,
    /// Per `[[watch]]`: its change filter, if any.
    pub(super) changes: Vec<Option<ChangeFilter>>,
    pub(super) resync: Option<Duration>,
    pub(super) filter: Option<EventFilter>,
}

/// How a resource is named in `/plugins` and logs: `apps/v1/Deployment`, `v1/Pod`.
pub(crate) fn resource_name(ar: &ApiResource) -> String {
    format!("{}/{}", ar.api_version, ar.kind)
}

/// The resources `watch` covers among `discovered`, inside `grant`, by [`resource_name`].
pub(crate) fn expand(
    watch: &Watch,
    discovered: &[DiscoveredResource],
    grant: &Grant,
) -> BTreeMap<String, ResolvedResource> {
    let namespaced_only = watch.namespace.is_some() || !watch.namespaces.is_empty();
    discovered
        .iter()
        .filter(|d| {
            let ar = &d.resolved.api_resource;
            watch.covers(&ar.group, &ar.version, &ar.kind, d.preferred)
                && (d.resolved.namespaced || !namespaced_only)
                && grant
                    .check_watch(
                        (&ar.group, &ar.version, &ar.kind),
                        Some(d.resolved.namespaced),
                        None,
                    )
                    .is_ok()
        })
        .map(|d| (resource_name(&d.resolved.api_resource), d.resolved.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kube::core::GroupVersionKind;

    use super::*;
    use crate::manifest::Manifest;
    use crate::tenancy::{NamespacePattern, ResourceRule};

    fn found(
        api_version: &str,
        kind: &str,
        namespaced: bool,
        preferred: bool,
    ) -> DiscoveredResource {
        let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
        DiscoveredResource {
            resolved: ResolvedResource {
                api_resource: ApiResource::from_gvk(&GroupVersionKind::gvk(g, v, kind)),
                namespaced,
            },
            preferred,
        }
    }

    fn cluster() -> Vec<DiscoveredResource> {
        vec![
            found("v1", "Pod", true, true),
            found("v1", "Event", true, true),
            found("v1", "Namespace", false, true),
            found("apps/v1", "Deployment", true, true),
            found("events.k8s.io/v1", "Event", true, true),
            found("coordination.k8s.io/v1", "Lease", true, true),
            found("example.com/v1", "Widget", true, false),
            found("example.com/v2", "Widget", true, true),
            found("example.com/v2", "Gadget", false, true),
        ]
    }

    fn watch(toml: &str) -> Watch {
        let text = format!("[[watch]]\n{toml}\n");
        Manifest::parse(&text, Path::new("t.toml"))
            .unwrap()
            .watch
            .remove(0)
    }

    fn names(m: BTreeMap<String, ResolvedResource>) -> Vec<String> {
        m.into_keys().collect()
    }

    #[test]
    fn everything_at_preferred_versions_minus_excludes() {
        let w = watch(
            "api-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"events.k8s.io/Event\", \"coordination.k8s.io/v1/Lease\"]",
        );
        assert_eq!(
            names(expand(&w, &cluster(), &Grant::full())),
            [
                "apps/v1/Deployment",
                "example.com/v2/Gadget",
                "example.com/v2/Widget",
                "v1/Namespace",
                "v1/Pod"
            ]
        );
    }

    #[test]
    fn a_group_or_a_group_version() {
        let group = watch("api-version = \"example.com/*\"\nkind = \"*\"");
        assert_eq!(
            names(expand(&group, &cluster(), &Grant::full())),
            ["example.com/v2/Gadget", "example.com/v2/Widget"]
        );
        let old = watch("api-version = \"example.com/v1\"\nkind = \"*\"");
        assert_eq!(
            names(expand(&old, &cluster(), &Grant::full())),
            ["example.com/v1/Widget"]
        );
    }

    #[test]
    fn namespaces_leave_cluster_scoped_kinds_out() {
        let w = watch("api-version = \"example.com/*\"\nkind = \"*\"\nnamespaces = [\"a\", \"b\"]");
        assert_eq!(
            names(expand(&w, &cluster(), &Grant::full())),
            ["example.com/v2/Widget"]
        );
    }

    #[test]
    fn a_tenant_gets_only_what_its_grant_allows() {
        let rule = |s: &str| ResourceRule::try_from(s.to_string()).unwrap();
        let ns = NamespacePattern::try_from("team-a".to_string()).unwrap();
        let grant = Grant::new(
            "a",
            vec![ns],
            vec![
                rule("v1/Pod"),
                rule("example.com/v2/*"),
                rule("v1/Namespace"),
            ],
            false,
        );
        let w = watch("api-version = \"*\"\nkind = \"*\"");
        // Namespaces are cluster-scoped and the grant has no cluster-scoped objects; so is Gadget.
        assert_eq!(
            names(expand(&w, &cluster(), &grant)),
            ["example.com/v2/Widget", "v1/Pod"]
        );
    }
}
