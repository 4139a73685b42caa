//! Plugins the host pulls from an OCI registry itself (`[[tenants.NAME.sources]]`): a real
//! registry on loopback (TLS with its own CA, basic auth), the embedded API server, the real
//! host. The pulled plugin loads under its tenant's grant, follows its tag, and keeps running
//! when what the tag moves to cannot be used.

use std::collections::BTreeMap;
use std::path::Path;

use informant_devserver::{DevServer, DevServerConfig};
use informant_oci::credentials::Credentials;
use informant_oci::{Options, Reference, Registry};
use informant_runtime::admin::client::AdminClient;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_tests::http::{free_addr, get_until};
use informant_tests::plugins::wasm;
use informant_tests::registry::{LocalRegistry, PASSWORD, USER};
use informant_tests::{create_namespaces, guarded};
use serde_json::Value;
use sha2::{Digest, Sha256};

const MANIFEST: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"team-a\"\n[config]\nmode = \"echo\"\n";

/// The second version's (the `admit` test plugin) manifest.
const MANIFEST2: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"team-a\"\n[config]\nmode = \"noop\"\n";

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `/plugins` entry of `tenant/name`, if listed.
fn entry(body: &str, tenant: &str, name: &str) -> Option<Value> {
    let all: Value = serde_json::from_str(body).ok()?;
    all["plugins"]
        .as_array()?
        .iter()
        .find(|p| p["tenant"] == tenant && p["name"] == name)
        .cloned()
}

/// The host on `server` with `plugins` and `pulled` as its directories, `config` in force and
/// its admin server on `admin`.
async fn start_host(
    server: &DevServer,
    (plugins, pulled): (&Path, &Path),
    config: HostConfig,
    admin: std::net::SocketAddr,
) -> Runtime {
    guarded(
        "the runtime to start",
        Runtime::start(
            server.client(),
            RuntimeOptions {
                plugins: Some(plugins.to_path_buf()),
                pulled_dir: Some(pulled.to_path_buf()),
                config,
                admin: Some(admin),
                ..Default::default()
            },
        ),
    )
    .await
    .expect("runtime")
}

