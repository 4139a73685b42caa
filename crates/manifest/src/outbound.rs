//! Origins a plugin may send HTTP requests to (`allowed-outbound-hosts`), as Spin spells them:
//! `scheme://host[:port]`.
//!
//! - `scheme` is `http` or `https` (any case); nothing else.
//! - `host` is a DNS name (letters, digits, `-`, dots between labels; no trailing dot), an IPv4
//!   address in dotted decimal, or an IPv6 address in brackets (`[::1]`). It is compared in its
//!   canonical form: lowercase, IPv6 compressed. Host wildcards (`*.example.com`) are **not**
//!   supported: each host is listed, so a ceiling can always be read as the hosts it allows.
//! - `port` is a number, `*` for any port, or absent for the scheme's default (80, 443).
//! - No user info, path, query or fragment (a trailing `/` alone is accepted).
//!
//! A request matches an origin when its scheme, canonical host and port (the default one when
//! the URL gives none) are equal; a ceiling covers an origin when it would match every request
//! that origin matches.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Deserialize;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// Parses a scheme, any case; `None` for anything but `http` and `https`.
    pub fn parse(s: &str) -> Option<Scheme> {
        if s.eq_ignore_ascii_case("http") {
            Some(Scheme::Http)
        } else if s.eq_ignore_ascii_case("https") {
            Some(Scheme::Https)
        } else {
            None
        }
    }

    /// The port a URL without one means.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The scheme's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A port an origin allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortPattern {
    /// This port only.
    Exact(u16),
    /// `*`: any port.
    Any,
}

/// One allowed origin: `scheme://host[:port]`, host canonical.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct Origin {
    /// The scheme.
    pub scheme: Scheme,
    /// The canonical host (lowercase; IPv6 in brackets, compressed).
    pub host: String,
    /// The port(s).
    pub port: PortPattern,
}

impl Origin {
    /// Whether a request to (`scheme`, canonical `host`, `port`) is allowed by this origin.
    pub fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        self.scheme == scheme
            && self.host == host
            && match self.port {
                PortPattern::Any => true,
                PortPattern::Exact(p) => p == port,
            }
    }

    /// Whether every request `other` allows is also allowed by `self` (a ceiling check).
    pub fn covers(&self, other: &Origin) -> bool {
        self.scheme == other.scheme
            && self.host == other.host
            && match (self.port, other.port) {
                (PortPattern::Any, _) => true,
                (PortPattern::Exact(a), PortPattern::Exact(b)) => a == b,
                (PortPattern::Exact(_), PortPattern::Any) => false,
            }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.host)?;
        match self.port {
            PortPattern::Any => write!(f, ":*"),
            PortPattern::Exact(p) => write!(f, ":{p}"),
        }
    }
}

/// Why text is not an allowed origin: the text, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid origin `{text}`: {flaw}")]
pub struct OriginError {
    /// The origin as written.
    pub text: String,
    /// What is wrong with it.
    pub flaw: OriginFlaw,
}

/// What is wrong with an origin, or with a request URL's scheme, host or port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginFlaw {
    /// No `://`.
    #[error("expected `scheme://host[:port]`, e.g. `https://hooks.slack.com`")]
    NoScheme,
    /// A scheme other than `http` and `https`.
    #[error("scheme `{0}` is not allowed (only `http` and `https`)")]
    Scheme(String),
    /// A path, query or fragment after the authority.
    #[error("an origin has no path, query or fragment")]
    PathQueryOrFragment,
    /// `*` in the host.
    #[error("host wildcards are not supported: list each host (`*` is allowed as the port only)")]
    HostWildcard,
    /// `user@` before the host.
    #[error("user info (`user@`) is not allowed")]
    UserInfo,
    /// No host.
    #[error("the host is empty")]
    EmptyHost,
    /// `[` without its `]`.
    #[error("an IPv6 address needs its closing `]`")]
    UnclosedIpv6,
    /// Something other than `:port` after an IPv6 address.
    #[error("unexpected `{0}` after the IPv6 address")]
    AfterIpv6(String),
    /// A port that is not 1..=65535 in digits.
    #[error("port `{0}` is not a number from 1 to 65535")]
    Port(String),
    /// Brackets around something that is not an IPv6 address.
    #[error("`{text}` is not an IPv6 address (zone ids are not allowed)")]
    NotIpv6 {
        /// What the brackets held.
        text: String,
        /// Why the address parser refused it.
        #[source]
        source: std::net::AddrParseError,
    },
    /// Digits and dots that are not a dotted-decimal IPv4 address.
    #[error("`{text}` is not a dotted-decimal IPv4 address")]
    NotIpv4 {
        /// The host.
        text: String,
        /// Why the address parser refused it.
        #[source]
        source: std::net::AddrParseError,
    },
    /// Not a DNS name.
    #[error(
        "`{0}` is not a host name (labels of letters, digits and `-` joined by dots, no trailing dot)"
    )]
    NotAHostName(String),
}

impl TryFrom<String> for Origin {
    type Error = OriginError;
    fn try_from(s: String) -> Result<Self, OriginError> {
        parse_origin(&s).map_err(|flaw| OriginError { text: s, flaw })
    }
}

