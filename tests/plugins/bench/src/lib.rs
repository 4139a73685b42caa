//! The plugin of the end-to-end benchmarks (`tests/benches/e2e.rs`, `tests/benches/restart.rs`).
//!
//! It reads the `round` label of every event, from the host-parsed metadata (`mode = "meta"`) or
//! from the object's JSON parsed in the guest (`mode = "parse"`), and counts in its own memory:
//! - events of the initial replay: at `pods` it logs `{"replayed":pods}`;
//! - events whose `round` is `final-round`: at `pods` it logs `{"done":pods}`. The host coalesces
//!   per key, so intermediate versions may be skipped, but every key's final version arrives
//!   exactly once; more than `pods` of either count is an error, so a miscount fails loudly.
//!
//! For the restart benchmark, two optional settings count what a restart delivers:
//! - `changes`: events outside a replay (added, updated, deleted) are counted by type, and at
//!   `changes` of them it logs `{"changed":changes}`; deletes are then expected, not errors;
//! - `marker`: an event of an object whose name starts with it is not counted; it makes the
//!   plugin log its counts, `{"counts":{"initial":..,"added":..,"updated":..,"deleted":..}}`,
//!   so a caller learns exactly what came before the marker.

use informant_sdk::{Event, EventType, HandlerError, Plugin, log};
use serde_json::Value;

/// The benchmark plugin's state.
pub struct Bench {
    parse: bool,
    pods: u64,
    final_round: String,
    replayed: u64,
    finals: u64,
    /// `changes`: the count of changes to report reaching.
    changes: Option<u64>,
    /// `marker`: the name prefix of the objects that ask for the counts.
    marker: Option<String>,
    counts: Counts,
}

/// Events by kind, for `changes` and `marker`.
#[derive(Default)]
struct Counts {
    initial: u64,
    added: u64,
    updated: u64,
    deleted: u64,
}

impl Bench {
    fn on(&mut self, ev: &Event) -> Result<(), HandlerError> {
        if let Some(marker) = &self.marker
            && ev.meta().name().starts_with(marker.as_str())
        {
            let c = &self.counts;
            log::info(
                &serde_json::json!({"counts": {
                    "initial": c.initial, "added": c.added, "updated": c.updated, "deleted": c.deleted,
                }})
                .to_string(),
            );
            return Ok(());
        }
        match (ev.is_initial(), ev.event_type()) {
            (true, _) => self.counts.initial += 1,
            (false, EventType::Added) => self.counts.added += 1,
            (false, EventType::Updated) => self.counts.updated += 1,
            (false, EventType::Deleted) => self.counts.deleted += 1,
            (false, EventType::Resync) => {}
        }
        if ev.event_type() == EventType::Deleted {
            if let Some(changes) = self.changes {
                return self.changed(changes);
            }
            return Err(format!("unexpected delete of {}", ev.meta().key()).into());
        }
        // Both modes read the label of every event, replay included, so they differ only in how.
        let is_final = if self.parse {
            let object = ev.value()?;
            object
                .pointer("/metadata/labels/round")
                .and_then(Value::as_str)
                == Some(self.final_round.as_str())
        } else {
            ev.meta().label("round") == Some(self.final_round.as_str())
        };
        if ev.is_initial() {
            self.replayed += 1;
            report(self.replayed, self.pods, "replayed")
        } else if let Some(changes) = self.changes {
            self.changed(changes)
        } else if is_final {
            self.finals += 1;
            report(self.finals, self.pods, "done")
        } else {
            Ok(())
        }
    }

    /// Reports `changes` reached; past it, the counts (`marker`) tell by how much.
    fn changed(&self, changes: u64) -> Result<(), HandlerError> {
        let c = &self.counts;
        if c.added + c.updated + c.deleted == changes {
            log::info(&serde_json::json!({ "changed": changes }).to_string());
        }
        Ok(())
    }
}

/// Logs `{"<what>": pods}` when `count` reaches `pods`; an error past it.
fn report(count: u64, pods: u64, what: &str) -> Result<(), HandlerError> {
    if count == pods {
        log::info(&serde_json::json!({ what: pods }).to_string());
    }
    if count > pods {
        return Err(format!("{what}: {count} events for {pods} pods").into());
    }
    Ok(())
}

impl Plugin for Bench {
    fn init(config: Value) -> Result<Self, HandlerError> {
        let parse = match config.get("mode").and_then(Value::as_str) {
            Some("meta") => false,
            Some("parse") => true,
            other => {
                return Err(
                    format!("config `mode` must be \"meta\" or \"parse\", got {other:?}").into(),
                );
            }
        };
        let number = |k: &str| {
            config
                .get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("config `{k}` (a positive integer) is required"))
        };
        let changes = match config.get("changes") {
            None => None,
            Some(_) => Some(number("changes")?),
        };
        let marker = match config.get("marker") {
            None => None,
            Some(Value::String(m)) if !m.is_empty() => Some(m.clone()),
            Some(other) => {
                return Err(
                    format!("config `marker` must be a non-empty string, got {other}").into(),
                );
            }
        };
        Ok(Bench {
            parse,
            pods: number("pods")?,
            final_round: number("final-round")?.to_string(),
            replayed: 0,
            finals: 0,
            changes,
            marker,
            counts: Counts::default(),
        })
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.on(ev)
    }

    fn on_updated(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.on(ev)
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.on(ev)
    }

    fn on_resync(&mut self, ev: &Event) -> Result<(), HandlerError> {
        Err(format!("unexpected resync of {}", ev.meta().key()).into())
    }
}

informant_sdk::export_plugin!(Bench);
