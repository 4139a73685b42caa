//! # informant-sdk: write Informant event-hook plugins in Rust
//!
//! A plugin is a WebAssembly component (target `wasm32-wasip2`) for the `informant:plugin`
//! contract in `wit/`: this crate builds every plugin for its `admitting-plugin` world (the
//! `plugin` world plus the `admission-hook` export, which the host calls only for a manifest
//! with `[[admit]]` tables). It hides the generated bindings and gives plugin authors:
//!
//! - [`Plugin`]: the trait a plugin implements, and [`export_plugin!`] to make it the component's
//!   exports;
//! - [`HandlerError`]: what a handler returns when it did not handle an event: any error through
//!   `?` (a failure), or [`HandlerError::retry`] to see the object again later;
//! - [`Event`]: one event, with host-parsed metadata ([`Event::meta`]) so most plugins never parse
//!   JSON they do not need, and typed decoding ([`Event::object`]) when they do;
//! - [`admission`]: admission hooks ([`Plugin::admit`]): the [`AdmissionRequest`] the API
//!   server sends, the [`Admission`] answer (allow, deny, warn, patch);
//! - [`cache`]: read-only queries against the host's informer cache, raw JSON or typed through
//!   `k8s-openapi`;
//! - [`log`](mod@log): the host's log (a plugin has no stdout);
//! - [`metrics`]: counters, gauges and histograms on the host's `/metrics`;
//! - [`http`]: outbound HTTP to the origins the manifest allows (`allowed-outbound-hosts`);
//! - [`kube`](mod@kube): writes to the cluster (create, server-side apply, patch, delete, status,
//!   Events) within the manifest's `[[write]]` tables and the tenant's grant;
//! - [`testing`] (native targets only): an in-memory cache, event builders and a [`testing::Harness`]
//!   so `cargo test` exercises a plugin without a cluster or a wasm runtime.
//!
//! ## Contract
//!
//! The host calls `init` once per instance with the manifest's `[config]` table as JSON, then one
//! event at a time; per object key events arrive in order. A new or reloaded plugin first gets a
//! replay of the cache as [`EventType::Added`] with [`Event::is_initial`] set. After a trap or a
//! missed deadline the instance is recreated and gets `init` again, then the next events (no
//! replay): keep state that the cache queries can rebuild. The manifest's `[[schedule]]` tables
//! tick [`Plugin::on_schedule`] with their name, between events, under the same deadline.
//!
//! The manifest's `[[admit]]` tables send AdmissionReview requests to [`Plugin::admit`], on
//! instances of their own, pooled and reused (each made by `init`, never sharing a call): read
//! the cache there, but keep no per-request state; [`kube`](mod@kube) writes and outbound
//! [`http`] are refused during `admit` (see [`admission`]).
//!
//! ```no_run
//! use informant_sdk::{Event, HandlerError, Plugin, log};
//!
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     fn init(_config: serde_json::Value) -> Result<Self, HandlerError> {
//!         Ok(Hello)
//!     }
//!
//!     fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
//!         log::info(&format!("hello, {}", ev.meta().name()));
//!         Ok(())
//!     }
//! }
//!
//! informant_sdk::export_plugin!(Hello);
//! ```

pub mod admission;
pub mod cache;
mod error;
mod event;
pub mod http;
pub mod kube;
pub mod log;
pub mod metrics;
mod resource;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
/// Bindings generated from `wit/`; use the documented modules instead.
#[doc(hidden)]
pub mod wit;

pub use admission::{Admission, AdmissionRequest};
pub use cache::QueryError;
pub use error::{HandlerError, Retry};
#[allow(deprecated)]
pub use error::{retry, retry_after};
pub use event::{DecodeError, Event, EventType, Meta};
pub use resource::Resource;

/// An event-hook plugin: built by [`Plugin::init`] from its config, then fed events one at a time.
///
/// Handlers run to completion before the next event; an `Err` is logged by the host and counted
/// against the plugin, and the instance keeps running. An `Err` made by
/// [`HandlerError::retry`] asks for the object again later instead. Handlers must finish within
/// the manifest's deadline, or the host drops the instance and continues with a fresh one after
/// a backoff.
pub trait Plugin: 'static {
    /// Builds the plugin from the manifest's `[config]` table (an empty object when absent).
    ///
    /// An `Err` fails the instance's `init` with its message (a retry has no meaning here: it
    /// fails `init` with its reason).
    fn init(config: serde_json::Value) -> Result<Self, HandlerError>
    where
        Self: Sized;

    /// An object new to this plugin: created, seen in a relist, or part of a replay.
    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let _ = ev;
        Ok(())
    }

    /// An object changed; [`Event::old_json`] holds the version this plugin saw before.
    fn on_updated(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let _ = ev;
        Ok(())
    }

    /// An object is gone; its final state, or the last known one if [`Event::final_state_unknown`].
    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let _ = ev;
        Ok(())
    }

    /// The periodic re-delivery of a current object (the manifest's `resync-seconds`).
    fn on_resync(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let _ = ev;
        Ok(())
    }

    /// The manifest's `[[schedule]]` table `name` ticked (a `cron` pattern matched, or an
    /// `every` period passed). Runs under the same deadline as an event and never while one is
    /// handled; the [`cache`] answers as it does for events. An `Err` is logged and counted
    /// against the schedule (a retry has no meaning here: it counts as an error). A tick due
    /// while the previous one still runs is skipped, and ticks due while the host was down are
    /// not made up.
    fn on_schedule(&mut self, name: &str) -> Result<(), HandlerError> {
        let _ = name;
        Ok(())
    }

    /// Answers one AdmissionReview request from a `[[admit]]` table of the manifest (see
    /// [`admission`] for the contract: cache reads only, no writes or HTTP, no per-request
    /// state). An `Err` (a retry included: it has no meaning here) applies the table's
    /// `failure-policy`. The default refuses: a plugin without `[[admit]]` tables is never
    /// asked.
    fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
        let _ = req;
        Err(HandlerError::msg(NO_ADMIT))
    }
}

