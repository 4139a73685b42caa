//! The one wasmtime `Engine` and `Linker` of the process, the epoch ticker that enforces
//! deadlines, and loading components through the compile cache.
//!
//! Compiling a component costs tens of milliseconds; deserializing a precompiled one ~0.1 ms. So
//! compiled artifacts are cached as `<sha256 of the wasm>-<engine hash>.cwasm` in a checked
//! directory (see [`crate::plugin::exec::compile_cache`]), and each plugin version gets one `PluginPre` at load time:
//! nothing is compiled or linked on the event path.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::plugin::PluginError;
use crate::plugin::bindings::admitting::exports::informant::plugin::admission_hook::GuestIndices as AdmissionHookIndices;
use crate::plugin::bindings::{PluginPre, WIT_PACKAGE};
use crate::plugin::exec::compile_cache::{CacheDir, CompileCache};
use crate::plugin::imports::state::State;

/// How often the epoch advances: a computing guest yields to the executor this often, so its
/// deadline (a timer) can cut it off.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(2);

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Where compiled components are cached on disk, if anywhere.
    pub compile_cache: CompileCache,
    /// Largest linear memory any plugin may have, in bytes (the pooling allocator's slot size).
    pub max_memory_bytes: usize,
    /// How many plugin instances may exist at once.
    pub max_instances: u32,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            compile_cache: CompileCache::Default,
            max_memory_bytes: 256 << 20,
            max_instances: 256,
        }
    }
}

/// A compiled plugin version, ready to instantiate.
#[derive(Clone)]
pub struct LoadedComponent {
    /// Pre-linked instance factory.
    pub pre: PluginPre<State>,
    /// Where its `admission-hook` export is, when it has one (built for the `admitting-plugin`
    /// world).
    pub admission_hook: Option<AdmissionHookIndices>,
    /// sha256 of the `.wasm` bytes, hex: the version's identity.
    pub sha256: String,
    /// Whether it was not compiled: the artifact came from the disk cache, or is shared with
    /// a plugin already loaded from the same wasm.
    pub from_cache: bool,
    /// Time to compile or deserialize, and pre-link.
    pub load_time: Duration,
    /// Keeps the compiled code shared while this version is loaded (see `PluginEngine::loaded`).
    _code: Arc<Component>,
}

/// The process's wasmtime engine, linker and epoch ticker.
pub struct PluginEngine {
    engine: Engine,
    linker: Linker<State>,
    options: EngineOptions,
    engine_hash: String,
    cache: Option<CacheDir>,
    /// Compiled components by the sha256 of their wasm, while a loaded plugin holds them:
    /// loading the same wasm again (another tenant's copy, an unchanged file reloaded) shares
    /// its machine code rather than mapping a second copy, which is most of a plugin's memory
    /// for Python and JS components (~35 MiB each with their interpreters).
    loaded: Mutex<HashMap<[u8; 32], Weak<Component>>>,
}

impl PluginEngine {
    /// Builds the engine (pooling allocator, epoch interruption), starts the epoch ticker, and
    /// creates and checks the compile cache directory.
    ///
    /// A cache directory that cannot be created or fails its checks (the default or an explicit
    /// one alike) is a warning naming the path and the reason, not an error: the cache only
    /// saves time, and plugins load without it by compiling.
    pub fn new(options: EngineOptions) -> Result<Self, PluginError> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(options.max_instances)
            .total_core_instances(options.max_instances * 8)
            .total_memories(options.max_instances * 4)
            .total_tables(options.max_instances * 8)
            .max_memory_size(options.max_memory_bytes)
            .max_core_instances_per_component(32)
            .max_memories_per_component(8)
            .max_tables_per_component(16);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(engine_err("creating the engine"))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(engine_err("linking WASI"))?;
        State::add_to_linker(&mut linker).map_err(engine_err("linking the plugin world"))?;

        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_hash = format!("{:016x}", h.finish());

