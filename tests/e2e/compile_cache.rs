//! The compile cache with a real plugin: a hostile cache directory costs a compile, never the
//! load; a private one turns the second load into a deserialize.

use std::os::unix::fs::PermissionsExt;

use informant_runtime::plugin::exec::compile_cache::CompileCache;

use informant_runtime::plugin::exec::engine::EngineOptions;

use informant_runtime::plugin::exec::engine::PluginEngine;
use informant_tests::plugins::wasm;

fn engine(cache: CompileCache) -> PluginEngine {
    PluginEngine::new(EngineOptions {
        compile_cache: cache,
        ..Default::default()
    })
    .expect("engine")
}

#[test]
fn a_plugin_loads_by_compiling_when_the_cache_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let engine = engine(CompileCache::Dir(shared.clone()));
    assert_eq!(engine.cache_dir(), None);
    for _ in 0..2 {
        let loaded = engine.load("kubediff", &wasm("kubediff")).expect("loads");
        assert!(!loaded.from_cache);
    }
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
}

#[test]
fn a_plugin_compiles_once_then_comes_from_a_private_cache_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("components");
    let engine = engine(CompileCache::Dir(dir.clone()));
    let first = engine.load("kubediff", &wasm("kubediff")).expect("loads");
    let second = engine.load("kubediff", &wasm("kubediff")).expect("loads");
    assert!(!first.from_cache);
    assert!(second.from_cache);
    assert_eq!(first.sha256, second.sha256);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "one entry, no temp files: {names:?}");
    assert!(
        names[0].starts_with(&format!("{}-", first.sha256)),
        "{names:?}"
    );
    assert!(names[0].ends_with(".cwasm"), "{names:?}");
}

#[test]
fn loads_of_one_wasm_share_its_compiled_code_while_one_is_loaded() {
    // No disk cache: a load that is not shared compiles.
    let engine = engine(CompileCache::Off);
    let first = engine
        .load("team-a/kubediff", &wasm("kubediff"))
        .expect("loads");
    let second = engine
        .load("team-b/kubediff", &wasm("kubediff"))
        .expect("loads");
    assert!(!first.from_cache);
    assert!(
        second.from_cache,
        "shared with the loaded copy, not compiled"
    );
    assert_eq!(first.sha256, second.sha256);
    // Another wasm is not shared with it.
    assert!(
        !engine
            .load("orphans", &wasm("orphans"))
            .expect("loads")
            .from_cache
    );
    drop((first, second));
    let third = engine.load("kubediff", &wasm("kubediff")).expect("loads");
    assert!(
        !third.from_cache,
        "once nothing holds it, it is compiled again"
    );
}