/// A login file for `registry` and a client using it (and its CA).
fn logged_in(registry: &LocalRegistry) -> (std::path::PathBuf, Registry) {
    let login = registry.docker_config(USER, PASSWORD);
    let client = Registry::new(Options {
        credentials: Credentials::from_file(&login).unwrap(),
        ca_file: Some(registry.ca_file.clone()),
        ..Options::default()
    })
    .unwrap();
    (login, client)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pulled_plugin_runs_under_its_tenants_grant_follows_its_tag_and_survives_a_bad_push() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    informant_tests::init_tracing();
    let (login, client) = logged_in(&registry);
    let tag = format!("{}/team-a/snoop:stable", registry.addr);
    let reference: Reference = tag.parse().unwrap();
    let v1 = std::fs::read(wasm("hostile")).unwrap();
    let pushed1 = client
        .push(&reference, "snoop", v1.clone(), MANIFEST)
        .await
        .unwrap();
    // Another tenant's source whose manifest reaches into team-a: admitted as any file would be,
    // so refused.
    let greedy = format!("{}/team-b/greedy:1", registry.addr);
    client
        .push(&greedy.parse().unwrap(), "greedy", v1.clone(), MANIFEST)
        .await
        .unwrap();

    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a", "team-b"]);
    let plugins = tempfile::tempdir().unwrap();
    let pulled = tempfile::tempdir().unwrap();
    let config = format!(
        "[tenants.team-a]\nnamespaces = [\"team-a\"]\n\
         registries = [\"{addr}/team-a\"]\nregistry-configs = [\"{login}\"]\n\
         [[tenants.team-a.sources]]\nreference = \"{tag}\"\npoll-seconds = 1\n\
         registry-config = \"{login}\"\nregistry-ca = \"{ca}\"\n\
         [tenants.team-b]\nnamespaces = [\"team-b\"]\n\
         registries = [\"{addr}/team-b\"]\nregistry-configs = [\"{login}\"]\n\
         [[tenants.team-b.sources]]\nreference = \"{greedy}\"\n\
         registry-config = \"{login}\"\nregistry-ca = \"{ca}\"\n",
        addr = registry.addr,
        login = login.display(),
        ca = registry.ca_file.display(),
    );
    let host_config: HostConfig =
        informant_runtime::config::parse(&config, Path::new("informant.toml")).expect("config");
    let dirs = (plugins.path(), pulled.path());
    let start = |admin| start_host(&server, dirs, host_config.clone(), admin);
    let admin = free_addr();
    let runtime = start(admin).await;

    let running = |pinned: String, wasm: Vec<u8>| {
        move |s: u16, body: &str| {
            s == 200
                && entry(body, "team-a", "snoop").is_some_and(|p| {
                    p["state"] == "running"
                        && p["version"] == hex(&wasm)
                        && p["source"]["pinned"] == pinned.as_str()
                        && p["source"]["error"].is_null()
                })
        }
    };
    get_until(
        admin,
        "/plugins",
        "v1 pulled and running",
        running(pushed1.pinned.clone(), v1.clone()),
    )
    .await;
    assert!(pulled.path().join("team-a/snoop.wasm").is_file());
    assert_eq!(
        std::fs::read_dir(plugins.path()).unwrap().count(),
        0,
        "nothing is written into the plugins directory"
    );
    let body = get_until(admin, "/plugins", "team-b's source refused", |s, body| {
        s == 200
            && entry(body, "team-b", "greedy")
                .is_some_and(|p| p["refused"].as_str().is_some_and(|r| r.contains("team-a")))
    })
    .await;
    let greedy_entry = entry(&body, "team-b", "greedy").unwrap();
    assert_ne!(greedy_entry["state"], "running", "{greedy_entry}");

    // The tag moves: the new version is pulled and swapped in.
    let v2 = std::fs::read(wasm("admit")).unwrap();
    let pushed2 = client
        .push(&reference, "snoop", v2.clone(), MANIFEST2)
        .await
        .unwrap();
    assert_ne!(pushed1.digest, pushed2.digest);
    get_until(
        admin,
        "/plugins",
        "v2 swapped in",
        running(pushed2.pinned.clone(), v2.clone()),
    )
    .await;

    // The tag moves to something that is not a plugin this host can load: v2 keeps running and
    // the source says why.
    client
        .push(
            &reference,
            "snoop",
            v2.clone(),
            "[[watch]]\napi-version = 3\n",
        )
        .await
        .unwrap();
    let body = get_until(admin, "/plugins", "the bad push reported", |s, body| {
        s == 200
            && entry(body, "team-a", "snoop").is_some_and(|p| {
                p["source"]["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("its manifest"))
            })
    })
    .await;
    let snoop = entry(&body, "team-a", "snoop").unwrap();
    assert_eq!(snoop["state"], "running", "{snoop}");
    assert_eq!(snoop["version"], hex(&v2), "{snoop}");
    assert_eq!(
        snoop["source"]["pinned"],
        pushed2.pinned.as_str(),
        "{snoop}"
    );
    runtime.stop().await;

    // Restarted on the kept pulled directory with the registry gone: what was pulled last runs
    // at once, and the source says it cannot reach the registry.
    drop(registry);
    let admin = free_addr();
    let runtime = start(admin).await;
    let body = get_until(
        admin,
        "/plugins",
        "v2 running from the kept directory",
        |s, body| {
            s == 200
                && entry(body, "team-a", "snoop").is_some_and(|p| {
                    p["state"] == "running"
                        && p["version"] == hex(&v2)
                        && p["source"]["error"].is_string()
                })
        },
    )
    .await;
    let snoop = entry(&body, "team-a", "snoop").unwrap();
    assert_eq!(
        snoop["source"]["pinned"],
        pushed2.pinned.as_str(),
        "{snoop}"
    );
    runtime.stop().await;
    server.shutdown().await;
}

#[test]
fn sources_that_could_not_be_pulled_safely_are_refused_naming_the_key() {
    let parse = |text: &str| {
        informant_runtime::config::parse(text, Path::new("/etc/informant.toml"))
            .map(|c| c.sources)
            .map_err(|e| e.to_string())
    };
    let tenant = "[tenants.a]\nnamespaces = [\"a\"]\nregistries = [\"r.example\"]\n";
    for (table, needle) in [
        (
            "reference = \"UPPER/Case:1\"\n",
            "key `tenants.a.sources[0].reference`",
        ),
        (
            "reference = \"r.example/x:1\"\nname = \"../evil\"\n",
            "key `tenants.a.sources[0].name`: \"../evil\"",
        ),
        (
            "reference = \"r.example/x:1\"\nname = \"ѕnoop\"\n",
            "key `tenants.a.sources[0].name`",
        ),
        (
            "reference = \"r.example/x:1\"\ninsecure = true\n",
            "insecure",
        ),
    ] {
        let err = parse(&format!("{tenant}[[tenants.a.sources]]\n{table}")).unwrap_err();
        assert!(err.contains(needle), "{table:?}: {err}");
    }
    // A source outside the tenant's grant: another registry, another tenant's repositories, a
    // login file it was not given, however spelled; and a tenant granted no registry at all.
    let granted = "[tenants.a]\nnamespaces = [\"a\"]\nregistries = [\"r.example/team-a\"]\n\
                   registry-configs = [\"/etc/informant-registry/team-a/.dockerconfigjson\"]\n";
    for (table, needle) in [
        (
            "reference = \"r.example/team-b/x:1\"\n",
            "key `tenants.a.sources[0].reference`: `r.example/team-b/x` is outside the tenant's `registries`",
        ),
        (
            "reference = \"r.example/team-a-evil/x:1\"\n",
            "is outside the tenant's `registries`",
        ),
        (
            "reference = \"q.example/team-a/x:1\"\n",
            "is outside the tenant's `registries`",
        ),
        (
            "reference = \"r.example/team-a/x:1\"\nregistry-config = \"/etc/informant-registry/team-b/.dockerconfigjson\"\n",
            "key `tenants.a.sources[0].registry-config`: `/etc/informant-registry/team-b/.dockerconfigjson` is not one of the tenant's `registry-configs`",
        ),
        (
            "reference = \"r.example/team-a/x:1\"\nregistry-config = \"/etc/informant-registry/team-a/../team-b/.dockerconfigjson\"\n",
            "is not one of the tenant's `registry-configs`",
        ),
    ] {
        let err = parse(&format!("{granted}[[tenants.a.sources]]\n{table}")).unwrap_err();
        assert!(err.contains(needle), "{table:?}: {err}");
    }
    let err = parse(
        "[tenants.a]\nnamespaces = [\"a\"]\n[[tenants.a.sources]]\nreference = \"r.example/x:1\"\n",
    )
    .unwrap_err();
    assert!(
        err.contains("is outside the tenant's `registries`"),
        "{err}"
    );

    let err = parse(&format!(
        "{tenant}[[tenants.a.sources]]\nreference = \"r.example/one/x:1\"\n\
         [[tenants.a.sources]]\nreference = \"r.example/two/x:1\"\n"
    ))
    .unwrap_err();
    assert!(
        err.contains("two sources of tenant `a` are named `x`"),
        "{err}"
    );

    let ok = parse(&format!(
        "{tenant}[[tenants.a.sources]]\nreference = \"r.example/x@sha256:{}\"\npoll-seconds = 5\n\
         [[sources]]\nreference = \"r.example/ops/y:2\"\n",
        "a".repeat(64)
    ))
    .unwrap();
    let summary: BTreeMap<(String, String), Option<u64>> = ok
        .iter()
        .map(|s| {
            (
                (s.tenant.clone(), s.name.clone()),
                s.poll.map(|d| d.as_secs()),
            )
        })
        .collect();
    assert_eq!(
        summary,
        BTreeMap::from([
            // A digest never moves: never polled.
            (("a".to_string(), "x".to_string()), None),
            (("".to_string(), "y".to_string()), Some(300)),
        ])
    );
}

/// The pulled directory holds code the host runs: one another user could write into is refused
/// at start, naming it, as the compile cache's and the state's are.
#[tokio::test]
async fn a_pulled_directory_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    let plugins = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("link");
    let private = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(private.path(), &link).unwrap();
    let config = informant_runtime::config::parse(
        "[[sources]]\nreference = \"127.0.0.1:1/ops/x:1\"\n",
        Path::new("informant.toml"),
    )
    .unwrap();
    for dir in [shared.path().to_path_buf(), link] {
        let started = Runtime::start(
            server.client(),
            RuntimeOptions {
                plugins: Some(plugins.path().to_path_buf()),
                pulled_dir: Some(dir.clone()),
                config: config.clone(),
                ..Default::default()
            },
        )
        .await;
        let Err(e) = started else {
            panic!("{} was used", dir.display());
        };
        let text = format!("{e:#}");
        assert!(
            text.starts_with("pulled plugins directory: ")
                && text.contains(&*dir.to_string_lossy()),
            "{text}"
        );
    }
    server.shutdown().await;
}

