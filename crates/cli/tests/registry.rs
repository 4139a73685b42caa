//! `informant push` and `informant pull` as a user runs them: the real binary against a real
//! registry on loopback (TLS with its own CA, basic auth), real compiled plugins.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use informant_oci::layout::{
    LEGACY_WASM_LAYER, MANIFEST_ANNOTATION, TITLE_ANNOTATION, WASM_CONFIG, WASM_LAYER,
};
use informant_oci::signature::SigningKey;
use informant_oci::{Options, Reference, Registry};
use informant_tests::registry::{LocalRegistry, PASSWORD, USER};
use oci_client::client::{ClientConfig, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;

fn informant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("DOCKER_CONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .expect("run informant")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `informant pull REFERENCE DIR` logged in to `registry` (its CA trusted).
fn pull(registry: &LocalRegistry, login: &str, reference: &str, dir: &str) -> Output {
    informant(&[
        "pull",
        reference,
        dir,
        "--registry-config",
        login,
        "--registry-ca",
        registry.ca_file.to_str().unwrap(),
    ])
}

const MANIFEST: &str =
    "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\n";

/// A plugin on disk, as `informant new` leaves one: `NAME.wasm` and `NAME.toml`.
fn plugin_files(dir: &Path, name: &str) -> String {
    let wasm = dir.join(format!("{name}.wasm"));
    std::fs::copy(informant_tests::plugins::wasm("hostile"), &wasm).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), MANIFEST).unwrap();
    wasm.display().to_string()
}

/// oci-client itself, trusting the registry's CA: another tool's view of the registry.
fn raw_client(registry: &LocalRegistry) -> oci_client::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    oci_client::Client::try_from(ClientConfig {
        extra_root_certificates: vec![oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: std::fs::read(&registry.ca_file).unwrap(),
        }],
        ..ClientConfig::default()
    })
    .unwrap()
}

