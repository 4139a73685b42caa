//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors
//! (`metadata.name`, `metadata.namespace`, and any other dotted path into the object, compared as
//! strings). Parse errors are 400 BadRequest, as from a real apiserver.

use serde_json::Value;

use super::store::Obj;
use super::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct LabelSelector(Vec<(String, Op)>);

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Eq,
    NotEq,
    Bang,
    Open,
    Close,
    Comma,
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn tokenize(s: &str) -> Result<Vec<Tok>> {
    let bad = |why: &str| {
        Error::BadRequest(format!(
            "unable to parse requirement: {why} in label selector \"{s}\""
        ))
    };
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {}
            ',' => out.push(Tok::Comma),
            '(' => out.push(Tok::Open),
            ')' => out.push(Tok::Close),
            '=' => {
                if chars.peek() == Some(&'=') {
                    chars.next();
                }
                out.push(Tok::Eq);
            }
            '!' => {
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::NotEq);
                } else {
                    out.push(Tok::Bang);
                }
            }
            c if word_char(c) => {
                let mut w = c.to_string();
                while let Some(&n) = chars.peek().filter(|n| word_char(**n)) {
                    w.push(n);
                    chars.next();
                }
                out.push(Tok::Word(w));
            }
            other => return Err(bad(&format!("invalid character {other:?}"))),
        }
    }
    Ok(out)
}

fn valid_key(k: &str) -> bool {
    let (prefix, name) = k.rsplit_once('/').unwrap_or(("", k));
    !name.is_empty()
        && name.len() <= 63
        && !k.ends_with('/')
        && prefix.len() <= 253
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && !name.contains('/')
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63 && !v.contains('/')
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(s: &str) -> Result<LabelSelector> {
        let bad = |why: String| {
            Error::BadRequest(format!(
                "unable to parse requirement: {why} in label selector \"{s}\""
            ))
        };
        let toks = tokenize(s)?;
        let mut reqs = Vec::new();
        let mut i = 0;
        let word = |i: usize| match toks.get(i) {
            Some(Tok::Word(w)) => Some(w.clone()),
            _ => None,
        };
        while i < toks.len() {
            let negated = toks[i] == Tok::Bang;
            if negated {
                i += 1;
            }
            let key = word(i).ok_or_else(|| bad("expected a label key".into()))?;
            if !valid_key(&key) {
                return Err(bad(format!("invalid label key {key:?}")));
            }
            i += 1;
            let op = if negated {
                Op::NotExists
            } else {
                match toks.get(i) {
                    None | Some(Tok::Comma) => Op::Exists,
                    Some(Tok::Eq) | Some(Tok::NotEq) => {
                        let eq = toks[i] == Tok::Eq;
                        i += 1;
                        // An empty value is legal (`a=`), so a missing word is "".
                        let value = word(i).inspect(|_| i += 1).unwrap_or_default();
                        if !valid_value(&value) {
                            return Err(bad(format!("invalid label value {value:?}")));
                        }
                        if eq { Op::Eq(value) } else { Op::NotEq(value) }
                    }
                    Some(Tok::Word(w)) if w == "in" || w == "notin" => {
                        let is_in = w == "in";
                        i += 1;
                        if toks.get(i) != Some(&Tok::Open) {
                            return Err(bad(format!("expected '(' after '{w}'")));
                        }
                        i += 1;
                        let mut values = Vec::new();
                        loop {
                            match toks.get(i) {
                                Some(Tok::Word(v)) if valid_value(v) => values.push(v.clone()),
                                Some(Tok::Comma) => {}
                                Some(Tok::Close) => break,
                                _ => {
                                    return Err(
                                        bad("expected a value list ending with ')'".into()),
                                    );
                                }
                            }
                            i += 1;
                        }
                        i += 1;
                        if is_in {
                            Op::In(values)
                        } else {
                            Op::NotIn(values)
                        }
                    }
                    Some(_) => return Err(bad(format!("unexpected token after key {key:?}"))),
                }
            };
            reqs.push((key, op));
            match toks.get(i) {
                None => {}
                Some(Tok::Comma) if i + 1 < toks.len() => i += 1,
                Some(_) => return Err(bad("expected ',' between requirements".into())),
            }
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &[(Box<str>, Box<str>)]) -> bool {
        self.0.iter().all(|(key, op)| {
            let value = labels.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v);
            match op {
                Op::Eq(v) => value == Some(v.as_str()),
                Op::NotEq(v) => value != Some(v.as_str()),
                Op::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::NotIn(vs) => value.is_none_or(|x| !vs.iter().any(|v| v == x)),
                Op::Exists => value.is_some(),
                Op::NotExists => value.is_none(),
            }
        })
    }
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    pub fn parse(s: &str) -> Result<FieldSelector> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(Error::BadRequest(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field.is_empty() || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
                return Err(Error::BadRequest(format!(
                    "\"{field}\" is not a known field selector"
                )));
            }
            out.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object (stored under namespace/name) is selected.
    pub fn matches(&self, namespace: &str, name: &str, obj: &Obj) -> bool {
        let mut parsed: Option<Value> = None;
        self.0.iter().all(|(field, eq, want)| {
            let got = match field.as_str() {
                "metadata.name" => name.to_string(),
                "metadata.namespace" => namespace.to_string(),
                path => {
                    let v = parsed.get_or_insert_with(|| obj.value());
                    let mut cur = &*v;
                    for seg in path.split('.') {
                        cur = &cur[seg];
                    }
                    match cur {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    }
                }
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(Box<str>, Box<str>)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("tier notin (front)", false),
            ("app", true),
            ("!app", false),
            ("!missing,app", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&l),
                want,
                "{sel}"
            );
        }
        for bad in [
            "app in web",
            "=x",
            "a,,b",
            "app in (web",
            "a b",
            "a=b=c",
            "!",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }
}
