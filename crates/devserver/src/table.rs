//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which kubectl
//! get asks for: the generic NAME / AGE table that real apiservers print for custom resources.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::ResourceType;
use super::store::Obj;

/// Kubernetes' `duration.HumanDuration`, which the server applies to the Age cell.
fn human_duration(secs: i64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        s if s < 0 => "0s".into(),
        s if s < 120 => format!("{s}s"),
        s if m < 10 && s % 60 == 0 => format!("{m}m"),
        s if m < 10 => format!("{m}m{}s", s % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 == 0 => format!("{h}h"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 && h % 24 == 0 => format!("{d}d"),
        _ if h < 24 * 8 => format!("{d}d{}h", h % 24),
        _ if d < 365 * 2 => format!("{d}d"),
        _ if d < 365 * 8 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

fn row(obj: &Obj) -> Value {
    let v = obj.value();
    let name = v["metadata"]["name"].clone();
    let age = v["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| human_duration(jiff::Timestamp::now().as_second() - t.as_second()))
        .unwrap_or_else(|| "<unknown>".into());
    json!({"cells": [name, age], "object": v})
}

/// A Table with one row per object.
pub(crate) fn table(res: &ResourceType, objs: &[Arc<Obj>], rv: u64) -> Value {
    let scope = if res.namespaced {
        "within a namespace"
    } else {
        ""
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": format!("Name must be unique {scope}.").replace(" .", ".")},
            {"name": "Age", "type": "date", "format": "", "priority": 0,
             "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
        ],
        "rows": objs.iter().map(|o| row(o)).collect::<Vec<_>>(),
    })
}

/// A watch event's object as a one-row Table (what a Table watch carries).
pub(crate) fn table_bytes(res: &ResourceType, obj: &Arc<Obj>) -> Vec<u8> {
    serde_json::to_vec(&table(res, std::slice::from_ref(obj), obj.rv)).unwrap_or_default()
}