/// Trust policies as deployed: each tenant's pulled plugins must be signed by its keys (team-a
/// its own, team-b the top-level one). A signed plugin runs and shows its signer; a plugin signed
/// by a key another tenant trusts, and an unsigned one, are refused and say why while the signed
/// one keeps handling events; a tag moved to a signed version swaps, one moved to an unsigned
/// version keeps what runs; a restart under a stricter policy does not run the kept pull.
#[tokio::test(flavor = "multi_thread")]
async fn pulled_plugins_run_only_when_signed_by_a_key_their_tenant_trusts() {
    use informant_oci::signature::SigningKey;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};

    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    informant_tests::init_tracing();
    let (login, client) = logged_in(&registry);
    let keys = tempfile::tempdir().unwrap();
    let (team, ops) = (SigningKey::generate(), SigningKey::generate());
    for (name, key) in [("team.pub", &team), ("ops.pub", &ops)] {
        std::fs::write(keys.path().join(name), key.public_key_pem()).unwrap();
    }
    let key = |name: &str| keys.path().join(name).display().to_string();

    let push = |repo: &'static str, wasm: &'static str, manifest: &'static str| {
        let client = client.clone();
        let reference: Reference = format!("{}/{repo}", registry.addr).parse().unwrap();
        async move {
            let name = informant_oci::layout::repository_name(&reference).to_string();
            let bytes = std::fs::read(informant_tests::plugins::wasm(wasm)).unwrap();
            (
                client
                    .push(&reference, &name, bytes.clone(), manifest)
                    .await
                    .unwrap(),
                bytes,
            )
        }
    };
    let (snoop1, v1) = push("team-a/snoop:stable", "hostile", MANIFEST).await;
    client
        .sign(&snoop1.pinned.parse().unwrap(), &team)
        .await
        .unwrap();
    let (_, _) = push("team-a/unsigned:1", "hostile", MANIFEST).await;
    const B: &str =
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"team-b\"\n";
    let (borrowed, _) = push("team-b/borrowed:1", "hostile", B).await;
    // Signed, but by team-a's key, which team-b does not trust.
    client
        .sign(&borrowed.pinned.parse().unwrap(), &team)
        .await
        .unwrap();

    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a", "team-b"]);
    let plugins = tempfile::tempdir().unwrap();
    let pulled = tempfile::tempdir().unwrap();
    let source = |tenant: &str, repo: &str| {
        format!(
            "registries = [\"{0}/{tenant}\"]\nregistry-configs = [\"{1}\"]\n\
             [[tenants.{tenant}.sources]]\nreference = \"{0}/{repo}\"\npoll-seconds = 1\n\
             registry-config = \"{1}\"\nregistry-ca = \"{2}\"\n",
            registry.addr,
            login.display(),
            registry.ca_file.display()
        )
    };
    let config = |team_a_key: &str| {
        format!(
            "[signatures]\nkeys = [\"{ops}\"]\n\
             [tenants.team-a]\nnamespaces = [\"team-a\"]\nsignatures = {{ keys = [\"{team_a_key}\"] }}\n{}{}\
             [tenants.team-b]\nnamespaces = [\"team-b\"]\n{}",
            // Checked at start and when asked: its tag moves below are seen through `poll`.
            source("team-a", "team-a/snoop:stable")
                .replace("poll-seconds = 1", "poll-seconds = 3600"),
            // The grant once per table.
            source("team-a", "team-a/unsigned:1")
                .split_once("[[")
                .map(|(_, t)| format!("[[{t}"))
                .unwrap(),
            source("team-b", "team-b/borrowed:1"),
            ops = key("ops.pub"),
        )
    };
    let start = |admin, config: String| {
        let host_config: HostConfig =
            informant_runtime::config::parse(&config, Path::new("informant.toml")).expect("config");
        start_host(&server, (plugins.path(), pulled.path()), host_config, admin)
    };
    let admin = free_addr();
    let runtime = start(admin, config(&key("team.pub"))).await;

    let signed_by = |pinned: String, wasm: Vec<u8>| {
        let fingerprint = team.public_key().fingerprint().to_string();
        move |s: u16, body: &str| {
            s == 200
                && entry(body, "team-a", "snoop").is_some_and(|p| {
                    p["state"] == "running"
                        && p["version"] == hex(&wasm)
                        && p["source"]["pinned"] == pinned.as_str()
                        && p["source"]["signer"]["fingerprint"] == fingerprint.as_str()
                })
        }
    };
    let body = get_until(
        admin,
        "/plugins",
        "the signed plugin running",
        signed_by(snoop1.pinned.clone(), v1.clone()),
    )
    .await;
    assert_eq!(
        entry(&body, "team-a", "snoop").unwrap()["source"]["signer"]["key"],
        key("team.pub")
    );
    let refused = |tenant: &'static str, name: &'static str, why: String| {
        move |s: u16, body: &str| {
            s == 200
                && entry(body, tenant, name).is_some_and(|p| {
                    p["source"]["error"]
                        .as_str()
                        .is_some_and(|e| e.contains(&why))
                })
        }
    };
    for (tenant, name, why) in [
        ("team-a", "unsigned", "is not signed: no cosign signature at".to_string()),
        (
            "team-b",
            "borrowed",
            "is not signed by a key the policy trusts: signature 1: signed by no key the policy trusts"
                .to_string(),
        ),
    ] {
        let body = get_until(admin, "/plugins", "a refusal", refused(tenant, name, why)).await;
        let p = entry(&body, tenant, name).unwrap();
        assert_ne!(p["state"], "running", "{p}");
        assert!(p["source"]["pinned"].is_null(), "nothing was written: {p}");
    }
    assert!(!pulled.path().join("team-a/unsigned.wasm").exists());
    assert!(!pulled.path().join("team-b/borrowed.wasm").exists());
    // The signed plugin keeps handling events beside the refusals.
    let configmaps: Api<ConfigMap> = Api::namespaced(server.client(), "team-a");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("after-refusals".into());
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    get_until(admin, "/plugins", "snoop handling events", |s, body| {
        s == 200 && entry(body, "team-a", "snoop").is_some_and(|p| p["handled"].as_u64() >= Some(1))
    })
    .await;

    // The tag moves to a signed version: an hour before the next check, so asked now, and
    // swapped in. The answer comes once the check is done; a plugin no source writes is 404.
    let (snoop2, v2) = push("team-a/snoop:stable", "admit", MANIFEST2).await;
    client
        .sign(&snoop2.pinned.parse().unwrap(), &team)
        .await
        .unwrap();
    let admin_client = AdminClient::new(&admin.to_string()).unwrap();
    let polled = admin_client.poll_source("team-a/snoop").await.unwrap();
    assert_eq!(polled.pinned.as_deref(), Some(snoop2.pinned.as_str()));
    assert_eq!(
        polled.signer.as_ref().map(|s| s.fingerprint.as_str()),
        Some(team.public_key().fingerprint())
    );
    let none = admin_client
        .poll_source("team-a/nothing")
        .await
        .unwrap_err();
    assert!(
        none.to_string()
            .contains("no source writes plugin `team-a/nothing`"),
        "{none}"
    );
    get_until(
        admin,
        "/plugins",
        "signed v2 swapped in",
        signed_by(snoop2.pinned.clone(), v2.clone()),
    )
    .await;
    // The tag moves to an unsigned version: v2 keeps running, the source says why.
    // (Not v1's bytes again: those are signed.)
    const MANIFEST3: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"team-a\"\n[config]\nmode = \"v3\"\n";
    let (snoop3, _) = push("team-a/snoop:stable", "hostile", MANIFEST3).await;
    let polled = admin_client.poll_source("team-a/snoop").await.unwrap();
    assert!(
        polled
            .error
            .as_deref()
            .is_some_and(|e| e.contains("is not signed")),
        "{polled:?}"
    );
    assert_eq!(
        polled.pinned.as_deref(),
        Some(snoop2.pinned.as_str()),
        "v2 kept"
    );
    let body = get_until(
        admin,
        "/plugins",
        "the unsigned push refused",
        refused(
            "team-a",
            "snoop",
            format!("`{}` is not signed", snoop3.pinned),
        ),
    )
    .await;
    let snoop = entry(&body, "team-a", "snoop").unwrap();
    assert_eq!(snoop["state"], "running", "{snoop}");
    assert_eq!(snoop["version"], hex(&v2), "{snoop}");
    runtime.stop().await;

    // Restarted with team-a trusting only the operator's key: the kept v2 (signed by team-a's
    // key) is not run, not even before the registry answers.
    let admin = free_addr();
    let runtime = start(admin, config(&key("ops.pub"))).await;
    assert!(
        !pulled.path().join("team-a/snoop.wasm").exists(),
        "the kept pull is dropped at start"
    );
    let body = get_until(
        admin,
        "/plugins",
        "snoop refused under the new policy",
        refused(
            "team-a",
            "snoop",
            format!("`{}` is not signed", snoop3.pinned),
        ),
    )
    .await;
    let snoop = entry(&body, "team-a", "snoop").unwrap();
    assert_ne!(snoop["state"], "running", "{snoop}");
    runtime.stop().await;
    server.shutdown().await;
}

