//! Label selectors in the Kubernetes string syntax, for the in-memory cache.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed selector: all requirements must hold (the empty selector matches everything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`,
    /// `!key`, comma-separated.
    pub(crate) fn parse(text: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(text).map_err(|r| format!("`{text}`: {r}"))? {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(format!("`{text}`: empty requirement"));
            }
            reqs.push(parse_requirement(part).map_err(|r| format!("`{text}`: `{part}`: {r}"))?);
        }
        Ok(Selector(reqs))
    }

    /// Whether labels satisfy every requirement.
    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err(format!("nested `(` at offset {i}")),
            ')' if depth == 1 => depth = 0,
            ')' => return Err(format!("unmatched `)` at offset {i}")),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unclosed `(`".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key_of(key)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key_of(k)?, value_of(v)?));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(key_of(k)?, value_of(v)?));
    }
    if let Some((k, rest)) = part.split_once(char::is_whitespace) {
        let rest = rest.trim_start();
        let op_end = rest
            .find(|c: char| c == '(' || c.is_whitespace())
            .ok_or_else(|| format!("expected `in (...)` or `notin (...)` after `{k}`"))?;
        let (op, list) = rest.split_at(op_end);
        let values = list
            .trim()
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("expected a parenthesised value list after `{op}`"))?;
        let values = values
            .split(',')
            .map(value_of)
            .collect::<Result<Vec<_>, _>>()?;
        return match op {
            "in" => Ok(Requirement::In(key_of(k)?, values)),
            "notin" => Ok(Requirement::NotIn(key_of(k)?, values)),
            other => Err(format!("unknown operator `{other}`")),
        };
    }
    Ok(Requirement::Exists(key_of(part)?))
}

fn key_of(k: &str) -> Result<String, String> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && k.matches('/').count() <= 1;
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key `{k}`"))
    }
}

fn value_of(v: &str) -> Result<String, String> {
    let v = v.trim();
    let ok = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!("invalid label value `{v}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn operators_match_like_kubernetes() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let yes = [
            "",
            "app",
            "app=web",
            "app==web",
            "app!=db",
            "tier in (front,back)",
            "x notin (a)",
            "!x",
            "app=web,!team",
        ];
        for s in yes {
            assert!(Selector::parse(s).unwrap().matches(&l), "{s} should match");
        }
        let no = [
            "team",
            "app=db",
            "app!=web",
            "tier in (back)",
            "tier notin (front)",
            "!app",
            "app=web,team",
        ];
        for s in no {
            assert!(
                !Selector::parse(s).unwrap().matches(&l),
                "{s} should not match"
            );
        }
    }

    #[test]
    fn bad_selectors_say_where() {
        let err = Selector::parse("app=web,tier in (a").unwrap_err();
        assert!(err.contains("unclosed"), "{err}");
        let err = Selector::parse("app=web,,x").unwrap_err();
        assert!(err.contains("empty requirement"), "{err}");
        let err = Selector::parse("a b (c)").unwrap_err();
        assert!(err.contains("unknown operator `b`"), "{err}");
        assert!(Selector::parse("app=we b").is_err());
    }
}
