//! Config secrets from the host's environment and files (`${env:..}`, `${file:..}`), with the
//! real loader and a real compiled plugin: the value reaches the plugin's `init`, never the
//! host's own log or `/plugins`; bad references are refused at load with file, field, reason.

use std::net::SocketAddr;
use std::path::Path;

use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::config;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::host_log::HostLog;
use informant_tests::http::get;
use informant_tests::plugins::PluginEnv;
use informant_tests::{configmap, guarded};

fn host_config() -> HostConfig {
    config::parse(
        "operator-plugins = true\n[tenants.a]\nnamespaces = [\"team-a\"]\n",
        Path::new("informant.toml"),
    )
    .expect("test config is valid")
}

fn echo(tag: &str) -> String {
    format!(
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
    )
}

/// Current-thread: the host log capture sees every task.
#[tokio::test]
async fn config_secrets_reach_init_and_nothing_else() {
    let (host_log, _capture) = HostLog::capture();
    guarded("config secrets", async {
        let env = PluginEnv::start(host_config()).await;
        // A mounted Kubernetes Secret: the file is reached through links.
        let secrets = tempfile::tempdir().unwrap();
        let value = format!("s3cr3t-{}", std::process::id());
        std::fs::create_dir(secrets.path().join("..data")).unwrap();
        std::fs::write(secrets.path().join("..data/slack"), format!("{value}\n")).unwrap();
        let file = secrets.path().join("slack");
        std::os::unix::fs::symlink("..data/slack", &file).unwrap();
        let file_ref = format!("${{file:{}}}", file.display());

        env.install(None, "from-file", "hostile", &echo(&file_ref));
        // Cargo sets this for the test process: an environment variable we can count on.
        env.install(None, "from-env", "hostile", &echo("${env:CARGO_PKG_NAME}"));
        env.install(None, "escaped", "hostile", &echo("$${env:CARGO_PKG_NAME}"));
        env.install(
            None,
            "unset",
            "hostile",
            &echo("${env:INFORMANT_E2E_SURELY_UNSET}"),
        );
        env.install(None, "relative", "hostile", &echo("${file:secrets/slack}"));
        env.install(None, "empty-name", "hostile", &echo("${env:}"));
        env.install(Some("a"), "tenant", "hostile", &echo(&file_ref));
        // The host's own state, however a reference reaches it, and files that are no files.
        let hostile = tempfile::tempdir().unwrap();
        let environ_link = hostile.path().join("environ");
        std::os::unix::fs::symlink("/proc/self/environ", &environ_link).unwrap();
        let fifo = hostile.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let refused_files = [
            (
                "proc-environ",
                "/proc/self/environ".to_string(),
                "a path under /proc is refused",
            ),
            (
                "proc-root",
                "/proc/self/root/etc/hostname".into(),
                "a path under /proc is refused",
            ),
            (
                "link-to-proc",
                environ_link.display().to_string(),
                "it leads through `/proc`",
            ),
            (
                "dev-null",
                "/dev/null".into(),
                "a path under /dev is refused",
            ),
            ("fifo", fifo.display().to_string(), "not a regular file"),
            (
                "directory",
                hostile.path().display().to_string(),
                "not a regular file",
            ),
            (
                "dotdot",
                "/etc/../proc/self/environ".into(),
                "must not contain `..`",
            ),
        ];
        for (name, path, _) in &refused_files {
            env.install(None, name, "hostile", &echo(&format!("${{file:{path}}}")));
        }
        let report = env.reconcile().await;
        let mut loaded: Vec<&str> = report.loaded.iter().map(|id| id.name.as_str()).collect();
        loaded.sort();
        assert_eq!(loaded, ["escaped", "from-env", "from-file"], "{report:?}");
        let errors: Vec<(String, String)> = report
            .errors
            .iter()
            .map(|(id, e)| (id.name.clone(), e.to_string()))
            .collect();
        assert_eq!(errors.len(), 4 + refused_files.len(), "{errors:?}");
        // What a leak of the host's environment would carry.
        let environ = std::fs::read("/proc/self/environ").unwrap();
        let host_values: Vec<String> = environ
            .split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('='))
            .map(|(_, v)| v.to_string())
            // Paths may be named in an error for what they are; other values never.
            .filter(|v| v.len() >= 8 && !v.starts_with('/'))
            .collect();
        for (name, path, reason) in &refused_files {
            let (_, text) = errors
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} not refused: {errors:?}"));
            for needle in [&format!("{name}.toml"), "field `config.tag`", path, reason] {
                assert!(text.contains(needle), "{name}: `{text}` lacks `{needle}`");
            }
            for v in &host_values {
                assert!(
                    !text.contains(v.as_str()),
                    "{name}'s error carries the host's environment"
                );
            }
        }
        for (name, needles) in [
            (
                "unset",
                &[
                    "unset.toml",
                    "field `config.tag`",
                    "`${env:INFORMANT_E2E_SURELY_UNSET}`: the environment variable is not set",
                ][..],
            ),
            (
                "relative",
                &["relative.toml", "field `config.tag`", "must be absolute"],
            ),
            (
                "empty-name",
                &[
                    "empty-name.toml",
                    "field `config.tag`",
                    "not an environment variable name",
                ],
            ),
            (
                "tenant",
                &[
                    "tenant.toml",
                    "field `config.tag`",
                    "tenant `a`'s plugins may not read the host's environment or files",
                ],
            ),
        ] {
            let (_, text) = errors
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} not refused: {errors:?}"));
            for n in needles {
                assert!(text.contains(n), "{name}: `{text}` lacks `{n}`");
            }
            assert!(!text.contains(&value), "{name}'s error carries the secret");
        }

        env.server.create(configmap("default", "c", "v")).unwrap();
        let tag_of = |plugin: &str| {
            env.logs
                .json_of(plugin)
                .iter()
                .find_map(|v| v["tag"].as_str().map(str::to_string))
        };
        env.logs
            .wait_until("the plugins' first events", || {
                ["from-file", "from-env", "escaped"]
                    .iter()
                    .all(|p| tag_of(p).is_some())
            })
            .await;
        assert_eq!(
            tag_of("from-file").unwrap(),
            value,
            "trailing newline trimmed"
        );
        assert_eq!(
            tag_of("from-env").unwrap(),
            std::env::var("CARGO_PKG_NAME").unwrap()
        );
        assert_eq!(tag_of("escaped").unwrap(), "${env:CARGO_PKG_NAME}");

        let state = AdminState::new(env.factory.clone(), Some(env.host.clone()));
        let admin = AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state)
            .await
            .expect("admin server starts");
        let (status, _, plugins) = get(admin.addr(), "/plugins").await;
        assert_eq!(status, 200);
        assert!(plugins.contains("from-file"), "{plugins}");
        assert!(!plugins.contains(&value), "/plugins carries the secret");
        admin.shutdown().await;
    })
    .await;
    // The host's own lines: the plugins' lines (JSON they chose to log, the secret included
    // here, since the test plugin echoes it) are theirs.
    let host_lines: Vec<_> = host_log
        .lines("")
        .into_iter()
        .filter(|l| !l.message.starts_with('{'))
        .collect();
    assert!(
        host_lines
            .iter()
            .any(|l| l.message.starts_with("plugin loaded")),
        "the capture saw the host's lines"
    );
    let value = format!("s3cr3t-{}", std::process::id());
    for l in &host_lines {
        assert!(
            !l.message.contains(&value) && !l.fields.values().any(|f| f.contains(&value)),
            "the host logged the secret: {l:?}"
        );
    }
}
