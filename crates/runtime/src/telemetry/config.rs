//! Where and how spans are exported: the endpoint, headers, trusted CAs and sampling, from the
//! CLI's flags and the environment variables the OpenTelemetry specification names.
//!
//! Read from the environment ([`ExportConfig::apply_env`]), as the spec says:
//! - `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs
//!   separated by `,`, values URL-encoded;
//! - `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE`, else `OTEL_EXPORTER_OTLP_CERTIFICATE`: a PEM file of
//!   CA certificates trusted for an `https://` endpoint besides the system's;
//! - `OTEL_TRACES_SAMPLER` (`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
//!   `parentbased_always_off`, `parentbased_traceidratio`) and `OTEL_TRACES_SAMPLER_ARG` (the
//!   ratio, 0 to 1, default 1).
//!
//! Unlike the spec's "log and ignore", a value the host cannot use stops it at start, naming the
//! variable (never a header's value): traces silently sent unauthenticated or unsampled are
//! worse than a clear refusal.
//!
//! An endpoint's user info (`https://user:password@host`) is sent as HTTP Basic authentication
//! (unless an `authorization` header is given) and taken out of the URL, so neither the
//! exporter, its errors nor the host's log ever hold it; every URL shown goes through
//! [`crate::redact::url`].

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::error::Error;
use crate::redact;

/// Which spans are exported: a share of traces, by trace id (the spec's `traceidratio`), and
/// whether a span with a parent follows its parent's decision instead (`parentbased_*`). Every
/// event's span is a root, so the two differ only in name here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// The share of traces exported, 0 to 1.
    pub ratio: f64,
    /// Whether a span with a parent follows its parent's decision.
    pub parent_based: bool,
}

impl Default for Sampling {
    /// Every trace (`parentbased_always_on`, the spec's default).
    fn default() -> Self {
        Sampling {
            ratio: 1.0,
            parent_based: true,
        }
    }
}

impl Sampling {
    /// `parentbased_traceidratio` with `ratio`, refused unless it is within 0 to 1.
    pub fn ratio(ratio: f64, from: &str) -> Result<Sampling, Error> {
        if !(0.0..=1.0).contains(&ratio) {
            return Err(Error::Sampler {
                from: from.to_string(),
                reason: format!("{ratio} is not a ratio from 0 to 1"),
            });
        }
        Ok(Sampling {
            ratio,
            parent_based: true,
        })
    }

    /// The sampler the spec's `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name.
    fn from_spec(name: &str, arg: Option<&str>) -> Result<Sampling, Error> {
        let bad = |reason: String| Error::Sampler {
            from: "OTEL_TRACES_SAMPLER".into(),
            reason,
        };
        let ratio = || -> Result<f64, Error> {
            match arg.map(str::trim).filter(|a| !a.is_empty()) {
                None => Ok(1.0),
                Some(a) => match a.parse::<f64>() {
                    Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                    _ => Err(Error::Sampler {
                        from: "OTEL_TRACES_SAMPLER_ARG".into(),
                        reason: format!("`{a}` is not a ratio from 0 to 1"),
                    }),
                },
            }
        };
        let (ratio, parent_based) = match name.trim() {
            "always_on" => (1.0, false),
            "always_off" => (0.0, false),
            "traceidratio" => (ratio()?, false),
            "parentbased_always_on" => (1.0, true),
            "parentbased_always_off" => (0.0, true),
            "parentbased_traceidratio" => (ratio()?, true),
            other => {
                return Err(bad(format!(
                    "`{other}` is not a sampler this host has: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
                )));
            }
        };
        Ok(Sampling {
            ratio,
            parent_based,
        })
    }

    /// The SDK's sampler.
    pub(super) fn sampler(&self) -> opentelemetry_sdk::trace::Sampler {
        use opentelemetry_sdk::trace::Sampler;
        let root = match self.ratio {
            r if r >= 1.0 => Sampler::AlwaysOn,
            r if r <= 0.0 => Sampler::AlwaysOff,
            r => Sampler::TraceIdRatioBased(r),
        };
        match self.parent_based {
            true => Sampler::ParentBased(Box::new(root)),
            false => root,
        }
    }
}

