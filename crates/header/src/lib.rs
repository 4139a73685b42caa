//! The event header: an object's kind and metadata as the host hands them to a plugin with each
//! event (WIT `event.header` and `events.old-header`), defined once. The informer keeps every
//! cached object's metadata in this form, the runtime writes headers with it, and the Rust guest
//! SDK reads them with it; the Python (`guest-sdk-py/informant/event.py`) and JS
//! (`guest-sdk-js/src/event.ts`) SDKs decode the same bytes by this definition.
//!
//! # Layout
//!
//! A header is a sequence of fields and nothing else. A field is its length in bytes as a
//! little-endian `u32`, then that many bytes of UTF-8:
//!
//! ```text
//! +-------------+-----------+-------------+-----------+-----
//! | len: u32 LE | len bytes | len: u32 LE | len bytes | ...
//! +-------------+-----------+-------------+-----------+-----
//! ```
//!
//! In order: the seven fixed fields of [`Field`] — group (empty for the core group), version,
//! kind, namespace (empty for a cluster-scoped object), name, uid, resource-version — then, for
//! each label in order of its key, the key and the value. The header ends where its bytes end
//! (the WIT `list<u8>` carries the length); there is no count and no terminator.
//!
//! The fields from namespace on are the object's [metadata](Metadata): the informer writes them
//! once per object version ([`Metadata::encode`]) and a header is the kind's three fields in
//! front of those bytes, copied as they are ([`encode`]), so delivering an event re-encodes
//! nothing.
//!
//! # Version
//!
//! The layout belongs to the WIT contract: [`VERSION`] is the version of the contract package
//! (`informant:plugin@VERSION`) whose `event.header` this is. A contract that changes the header
//! changes this crate in the same change.
//!
//! # Decoding
//!
//! [`EventHeader::decode`] checks every length and every field's UTF-8 once, so odd bytes are a
//! [`HeaderError`] rather than a panic, and reading a field afterwards cannot fail.
//!
//! ```
//! use informant_header::{EventHeader, Field, Metadata};
//!
//! let metadata = Metadata { namespace: "team-a", name: "web", uid: "u1", resource_version: "7" }
//!     .encode([("app", "web")]);
//! let bytes = informant_header::encode(["apps", "v1", "Deployment"], &metadata);
//! let header = EventHeader::decode(bytes).unwrap();
//! assert_eq!(header.get(Field::Kind), "Deployment");
//! assert_eq!(header.namespace(), Some("team-a"));
//! assert_eq!(header.label("app"), Some("web"));
//! ```

use std::fmt;

/// The version of the WIT contract (`package informant:plugin@VERSION`) whose `event.header`
/// this layout is (and an admission request's `header`, since 0.8.1). The layout came with 0.6.0 and
/// is unchanged since.
pub const VERSION: &str = "0.8.1";

/// The fields every header has, before its labels.
pub const FIXED_FIELDS: usize = 7;

/// The fields of the kind, at the start of a header (group, version, kind).
pub const KIND_FIELDS: usize = 3;

/// The fixed fields of [`Metadata`] (namespace, name, uid, resource-version).
pub const METADATA_FIXED_FIELDS: usize = FIXED_FIELDS - KIND_FIELDS;

/// A fixed field, in the order a header holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The API group; empty for the core group.
    Group,
    /// The API version.
    Version,
    /// The kind.
    Kind,
    /// `metadata.namespace`; empty for a cluster-scoped object.
    Namespace,
    /// `metadata.name`.
    Name,
    /// `metadata.uid`; empty if the API server sent none.
    Uid,
    /// `metadata.resourceVersion`.
    ResourceVersion,
}

impl Field {
    /// Every fixed field, in order.
    pub const ALL: [Field; FIXED_FIELDS] = [
        Field::Group,
        Field::Version,
        Field::Kind,
        Field::Namespace,
        Field::Name,
        Field::Uid,
        Field::ResourceVersion,
    ];

