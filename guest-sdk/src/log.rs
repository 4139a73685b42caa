//! Logging into the host's log, tagged with the plugin's name and tenant.
//!
//! A plugin has no stdout or stderr: this is its only output. On native targets records are
//! captured by the running [`testing::Harness`](crate::testing::Harness).

use std::fmt;

/// Severity, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very verbose tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something needs attention.
    Warn,
    /// Something failed.
    Error,
}

/// Shows the lower-case name.
impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        })
    }
}

/// Writes one log record.
pub fn log(level: Level, message: &str) {
    backend(level, message);
}

/// Writes one trace record.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Writes one debug record.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Writes one info record.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Writes one warn record.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Writes one error record.
pub fn error(message: &str) {
    log(Level::Error, message);
}

#[cfg(target_arch = "wasm32")]
fn backend(level: Level, message: &str) {
    use crate::wit::informant::plugin::log as imports;
    let level = match level {
        Level::Trace => imports::Level::Trace,
        Level::Debug => imports::Level::Debug,
        Level::Info => imports::Level::Info,
        Level::Warn => imports::Level::Warn,
        Level::Error => imports::Level::Error,
    };
    imports::log(level, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn backend(level: Level, message: &str) {
    crate::testing::capture_log(level, message);
}

/// `format!`-style logging at a [`Level`]: `log!(Level::Info, "{} pods", n)`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        $crate::log::log($level, &::std::format!($($arg)+))
    };
}

/// `format!`-style trace record.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Trace, $($arg)+) };
}

/// `format!`-style debug record.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Debug, $($arg)+) };
}

/// `format!`-style info record.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Info, $($arg)+) };
}

/// `format!`-style warn record.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Warn, $($arg)+) };
}

/// `format!`-style error record.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Error, $($arg)+) };
}