/// Where and how spans are exported.
#[derive(Clone)]
pub struct ExportConfig {
    /// The collector's OTLP/HTTP base URL (`http://host:4318` or `https://...`); spans go to
    /// `/v1/traces` under it. User info in it becomes Basic authentication.
    pub endpoint: String,
    /// Headers sent with every export, in order; a later one replaces an earlier one of the
    /// same name (names are case-insensitive).
    pub headers: Vec<(String, String)>,
    /// A PEM file of CA certificates trusted for an `https://` endpoint besides the system's.
    pub ca_file: Option<PathBuf>,
    /// Which traces are exported.
    pub sampling: Sampling,
    /// Finished spans held for export at most; past it they are dropped and counted.
    pub max_queue: usize,
    /// Spans sent in one request at most.
    pub max_batch: usize,
    /// Longest a finished span waits for its batch to be sent.
    pub delay: Duration,
    /// Bound on one export request.
    pub timeout: Duration,
}

/// Header values and user info are credentials: shown by name only.
impl std::fmt::Debug for ExportConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportConfig")
            .field("endpoint", &redact::url(&self.endpoint))
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("ca_file", &self.ca_file)
            .field("sampling", &self.sampling)
            .field("max_queue", &self.max_queue)
            .field("max_batch", &self.max_batch)
            .field("delay", &self.delay)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ExportConfig {
    /// Defaults for `endpoint`: no headers, the system's CAs, every trace; a 2,048-span queue,
    /// batches of 512, sent at least every second, each request bounded to 10 s.
    pub fn new(endpoint: impl Into<String>) -> Self {
        ExportConfig {
            endpoint: endpoint.into(),
            headers: Vec::new(),
            ca_file: None,
            sampling: Sampling::default(),
            max_queue: 2048,
            max_batch: 512,
            delay: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }

    /// Takes headers, CA file and sampler from the spec's environment variables, read with
    /// `var` (`std::env::var(..).ok()` in the CLI): what they set replaces this config's, and
    /// headers given here afterwards add to theirs.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), Error> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ] {
            if let Some(text) = set(name) {
                self.headers = parse_env_headers(&text, name)?;
                break;
            }
        }
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
        ] {
            if let Some(path) = set(name) {
                self.ca_file = Some(path.into());
                break;
            }
        }
        if let Some(name) = set("OTEL_TRACES_SAMPLER") {
            self.sampling = Sampling::from_spec(&name, set("OTEL_TRACES_SAMPLER_ARG").as_deref())?;
        }
        Ok(())
    }

    /// A `NAME=VALUE` header (the CLI's `--otlp-header`), checked, added after the others.
    pub fn add_header(&mut self, flag: &str) -> Result<(), Error> {
        let Some((name, value)) = flag.split_once('=') else {
            return Err(Error::Header {
                from: "--otlp-header".into(),
                name: String::new(),
                reason: "expected NAME=VALUE",
            });
        };
        let (name, value) = (name.trim(), value.trim());
        check_header(name, value, "--otlp-header")?;
        self.headers.push((name.to_string(), value.to_string()));
        Ok(())
    }

    /// The endpoint as logs and errors show it (no credentials).
    pub fn shown_endpoint(&self) -> String {
        redact::url(&self.endpoint).into_owned()
    }

    /// Where spans go and with what headers, once the endpoint is checked: the traces URL
    /// without user info, and the headers (user info as Basic authentication).
    pub(super) fn target(&self) -> Result<Target, Error> {
        let shown = self.shown_endpoint();
        let bad = |reason| Error::Endpoint {
            endpoint: shown.clone(),
            reason,
        };
        let uri: http::Uri = self.endpoint.parse().map_err(|_| bad("not a valid URL"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("not an absolute http:// or https:// URL")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.host().is_empty() {
            return Err(bad("no host"));
        }
        let userinfo = authority
            .as_str()
            .rsplit_once('@')
            .map(|(user, _)| user.to_string());
        let host_port = match authority.port() {
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_string(),
        };
        let path = uri.path().trim_end_matches('/');
        let query = uri.query().map_or(String::new(), |q| format!("?{q}"));
        let scheme = if tls { "https" } else { "http" };
        let url = format!("{scheme}://{host_port}{path}/v1/traces{query}");
        let mut headers = HeaderMap::new();
        if let Some(userinfo) = userinfo {
            let decoded = percent_encoding::percent_decode_str(&userinfo)
                .decode_utf8()
                .map_err(|_| bad("its user info is not UTF-8 once decoded"))?;
            let basic = base64::engine::general_purpose::STANDARD.encode(decoded.as_bytes());
            let mut value = HeaderValue::try_from(format!("Basic {basic}"))
                .map_err(|_| bad("its user info is not a valid credential"))?;
            value.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, value);
        }
        for (name, value) in &self.headers {
            let (name, mut value) = check_header(name, value, "headers")?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(Target {
            url,
            shown: redact::url(&format!("{scheme}://{host_port}{path}/v1/traces{query}"))
                .into_owned(),
            tls,
            headers,
        })
    }
}

/// A checked endpoint: what the exporter is given.
#[derive(Debug)]
pub(super) struct Target {
    /// The traces URL, without user info.
    pub(super) url: String,
    /// The traces URL as logs show it.
    pub(super) shown: String,
    /// Whether it is `https://`.
    pub(super) tls: bool,
    /// Every header sent with an export, marked sensitive.
    pub(super) headers: HeaderMap,
}

/// The spec's `name=value,...` with values URL-encoded, from variable `var`.
fn parse_env_headers(text: &str, var: &str) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(Error::Header {
                from: var.to_string(),
                name: String::new(),
                reason: "expected name=value pairs separated by `,`",
            });
        };
        let name = name.trim();
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| Error::Header {
                from: var.to_string(),
                name: name.to_string(),
                reason: "the value is not UTF-8 once URL-decoded",
            })?;
        check_header(name, &value, var)?;
        out.push((name.to_string(), value.into_owned()));
    }
    Ok(out)
}

