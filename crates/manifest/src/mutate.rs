//! Mutations of a valid TOML document, for property tests of the parsers built on
//! [`toml_error`](crate::toml_error): the manifest's here, `informant.toml`'s in the runtime.
//!
//! A test starts from a document its parser accepts, applies a few [`Mutation`]s (a value of
//! the wrong type, out of range, a hostile string, an unknown key, a key removed) and checks
//! the parser's answer. Mutations pick their site by position among the document's sites at the
//! time they are applied, so they keep working when the document gains fields. Only built with
//! the `proptest` feature (or for this crate's tests); not part of the manifest API.

use std::fmt;

use proptest::prelude::*;
use proptest::sample::Index;
use toml::{Table, Value};

/// One step of a path into a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A key of a table.
    Key(String),
    /// An element of an array.
    Index(usize),
}

/// Where a value sits in a document, rendered as the parsers' errors name fields:
/// `watch[0].indexes.by-node` (the root is the empty path).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Site(pub Vec<Seg>);

impl Site {
    /// The table or array holding this site; the root for top-level keys.
    pub fn parent(&self) -> Site {
        Site(self.0[..self.0.len().saturating_sub(1)].to_vec())
    }

    /// The last key on the path, if the path ends with a key.
    pub fn key(&self) -> Option<&str> {
        match self.0.last() {
            Some(Seg::Key(k)) => Some(k),
            _ => None,
        }
    }

    /// The keys on the path, array indexes left out: `["watch", "indexes", "by-node"]`.
    pub fn keys(&self) -> Vec<&str> {
        self.0
            .iter()
            .filter_map(|s| match s {
                Seg::Key(k) => Some(k.as_str()),
                Seg::Index(_) => None,
            })
            .collect()
    }

    fn child(&self, seg: Seg) -> Site {
        let mut s = self.clone();
        s.0.push(seg);
        s
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A change to a document.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Replace the value at one of the document's sites.
    Set(Index, Value),
    /// Insert `key = value` into one of the document's tables (replacing the key's value if it
    /// is there).
    Insert(Index, String, Value),
    /// Remove the value at one of the document's sites.
    Remove(Index),
}

/// A mutation as applied: the site it changed, and the value now there (`None`: removed).
#[derive(Debug, Clone)]
pub struct Applied {
    /// The site changed (for an insert, the new key's site).
    pub site: Site,
    /// The value put there; `None` when it was removed.
    pub value: Option<Value>,
}

/// Every site in the document below the root.
pub fn sites(doc: &Table) -> Vec<Site> {
    let mut out = Vec::new();
    walk_table(doc, &Site::default(), &mut out);
    out
}

fn walk_table(t: &Table, at: &Site, out: &mut Vec<Site>) {
    for (k, v) in t {
        walk(v, at.child(Seg::Key(k.clone())), out);
    }
}

fn walk(v: &Value, at: Site, out: &mut Vec<Site>) {
    out.push(at.clone());
    match v {
        Value::Table(t) => walk_table(t, &at, out),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, at.child(Seg::Index(i)), out);
            }
        }
        _ => {}
    }
}

/// The value at a site.
pub fn get<'d>(doc: &'d Table, site: &Site) -> Option<&'d Value> {
    let (first, rest) = site.0.split_first()?;
    let Seg::Key(k) = first else { return None };
    let mut v = doc.get(k)?;
    for seg in rest {
        v = match (seg, v) {
            (Seg::Key(k), Value::Table(t)) => t.get(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

fn table_mut<'d>(doc: &'d mut Table, site: &Site) -> Option<&'d mut Table> {
    if site.0.is_empty() {
        return Some(doc);
    }
    value_mut(doc, site)?.as_table_mut()
}

/// Applies a mutation; `None` when the document has no site for it.
pub fn apply(doc: &mut Table, m: &Mutation) -> Option<Applied> {
    match m {
        Mutation::Set(at, value) => {
            let all = sites(doc);
            let site = all.get(at.index(all.len().max(1)))?.clone();
            let slot = value_mut(doc, &site)?;
            *slot = value.clone();
            Some(Applied {
                site,
                value: Some(value.clone()),
            })
        }
        Mutation::Insert(at, key, value) => {
            let tables: Vec<Site> = std::iter::once(Site::default())
                .chain(
                    sites(doc)
                        .into_iter()
                        .filter(|s| get(doc, s).is_some_and(Value::is_table)),
                )
                .collect();
            let parent = tables[at.index(tables.len())].clone();
            table_mut(doc, &parent)?.insert(key.clone(), value.clone());
            Some(Applied {
                site: parent.child(Seg::Key(key.clone())),
                value: Some(value.clone()),
            })
        }
        Mutation::Remove(at) => {
            let all = sites(doc);
            let site = all.get(at.index(all.len().max(1)))?.clone();
            match (site.0.last()?, value_mut_parent(doc, &site)?) {
                (Seg::Key(k), Holder::Table(t)) => {
                    t.remove(k);
                }
                (Seg::Index(i), Holder::Array(a)) => {
                    a.remove(*i);
                }
                _ => return None,
            }
            Some(Applied { site, value: None })
        }
    }
}

enum Holder<'d> {
    Table(&'d mut Table),
    Array(&'d mut Vec<Value>),
}

fn value_mut_parent<'d>(doc: &'d mut Table, site: &Site) -> Option<Holder<'d>> {
    let parent = site.parent();
    if parent.0.is_empty() {
        return Some(Holder::Table(doc));
    }
    match value_mut(doc, &parent)? {
        Value::Table(t) => Some(Holder::Table(t)),
        Value::Array(a) => Some(Holder::Array(a)),
        _ => None,
    }
}

