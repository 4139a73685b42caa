use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use super::*;
use crate::cache;

/// Logs what it sees and what the cache holds for it, to observe the harness.
struct Probe;

impl Plugin for Probe {
    fn init(config: Value) -> Result<Self, HandlerError> {
        crate::debug!("init {config}");
        Ok(Probe)
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let cached = cache::get_as::<ConfigMap>(ev.meta().namespace(), ev.meta().name())?;
        let data = cached.and_then(|c| c.data).unwrap_or_default();
        crate::info!(
            "added {} initial={} data={data:?}",
            ev.meta().key(),
            ev.is_initial()
        );
        Ok(())
    }

    fn on_schedule(&mut self, name: &str) -> Result<(), HandlerError> {
        let n = cache::list_as::<ConfigMap>(None, None)?.len();
        crate::info!("tick {name}: {n} configmaps");
        Ok(())
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let left = cache::list_as::<ConfigMap>(None, None)?.len();
        crate::warn!(
            "deleted {} fsu={} left={left}",
            ev.meta().key(),
            ev.final_state_unknown()
        );
        Ok(())
    }
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "ns", "name": name, "resourceVersion": "3", "uid": "u",
                "labels": {"z": "1", "a": "2"}, "managedFields": [{}]},
            "data": {"k": "v"}})
}

#[test]
fn send_applies_events_to_the_cache_and_captures_logs() {
    let mut h = Harness::<Probe>::new(r#"{"x":1}"#).unwrap();
    h.send(EventBuilder::added(&cm("a"))).unwrap();
    h.send(EventBuilder::added(&cm("b"))).unwrap();
    h.send(EventBuilder::deleted(&cm("a")).final_state_unknown())
        .unwrap();
    assert_eq!(
        h.take_logs(),
        [
            (Level::Debug, r#"init {"x":1}"#.to_string()),
            (
                Level::Info,
                r#"added ns/a initial=false data={"k": "v"}"#.to_string()
            ),
            (
                Level::Info,
                r#"added ns/b initial=false data={"k": "v"}"#.to_string()
            ),
            (Level::Warn, "deleted ns/a fsu=true left=1".to_string()),
        ]
    );
    h.restart().unwrap();
    assert_eq!(
        h.take_logs(),
        [
            (Level::Debug, r#"init {"x":1}"#.to_string()),
            (
                Level::Info,
                r#"added ns/b initial=true data={"k": "v"}"#.to_string()
            ),
        ]
    );
    // Outside a harness call, the thread's default log is untouched by the plugin's records.
    CURRENT.with(|s| assert!(s.borrow().logs.is_empty()));
}

#[test]
fn builder_fills_meta_like_the_host() {
    let ev = EventBuilder::updated(&cm("a"), &cm("a")).initial().build();
    assert_eq!(ev.resource(), &Resource::new("", "v1", "ConfigMap"));
    assert_eq!(
        ev.meta().labels(),
        [("a".into(), "2".into()), ("z".into(), "1".into())]
    );
    assert_eq!((ev.meta().uid(), ev.meta().resource_version()), ("u", "3"));
    assert!(
        !ev.json().contains("managedFields") && !ev.old_json().unwrap().contains("managedFields")
    );
    assert!(
        EventBuilder::added(&json!({"kind": "ConfigMap"}))
            .try_build()
            .is_err()
    );
}

#[test]
fn manifest_declares_watches_and_indexes() {
    let manifest = r#"
            [[watch]]
            api-version = "v1"
            kind = "ConfigMap"
            [watch.indexes]
            by-k = "data.k"
            [config]
            x = 1
        "#;
    let mut h = Harness::<Probe>::from_manifest(manifest).unwrap();
    h.cache_mut().insert(&cm("a")).unwrap();
    let cms = Resource::new("", "v1", "ConfigMap");
    assert_eq!(h.cache().by_index(&cms, "by-k", "v").unwrap().len(), 1);
    let secrets = Resource::new("", "v1", "Secret");
    assert!(matches!(
        h.cache().list(&secrets, None, None),
        Err(QueryError::NotWatched(_))
    ));
    assert_eq!(h.logs(), [(Level::Debug, r#"init {"x":1}"#.to_string())]);
}

#[test]
fn tick_runs_a_schedule_with_the_harness_cache_and_refuses_undeclared_names() {
    let manifest = r#"
            [[watch]]
            api-version = "v1"
            kind = "ConfigMap"
            [[schedule]]
            name = "count"
            every = "1m"
        "#;
    let mut h = Harness::<Probe>::from_manifest(manifest).unwrap();
    h.cache_mut().insert(&cm("a")).unwrap();
    h.cache_mut().insert(&cm("b")).unwrap();
    h.take_logs();
    h.tick("count").unwrap();
    assert_eq!(
        h.logs(),
        [(Level::Info, "tick count: 2 configmaps".to_string())]
    );
    let err = h.tick("other").unwrap_err().to_string();
    assert_eq!(
        err,
        "schedule `other` is not declared in the manifest's [[schedule]] tables"
    );
    // Without a manifest any name is ticked.
    let mut h = Harness::<Probe>::new("{}").unwrap();
    h.tick("anything").unwrap();
}

/// Counts objects per namespace under a group per object, and deletes the group on delete.
struct Counting;

impl Plugin for Counting {
    fn init(_config: Value) -> Result<Self, HandlerError> {
        Ok(Counting)
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let ns = ev.meta().namespace().unwrap_or_default();
        crate::metrics::counter("seen_total", "Objects seen.")
            .labels(&[("namespace", ns)])
            .inc()?;
        crate::metrics::gauge("present", "Present objects.")
            .labels(&[("name", ev.meta().name()), ("namespace", ns)])
            .group(ev.meta().name())
            .set(1.0)?;
        crate::metrics::histogram("name_bytes", "Name lengths.")
            .buckets(&[4.0, 16.0])
            .observe(ev.meta().name().len() as f64)?;
        Ok(())
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let gone = crate::metrics::delete_group(ev.meta().name());
        crate::info!("{gone} series gone");
        Ok(())
    }
}

#[test]
fn the_harness_records_metric_calls() {
    let mut h = Harness::<Counting>::new("{}").unwrap();
    h.send(EventBuilder::added(&cm("a"))).unwrap();
    h.send(EventBuilder::added(&cm("b"))).unwrap();
    assert_eq!(
        h.metric_value("seen_total", &[("namespace", "ns")]),
        Some(2.0)
    );
    let present = [("namespace", "ns"), ("name", "a")];
    assert_eq!(h.metric_value("present", &present), Some(1.0));
    assert_eq!(h.metrics().len(), 6);
    assert_eq!(h.metrics()[2].call, "histogram-observe");
    assert_eq!(h.metrics()[1].labels[0], ("name".into(), "a".into()));
    h.send(EventBuilder::deleted(&cm("a"))).unwrap();
    assert_eq!(h.metric_value("present", &present), None);
    assert_eq!(h.take_logs(), [(Level::Info, "1 series gone".to_string())]);
    // Written as another type than it was made as: refused, as the host would.
    let e = crate::metrics::gauge("g", "").add(1.0).unwrap_err();
    assert!(
        matches!(e, crate::metrics::MetricError::TypeConflict(_)),
        "{e}"
    );
}