    /// The field's position in a header.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The field's position in [`Metadata`]'s bytes; `None` for the kind's fields.
    pub const fn metadata_index(self) -> Option<usize> {
        (self as usize).checked_sub(KIND_FIELDS)
    }
}

/// Appends `text` as one field: its length as a little-endian `u32`, then its bytes.
pub fn put_field(out: &mut Vec<u8>, text: &str) {
    // Kubernetes caps names, uids and label values far below 4 GiB; an object that broke that
    // would have been refused by the API server.
    out.extend_from_slice(&u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// The bytes `text` takes as a field.
pub const fn field_len(text: &str) -> usize {
    4 + text.len()
}

/// An object's metadata as a header holds it, after the kind: what the informer caches per
/// object version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Metadata<'a> {
    /// Empty for a cluster-scoped object.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// Empty if the API server sent none.
    pub uid: &'a str,
    /// The object's resourceVersion.
    pub resource_version: &'a str,
}

impl Metadata<'_> {
    /// The fixed fields, in order.
    fn fixed(&self) -> [&str; METADATA_FIXED_FIELDS] {
        [self.namespace, self.name, self.uid, self.resource_version]
    }

    /// These fields then `labels` (which must come sorted by key, as a header holds them), in
    /// a buffer of exactly their size.
    pub fn encode<'l, L>(&self, labels: L) -> Vec<u8>
    where
        L: IntoIterator<Item = (&'l str, &'l str)>,
        L::IntoIter: Clone,
    {
        let labels = labels.into_iter();
        let fixed = self.fixed();
        let len = fixed.iter().map(|f| field_len(f)).sum::<usize>()
            + labels
                .clone()
                .map(|(k, v)| field_len(k) + field_len(v))
                .sum::<usize>();
        let mut out = Vec::with_capacity(len);
        for f in fixed {
            put_field(&mut out, f);
        }
        for (k, v) in labels {
            put_field(&mut out, k);
            put_field(&mut out, v);
        }
        out
    }
}

/// A header: the kind's fields (group, version, kind) in front of `metadata`, bytes
/// [`Metadata::encode`] wrote, which are copied as they are.
pub fn encode(kind_fields: [&str; KIND_FIELDS], metadata: &[u8]) -> Vec<u8> {
    let len = kind_fields.iter().map(|f| field_len(f)).sum::<usize>() + metadata.len();
    let mut out = Vec::with_capacity(len);
    for f in kind_fields {
        put_field(&mut out, f);
    }
    out.extend_from_slice(metadata);
    out
}

/// Why bytes are not a header; each names the byte offset where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than four bytes are left where a field's length should be.
    LengthCut {
        /// Where the length starts.
        at: usize,
    },
    /// A field's length runs past the end of the bytes.
    FieldCut {
        /// Where the field's length starts.
        at: usize,
        /// The length it gives.
        len: usize,
        /// The bytes left after the length.
        left: usize,
    },
    /// A field is not UTF-8.
    NotUtf8 {
        /// Where the field's text starts.
        at: usize,
        /// What the UTF-8 check found.
        source: std::str::Utf8Error,
    },
    /// The bytes end before the fixed fields do.
    MissingFields {
        /// The fixed fields present.
        found: usize,
    },
    /// The last label has a key and no value.
    UnpairedLabel {
        /// Where the key's field starts.
        at: usize,
    },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::LengthCut { at } => {
                write!(f, "ends inside a field length (at byte {at})")
            }
            HeaderError::FieldCut { at, len, left } => write!(
                f,
                "ends inside a field (the field at byte {at} is {len} bytes; {left} are left)"
            ),
            HeaderError::NotUtf8 { at, .. } => {
                write!(f, "has a field that is not UTF-8 (at byte {at})")
            }
            HeaderError::MissingFields { found } => write!(
                f,
                "has {found} of the {FIXED_FIELDS} fixed fields (group, version, kind, \
                 namespace, name, uid, resource-version)"
            ),
            HeaderError::UnpairedLabel { at } => {
                write!(f, "ends with a label key without its value (at byte {at})")
            }
        }
    }
}

