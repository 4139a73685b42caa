//! `informant dead-letters`: a host's dead letters listed, retried or dropped through its admin
//! server (see [`crate::admin::dead_letters`] for what the routes do).

use super::table::{ERROR_CELL, cell};
use super::{AdminClient, Result};
use informant_state::DeadLetter;

use crate::admin::dead_letters::{Outcome, Page, Selection};

impl AdminClient {
    /// The dead letters of `plugin` (`tenant/name`, or `name`), or of every plugin, following
    /// the server's pages to the last.
    pub async fn dead_letters(&self, plugin: Option<&str>) -> Result<Vec<DeadLetter>> {
        let mut letters = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut query = form_urlencoded::Serializer::new(String::new());
            if let Some(p) = plugin {
                query.append_pair("plugin", p);
            }
            if let Some(token) = &next {
                query.append_pair("continue", token);
            }
            let path = format!("/dead-letters?{}", query.finish());
            let page: Page = self.json(http::Method::GET, &path, None).await?;
            letters.extend(page.dead_letters);
            match page.continue_token {
                // A token that does not move on would page forever: what was read is all.
                Some(token) if next.as_ref() != Some(&token) => next = Some(token),
                _ => return Ok(letters),
            }
        }
    }

    /// Delivers the selected letters' objects again (see [`crate::admin::dead_letters`]).
    pub async fn retry_dead_letters(&self, selection: &Selection) -> Result<Outcome> {
        self.act("/dead-letters/retry", selection).await
    }

    /// Drops the selected letters.
    pub async fn drop_dead_letters(&self, selection: &Selection) -> Result<Outcome> {
        self.act("/dead-letters/drop", selection).await
    }

    async fn act(&self, path: &str, selection: &Selection) -> Result<Outcome> {
        let body = serde_json::to_vec(selection).map_err(|source| self.decode(path, source))?;
        self.json(http::Method::POST, path, Some(body)).await
    }
}

/// The kind an informer id names (`apps/v1/deployments@ns[sel]` -> `deployments`).
fn kind_of(informer: &str) -> &str {
    let end = informer.find(['@', '[']).unwrap_or(informer.len());
    let path = &informer[..end];
    path.rsplit('/').next().unwrap_or(path)
}

/// The letters as an aligned table, one a line under a header; text cells on one line,
/// controls escaped, the error cut to 60 characters (`--output json` has it whole).
pub fn dead_letters_table(letters: &[DeadLetter]) -> String {
    const HEADER: [&str; 8] = [
        "ID", "PLUGIN", "KIND/KEY", "VERSION", "EVENT", "ATTEMPTS", "AT", "ERROR",
    ];
    let rows: Vec<[String; 8]> = letters
        .iter()
        .map(|l| {
            [
                l.id.to_string(),
                cell(&l.plugin, usize::MAX),
                cell(&format!("{} {}", kind_of(&l.informer), l.key), usize::MAX),
                cell(&l.resource_version, usize::MAX),
                cell(&l.event, usize::MAX),
                l.attempts.to_string(),
                cell(&shown_at(l.at_unix_ms), usize::MAX),
                cell(&l.error, ERROR_CELL),
            ]
        })
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(HEADER.map(String::from)).chain(rows) {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
            // Attempts are a number: right-aligned.
            if i == 5 {
                line.push_str(&pad);
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&pad);
            }
            line.push_str("  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// What `retry` or `drop` did, in words: one line per kind of outcome that happened.
pub fn outcome_text(o: &Outcome) -> String {
    let ids = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let plugin = cell(&o.plugin, usize::MAX);
    let mut out = String::new();
    if !o.retried.is_empty() {
        out.push_str(&format!("{plugin}: delivered again: {}\n", ids(&o.retried)));
    }
    if !o.dropped.is_empty() {
        out.push_str(&format!("{plugin}: dropped: {}\n", ids(&o.dropped)));
    }
    for k in &o.kept {
        out.push_str(&format!(
            "{plugin}: kept {}: {}\n",
            k.id,
            cell(&k.reason, usize::MAX)
        ));
    }
    if !o.missing.is_empty() {
        out.push_str(&format!("{plugin}: no such letter: {}\n", ids(&o.missing)));
    }
    if out.is_empty() {
        out.push_str(&format!("{plugin}: no dead letters\n"));
    }
    out
}

/// When a letter was given up on, as RFC 3339 (its milliseconds, should they be out of range).
fn shown_at(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::dead_letters::Kept;

    fn ms(at: &str) -> i64 {
        at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn the_table_is_aligned_with_one_line_per_letter_whatever_the_error_holds() {
        let letters = [
            DeadLetter {
                id: 7,
                plugin: "team-a/p".into(),
                informer: "/v1/configmaps@demo".into(),
                key: "demo/bad".into(),
                resource_version: "42".into(),
                event: "added".into(),
                error: "returned an error: boom\n\x1b[2Jforged".into(),
                attempts: 1,
                at_unix_ms: ms("2026-11-27T09:00:00Z"),
            },
            DeadLetter {
                id: 12,
                plugin: "top".into(),
                informer: "apps/v1/deployments[app=x]".into(),
                key: "web".into(),
                resource_version: "7".into(),
                event: "updated".into(),
                error: "x".repeat(200),
                attempts: 6,
                at_unix_ms: ms("2026-11-27T09:00:01Z"),
            },
        ];
        let table = dead_letters_table(&letters);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert_eq!(
            lines[0],
            "ID  PLUGIN    KIND/KEY             VERSION  EVENT    ATTEMPTS  AT                    ERROR"
        );
        assert!(
            lines[1].starts_with("7   team-a/p  configmaps demo/bad  42       added           1"),
            "{table}"
        );
        assert!(lines[1].ends_with("boom\\n\\u{1b}[2Jforged"), "{table}");
        assert!(
            lines[2].starts_with("12  top       deployments web"),
            "{table}"
        );
        assert!(lines[2].ends_with('…'), "cut: {table}");
        assert!(!table.contains('\x1b'));
    }

    #[test]
    fn outcomes_say_what_happened_to_each_id() {
        let o = Outcome {
            plugin: "team-a/p".into(),
            retried: vec![1, 2],
            kept: vec![Kept {
                id: 3,
                reason: "the object is gone".into(),
            }],
            missing: vec![9],
            ..Outcome::default()
        };
        assert_eq!(
            outcome_text(&o),
            "team-a/p: delivered again: 1, 2\nteam-a/p: kept 3: the object is gone\nteam-a/p: no such letter: 9\n"
        );
        assert_eq!(
            outcome_text(&Outcome {
                plugin: "p".into(),
                ..Outcome::default()
            }),
            "p: no dead letters\n"
        );
    }
}