/// What [`Plugin::admit`] answers when the plugin does not implement it.
const NO_ADMIT: &str = "this plugin does not answer admission requests (it implements no `admit`)";

/// Makes a [`Plugin`] type the component's `init`, `handle-queued`, `handle-schedule` and
/// `admission-hook.admit` exports.
///
/// Use it once, at the top level of the plugin crate. It expands to nothing on native targets,
/// where [`testing::Harness`] drives the plugin instead.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            ::std::thread_local! {
                static INSTANCE: $crate::__private::Slot<$plugin> = const { $crate::__private::empty() };
            }

            struct Exports;

            impl $crate::wit::Guest for Exports {
                fn init(config: ::std::string::String) -> $crate::__private::Outcome {
                    $crate::__private::init_in(&INSTANCE, &config)
                }

                fn handle_queued() {
                    $crate::__private::handle_queued_in(&INSTANCE)
                }

                fn handle_schedule(name: ::std::string::String) -> $crate::__private::Outcome {
                    $crate::__private::handle_schedule_in(&INSTANCE, &name)
                }
            }

            impl $crate::wit::AdmissionGuest for Exports {
                fn admit(
                    request: $crate::wit::AdmitRequest,
                ) -> ::std::result::Result<$crate::wit::AdmitResponse, ::std::string::String> {
                    $crate::__private::admit_in(&INSTANCE, request)
                }
            }

            $crate::wit::export! { Exports with_types_in $crate::wit }
        };
    };
}

/// What [`export_plugin!`] and the harness share, so native tests run the same code as the component.
#[doc(hidden)]
pub mod __private {
    use std::cell::RefCell;
    use std::thread::LocalKey;

    use crate::{Admission, AdmissionRequest, Event, EventType, HandlerError, Plugin};

    /// Where the export glue keeps the instance between calls.
    pub type Slot<P> = RefCell<Option<P>>;

    /// A slot without an instance, for the `thread_local!` initializer.
    pub const fn empty<P>() -> Slot<P> {
        RefCell::new(None)
    }

    /// What the exported `init` returns.
    pub type Outcome = Result<(), String>;

    /// `init` export: builds the instance, replacing any previous one.
    pub fn init_in<P: Plugin>(slot: &'static LocalKey<Slot<P>>, config: &str) -> Outcome {
        // A failed init must not leave an older instance answering events.
        slot.with(|s| *s.borrow_mut() = None);
        let plugin = init::<P>(config).map_err(|e| e.to_string())?;
        slot.with(|s| *s.borrow_mut() = Some(plugin));
        Ok(())
    }

    /// How one event ended, as reported to the host.
    pub type Handled = Result<(), crate::wit::Failure>;

