//! vLLM's `BFCLDataset` (Berkeley Function Calling Leaderboard): one JSON Lines file per
//! category at the repository's root (`BFCL_v3_<category>.json`), rows
//! `{id, question, function}`. The categories' rows are interleaved round-robin (then
//! shuffled with Python's `random.Random(seed)`, by the sampler), each request sends the
//! first turn's messages as they are, with the functions as OpenAI tools in the request
//! body (`tools`, `tool_choice: "auto"`).

use bench_sdk::table::{self, ReadOptions, Row, Value};
use bench_sdk::{ChatMessage, ContentPart, PluginError};

use crate::kinds::Item;

/// vLLM's `--bfcl-categories` default.
pub const DEFAULT_CATEGORIES: [&str; 3] = ["simple", "live_simple", "multiple"];

/// The categories of `--bfcl-categories` (comma-separated; empty: the default).
pub fn categories(option: Option<&str>) -> Vec<String> {
    let given: Vec<String> = option
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    if given.is_empty() {
        DEFAULT_CATEGORIES.map(String::from).to_vec()
    } else {
        given
    }
}

/// BFCL's type names that are not JSON Schema's, and what vLLM maps them to.
fn remap(t: &str) -> Option<&'static str> {
    Some(match t {
        "dict" => "object",
        "float" => "number",
        "tuple" => "array",
        "any" => "string",
        _ => return None,
    })
}

/// A BFCL schema as strict JSON Schema: every `"type"` string remapped, recursively.
pub fn translate(v: &Value) -> serde_json::Value {
    match v {
        Value::Map(fields) => {
            let mut out = serde_json::Map::new();
            for (k, v) in fields {
                out.insert(k.clone(), translate(v));
            }
            if let Some(serde_json::Value::String(t)) = out.get("type")
                && let Some(new) = remap(t)
            {
                out.insert("type".into(), new.into());
            }
            serde_json::Value::Object(out)
        }
        Value::List(items) => serde_json::Value::Array(items.iter().map(translate).collect()),
        other => other.to_json(),
    }
}

/// The tools of `functions` as a JSON array in the file's key order (each
/// `{"type": "function", "function": <translated>}`), for the chat template that measures
/// the prompt: transformers renders a template's `tools | tojson` in the order Python's
/// dicts keep, and the order changes the tokens. (`serde_json` here sorts keys, which is
/// fine for the request body but not for this text.)
fn tools_json(functions: &[&Value]) -> String {
    let mut out = String::from("[");
    for (i, f) in functions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"type\":\"function\",\"function\":");
        ordered_json(f, &mut out);
        out.push('}');
    }
    out.push(']');
    out
}

/// [`translate`]'s result as JSON text, keys in the file's order.
fn ordered_json(v: &Value, out: &mut String) {
    match v {
        Value::Map(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                match (k.as_str(), v) {
                    ("type", Value::Str(t)) if remap(t).is_some() => {
                        out.push_str(&serde_json::Value::from(remap(t)).to_string());
                    }
                    _ => ordered_json(v, out),
                }
            }
            out.push('}');
        }
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ordered_json(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_json().to_string()),
    }
}

/// Python's truthiness of a field (`not x` for a missing, empty or null value).
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Str(s)) => !s.is_empty(),
        Some(Value::List(l)) => !l.is_empty(),
        Some(Value::Map(m)) => !m.is_empty(),
        Some(Value::Bool(b)) => *b,
        Some(Value::Int(i)) => *i != 0,
        Some(Value::Float(f)) => *f != 0.0,
        Some(Value::Bytes(b)) => !b.is_empty(),
    }
}

/// The item of one row; a row vLLM skips (no question or functions, no first turn) is an
/// item marked `skip`, so that it still takes its place in the shuffle.
pub fn item(row: &Row, file: &str) -> Result<Item, PluginError> {
    let mut skipped = Item::text(String::new());
    skipped.skip = true;
    let (question, functions) = (row.get("question"), row.get("function"));
    if !truthy(question) || !truthy(functions) {
        return Ok(skipped);
    }
    let Some(first) = question
        .and_then(Value::as_list)
        .and_then(|q| q.first())
        .and_then(Value::as_list)
        .filter(|t| !t.is_empty())
    else {
        return Ok(skipped);
    };
    let mut messages = Vec::with_capacity(first.len());
    for (i, m) in first.iter().enumerate() {
        let text = |key: &str| match m.get(key) {
            Some(Value::Str(s)) => Ok(s.clone()),
            None | Some(Value::Null) if key == "content" => Ok(String::new()),
            other => Err(row.place.error(
                file,
                format!(
                    "question[0][{i}].{key} is {}, not a string",
                    other.map_or("missing", Value::kind)
                ),
            )),
        };
        messages.push(ChatMessage {
            role: text("role")?,
            content: vec![ContentPart::Text(text("content")?)],
        });
    }
    let functions: Vec<&Value> = match functions.expect("truthy above") {
        Value::List(fs) => fs.iter().collect(),
        other => vec![other],
    };
    let tools: Vec<serde_json::Value> = functions
        .iter()
        .map(|f| serde_json::json!({"type": "function", "function": translate(f)}))
        .collect();
    let body = serde_json::json!({"tools": tools, "tool_choice": "auto"});
    let mut item = Item::text(
        messages
            .last()
            .and_then(|m| match m.content.first() {
                Some(ContentPart::Text(t)) => Some(t.clone()),
                _ => None,
            })
            .unwrap_or_default(),
    );
    item.messages = Some(messages);
    item.extra_body = Some(body.to_string());
    item.tools = Some(tools_json(&functions));
    Ok(item)
}

