//! Objects from a multi-document YAML file (`kubectl apply -f` style): demo objects for
//! `informant dev --seed`, and the cache's starting content for `informant replay --objects`.

use std::path::Path;

use serde_json::Value;

use super::ReplayError;

/// One object and the document it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlObject {
    /// 1-based index of its YAML document in the file (items of a `List` share their list's).
    pub document: usize,
    /// The object, as JSON.
    pub object: Value,
}

/// Reads every object of a multi-document YAML file; empty documents are skipped and `List`
/// kinds are expanded into their items. Errors name the file, the document and the reason.
pub fn read_yaml_objects(path: &Path) -> Result<Vec<YamlObject>, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_yaml_objects(&text, path)
}

/// [`read_yaml_objects`] on text already read; `path` is only for messages.
pub fn parse_yaml_objects(text: &str, path: &Path) -> Result<Vec<YamlObject>, ReplayError> {
    let mut out = Vec::new();
    for (i, (first_line, doc)) in documents(text).into_iter().enumerate() {
        let document = i + 1;
        let bad = |reason: String| ReplayError::Document {
            path: path.to_path_buf(),
            document,
            reason,
        };
        let value: Value = serde_saphyr::from_str(doc).map_err(|e| {
            // The parser counts lines within the document; name the file's line.
            match e.location() {
                Some(at) => bad(format!(
                    "line {}: {}",
                    first_line + at.line() as usize - 1,
                    e.to_string().lines().next().unwrap_or_default()
                )),
                None => bad(e.to_string()),
            }
        })?;
        match value {
            Value::Null => continue,
            Value::Object(ref map)
                if map
                    .get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List"))
                    && map.get("items").is_some_and(Value::is_array) =>
            {
                for (j, item) in map["items"].as_array().into_iter().flatten().enumerate() {
                    check(item).map_err(|r| bad(format!("items[{j}]: {r}")))?;
                    out.push(YamlObject {
                        document,
                        object: item.clone(),
                    });
                }
            }
            object => {
                check(&object).map_err(|r| bad(r.to_string()))?;
                out.push(YamlObject { document, object });
            }
        }
    }
    Ok(out)
}

/// The documents of a YAML stream with the 1-based line each starts on: split at `---` lines
/// (a document marker sits at column 0, where no block content can), so each document parses
/// on its own and errors name the document they are in, empty ones included in the count.
fn documents(text: &str) -> Vec<(usize, &str)> {
    let mut docs = Vec::new();
    let (mut start, mut start_line, mut offset) = (0, 1, 0);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let marker = line
            .strip_prefix("---")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
        if marker {
            // Comments before the first marker are not a document of their own.
            let content = text[start..offset]
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            if !docs.is_empty() || content {
                docs.push((start_line, &text[start..offset]));
            }
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    docs.push((start_line, &text[start..]));
    docs
}

/// The fields every object needs to be stored or cached.
fn check(object: &Value) -> Result<(), NotAnObject> {
    let Some(map) = object.as_object() else {
        return Err(NotAnObject::NotAMapping);
    };
    for field in ["apiVersion", "kind"] {
        if map
            .get(field)
            .is_none_or(|v| v.as_str().is_none_or(str::is_empty))
        {
            return Err(NotAnObject::Missing(field));
        }
    }
    if object
        .pointer("/metadata/name")
        .is_none_or(|v| v.as_str().is_none_or(str::is_empty))
    {
        return Err(NotAnObject::Missing("metadata.name"));
    }
    Ok(())
}

/// Why a YAML document is not an object the cache could hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NotAnObject {
    /// A scalar or a sequence.
    #[error("expected a Kubernetes object (a mapping)")]
    NotAMapping,
    /// A field every object has.
    #[error("field `{0}`: missing or not a string")]
    Missing(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_documents_and_lists() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: demo}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: demo}}\n";
        let objs = parse_yaml_objects(text, Path::new("seed.yaml")).unwrap();
        let docs: Vec<usize> = objs.iter().map(|o| o.document).collect();
        assert_eq!(docs, [1, 3, 3]);
        assert_eq!(objs[2].object["metadata"]["name"], "b");
    }

    #[test]
    fn errors_name_file_and_document() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n---\nkind: ConfigMap\nmetadata: {name: a}\n";
        let err = parse_yaml_objects(text, Path::new("seed.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("seed.yaml") && err.contains("document 2"),
            "{err}"
        );
        assert!(err.contains("apiVersion"), "{err}");
        let err = parse_yaml_objects("a: [unclosed\n", Path::new("bad.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad.yaml") && err.contains("document 1"),
            "{err}"
        );
        // A syntax error names the file's line, not the document's.
        let text =
            "# seed\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: [\n";
        let err = parse_yaml_objects(text, Path::new("bad.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("document 2") && err.contains("line 7"),
            "{err}"
        );
    }
}
