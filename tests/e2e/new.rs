//! `informant new`: the scaffolded crate's own unit tests pass with `cargo test`, and it builds
//! into a component the host loads.

use std::path::{Path, PathBuf};
use std::process::Command;

use informant_runtime::devloop::{Builder, PluginCrate, SdkDependency, scaffold};
use informant_runtime::plugin::{EngineOptions, PluginEngine, PluginId};

fn target(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target")
        .join(name)
}

#[test]
fn a_scaffolded_plugin_passes_its_unit_tests_and_builds_for_wasm() {
    let dir = tempfile::tempdir().unwrap();
    let s = scaffold("hello-hook", dir.path(), SdkDependency::detect()).unwrap();
    assert!(
        matches!(&s.sdk, SdkDependency::Path(p) if p.ends_with("guest-sdk")),
        "{:?}",
        s.sdk
    );
    assert!(s.pinned, "the SDK workspace's Cargo.lock is copied");

    // Native unit tests, as the crate's author runs them (its own target dir: the one running
    // this test is locked by the cargo running it).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .arg("test")
        .arg("--manifest-path")
        .arg(s.dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target("scaffold"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("test result: ok. 2 passed"), "{stdout}");

    // The component, built the way `informant dev` builds it, loads in the host's engine.
    let krate = PluginCrate {
        id: PluginId {
            tenant: String::new(),
            name: "hello-hook".into(),
        },
        dir: s.dir.clone(),
    };
    let builder = Builder {
        target_dir: target("wasm-plugins"),
        out_dir: dir.path().join("out"),
        color: false,
    };
    let built = builder.build(&krate).unwrap_or_else(|e| panic!("{e}"));
    assert!(builder.install(&krate, &built).unwrap());
    let (wasm, manifest) = builder.installed_paths(&krate.id);
    informant_runtime::plugin::Manifest::load(&manifest).unwrap();
    let engine = PluginEngine::new(EngineOptions::default()).unwrap();
    engine.load("hello-hook", &wasm).unwrap();
}