/// The rows of the categories' files under `root`, interleaved round-robin.
pub fn load(root: &str, categories: &[String]) -> Result<Vec<Item>, PluginError> {
    let mut per_category = Vec::with_capacity(categories.len());
    for c in categories {
        let path = format!("{root}/BFCL_v3_{c}.json");
        if std::fs::metadata(&path).is_err() {
            return Err(PluginError::InvalidConfig(format!(
                "hf: BFCL category '{c}' not found: no file {path}. Check --bfcl-categories \
                 (default: {})",
                DEFAULT_CATEGORIES.join(",")
            )));
        }
        let options = ReadOptions {
            format: Some(table::Format::JsonLines),
            ..ReadOptions::default()
        };
        let t = table::read(&path, &options)?;
        let items = t
            .rows
            .iter()
            .map(|r| item(r, &t.path))
            .collect::<Result<Vec<_>, _>>()?;
        per_category.push(items);
    }
    let longest = per_category.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::new();
    for i in 0..longest {
        for items in &per_category {
            if let Some(it) = items.get(i) {
                out.push(it.clone());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::table::Place;

    fn row(json: &str) -> Row {
        let Value::Map(fields) =
            Value::from(serde_json::from_str::<serde_json::Value>(json).unwrap())
        else {
            panic!()
        };
        Row {
            place: Place::Line(1),
            fields,
        }
    }

    #[test]
    fn rows_become_messages_and_openai_tools() {
        let r = row(
            r#"{"id": "simple_0", "question": [[{"role": "user", "content": "Area of a triangle?"}]],
                "function": [{"name": "area", "description": "d", "parameters": {"type": "dict",
                "properties": {"base": {"type": "float"}, "dims": {"type": "tuple", "items": {"type": "any"}}},
                "required": ["base"]}}]}"#,
        );
        let it = item(&r, "f.json").unwrap();
        assert!(!it.skip);
        assert_eq!(it.prompt, "Area of a triangle?");
        let m = it.messages.unwrap();
        assert_eq!((m.len(), m[0].role.as_str()), (1, "user"));
        let body: serde_json::Value = serde_json::from_str(&it.extra_body.unwrap()).unwrap();
        assert_eq!(body["tool_choice"], "auto");
        let f = &body["tools"][0];
        assert_eq!(f["type"], "function");
        assert_eq!(f["function"]["name"], "area");
        let p = &f["function"]["parameters"];
        assert_eq!(p["type"], "object");
        assert_eq!(p["properties"]["base"]["type"], "number");
        assert_eq!(p["properties"]["dims"]["type"], "array");
        assert_eq!(p["properties"]["dims"]["items"]["type"], "string");
        // The template's tools are the body's tools.
        let tools: serde_json::Value = serde_json::from_str(&it.tools.unwrap()).unwrap();
        assert_eq!(tools, body["tools"]);
    }

    #[test]
    fn the_templates_tools_keep_the_files_key_order() {
        let s = |t: &str| Value::Str(t.into());
        let f = Value::Map(vec![
            ("name".into(), s("f")),
            ("description".into(), s("d \"q\"")),
            (
                "parameters".into(),
                Value::Map(vec![
                    ("type".into(), s("dict")),
                    ("properties".into(), Value::Map(vec![])),
                    ("required".into(), Value::List(vec![s("a"), Value::Int(2)])),
                ]),
            ),
        ]);
        assert_eq!(
            tools_json(&[&f, &f]).split("},{\"type").next().unwrap(),
            r#"[{"type":"function","function":{"name":"f","description":"d \"q\"","parameters":{"type":"object","properties":{},"required":["a",2]}}"#
        );
    }

    #[test]
    fn unusable_rows_are_skipped_and_categories_default() {
        for json in [
            r#"{"question": [], "function": [{"name": "f"}]}"#,
            r#"{"question": [[{"role": "user", "content": "q"}]], "function": []}"#,
            r#"{"question": [[]], "function": [{"name": "f"}]}"#,
            r#"{"question": ["text"], "function": [{"name": "f"}]}"#,
        ] {
            assert!(item(&row(json), "f.json").unwrap().skip, "{json}");
        }
        assert_eq!(categories(None), ["simple", "live_simple", "multiple"]);
        assert_eq!(
            categories(Some(" , ")),
            ["simple", "live_simple", "multiple"]
        );
        assert_eq!(categories(Some("simple, java")), ["simple", "java"]);
    }
}
