//! The rules a plugin's metric names, label names and label values must follow: Prometheus's
//! syntax, the suffixes the exposition format reserves, the host's own families, and bounds on
//! what a series may cost; and how names and label values are written on `/metrics`.
//!
//! Each tenant has a namespace of its own ([`exposed`]): the operator's plugins' families are
//! `informant_plugin_NAME`, tenant `T`'s are `informant_tenant_F__NAME`, `F` being `T` with `-`
//! and `.` written `_` ([`tenant_form`]). The config refuses two tenants of one form, and
//! forms never hold `__` nor end in `_`, so the first `__` after `informant_tenant_` ends the
//! tenant: two (tenant, name) pairs never share a family, and no host family (none of which
//! holds `__`) is ever a tenant's.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::{Kind, MetricError, Result};

/// What the operator's plugins' metric names are exported under.
pub(crate) const PREFIX: &str = "informant_plugin_";

/// What a tenant's plugins' metric names are exported under, before the tenant's form and `__`.
pub(crate) const TENANT_PREFIX: &str = "informant_tenant_";

/// Longest metric or label name, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 128;
/// Longest label value, in bytes.
pub(crate) const MAX_LABEL_VALUE_BYTES: usize = 1024;
/// Most labels on one series (the host's `plugin` and `tenant` not counted).
pub(crate) const MAX_LABELS: usize = 16;
/// Longest help text, in bytes.
pub(crate) const MAX_HELP_BYTES: usize = 1024;
/// Longest group name, in bytes.
pub(crate) const MAX_GROUP_BYTES: usize = 256;
/// Most bucket bounds of a histogram.
pub(crate) const MAX_BUCKETS: usize = 32;

/// The host's own `informant_plugin_*` families (without the prefix): a plugin metric under one
/// of these names would merge into the host's family, so they are refused. A test in
/// `admin::metrics` holds this list to what the host encodes.
pub(crate) const HOST_FAMILIES: &[&str] = &[
    "backlog",
    "dispatch_delay_seconds",
    "events_dispatched",
    "events_dropped",
    "events_failed",
    "events_received",
    "events_retried",
    "handler_duration_seconds",
    "http_denied",
    "http_failures",
    "http_received_bytes",
    "http_requests",
    "http_sent_bytes",
    "metric_bytes",
    "metric_series",
    "metric_series_refused",
    "schedule_ticks",
    "state",
    "waiting_attempts",
    "wildcard_resources",
    "writes",
];

/// Suffixes the exposition format gives the samples of a family: a family named with one
/// would clash with another family's samples.
const RESERVED_SUFFIXES: &[&str] = &["_total", "_created", "_bucket", "_count", "_sum", "_info"];

/// Label names only the host sets.
const HOST_LABELS: &[&str] = &["plugin", "tenant"];

/// `text` cut to [`MAX_NAME_BYTES`] on a character boundary, for messages.
fn shown(text: &str) -> String {
    let cut = (0..=MAX_NAME_BYTES.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    match cut < text.len() {
        true => format!("{}…", &text[..cut]),
        false => text.to_string(),
    }
}

/// Why `name` is not `[a-zA-Z_][a-zA-Z0-9_]*` of at most [`MAX_NAME_BYTES`], if it is not.
fn syntax(name: &str) -> Option<&'static str> {
    let mut bytes = name.bytes();
    match bytes.next() {
        None => return Some("is empty"),
        Some(b) if !(b.is_ascii_alphabetic() || b == b'_') => {
            return Some("must start with an ASCII letter or `_`");
        }
        Some(_) => {}
    }
    if name.len() > MAX_NAME_BYTES {
        return Some("is longer than 128 bytes");
    }
    if !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Some("may hold only ASCII letters, digits and `_`");
    }
    None
}

/// The family name a metric of `kind` called `name` is kept under (a counter's `_total` is the
/// format's, and dropped), or why `name` is refused.
pub(crate) fn family(name: &str, kind: Kind) -> Result<&str> {
    let refused = |why| MetricError::InvalidName {
        name: shown(name),
        why,
    };
    if let Some(why) = syntax(name) {
        return Err(refused(why));
    }
    let base = match kind {
        Kind::Counter => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    };
    if base.is_empty() {
        return Err(refused("is empty without its `_total`"));
    }
    if RESERVED_SUFFIXES.iter().any(|s| base.ends_with(s)) {
        return Err(refused(
            "ends in a suffix the exposition format reserves (`_total` only on a counter; `_created`, `_bucket`, `_count`, `_sum`, `_info` never)",
        ));
    }
    if HOST_FAMILIES.contains(&base) {
        return Err(refused(
            "is one of the host's own `informant_plugin_*` families",
        ));
    }
    Ok(base)
}

