//! A plugin for the host's tests. `config.mode` picks its behaviour:
//! - `echo`: logs one JSON line per event (`tag`, `type`, `key`, `rv`, `initial`, `fsu`);
//! - `spin`: loops forever on every event (the deadline must stop it);
//! - `hog`: allocates until its memory cap traps it;
//! - `sleep`: sleeps an hour in every event, blocked in a WASI poll (a host call, not wasm code:
//!   the deadline must stop it all the same);
//! - `sleep-init`: sleeps an hour in `init`;
//! - `nap`: sleeps `config.nap-ms` (a WASI poll) in every event, then echoes; an object named
//!   `stuck-*` sleeps an hour instead;
//! - `grab`: echoes, then asks the host for the next event itself (out of turn, without
//!   reporting the one in hand) and drops what it got;
//! - `flaky`: echoes, but traps (panics) on every third event;
//! - `chatter`: logs `config.lines` lines of `config.line-bytes` bytes on every event (a log
//!   flood), then echoes;
//! - `keep`: echoes, and keeps each event past its call without reading its object, then reads
//!   the kept object's JSON in the next call (that event is no longer in hand: a trap);
//! - `hoard`: echoes, and keeps every event it is given, never reading their objects;
//! - `fs`: tries to read the filesystem root and the environment, and logs what it got;
//! - `retry`: echoes every delivery, and answers `retry` to the first N deliveries of an object
//!   labelled `retries=N` (the reason says which attempt of how many; not before `after-ms`
//!   when labelled so); `retries` that is not a number fails the event through `?`, and an
//!   object labelled `then-fail=WHY` asks for a retry, drops it, and fails with WHY;
//! - `post`: POSTs the echo line as JSON to `config.url` and logs
//!   `{"tag", "key", "status"}` or `{"tag", "key", "error"}` (the error is not returned: the
//!   event succeeds either way, so the log is the record);
//! - `write-post`: on the `added` (not initial) event of an object named `go-*`, does what
//!   `write` does, then what `post` does (`config.traceparent`, when given, is sent as the
//!   request's own `traceparent` header, in `post` mode too);
//! - `noop`: reads the object's name from the host-parsed metadata header, no JSON (the
//!   benchmark's trivial plugin, doing what the Python and TypeScript ones' `noop` do);
//! - `parse`: parses the object's JSON fully (the benchmark's realistic plugin);
//! - `snoop`: echoes, and on any event of an object named `probe` runs every query in
//!   `config.probes` (`op` get/list/by-index, `group`, `version`, `kind`, `namespace`, `name`,
//!   `selector`, `index`, `value`) and logs `{"tag", "probes": [{"ok": [keys]} | {"err": ".."}]}`;
//! - `write`: on the `added` (not initial) event of an object named `go-*`, makes every write in
//!   `config.writes` (`op` create/apply/patch/delete/status/event, `group`, `version`, `kind`,
//!   `namespace`, `name`, `object`, `patch`, `patch-type`, `force`, `uid`; the text `$NS` and
//!   `$NAME` in any of them stand for the event's namespace and name) and logs
//!   `{"tag", "key", "writes": [{"ok": ".."} | {"err": {"kind", "code", "message"}}]}`;
//! - `metrics`: on the `added` (not initial) event of an object named `go-*`, makes the metric
//!   calls in `config.metrics` and logs what came of them (see [`metrics`]).
//!
//! `config.init-nap-ms`, in any mode, sleeps that long (a WASI poll) in `init` first: a slow
//! start, during which the host's informers go on.
//!
//! `config.on-schedule` picks what a `[[schedule]]` tick does (absent: nothing, as a plugin
//! without schedules):
//! - `count`: lists every ConfigMap in the cache and logs `{"tag", "schedule", "configmaps",
//!   "at_ms"}` (the wall clock, milliseconds since the epoch);
//! - `slow`: logs `{"tag", "schedule", "phase": "start"}`, sleeps `config.schedule-ms` (a WASI
//!   poll), then logs `"phase": "end"` with the ConfigMaps counted;
//! - `spin`: loops forever (the deadline must stop it);
//! - `trap`: panics.

mod metrics;

