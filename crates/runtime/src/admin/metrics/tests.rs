use super::*;
use crate::admin::admission_metrics::{AdmissionSample, HookRow};
use crate::manifest::admit::Operation;
use crate::plugin::exec::admit::Decision;

#[test]
fn label_values_are_escaped() {
    // What a parser reads back has `\` doubled: `a"b\\c`.
    assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\\\c"#);
    assert_eq!(escape("line\nbreak"), r"line\\nbreak");
    assert_eq!(
        escape("apps/v1 deployments in ns [app=web]"),
        "apps/v1 deployments in ns [app=web]"
    );
    // Every character some reader ends a line at is written as text.
    for (c, shown) in [
        ('\r', r"\\r"),
        ('\t', r"\\t"),
        ('\u{b}', r"\\u{b}"),
        ('\u{c}', r"\\u{c}"),
        ('\u{1c}', r"\\u{1c}"),
        ('\u{1d}', r"\\u{1d}"),
        ('\u{1e}', r"\\u{1e}"),
        ('\u{85}', r"\\u{85}"),
        ('\u{2028}', r"\\u{2028}"),
        ('\u{2029}', r"\\u{2029}"),
        ('\0', r"\\u{0}"),
    ] {
        let value = format!("a{c}b");
        assert_eq!(escape(&value), format!("a{shown}b"), "{c:?}");
    }
    // Two different values never read back the same: a real CR is not the text `\r`.
    let pairs = [("a\rb", r"a\rb"), ("\u{2028}", r"\u{2028}"), ("\\", r"\\")];
    for (x, y) in pairs {
        assert_ne!(escape(x), escape(y), "{x:?} vs {y:?}");
    }
}

/// One scrape with a sample in every family: each plugin figure, a write, a waiting plugin,
/// a change filter, an informer and a listener.
fn full_snapshot() -> Snapshot {
    let histogram = || DurationHistogram::exponential(1e-3, 2.0, 4);
    Snapshot {
        plugins: vec![PluginSample {
            plugin: "p".into(),
            tenant: "t".into(),
            expanded: 1,
            received: 1,
            dispatched: 1,
            failed: 1,
            dropped: 1,
            retried: 1,
            http: [1; 5],
            writes: vec![("apply", "ok", 1)],
            ticks: vec![("sweep".into(), "skipped", 1)],
            backlog: 1,
            state: PluginState::Running,
            latency: histogram(),
            dispatch: histogram(),
        }],
        waiting: vec![WaitingSample {
            plugin: "w".into(),
            tenant: "t".into(),
            waiting_for: "api-server".into(),
            attempts: 1,
        }],
        filters: vec![(".spec".into(), 1, 1)],
        informers: vec![InformerSample {
            informer: "v1 configmaps".into(),
            synced: true,
            objects: 1,
            objects_received: 1,
            lists: 1,
            restarts: 1,
            gone: 1,
        }],
        listeners: BTreeMap::from([(
            ("v1 configmaps".into(), "t/p".into()),
            ListenerSample {
                backlog: 1,
                received: 1,
                delivered: 1,
            },
        )]),
        plugin_metrics: super::super::plugin_metrics::tests::sample(),
        state: Some(StateSample {
            dead_letters: vec![("p".into(), "t".into(), 1)],
            host: true,
            dead_letters_dropped: 1,
            degraded: false,
            bytes_written: 1,
            ops: 1,
        }),
        shard: Some(super::super::shard::ShardSample {
            members: 3,
            active: true,
            owned: 1,
            with_cursor: 1,
            replayed: 1,
            handover_seconds: 0.5,
        }),
        traces: Some(TraceSample {
            exported: 1,
            failed: 1,
            dropped: 1,
        }),
        admission: AdmissionSample(vec![HookRow {
            labels: [
                ("plugin", "p".into()),
                ("tenant", "t".into()),
                ("hook", "images".into()),
            ],
            requests: vec![(Operation::Create, Decision::Deny, 2)],
            failures: vec![("timeout", 1)],
            duration: histogram(),
        }]),
    }
}

