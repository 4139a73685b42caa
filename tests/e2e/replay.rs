//! Record and replay: a live run (embedded API server, real informers, the kubediff plugin) is
//! recorded; replaying the recording offline gives the same plugin output.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use informant_runtime::plugin::exec::engine::EngineOptions;

use informant_runtime::plugin::load::host_config::HostConfig;

use informant_runtime::plugin::exec::engine::PluginEngine;

use informant_runtime::plugin::imports::log::PluginLog;
use informant_runtime::replay::{Recorder, ReplayConfig, read_records, replay};
use informant_tests::plugins::{PluginEnv, wasm};
use informant_tests::{configmap, guarded};
use serde_json::{Value, json};

/// kubediff's manifest for the kinds these recordings hold (the live run must not watch more
/// than the recording replays).
const RECORDED_KINDS: &str = "[[watch]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nignore-status = true\n";

fn recorded_kinds_manifest() -> String {
    RECORDED_KINDS.to_string()
}

/// [`RECORDED_KINDS`] written to `dir`.
fn kubediff_manifest(dir: &Path) -> PathBuf {
    let path = dir.join("kubediff.toml");
    std::fs::write(&path, RECORDED_KINDS).unwrap();
    path
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}})
}

/// What a comparison looks at: level and message.
fn output(lines: &[PluginLog]) -> Vec<String> {
    lines
        .iter()
        .map(|l| format!("{:?} {}", l.level, l.message))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_a_recording_gives_the_live_runs_plugin_output() {
    let env = PluginEnv::start(HostConfig::default()).await;
    // There before anything starts: the recording's first list and the plugin's initial replay.
    env.server
        .seed([
            configmap("default", "pre-1", "x"),
            configmap("default", "pre-2", "y"),
            deployment("web", 1),
        ])
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("live.jsonl");
    let scope = informant_runtime::informer::WatchScope::default();
    let informers = [
        env.factory
            .informer("apps/v1", "Deployment", scope.clone())
            .await
            .unwrap(),
        env.factory
            .informer("v1", "ConfigMap", scope)
            .await
            .unwrap(),
    ];
    // Registered before the informers start, as `informant record` does.
    let recorder = Recorder::start(
        &informers.each_ref().map(|c| c.informer().clone()),
        Box::new(std::fs::File::create(&recording).unwrap()),
    );
    // kubediff's own manifest watches every kind; a recording holds the two recorded here.
    let manifest = recorded_kinds_manifest();
    env.install(None, "kubediff", "kubediff", &manifest);
    let report = env.reconcile().await;
    assert_eq!(report.loaded.len(), 1, "{:?}", report.errors);

    let live = || {
        env.logs
            .lines()
            .into_iter()
            .filter(|l| &*l.plugin == "kubediff")
            .collect::<Vec<_>>()
    };
    let mut expected = 3;
    env.logs
        .wait_until("the initial replay", || live().len() == expected)
        .await;
    guarded(
        "the first list recorded",
        recorder.wait_for(expected as u64),
    )
    .await;

    // One change at a time, each seen by the plugin and the recorder before the next, so the
    // live order across kinds is the order of the writes.
    let writes: Vec<Box<dyn Fn() + '_>> = vec![
        Box::new(|| drop(env.server.create(configmap("default", "a", "1")).unwrap())),
        Box::new(|| drop(env.server.update(configmap("default", "a", "2")).unwrap())),
        Box::new(|| drop(env.server.update(deployment("web", 3)).unwrap())),
        Box::new(|| {
            env.server
                .delete("v1", "ConfigMap", Some("default"), "pre-1")
                .unwrap()
        }),
        Box::new(|| drop(env.server.create(configmap("default", "b", "1")).unwrap())),
        Box::new(|| {
            env.server
                .delete("apps/v1", "Deployment", Some("default"), "web")
                .unwrap()
        }),
    ];
    for write in &writes {
        write();
        expected += 1;
        env.logs
            .wait_until("the plugin's line for the write", || {
                live().len() == expected
            })
            .await;
        guarded("the recorder's line", recorder.wait_for(expected as u64)).await;
    }
    let written = recorder.finish().await.unwrap();
    assert_eq!(written, expected as u64);
    let live = live();

    // Offline: no API server, no informer started.
    let records = read_records(&recording).unwrap();
    assert_eq!(records.len(), expected);
    assert!(records[..3].iter().all(|r| r.initial));
    assert!(records[3..].iter().all(|r| !r.initial));
    let engine = Arc::new(PluginEngine::new(EngineOptions::default()).unwrap());
    let config = ReplayConfig {
        wasm: wasm("kubediff"),
        manifest: Some(kubediff_manifest(dir.path())),
        host: HostConfig::default(),
        reviews: Vec::new(),
    };
    let outcome = replay(engine, &config, Vec::new(), records, |_| {})
        .await
        .unwrap();
    assert_eq!(outcome.failed, 0);
    assert_eq!(outcome.skipped, 0);

    let (live, replayed) = (output(&live), output(&outcome.logs));
    assert_eq!(
        replayed.len(),
        live.len(),
        "live:\n{live:#?}\nreplayed:\n{replayed:#?}"
    );
    // The initial replay comes in cache order, which is unordered: compare it as a set.
    let (mut live_initial, mut replay_initial) = (live[..3].to_vec(), replayed[..3].to_vec());
    live_initial.sort();
    replay_initial.sort();
    assert_eq!(replay_initial, live_initial);
    assert_eq!(replayed[3..], live[3..]);
    // The update's diff made it through: the old version came from the replayed cache.
    assert!(
        replayed[4].contains(r#""path":"/data/value""#),
        "{}",
        replayed[4]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_prefills_the_cache_from_objects_and_names_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects.yaml");
    std::fs::write(
        &objects,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: seeded, namespace: default, resourceVersion: \"5\"}\ndata: {value: \"1\"}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: unwatched, namespace: default}\n",
    )
    .unwrap();
    let events = dir.path().join("events.jsonl");
    std::fs::write(
        &events,
        concat!(
            r#"{"type":"updated","apiVersion":"v1","kind":"ConfigMap","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seeded","namespace":"default","resourceVersion":"6"},"data":{"value":"2"}}}"#,
            "\n"
        ),
    )
    .unwrap();
    let engine = Arc::new(PluginEngine::new(EngineOptions::default()).unwrap());
    let config = ReplayConfig {
        wasm: wasm("kubediff"),
        manifest: Some(kubediff_manifest(dir.path())),
        host: HostConfig::default(),
        reviews: Vec::new(),
    };
    let objs = informant_runtime::replay::read_yaml_objects(&objects).unwrap();
    let outcome = replay(
        engine.clone(),
        &config,
        objs,
        read_records(&events).unwrap(),
        |_| {},
    )
    .await
    .unwrap();
    let lines: Vec<Value> = outcome
        .logs
        .iter()
        .map(|l| serde_json::from_str(&l.message).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["event"], "added");
    assert_eq!(lines[1]["event"], "updated");
    assert_eq!(lines[1]["changes"][0]["path"], "/data/value");
    assert_eq!(outcome.skipped, 1, "the Secret is not watched");

    std::fs::write(&events, "{\"type\":\"added\"}\n").unwrap();
    let err = read_records(&events).unwrap_err().to_string();
    assert!(
        err.contains("events.jsonl:1") && err.contains("apiVersion"),
        "{err}"
    );
}
