//! `[[schedule]]` tables through the whole startup path (`Replica`, as `informant run` starts
//! it), with the hostile plugin's `on-schedule` modes: an `every = "1s"` schedule ticks once a
//! second and reads the live cache; a tick slower than its period is skipped, not stacked, and
//! counted; a schedule that spins or traps holds up no other plugin's events.

use std::path::Path;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Replica, RuntimeOptions};
use informant_tests::http::{free_addr, get_until};
use informant_tests::plugins::{Logs, never_quarantined, wasm};
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::Value;
use tokio::sync::broadcast;

fn config() -> HostConfig {
    let text = r#"
[tenants.team-a]
namespaces = ["team-a"]
[tenants.team-b]
namespaces = ["team-b"]
[tenants.team-c]
namespaces = ["team-c"]
"#;
    let mut config =
        informant_runtime::config::parse(text, Path::new("informant.toml")).expect("config");
    config.restart = never_quarantined();
    config
}

/// The hostile plugin watching ConfigMaps in `namespace`, echoing its events, with one
/// schedule `tick` (`timing`: `every = ".."` or `cron = ".."`) doing `on_schedule`.
fn manifest(namespace: &str, deadline_ms: u64, schedule: Option<(&str, &str)>) -> String {
    let mut m = format!(
        "[limits]\ndeadline-ms = {deadline_ms}\nmemory-mib = 16\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{namespace}\"\n"
    );
    if let Some((timing, _)) = schedule {
        m.push_str(&format!("[[schedule]]\nname = \"tick\"\n{timing}\n"));
    }
    m.push_str(&format!(
        "[config]\nmode = \"echo\"\ntag = \"{namespace}\"\n"
    ));
    if let Some((_, on_schedule)) = schedule {
        m.push_str(on_schedule);
    }
    m
}

fn install(dir: &Path, tenant: &str, name: &str, manifest: &str) {
    let dir = dir.join(tenant);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    std::fs::copy(wasm("hostile"), dir.join(format!("{name}.wasm"))).unwrap();
}

async fn server() -> DevServer {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a", "team-b", "team-c"]);
    server
}

async fn start(dir: &Path, server: &DevServer) -> (Replica, Logs, std::net::SocketAddr) {
    let logs = broadcast::channel(1 << 16).0;
    let recorded = Logs::record(logs.subscribe());
    let addr = free_addr();
    let replica = Replica::start(
        server.client(),
        RuntimeOptions {
            plugins: Some(dir.to_path_buf()),
            admin: Some(addr),
            config: config(),
            plugin_logs: Some(logs),
            ..Default::default()
        },
        None,
    )
    .expect("replica");
    assert!(guarded("the replica to run", replica.wait_running()).await);
    (replica, recorded, addr)
}

/// The schedule lines `plugin` logged.
fn ticks(logs: &Logs, plugin: &str) -> Vec<Value> {
    logs.json_of(plugin)
        .into_iter()
        .filter(|l| l["schedule"] == "tick")
        .collect()
}

