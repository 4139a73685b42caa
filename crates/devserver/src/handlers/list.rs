//! Lists: selectors, `limit`/`continue` pagination and `resourceVersionMatch`, answered from
//! the stored JSON bytes without re-serializing items. A list at an older version (`Exact`, or
//! the later pages of a paginated list) is the current table with the later history undone, so
//! it reaches back as far as the watch history does and answers 410 beyond.

use std::sync::Arc;

use axum::response::Response;
use bytes::BytesMut;
use http::StatusCode;

use super::{Params, Target, json_bytes, json_value, parse_rv, selectors};
use crate::selector::labels_match;
use crate::store::{Key, Obj};
use crate::{Error, Result, Shared, table};

fn encode_continue(rv: u64, key: &Key) -> String {
    format!("{rv}/{}/{}", key.0, key.1)
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> Result<(u64, Key)> {
    let bad = || Error::BadRequest(format!("continue key is not valid: {token:?}"));
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '/');
    let rv = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?;
    let name = parts.next().ok_or_else(bad)?;
    Ok((rv, (ns.into(), name.into())))
}

pub(super) fn list(shared: &Shared, t: &Target, q: &Params, wants_table: bool) -> Result<Response> {
    crate::validation::list_options(q, false)?;
    let (labels, fields) = selectors(q, &t.res)?;
    let limit = match q.get("limit").map(String::as_str) {
        None | Some("") => 0,
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| Error::BadRequest(format!("limit: Invalid value: \"{l}\"")))?
            .max(0) as usize,
    };
    let (token_rv, after) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => {
            let (rv, key) = decode_continue(c)?;
            // etcd compacted the snapshot the token continues: the apiserver answers 410.
            if rv < shared.api.store.floor() {
                return Err(Error::ContinueExpired);
            }
            (Some(rv), Some(key))
        }
        None => (None, None),
    };
    let requested = parse_rv(q)?;
    // A continued list goes on from its first page's snapshot, as the apiserver's does; an
    // exact one is read as it was at the version asked for.
    let exact = q.get("resourceVersionMatch").is_some_and(|m| m == "Exact");
    let at = token_rv.or(requested.filter(|_| exact));
    let mut items: Vec<Arc<Obj>> = Vec::new();
    let mut last: Option<Key> = None;
    let mut more = false;
    let take = |k: &Key, obj: &Arc<Obj>| {
        if !labels_match(&labels, &obj.labels) || !fields.matches(&k.0, &k.1, obj) {
            return true;
        }
        if limit > 0 && items.len() == limit {
            more = true;
            return false;
        }
        items.push(obj.clone());
        last = Some(k.clone());
        true
    };
    let store = &shared.api.store;
    let (res, ns) = (&t.res.key, t.namespace.as_deref());
    let current = match at {
        Some(at) => {
            store.scan_at(res, ns, after.as_ref(), at, take)?;
            at
        }
        None => store.scan(res, ns, after.as_ref(), take),
    };
    let rv = current;
    if wants_table {
        return Ok(json_value(
            StatusCode::OK,
            &table::table(&t.res, &items, rv),
        ));
    }
    let cont = match (more, &last) {
        (true, Some(key)) => format!(",\"continue\":\"{}\"", encode_continue(rv, key)),
        _ => String::new(),
    };
    let total: usize = items.iter().map(|o| o.json.len() + 1).sum();
    let mut buf = BytesMut::with_capacity(total + 256);
    buf.extend_from_slice(
        format!(
            "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{cont}}},\"items\":[",
            t.res.kind,
            t.res.api_version(&t.version)
        )
        .as_bytes(),
    );
    for (i, obj) in items.iter().enumerate() {
        if i > 0 {
            buf.extend_from_slice(b",");
        }
        buf.extend_from_slice(&obj.json);
    }
    buf.extend_from_slice(b"]}");
    Ok(json_bytes(StatusCode::OK, buf.freeze()))
}
