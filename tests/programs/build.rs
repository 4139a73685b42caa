//! Builds the plugin packages for `wasm32-wasip2` and writes their component paths to
//! `$OUT_DIR/programs.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// The plugin packages, and the directories each build reads (relative to the workspace root).
const PACKAGES: &[(&str, &str)] = &[
    ("kubediff", "plugins/kubediff"),
    ("orphans", "plugins/orphans"),
    ("label-policy", "plugins/label-policy"),
    ("hostile", "tests/plugins/hostile"),
    ("bench-plugin", "tests/plugins/bench"),
    ("admit", "tests/plugins/admit"),
];

/// What every plugin builds from besides its own directory.
const SHARED: &[&str] = &[
    "guest-sdk",
    "crates/header",
    "crates/manifest",
    "wit",
    "Cargo.toml",
    "Cargo.lock",
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    for path in SHARED
        .iter()
        .copied()
        .chain(PACKAGES.iter().map(|(_, dir)| *dir))
    {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }

    ensure_target();
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    let target_dir = target_root(&root).join("wasm-plugins");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir)
        // The flags cargo hands this script are for the host build, not the guests.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        // Under `cargo clippy` this names clippy-driver: the guests get built, not linted.
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    for (package, _) in PACKAGES {
        cmd.args(["-p", package]);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the test plugins: {e}"));
    assert!(
        status.success(),
        "building the test plugins for {TARGET} failed ({status}); cargo's errors are above"
    );

    let release = target_dir.join(TARGET).join("release");
    let mut code = String::from(
        "/// Each plugin package and the path of its component.\n\
         pub const COMPONENTS: &[(&str, &str)] = &[\n",
    );
    for (package, _) in PACKAGES {
        let wasm = release.join(format!("{}.wasm", package.replace('-', "_")));
        assert!(wasm.is_file(), "{} was not built", wasm.display());
        code.push_str(&format!(
            "    ({package:?}, {:?}),\n",
            wasm.display().to_string()
        ));
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("programs.rs"), code).unwrap();
}

/// The workspace's target directory: `CARGO_TARGET_DIR`, else `target/` (where the tests look
/// for their other build products too).
fn target_root(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => root.join("target"),
    }
}

/// Adds the wasm target with rustup when the toolchain lacks it (as the dev loop does), or fails
/// the build saying what to run.
fn ensure_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = |root: &Path| root.join("lib/rustlib").join(TARGET).is_dir();
    if sysroot.as_deref().is_some_and(installed) {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        added,
        "the test plugins need the {TARGET} target and `rustup target add {TARGET}` failed: \
         run it (with rustup) and build again"
    );
}
