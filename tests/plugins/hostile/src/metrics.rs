//! `metrics` mode: the calls in `config.metrics`, made on the `added` (not initial) event of an
//! object named `go-*`. Each call is `{"op": "counter" | "gauge" | "histogram" | "delete" |
//! "delete-group", "name", "help", "labels": [[k, v], ..], "group", "value", "buckets",
//! "repeat"}`; `repeat` (default 1) makes it that many times, `$I` in a label value standing for
//! the repetition's number and `$NAME` (anywhere) for the event's object name. Logs
//! `{"tag", "key", "metrics": [{"ok": n, "err": n, "first": {"kind", "message"}, "micros": n}]}`,
//! one entry per call (for deletes, `ok` counts the ones that removed something; `micros` is the
//! time all its repetitions took, in the plugin).

use informant_sdk::Event;
use informant_sdk::metrics::{self, MetricError};
use serde_json::{Value, json};

/// Makes every call in `calls` for `ev`, and logs what came of each.
pub fn run(tag: &str, calls: &[Value], ev: &Event) {
    let name = ev.meta().name();
    let fill = |s: &str| s.replace("$NAME", name);
    let results: Vec<Value> = calls
        .iter()
        .map(|c| {
            let text = |k: &str| fill(c.get(k).and_then(Value::as_str).unwrap_or_default());
            let (metric, help, group) = (text("name"), text("help"), text("group"));
            let labels: Vec<(String, String)> = c
                .get("labels")
                .and_then(Value::as_array)
                .map(|pairs| {
                    pairs
                        .iter()
                        .map(|p| {
                            let at = |i: usize| fill(p[i].as_str().unwrap_or_default());
                            (at(0), at(1))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let value = c.get("value").and_then(Value::as_f64).unwrap_or(1.0);
            let buckets: Vec<f64> = c
                .get("buckets")
                .and_then(Value::as_array)
                .map(|b| b.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            let repeat = c.get("repeat").and_then(Value::as_u64).unwrap_or(1);
            let (mut ok, mut err, mut first) = (0u64, 0u64, Value::Null);
            let started = std::time::Instant::now();
            for i in 0..repeat {
                let i = i.to_string();
                let labels: Vec<(String, String)> = labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.replace("$I", &i)))
                    .collect();
                let pairs: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let op = c.get("op").and_then(Value::as_str).unwrap_or_default();
                let written = |m: metrics::Metric<'_>| {
                    let m = m.labels(&pairs);
                    let m = match group.is_empty() {
                        true => m,
                        false => m.group(&group),
                    };
                    match op {
                        "counter" => m.add(value),
                        "gauge" => m.set(value),
                        _ => m.buckets(&buckets).observe(value),
                    }
                };
                let result = match op {
                    "counter" => written(metrics::counter(&metric, &help)),
                    "gauge" => written(metrics::gauge(&metric, &help)),
                    "histogram" => written(metrics::histogram(&metric, &help)),
                    "delete" => match metrics::delete(&metric, &pairs) {
                        true => Ok(()),
                        false => Err(MetricError::InvalidName("nothing deleted".into())),
                    },
                    "delete-group" => {
                        ok += u64::from(metrics::delete_group(&group));
                        continue;
                    }
                    other => Err(MetricError::InvalidValue(format!("unknown op `{other}`"))),
                };
                match result {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        err += 1;
                        if first.is_null() {
                            first = json!({"kind": kind(&e), "message": e.to_string()});
                        }
                    }
                }
            }
            let micros = started.elapsed().as_micros() as u64;
            json!({"ok": ok, "err": err, "first": first, "micros": micros})
        })
        .collect();
    let line = json!({"tag": tag, "key": ev.meta().key(), "metrics": results});
    informant_sdk::log::info(&line.to_string());
}

fn kind(e: &MetricError) -> &'static str {
    match e {
        MetricError::InvalidName(_) => "invalid-name",
        MetricError::InvalidLabel(_) => "invalid-label",
        MetricError::InvalidValue(_) => "invalid-value",
        MetricError::TypeConflict(_) => "type-conflict",
        MetricError::TooManySeries(_) => "too-many-series",
    }
}
