//! Credentials out of what is logged or shown: [`url`] hides a URL's user info
//! (`user:password@`) and its query values, wherever a URL given by a user, a file or the
//! environment is written to a log, an error or an endpoint.
//!
//! It works on text, not on a parsed URL: text that no URL parser accepts is still hidden, so a
//! malformed endpoint can be named in its own error message safely.

use std::borrow::Cow;

/// What hidden text is replaced with.
pub(crate) const REDACTED: &str = "REDACTED";

/// `text` (a URL, or something meant as one) with everything before the last `@` of its
/// authority replaced by [`REDACTED`], and the value of each `key=value` of its query too;
/// borrowed unchanged when it holds neither: `https://u:pw@otel:4318/v1?k=s#f` is shown as
/// `https://REDACTED@otel:4318/v1?k=REDACTED#f`, `http://otel:4318` as it is.
pub(crate) fn url(text: &str) -> Cow<'_, str> {
    let start = text.find("://").map_or(0, |i| i + 3);
    let end = text[start..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |i| start + i);
    let userinfo = text[start..end].rfind('@').map(|at| start + at);
    let query = text.find('?').map(|q| {
        let stop = text[q..].find('#').map_or(text.len(), |i| q + i);
        (q + 1, stop)
    });
    let secret_query = query.is_some_and(|(q, stop)| text[q..stop].contains('='));
    if userinfo.is_none() && !secret_query {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..start]);
    let after_user = match userinfo {
        Some(at) => {
            out.push_str(REDACTED);
            at
        }
        None => start,
    };
    match query {
        Some((q, stop)) if secret_query => {
            out.push_str(&text[after_user..q]);
            let pairs: Vec<String> = text[q..stop]
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) => format!("{k}={REDACTED}"),
                    None => pair.to_string(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
            out.push_str(&text[stop..]);
        }
        _ => out.push_str(&text[after_user..]),
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_and_query_values_are_hidden_however_the_url_is_spelled() {
        for (given, shown) in [
            ("http://otel:4318", "http://otel:4318"),
            (
                "https://u:pw@otel:4318/v1?k=s#f",
                "https://REDACTED@otel:4318/v1?k=REDACTED#f",
            ),
            (
                "http://user:PASSWORD@otel:4318",
                "http://REDACTED@otel:4318",
            ),
            ("https://PASSWORD@otel", "https://REDACTED@otel"),
            ("http://a@b:PASSWORD@otel/x", "http://REDACTED@otel/x"),
            ("user:PASSWORD@otel:4318", "REDACTED@otel:4318"),
            (
                "http://u:PASSWORD@[::1]:4318/p",
                "http://REDACTED@[::1]:4318/p",
            ),
            (
                "http://otel/v1?token=PASSWORD&x=PASSWORD#frag",
                "http://otel/v1?token=REDACTED&x=REDACTED#frag",
            ),
            ("http://otel/a@b", "http://otel/a@b"),
            ("http://otel?flag", "http://otel?flag"),
            ("not a url at all", "not a url at all"),
            ("", ""),
            ("http://u:PASS%40WORD@otel", "http://REDACTED@otel"),
        ] {
            assert_eq!(url(given), shown, "{given}");
            assert!(!url(given).contains("PASSWORD"), "{given}");
        }
    }
}