        // The ticker lives as long as the engine itself (every store holds it), not as long as
        // this struct: a call still running after the host let go must still reach its deadline.
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("informant-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| PluginError::Engine {
                what: "starting the epoch ticker",
                source: e.into(),
            })?;
        let cache = match CacheDir::open(&options.compile_cache) {
            Ok(cache) => cache,
            Err(e) => {
                tracing::warn!(error = %e, "running without the compile cache: every plugin load compiles");
                None
            }
        };
        Ok(PluginEngine {
            engine,
            linker,
            options,
            engine_hash,
            cache,
            loaded: Mutex::default(),
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Engine-wide settings.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The compile cache directory in use, once checked (`None`: every load compiles).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_ref().map(CacheDir::path)
    }

    /// Reads a plugin's wasm file and loads it (see [`PluginEngine::load_bytes`]).
    pub fn load(&self, name: &str, wasm_path: &Path) -> Result<LoadedComponent, PluginError> {
        let failed = |reason: String| PluginError::Load {
            plugin: name.to_string(),
            path: wasm_path.to_path_buf(),
            reason,
        };
        let unreadable = |e: std::io::Error| failed(format!("cannot read: {e}"));
        let mut file = std::fs::File::open(wasm_path).map_err(unreadable)?;
        let opened = file.metadata().map_err(unreadable)?;
        let max = crate::files::MAX_PLUGIN_FILE_BYTES;
        let bytes = crate::files::read_capped(&mut file, &opened, max)
            .map_err(unreadable)?
            .map_err(|len| {
                failed(format!(
                    "it is {len} bytes; a component may be at most {max}"
                ))
            })?;
        self.load_bytes(name, wasm_path, &bytes)
    }

    /// Loads a plugin's wasm (`wasm_path` only names it in errors): from the compile cache when
    /// it has this exact version, otherwise compiling (and caching) it; then checks it against
    /// the `plugin` world.
    pub fn load_bytes(
        &self,
        name: &str,
        wasm_path: &Path,
        bytes: &[u8],
    ) -> Result<LoadedComponent, PluginError> {
        let start = Instant::now();
        let digest: [u8; 32] = Sha256::digest(bytes).into();
        let load_err = |reason: String| PluginError::Load {
            plugin: name.to_string(),
            path: wasm_path.to_path_buf(),
            reason,
        };
        let shared = self.loaded.lock().get(&digest).and_then(Weak::upgrade);
        let (code, from_cache) = match shared {
            Some(code) => (code, true),
            None => {
                // Two first loads of one wasm at once both compile; the later one is shared.
                let (component, from_cache) = self
                    .component(name, bytes, &digest)
                    .map_err(|e| load_err(format!("not a valid WebAssembly component: {e:#}")))?;
                let code = Arc::new(component);
                let mut loaded = self.loaded.lock();
                loaded.retain(|_, held| held.strong_count() > 0);
                loaded.insert(digest, Arc::downgrade(&code));
                (code, from_cache)
            }
        };
        let component: &Component = &code;
        let instance_pre = self.linker.instantiate_pre(component).map_err(|e| {
            load_err(match self.contract_of(component) {
                Some(other) => format!(
                    "was built for `{other}`, but this host speaks `{WIT_PACKAGE}`: rebuild it \
                     with the informant-sdk (or bindings) of this release"
                ),
                None => format!("cannot be linked: {e:#}"),
            })
        })?;
        let pre = PluginPre::new(instance_pre).map_err(|e| {
            load_err(format!(
                "does not implement the informant:plugin world: {e:#}"
            ))
        })?;
        let admission_hook = AdmissionHookIndices::new(pre.instance_pre()).ok();
        Ok(LoadedComponent {
            pre,
            admission_hook,
            sha256: hex(&digest),
            from_cache,
            load_time: start.elapsed(),
            _code: code,
        })
    }

    /// The `informant:plugin` package version a component imports, when it is not this host's.
    fn contract_of(&self, component: &Component) -> Option<String> {
        let package = WIT_PACKAGE.split('@').next().unwrap_or(WIT_PACKAGE);
        component
            .component_type()
            .imports(&self.engine)
            // `informant:plugin/<interface>@<version>`: the package up to its `/`, so that a
            // package merely named alike (`informant:plugins`) is not taken for ours.
            .filter_map(|(name, _)| {
                let interface = name.strip_prefix(package)?.strip_prefix('/')?;
                interface.split_once('@').map(|(_, v)| v)
            })
            .find(|version| !speaks(version))
            .map(|version| format!("{package}@{version}"))
    }

    /// The cache entry name of the wasm whose sha256 is `digest`, for this engine.
    fn entry_name(&self, digest: &[u8]) -> String {
        format!("{}-{}.cwasm", hex(digest), self.engine_hash)
    }

    /// The component `bytes` (whose sha256 is `source`) from its cache entry when that is there
    /// and passes its checks, else compiled (and written to the cache); `true` when it came from
    /// the cache.
    fn component(
        &self,
        plugin: &str,
        bytes: &[u8],
        source: &[u8],
    ) -> wasmtime::Result<(Component, bool)> {
        let entry = &self.entry_name(source);
        if let Some(cache) = &self.cache {
            match cache.read(entry) {
                Ok(Some(stored)) => match stored
                    .strip_prefix(ENTRY_MAGIC)
                    .and_then(|rest| rest.strip_prefix(source))
                {
                    None => {
                        tracing::warn!(plugin, path = %cache.path().join(entry).display(), "ignoring a compile cache entry that is not this component's (renamed, or written by something else); recompiling")
                    }
                    Some(artifact) => {
                        // SAFETY: `read` checked the very descriptor these bytes came from: a regular
                        // file with one link, owned by this process's user and writable by no one
                        // else, in a directory that passed the same checks when the engine started.
                        // So only this user can have written it: an artifact serialized by this
                        // code, named by the hashes of the wasm and the engine (whose compatibility
                        // wasmtime checks again itself).
                        // It also starts with the sha256 of the very wasm being loaded, so an entry
                        // renamed to another component's name is not run as that component.
                        match unsafe { Component::deserialize(&self.engine, artifact) } {
                            Ok(component) => return Ok((component, true)),
                            Err(e) => {
                                tracing::warn!(plugin, path = %cache.path().join(entry).display(), error = %e, "ignoring an unusable compile cache entry; recompiling")
                            }
                        }
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(plugin, error = %e, "ignoring a compile cache entry; recompiling")
                }
            }
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Some(cache) = &self.cache {
            let written = component
                .serialize()
                .map_err(|e| e.to_string())
                .and_then(|artifact| {
                    let stored = [ENTRY_MAGIC, source, &artifact].concat();
                    cache.write(entry, &stored).map_err(|e| e.to_string())
                });
            if let Err(e) = written {
                tracing::warn!(plugin, path = %cache.path().join(entry).display(), error = %e, "could not write the compile cache");
            }
        }
        Ok((component, false))
    }
}

/// What a compile cache entry starts with, before the sha256 of its component's wasm and the
/// serialized artifact.
const ENTRY_MAGIC: &[u8] = b"informant-cwasm1";

/// Lowercase hex, as sha256 sums are shown.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(all(test, unix))]
mod tests {
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    use std::path::PathBuf;

    use super::*;

    /// The smallest component: compiles, links nothing; enough for the cache's paths.
    const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";

    fn engine(cache: CompileCache) -> PluginEngine {
        PluginEngine::new(EngineOptions {
            compile_cache: cache,
            max_memory_bytes: 1 << 20,
            max_instances: 1,
        })
        .unwrap()
    }

    /// The engine built with `cache`, and what it logged meanwhile.
    fn engine_logging(cache: CompileCache) -> (PluginEngine, String) {
        let captured = crate::testing::CapturedLogs::default();
        let engine = tracing::subscriber::with_default(captured.subscriber(), || engine(cache));
        (engine, captured.text())
    }

    /// Loads `EMPTY` through the cache: whether it came from there.
    fn load(engine: &PluginEngine) -> bool {
        engine
            .component("t", EMPTY, &Sha256::digest(EMPTY))
            .unwrap()
            .1
    }

    /// An entry renamed to another component's name (or a stale one under it) is not run as
    /// that component: each entry carries the sha256 of the wasm it was compiled from.
    #[test]
    fn an_entry_under_another_components_name_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let engine = engine(CompileCache::Dir(dir.clone()));
        assert!(!load(&engine), "compiled and written");
        assert!(load(&engine), "then read back");
        // The same bytes plus a custom section named `x`: another component. EMPTY's
        // artifact, renamed to its entry, must not stand in for it.
        let other = [EMPTY, b"\0\x02\x01x"].concat();
        let other_digest = Sha256::digest(&other);
        fs::rename(
            dir.join(entry(&engine)),
            dir.join(engine.entry_name(&other_digest)),
        )
        .unwrap();
        let (_, from_cache) = engine.component("t", &other, &other_digest).unwrap();
        assert!(
            !from_cache,
            "a renamed artifact is not run as another component"
        );
        let (_, from_cache) = engine.component("t", &other, &other_digest).unwrap();
        assert!(from_cache, "its own artifact replaced the renamed one");
        assert!(
            !load(&engine),
            "EMPTY's entry was renamed away: compiled again"
        );
    }

    fn entry(engine: &PluginEngine) -> String {
        engine.entry_name(&Sha256::digest(EMPTY))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn compiles_once_then_loads_from_a_fresh_0700_directory_leaving_no_temp_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("informant/components");
        let engine = engine(CompileCache::Dir(dir.clone()));
        assert_eq!(engine.cache_dir(), Some(dir.as_path()));
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, 0o700);
        assert!(!load(&engine), "first load compiles");
        assert!(load(&engine), "second load deserializes");
        assert_eq!(names(&dir), [entry(&engine)]);
        assert_eq!(
            fs::metadata(dir.join(entry(&engine))).unwrap().mode() & 0o7777,
            0o600
        );
    }

    #[test]
    fn a_directory_others_may_write_is_refused_with_a_warning_and_plugins_still_compile() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("shared");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o777);
        let (engine, logs) = engine_logging(CompileCache::Dir(dir.clone()));
        assert_eq!(engine.cache_dir(), None);
        assert!(logs.contains("WARN"), "{logs}");
        assert!(logs.contains(&format!("`{}`", dir.display())), "{logs}");
        assert!(
            logs.contains("refused: writable by its group or others (mode 0777)"),
            "{logs}"
        );
        assert!(!load(&engine));
        assert!(!load(&engine));
        assert!(names(&dir).is_empty(), "nothing written: {:?}", names(&dir));
    }

    #[test]
    fn a_symlinked_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        chmod(&real, 0o700);
        let link = tmp.path().join("link");
        symlink(&real, &link).unwrap();
        let (engine, logs) = engine_logging(CompileCache::Dir(link.clone()));
        assert_eq!(engine.cache_dir(), None);
        assert!(logs.contains(&format!("`{}`", link.display())), "{logs}");
        assert!(logs.contains("symbolic link"), "{logs}");
        assert!(!load(&engine));
        assert!(names(&real).is_empty());
    }

    /// Each planted entry holds a valid artifact, so `from_cache` would be true had it been
    /// deserialized; instead it is recompiled and replaced by a private regular file.
    #[test]
    fn planted_entries_are_recompiled_and_replaced_never_deserialized() {
        type Plant = fn(&Path, &Path);
        let plants: [(&str, Plant); 3] = [
            ("a symlink to a valid artifact", |entry, dir| {
                let elsewhere = dir.join("elsewhere");
                fs::rename(entry, &elsewhere).unwrap();
                symlink(&elsewhere, entry).unwrap();
            }),
            ("a hard link", |entry, dir| {
                fs::hard_link(entry, dir.join("other")).unwrap();
            }),
            ("group-writable", |entry, _| chmod(entry, 0o620)),
        ];
        for (what, plant) in plants {
            let tmp = tempfile::tempdir().unwrap();
            let dir: PathBuf = tmp.path().join("c");
            let engine = engine(CompileCache::Dir(dir.clone()));
            let path = dir.join(entry(&engine));
            assert!(!load(&engine), "{what}");
            assert!(load(&engine), "{what}");
            let original = fs::read(&path).unwrap();
            plant(&path, &dir);

            assert!(!load(&engine), "{what}: deserialized");
            let md = fs::symlink_metadata(&path).unwrap();
            assert!(md.file_type().is_file(), "{what}: not replaced");
            assert_eq!(md.nlink(), 1, "{what}");
            assert_eq!(md.mode() & 0o7777, 0o600, "{what}");
            assert_eq!(fs::read(&path).unwrap(), original, "{what}");
            assert!(load(&engine), "{what}: the replacement is used");
        }
    }

    #[test]
    fn an_entry_that_does_not_deserialize_is_recompiled_and_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let engine = engine(CompileCache::Dir(dir.clone()));
        let path = dir.join(entry(&engine));
        assert!(!load(&engine));
        let original = fs::read(&path).unwrap();
        fs::write(&path, b"not an artifact").unwrap();
        assert!(!load(&engine));
        assert_eq!(fs::read(&path).unwrap(), original);
        assert!(load(&engine));
    }

    #[test]
    fn the_cache_can_be_off() {
        let engine = engine(CompileCache::Off);
        assert_eq!(engine.cache_dir(), None);
        assert!(!load(&engine));
        assert!(!load(&engine));
    }

    /// A component importing one instance named `name`, whose type exports `next: func()` (as
    /// a plugin built against some contract imports its interfaces).
    fn importing(name: &str) -> Vec<u8> {
        let mut wasm = EMPTY.to_vec();
        // Type section: one instance type declaring `func()` and exporting it as `next` (an
        // instance with no exports would need nothing of the linker).
        #[rustfmt::skip]
        let instance = [
            0x42, 2,
            0x01, 0x40, 0, 0x01, 0,
            0x04, 0, 4, b'n', b'e', b'x', b't', 0x01, 0,
        ];
        wasm.extend_from_slice(&[7, instance.len() as u8 + 1, 1]);
        wasm.extend_from_slice(&instance);
        // Import section: one plain name, an instance of type 0.
        let mut import = vec![1, 0, name.len() as u8];
        import.extend_from_slice(name.as_bytes());
        import.extend_from_slice(&[5, 0]);
        wasm.extend_from_slice(&[10, import.len() as u8]);
        wasm.extend_from_slice(&import);
        wasm
    }

    /// A plugin built for 0.8.0 (before admission) links: wasmtime resolves its imports to
    /// 0.8.1's, and it runs without the admission export.
    #[test]
    fn a_plugin_built_for_the_previous_patch_is_not_called_another_contract() {
        assert!(speaks("0.8.0") && speaks("0.8.1"));
        assert!(!speaks("0.8.2") && !speaks("0.9.0") && !speaks("0.7.0") && !speaks("0.8.0-rc.1"));
    }

    /// Plugins built for 0.7.0 (before schedules and metrics) or for a later contract are refused at load,
    /// naming both versions; another package whose name merely starts like ours, or a misspelt
    /// interface, is refused as unlinkable, never taken for another version of the contract.
    #[test]
    fn a_plugin_built_for_another_contract_is_refused_naming_both_versions() {
        let engine = engine(CompileCache::Off);
        let refusal = |name: &str| {
            let path = PathBuf::from("plugins/old.wasm");
            match engine.load_bytes("old", &path, &importing(name)) {
                Ok(_) => panic!("{name}: loaded"),
                Err(e) => e.to_string(),
            }
        };
        for version in ["0.6.0", "0.7.0", "0.9.0", "0.8.2", "0.8.0-rc.1"] {
            let refused = refusal(&format!("informant:plugin/events@{version}"));
            assert!(
                refused.contains(&format!("built for `informant:plugin@{version}`"))
                    && refused.contains(&format!("this host speaks `{WIT_PACKAGE}`"))
                    && refused.contains("plugins/old.wasm"),
                "{refused}"
            );
        }
        for odd in [
            "informant:plugins/events@0.6.0",
            "informant:plugin-x/events@0.6.0",
            "informant:plugin/event@0.8.1",
        ] {
            let refused = refusal(odd);
            assert!(
                refused.contains("cannot be linked") && !refused.contains("built for"),
                "{odd}: {refused}"
            );
        }
    }
}

/// Maps a wasmtime error met while `what` to [`PluginError::Engine`], its chain kept.
fn engine_err(what: &'static str) -> impl FnOnce(wasmtime::Error) -> PluginError {
    move |e| PluginError::Engine {
        what,
        source: e.into(),
    }
}

/// Whether a component importing the contract at `version` links against this host: the same
/// version, or an earlier patch of the same 0.MINOR (wasmtime resolves those to ours).
fn speaks(version: &str) -> bool {
    let ours = WIT_PACKAGE.split_once('@').map_or("", |(_, v)| v);
    let minor = |v: &str| v.rsplit_once('.').map(|(m, _)| m.to_string());
    let patch = |v: &str| v.rsplit_once('.').and_then(|(_, p)| p.parse::<u32>().ok());
    version == ours
        || (minor(version) == minor(ours)
            && patch(version).zip(patch(ours)).is_some_and(|(p, o)| p <= o))
}