/// An air gap: the reference names a registry the cluster cannot reach (`registry.invalid`),
/// whose mirror is the loopback registry under a path prefix. The plugin, and its signature,
/// are read from the mirror, verified as from anywhere, and pinned under the registry's name.
#[tokio::test(flavor = "multi_thread")]
async fn a_source_is_read_through_its_mirror_when_its_registry_is_out_of_reach() {
    use informant_oci::signature::SigningKey;

    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    informant_tests::init_tracing();
    let (login, client) = logged_in(&registry);
    let key = SigningKey::generate();
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("team.pub");
    std::fs::write(&key_file, key.public_key_pem()).unwrap();
    let mirrored: Reference = format!("{}/mirror/team-a/snoop:stable", registry.addr)
        .parse()
        .unwrap();
    let wasm = std::fs::read(informant_tests::plugins::wasm("hostile")).unwrap();
    let pushed = client
        .push(&mirrored, "snoop", wasm.clone(), MANIFEST)
        .await
        .unwrap();
    client
        .sign(&pushed.pinned.parse().unwrap(), &key)
        .await
        .unwrap();

    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a"]);
    let plugins = tempfile::tempdir().unwrap();
    let pulled = tempfile::tempdir().unwrap();
    let config = format!(
        "[mirrors]\n\"registry.invalid\" = [\"{addr}/mirror\"]\n\
         [tenants.team-a]\nnamespaces = [\"team-a\"]\nsignatures = {{ keys = [\"{key}\"] }}\n\
         registries = [\"registry.invalid/team-a\"]\nregistry-configs = [\"{login}\"]\n\
         [[tenants.team-a.sources]]\nreference = \"registry.invalid/team-a/snoop:stable\"\n\
         registry-config = \"{login}\"\nregistry-ca = \"{ca}\"\n",
        addr = registry.addr,
        key = key_file.display(),
        login = login.display(),
        ca = registry.ca_file.display(),
    );
    let host_config: HostConfig =
        informant_runtime::config::parse(&config, Path::new("informant.toml")).expect("config");
    let admin = free_addr();
    let runtime = start_host(&server, (plugins.path(), pulled.path()), host_config, admin).await;
    let logical = format!("registry.invalid/team-a/snoop@{}", pushed.digest);
    let body = get_until(
        admin,
        "/plugins",
        "snoop running from the mirror",
        |s, body| {
            s == 200
                && entry(body, "team-a", "snoop").is_some_and(|p| {
                    p["state"] == "running"
                        && p["version"] == hex(&wasm)
                        && p["source"]["pinned"] == logical.as_str()
                })
        },
    )
    .await;
    let snoop = entry(&body, "team-a", "snoop").unwrap();
    assert_eq!(
        snoop["source"]["signer"]["fingerprint"],
        key.public_key().fingerprint(),
        "{snoop}"
    );
    runtime.stop().await;
    server.shutdown().await;

    // A mirror that is not a host and prefix is refused naming the key.
    let err = informant_runtime::config::parse(
        "[mirrors]\n\"ghcr.io\" = [\"https://harbor.internal\"]\n",
        Path::new("/etc/informant.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("key `mirrors`: `ghcr.io`: \"https://harbor.internal\" has a scheme"),
        "{err}"
    );
}