    /// `handle-queued` export: takes the queued events from the host one at a time, reporting
    /// each one's outcome with the request for the next.
    pub fn handle_queued_in<P: Plugin>(slot: &'static LocalKey<Slot<P>>) {
        let mut previous: Option<Handled> = None;
        while let Some(e) = crate::wit::informant::plugin::events::next(
            previous
                .as_ref()
                .map(|outcome| outcome.as_ref().map(|_| ())),
        ) {
            previous = Some(handle_in(slot, e));
        }
    }

    /// One event of `handle-queued`: routes it to the instance, refusing it before `init`; the
    /// handler's error says whether the host should retry.
    pub fn handle_in<P: Plugin>(slot: &'static LocalKey<Slot<P>>, e: crate::wit::Event) -> Handled {
        handle_event_in(slot, Event::from_wit(e)).map_err(|error| to_failure(&error))
    }

    /// A handler's error as the contract's `failure`: the retry it asked for, or its message.
    pub fn to_failure(error: &HandlerError) -> crate::wit::Failure {
        match error.as_retry() {
            Some(r) => {
                crate::wit::Failure::Retry(crate::wit::informant::plugin::types::RetryLater {
                    reason: r.reason.clone(),
                    after_ms: r
                        .after
                        .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
                })
            }
            None => crate::wit::Failure::Error(error.to_string()),
        }
    }

    /// What handling one event does once the host's record is wrapped.
    pub fn handle_event_in<P: Plugin>(
        slot: &'static LocalKey<Slot<P>>,
        ev: Event,
    ) -> Result<(), HandlerError> {
        slot.with(|s| match s.borrow_mut().as_mut() {
            Some(plugin) => dispatch(plugin, &ev),
            None => Err(NOT_INITIALIZED.into()),
        })
    }

    /// `handle-schedule` export: routes the tick to the instance, refusing it before `init`.
    pub fn handle_schedule_in<P: Plugin>(slot: &'static LocalKey<Slot<P>>, name: &str) -> Outcome {
        slot.with(|s| match s.borrow_mut().as_mut() {
            Some(plugin) => plugin.on_schedule(name).map_err(|e| e.to_string()),
            None => Err(NOT_INITIALIZED.into()),
        })
    }

    /// `admission-hook.admit` export: routes the request to the instance, refusing it before
    /// `init`; an error becomes its message.
    pub fn admit_in<P: Plugin>(
        slot: &'static LocalKey<Slot<P>>,
        request: crate::wit::AdmitRequest,
    ) -> Result<crate::wit::AdmitResponse, String> {
        let req = AdmissionRequest::from_wit(request);
        slot.with(|s| match s.borrow_mut().as_mut() {
            Some(plugin) => plugin
                .admit(&req)
                .map(Admission::into_wit)
                .map_err(|e| e.to_string()),
            None => Err(NOT_INITIALIZED.into()),
        })
    }

    /// The error an event (or a request) gets when the host skipped `init`.
    pub const NOT_INITIALIZED: &str = "handle called before init: the plugin has no instance";

    /// The config the host handed is not JSON.
    #[derive(Debug, thiserror::Error)]
    #[error("config is not valid JSON")]
    pub struct ConfigError(#[source] pub serde_json::Error);

    /// Parses the config JSON and builds the plugin.
    pub fn init<P: Plugin>(config: &str) -> Result<P, HandlerError> {
        // The host hands "{}" for an absent table; tolerate an empty string from older hosts.
        let value = if config.trim().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::from_str(config).map_err(ConfigError)?
        };
        P::init(value)
    }

