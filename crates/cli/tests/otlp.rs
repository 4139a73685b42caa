//! `--otlp-endpoint`, `--otlp-header` and the OpenTelemetry variables as a user sets them: an
//! endpoint the host cannot export to stops `run` at start, saying why, rather than tracing
//! nothing; `https://` endpoints (as platforms inject them) are taken; and credentials given in
//! the endpoint or a header never reach the log, the errors or `--help`.

mod support;

use std::process::Command;

use informant_tests::{configmap, guarded};
use support::{Host, Setup};

/// `informant ARGS` with `env`: its exit status and stderr.
fn informant(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_informant"));
    cmd.args(args).env("RUST_LOG", "debug");
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_TRACES_SAMPLER",
        "OTEL_TRACES_SAMPLER_ARG",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run informant");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

const KUBECONFIG: [&str; 2] = ["--kubeconfig", "/nonexistent/kubeconfig"];

#[test]
fn an_endpoint_traces_cannot_reach_is_refused_at_start_from_the_flag_or_the_environment() {
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        informant(&[&["run"][..], extra, &KUBECONFIG].concat(), env)
    };
    let (ok, out) = run(&["--otlp-endpoint", "ftp://collector:4318"], &[]);
    assert!(!ok);
    assert!(
        out.contains("OTLP endpoint `ftp://collector:4318`")
            && out.contains("not an absolute http:// or https:// URL"),
        "{out}"
    );
    let (ok, out) = run(&[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]);
    assert!(!ok);
    assert!(
        out.contains("OTLP endpoint `collector:4318`"),
        "the environment variable is read: {out}"
    );
    for (extra, env, says) in [
        (
            &["--trace-sample-ratio", "2"][..],
            &[][..],
            "trace sampler from --trace-sample-ratio: 2 is not a ratio from 0 to 1",
        ),
        (
            &[],
            &[("OTEL_TRACES_SAMPLER", "sometimes")],
            "trace sampler from OTEL_TRACES_SAMPLER",
        ),
        (&["--otlp-header", "x-key"], &[], "expected NAME=VALUE"),
        (
            &["--otlp-ca-file", "/nonexistent/ca.pem"],
            &[],
            "OTLP CA certificates `/nonexistent/ca.pem`",
        ),
    ] {
        let mut args = vec!["--otlp-endpoint", "https://127.0.0.1:1"];
        args.extend(extra);
        let (ok, out) = run(&args, env);
        assert!(!ok && out.contains(says), "{extra:?} {env:?}: {out}");
    }
    // Unset (or empty), traces are off and `run` goes on to its kubeconfig; an https://
    // endpoint, as platforms inject, is taken and `run` goes on too.
    for env in ["", "https://otlp.example.com:4318"] {
        let (ok, out) = run(&[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", env)]);
        assert!(!ok);
        assert!(
            !out.contains("OTLP endpoint") && out.contains("/nonexistent/kubeconfig"),
            "{env:?}: {out}"
        );
    }
}

#[test]
fn credentials_in_the_endpoint_or_a_header_appear_nowhere_in_the_output() {
    // A malformed endpoint is named in its error, without its password.
    let (ok, out) = informant(
        &[
            &["run", "--otlp-endpoint", "http://user:PASSWORD@[::1"][..],
            &KUBECONFIG,
        ]
        .concat(),
        &[],
    );
    assert!(
        !ok && out.contains("OTLP endpoint `http://REDACTED@[::1`"),
        "{out}"
    );
    assert!(!out.contains("PASSWORD"), "{out}");
    // A header's value is never shown, even when it is the part at fault.
    let (ok, out) = informant(
        &[
            &["run", "--otlp-endpoint", "http://127.0.0.1:1"][..],
            &KUBECONFIG,
        ]
        .concat(),
        &[("OTEL_EXPORTER_OTLP_HEADERS", "api-key=SECRET%0Ax")],
    );
    assert!(!ok && out.contains("OTLP header `api-key`"), "{out}");
    assert!(!out.contains("SECRET"), "{out}");
    // `--help` lists the variables it reads without their values.
    let (ok, out) = informant(
        &["run", "--help"],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://user:PASSWORD@127.0.0.1:1",
        )],
    );
    assert!(ok && out.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{out}");
    assert!(!out.contains("PASSWORD"), "{out}");
}

/// The whole host, tracing every event to a collector that is not there, logging at debug:
/// the export fails and says so, naming the endpoint, and neither the password of the endpoint
/// nor a header's value is anywhere in what it printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_export_logs_its_endpoint_without_its_credentials() {
    guarded("the host's log with a failing export", async {
        let setup = Setup::new(
            "echo",
            "hostile",
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"demo\"\n[config]\nmode = \"echo\"\ntag = \"e\"\n",
        )
        .await;
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let args = [
            "--otlp-endpoint".to_string(),
            format!("http://tracer:PASSWORD@127.0.0.1:{port}"),
            "--otlp-header".to_string(),
            "x-api-key=HEADERSECRET".to_string(),
        ];
        let host = Host::start_with(
            setup.dir.path(),
            &args,
            &[
                ("RUST_LOG", "debug"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-other=ENVSECRET"),
            ],
        )
        .await;
        setup
            .server
            .create(configmap("demo", "traced", "v"))
            .unwrap();
        // Polled: the log is read from the child's pipes, which have no change to wait on.
        let failed = loop {
            if let Some(line) = host.logged("trace export failed").into_iter().next() {
                break line;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert!(
            failed.contains(&format!("http://127.0.0.1:{port}/v1/traces")),
            "the failure names the endpoint: {failed}"
        );
        let started = host.logged("exporting traces over OTLP/HTTP");
        assert!(
            started.iter().any(|l| l.contains("x-api-key") && l.contains("x-other")),
            "the headers are named: {started:?}"
        );
        let lines = host.lines();
        host.stop().await;
        for secret in ["PASSWORD", "HEADERSECRET", "ENVSECRET", "dHJhY2VyOlBBU1NXT1JE"] {
            assert!(
                !lines.iter().any(|l| l.contains(secret)),
                "`{secret}` printed:\n{}",
                lines.join("\n")
            );
        }
    })
    .await;
}
