//! A plugin for the host's tests. `config.mode` picks its behaviour:
//! - `echo`: logs one JSON line per event (`tag`, `type`, `key`, `rv`, `initial`, `fsu`);
//! - `spin`: loops forever on every event (the deadline must stop it);
//! - `hog`: allocates until its memory cap traps it;
//! - `flaky`: echoes, but traps (panics) on every third event;
//! - `fs`: tries to read the filesystem root and the environment, and logs what it got;
//! - `noop`: does nothing (the benchmark's trivial plugin);
//! - `parse`: parses the object's JSON fully (the benchmark's realistic plugin).

use informant_sdk::{Event, Plugin, log};

/// The test plugin.
pub struct Hostile {
    mode: String,
    tag: String,
    seen: u64,
}

impl Hostile {
    fn on(&mut self, ev: &Event) -> Result<(), String> {
        self.seen += 1;
        match self.mode.as_str() {
            "echo" => self.echo(ev),
            "spin" => {
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "hog" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "flaky" => {
                if self.seen.is_multiple_of(3) {
                    panic!("flaky plugin fails event {}", self.seen);
                }
                self.echo(ev)
            }
            "fs" => {
                let root = std::fs::read_dir("/")
                    .map(|d| d.count())
                    .map_err(|e| e.to_string());
                let env = std::env::vars().count();
                let line =
                    serde_json::json!({"tag": self.tag, "fs": format!("{root:?}"), "env": env});
                log::info(&line.to_string());
                Ok(())
            }
            "noop" => Ok(()),
            "parse" => {
                let v = ev.value()?;
                std::hint::black_box(&v);
                Ok(())
            }
            other => Err(format!("unknown mode `{other}`")),
        }
    }

    fn echo(&self, ev: &Event) -> Result<(), String> {
        let meta = ev.meta();
        let line = serde_json::json!({
            "tag": self.tag,
            "type": ev.event_type().as_str(),
            "key": meta.key(),
            "rv": meta.resource_version(),
            "initial": ev.is_initial(),
            "fsu": ev.final_state_unknown(),
        });
        log::info(&line.to_string());
        Ok(())
    }
}

impl Plugin for Hostile {
    fn init(config: serde_json::Value) -> Result<Self, String> {
        let text = |k: &str| config.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Ok(Hostile {
            mode: text("mode").ok_or("config `mode` is required")?,
            tag: text("tag").unwrap_or_default(),
            seen: 0,
        })
    }
    fn on_added(&mut self, ev: &Event) -> Result<(), String> {
        self.on(ev)
    }
    fn on_updated(&mut self, ev: &Event) -> Result<(), String> {
        self.on(ev)
    }
    fn on_deleted(&mut self, ev: &Event) -> Result<(), String> {
        self.on(ev)
    }
    fn on_resync(&mut self, ev: &Event) -> Result<(), String> {
        self.on(ev)
    }
}

informant_sdk::export_plugin!(Hostile);