impl std::error::Error for HeaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HeaderError::NotUtf8 { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The next field of `bytes` from `at` as the range of its text, not yet checked as UTF-8;
/// `None` at the end.
fn next_range(bytes: &[u8], at: usize) -> Option<Result<(usize, usize), HeaderError>> {
    let rest = bytes.get(at..).filter(|r| !r.is_empty())?;
    let Some(len) = rest.first_chunk::<4>() else {
        return Some(Err(HeaderError::LengthCut { at }));
    };
    let len = u32::from_le_bytes(*len) as usize;
    let left = rest.len() - 4;
    if len > left {
        return Some(Err(HeaderError::FieldCut { at, len, left }));
    }
    Some(Ok((at + 4, at + 4 + len)))
}

/// The text of the field in `range`, checked as UTF-8.
fn text(bytes: &[u8], (start, end): (usize, usize)) -> Result<&str, HeaderError> {
    std::str::from_utf8(&bytes[start..end])
        .map_err(|source| HeaderError::NotUtf8 { at: start, source })
}

/// The fields of `bytes` (a header, or [`Metadata`]'s bytes), in order, each checked as it is
/// reached; after an error, nothing more.
pub fn fields(bytes: &[u8]) -> Fields<'_> {
    Fields { bytes, at: 0 }
}

/// The iterator [`fields`] returns.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<&'a str, HeaderError>;

    fn next(&mut self) -> Option<Self::Item> {
        let range = match next_range(self.bytes, self.at)? {
            Ok(range) => range,
            Err(e) => {
                self.at = self.bytes.len();
                return Some(Err(e));
            }
        };
        self.at = range.1;
        Some(text(self.bytes, range).inspect_err(|_| self.at = self.bytes.len()))
    }

    /// Skips `n` fields by their lengths alone (what is not returned is not checked as text),
    /// then reads the next.
    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        for _ in 0..n {
            match next_range(self.bytes, self.at)? {
                Ok((_, end)) => self.at = end,
                Err(e) => {
                    self.at = self.bytes.len();
                    return Some(Err(e));
                }
            }
        }
        self.next()
    }
}

/// A decoded header over its bytes: where each fixed field lies and where the labels start,
/// found once; every field is read in place.
#[derive(Clone)]
pub struct EventHeader<B = Vec<u8>> {
    bytes: B,
    fixed: [(usize, usize); FIXED_FIELDS],
    labels_at: usize,
    label_count: usize,
}

impl<B: AsRef<[u8]>> EventHeader<B> {
    /// Checks `bytes` as a header: every length within the bytes, every field UTF-8, every
    /// fixed field present and every label key with its value.
    pub fn decode(bytes: B) -> Result<Self, HeaderError> {
        let b = bytes.as_ref();
        // Every byte of an ASCII header is below 0x80, so each field's text is ASCII, hence
        // UTF-8: one pass over the bytes stands for a check per field. Metadata is nearly always
        // ASCII; a field over 127 bytes or a non-ASCII character takes the per-field checks.
        let ascii = b.is_ascii();
        let check = |range| if ascii { Ok("") } else { text(b, range) };
        let mut fixed = [(0, 0); FIXED_FIELDS];
        let mut at = 0;
        for (found, slot) in fixed.iter_mut().enumerate() {
            let range = next_range(b, at).ok_or(HeaderError::MissingFields { found })??;
            check(range)?;
            *slot = range;
            at = range.1;
        }
        let labels_at = at;
        let mut fields = 0usize;
        let mut last = at;
        while let Some(range) = next_range(b, at) {
            let range = range?;
            check(range)?;
            last = at;
            at = range.1;
            fields += 1;
        }
        if !fields.is_multiple_of(2) {
            return Err(HeaderError::UnpairedLabel { at: last });
        }
        Ok(EventHeader {
            bytes,
            fixed,
            labels_at,
            label_count: fields / 2,
        })
    }

