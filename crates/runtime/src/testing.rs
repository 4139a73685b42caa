//! Helpers for this crate's unit tests.

use std::sync::Arc;

/// What a test's log subscriber wrote, as text.
#[derive(Clone, Default)]
pub(crate) struct CapturedLogs(Arc<parking_lot::Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// A subscriber writing plain text (no colours) here; set it as the default meanwhile.
    pub(crate) fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + use<> {
        let c = self.clone();
        tracing_subscriber::fmt()
            .with_writer(move || c.clone())
            .with_ansi(false)
            .finish()
    }

    /// Everything written so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().clone()).expect("log text is UTF-8")
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
