//! Registering a prepared plugin version's handlers with its informers (where their cursors
//! are kept and resumed from), and whether its tenant has room for it next to its others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::durable::Durable;
use crate::informer::{
    CursorOptions, EventFilter, HandlerOptions, Holds, InformerClaim, InformerKey, ListenerHandle,
};
use crate::plugin::bindings::WitResource;
use crate::plugin::exec::dead_letter::DeadLetterSink;
use crate::plugin::exec::gate::{Gate, Gated};
use crate::plugin::exec::supervisor::Supervisor;
use crate::plugin::id::PluginId;
use crate::plugin::load::loaded::Loaded;
use crate::plugin::load::prepare::{Start, Watched};
use crate::shard::Shard;
use crate::tenancy::{Budgeted, TenantPolicy};

/// Where a plugin's handlers keep and resume their delivery cursors: in the shard group's
/// Leases (`--shard-group`: a cursor any member can act on), else in the state directory
/// (`--state-dir`), which also keeps their dead letters.
#[derive(Clone, Copy, Default)]
pub(super) struct Cursors<'a> {
    /// Durable delivery.
    pub(super) durable: Option<&'a Arc<Durable>>,
    /// Sharded mode.
    pub(super) shard: Option<&'a Shard>,
    /// An admission-only host: handlers are registered (their informers fill the caches) but
    /// take no event, and keep no cursor.
    pub(super) admission_only: bool,
}

/// Registers `supervisor`'s handler for `resource` with `informer`, its events held by `gate`,
/// drawing from the tenant's event budget if it has one (a retry is an event too: it draws
/// like the events it repeats). Its cursor is kept as `cursors` say (in sharded mode, in the
/// Leases and, with a state directory, there too), and it resumes from the one it had under
/// `scope` (a durable cursor), or as `start` says (taken over in a shard).
#[allow(clippy::too_many_arguments)]
pub(super) fn register(
    (id, supervisor, gate): (&PluginId, &Arc<Supervisor>, &Gate),
    policy: &TenantPolicy,
    informer: &InformerClaim,
    resource: WitResource,
    mut options: HandlerOptions,
    (cursors, scope): (Cursors<'_>, &str),
    start: Start,
) -> ListenerHandle {
    let name = id.to_string();
    let holds = Holds::new();
    if cursors.admission_only {
        options.filter = Some(EventFilter::new(|_| false));
        options.changes = None;
    }
    options.cursor = match (cursors.shard, cursors.durable) {
        _ if cursors.admission_only => None,
        (Some(_), _) => Some(CursorOptions {
            holds: holds.clone(),
            prior: start.prior,
            floor_version: start.floor_version,
            since: start.resume.map(|r| r.since),
            skip_through_version: start.resume.and_then(|r| r.skip_through_version),
        }),
        (None, Some(d)) => {
            let resume = d.cursor(&name, informer.key(), scope);
            Some(CursorOptions {
                since: resume.map(|r| r.since),
                skip_through_version: resume.and_then(|r| r.skip_through_version),
                holds: holds.clone(),
                ..Default::default()
            })
        }
        (None, None) => None,
    };
    let handler = supervisor.handler(
        resource,
        informer.store().clone(),
        policy.budget.clone(),
        holds,
    );
    let handler = match cursors.durable {
        Some(d) => handler.with_dead_letters(dead_letter_sink(d, &name, informer.key())),
        None => handler,
    };
    let shared = informer.informer();
    let gate = gate.clone();
    let handle = match &policy.budget {
        Some(b) => shared.add_handler(
            &name,
            Gated::new(Budgeted::new(b.clone(), handler), gate),
            options,
        ),
        None => shared.add_handler(&name, Gated::new(handler, gate), options),
    };
    // The book first: once tracked there, a live member publishing the plugin no longer
    // makes the book drop (and the state forget) its cursor.
    if let Some(s) = cursors.shard {
        s.book.track(
            &name,
            scope,
            &informer.key().to_string(),
            Arc::new(handle.gauges()),
        );
    }
    if let Some(d) = cursors.durable {
        d.track(&name, informer.key(), scope, handle.gauges());
    }
    handle
}

/// Keeps what `plugin`'s handler on `informer` fails for good in `durable`.
fn dead_letter_sink(
    durable: &Arc<Durable>,
    plugin: &str,
    informer: &InformerKey,
) -> DeadLetterSink {
    let durable = durable.clone();
    DeadLetterSink::new(
        plugin,
        informer.to_string(),
        Arc::new(move |letter| durable.dead_letter(letter)),
    )
}

/// Why `id`'s tenant has no room for a version using `watches` and declaring `field_indexes`
/// and `schedules`, next to its other running plugins (a running version of `id` itself is
/// being replaced).
pub(super) fn tenant_room(
    loaded: &BTreeMap<PluginId, Loaded>,
    id: &PluginId,
    policy: &TenantPolicy,
    watches: &[Watched],
    field_indexes: usize,
    schedules: usize,
) -> Result<(), TenantFull> {
    let others = loaded
        .iter()
        .filter(|(k, _)| k.tenant == id.tenant && *k != id)
        .map(|(_, l)| l);
    let mut informers: BTreeSet<&InformerKey> = BTreeSet::new();
    let (mut indexes, mut timers) = (field_indexes, schedules);
    for l in others {
        informers.extend(l.handles.iter().map(|(i, _)| i.key()));
        indexes += l.field_indexes;
        timers += l.schedules;
    }
    informers.extend(watches.iter().map(|w| w.informer.key()));
    let tenant = id.tenant.clone();
    if informers.len() > policy.max_informers {
        return Err(TenantFull::Informers {
            tenant,
            would: informers.len(),
            max: policy.max_informers,
        });
    }
    if indexes > policy.max_field_indexes {
        return Err(TenantFull::FieldIndexes {
            tenant,
            would: indexes,
            max: policy.max_field_indexes,
        });
    }
    if timers > policy.max_schedules {
        return Err(TenantFull::Schedules {
            tenant,
            would: timers,
            max: policy.max_schedules,
        });
    }
    Ok(())
}

/// A tenant quota a new version would exceed next to the tenant's other plugins.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum TenantFull {
    /// `max-informers`.
    #[error(
        "tenant `{tenant}`'s plugins would use {would} informers together; at most {max} (`max-informers` in informant.toml)"
    )]
    Informers {
        tenant: String,
        would: usize,
        max: usize,
    },
    /// `max-field-indexes`.
    #[error(
        "tenant `{tenant}`'s plugins would declare {would} field indexes together; at most {max} (`max-field-indexes` in informant.toml)"
    )]
    FieldIndexes {
        tenant: String,
        would: usize,
        max: usize,
    },
    /// `max-schedules`.
    #[error(
        "tenant `{tenant}`'s plugins would declare {would} [[schedule]] tables together; at most {max} (`max-schedules` in informant.toml)"
    )]
    Schedules {
        tenant: String,
        would: usize,
        max: usize,
    },
}