    /// The bytes, as the host wrote them.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The bytes, as the host wrote them.
    pub fn into_bytes(self) -> B {
        self.bytes
    }

    /// A field's text, checked at decode.
    fn at(&self, range: (usize, usize)) -> &str {
        self.as_bytes()
            .get(range.0..range.1)
            .and_then(|t| std::str::from_utf8(t).ok())
            .unwrap_or_default()
    }

    /// One fixed field.
    pub fn get(&self, field: Field) -> &str {
        self.at(self.fixed[field.index()])
    }

    /// The namespace; `None` for a cluster-scoped object.
    pub fn namespace(&self) -> Option<&str> {
        Some(self.get(Field::Namespace)).filter(|ns| !ns.is_empty())
    }

    /// The label pairs as byte ranges, in the header's order.
    fn label_ranges(&self) -> impl Iterator<Item = ((usize, usize), (usize, usize))> + '_ {
        let bytes = self.as_bytes();
        let mut at = self.labels_at;
        let mut next = move || {
            let range = next_range(bytes, at)?.ok()?;
            at = range.1;
            Some(range)
        };
        std::iter::from_fn(move || Some((next()?, next()?)))
    }

    /// The labels, sorted by key.
    pub fn labels(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        let mut pairs = self.label_ranges();
        (0..self.label_count).map(move |_| {
            pairs
                .next()
                .map_or(("", ""), |(k, v)| (self.at(k), self.at(v)))
        })
    }

    /// One label's value; the keys are compared as bytes, so only the value found is read as
    /// text.
    pub fn label(&self, key: &str) -> Option<&str> {
        let bytes = self.as_bytes();
        self.label_ranges()
            .find(|&((start, end), _)| bytes.get(start..end) == Some(key.as_bytes()))
            .map(|(_, v)| self.at(v))
    }
}

