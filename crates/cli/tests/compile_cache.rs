//! The compile cache flags as a user runs them: `informant replay` on a real plugin, with the
//! default cache location pointed into a temp dir through `XDG_CACHE_HOME`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Output;

/// Replays an empty recording into kubediff (which loads it) with `args` added.
fn replay(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let events = home.join("empty.jsonl");
    std::fs::write(&events, "").unwrap();
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/kubediff/kubediff.toml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_informant"))
        .arg("replay")
        .arg("--plugin")
        .arg(informant_tests::plugins::wasm("kubediff"))
        .arg("--manifest")
        .arg(manifest)
        .arg("--events")
        .arg(&events)
        .args(args)
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("HOME", home.join("home"))
        .env("RUST_LOG", "warn")
        .env_remove("INFORMANT_CACHE_DIR")
        .env_remove("INFORMANT_NO_COMPILE_CACHE")
        .envs(env.iter().copied())
        .output()
        .expect("run informant");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn the_cache_defaults_to_xdg_can_be_moved_or_turned_off_and_refuses_a_shared_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let xdg = home.join("xdg");

    replay(home, &["--no-compile-cache"], &[]);
    replay(home, &[], &[("INFORMANT_NO_COMPILE_CACHE", "1")]);
    assert!(
        !xdg.exists(),
        "the cache was off, yet {} exists",
        xdg.display()
    );

    replay(home, &[], &[]);
    let components = xdg.join("informant/components");
    assert_eq!(mode(&xdg.join("informant")), 0o700);
    assert_eq!(mode(&components), 0o700);
    let entries: Vec<_> = std::fs::read_dir(&components).unwrap().collect();
    assert_eq!(entries.len(), 1, "{entries:?}");

    let shared = home.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let shared_arg = shared.display().to_string();
    for out in [
        replay(home, &["--cache-dir", &shared_arg], &[]),
        replay(home, &[], &[("INFORMANT_CACHE_DIR", &shared_arg)]),
    ] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "`{shared_arg}`: refused: writable by its group or others (mode 0777)"
            )),
            "{stderr}"
        );
        assert!(
            stderr.contains("running without the compile cache"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
}
