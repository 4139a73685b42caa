//! Validated text fields: `apiVersion`, label selectors, field paths, jq filters and namespaces,
//! each checked while deserializing so its error carries the TOML line.

use serde::Deserialize;

use crate::{ApiVersionError, FieldPath, FieldPathTextError, JqFilterTextError, LabelSelector, jq};

/// A validated `apiVersion`, `GROUP/VERSION` or `VERSION`; for a wildcard watch also `*` or
/// `GROUP/*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct ApiVersion(String);

impl ApiVersion {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// (group, version); the group is empty for core.
    pub fn split(&self) -> (&str, &str) {
        self.0.split_once('/').unwrap_or(("", &self.0))
    }

    /// Whether this is `*` or `GROUP/*`.
    pub fn is_wildcard(&self) -> bool {
        self.0 == "*" || self.0.ends_with("/*")
    }
}

impl TryFrom<String> for ApiVersion {
    type Error = ApiVersionError;
    fn try_from(s: String) -> Result<Self, ApiVersionError> {
        let ok_part = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        };
        let valid = match s.split_once('/') {
            _ if s == "*" => true,
            Some((g, v)) => ok_part(g) && (ok_part(v) || v == "*"),
            None => ok_part(&s),
        };
        if valid {
            Ok(ApiVersion(s))
        } else {
            Err(ApiVersionError(s))
        }
    }
}

/// A label selector checked while deserializing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SelectorText(pub String);

impl TryFrom<String> for SelectorText {
    type Error = informant_apimachinery::SelectorError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        LabelSelector::parse(&s)?;
        Ok(SelectorText(s))
    }
}

/// A field path checked while deserializing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct FieldPathText(pub FieldPath);

impl TryFrom<String> for FieldPathText {
    type Error = FieldPathTextError;
    fn try_from(s: String) -> Result<Self, FieldPathTextError> {
        match s.parse() {
            Ok(path) => Ok(FieldPathText(path)),
            Err(source) => Err(FieldPathTextError { text: s, source }),
        }
    }
}

/// A change filter (jq program) checked and compiled while deserializing, so its error carries
/// the TOML line; the host compiles its own copy from the text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct JqFilterText(pub String);

impl TryFrom<String> for JqFilterText {
    type Error = JqFilterTextError;
    fn try_from(s: String) -> Result<Self, JqFilterTextError> {
        jq::JqFilter::compile(&s).map_err(JqFilterTextError)?;
        Ok(JqFilterText(s))
    }
}

/// A namespace checked while deserializing. An empty or malformed one is refused here rather
/// than sent to the API server, where `""` would make a request path with an empty segment.
pub(crate) fn namespace<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    informant_apimachinery::names::check_namespace(&s)
        .map_err(|why| serde::de::Error::custom(format!("invalid namespace: {why}")))?;
    Ok(Some(s))
}

/// `namespaces = [..]` checked while deserializing: every name valid, none twice, at least one,
/// so an error carries the TOML line of the list.
pub(crate) fn namespace_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<String>, D::Error> {
    let list = Vec::<String>::deserialize(d)?;
    if list.is_empty() {
        return Err(serde::de::Error::custom(
            "must name at least one namespace (omit it to watch every namespace)",
        ));
    }
    for (i, ns) in list.iter().enumerate() {
        informant_apimachinery::names::check_namespace(ns).map_err(|why| {
            serde::de::Error::custom(format!("invalid namespace at [{i}]: {why}"))
        })?;
        if list[..i].contains(ns) {
            return Err(serde::de::Error::custom(format!(
                "namespace `{ns}` is listed twice"
            )));
        }
    }
    Ok(list)
}
