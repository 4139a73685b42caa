//! The plugin of the end-to-end benchmark (`tests/benches/e2e.rs`).
//!
//! It reads the `round` label of every event, from the host-parsed metadata (`mode = "meta"`) or
//! from the object's JSON parsed in the guest (`mode = "parse"`), and counts in its own memory:
//! - events of the initial replay: at `pods` it logs `{"replayed":pods}`;
//! - events whose `round` is `final-round`: at `pods` it logs `{"done":pods}`. The host coalesces
//!   per key, so intermediate versions may be skipped, but every key's final version arrives
//!   exactly once; more than `pods` of either count is an error, so a miscount fails loudly.

use informant_sdk::{Event, HandlerError, Plugin, log};
use serde_json::Value;

/// The benchmark plugin's state.
pub struct Bench {
    parse: bool,
    pods: u64,
    final_round: String,
    replayed: u64,
    finals: u64,
}

impl Bench {
    fn on(&mut self, ev: &Event) -> Result<(), HandlerError> {
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
        } else if is_final {
            self.finals += 1;
            report(self.finals, self.pods, "done")
        } else {
            Ok(())
        }
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
        Ok(Bench {
            parse,
            pods: number("pods")?,
            final_round: number("final-round")?.to_string(),
            replayed: 0,
            finals: 0,
        })
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.on(ev)
    }

    fn on_updated(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.on(ev)
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        Err(format!("unexpected delete of {}", ev.meta().key()).into())
    }

    fn on_resync(&mut self, ev: &Event) -> Result<(), HandlerError> {
        Err(format!("unexpected resync of {}", ev.meta().key()).into())
    }
}

informant_sdk::export_plugin!(Bench);
