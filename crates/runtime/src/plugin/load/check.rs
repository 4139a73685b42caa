//! `informant check`: whether a plugin would load — its component against the WIT world, its
//! manifest, and (given a config and a tenant) its tenant's grant and ceilings — without a
//! cluster. The loader runs the same checks; this reports all problems at once.

use std::path::{Path, PathBuf};

use crate::manifest::Manifest;
use crate::plugin::PluginError;
use crate::plugin::exec::engine::PluginEngine;
use crate::plugin::load::acceptance::{Accepted, Facts, WatchFacts, accept, admission_export};
use crate::plugin::load::host_config::HostConfig;

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    /// The component.
    pub wasm: PathBuf,
    /// Its manifest.
    pub manifest: PathBuf,
    /// The tenant whose grant applies (empty: the operator's top level).
    pub tenant: String,
}

/// What a passing check found.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The limits the plugin would run with.
    pub accepted: Accepted,
    /// `APIVERSION/KIND` of each watch, as the manifest names them.
    pub watches: Vec<String>,
    /// Watches whose scope is unknown offline (not a built-in kind), so cluster-scoped access
    /// is checked only at load.
    pub unchecked_scope: Vec<String>,
}

/// Runs every check; `scope_of(api_version, kind)` tells whether a kind is namespaced, where
/// known. Each problem in the error names its file.
pub fn check(
    engine: &PluginEngine,
    host: &HostConfig,
    request: &CheckRequest,
    scope_of: impl Fn(&str, &str) -> Option<bool>,
) -> Result<CheckReport, Vec<String>> {
    let mut problems = Vec::new();
    let name = request
        .wasm
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let loaded = engine.load(&name, &request.wasm);
    if let Err(e) = &loaded {
        problems.push(match e {
            PluginError::Load { path, reason, .. } => format!("`{}`: {reason}", path.display()),
            other => other.to_string(),
        });
    }
    let manifest = match Manifest::load(&request.manifest) {
        Ok(m) => m,
        Err(e) => {
            problems.push(e.to_string());
            return Err(problems);
        }
    };
    if let Ok(component) = &loaded
        && let Err(missing) = admission_export(&manifest, component)
    {
        problems.push(format!("`{}`: {missing}", request.wasm.display()));
    }
    let policy = match host.tenancy.policy(&request.tenant) {
        Ok(p) => p,
        Err(denied) => {
            problems.push(format!("`{}`: {denied}", request.wasm.display()));
            return Err(problems);
        }
    };
    let (mut facts, mut watches, mut unchecked_scope) = (Facts::default(), Vec::new(), Vec::new());
    for w in &manifest.watch {
        let written = format!("{}/{}", w.api_version.as_str(), w.kind);
        let namespaced = scope_of(w.api_version.as_str(), &w.kind);
        if namespaced.is_none() {
            unchecked_scope.push(written.clone());
        }
        watches.push(written);
        facts
            .watch
            .push(WatchFacts::as_written(&w.api_version, &w.kind, namespaced));
    }
    for w in &manifest.write {
        let namespaced = scope_of(w.api_version.as_str(), &w.kind);
        facts
            .write
            .push(WatchFacts::as_written(&w.api_version, &w.kind, namespaced));
    }
    for a in &manifest.admit {
        let namespaced = scope_of(a.api_version.as_str(), &a.kind);
        facts
            .admit
            .push(WatchFacts::as_written(&a.api_version, &a.kind, namespaced));
    }
    let accepted = accept(&manifest, &request.tenant, &policy, host, &facts).map_err(|refusals| {
        refusals
            .iter()
            .map(|r| format!("manifest `{}`: {r}", request.manifest.display()))
            .collect::<Vec<_>>()
    });
    match accepted {
        Ok(accepted) if problems.is_empty() => Ok(CheckReport {
            accepted,
            watches,
            unchecked_scope,
        }),
        Ok(_) => Err(problems),
        Err(refusals) => {
            problems.extend(refusals);
            Err(problems)
        }
    }
}

/// The manifest beside a component: `NAME.toml` for `NAME.wasm`.
pub fn manifest_beside(wasm: &Path) -> PathBuf {
    wasm.with_extension("toml")
}