/// An artifact pushed with oci-client directly: what another tool (or an attacker) might push.
async fn push_raw(
    registry: &LocalRegistry,
    reference: &str,
    layer_type: &str,
    wasm: Vec<u8>,
    annotations: Option<BTreeMap<String, String>>,
) {
    let client = raw_client(registry);
    let layers = [ImageLayer::new(wasm, layer_type.to_string(), None)];
    let config = Config::new(
        b"{}".to_vec(),
        "application/vnd.wasm.config.v1+json".into(),
        None,
    );
    let manifest = OciImageManifest::build(&layers, &config, annotations);
    let reference: Reference = reference.parse().unwrap();
    let auth = RegistryAuth::Basic(USER.into(), PASSWORD.into());
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    for (data, digest) in [
        (layers[0].data.clone(), &manifest.layers[0].digest),
        (config.data.clone(), &manifest.config.digest),
    ] {
        client.push_blob(&reference, data, digest).await.unwrap();
    }
    client
        .push_manifest_raw(
            &reference,
            serde_json::to_vec(&manifest).unwrap(),
            "application/vnd.oci.image.manifest.v1+json"
                .parse()
                .unwrap(),
        )
        .await
        .expect("push the raw artifact");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pushed_plugin_pulls_back_byte_for_byte_pinned_by_digest() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let wasm = plugin_files(work.path(), "snoop");
    let login = registry.docker_config(USER, PASSWORD);
    let (login, ca) = (login.to_str().unwrap(), registry.ca_file.to_str().unwrap());
    let reference = format!("{}/team-a/snoop:1.0", registry.addr);

    let pushed = informant(&[
        "push",
        &wasm,
        &reference,
        "--registry-config",
        login,
        "--registry-ca",
        ca,
    ]);
    assert!(pushed.status.success(), "{}", text(&pushed));
    let pinned = String::from_utf8_lossy(&pushed.stdout).trim().to_string();
    let prefix = format!("{}/team-a/snoop@sha256:", registry.addr);
    assert!(pinned.starts_with(&prefix), "{}", text(&pushed));

    // By tag and by the pinned digest: the same bytes, under the artifact's own name.
    for what in [&reference, &pinned] {
        let plugins = tempfile::tempdir().unwrap();
        let dir = plugins.path().to_str().unwrap();
        let pulled = pull(&registry, login, what, dir);
        assert!(pulled.status.success(), "{}", text(&pulled));
        assert!(
            String::from_utf8_lossy(&pulled.stdout).contains(&pinned),
            "{}",
            text(&pulled)
        );
        assert_eq!(
            std::fs::read(plugins.path().join("snoop.wasm")).unwrap(),
            std::fs::read(&wasm).unwrap()
        );
        assert_eq!(
            std::fs::read_to_string(plugins.path().join("snoop.toml")).unwrap(),
            MANIFEST
        );
        let mut names: Vec<_> = std::fs::read_dir(plugins.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["snoop.toml", "snoop.wasm"],
            "nothing else left behind"
        );
    }

    // What the registry holds is the CNCF layout: its config type, one application/wasm layer.
    let lib = Registry::new(Options {
        credentials: informant_oci::credentials::Credentials::from_file(Path::new(login)).unwrap(),
        ca_file: Some(registry.ca_file.clone()),
        ..Options::default()
    })
    .unwrap();
    let artifact = lib.pull(&reference.parse().unwrap()).await.unwrap();
    assert!(!artifact.legacy);
    assert_eq!(artifact.name.as_deref(), Some("snoop"));
    assert_eq!(
        artifact.digest,
        lib.resolve(&reference.parse().unwrap()).await.unwrap()
    );
    let client = raw_client(&registry);
    let (image, _) = client
        .pull_image_manifest(
            &pinned.parse().unwrap(),
            &RegistryAuth::Basic(USER.into(), PASSWORD.into()),
        )
        .await
        .unwrap();
    assert_eq!(image.config.media_type, WASM_CONFIG);
    assert_eq!(image.layers.len(), 1);
    assert_eq!(image.layers[0].media_type, WASM_LAYER);
    let annotations = image.annotations.unwrap();
    assert_eq!(annotations[TITLE_ANNOTATION], "snoop");
    assert_eq!(annotations[MANIFEST_ANNOTATION], MANIFEST);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_without_the_login_or_the_ca_is_refused_and_nothing_is_written() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let wasm = plugin_files(work.path(), "snoop");
    let good = registry.docker_config(USER, PASSWORD);
    let bad = registry.docker_config("mallory", "guess");
    let ca = registry.ca_file.to_str().unwrap();
    let reference = format!("{}/team-a/snoop:1.0", registry.addr);
    let pushed = informant(&[
        "push",
        &wasm,
        &reference,
        "--registry-config",
        good.to_str().unwrap(),
        "--registry-ca",
        ca,
    ]);
    assert!(pushed.status.success(), "{}", text(&pushed));

    let plugins = tempfile::tempdir().unwrap();
    let dir = plugins.path().to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        // A wrong password: the registry says so.
        (
            &[
                "--registry-config",
                bad.to_str().unwrap(),
                "--registry-ca",
                ca,
            ],
            "not authorized",
        ),
        // Anonymous.
        (&["--registry-ca", ca], "not authorized"),
        // The right login to a server whose certificate nobody vouched for: never sent.
        (
            &["--registry-config", good.to_str().unwrap()],
            "certificate",
        ),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["pull", &reference, dir];
        args.extend_from_slice(flags);
        let out = informant(&args);
        assert!(!out.status.success(), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(
            stderr.contains(&reference.to_lowercase()) && stderr.contains(needle),
            "lacks `{needle}` and the reference:\n{}",
            text(&out)
        );
        assert_eq!(std::fs::read_dir(plugins.path()).unwrap().count(), 0);
    }

    // Plain HTTP to a TLS registry is not a downgrade that works; to a remote one it is never
    // even tried.
    let out = informant(&[
        "pull",
        "registry.invalid/team-a/snoop:1.0",
        dir,
        "--plain-http",
        "--registry-config",
        good.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_dir(plugins.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_and_hostile_artifacts() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let login = registry.docker_config(USER, PASSWORD);
    let login = login.to_str().unwrap();
    let wasm = std::fs::read(informant_tests::plugins::wasm("hostile")).unwrap();

    // The layout Kubewarden and Spin push: pulled, with a note that the manifest is missing.
    let legacy = format!("{}/legacy/policy:v1", registry.addr);
    push_raw(&registry, &legacy, LEGACY_WASM_LAYER, wasm.clone(), None).await;
    let plugins = tempfile::tempdir().unwrap();
    let dir = plugins.path().to_str().unwrap();
    let out = pull(&registry, login, &legacy, dir);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(plugins.path().join("policy.wasm")).unwrap(),
        wasm
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("carries no manifest (a legacy wasm layout)"),
        "{}",
        text(&out)
    );

    // A title that would leave the directory, or look like another plugin: refused, nothing
    // written anywhere.
    for (i, title) in ["../evil", "a/b", "ѕnoop", "snoop ", "%2e%2e"]
        .iter()
        .enumerate()
    {
        let reference = format!("{}/hostile/t{i}:v1", registry.addr);
        let annotations = BTreeMap::from([
            (TITLE_ANNOTATION.to_string(), title.to_string()),
            (MANIFEST_ANNOTATION.to_string(), MANIFEST.to_string()),
        ]);
        push_raw(
            &registry,
            &reference,
            WASM_LAYER,
            wasm.clone(),
            Some(annotations),
        )
        .await;
        let plugins = tempfile::tempdir().unwrap();
        let inner = plugins.path().join("plugins");
        std::fs::create_dir(&inner).unwrap();
        let out = pull(&registry, login, &reference, inner.to_str().unwrap());
        assert!(!out.status.success(), "{title:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("plugin name"),
            "{title:?}: {}",
            text(&out)
        );
        assert_eq!(std::fs::read_dir(&inner).unwrap().count(), 0, "{title:?}");
        assert_eq!(
            std::fs::read_dir(plugins.path()).unwrap().count(),
            1,
            "{title:?}"
        );
    }

    // A manifest that is not one this host loads is not written.
    let broken = format!("{}/hostile/broken:v1", registry.addr);
    let annotations = BTreeMap::from([
        (TITLE_ANNOTATION.to_string(), "broken".to_string()),
        (
            MANIFEST_ANNOTATION.to_string(),
            "[[watch]]\nkind = 3\n".to_string(),
        ),
    ]);
    push_raw(
        &registry,
        &broken,
        WASM_LAYER,
        wasm.clone(),
        Some(annotations),
    )
    .await;
    let out = pull(&registry, login, &broken, dir);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!plugins.path().join("broken.toml").exists());
    assert!(!plugins.path().join("broken.wasm").exists());

    // Two layers, or a layer that is not wasm: not a plugin.
    let not_wasm = format!("{}/hostile/tar:v1", registry.addr);
    push_raw(
        &registry,
        &not_wasm,
        "application/vnd.oci.image.layer.v1.tar",
        wasm.clone(),
        None,
    )
    .await;
    let out = pull(&registry, login, &not_wasm, dir);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a wasm plugin artifact"),
        "{}",
        text(&out)
    );

    // Over the size limit: refused from the descriptor, before the layer is read.
    let lib = Registry::new(Options {
        credentials: informant_oci::credentials::Credentials::from_file(Path::new(login)).unwrap(),
        ca_file: Some(registry.ca_file.clone()),
        max_wasm_bytes: (wasm.len() - 1) as u64,
        ..Options::default()
    })
    .unwrap();
    let e = lib.pull(&legacy.parse().unwrap()).await.unwrap_err();
    assert!(e.to_string().contains("over the limit"), "{e}");
}

