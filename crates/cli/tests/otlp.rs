//! `--otlp-endpoint` and `OTEL_EXPORTER_OTLP_ENDPOINT` as a user sets them: an endpoint the host
//! cannot export to stops `run` and `dev` at start, saying why, rather than tracing nothing.

use std::process::Command;

/// `informant ARGS` with `env`: its exit status and stderr.
fn informant(args: &[&str], env: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_informant"));
    cmd.args(args).env("RUST_LOG", "warn");
    match env {
        Some(v) => cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", v),
        None => cmd.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT"),
    };
    let out = cmd.output().expect("run informant");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_endpoint_traces_cannot_reach_is_refused_at_start_from_the_flag_or_the_environment() {
    let kubeconfig = ["--kubeconfig", "/nonexistent/kubeconfig"];
    let flag = [
        &["run", "--otlp-endpoint", "https://collector:4318"][..],
        &kubeconfig,
    ]
    .concat();
    let (ok, stderr) = informant(&flag, None);
    assert!(!ok);
    assert!(
        stderr.contains("OTLP endpoint `https://collector:4318`")
            && stderr.contains("only http:// is supported"),
        "{stderr}"
    );
    let (ok, stderr) = informant(
        &[&["run"][..], &kubeconfig].concat(),
        Some("collector:4318"),
    );
    assert!(!ok);
    assert!(
        stderr.contains("OTLP endpoint `collector:4318`"),
        "the environment variable is read: {stderr}"
    );
    // Unset (or empty), traces are off and `run` goes on to its kubeconfig.
    let (ok, stderr) = informant(&[&["run"][..], &kubeconfig].concat(), Some(""));
    assert!(!ok);
    assert!(
        !stderr.contains("OTLP") && stderr.contains("/nonexistent/kubeconfig"),
        "{stderr}"
    );
}