/// Shows the kind and the metadata.
impl<B: AsRef<[u8]>> fmt::Debug for EventHeader<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHeader")
            .field("group", &self.get(Field::Group))
            .field("version", &self.get(Field::Version))
            .field("kind", &self.get(Field::Kind))
            .field("namespace", &self.namespace())
            .field("name", &self.get(Field::Name))
            .field("uid", &self.get(Field::Uid))
            .field("resource_version", &self.get(Field::ResourceVersion))
            .field("labels", &self.labels().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header written field by field, as another language's encoder would.
    fn raw(fields: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f.as_bytes());
        }
        out
    }

    const DEPLOYMENT: [&str; 3] = ["apps", "v1", "Deployment"];

    fn web() -> Metadata<'static> {
        Metadata {
            namespace: "team-a",
            name: "web",
            uid: "u1",
            resource_version: "42",
        }
    }

    #[test]
    fn a_header_round_trips() {
        let metadata = web().encode([]);
        assert_eq!(metadata.len(), metadata.capacity(), "sized exactly");
        let bytes = encode(DEPLOYMENT, &metadata);
        assert_eq!(
            bytes,
            raw(&["apps", "v1", "Deployment", "team-a", "web", "u1", "42"])
        );
        assert!(
            bytes.ends_with(&metadata),
            "the metadata is copied as it is"
        );
        let h = EventHeader::decode(bytes.as_slice()).unwrap();
        let got: Vec<&str> = Field::ALL.iter().map(|&f| h.get(f)).collect();
        assert_eq!(
            got,
            ["apps", "v1", "Deployment", "team-a", "web", "u1", "42"]
        );
        assert_eq!(h.namespace(), Some("team-a"));
        assert_eq!(h.labels().len(), 0);
        assert_eq!(h.label("app"), None);
        assert_eq!(h.as_bytes(), bytes.as_slice());
    }

    #[test]
    fn a_header_with_labels_reads_them_in_order() {
        let labels = [("app", "web"), ("note", "ünï"), ("tier", "")];
        let bytes = encode(DEPLOYMENT, &web().encode(labels));
        let h = EventHeader::decode(bytes).unwrap();
        assert_eq!(h.labels().len(), 3);
        assert_eq!(h.labels().collect::<Vec<_>>(), labels);
        assert_eq!(
            (
                h.label("app"),
                h.label("note"),
                h.label("tier"),
                h.label("ap")
            ),
            (Some("web"), Some("ünï"), Some(""), None)
        );
        assert_eq!(h.get(Field::Name), "web");
        // A cluster-scoped object of the core group.
        let ns = Metadata {
            namespace: "",
            name: "kube-system",
            uid: "u2",
            resource_version: "7",
        };
        let h = EventHeader::decode(encode(["", "v1", "Namespace"], &ns.encode([]))).unwrap();
        assert_eq!((h.get(Field::Group), h.namespace()), ("", None));
    }

    #[test]
    fn the_field_reader_reads_metadata_and_headers_alike() {
        let metadata = web().encode([("app", "web")]);
        let read: Vec<&str> = fields(&metadata).map(Result::unwrap).collect();
        assert_eq!(read, ["team-a", "web", "u1", "42", "app", "web"]);
        assert_eq!(Field::Name.metadata_index(), Some(1));
        assert_eq!(Field::Kind.metadata_index(), None);
        assert_eq!(
            fields(&metadata).nth(Field::Uid.metadata_index().unwrap()),
            Some(Ok("u1"))
        );
    }

    #[test]
    fn odd_bytes_are_errors_not_panics() {
        let fixed = raw(&["", "v1", "ConfigMap", "ns", "name", "u", "1"]);
        let good = raw(&["", "v1", "ConfigMap", "ns", "name", "u", "1", "k", "v"]);
        // Every cut of a good header: a cut length prefix, a field running past the end, or
        // fields missing; never a panic. Only the cut after the fixed fields is a header.
        for cut in 0..good.len() {
            let err = match EventHeader::decode(&good[..cut]) {
                Ok(_) => {
                    assert_eq!(cut, fixed.len());
                    continue;
                }
                Err(err) => err,
            };
            assert!(
                matches!(
                    err,
                    HeaderError::LengthCut { .. }
                        | HeaderError::FieldCut { .. }
                        | HeaderError::MissingFields { .. }
                        | HeaderError::UnpairedLabel { .. }
                ),
                "cut at {cut}: {err:?}"
            );
            assert!(fields(&good[..cut]).count() <= 9);
        }
        // A truncated length prefix.
        let mut bytes = fixed.clone();
        bytes.extend_from_slice(&[3, 0]);
        assert_eq!(
            EventHeader::decode(&bytes[..]).unwrap_err(),
            HeaderError::LengthCut { at: fixed.len() }
        );
        assert!(
            EventHeader::decode(&bytes[..])
                .unwrap_err()
                .to_string()
                .starts_with("ends inside a field length")
        );
        // A length running past the end, and one that would overflow a 32-bit add.
        let mut bytes = raw(&["", "v1", "ConfigMap", "ns", "name", "u"]);
        let at = bytes.len();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(b"1");
        let err = EventHeader::decode(&bytes[..]).unwrap_err();
        assert_eq!(
            err,
            HeaderError::FieldCut {
                at,
                len: u32::MAX as usize,
                left: 1
            }
        );
        assert!(
            err.to_string().starts_with("ends inside a field ("),
            "{err}"
        );
        let mut reader = fields(&bytes);
        assert_eq!(reader.by_ref().filter(Result::is_ok).count(), 6);
        assert_eq!(reader.next(), None, "nothing after an error");
        // Not UTF-8, in a fixed field and in a label.
        for bytes in [&fixed, &good] {
            let mut bad = bytes.clone();
            *bad.last_mut().unwrap() = 0xff;
            let err = EventHeader::decode(bad).unwrap_err();
            assert!(matches!(err, HeaderError::NotUtf8 { .. }), "{err:?}");
            assert!(
                std::error::Error::source(&err).is_some(),
                "keeps its source"
            );
        }
        // A label key without its value.
        let bytes = raw(&["", "v1", "ConfigMap", "ns", "name", "u", "1", "k"]);
        assert_eq!(
            EventHeader::decode(bytes).unwrap_err(),
            HeaderError::UnpairedLabel { at: fixed.len() }
        );
        // Too few fixed fields, and none at all.
        assert_eq!(
            EventHeader::decode(raw(&["", "v1", "ConfigMap"])).unwrap_err(),
            HeaderError::MissingFields { found: 3 }
        );
        assert_eq!(
            EventHeader::decode(Vec::new()).unwrap_err(),
            HeaderError::MissingFields { found: 0 }
        );
    }

    /// Headers that are not all ASCII (a field of 128 bytes or more has a length byte over
    /// 0x7f; a label in another script) take the per-field checks: valid text decodes, and a
    /// stray byte is still refused.
    #[test]
    fn non_ascii_headers_are_checked_field_by_field() {
        let long = "n".repeat(300);
        let good = raw(&[
            "",
            "v1",
            "ConfigMap",
            "ns",
            &long,
            "u",
            "1",
            "team",
            "équipe-ß",
        ]);
        assert!(!good.is_ascii());
        let h = EventHeader::decode(&good[..]).unwrap();
        assert_eq!(h.get(Field::Name), long);
        assert_eq!(h.label("team"), Some("équipe-ß"));
        let mut bad = good.clone();
        *bad.last_mut().unwrap() = 0xff;
        assert!(matches!(
            EventHeader::decode(bad).unwrap_err(),
            HeaderError::NotUtf8 { .. }
        ));
        // A stray continuation byte inside a long, otherwise ASCII field.
        let mut bad = raw(&["", "v1", "ConfigMap", "ns", &long, "u", "1"]);
        let name_at = bad.len() - 4 - 1 - 4 - 1 - 300;
        bad[name_at + 10] = 0x80;
        assert!(matches!(
            EventHeader::decode(bad).unwrap_err(),
            HeaderError::NotUtf8 { .. }
        ));
    }

    #[test]
    fn nth_reads_one_field_and_skips_the_rest_unread() {
        let mut bytes = raw(&["ns", "name", "u", "7"]);
        assert_eq!(fields(&bytes).nth(1).unwrap().unwrap(), "name");
        assert_eq!(fields(&bytes).nth(3).unwrap().unwrap(), "7");
        assert!(fields(&bytes).nth(4).is_none());
        // A bad byte in a field skipped is not read; in the field asked for, it is an error.
        bytes[4] = 0xff;
        assert_eq!(fields(&bytes).nth(3).unwrap().unwrap(), "7");
        assert!(matches!(
            fields(&bytes).next().unwrap().unwrap_err(),
            HeaderError::NotUtf8 { .. }
        ));
        // A cut length is an error, not a panic.
        assert!(matches!(
            fields(&bytes[..bytes.len() - 3])
                .nth(3)
                .unwrap()
                .unwrap_err(),
            HeaderError::LengthCut { .. } | HeaderError::FieldCut { .. }
        ));
    }

    /// The version and the layout are the WIT contract's: a contract bump or a change to its
    /// description of `header` fails here until this crate is looked at again.
    #[test]
    fn the_layout_is_the_wit_contracts() {
        let wit = include_str!("../../../wit/plugin.wit");
        assert!(
            wit.contains(&format!("package informant:plugin@{VERSION};")),
            "wit/plugin.wit is not version {VERSION}"
        );
        let prose: String = wit
            .lines()
            .map(|l| l.trim().trim_start_matches("///").trim())
            .collect::<Vec<_>>()
            .join(" ");
        for described in [
            "each its length in bytes as a little-endian u32 followed by that many bytes of UTF-8",
            "In order: group, version, kind, namespace (empty for cluster-scoped objects), name, \
             uid, resource-version, then a key and a value for each label, sorted by key.",
        ] {
            assert!(
                prose.contains(described),
                "wit/plugin.wit no longer says `{described}`"
            );
        }
    }
}