/// `informant sign` with a key `openssl genpkey` made, and `informant pull --key`: a signed
/// artifact pulls; one signed by another key, one pushed over the tag after signing, and one
/// carrying a signature copied from the signed one are each refused and nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn signed_artifacts_pull_and_every_other_kind_is_refused() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let keys = work.path();
    // The user's key: openssl's PKCS#8, where the machine has openssl; else one made here.
    let openssl = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(keys.join("team.key"))
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(keys.join("team.key"))
            .arg("-out")
            .arg(keys.join("team.pub"))
            .status()
            .is_ok_and(|s| s.success());
    if !openssl {
        if std::env::var_os("INFORMANT_REQUIRE_ALL").is_some() {
            panic!("openssl is required (INFORMANT_REQUIRE_ALL) and could not make a key");
        }
        eprintln!("skipping the openssl key: no openssl; a key made in-process instead");
        let key = SigningKey::generate();
        std::fs::write(keys.join("team.key"), key.private_key_pem()).unwrap();
        std::fs::write(keys.join("team.pub"), key.public_key_pem()).unwrap();
    }
    let stranger = SigningKey::generate();
    std::fs::write(keys.join("stranger.key"), stranger.private_key_pem()).unwrap();
    std::fs::write(keys.join("stranger.pub"), stranger.public_key_pem()).unwrap();
    let key = |name: &str| keys.join(name).display().to_string();

    let wasm = plugin_files(work.path(), "snoop");
    let login = registry.docker_config(USER, PASSWORD);
    let (login, ca) = (login.to_str().unwrap(), registry.ca_file.to_str().unwrap());
    let reference = format!("{}/team-a/snoop:stable", registry.addr);
    let with_registry = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--registry-config", login, "--registry-ca", ca]);
        informant(&all)
    };
    let pushed = with_registry(&["push", &wasm, &reference]);
    assert!(pushed.status.success(), "{}", text(&pushed));
    let v1 = String::from_utf8_lossy(&pushed.stdout).trim().to_string();
    let v1_digest = v1.rsplit_once('@').unwrap().1.to_string();

    let signed = with_registry(&["sign", &reference, "--key", &key("team.key")]);
    assert!(signed.status.success(), "{}", text(&signed));
    let tag = String::from_utf8_lossy(&signed.stdout).trim().to_string();
    assert_eq!(
        tag,
        format!(
            "{}/team-a/snoop:{}.sig",
            registry.addr,
            v1_digest.replace(':', "-")
        )
    );

    let pulled_with = |keys: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["pull", &reference, dir.path().to_str().unwrap()];
        for k in keys {
            args.extend(["--key", k]);
        }
        let out = with_registry(&args);
        let written = std::fs::read_dir(dir.path()).unwrap().count();
        (out, written)
    };
    let (ok, written) = pulled_with(&[&key("stranger.pub"), &key("team.pub")]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert_eq!(written, 2);
    assert!(
        String::from_utf8_lossy(&ok.stderr).contains(&format!("signed by key {}", key("team.pub"))),
        "{}",
        text(&ok)
    );
    let (other, written) = pulled_with(&[&key("stranger.pub")]);
    assert!(!other.status.success() && written == 0, "{}", text(&other));
    assert!(
        String::from_utf8_lossy(&other.stderr)
            .contains("is not signed by a key the policy trusts: signature 1: signed by no key the policy trusts"),
        "{}",
        text(&other)
    );

    // A second signer beside the first: both keys verify it now.
    let again = with_registry(&["sign", &v1, "--key", &key("stranger.key")]);
    assert!(again.status.success(), "{}", text(&again));
    for k in ["team.pub", "stranger.pub"] {
        let (ok, written) = pulled_with(&[&key(k)]);
        assert!(ok.status.success() && written == 2, "{k}: {}", text(&ok));
    }

    // The tag pushed over after signing (a new layer, so a new digest): unsigned.
    std::fs::write(work.path().join("snoop.toml"), format!("{MANIFEST}# v2\n")).unwrap();
    let pushed = with_registry(&["push", &wasm, &reference]);
    assert!(pushed.status.success(), "{}", text(&pushed));
    let v2 = String::from_utf8_lossy(&pushed.stdout).trim().to_string();
    let v2_digest = v2.rsplit_once('@').unwrap().1.to_string();
    let (unsigned, written) = pulled_with(&[&key("team.pub")]);
    assert!(
        !unsigned.status.success() && written == 0,
        "{}",
        text(&unsigned)
    );
    assert!(
        String::from_utf8_lossy(&unsigned.stderr).contains(&format!("`{v2}` is not signed")),
        "{}",
        text(&unsigned)
    );

    // v1's signatures copied beside v2: they vouch for v1's digest, not v2's.
    let client = raw_client(&registry);
    let auth = RegistryAuth::Basic(USER.into(), PASSWORD.into());
    let (body, _) = client
        .pull_manifest_raw(
            &tag.parse().unwrap(),
            &auth,
            &["application/vnd.oci.image.manifest.v1+json"],
        )
        .await
        .unwrap();
    let copy: Reference = format!(
        "{}/team-a/snoop:{}.sig",
        registry.addr,
        v2_digest.replace(':', "-")
    )
    .parse()
    .unwrap();
    client
        .push_manifest_raw(
            &copy,
            body.to_vec(),
            "application/vnd.oci.image.manifest.v1+json"
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    let (copied, written) = pulled_with(&[&key("team.pub")]);
    assert!(
        !copied.status.success() && written == 0,
        "{}",
        text(&copied)
    );
    assert!(
        String::from_utf8_lossy(&copied.stderr)
            .contains(&format!("for {v1_digest}, not for this artifact")),
        "{}",
        text(&copied)
    );

    // Bad keys are named, before any registry is asked.
    let missing = with_registry(&["sign", &reference, "--key", "/nonexistent/team.key"]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("key `/nonexistent/team.key`"),
        "{}",
        text(&missing)
    );
    let public_as_private = with_registry(&["sign", &reference, "--key", &key("team.pub")]);
    assert!(
        String::from_utf8_lossy(&public_as_private.stderr).contains("not a PKCS#8 PEM private key"),
        "{}",
        text(&public_as_private)
    );
}

/// `informant dev --push`: a plugin built from source is pushed to the local registry as
/// `PREFIX/NAME:dev` whenever a build installs it, and pulls back as the plugin that runs.
#[tokio::test(flavor = "multi_thread")]
async fn dev_pushes_each_plugin_it_builds_from_source() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let sources = work.path().join("sources");
    std::fs::create_dir(&sources).unwrap();
    let created = informant(&["new", "echo", "--dir", sources.to_str().unwrap()]);
    assert!(created.status.success(), "{}", text(&created));
    let login = registry.docker_config(USER, PASSWORD);
    // The wasm target directory the other plugin tests build in: dependencies build once.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm-plugins");
    let admin = informant_tests::http::free_addr();
    let mut dev = tokio::process::Command::new(env!("CARGO_BIN_EXE_informant"));
    dev.args(["dev", "--listen", "127.0.0.1:0", "--no-seed", "--admin"])
        .arg(admin.to_string())
        .arg("--plugins")
        .arg(&sources)
        .arg("--target-dir")
        .arg(&target)
        .arg("--kubeconfig-out")
        .arg(work.path().join("kubeconfig"))
        .arg("--push")
        .arg(format!("{}/dev", registry.addr))
        .arg("--registry-config")
        .arg(&login)
        .arg("--registry-ca")
        .arg(&registry.ca_file)
        .env("HOME", "/nonexistent")
        .env_remove("DOCKER_CONFIG");
    let (_child, lines) = support::spawn_logged(dev);
    informant_tests::http::get_until(admin, "/plugins", "echo built and running", |s, body| {
        s == 200 && body.contains("\"name\":\"echo\"") && body.contains("\"state\":\"running\"")
    })
    .await;
    // The push follows the build that installed it: its line says where it went.
    let prefix = format!("echo: pushed {}/dev/echo@sha256:", registry.addr);
    let pinned = informant_tests::guarded("the push to be reported", async {
        loop {
            if let Some(line) = lines.lock().iter().find(|l| l.starts_with(&prefix)) {
                break line["echo: pushed ".len()..].to_string();
            }
            // The child's output arrives on its own tasks: look again shortly.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    let lib = Registry::new(Options {
        credentials: informant_oci::credentials::Credentials::from_file(&login).unwrap(),
        ca_file: Some(registry.ca_file.clone()),
        ..Options::default()
    })
    .unwrap();
    let tag: Reference = format!("{}/dev/echo:dev", registry.addr).parse().unwrap();
    let artifact = lib.pull(&tag).await.unwrap();
    assert_eq!(artifact.pinned, pinned);
    let built = std::fs::read(target.join("plugins/echo.wasm")).unwrap();
    assert_eq!(
        artifact.wasm, built,
        "the component that runs is the one pushed"
    );
    assert_eq!(artifact.name.as_deref(), Some("echo"));
}
