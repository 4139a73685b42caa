//! `informant new`: the scaffolded crate's own unit tests pass with `cargo test` (Python: pytest,
//! JS: `node --test`), and it builds
//! into a component the host loads.

use std::path::{Path, PathBuf};
use std::process::Command;

use informant_dev::{
    Builder, Lang, PluginSource, Polyglot, SdkDependency, polyglot_sdk, scaffold, scaffold_polyglot,
};
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::id::PluginId;

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
    let krate = PluginSource {
        id: PluginId {
            tenant: String::new(),
            name: "hello-hook".into(),
        },
        dir: s.dir.clone(),
        lang: Lang::Rust,
    };
    let builder = Builder {
        target_dir: target("wasm-plugins"),
        out_dir: dir.path().join("out"),
        color: false,
        polyglot: Polyglot::default(),
    };
    let built = builder.build(&krate).unwrap_or_else(|e| panic!("{e}"));
    assert!(builder.install(&krate, &built).unwrap());
    let (wasm, manifest) = builder.installed_paths(&krate.id);
    informant_runtime::manifest::Manifest::load(&manifest).unwrap();
    let engine = PluginEngine::new(EngineOptions::default()).unwrap();
    engine.load("hello-hook", &wasm).unwrap();
}

/// `informant new --lang python|js`: the scaffold's own tests pass with pytest / `node --test`,
/// and the dev loop's builder turns it into a component the host's engine loads.
#[test]
fn python_and_js_scaffolds_pass_their_tests_and_build_into_components() {
    use informant_tests::plugins::target_dir;
    use informant_tests::toolchains;

    let (Some(tc), Some(js_sdk)) = (toolchains::python(), toolchains::js_sdk()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let engine = PluginEngine::new(EngineOptions::default()).unwrap();
    let builder = Builder {
        target_dir: dir.path().join("target"),
        out_dir: dir.path().join("out"),
        color: false,
        polyglot: Polyglot {
            toolchains: Some(target_dir()),
            ..Polyglot::detect()
        },
    };
    let build = |lang, name: &str, src: &Path| {
        let source = PluginSource {
            id: PluginId {
                tenant: String::new(),
                name: name.into(),
            },
            dir: src.to_path_buf(),
            lang,
        };
        let built = builder.build(&source).unwrap_or_else(|e| panic!("{e}"));
        assert!(builder.install(&source, &built).unwrap());
        let (wasm, manifest) = builder.installed_paths(&source.id);
        informant_runtime::manifest::Manifest::load(&manifest).unwrap();
        engine.load(name, &wasm).unwrap();
    };
    let run = |cmd: &mut Command, what: &str| {
        let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };

    let py_sdk = polyglot_sdk(Lang::Python).expect("guest-sdk-py");
    let py = scaffold_polyglot(Lang::Python, "hello-py", dir.path(), &py_sdk).unwrap();
    run(
        Command::new(tc.python())
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(&py),
        "pytest on the Python scaffold",
    );
    build(Lang::Python, "hello-py", &py);

    // The test runner needs the SDK's own toolchain (esbuild).
    let js = scaffold_polyglot(Lang::Js, "hello-ts", dir.path(), &js_sdk).unwrap();
    run(
        Command::new("node").arg(js_sdk.join("test.mjs")).arg(&js),
        "node --test on the TypeScript scaffold",
    );
    build(Lang::Js, "hello-ts", &js);

    assert!(
        scaffold_polyglot(Lang::Python, "hello-py", dir.path(), &py_sdk)
            .unwrap_err()
            .to_string()
            .contains("already exists"),
    );
    assert!(
        scaffold_polyglot(Lang::Js, "Bad Name", dir.path(), &js_sdk)
            .unwrap_err()
            .to_string()
            .contains("plugin name `Bad Name`"),
    );
}