/// Checks one series' labels (names, values, how many) for metric `metric` of `kind`.
pub(crate) fn labels(metric: &str, kind: Kind, labels: &[(String, String)]) -> Result<()> {
    let refused = |label: &str, why: String| MetricError::InvalidLabel {
        metric: metric.to_string(),
        label: shown(label),
        why,
    };
    if labels.len() > MAX_LABELS {
        return Err(MetricError::InvalidLabel {
            metric: metric.to_string(),
            label: String::new(),
            why: format!("{} labels, more than {MAX_LABELS}", labels.len()),
        });
    }
    for (i, (name, value)) in labels.iter().enumerate() {
        if let Some(why) = syntax(name) {
            return Err(refused(name, why.to_string()));
        }
        if name.starts_with("__") {
            return Err(refused(
                name,
                "names starting with `__` are reserved".into(),
            ));
        }
        if HOST_LABELS.contains(&name.as_str()) {
            return Err(refused(
                name,
                "is set by the host to the plugin's own; a plugin cannot set it".into(),
            ));
        }
        if kind == Kind::Histogram && name == "le" {
            return Err(refused(name, "is a histogram's bucket label".into()));
        }
        if value.len() > MAX_LABEL_VALUE_BYTES {
            return Err(refused(
                name,
                format!(
                    "value of {} bytes, longer than {MAX_LABEL_VALUE_BYTES}",
                    value.len()
                ),
            ));
        }
        if labels[..i].iter().any(|(n, _)| n == name) {
            return Err(refused(name, "given twice".into()));
        }
    }
    Ok(())
}

/// Checks a help text and a group name against their bounds.
pub(crate) fn text(metric: &str, help: &str, group: Option<&str>) -> Result<()> {
    let refused = |why| MetricError::InvalidValue {
        metric: metric.to_string(),
        why,
    };
    if help.len() > MAX_HELP_BYTES {
        return Err(refused(format!(
            "help of {} bytes, longer than {MAX_HELP_BYTES}",
            help.len()
        )));
    }
    if let Some(g) = group.filter(|g| g.len() > MAX_GROUP_BYTES) {
        return Err(refused(format!(
            "group of {} bytes, longer than {MAX_GROUP_BYTES}",
            g.len()
        )));
    }
    Ok(())
}

/// The bucket bounds of a histogram: Prometheus's defaults when none are given, else the given
/// ones if ascending, finite and at most [`MAX_BUCKETS`].
pub(crate) fn buckets(metric: &str, given: &[f64]) -> Result<Box<[f64]>> {
    const DEFAULT: [f64; 11] = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    if given.is_empty() {
        return Ok(DEFAULT.into());
    }
    let refused = |why: String| MetricError::InvalidValue {
        metric: metric.to_string(),
        why,
    };
    if given.len() > MAX_BUCKETS {
        return Err(refused(format!(
            "{} buckets, more than {MAX_BUCKETS}",
            given.len()
        )));
    }
    if !given.iter().all(|b| b.is_finite()) || !given.windows(2).all(|w| w[0] < w[1]) {
        return Err(refused(
            "bucket bounds must be finite and strictly ascending".into(),
        ));
    }
    Ok(given.into())
}

/// The tenant's part of its families' names: its name with `-` and `.` written `_`. The config
/// keeps it unique among tenants, free of `__` and not ending in `_` (see [`check_tenant`]).
pub(crate) fn tenant_form(tenant: &str) -> String {
    tenant.replace(['-', '.'], "_")
}

/// Why `tenant` cannot have a metric namespace of its own, if it cannot: its form would hold
/// `__`, start or end with `_` (two separators in a row, or one at either end).
pub(crate) fn check_tenant(tenant: &str) -> Option<&'static str> {
    let form = tenant_form(tenant);
    if form.contains("__") {
        return Some("two of `-`, `_`, `.` in a row");
    }
    if form.starts_with('_') || form.ends_with('_') {
        return Some("a `-`, `_` or `.` at its start or end");
    }
    None
}

/// The name a family of `tenant`'s plugins called `family` has on `/metrics` (without a
/// counter's `_total`): `informant_plugin_NAME` for the operator's (tenant `""`),
/// `informant_tenant_FORM__NAME` for a tenant's.
pub(crate) fn exposed(tenant: &str, family: &str) -> String {
    match tenant {
        "" => format!("{PREFIX}{family}"),
        t => format!("{TENANT_PREFIX}{}__{family}", tenant_form(t)),
    }
}