fn parse_origin(s: &str) -> Result<Origin, OriginFlaw> {
    let (scheme, rest) = s.split_once("://").ok_or(OriginFlaw::NoScheme)?;
    let scheme = Scheme::parse(scheme).ok_or_else(|| OriginFlaw::Scheme(scheme.to_string()))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#']) {
        return Err(OriginFlaw::PathQueryOrFragment);
    }
    let (host, port) = split_authority(authority)?;
    if host.contains('*') {
        return Err(OriginFlaw::HostWildcard);
    }
    let host = canonical_host(host)?;
    let port = match port {
        None => PortPattern::Exact(scheme.default_port()),
        Some("*") => PortPattern::Any,
        Some(p) => PortPattern::Exact(parse_port(p)?),
    };
    Ok(Origin { scheme, host, port })
}

/// Splits `host[:port]`, refusing user info. The port is returned unparsed.
pub fn split_authority(authority: &str) -> Result<(&str, Option<&str>), OriginFlaw> {
    if authority.contains('@') {
        return Err(OriginFlaw::UserInfo);
    }
    if authority.is_empty() {
        return Err(OriginFlaw::EmptyHost);
    }
    if authority.starts_with('[') {
        let end = authority.find(']').ok_or(OriginFlaw::UnclosedIpv6)?;
        let (host, rest) = authority.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => match rest.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(OriginFlaw::AfterIpv6(rest.to_string())),
            },
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// A port number 1..=65535, digits only.
pub fn parse_port(p: &str) -> Result<u16, OriginFlaw> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(OriginFlaw::Port(p.to_string()));
    }
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(OriginFlaw::Port(p.to_string())),
    }
}

/// The canonical spelling of a host: a lowercase DNS name, a dotted-decimal IPv4 address, or a
/// bracketed, compressed IPv6 address. Anything else (a trailing dot, a zone id, `_`, empty
/// labels, a name over 253 bytes) is refused, so two spellings of one host never both pass.
pub fn canonical_host(host: &str) -> Result<String, OriginFlaw> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(OriginFlaw::UnclosedIpv6)?;
        let ip: Ipv6Addr = inner.parse().map_err(|source| OriginFlaw::NotIpv6 {
            text: inner.to_string(),
            source,
        })?;
        return Ok(format!("[{ip}]"));
    }
    let host = host.to_ascii_lowercase();
    if host.is_empty() {
        return Err(OriginFlaw::EmptyHost);
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // All digits and dots: only a full dotted-decimal IPv4 address, never `127.1` or a
        // bare number, which resolvers read as addresses in surprising ways.
        let ip: Ipv4Addr = host.parse().map_err(|source| OriginFlaw::NotIpv4 {
            text: host.clone(),
            source,
        })?;
        return Ok(ip.to_string());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(OriginFlaw::NotAHostName(host));
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(s: &str) -> Result<Origin, String> {
        Origin::try_from(s.to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn origins_are_canonical() {
        let o = origin("HTTPS://Hooks.Slack.COM").unwrap();
        assert_eq!(o.to_string(), "https://hooks.slack.com:443");
        assert_eq!(origin("http://127.0.0.1:*").unwrap().port, PortPattern::Any);
        assert_eq!(
            origin("http://[0:0::1]:8080/").unwrap().to_string(),
            "http://[::1]:8080"
        );
        assert!(
            origin("http://127.0.0.1")
                .unwrap()
                .matches(Scheme::Http, "127.0.0.1", 80)
        );
    }

    #[test]
    fn malformed_origins_are_refused_with_a_reason() {
        for (bad, why) in [
            ("hooks.slack.com", "expected `scheme://host[:port]`"),
            ("ftp://example.com", "scheme `ftp` is not allowed"),
            ("https://*.example.com", "host wildcards are not supported"),
            ("http://user@127.0.0.1:8080", "user info"),
            ("http://example.com./", "not a host name"),
            ("http://example.com/path", "no path"),
            ("http://127.0.0.1:8080.evil.com", "port `8080.evil.com`"),
            ("http://127.1", "not a dotted-decimal IPv4"),
            ("http://example.com:0", "port `0`"),
            ("http://example.com:65536", "port `65536`"),
            ("http://[fe80::1%25eth0]", "not an IPv6 address"),
            ("http://", "the host is empty"),
            ("http://a_b.example", "not a host name"),
        ] {
            let err = origin(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }

    #[test]
    fn a_ceiling_covers_only_what_it_allows() {
        let any = origin("http://127.0.0.1:*").unwrap();
        let one = origin("http://127.0.0.1:8080").unwrap();
        assert!(any.covers(&one));
        assert!(!one.covers(&any));
        assert!(!one.covers(&origin("http://127.0.0.1:8081").unwrap()));
        assert!(!one.covers(&origin("https://127.0.0.1:8080").unwrap()));
        assert!(
            origin("https://hooks.slack.com")
                .unwrap()
                .covers(&origin("https://hooks.slack.com:443").unwrap())
        );
    }
}