    /// Routes one event to the handler for its type.
    pub fn dispatch<P: Plugin>(plugin: &mut P, ev: &Event) -> Result<(), HandlerError> {
        match ev.event_type() {
            EventType::Added => plugin.on_added(ev),
            EventType::Updated => plugin.on_updated(ev),
            EventType::Deleted => plugin.on_deleted(ev),
            EventType::Resync => plugin.on_resync(ev),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::__private::{Slot, empty, handle_event_in, init_in};
    use super::*;
    use crate::Meta;
    use crate::event::{Head, Object};

    /// Counts events per type and fails on a `fail` label, to observe dispatch.
    struct Counter {
        seen: Vec<&'static str>,
        prefix: String,
    }

    impl Plugin for Counter {
        fn init(config: Value) -> Result<Self, HandlerError> {
            let prefix = config
                .get("prefix")
                .and_then(Value::as_str)
                .ok_or("no prefix")?;
            Ok(Counter {
                seen: Vec::new(),
                prefix: prefix.to_string(),
            })
        }

        fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
            if ev.meta().label("fail").is_some() {
                return Err(format!("{}: told to fail", self.prefix).into());
            }
            self.seen.push("added");
            Ok(())
        }

        fn on_deleted(&mut self, _: &Event) -> Result<(), HandlerError> {
            self.seen.push("deleted");
            Ok(())
        }
    }

    thread_local! {
        static SLOT: Slot<Counter> = const { empty() };
    }

    /// An event as `from_wit` makes it, its JSON already fetched (natively there is no host).
    fn host_event(event_type: EventType, labels: &[(&str, &str)]) -> Event {
        let head = Head::encode(
            &Resource::new("apps", "v1", "Deployment"),
            Some("default"),
            ["web", "u1", "7"],
            labels.iter().copied(),
        );
        Event {
            event_type,
            object: Object::given(head, json!({"spec": {"replicas": 2}}).to_string()),
            old_object: None,
            initial: true,
            final_state_unknown: false,
        }
    }

    #[test]
    fn export_glue_refuses_events_before_init_and_dispatches_after() {
        let err = handle_event_in(&SLOT, host_event(EventType::Added, &[])).unwrap_err();
        assert_eq!(err.to_string(), __private::NOT_INITIALIZED);
        assert_eq!(init_in(&SLOT, "{}").unwrap_err(), "no prefix");
        assert!(
            init_in(&SLOT, "{nope")
                .unwrap_err()
                .starts_with("config is not valid JSON: key must be a string")
        );
        init_in(&SLOT, r#"{"prefix": "p"}"#).unwrap();
        handle_event_in(&SLOT, host_event(EventType::Added, &[])).unwrap();
        handle_event_in(&SLOT, host_event(EventType::Updated, &[])).unwrap();
        handle_event_in(&SLOT, host_event(EventType::Deleted, &[])).unwrap();
        let err =
            handle_event_in(&SLOT, host_event(EventType::Added, &[("fail", "")])).unwrap_err();
        assert_eq!(err.to_string(), "p: told to fail");
        SLOT.with(|s| assert_eq!(s.borrow().as_ref().unwrap().seen, ["added", "deleted"]));
        init_in(&SLOT, "[]").unwrap_err();
        let err = handle_event_in(&SLOT, host_event(EventType::Added, &[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            __private::NOT_INITIALIZED,
            "a failed init drops the old instance"
        );
    }

    /// Ticks schedules by name; counts them on the instance.
    struct Ticker {
        ticks: Vec<String>,
    }

    impl Plugin for Ticker {
        fn init(_: Value) -> Result<Self, HandlerError> {
            Ok(Ticker { ticks: Vec::new() })
        }

        fn on_schedule(&mut self, name: &str) -> Result<(), HandlerError> {
            if name == "bad" {
                return Err(HandlerError::retry("a retry is an error here"));
            }
            self.ticks.push(name.to_string());
            Ok(())
        }
    }

    thread_local! {
        static TICKER: Slot<Ticker> = const { empty() };
        static PLAIN: Slot<Flaky> = const { empty() };
    }

    #[test]
    fn export_glue_ticks_schedules_after_init_and_plugins_without_any_answer_ok() {
        use __private::handle_schedule_in;
        assert_eq!(
            handle_schedule_in(&TICKER, "sweep").unwrap_err(),
            __private::NOT_INITIALIZED
        );
        init_in(&TICKER, "{}").unwrap();
        handle_schedule_in(&TICKER, "sweep").unwrap();
        assert_eq!(
            handle_schedule_in(&TICKER, "bad").unwrap_err(),
            "a retry is an error here"
        );
        TICKER.with(|s| assert_eq!(s.borrow().as_ref().unwrap().ticks, ["sweep"]));
        // A plugin that declares no schedule handler answers `ok`.
        init_in(&PLAIN, "{}").unwrap();
        handle_schedule_in(&PLAIN, "anything").unwrap();
    }

    #[test]
    fn event_accessors_read_the_host_record() {
        let ev = host_event(EventType::Resync, &[("a", "1"), ("b", "2")]);
        assert_eq!(ev.event_type(), EventType::Resync);
        assert_eq!(
            ev.resource(),
            &Resource::of::<k8s_openapi::api::apps::v1::Deployment>()
        );
        let meta = ev.meta();
        assert_eq!(
            (meta.namespace(), meta.name(), meta.uid()),
            (Some("default"), "web", "u1")
        );
        assert_eq!(
            (meta.resource_version(), meta.key()),
            ("7", "default/web".to_string())
        );
        assert_eq!((meta.label("b"), meta.label("c")), (Some("2"), None));
        assert!(ev.is_initial() && !ev.final_state_unknown());
        assert_eq!(ev.value().unwrap()["spec"]["replicas"], 2);
        assert_eq!(ev.old_object::<Value>().unwrap(), None);
        let err = HandlerError::from(ev.object::<Vec<u8>>().unwrap_err()).to_string();
        assert!(
            err.starts_with(
                "apps/v1/Deployment default/web: cannot decode the object as alloc::vec::Vec<u8>: \
                 invalid type: map"
            ),
            "{err}"
        );
    }

    /// An object header as the host writes it.
    fn header(fields: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f.as_bytes());
        }
        out
    }

    #[test]
    fn object_headers_are_read_in_place_as_kind_and_metadata() {
        let h = Head::decode(header(&[
            "apps",
            "v1",
            "Deployment",
            "team-a",
            "web",
            "u1",
            "42",
            "app",
            "web",
            "note",
            "ünï",
        ]));
        assert_eq!(h.resource(), &Resource::new("apps", "v1", "Deployment"));
        let meta = Meta(&h);
        assert_eq!(
            (
                meta.namespace(),
                meta.name(),
                meta.uid(),
                meta.resource_version()
            ),
            (Some("team-a"), "web", "u1", "42")
        );
        assert_eq!(
            (meta.label("app"), meta.label("note"), meta.label("ap")),
            (Some("web"), Some("ünï"), None)
        );
        assert_eq!(
            meta.labels(),
            [("app".into(), "web".into()), ("note".into(), "ünï".into())]
        );
        // Cluster-scoped, no labels.
        let h = Head::decode(header(&[
            "",
            "v1",
            "Namespace",
            "",
            "kube-system",
            "u2",
            "7",
        ]));
        let meta = Meta(&h);
        assert_eq!(
            (meta.namespace(), meta.key()),
            (None, "kube-system".to_string())
        );
        assert!(meta.labels().is_empty() && meta.label("app").is_none());
        // What the harness encodes reads back the same.
        let h = Head::encode(
            &Resource::new("", "v1", "ConfigMap"),
            None,
            ["c", "u3", "9"],
            [("a", "1")],
        );
        assert_eq!(
            (
                Meta(&h).key(),
                Meta(&h).label("a"),
                h.resource().to_string()
            ),
            ("c".to_string(), Some("1"), "v1/ConfigMap".to_string())
        );
    }

    #[test]
    #[should_panic(expected = "the host's object header ends inside a field")]
    fn a_header_cut_inside_a_field_is_refused() {
        let mut bytes = header(&["", "v1", "ConfigMap", "ns", "name", "u", "1"]);
        bytes.pop();
        Head::decode(bytes);
    }

    /// Asks for a retry on `retry`-labelled objects, fails through `?` on a `count` that is
    /// not a number.
    struct Flaky;

    impl Plugin for Flaky {
        fn init(_: Value) -> Result<Self, HandlerError> {
            Ok(Flaky)
        }

        fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
            let _count: u32 = ev.meta().label("count").unwrap_or("0").parse()?;
            match ev.meta().label("retry") {
                Some("later") => Err(HandlerError::retry_after(
                    "webhook down",
                    std::time::Duration::from_secs(2),
                )),
                Some("then-fail") => {
                    // A helper's retry, dropped for a fallback that fails too.
                    let _ = HandlerError::retry("webhook down");
                    Err("changed its mind".into())
                }
                Some(_) => Err(HandlerError::retry("webhook down")),
                None => Err("plain failure".into()),
            }
        }
    }

    #[test]
    fn a_retry_is_told_apart_from_a_failure() {
        use crate::wit::Failure;

        let mut h = testing::Harness::<Flaky>::new("{}").unwrap();
        let cm = |labels: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "c", "namespace": "default", "labels": labels}})
        };
        let later = Retry {
            reason: "webhook down".into(),
            after: Some(std::time::Duration::from_secs(2)),
        };
        let err = h
            .send(testing::EventBuilder::added(&cm(json!({"retry": "later"}))))
            .unwrap_err();
        assert_eq!((err.as_retry(), h.retry()), (Some(&later), Some(&later)));
        // What the export glue reports to the host.
        let Failure::Retry(r) = __private::to_failure(&err) else {
            panic!("{err:?} is reported as a retry")
        };
        assert_eq!(
            (r.reason.as_str(), r.after_ms),
            ("webhook down", Some(2000))
        );
        let err = h
            .send(testing::EventBuilder::added(&cm(json!({"retry": "now"}))))
            .unwrap_err();
        assert_eq!(h.retry().map(|r| r.after), Some(None));
        let Failure::Retry(r) = __private::to_failure(&err) else {
            panic!("{err:?} is reported as a retry")
        };
        assert_eq!(r.after_ms, None);
        let err = h
            .send(testing::EventBuilder::added(&cm(json!({}))))
            .unwrap_err();
        assert_eq!((err.to_string(), h.retry()), ("plain failure".into(), None));
        // An ordinary error passed up with `?` is a failure.
        let err = h
            .send(testing::EventBuilder::added(&cm(
                json!({"count": "many", "retry": "now"}),
            )))
            .unwrap_err();
        assert!(!err.is_retry() && h.retry().is_none(), "{err:?}");
        let Failure::Error(message) = __private::to_failure(&err) else {
            panic!("{err:?} is reported as a failure")
        };
        assert_eq!(message, "invalid digit found in string");
        // A retry made and dropped does not turn the error returned after it into one.
        let err = h
            .send(testing::EventBuilder::added(&cm(
                json!({"retry": "then-fail"}),
            )))
            .unwrap_err();
        assert_eq!(
            (err.to_string(), h.retry()),
            ("changed its mind".into(), None)
        );
        assert!(matches!(__private::to_failure(&err), Failure::Error(_)));
    }

    /// Answers admission requests: denies objects labelled `deny`, fails on `fail`.
    struct Gatekeeper;

    impl Plugin for Gatekeeper {
        fn init(_: Value) -> Result<Self, HandlerError> {
            Ok(Gatekeeper)
        }

        fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
            if req.meta().label("fail").is_some() {
                return Err(HandlerError::retry("a retry is an error here"));
            }
            Ok(match req.meta().label("deny") {
                Some(why) => Admission::deny(why).with_code(422),
                None => {
                    Admission::patch(vec![admission::PatchOp::add("/metadata/labels/ok", "yes")])
                        .warn("checked")
                }
            })
        }
    }

    thread_local! {
        static GATE: Slot<Gatekeeper> = const { empty() };
        static EVENTS_ONLY: Slot<Flaky> = const { empty() };
    }

    #[test]
    fn export_glue_admits_after_init_and_plugins_without_admit_refuse() {
        use __private::admit_in;
        use admission::Operation;

        let request = |labels: Value| {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"namespace": "ns", "name": "c", "labels": labels}});
            testing::admission_request(Operation::Create, &cm)
                .try_build_wit()
                .unwrap()
        };
        assert_eq!(
            admit_in(&GATE, request(json!({}))).unwrap_err(),
            __private::NOT_INITIALIZED
        );
        init_in(&GATE, "{}").unwrap();
        let r = admit_in(&GATE, request(json!({}))).unwrap();
        assert!(r.allowed && r.code == 0 && r.warnings == ["checked"]);
        assert_eq!(
            r.patch.as_deref(),
            Some(r#"[{"op":"add","path":"/metadata/labels/ok","value":"yes"}]"#)
        );
        let r = admit_in(&GATE, request(json!({"deny": "not today"}))).unwrap();
        assert_eq!(
            (r.allowed, r.code, r.message.as_str(), r.patch),
            (false, 422, "not today", None)
        );
        assert_eq!(
            admit_in(&GATE, request(json!({"fail": ""}))).unwrap_err(),
            "a retry is an error here"
        );
        // A plugin that implements no `admit` answers with an error, never a default allow.
        init_in(&EVENTS_ONLY, "{}").unwrap();
        assert_eq!(
            admit_in(&EVENTS_ONLY, request(json!({}))).unwrap_err(),
            NO_ADMIT
        );
    }

    #[test]
    fn resources_name_their_api_version() {
        let cm = Resource::of::<k8s_openapi::api::core::v1::ConfigMap>();
        assert_eq!(
            (cm.api_version(), cm.to_string()),
            ("v1".into(), "v1/ConfigMap".into())
        );
        assert_eq!(Resource::from_api_version("v1", "ConfigMap"), cm);
        let w = Resource::from_api_version("example.com/v1alpha1", "Widget");
        assert_eq!(w, Resource::new("example.com", "v1alpha1", "Widget"));
        assert_eq!(w.api_version(), "example.com/v1alpha1");
    }
}
