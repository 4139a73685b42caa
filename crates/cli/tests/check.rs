//! `informant check` as a user runs it: the real binary on a real compiled plugin, exit status
//! and messages.

use std::path::Path;
use std::process::{Command, Output};

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_informant"))
        .arg("check")
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("run informant")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn check_accepts_a_fitting_plugin_and_lists_every_problem_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("snoop.wasm");
    std::fs::copy(informant_tests::plugins::wasm("hostile"), &wasm).unwrap();
    let wasm = wasm.display().to_string();
    let config = write(
        dir.path(),
        "informant.toml",
        "[tenants.a]\nnamespaces = [\"team-a\"]\nmax-memory-mib = 32\n",
    );
    write(
        dir.path(),
        "snoop.toml",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\n",
    );

    let ok = check(&[&wasm, "--config", &config, "--tenant", "a"]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        stdout.contains("admitted for tenant `a` with 32 MiB"),
        "{stdout}"
    );

    let greedy = write(
        dir.path(),
        "greedy.toml",
        "[limits]\nmemory-mib = 64\n[[watch]]\napi-version = \"v1\"\nkind = \"Node\"\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"team-b\"\n",
    );
    let bad = check(&[
        &wasm,
        "--manifest",
        &greedy,
        "--config",
        &config,
        "--tenant",
        "a",
    ]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    for needle in [
        "greedy.toml`: field `watch[0]`: `v1/Node` is cluster-scoped",
        "field `watch[1]`: namespace `team-b` is outside",
        "field `limits.memory-mib`: 64 MiB is above tenant `a`'s ceiling of 32 MiB",
        "3 problem(s)",
    ] {
        assert!(stderr.contains(needle), "lacks `{needle}`:\n{stderr}");
    }

    let garbage = write(dir.path(), "garbage.wasm", "not wasm");
    write(
        dir.path(),
        "garbage.toml",
        "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
    );
    let bad = check(&[&garbage, "--config", &config, "--tenant", "nobody"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        stderr.contains("garbage.wasm`: not a valid WebAssembly component"),
        "{stderr}"
    );
    assert!(stderr.contains("tenant `nobody` has no grant"), "{stderr}");

    let missing = check(&[&dir.path().join("none.wasm").display().to_string()]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("none.toml"));
}

/// Hostile `[[schedule]]` tables through the real binary: each refused, naming the manifest
/// file, the field and the reason; a good one is accepted.
#[test]
fn check_refuses_hostile_schedules_naming_file_field_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("tick.wasm");
    std::fs::copy(informant_tests::plugins::wasm("hostile"), &wasm).unwrap();
    let wasm = wasm.display().to_string();
    let watch =
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\n";
    let run = |tables: &str| {
        let manifest = write(dir.path(), "tick.toml", &format!("{tables}{watch}"));
        (check(&[&wasm, "--manifest", &manifest]), manifest)
    };
    let (ok, _) = run(
        "[[schedule]]\nname = \"a\"\ncron = \"*/10 * * * * *\"\n[[schedule]]\nname = \"b\"\nevery = \"1h30m\"\n",
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let table = |name: &str, timing: &str| format!("[[schedule]]\nname = \"{name}\"\n{timing}\n");
    for (tables, field, reason) in [
        (table("a", "cron = \"\""), "schedule[0].cron", "it is empty"),
        (
            table("a", "cron = \"* * * * * * *\""),
            "schedule[0].cron",
            "7 fields",
        ),
        (
            table("a", "cron = \"61 * * * *\""),
            "schedule[0].cron",
            "the minute field `61`",
        ),
        (
            table("a", "cron = \"\u{0663} * * * *\""),
            "schedule[0].cron",
            "U+0663",
        ),
        (
            table("a", "cron = \"*/99999999999 * * * *\""),
            "schedule[0].cron",
            "invalid step",
        ),
        (
            table("a", "cron = \"* * * * * \""),
            "schedule[0].cron",
            "whitespace",
        ),
        (
            table("a", "every = \"0s\""),
            "schedule[0].every",
            "shorter than the shortest period",
        ),
        (
            table("a", "every = \"-1s\""),
            "schedule[0].every",
            "where a number was expected",
        ),
        (
            table("a", "every = \"1ns\""),
            "schedule[0].every",
            "unknown unit `ns`",
        ),
        (
            table("a", "every = \"1s\"\ncron = \"* * * * *\""),
            "schedule[0].every",
            "not both",
        ),
        (table("a", ""), "schedule[0].cron", "needs `cron`"),
        (
            format!(
                "{}{}",
                table("a", "every = \"1s\""),
                table("a", "every = \"2s\"")
            ),
            "schedule[1].name",
            "already declared",
        ),
        (
            table("Not_A_Label", "every = \"1s\""),
            "schedule[0].name",
            "not a schedule name",
        ),
    ] {
        let (out, manifest) = run(&tables);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{tables}: accepted");
        let (file, field) = (format!("{manifest}`"), format!("field `{field}`"));
        for needle in [file.as_str(), field.as_str(), reason] {
            assert!(
                stderr.contains(needle),
                "{tables}: lacks `{needle}`:\n{stderr}"
            );
        }
    }
}

#[test]
fn check_refuses_a_namespace_selector_that_cannot_select_naming_file_field_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("sel.wasm");
    std::fs::copy(informant_tests::plugins::wasm("hostile"), &wasm).unwrap();
    let wasm = wasm.display().to_string();
    let watch = |kind: &str, selector: &str| {
        format!(
            "[[watch]]\napi-version = \"v1\"\nkind = \"{kind}\"\nnamespace-selector = '{selector}'\n"
        )
    };
    let good = write(
        dir.path(),
        "good.toml",
        &watch("ConfigMap", "team=a,env!=prod"),
    );
    let ok = check(&[&wasm, "--manifest", &good]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (name, manifest, needles) in [
        (
            "syntax.toml",
            watch("ConfigMap", "team in (a"),
            &[
                "syntax.toml",
                "line 4",
                "namespace-selector",
                "invalid label selector `team in (a`",
            ][..],
        ),
        (
            "operator.toml",
            watch("ConfigMap", "team=a,,b"),
            &[
                "operator.toml",
                "namespace-selector",
                "invalid label selector",
            ],
        ),
        (
            "both.toml",
            format!("{}namespace = \"a\"\n", watch("ConfigMap", "team=a")),
            &[
                "both.toml",
                "field `watch[0].namespace-selector`",
                "not both",
            ],
        ),
        (
            "cluster.toml",
            watch("Node", "team=a"),
            &[
                "cluster.toml",
                "field `watch[0].namespace-selector`",
                "`Node` is cluster-scoped",
            ],
        ),
    ] {
        let path = write(dir.path(), name, &manifest);
        let out = check(&[&wasm, "--manifest", &path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}");
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{name} lacks `{needle}`:\n{stderr}"
            );
        }
    }
}

#[test]
fn check_refuses_a_manifest_of_thousands_of_schedules_naming_the_file_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("ticker.wasm");
    std::fs::copy(informant_tests::plugins::wasm("hostile"), &wasm).unwrap();
    let schedules: String = (0..5000)
        .map(|i| format!("[[schedule]]\nname = \"s{i}\"\nevery = \"1s\"\n"))
        .collect();
    let manifest = write(
        dir.path(),
        "ticker.toml",
        &format!(
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n{schedules}[config]\nmode = \"echo\"\n"
        ),
    );
    let out = check(&[&wasm.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("manifest `{manifest}`"))
            && stderr.contains("field `schedule`: 5000 [[schedule]] tables; a manifest may have at most 16 (`limits.max-schedules` in informant.toml)"),
        "{stderr}"
    );
}
