//! The text log as a file or a pipe receives it: plain text, no ANSI escape sequences.

use std::io::Read;
use std::process::{Command, Stdio};

/// `apiserver` logs its listening line, whose level and fields a terminal would get in colour.
#[test]
fn the_text_log_written_to_a_pipe_has_no_colour_codes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["--log-format", "text", "apiserver", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stderr(Stdio::piped())
        .spawn()
        .expect("run informant");
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the listening line is complete (or the process ends), then stop it.
    while !String::from_utf8_lossy(&seen).contains("API server listening") {
        let n = stderr.read(&mut buf).expect("read stderr");
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let log = String::from_utf8_lossy(&seen);
    assert!(log.contains("API server listening"), "{log}");
    assert!(log.contains("INFO"), "{log}");
    assert!(!log.contains("\x1b["), "colour codes in a piped log: {log:?}");
}