/// `informant_plugin_schedule_ticks_total` of `plugin`'s schedule `tick` for `outcome`.
fn ticked(metrics: &str, plugin: &str, tenant: &str, outcome: &str) -> u64 {
    let series = format!(
        "informant_plugin_schedule_ticks_total{{plugin=\"{plugin}\",tenant=\"{tenant}\",schedule=\"tick\",outcome=\"{outcome}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().expect("a counter"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_second_schedule_ticks_three_times_in_three_seconds_reading_the_cache() {
    let server = server().await;
    for i in 0..3 {
        server
            .create(configmap("team-a", &format!("c{i}"), "v"))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    install(
        dir.path(),
        "team-a",
        "ticker",
        &manifest(
            "team-a",
            500,
            Some(("every = \"1s\"", "on-schedule = \"count\"\n")),
        ),
    );
    let (replica, logs, addr) = start(dir.path(), &server).await;

    logs.wait_until("three ticks", || ticks(&logs, "ticker").len() >= 3)
        .await;
    let seen = ticks(&logs, "ticker");
    let at: Vec<u64> = seen[..3]
        .iter()
        .map(|t| t["at_ms"].as_u64().unwrap())
        .collect();
    // One a second, by the plugin's own clock: three ticks span two periods.
    for gap in [at[1] - at[0], at[2] - at[1]] {
        assert!((800..=1400).contains(&gap), "ticks {at:?}");
    }
    // The caches settle before the first tick: every one of them saw all three ConfigMaps.
    for t in &seen[..3] {
        assert_eq!(t["configmaps"], 3, "{t}");
    }
    // And the cache is live: a ConfigMap created now is in a later tick's count.
    server.create(configmap("team-a", "c3", "v")).unwrap();
    logs.wait_until("a tick to count the new ConfigMap", || {
        ticks(&logs, "ticker").iter().any(|t| t["configmaps"] == 4)
    })
    .await;
    let metrics = get_until(addr, "/metrics", "the ticks counted", |_, b| {
        ticked(b, "ticker", "team-a", "ok") >= 4
    })
    .await;
    assert_eq!(
        (
            ticked(&metrics, "ticker", "team-a", "error"),
            ticked(&metrics, "ticker", "team-a", "skipped")
        ),
        (0, 0),
        "{metrics}"
    );
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    // Nothing after the version is gone: no tick starts once it is unregistered.
    let after = ticks(&logs, "ticker").len();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(ticks(&logs, "ticker").len(), after, "a tick after shutdown");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_slower_than_its_period_is_skipped_not_stacked_and_counted() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    // Each tick takes 2.5 s of a 1 s period, within its 4 s deadline.
    install(
        dir.path(),
        "team-a",
        "slow",
        &manifest(
            "team-a",
            4000,
            Some((
                "every = \"1s\"",
                "on-schedule = \"slow\"\nschedule-ms = 2500\n",
            )),
        ),
    );
    let (replica, logs, addr) = start(dir.path(), &server).await;
    let metrics = get_until(
        addr,
        "/metrics",
        "two slow ticks done and skips counted",
        |_, b| {
            ticked(b, "slow", "team-a", "ok") >= 2 && ticked(b, "slow", "team-a", "skipped") >= 2
        },
    )
    .await;
    assert_eq!(ticked(&metrics, "slow", "team-a", "error"), 0, "{metrics}");
    // Never two at once: each start is followed by its end before the next start.
    let phases: Vec<String> = ticks(&logs, "slow")
        .iter()
        .map(|t| t["phase"].as_str().unwrap().to_string())
        .collect();
    for (i, phase) in phases.iter().enumerate() {
        let expected = if i % 2 == 0 { "start" } else { "end" };
        assert_eq!(phase, expected, "ticks overlapped: {phases:?}");
    }
    // The plugin's events still pass between its ticks.
    server.create(configmap("team-a", "late", "v")).unwrap();
    logs.wait_until("the event between ticks", || {
        logs.keys_of("slow", "team-a").contains("team-a/late")
    })
    .await;
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_that_spins_or_traps_holds_up_no_other_plugins_events() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    install(
        dir.path(),
        "team-a",
        "spinner",
        &manifest(
            "team-a",
            500,
            Some(("cron = \"* * * * * *\"", "on-schedule = \"spin\"\n")),
        ),
    );
    install(
        dir.path(),
        "team-c",
        "trapper",
        &manifest(
            "team-c",
            500,
            Some(("every = \"1s\"", "on-schedule = \"trap\"\n")),
        ),
    );
    install(dir.path(), "team-b", "echo", &manifest("team-b", 500, None));
    let (replica, logs, addr) = start(dir.path(), &server).await;
    get_until(
        addr,
        "/metrics",
        "both hostile schedules failing",
        |_, b| {
            ticked(b, "spinner", "team-a", "error") >= 1
                && ticked(b, "trapper", "team-c", "error") >= 1
        },
    )
    .await;

    // Spread over ~3 s, so that many of them arrive while the spinner spins (half of each
    // second, up to its deadline).
    const N: usize = 30;
    let mut pace = tokio::time::interval(std::time::Duration::from_millis(100));
    for i in 0..N {
        pace.tick().await;
        server
            .create(configmap("team-b", &format!("b{i}"), "v"))
            .unwrap();
    }
    logs.wait_until("the echo plugin to see every event", || {
        logs.keys_of("echo", "team-b").len() >= N
    })
    .await;
    let metrics = get_until(addr, "/metrics", "the hostile ticks counted", |_, b| {
        ticked(b, "spinner", "team-a", "error") >= 3 && ticked(b, "trapper", "team-c", "error") >= 3
    })
    .await;
    // No event of the echo plugin waited for a hostile tick: the slowest waited well under the
    // spinner's 500 ms deadline.
    let (within, all) = dispatch_under(&metrics, "echo", "team-b", 0.25);
    assert_eq!(
        within, all,
        "echo events that waited over 250 ms:\n{metrics}"
    );
    assert!(all >= N as u64, "{metrics}");
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}

/// (events whose dispatch delay was at most the largest bucket bound ≤ `seconds`, all events)
/// of `plugin`'s `informant_plugin_dispatch_delay_seconds`.
fn dispatch_under(metrics: &str, plugin: &str, tenant: &str, seconds: f64) -> (u64, u64) {
    let labels = format!("plugin=\"{plugin}\",tenant=\"{tenant}\"");
    // `le` comes first: `..._bucket{le="0.25",plugin="p",tenant="t"} 3`.
    let bucket = "informant_plugin_dispatch_delay_seconds_bucket{le=\"";
    let of_plugin = format!("\",{labels}}} ");
    let mut within = (0.0, 0);
    for line in metrics.lines() {
        let Some((le, count)) = line
            .strip_prefix(bucket)
            .and_then(|rest| rest.split_once(&of_plugin))
        else {
            continue;
        };
        let le: f64 = le.parse().unwrap_or(f64::INFINITY);
        let count: u64 = count.trim().parse().expect("a bucket count");
        if le <= seconds && le >= within.0 {
            within = (le, count);
        }
    }
    let count = format!("informant_plugin_dispatch_delay_seconds_count{{{labels}}} ");
    let all = metrics
        .lines()
        .find_map(|l| l.strip_prefix(&count))
        .map_or(0, |v| v.trim().parse().expect("a count"));
    (within.1, all)
}

/// `n` every-second schedules, `s0` to `s{n-1}`.
fn schedules(n: usize) -> String {
    (0..n)
        .map(|i| format!("[[schedule]]\nname = \"s{i}\"\nevery = \"1s\"\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_schedules_in_a_manifest_or_a_tenant_are_refused_naming_the_limit() {
    guarded("schedule caps", async {
        let text = "[limits]\ntenant-max-schedules = 20\n[tenants.team-a]\nnamespaces = [\"team-a\"]\n[tenants.team-b]\nnamespaces = [\"team-b\"]\nmax-schedules = 3\n";
        let env = informant_tests::plugins::PluginEnv::start(
            informant_runtime::config::parse(text, Path::new("informant.toml")).unwrap(),
        )
        .await;
        let watch = "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n";
        let echo = "[config]\nmode = \"echo\"\n";
        // One manifest of 5,000 every-second schedules: refused whole, before any timer.
        env.install(
            Some("team-a"),
            "flood",
            "hostile",
            &format!("{watch}{}{echo}", schedules(5000)),
        );
        // Within the manifest limit (16) each, past team-b's 3 together.
        env.install(
            Some("team-b"),
            "first",
            "hostile",
            &format!("{watch}{}{echo}", schedules(2)),
        );
        env.install(
            Some("team-b"),
            "second",
            "hostile",
            &format!("{watch}{}{echo}", schedules(2)),
        );
        let report = env.reconcile().await;
        let errors: Vec<String> = report.errors.iter().map(|(_, e)| e.to_string()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        let flood = errors.iter().find(|e| e.contains("flood")).expect("flood refused");
        assert!(
            flood.contains("team-a/flood.toml")
                && flood.contains("field `schedule`: 5000 [[schedule]] tables; a manifest may have at most 16 (`limits.max-schedules` in informant.toml)"),
            "{flood}"
        );
        let second = errors.iter().find(|e| e.contains("second")).expect("second refused");
        assert!(
            second.contains(
                "tenant `team-b`'s plugins would declare 4 [[schedule]] tables together; at most 3 (`max-schedules` in informant.toml)"
            ),
            "{second}"
        );
        assert!(report.loaded.iter().any(|id| id.name == "first"), "{:?}", report.loaded);
        assert!(!report.loaded.iter().any(|id| id.name == "flood" || id.name == "second"));
        env.host.shutdown().await;
    })
    .await;
}