/// `name` and `value` as an HTTP header, or why not (naming a valid header name, never the
/// value, nor a name that is not one: it may be a mistyped credential).
fn check_header(name: &str, value: &str, from: &str) -> Result<(HeaderName, HeaderValue), Error> {
    let bad = |name: &str, reason| Error::Header {
        from: from.to_string(),
        name: name.to_string(),
        reason,
    };
    let n = HeaderName::try_from(name)
        .map_err(|_| bad("", "the text before `=` is not a valid header name"))?;
    let v = HeaderValue::try_from(value).map_err(|_| {
        bad(
            name,
            "the value is not a valid header value (no control characters)",
        )
    })?;
    Ok((n, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn endpoints_take_http_or_https_and_traces_go_under_v1_traces() {
        let target = |e: &str| ExportConfig::new(e).target();
        for (given, url, tls) in [
            (
                "http://127.0.0.1:4318",
                "http://127.0.0.1:4318/v1/traces",
                false,
            ),
            (
                "http://collector:4318/otlp/",
                "http://collector:4318/otlp/v1/traces",
                false,
            ),
            (
                "https://otlp.example.com",
                "https://otlp.example.com/v1/traces",
                true,
            ),
            (
                "https://otlp.example.com:443/p?tenant=x",
                "https://otlp.example.com:443/p/v1/traces?tenant=x",
                true,
            ),
        ] {
            let t = target(given).unwrap();
            assert_eq!((t.url.as_str(), t.tls), (url, tls), "{given}");
        }
        for bad in [
            "collector:4318",
            "",
            "http://",
            "ftp://collector",
            "https:///x",
        ] {
            assert!(
                matches!(target(bad), Err(Error::Endpoint { .. })),
                "{bad:?} refused"
            );
        }
    }

    #[test]
    fn user_info_becomes_basic_authentication_and_leaves_the_url() {
        let t = ExportConfig::new("http://user:PASS%40WORD@127.0.0.1:4318")
            .target()
            .unwrap();
        assert_eq!(t.url, "http://127.0.0.1:4318/v1/traces");
        assert!(!t.shown.contains("PASS"));
        let auth = t.headers.get("authorization").unwrap();
        assert!(auth.is_sensitive());
        // base64("user:PASS@WORD")
        assert_eq!(auth.to_str().unwrap(), "Basic dXNlcjpQQVNTQFdPUkQ=");
        // An explicit header wins.
        let mut c = ExportConfig::new("http://user:pw@h");
        c.add_header("Authorization=Bearer t").unwrap();
        let t = c.target().unwrap();
        assert_eq!(t.headers["authorization"], "Bearer t");
        let shown = format!(
            "{c:?} {}",
            ExportConfig::new("http://u:PASSWORD@h").shown_endpoint()
        );
        assert!(
            !shown.contains("PASSWORD") && !shown.contains("Bearer"),
            "{shown}"
        );
        let e = ExportConfig::new("http://u:PASSWORD@exa mple/")
            .target()
            .unwrap_err();
        assert!(!e.to_string().contains("PASSWORD"), "{e}");
    }

    #[test]
    fn headers_come_from_the_signal_variable_else_the_general_one_and_flags_add() {
        let mut c = ExportConfig::new("http://h");
        c.apply_env(env(&[
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=general"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                " api-key = s%20e%2Ccret , x-team=a ",
            ),
        ]))
        .unwrap();
        assert_eq!(
            c.headers,
            [
                ("api-key".to_string(), "s e,cret".to_string()),
                ("x-team".to_string(), "a".to_string())
            ]
        );
        c.add_header("x-team=b").unwrap();
        let t = c.target().unwrap();
        assert_eq!(t.headers["x-team"], "b", "the flag replaces the variable's");
        assert_eq!(t.headers["api-key"], "s e,cret");
        let mut general = ExportConfig::new("http://h");
        general
            .apply_env(env(&[("OTEL_EXPORTER_OTLP_HEADERS", "a=general")]))
            .unwrap();
        assert_eq!(general.headers[0].1, "general");
        for (text, says) in [
            ("novalue", "expected name=value"),
            ("bad name=SECRET", "not a valid header name"),
            (
                "k=SECRET%0A",
                "OTLP header `k` from OTEL_EXPORTER_OTLP_HEADERS: the value is not a valid header value",
            ),
            ("k=%FF%FE", "not UTF-8"),
        ] {
            let e = ExportConfig::new("http://h")
                .apply_env(env(&[("OTEL_EXPORTER_OTLP_HEADERS", text)]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("OTEL_EXPORTER_OTLP_HEADERS") && e.contains(says),
                "{text}: {e}"
            );
            assert!(
                !e.contains("SECRET"),
                "a header's value is never shown: {e}"
            );
        }
        let e = ExportConfig::new("http://h")
            .add_header("nope")
            .unwrap_err();
        assert!(e.to_string().contains("--otlp-header"), "{e}");
    }

    #[test]
    fn samplers_are_read_as_the_spec_names_them() {
        let sampling = |vars: &[(&str, &str)]| {
            let mut c = ExportConfig::new("http://h");
            c.apply_env(env(vars)).map(|()| c.sampling)
        };
        assert_eq!(sampling(&[]).unwrap(), Sampling::default());
        for (name, arg, ratio, parent) in [
            ("always_on", None, 1.0, false),
            ("always_off", None, 0.0, false),
            ("traceidratio", Some("0.25"), 0.25, false),
            ("parentbased_always_on", None, 1.0, true),
            ("parentbased_always_off", None, 0.0, true),
            ("parentbased_traceidratio", Some("0"), 0.0, true),
            ("parentbased_traceidratio", None, 1.0, true),
        ] {
            let mut vars = vec![("OTEL_TRACES_SAMPLER", name)];
            vars.extend(arg.map(|a| ("OTEL_TRACES_SAMPLER_ARG", a)));
            assert_eq!(
                sampling(&vars).unwrap(),
                Sampling {
                    ratio,
                    parent_based: parent
                },
                "{name} {arg:?}"
            );
        }
        for (vars, says) in [
            (
                &[("OTEL_TRACES_SAMPLER", "jaeger_remote")][..],
                "OTEL_TRACES_SAMPLER",
            ),
            (
                &[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
                ],
                "OTEL_TRACES_SAMPLER_ARG",
            ),
            (
                &[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "NaN"),
                ],
                "not a ratio",
            ),
        ] {
            let e = sampling(vars).unwrap_err().to_string();
            assert!(e.contains(says), "{vars:?}: {e}");
        }
        assert!(Sampling::ratio(-0.1, "--trace-sample-ratio").is_err());
        assert!(Sampling::ratio(f64::NAN, "--trace-sample-ratio").is_err());
    }
}