/// The book's metrics table lists every family this module encodes, with its type, and
/// no other (the plugins' own aside); and plugins may name none of the host's plugin
/// families.
#[test]
fn the_books_metrics_table_matches_the_families() {
    const PAGE: &str = include_str!("../../../../../docs/src/operations.md");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(full_snapshot()));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    let plugins_own = [
        "informant_tenant_t__hits",
        "informant_tenant_t__depth",
        "informant_tenant_t__size",
        "informant_plugin_hits",
    ]
    .map(|n| format!("{n} "));
    let encoded: std::collections::BTreeSet<(String, String)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| !plugins_own.iter().any(|own| l.starts_with(own.as_str())))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            let name = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_string(),
            };
            (name, kind.to_string())
        })
        .collect();
    let kinds: Vec<String> = PAGE
        .split_once("## Metrics")
        .expect("a `## Metrics` section")
        .1
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|row| row.split('|').nth(2).unwrap_or("").trim().to_string())
        .collect();
    let names = informant_manifest::keys::table_column(PAGE, "## Metrics");
    let book: std::collections::BTreeSet<(String, String)> = names.into_iter().zip(kinds).collect();
    for (name, kind) in &encoded {
        // A tenant's families are `informant_tenant_FORM__NAME`: a host family without
        // `__` is never one of them.
        assert!(
            !name.contains("__"),
            "host family `{name}` holds `__`, which marks a tenant's families"
        );
        let Some(host) = name.strip_prefix("informant_plugin_") else {
            continue;
        };
        let host = match kind.as_str() {
            "counter" => host.strip_suffix("_total").unwrap(),
            _ => host,
        };
        assert!(
            crate::plugin::metrics::name::HOST_FAMILIES.contains(&host),
            "`{host}` is missing from name::HOST_FAMILIES: a plugin could take its name"
        );
    }
    let missing: Vec<_> = encoded.difference(&book).collect();
    let extra: Vec<_> = book.difference(&encoded).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/src/operations.md's `## Metrics` table (name, type): rows missing for {missing:?}; rows for nothing the code has: {extra:?}"
    );
}

#[tokio::test]
async fn dead_letters_past_the_bound_drop_the_oldest_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let durable = crate::durable::Durable::open(dir.path(), "test").unwrap();
    let max = informant_state::MAX_DEAD_LETTERS_PER_PLUGIN;
    for n in 0..max + 3 {
        durable.dead_letter(informant_state::DeadLetter {
            id: 0,
            plugin: "team-a/p".into(),
            informer: "/v1/configmaps".into(),
            key: format!("ns/cm-{n}"),
            resource_version: n.to_string(),
            event: "added".into(),
            error: "boom".into(),
            attempts: 1,
            at_unix_ms: 0,
        });
    }
    durable.flush().await;
    let sample = StateSample::gather(&durable, &[], &Scope::Everything);
    assert_eq!(
        sample.dead_letters,
        [("p".to_string(), "team-a".to_string(), max as u64)]
    );
    assert_eq!(sample.dead_letters_dropped, 3);
    let oldest = &durable.dead_letters(Some("team-a/p")).unwrap()[0];
    assert_eq!(oldest.key, "ns/cm-3", "the oldest three went");
    let mut out = String::new();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot {
        plugins: Vec::new(),
        waiting: Vec::new(),
        filters: Vec::new(),
        informers: Vec::new(),
        listeners: BTreeMap::new(),
        plugin_metrics: Default::default(),
        state: Some(sample),
        shard: None,
        traces: None,
        admission: Default::default(),
    }));
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    assert!(
        out.contains(&format!(
            "informant_dead_letters{{plugin=\"p\",tenant=\"team-a\"}} {max}\n"
        )),
        "{out}"
    );
    assert!(
        out.contains("informant_dead_letters_dropped_total 3\n"),
        "{out}"
    );
}

#[test]
fn families_without_samples_are_left_out() {
    let snapshot = Snapshot {
        plugins: Vec::new(),
        waiting: Vec::new(),
        filters: Vec::new(),
        informers: vec![InformerSample {
            informer: "v1 configmaps".into(),
            synced: true,
            objects: 3,
            objects_received: 3,
            lists: 1,
            restarts: 0,
            gone: 0,
        }],
        listeners: BTreeMap::new(),
        plugin_metrics: Default::default(),
        state: None,
        shard: None,
        traces: None,
        admission: Default::default(),
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    assert!(!out.contains("informant_plugin_"), "{out}");
    assert!(!out.contains("informant_listener_"), "{out}");
    assert!(
        !out.contains("informant_state_"),
        "without --state-dir: {out}"
    );
    assert!(!out.contains("informant_dead_letters"), "{out}");
    assert!(
        out.contains("# TYPE informant_informer_synced gauge\n"),
        "{out}"
    );
    assert!(
        out.contains("# TYPE informant_informer_lists counter\n"),
        "{out}"
    );
    assert!(
        out.contains("informant_informer_lists_total{informer=\"v1 configmaps\"} 1\n"),
        "{out}"
    );
    assert!(out.ends_with("# EOF\n"));
}