use informant_sdk::{Event, HandlerError, Plugin, Resource, cache, log};
use serde_json::{Value, json};

/// The test plugin.
pub struct Hostile {
    mode: String,
    tag: String,
    seen: u64,
    probes: Vec<Value>,
    kept: Option<Event>,
    hoard: Vec<Event>,
    deliveries: std::collections::HashMap<String, u64>,
    url: Option<String>,
    traceparent: Option<String>,
    writes: Vec<Value>,
    metrics: Vec<Value>,
    nap_ms: u64,
    chatter: (u64, usize),
    on_schedule: Option<String>,
    schedule_ms: u64,
}

impl Hostile {
    fn on(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.seen += 1;
        match self.mode.as_str() {
            "echo" => self.echo(ev),
            "spin" => {
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(())
            }
            "grab" => {
                self.echo(ev)?;
                drop(informant_sdk::wit::informant::plugin::events::next(None));
                Ok(())
            }
            "nap" => {
                let nap = match ev.meta().name().starts_with("stuck-") {
                    true => 3_600_000,
                    false => self.nap_ms,
                };
                std::thread::sleep(std::time::Duration::from_millis(nap));
                self.echo(ev)
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
            "chatter" => {
                let (lines, bytes) = self.chatter;
                for i in 0..lines {
                    let mut line = format!("{} chatter {i} ", self.tag);
                    line.extend(std::iter::repeat_n('x', bytes.saturating_sub(line.len())));
                    log::info(&line);
                }
                self.echo(ev)
            }
            "fs" => {
                let root = std::fs::read_dir("/").map(|d| d.count());
                let env = std::env::vars().count();
                let line =
                    serde_json::json!({"tag": self.tag, "fs": format!("{root:?}"), "env": env});
                log::info(&line.to_string());
                Ok(())
            }
            "snoop" => {
                self.echo(ev)?;
                if ev.meta().name() == "probe" {
                    self.snoop();
                }
                Ok(())
            }
            "keep" => {
                if let Some(old) = self.kept.take() {
                    std::hint::black_box(old.json());
                }
                self.kept = Some(ev.clone());
                self.echo(ev)
            }
            "hoard" => {
                self.hoard.push(ev.clone());
                self.echo(ev)
            }
            "retry" => {
                self.echo(ev)?;
                let wanted: u64 = ev
                    .meta()
                    .label("retries")
                    .map(str::parse)
                    .transpose()?
                    .unwrap_or(0);
                if let Some(why) = ev.meta().label("then-fail") {
                    // A retry a helper asked for, dropped for a fallback that fails too.
                    let _ = HandlerError::retry("asked first");
                    return Err(why.into());
                }
                let n = self.deliveries.entry(ev.meta().key()).or_default();
                *n += 1;
                if *n <= wanted {
                    let reason = format!("attempt {n} of {wanted}");
                    return Err(match ev.meta().label("after-ms") {
                        Some(ms) => HandlerError::retry_after(
                            reason,
                            std::time::Duration::from_millis(ms.parse()?),
                        ),
                        None => HandlerError::retry(reason),
                    });
                }
                Ok(())
            }
            "post" => self.post(ev),
            "write-post" => {
                if ev.event_type() == informant_sdk::EventType::Added
                    && !ev.is_initial()
                    && ev.meta().name().starts_with("go-")
                {
                    self.write(ev);
                    self.post(ev)?;
                }
                Ok(())
            }
            "write" => {
                if ev.event_type() == informant_sdk::EventType::Added
                    && !ev.is_initial()
                    && ev.meta().name().starts_with("go-")
                {
                    self.write(ev);
                }
                Ok(())
            }
            "metrics" => {
                if ev.event_type() == informant_sdk::EventType::Added
                    && !ev.is_initial()
                    && ev.meta().name().starts_with("go-")
                {
                    metrics::run(&self.tag, &self.metrics, ev);
                }
                Ok(())
            }
            "noop" => {
                std::hint::black_box(ev.meta().name());
                Ok(())
            }
            "parse" => {
                let v = ev.value()?;
                std::hint::black_box(&v);
                Ok(())
            }
            other => Err(format!("unknown mode `{other}`").into()),
        }
    }

    /// POSTs the event's line to `config.url` (with `config.traceparent` as its `traceparent`
    /// header, when given) and logs the status or the error.
    fn post(&self, ev: &Event) -> Result<(), HandlerError> {
        let meta = ev.meta();
        let line = json!({"tag": self.tag, "type": ev.event_type().as_str(), "key": meta.key()});
        let url = self.url.as_deref().ok_or("config `url` is required")?;
        let mut headers = vec![("content-type", "application/json")];
        if let Some(forged) = &self.traceparent {
            headers.push(("traceparent", forged.as_str()));
        }
        let outcome = match informant_sdk::http::send(
            "POST",
            url,
            &headers,
            line.to_string().as_bytes(),
            std::time::Duration::from_secs(30),
        ) {
            Ok(r) => json!({"tag": self.tag, "key": meta.key(), "status": r.status}),
            Err(e) => json!({"tag": self.tag, "key": meta.key(), "error": e.to_string()}),
        };
        log::info(&outcome.to_string());
        Ok(())
    }

    fn write(&self, ev: &Event) {
        use informant_sdk::kube::{ObjectRef, PatchType, Preconditions, Severity, WriteError, raw};
        let meta = ev.meta();
        let fill = |s: &str| {
            s.replace("$NS", meta.namespace().unwrap_or_default())
                .replace("$NAME", meta.name())
        };
        let results: Vec<Value> = self
            .writes
            .iter()
            .map(|w| {
                let text = |k: &str| w.get(k).and_then(Value::as_str).map(fill);
                let json = |k: &str| w.get(k).map(|v| fill(&v.to_string()));
                let r = Resource::new(
                    text("group").unwrap_or_default(),
                    text("version").unwrap_or_else(|| "v1".into()),
                    text("kind").unwrap_or_else(|| "ConfigMap".into()),
                );
                let (ns, name) = (text("namespace"), text("name").unwrap_or_default());
                let ns = ns.as_deref();
                let result = match text("op").as_deref().unwrap_or_default() {
                    "create" => raw::create(&r, ns, &json("object").unwrap_or_default()),
                    "apply" => raw::apply(
                        &r,
                        ns,
                        &name,
                        &json("object").unwrap_or_default(),
                        w.get("force").and_then(Value::as_bool).unwrap_or(false),
                    ),
                    "patch" => {
                        let kind = match text("patch-type").as_deref() {
                            Some("json") => PatchType::Json,
                            Some("strategic") => PatchType::Strategic,
                            _ => PatchType::Merge,
                        };
                        raw::patch(&r, ns, &name, kind, &json("patch").unwrap_or_default())
                    }
                    "delete" => raw::delete(
                        &r,
                        ns,
                        &name,
                        &Preconditions {
                            uid: text("uid"),
                            resource_version: None,
                        },
                    )
                    .map(|()| String::new()),
                    "status" => {
                        raw::update_status(&r, ns, &name, &json("object").unwrap_or_default())
                    }
                    "event" => raw::record_event(
                        &ObjectRef::of(ev),
                        Severity::Warning,
                        "Tested",
                        "Test",
                        "written by the hostile plugin",
                    )
                    .map(|()| String::new()),
                    other => Err(WriteError::Denied(format!("unknown op `{other}`"))),
                };
                match result {
                    Ok(stored) => json!({"ok": stored}),
                    Err(e) => {
                        let (kind, code, message) = match e {
                            WriteError::Denied(m) => ("denied", 0, m),
                            WriteError::Conflict(a) => ("conflict", a.code, a.message),
                            WriteError::NotFound(a) => ("not-found", a.code, a.message),
                            WriteError::Forbidden(a) => ("forbidden", a.code, a.message),
                            WriteError::Invalid(a) => ("invalid", a.code, a.message),
                            WriteError::Other(a) => ("other", a.code, a.message),
                            WriteError::Decode(m) => ("decode", 0, m),
                        };
                        json!({"err": {"kind": kind, "code": code, "message": message}})
                    }
                }
            })
            .collect();
        let line = json!({"tag": self.tag, "key": meta.key(), "writes": results});
        log::info(&line.to_string());
    }

    fn snoop(&self) {
        let results: Vec<Value> = self
            .probes
            .iter()
            .map(|p| {
                let text = |k: &str| p.get(k).and_then(Value::as_str);
                let r = Resource::new(
                    text("group").unwrap_or(""),
                    text("version").unwrap_or("v1"),
                    text("kind").unwrap_or("ConfigMap"),
                );
                let answer = match text("op").unwrap_or("get") {
                    "get" => cache::get(&r, text("namespace"), text("name").unwrap_or(""))
                        .map(|o| o.into_iter().collect::<Vec<_>>()),
                    "list" => cache::list(&r, text("namespace"), text("selector")),
                    "by-index" => cache::by_index(
                        &r,
                        text("index").unwrap_or(""),
                        text("value").unwrap_or(""),
                    ),
                    other => return json!({"err": format!("unknown op `{other}`")}),
                };
                match answer {
                    Ok(objects) => {
                        json!({"ok": objects.iter().map(|o| key_of(o)).collect::<Vec<_>>()})
                    }
                    Err(e) => json!({"err": e.to_string()}),
                }
            })
            .collect();
        log::info(&json!({"tag": self.tag, "probes": results}).to_string());
    }

    fn echo(&self, ev: &Event) -> Result<(), HandlerError> {
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
    fn init(config: serde_json::Value) -> Result<Self, HandlerError> {
        let text = |k: &str| config.get(k).and_then(|v| v.as_str()).map(str::to_string);
        if text("mode").as_deref() == Some("sleep-init") {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        if let Some(ms) = config.get("init-nap-ms").and_then(Value::as_u64) {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        Ok(Hostile {
            mode: text("mode").ok_or("config `mode` is required")?,
            tag: text("tag").unwrap_or_default(),
            seen: 0,
            kept: None,
            hoard: Vec::new(),
            deliveries: Default::default(),
            url: text("url"),
            traceparent: text("traceparent"),
            nap_ms: config.get("nap-ms").and_then(Value::as_u64).unwrap_or(300),
            chatter: (
                config.get("lines").and_then(Value::as_u64).unwrap_or(10),
                config
                    .get("line-bytes")
                    .and_then(Value::as_u64)
                    .unwrap_or(100) as usize,
            ),
            on_schedule: text("on-schedule"),
            schedule_ms: config
                .get("schedule-ms")
                .and_then(Value::as_u64)
                .unwrap_or(1500),
            writes: config
                .get("writes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            metrics: config
                .get("metrics")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            probes: config
                .get("probes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
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
        self.on(ev)
    }
    fn on_schedule(&mut self, name: &str) -> Result<(), HandlerError> {
        let configmaps = || cache::list(&Resource::new("", "v1", "ConfigMap"), None, None);
        match self.on_schedule.as_deref() {
            None => Ok(()),
            Some("count") => {
                let n = configmaps()?.len();
                let line =
                    json!({"tag": self.tag, "schedule": name, "configmaps": n, "at_ms": now_ms()});
                log::info(&line.to_string());
                Ok(())
            }
            Some("slow") => {
                log::info(
                    &json!({"tag": self.tag, "schedule": name, "phase": "start"}).to_string(),
                );
                std::thread::sleep(std::time::Duration::from_millis(self.schedule_ms));
                let n = configmaps()?.len();
                let line =
                    json!({"tag": self.tag, "schedule": name, "phase": "end", "configmaps": n});
                log::info(&line.to_string());
                Ok(())
            }
            Some("spin") => {
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            Some("trap") => panic!("schedule `{name}` traps"),
            Some(other) => Err(format!("unknown on-schedule `{other}`").into()),
        }
    }
}

informant_sdk::export_plugin!(Hostile);

/// The wall clock (WASI's), in milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `namespace/name` (or `name`) of an object's JSON.
fn key_of(object: &str) -> String {
    let v: Value = serde_json::from_str(object).unwrap_or_default();
    let m = &v["metadata"];
    match (m["namespace"].as_str(), m["name"].as_str().unwrap_or("?")) {
        (Some(ns), name) => format!("{ns}/{name}"),
        (None, name) => name.to_string(),
    }
}
