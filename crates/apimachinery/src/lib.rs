//! The parts of Kubernetes apimachinery Informant needs, parsed once with the API server's rules
//! and shared by the informer, the embedded API server, plugin manifests and the SDK's test
//! harness: label selectors ([`LabelSelector`], apimachinery's `labels`), JSON field paths
//! ([`FieldPath`], as `fields` and field indexes use them) and object and namespace name rules
//! ([`names`], apimachinery's `validation`).
//!
//! Label selectors: the Kubernetes string syntax, matched against any label lookup — the
//! informer's cached objects and the embedded API server's stored ones alike.
//!
//! Grammar (as apimachinery's `labels.Parse`): comma-separated requirements, each one of
//! `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` (exists) and
//! `!key` (does not exist). Keys and values are checked with the API server's rules, so a selector
//! this accepts is one the server accepts too.

mod field_path;
pub mod names;
#[cfg(test)]
mod proptests;

pub use field_path::{FieldPath, FieldPathError};

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Why a selector string was rejected; the message names the selector and the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector `{selector}`: {reason}")]
pub struct SelectorError {
    /// The whole selector as given.
    pub selector: String,
    /// What is wrong with it.
    pub reason: SelectorReason,
}

/// What is wrong with a selector, naming the offending part (and its byte offset where the
/// grammar, not a key or value, is broken).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorReason {
    /// A key is followed by something that starts no operator.
    #[error("unexpected `{found}` after key `{key}` at offset {offset}")]
    UnexpectedAfterKey {
        /// The character found.
        found: char,
        /// The key before it.
        key: String,
        /// Where it is.
        offset: usize,
    },
    /// A key is followed by a word that is no operator.
    #[error("unknown operator `{operator}` after key `{key}` (expected =, ==, !=, in, notin)")]
    UnknownOperator {
        /// The word found.
        operator: String,
        /// The key before it.
        key: String,
    },
    /// No key where one must be.
    #[error("expected a label key at offset {offset}")]
    MissingKey {
        /// Where the key should be.
        offset: usize,
    },
    /// An operator where a key must be.
    #[error("expected a label key, found the operator `{operator}`")]
    OperatorAsKey {
        /// `in` or `notin`.
        operator: String,
    },
    /// `key in ()` or `key notin ()`.
    #[error("the value set of key `{key}` needs at least one value")]
    EmptyValueSet {
        /// The key.
        key: String,
    },
    /// The selector ended where a token must be.
    #[error("expected `{expected}` but the selector ended")]
    Ended {
        /// The token.
        expected: &'static str,
    },
    /// Something else where a token must be.
    #[error("expected `{expected}` at offset {offset}, found `{found}`")]
    Unexpected {
        /// The token.
        expected: &'static str,
        /// Where it should be.
        offset: usize,
        /// The rest of the selector from there.
        found: String,
    },
    /// A key's prefix is not a DNS subdomain.
    #[error("label key `{key}` has an invalid prefix `{prefix}` (must be a DNS subdomain)")]
    InvalidKeyPrefix {
        /// The key.
        key: String,
        /// Its prefix.
        prefix: String,
    },
    /// A key's name part breaks the rules.
    #[error(
        "label key `{key}` is invalid (name part must be 1-63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric)"
    )]
    InvalidKey {
        /// The key.
        key: String,
    },
    /// A value breaks the rules.
    #[error(
        "label value `{value}` is invalid (at most 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric)"
    )]
    InvalidValue {
        /// The value.
        value: String,
    },
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the label is absent).
    NotEquals(String, String),
    /// `key in (v1,v2)`.
    In(String, BTreeSet<String>),
    /// `key notin (v1,v2)` (also true when the label is absent).
    NotIn(String, BTreeSet<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

impl Requirement {
    /// The label key this requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::Equals(k, _)
            | Requirement::NotEquals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k,
        }
    }

    fn matches<'v>(&self, label: &impl Fn(&str) -> Option<&'v str>) -> bool {
        let value = label(self.key());
        match self {
            Requirement::Equals(_, v) => value == Some(v.as_str()),
            Requirement::NotEquals(_, v) => value != Some(v.as_str()),
            Requirement::In(_, vs) => value.is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(_, vs) => value.is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(_) => value.is_some(),
            Requirement::DoesNotExist(_) => value.is_none(),
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the Kubernetes selector syntax.
    ///
    /// ```
    /// use informant_apimachinery::LabelSelector;
    /// let s: LabelSelector = "app=web,tier in (front,back),!canary".parse().unwrap();
    /// assert_eq!(s.requirements().len(), 3);
    /// assert!("app==".parse::<LabelSelector>().is_ok()); // empty values are allowed
    /// assert!("in (a)".parse::<LabelSelector>().is_err());
    /// ```
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        Parser {
            src: selector,
            pos: 0,
        }
        .parse()
        .map_err(|reason| SelectorError {
            selector: selector.to_string(),
            reason,
        })
    }

    /// The requirements, all of which must hold.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector matches every object.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the labels that `label` looks up satisfy every requirement.
    ///
    /// ```
    /// use informant_apimachinery::LabelSelector;
    /// let s: LabelSelector = "app=web,!canary".parse().unwrap();
    /// assert!(s.matches(|k| (k == "app").then_some("web")));
    /// ```
    pub fn matches<'v>(&self, label: impl Fn(&str) -> Option<&'v str>) -> bool {
        self.requirements.iter().all(|r| r.matches(&label))
    }

    /// `key=value` pairs that every match must carry: candidates for a label-index lookup.
    pub fn required_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requirements.iter().filter_map(|r| match r {
            Requirement::Equals(k, v) => Some((k.as_str(), v.as_str())),
            Requirement::In(k, vs) if vs.len() == 1 => vs.first().map(|v| (k.as_str(), v.as_str())),
            _ => None,
        })
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |vs: &BTreeSet<String>| vs.iter().cloned().collect::<Vec<_>>().join(",");
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", join(vs))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", join(vs))?,
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn parse(mut self) -> Result<LabelSelector, SelectorReason> {
        let mut requirements = Vec::new();
        self.skip_ws();
        if self.at_end() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            self.skip_ws();
            if self.at_end() {
                break;
            }
            self.expect(",")?;
        }
        Ok(LabelSelector { requirements })
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorReason> {
        self.skip_ws();
        if self.eat("!") {
            let key = self.key()?;
            return Ok(Requirement::DoesNotExist(key));
        }
        let key = self.key()?;
        self.skip_ws();
        if self.at_end() || self.peek_is(",") {
            return Ok(Requirement::Exists(key));
        }
        if self.eat("==") || self.eat("=") {
            return Ok(Requirement::Equals(key, self.value()?));
        }
        if self.eat("!=") {
            return Ok(Requirement::NotEquals(key, self.value()?));
        }
        let word = self.word();
        match word {
            "in" => {
                let set = self.value_set(&key)?;
                Ok(Requirement::In(key, set))
            }
            "notin" => {
                let set = self.value_set(&key)?;
                Ok(Requirement::NotIn(key, set))
            }
            "" => Err(SelectorReason::UnexpectedAfterKey {
                found: self.rest().chars().next().unwrap_or(' '),
                key,
                offset: self.pos,
            }),
            other => Err(SelectorReason::UnknownOperator {
                operator: other.to_string(),
                key,
            }),
        }
    }

    fn key(&mut self) -> Result<String, SelectorReason> {
        self.skip_ws();
        let key = self.word();
        if key.is_empty() {
            return Err(SelectorReason::MissingKey { offset: self.pos });
        }
        if matches!(key, "in" | "notin") {
            return Err(SelectorReason::OperatorAsKey {
                operator: key.to_string(),
            });
        }
        validate_key(key)?;
        Ok(key.to_string())
    }

    fn value(&mut self) -> Result<String, SelectorReason> {
        self.skip_ws();
        let v = self.word();
        validate_value(v)?;
        Ok(v.to_string())
    }

    fn value_set(&mut self, key: &str) -> Result<BTreeSet<String>, SelectorReason> {
        self.skip_ws();
        self.expect("(")?;
        let mut set = BTreeSet::new();
        loop {
            let v = self.value()?;
            set.insert(v);
            self.skip_ws();
            if self.eat(")") {
                break;
            }
            self.expect(",")?;
        }
        if set.len() == 1 && set.contains("") {
            return Err(SelectorReason::EmptyValueSet {
                key: key.to_string(),
            });
        }
        Ok(set)
    }

    fn word(&mut self) -> &str {
        let rest = self.rest();
        let len = rest
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | '=' | '!' | '(' | ')'))
            .unwrap_or(rest.len());
        let w = &self.src[self.pos..self.pos + len];
        self.pos += len;
        w
    }

    fn expect(&mut self, tok: &'static str) -> Result<(), SelectorReason> {
        if self.eat(tok) {
            Ok(())
        } else if self.at_end() {
            Err(SelectorReason::Ended { expected: tok })
        } else {
            Err(SelectorReason::Unexpected {
                expected: tok,
                offset: self.pos,
                found: self.rest().to_string(),
            })
        }
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    fn peek_is(&self, tok: &str) -> bool {
        self.rest().starts_with(tok)
    }
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }
    fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }
    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.src.len() - trimmed.len();
    }
}