fn value_mut<'d>(doc: &'d mut Table, site: &Site) -> Option<&'d mut Value> {
    let (first, rest) = site.0.split_first()?;
    let Seg::Key(k) = first else { return None };
    let mut v = doc.get_mut(k)?;
    for seg in rest {
        v = match (seg, v) {
            (Seg::Key(k), Value::Table(t)) => t.get_mut(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// Hostile strings: any characters, control characters, quotes and backticks, empty, blank,
/// and some far longer than any name.
pub fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        2 => "[a-z0-9./*?=!,() -]{0,30}",
        1 => "[`\"'\\\\\n\t\r\u{0}\u{feff}\u{202e}]{1,5}",
        1 => Just(String::new()),
        1 => Just("  ".to_string()),
        1 => (1usize..4).prop_map(|n| "a".repeat(n * 40_000)),
    ]
}

/// Keys that no schema knows, in the shapes that trip quoting: dots, spaces, unicode, empty.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z][a-z0-9-]{0,10}",
        1 => "\\PC{0,8}",
        1 => Just(String::new()),
    ]
}

/// Integers at the edges of every range a parser checks.
pub fn integer() -> impl Strategy<Value = i64> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            -1,
            1,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            i64::MIN,
            i64::MAX,
        ]),
        any::<i64>(),
        0i64..1000,
    ]
}

/// Any TOML value, leaning to the hostile, a few levels deep.
pub fn value() -> impl Strategy<Value = Value> {
    let datetime = "1979-05-27T07:32:00Z"
        .parse::<toml::value::Datetime>()
        .expect("valid");
    let leaf = prop_oneof![
        3 => integer().prop_map(Value::Integer),
        1 => any::<f64>().prop_map(Value::Float),
        1 => any::<bool>().prop_map(Value::Boolean),
        4 => string().prop_map(Value::String),
        1 => Just(Value::Datetime(datetime)),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Table(m.into_iter().collect())),
        ]
    })
}

/// One mutation.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), value()).prop_map(|(i, v)| Mutation::Set(i, v)),
        2 => (any::<Index>(), key(), value()).prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
        1 => any::<Index>().prop_map(Mutation::Remove),
    ]
}

/// The document with the mutations applied, as TOML text, and what each one changed.
pub fn mutated(base: &Table, mutations: &[Mutation]) -> (String, Vec<Applied>) {
    let mut doc = base.clone();
    let applied = mutations
        .iter()
        .filter_map(|m| apply(&mut doc, m))
        .collect();
    let text = toml::to_string(&doc).expect("a TOML table serializes");
    (text, applied)
}

/// Whether an error message names `site` as the parsers do: "field `SITE`" (or a field below
/// it), "key `SITE`", or "table `[SITE]`".
pub fn names(message: &str, site: &Site) -> bool {
    let p = site.to_string();
    ["field `", "key `"].iter().any(|word| {
        let needle = format!("{word}{p}");
        message.match_indices(&needle).any(|(i, _)| {
            matches!(
                message[i + needle.len()..].chars().next(),
                Some('`' | '.' | '[')
            )
        })
    }) || message.contains(&format!("table `[{p}]`"))
}

/// Whether an error message names where an applied mutation went wrong: its site (or a field
/// below it); or, for a removal, the field that is now missing from the table that held it or
/// that table itself.
pub fn names_applied(message: &str, a: &Applied) -> bool {
    if names(message, &a.site) {
        return true;
    }
    let parent = a.site.parent();
    if a.site.key() == Some("") && names(message, &parent) {
        // An empty key has no name to quote: the table holding it is the place.
        return true;
    }
    if a.value.is_some() {
        return false;
    }
    let parent_named = parent.0.is_empty() || names(message, &parent);
    let missing = a
        .site
        .key()
        .is_some_and(|k| message.contains(&format!("missing field `{k}`")));
    (missing && parent_named) || (!parent.0.is_empty() && names(message, &parent))
}
