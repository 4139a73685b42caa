//! The text log as a file or a pipe receives it: plain text, no ANSI escape sequences.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `run` against an API server that is not there logs a warning through tracing at once (and
/// keeps retrying): a level and fields a terminal would get in colour.
#[test]
fn the_text_log_written_to_a_pipe_has_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // Port 1 on loopback: nothing listens, so discovery fails with "connection refused".
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
         current-context: x\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["--log-format", "text", "run", "--watch", "v1/ConfigMap"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stderr(Stdio::piped())
        .spawn()
        .expect("run informant");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if tx.send(line.expect("stderr")).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let warned = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let done = line.contains("WARN") && line.contains("--watch");
                log.push(line);
                if done {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let log = log.join("\n");
    assert!(warned, "no --watch warning within 60 s: {log}");
    assert!(
        !log.contains("\x1b["),
        "colour codes in a piped log: {log:?}"
    );
}
