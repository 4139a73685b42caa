//! `informant status`'s table and JSON: what `/plugins` answered, one plugin a line.

use std::collections::BTreeMap;

use super::StatusRow;
use crate::plugin::text::escape_controls;

/// Longest error text a table cell shows; `--output json` has it whole.
pub(super) const ERROR_CELL: usize = 60;

/// How `informant status` shows a plugin's state: coloured for a terminal.
fn state_colour(state: &str) -> &'static str {
    match state {
        "running" => "\x1b[32m",
        "backing-off" => "\x1b[33m",
        "quarantined" => "\x1b[31m",
        _ => "\x1b[36m",
    }
}

/// The rows as an aligned table, one plugin a line under a header; `colour` adds ANSI colours
/// to the state (for a terminal only). `SINCE` is how long each has been in its state.
pub fn status_table(rows: &[StatusRow], colour: bool) -> String {
    table_at(rows, colour, jiff::Timestamp::now())
}

fn table_at(rows: &[StatusRow], colour: bool, now: jiff::Timestamp) -> String {
    const HEADER: [&str; 10] = [
        "TENANT",
        "PLUGIN",
        "STATE",
        "HANDLED",
        "FAILED",
        "RETRIED",
        "BACKLOG",
        "HOOKS",
        "SINCE",
        "LAST ERROR",
    ];
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            let error = r
                .last_error
                .clone()
                .or_else(|| r.waiting.as_ref().map(|w| format!("waiting: {}", w.reason)))
                .or_else(|| Some(format!("source: {}", r.source.as_ref()?.error.as_ref()?)))
                .unwrap_or_default();
            [
                tenant_cell(r),
                cell(&r.name, usize::MAX),
                cell(&r.state, usize::MAX),
                r.handled.to_string(),
                r.failed.to_string(),
                r.retried.to_string(),
                r.backlog.to_string(),
                hooks(r),
                age(&r.since, now),
                cell(&error, ERROR_CELL),
            ]
        })
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let numeric = |i: usize| (3..=6).contains(&i);
    let mut out = String::new();
    let mut line = |row: &[String], header: bool| {
        let mut text = String::new();
        for (i, c) in row.iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            let last = i == row.len() - 1;
            let shown = if colour && i == 2 && !header {
                format!("{}{c}\x1b[0m", state_colour(c))
            } else {
                c.clone()
            };
            if numeric(i) {
                text.push_str(&" ".repeat(pad));
                text.push_str(&shown);
            } else {
                text.push_str(&shown);
                if !last {
                    text.push_str(&" ".repeat(pad));
                }
            }
            if !last {
                text.push_str("  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&HEADER.map(String::from), true);
    for row in &cells {
        line(row, false);
    }
    out.push_str(&sources(rows));
    out
}

/// The pulled plugins' sources under the table, after a blank line: what each follows, the
/// digest it runs and who signed it; nothing when no plugin is pulled.
fn sources(rows: &[StatusRow]) -> String {
    let mut cells: Vec<[String; 5]> = rows
        .iter()
        .filter_map(|r| {
            let source = r.source.as_ref()?;
            Some([
                tenant_cell(r),
                cell(&r.name, usize::MAX),
                cell(&source.reference, usize::MAX),
                source
                    .pinned
                    .as_deref()
                    .and_then(|p| p.rsplit_once('@'))
                    .map_or("-".into(), |(_, digest)| cell(digest, usize::MAX)),
                source
                    .signer
                    .as_ref()
                    .map_or("-".into(), |s| cell(&s.to_string(), usize::MAX)),
            ])
        })
        .collect();
    if cells.is_empty() {
        return String::new();
    }
    cells.insert(
        0,
        ["TENANT", "PLUGIN", "SOURCE", "DIGEST", "SIGNED BY"].map(String::from),
    );
    let mut widths = [0; 5];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::from("\n");
    for row in &cells {
        let mut text = String::new();
        for (c, w) in row.iter().zip(widths) {
            text.push_str(c);
            text.push_str(&" ".repeat(w - c.chars().count() + 2));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// A row's tenant, `-` for a top-level plugin.
fn tenant_cell(r: &StatusRow) -> String {
    if r.tenant.is_empty() {
        "-".into()
    } else {
        cell(&r.tenant, usize::MAX)
    }
}

/// A plugin's admission hooks as `NAME(validate)`, comma-separated; `-` without any.
fn hooks(r: &StatusRow) -> String {
    if r.admission.is_empty() {
        return "-".into();
    }
    let names: Vec<String> = r
        .admission
        .iter()
        .map(|h| format!("{}({})", h.name, h.mode))
        .collect();
    cell(&names.join(","), ERROR_CELL)
}

/// `text` on one line (controls escaped), cut to `max` characters.
pub(super) fn cell(text: &str, max: usize) -> String {
    let one_line = escape_controls(text);
    if one_line.chars().count() <= max {
        return one_line.into_owned();
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// How long ago `since` was, as `kubectl` shows ages: `45s`, `3m12s`, `2h5m`, `4d3h`; `-` if it
/// is not a time.
fn age(since: &str, now: jiff::Timestamp) -> String {
    let Ok(then) = since.parse::<jiff::Timestamp>() else {
        return "-".into();
    };
    let secs = now.as_second().saturating_sub(then.as_second()).max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

/// Rows as `informant status --output json` prints them: `{"plugins": [...]}`.
pub fn status_json(rows: &[StatusRow]) -> String {
    let mut map = BTreeMap::new();
    map.insert("plugins", rows);
    serde_json::to_string_pretty(&map).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tenant: &str, name: &str, state: &str, error: Option<&str>) -> StatusRow {
        StatusRow {
            tenant: tenant.into(),
            name: name.into(),
            state: state.into(),
            handled: 1200,
            failed: 3,
            retried: 1,
            backlog: 0,
            last_error: error.map(str::to_string),
            since: "2026-11-27T08:00:00Z".into(),
            waiting: None,
            admission: match name {
                "echo" => vec![crate::plugin::load::status::HookStatus {
                    name: "images".into(),
                    kind: "apps/v1/Deployment".into(),
                    operations: vec!["create".into()],
                    mode: "validate".into(),
                    failure_policy: "fail".into(),
                    timeout_ms: 1000,
                }],
                _ => Vec::new(),
            },
            source: None,
        }
    }

    #[test]
    fn a_failed_pull_shows_when_nothing_else_went_wrong() {
        let now: jiff::Timestamp = "2026-11-27T09:05:30Z".parse().unwrap();
        let mut pulled = row("team-a", "policy", "running", None);
        pulled.source = Some(crate::plugin::load::status::SourceStatus {
            reference: "registry.example/team-a/policy:stable".into(),
            pinned: Some("registry.example/team-a/policy@sha256:ab".into()),
            error: Some(
                "`registry.example/team-a/policy:stable`: reading its manifest: Not authorized"
                    .into(),
            ),
            checked: "2026-11-27T09:05:00Z".into(),
            signer: None,
        });
        let table = table_at(&[pulled.clone()], false, now);
        assert!(
            table
                .lines()
                .nth(1)
                .unwrap()
                .contains("1h5m   source: `registry.example/team-a/policy:stable`: reading"),
            "{table}"
        );
        // Below the plugins, the source: what it follows, the digest it runs, who signed it.
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[2], "", "{table}");
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["TENANT", "PLUGIN", "SOURCE", "DIGEST", "SIGNED", "BY"]
        );
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            [
                "team-a",
                "policy",
                "registry.example/team-a/policy:stable",
                "sha256:ab",
                "-"
            ]
        );
        pulled.source.as_mut().unwrap().signer = Some(informant_oci::signature::Signer {
            key: "/etc/informant/keys/team-a.pub".into(),
            fingerprint: "sha256:5e1f".into(),
            issuer: None,
            identity: None,
        });
        let table = table_at(&[pulled, row("", "echo", "running", None)], false, now);
        assert!(
            table
                .lines()
                .last()
                .unwrap()
                .ends_with("sha256:ab  key /etc/informant/keys/team-a.pub (sha256:5e1f)"),
            "{table}"
        );
        // No pulled plugin, no sources section.
        let plain = table_at(&[row("", "echo", "running", None)], false, now);
        assert_eq!(plain.lines().count(), 2, "{plain}");
    }

    #[test]
    fn the_table_is_aligned_plain_without_colour_and_one_line_per_plugin() {
        let now: jiff::Timestamp = "2026-11-27T09:05:30Z".parse().unwrap();
        let rows = [
            row("", "echo", "running", None),
            row(
                "team-a",
                "flaky",
                "quarantined",
                Some("trap\n\x1b[2Jforged line"),
            ),
        ];
        let table = table_at(&rows, false, now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(!table.contains('\x1b'), "{table}");
        assert_eq!(
            lines[0],
            "TENANT  PLUGIN  STATE        HANDLED  FAILED  RETRIED  BACKLOG  HOOKS             SINCE  LAST ERROR"
        );
        assert_eq!(
            lines[1],
            "-       echo    running         1200       3        1        0  images(validate)  1h5m"
        );
        assert!(
            lines[2].starts_with("team-a  flaky   quarantined     1200"),
            "{table}"
        );
        assert!(
            lines[2].ends_with("trap\\n\\u{1b}[2Jforged line"),
            "{table}"
        );
        let coloured = table_at(&rows, true, now);
        assert!(coloured.contains("\x1b[32mrunning\x1b[0m"), "{coloured}");
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now: jiff::Timestamp = "2026-11-27T09:00:00Z".parse().unwrap();
        assert_eq!(age("2026-11-27T08:59:15Z", now), "45s");
        assert_eq!(age("2026-11-27T08:56:48Z", now), "3m12s");
        assert_eq!(age("2026-11-25T06:00:00Z", now), "2d3h");
        assert_eq!(age("", now), "-");
    }
}
