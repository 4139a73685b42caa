//! The recording format: JSON Lines, one informer event per line, in the order the recorder's
//! handler received them.
//!
//! ```json
//! {"type":"added","apiVersion":"v1","kind":"ConfigMap","initial":true,"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default","resourceVersion":"7"}}}
//! {"type":"updated","apiVersion":"v1","kind":"ConfigMap","object":{...},"oldObject":{...}}
//! {"type":"deleted","apiVersion":"v1","kind":"ConfigMap","finalStateUnknown":true,"object":{...}}
//! ```
//!
//! Fields:
//! - `type`: `added`, `updated` or `deleted` (resyncs are timer-driven and not recorded);
//! - `apiVersion`, `kind`: the resource, as a manifest's `[[watch]]` names it;
//! - `initial` (default false): part of the informer's first list;
//! - `finalStateUnknown` (default false): a delete inferred from a relist;
//! - `object`: the object (for deletes its final or last known state), as the cache held it
//!   (compact JSON, `managedFields` stripped), kept byte for byte;
//! - `oldObject`: the previous version, for updates (informational: replay takes the old
//!   version from its own cache, which the earlier lines built).
//!
//! Unknown fields are refused, so a typo is an error naming the line rather than a silent default.

use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::ReplayError;
use crate::informer::{Event, EventType};

/// What happened, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordType {
    /// The object is new (listed or created).
    Added,
    /// The object changed.
    Updated,
    /// The object is gone.
    Deleted,
}

/// One line of a recording.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: RecordType,
    /// `GROUP/VERSION`, or `VERSION` for core.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Part of the informer's first list.
    #[serde(default, skip_serializing_if = "is_false")]
    pub initial: bool,
    /// A delete inferred from a relist.
    #[serde(default, skip_serializing_if = "is_false")]
    pub final_state_unknown: bool,
    /// The object, byte for byte as the cache held it.
    pub object: Box<RawValue>,
    /// The previous version, for updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Box<RawValue>>,
    /// The line it was read from (1-based; 0 when not read from a file), for messages.
    #[serde(skip)]
    pub line: usize,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Record {
    /// The record of an informer event of `api_version`/`kind`; `None` for resyncs, which are
    /// driven by the handler's timer rather than by the stream.
    pub fn from_event(api_version: &str, kind: &str, event: &Event) -> Option<Record> {
        let event_type = match event.event_type {
            EventType::Added => RecordType::Added,
            EventType::Updated => RecordType::Updated,
            EventType::Deleted => RecordType::Deleted,
            EventType::Resync => return None,
        };
        // The cache holds valid compact JSON, so these conversions cannot fail.
        let raw = |json: &str| RawValue::from_string(json.to_string()).ok();
        Some(Record {
            event_type,
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            initial: event.initial,
            final_state_unknown: event.final_state_unknown,
            object: raw(event.object.json())?,
            old_object: event.old_object.as_ref().and_then(|o| raw(o.json())),
            line: 0,
        })
    }

    /// Writes this record as one line.
    pub fn write_line(&self, out: &mut impl Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, self)?;
        out.write_all(b"\n")
    }
}

/// Reads a recording; errors name the file, the line and what is wrong with it.
pub fn read_records(path: &Path) -> Result<Vec<Record>, ReplayError> {
    let io = |source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut records = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let mut record: Record = serde_json::from_str(&line).map_err(|e| ReplayError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        if !record.object.get().trim_start().starts_with('{') {
            return Err(ReplayError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                reason: "field `object`: expected a JSON object".into(),
            });
        }
        record.line = i + 1;
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_object_bytes() {
        let line = r#"{"type":"updated","apiVersion":"v1","kind":"ConfigMap","object":{"b":1,"a":2},"oldObject":{"b":0}}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(r.event_type, RecordType::Updated);
        assert!(!r.initial && !r.final_state_unknown);
        let mut out = Vec::new();
        r.write_line(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{line}\n"));
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        std::fs::write(
            &path,
            "{\"type\":\"added\",\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"object\":{}}\n\n{\"type\":\"moved\",\"apiVersion\":\"v1\",\"kind\":\"X\",\"object\":{}}\n",
        )
        .unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(err.contains("rec.jsonl:3"), "{err}");
        assert!(err.contains("moved"), "{err}");
        std::fs::write(
            &path,
            "{\"type\":\"added\",\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"object\":[]}\n",
        )
        .unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(
            err.contains("rec.jsonl:1") && err.contains("`object`"),
            "{err}"
        );
    }
}