/// A DNS-1123-ish name segment: 1-63 alphanumerics, `-`, `_`, `.`, alphanumeric at both ends.
fn valid_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Checks a label key as the API server does: optional DNS-subdomain prefix, `/`, name.
fn validate_key(key: &str) -> Result<(), SelectorReason> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|seg| {
                let b = seg.as_bytes();
                !seg.is_empty()
                    && b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && seg
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            });
        if !ok {
            return Err(SelectorReason::InvalidKeyPrefix {
                key: key.to_string(),
                prefix: p.to_string(),
            });
        }
    }
    if !valid_name_part(name) {
        return Err(SelectorReason::InvalidKey {
            key: key.to_string(),
        });
    }
    Ok(())
}

/// Checks a label value: empty, or a valid name part.
fn validate_value(value: &str) -> Result<(), SelectorReason> {
    if value.is_empty() || valid_name_part(value) {
        Ok(())
    } else {
        Err(SelectorReason::InvalidValue {
            value: value.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Labels(BTreeMap<String, String>);
    impl Labels {
        fn get(&self, k: &str) -> Option<&str> {
            self.0.get(k).map(String::as_str)
        }
    }

    fn obj(labels: &str) -> Labels {
        let json = format!("{{{labels}}}");
        Labels(serde_json::from_str(&json).unwrap())
    }

    trait Match {
        fn matches_obj(&self, o: &Labels) -> bool;
    }
    impl Match for LabelSelector {
        fn matches_obj(&self, o: &Labels) -> bool {
            self.matches(|k| o.get(k))
        }
    }

    fn sel(s: &str) -> LabelSelector {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn parses_every_operator() {
        use Requirement::*;
        let s = sel("a=1, b==2,c!=3,d in (x, y),e notin (z),f,!g");
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            s.requirements(),
            &[
                Equals("a".into(), "1".into()),
                Equals("b".into(), "2".into()),
                NotEquals("c".into(), "3".into()),
                In("d".into(), set(&["x", "y"])),
                NotIn("e".into(), set(&["z"])),
                Exists("f".into()),
                DoesNotExist("g".into()),
            ]
        );
        assert_eq!(s.to_string(), "a=1,b=2,c!=3,d in (x,y),e notin (z),f,!g");
        assert_eq!(sel(&s.to_string()), s);
    }

    #[test]
    fn empty_selector_matches_all() {
        assert!(sel("").is_empty());
        assert!(sel("  ").matches_obj(&obj("")));
    }

    #[test]
    fn prefixed_keys() {
        let s = sel("app.kubernetes.io/name=web");
        assert!(s.matches_obj(&obj(r#""app.kubernetes.io/name":"web""#)));
    }

    #[test]
    fn matching_semantics() {
        let o = obj(r#""app":"web","tier":"front""#);
        assert!(sel("app=web").matches_obj(&o));
        assert!(!sel("app=db").matches_obj(&o));
        assert!(sel("app!=db").matches_obj(&o));
        assert!(
            sel("missing!=x").matches_obj(&o),
            "!= holds when the label is absent"
        );
        assert!(sel("tier in (front,back)").matches_obj(&o));
        assert!(!sel("tier notin (front)").matches_obj(&o));
        assert!(sel("missing notin (front)").matches_obj(&o));
        assert!(!sel("missing in (front)").matches_obj(&o));
        assert!(sel("app,!canary").matches_obj(&o));
        assert!(!sel("app,tier,!tier").matches_obj(&o));
    }

    #[test]
    fn errors_name_the_selector_and_the_problem() {
        for (bad, needle) in [
            ("app=web,", "expected a label key"),
            ("=web", "expected a label key"),
            ("app in x", "expected `(`"),
            ("app in (a,b", "expected `,`"),
            (
                "app notin ()",
                "value set of key `app` needs at least one value",
            ),
            ("app foo bar", "unknown operator `foo`"),
            ("-bad=1", "label key `-bad`"),
            ("Bad_Prefix./x=1", "invalid prefix"),
            ("a=-x", "label value `-x`"),
            ("a=1 b=2", "expected `,`"),
        ] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(err.selector, bad);
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn required_pairs_feed_the_label_index() {
        let s = sel("a=1,b in (2),c in (3,4),d!=5");
        assert_eq!(
            s.required_pairs().collect::<Vec<_>>(),
            vec![("a", "1"), ("b", "2")]
        );
    }
}
