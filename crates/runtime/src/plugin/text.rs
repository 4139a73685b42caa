//! Plugin-made text (log lines, errors, trap backtraces), cut to a bound and kept on one line
//! before the host logs or shows it: every layer that passes such text on uses these.

/// `text` cut to at most `max` bytes (on a character boundary), saying how long it was.
pub(crate) fn truncated(mut text: String, max: usize) -> String {
    if text.len() > max {
        let total = text.len();
        let cut = (0..=max)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str(&format!("… ({total} bytes in all)"));
    }
    text
}

/// `text` with control characters (newlines included) written as escapes, so it stays on one
/// line of the host's log whatever a plugin put in it.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(char::is_control) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_text_stays_on_one_line_and_within_bounds() {
        let forged =
            "ok\n2026-11-23T00:00:00Z  INFO plugin=\"b\" tenant=\"team-b\" forged\r\u{1b}[2J";
        let line = escape_controls(forged);
        assert!(!line.contains(char::is_control), "{line}");
        assert!(line.starts_with("ok\\n2026"), "{line}");
        assert_eq!(escape_controls("plain, ünïcode"), "plain, ünïcode");
        let long = truncated("é".repeat(10), 5);
        assert_eq!(long, "éé… (20 bytes in all)");
        assert_eq!(truncated("short".into(), 5), "short");
    }
}