/// Whether `c` ends a line for some reader, or is another control character: none of these is
/// written raw into the exposition.
fn breaks(c: char) -> bool {
    // Cc holds \n, \r, VT, FF, the separators U+001C-1E and NEL (U+0085); U+2028 and U+2029 are
    // the Unicode line and paragraph separators.
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// A label value as the exposition writes it: what a parser reads back is the value with each
/// `\` doubled and each line break or control character written `\n`, `\r`, `\t` or `\u{HEX}`,
/// so no value can end its line (for a reader splitting on `\r`, VT, FF, NEL, U+2028, U+2029
/// or `\n`), and two different values never read back the same. Applied to every label the
/// host writes: plugins' own values, and the plugin, tenant, informer, schedule and filter
/// names that come from files.
pub(crate) fn label_value(value: &str) -> Cow<'_, str> {
    if !value.chars().any(|c| c == '\\' || c == '"' || breaks(c)) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 16);
    for c in value.chars() {
        // Each is written escaped once more for the exposition's own quoting.
        match c {
            '\\' => out.push_str("\\\\\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\\\n"),
            '\r' => out.push_str("\\\\r"),
            '\t' => out.push_str("\\\\t"),
            c if breaks(c) => {
                let _ = write!(out, "\\\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` escaped for a `# HELP` line: backslash, double quote and newline, as OpenMetrics
/// asks (it has no other escapes); every other line break or control character becomes a
/// space, so a reader splitting on `\r`, NEL, U+2028 or U+2029 still reads one line.
pub(crate) fn escape_help(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if breaks(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_rules_and_leave_the_hosts_alone() {
        for ok in ["hits", "_x", "a1_b2", "Requests"] {
            assert_eq!(family(ok, Kind::Gauge), Ok(ok));
        }
        assert_eq!(family("hits_total", Kind::Counter), Ok("hits"));
        let long = "a".repeat(300);
        for bad in [
            "",
            "1abc",
            "a-b",
            "ä",
            "a:b",
            "a b",
            long.as_str(),
            "hits_total",
            "x_bucket",
            "x_count",
            "x_sum",
            "x_created",
            "events_received",
            "metric_series_refused",
        ] {
            let e = family(bad, Kind::Gauge).unwrap_err();
            assert!(matches!(e, MetricError::InvalidName { .. }), "{bad}: {e}");
            assert!(e.to_string().len() < 400, "{e}");
        }
        assert!(family("_total", Kind::Counter).is_err());
    }

    #[test]
    fn labels_the_host_sets_or_reserves_are_refused() {
        let l = |n: &str, v: &str| vec![(n.to_string(), v.to_string())];
        assert!(labels("m", Kind::Gauge, &l("ns", "default")).is_ok());
        for bad in ["plugin", "tenant", "__name__", "1x", "a-b", "", "é"] {
            let e = labels("m", Kind::Gauge, &l(bad, "v")).unwrap_err();
            assert!(matches!(e, MetricError::InvalidLabel { .. }), "{bad}: {e}");
        }
        assert!(labels("m", Kind::Histogram, &l("le", "1")).is_err());
        assert!(labels("m", Kind::Gauge, &l("le", "1")).is_ok());
        let huge = "v".repeat(MAX_LABEL_VALUE_BYTES + 1);
        let e = labels("m", Kind::Gauge, &l("k", &huge)).unwrap_err();
        assert!(e.to_string().contains("1025 bytes"), "{e}");
        let twice = [l("k", "a"), l("k", "b")].concat();
        assert!(labels("m", Kind::Gauge, &twice).is_err());
        let many: Vec<_> = (0..=MAX_LABELS)
            .map(|i| (format!("l{i}"), String::new()))
            .collect();
        assert!(labels("m", Kind::Gauge, &many).is_err());
    }

    #[test]
    fn buckets_ascend_and_help_stays_on_its_line() {
        assert_eq!(buckets("m", &[]).unwrap().len(), 11);
        assert_eq!(&*buckets("m", &[1.0, 2.0]).unwrap(), &[1.0, 2.0]);
        for bad in [&[2.0, 1.0][..], &[1.0, 1.0], &[f64::NAN], &[f64::INFINITY]] {
            assert!(buckets("m", bad).is_err(), "{bad:?}");
        }
        assert_eq!(escape_help("a \"b\"\\\nc\r"), r#"a \"b\"\\\nc "#);
    }
}
