//! What the end-to-end benchmarks share: the pods they serve, the bench plugin's compile, the
//! environment's numbers.

use std::path::Path;
use std::sync::LazyLock;

use informant_runtime::plugin::exec::engine::EngineOptions;

use informant_runtime::plugin::load::host_config::HostConfig;

use informant_runtime::plugin::exec::engine::PluginEngine;
use serde_json::Value;

/// Where the pods live.
pub const NAMESPACE: &str = "bench";

/// A number from the environment (`_` separators allowed), or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?}: {e}")),
        Err(_) => default,
    }
}

/// A pod as a ReplicaSet's controller and the kubelet leave it: labels, an owner, managedFields
/// of both, a spec with two containers, env, resources and a volume, a running status.
const POD: &str = r#"{
 "apiVersion": "v1", "kind": "Pod",
 "metadata": {
  "name": "", "generateName": "web-7d9f8b6c5d-", "namespace": "bench",
  "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d", "round": "0"},
  "annotations": {"bench.informant.dev/seq": "0"},
  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d",
   "uid": "6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60", "controller": true, "blockOwnerDeletion": true}],
  "managedFields": [
   {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
    "time": "2025-06-01T12:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {
     "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
      "f:ownerReferences": {".": {}, "k:{\"uid\":\"6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60\"}": {}}},
     "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {},
       "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {},
        "f:containerPort": {}, "f:protocol": {}}},
       "f:resources": {".": {}, "f:limits": {".": {}, "f:memory": {}},
        "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}}},
      "f:volumes": {".": {}, "k:{\"name\":\"config\"}": {".": {}, "f:configMap": {".": {},
       "f:name": {}}, "f:name": {}}}}}},
   {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
    "time": "2025-06-01T12:00:04Z", "fieldsType": "FieldsV1", "subresource": "status",
    "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {},
     "f:type": {}}}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}}}}
  ]
 },
 "spec": {
  "containers": [
   {"name": "web", "image": "registry.example.com/shop/web:1.42.3",
    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
    "env": [{"name": "LOG_LEVEL", "value": "info"}],
    "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
    "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}]},
   {"name": "proxy", "image": "registry.example.com/infra/proxy:2.7.0",
    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}}}
  ],
  "volumes": [{"name": "config", "configMap": {"name": "web-config"}}],
  "restartPolicy": "Always", "serviceAccountName": "web", "nodeName": ""
 },
 "status": {
  "phase": "Running",
  "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-06-01T12:00:04Z"}],
  "hostIP": "", "podIP": "",
  "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
   "image": "registry.example.com/shop/web:1.42.3", "containerID": "",
   "state": {"running": {"startedAt": "2025-06-01T12:00:03Z"}}}]
 }
}"#;

pub fn pod_name(i: usize) -> String {
    format!("web-7d9f8b6c5d-{i:06}")
}

/// Pod `i` as modification `seq` of round `round` leaves it (round 0, seq 0: as seeded).
pub fn pod(i: usize, round: u64, seq: usize) -> Value {
    static TEMPLATE: LazyLock<Value> =
        LazyLock::new(|| serde_json::from_str(POD).expect("the pod template is valid JSON"));
    let mut p = TEMPLATE.clone();
    let m = &mut p["metadata"];
    m["name"] = pod_name(i).into();
    m["labels"]["round"] = round.to_string().into();
    m["annotations"]["bench.informant.dev/seq"] = seq.to_string().into();
    p["spec"]["nodeName"] = format!("node-{:03}", i % 500).into();
    let s = &mut p["status"];
    s["hostIP"] = format!("192.168.{}.{}", (i % 500) / 250, i % 250).into();
    s["podIP"] = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255).into();
    s["containerStatuses"][0]["containerID"] = format!("containerd://{i:064x}").into();
    p
}

/// Compiles the plugin into the default on-disk compile cache with the engine settings
/// `Runtime::start` uses, so no configuration's start-up pays the one-off compile.
pub fn warm_compile_cache(wasm: &Path) {
    let engine = PluginEngine::new(EngineOptions {
        max_memory_bytes: (HostConfig::default().max_memory_mib as usize) << 20,
        ..Default::default()
    })
    .expect("plugin engine");
    let loaded = engine.load("bench", wasm).expect("load the bench plugin");
    println!(
        "bench plugin {} KiB, {} in {:.0} ms",
        std::fs::metadata(wasm).map_or(0, |m| m.len() / 1024),
        if loaded.from_cache {
            "found in the compile cache"
        } else {
            "compiled"
        },
        loaded.load_time.as_secs_f64() * 1e3
    );
}

/// Bytes in MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// The bytes of the files under `dir`, as allocated on disk.
pub fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}
