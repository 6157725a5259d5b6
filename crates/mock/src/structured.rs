//! Structured output on `/v1/completions` and `/v1/chat/completions`: a request's output
//! constraint, read from its body, and the answer text that keeps it (or, on purpose,
//! breaks it).
//!
//! The constraint comes as OpenAI's `response_format` (`{"type": "json_schema",
//! "json_schema": {"schema": S}}`; `json_object` counts as the schema `{"type":
//! "object"}`; `text` is no constraint), as vLLM's `structured_outputs` (`{"json": S}`,
//! `{"regex": R}`, `{"choice": [...]}`, `{"grammar": G}`, `{"json_object": true}`), or as
//! vLLM's older `guided_json`, `guided_regex`, `guided_choice` and `guided_grammar`. More
//! than one in a request is refused with 400.
//!
//! - A JSON schema is answered with a JSON instance that the schema accepts, generated
//!   deterministically from it (see [`instance`]) and written compactly. A schema keyword
//!   the mock cannot satisfy (`pattern`, `not`, `if`, `contains`, `patternProperties`,
//!   remote references, schemas to merge, bounds nothing fits, ...) is answered with HTTP
//!   400 naming the keyword, never with text the schema might refuse.
//! - A choice is answered with its first choice.
//! - A regular expression or a grammar is answered with the ordinary text (the mock has no
//!   way to generate from them), and the record says nothing of its validity.
//!
//! The text is sent in pieces of up to four characters, each one output token (one chunk
//! of a stream, one token of `usage`), after the reasoning tokens of a chat answer; the
//! answer ends after its last piece (`finish_reason` `"stop"`), or is cut at `max_tokens`
//! (`max_completion_tokens`) like a real server's (`"length"`), which leaves a JSON text
//! truncated and invalid. Without a `max_tokens` the whole text is sent (a real server's
//! limit is its context), not `--output-len` tokens. Timing is that of any answer: token
//! `i` at arrival + `ttft + i * itl`.
//!
//! `--invalid-structured-rate` answers a share of the requests with a JSON-schema or
//! choice constraint wrongly, by the plan of the other faults (see `FaultPlan`) counted
//! over those requests alone: JSON schemas get, in turn, text that is not JSON (the valid
//! text without its last character) and JSON the schema refuses (a required property of
//! the root left out; where there is none, a root of a type the schema refuses); a
//! choice gets a text that is none of the choices.
//!
//! Every completions or chat request with an `x-request-id` that is answered (not one a
//! fault or a 400 refuses at once) leaves a [`StructuredAnswer`], read with
//! [`crate::MockServer::structured`] or `GET /mock/structured`.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::faults::FaultPlan;
use crate::reply::{PIECE_CHARS, Pieces};
use crate::timing::MAX_KEPT_REQUESTS;

#[cfg(test)]
mod tests;

/// The body fields that may carry an output constraint (completions and chat).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Fields {
    #[serde(default)]
    response_format: Option<Value>,
    #[serde(default)]
    structured_outputs: Option<Value>,
    #[serde(default)]
    guided_json: Option<Value>,
    #[serde(default)]
    guided_regex: Option<Value>,
    #[serde(default)]
    guided_choice: Option<Value>,
    #[serde(default)]
    guided_grammar: Option<Value>,
}

/// A request's output constraint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Constraint {
    /// A JSON schema.
    Json(Value),
    /// A regular expression (the mock answers its ordinary text).
    Regex,
    /// One of these texts, exactly.
    Choice(Vec<String>),
    /// A grammar (the mock answers its ordinary text).
    Grammar,
}

/// The kind of a request's output constraint, as [`StructuredAnswer`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintKind {
    JsonSchema,
    Regex,
    Choice,
    Grammar,
}

impl Constraint {
    pub(crate) fn kind(&self) -> ConstraintKind {
        match self {
            Constraint::Json(_) => ConstraintKind::JsonSchema,
            Constraint::Regex => ConstraintKind::Regex,
            Constraint::Choice(_) => ConstraintKind::Choice,
            Constraint::Grammar => ConstraintKind::Grammar,
        }
    }
}

impl Fields {
    /// The request's constraint, if it has one; the error says what is wrong with the body.
    pub(crate) fn constraint(self) -> Result<Option<Constraint>, String> {
        let mut found: Vec<(&str, Constraint)> = Vec::new();
        if let Some(format) = self.response_format {
            match format.get("type").and_then(Value::as_str) {
                Some("text") => {}
                Some("json_object") => found.push(("response_format", any_object())),
                Some("json_schema") => {
                    let schema = format
                        .get("json_schema")
                        .and_then(|s| s.get("schema"))
                        .ok_or("response_format.json_schema.schema is missing")?;
                    found.push(("response_format", Constraint::Json(schema.clone())));
                }
                other => {
                    return Err(format!(
                        "response_format.type {other:?} is not one of text, json_object, \
                         json_schema"
                    ));
                }
            }
        }
        if let Some(outputs) = self.structured_outputs {
            let Value::Object(outputs) = outputs else {
                return Err("structured_outputs must be an object".to_owned());
            };
            for (key, value) in outputs {
                let name = format!("structured_outputs.{key}");
                let constraint = match key.as_str() {
                    _ if value.is_null() => continue,
                    "json" => json_schema(&name, value)?,
                    "regex" => text(&name, &value).map(|_| Constraint::Regex)?,
                    "choice" => choices(&name, value)?,
                    "grammar" => text(&name, &value).map(|_| Constraint::Grammar)?,
                    "json_object" if value == Value::Bool(true) => any_object(),
                    // Options of the constraint (`disable_any_whitespace`, ...), or kinds
                    // the mock does not know.
                    _ => continue,
                };
                found.push(("structured_outputs", constraint));
            }
        }
        if let Some(schema) = self.guided_json {
            found.push(("guided_json", json_schema("guided_json", schema)?));
        }
        if let Some(regex) = self.guided_regex {
            text("guided_regex", &regex)?;
            found.push(("guided_regex", Constraint::Regex));
        }
        if let Some(list) = self.guided_choice {
            found.push(("guided_choice", choices("guided_choice", list)?));
        }
        if let Some(grammar) = self.guided_grammar {
            text("guided_grammar", &grammar)?;
            found.push(("guided_grammar", Constraint::Grammar));
        }
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "only one kind of structured output per request, this one has {}",
                names.join(", ")
            ));
        }
        Ok(found.pop().map(|(_, constraint)| constraint))
    }
}

fn any_object() -> Constraint {
    Constraint::Json(json!({"type": "object"}))
}

/// A schema, given as JSON or (vLLM takes both) as a string holding JSON.
fn json_schema(name: &str, value: Value) -> Result<Constraint, String> {
    match value {
        Value::String(text) => serde_json::from_str(&text)
            .map(Constraint::Json)
            .map_err(|e| format!("{name} is not a JSON schema: {e}")),
        Value::Object(_) | Value::Bool(_) => Ok(Constraint::Json(value)),
        _ => Err(format!("{name} must be a JSON schema")),
    }
}

fn text<'v>(name: &str, value: &'v Value) -> Result<&'v str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("{name} must be a string"))
}

fn choices(name: &str, value: Value) -> Result<Constraint, String> {
    let list: Option<Vec<String>> = match value {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(choice) => Some(choice),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    match list {
        Some(list) if !list.is_empty() => Ok(Constraint::Choice(list)),
        _ => Err(format!("{name} must be a non-empty list of strings")),
    }
}

/// Something in a constraint the mock cannot satisfy; the request gets a 400 naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported {
    /// The schema keyword (or the constraint's field) at fault.
    pub keyword: String,
    pub why: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "structured output: the mock server cannot satisfy `{}`: {}",
            self.keyword, self.why
        )
    }
}

fn unsupported(keyword: &str, why: impl Into<String>) -> Unsupported {
    Unsupported {
        keyword: keyword.to_owned(),
        why: why.into(),
    }
}

/// The text of a structured answer and whether it keeps its constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub text: String,
    pub valid: bool,
}

/// The answer to `constraint`: `Ok(None)` for a regex or a grammar (the ordinary text is
/// answered), else the valid text, or, when `plan` (`--invalid-structured-rate`, asked
/// only once the constraint is known to be satisfiable) says so, a wrong one.
pub(crate) fn answer(
    constraint: &Constraint,
    plan: &FaultPlan,
) -> Result<Option<Answer>, Unsupported> {
    let valid = match constraint {
        Constraint::Regex | Constraint::Grammar => return Ok(None),
        Constraint::Json(schema) => instance(schema)?.to_string(),
        Constraint::Choice(choices) => match choices.first() {
            Some(first) if !first.is_empty() => first.clone(),
            _ => return Err(unsupported("choice", "the first choice is empty")),
        },
    };
    Ok(Some(match plan.next_counted().1 {
        None => Answer {
            text: valid,
            valid: true,
        },
        Some((_, before)) => Answer {
            text: wrong(constraint, &valid, before),
            valid: false,
        },
    }))
}

/// A wrong answer to `constraint` whose right one is `valid`, the wrong answers served
/// before it numbering `before`: for a schema, text that is not JSON when that is even,
/// JSON the schema refuses when odd (not JSON where the mock finds no such JSON); for a
/// choice, a text that is none of the choices.
pub(crate) fn wrong(constraint: &Constraint, valid: &str, before: u128) -> String {
    match constraint {
        Constraint::Json(schema) => {
            let refused = (before % 2 == 1)
                .then(|| serde_json::from_str(valid).ok())
                .flatten()
                .and_then(|instance| refused(schema, &instance));
            match refused {
                Some(json) => json.to_string(),
                None => not_json(valid),
            }
        }
        Constraint::Choice(choices) => {
            let mut text = format!("{}?", choices.first().map_or("", String::as_str));
            while choices.contains(&text) {
                text.push('?');
            }
            text
        }
        Constraint::Regex | Constraint::Grammar => valid.to_owned(),
    }
}

/// `valid` without its last character, or, where that still parses (a number: `12`
/// becomes `1`), `valid` after a `[` that is never closed.
pub(crate) fn not_json(valid: &str) -> String {
    let mut text = valid.to_owned();
    text.pop();
    if serde_json::from_str::<Value>(&text).is_ok() {
        format!("[{valid}")
    } else {
        text
    }
}

/// `text` in pieces of up to [`PIECE_CHARS`] characters, each escaped for a JSON string.
pub(crate) fn pieces(text: &str) -> Pieces {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(PIECE_CHARS)
        .map(|piece| {
            let piece: String = piece.iter().collect();
            let quoted = Value::String(piece).to_string();
            quoted[1..quoted.len() - 1].into()
        })
        .collect()
}

/// JSON that `schema` refuses, made from its valid `instance`: the instance less the first
/// of the root's `required` properties, or else the first of a few values of different
/// types that the root certainly refuses; `None` where the mock finds neither.
pub(crate) fn refused(schema: &Value, instance: &Value) -> Option<Value> {
    let mut root = schema;
    for _ in 0..MAX_REFS {
        match root.get("$ref").and_then(|r| pointer(schema, r)) {
            Some(target) => root = target,
            None => break,
        }
    }
    if let (Value::Object(object), Some(Value::Array(required))) = (instance, root.get("required"))
        && let Some(name) = required
            .iter()
            .filter_map(Value::as_str)
            .find(|name| object.contains_key(*name))
    {
        let rest: Map<String, Value> = object
            .iter()
            .filter(|(key, _)| key.as_str() != name)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        return Some(Value::Object(rest));
    }
    [
        json!("mock"),
        json!([]),
        json!(0.5),
        json!(true),
        Value::Null,
        json!({}),
    ]
    .into_iter()
    .find(|candidate| refuses(schema, schema, candidate, 0))
}

/// Whether `schema` certainly refuses `value` (false where unsure), judging by `type`,
/// `const` and `enum`, through `$ref`, `anyOf`, `oneOf` and `allOf`.
fn refuses(root: &Value, schema: &Value, value: &Value, depth: usize) -> bool {
    let object = match schema {
        Value::Bool(accepts) => return !accepts,
        Value::Object(object) => object,
        _ => return false,
    };
    if depth > MAX_REFS {
        return false;
    }
    let refused_by = |branch: &Value| refuses(root, branch, value, depth + 1);
    let branches = |keyword: &str| {
        object
            .get(keyword)
            .and_then(Value::as_array)
            .filter(|branches| !branches.is_empty())
    };
    object.get("const").is_some_and(|c| c != value)
        || object
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| !values.contains(value))
        || object.get("type").is_some_and(|t| !type_accepts(t, value))
        || object
            .get("$ref")
            .and_then(|r| pointer(root, r))
            .is_some_and(refused_by)
        || branches("anyOf").is_some_and(|b| b.iter().all(refused_by))
        || branches("oneOf").is_some_and(|b| b.iter().all(refused_by))
        || branches("allOf").is_some_and(|b| b.iter().any(refused_by))
}

/// Whether a `type` (a name or a list of names) accepts `value`; an unreadable one does.
fn type_accepts(types: &Value, value: &Value) -> bool {
    let accepts = |name: &str| match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        _ => true,
    };
    match types {
        Value::String(name) => accepts(name),
        Value::Array(names) => names.iter().any(|n| n.as_str().is_none_or(accepts)),
        _ => true,
    }
}

/// The target of a local `$ref` (`#`, `#/$defs/...`, any JSON pointer after `#`).
fn pointer<'a>(root: &'a Value, reference: &Value) -> Option<&'a Value> {
    let path = reference.as_str()?.strip_prefix('#')?;
    if path.is_empty() {
        Some(root)
    } else {
        root.pointer(path)
    }
}

/// At most this many `$ref`s are followed on one path from the root.
const MAX_REFS: usize = 32;

/// The keywords that constrain an instance; next to `$ref`, `anyOf`, `oneOf` or `allOf`
/// they would need schemas merged, which the mock does not do.
const ACTING: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "items",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
];

const OBJECT_KEYWORDS: &[&str] = &[
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
];
const ARRAY_KEYWORDS: &[&str] = &[
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
];
const STRING_KEYWORDS: &[&str] = &["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYWORDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

/// A JSON instance that `schema` accepts, generated deterministically:
/// - `const` and `enum` give their (first) value; `$ref` (local: `#/$defs/...`,
///   `#/definitions/...`, any pointer after `#`) its target; `anyOf` and `oneOf` their
///   first branch, `allOf` its only one (each with no other constraining keyword beside);
/// - a `type` list gives its first type; without `type`, the keywords tell it (`properties`
///   an object, `items` an array, ...), and a schema with none gives a string;
/// - an object has every one of its `properties` in the schema's order, and the
///   `required` ones not among them (from `additionalProperties` where that is a
///   schema), never others; an array has `max(minItems, 1)` items, within `maxItems`,
///   from `prefixItems` and `items`; a string is the word `mock` padded or trimmed to
///   `minLength`/`maxLength`, or a sample of its `format` (email, date-time, uuid, ...);
///   a number is 1, or the least value within `minimum`/`maximum` and their exclusive
///   kinds, a multiple of a whole `multipleOf`; a boolean `true`;
/// - where `$ref`s recur (a recursive schema), objects below have only their required
///   properties and arrays `minItems` items, so that the instance ends.
///
/// A keyword that the mock cannot satisfy is an [`Unsupported`] naming it.
pub(crate) fn instance(schema: &Value) -> Result<Value, Unsupported> {
    Generator { root: schema }.value(schema, &mut Vec::new(), false)
}

struct Generator<'a> {
    root: &'a Value,
}

/// What a schema with no constraint gets.
fn any() -> Value {
    Value::String("mock".to_owned())
}

impl<'a> Generator<'a> {
    /// An instance of `schema`; `refs` are the `$ref`s followed to get here, and `minimal`
    /// says that one of them recurred.
    fn value(
        &self,
        schema: &'a Value,
        refs: &mut Vec<&'a str>,
        minimal: bool,
    ) -> Result<Value, Unsupported> {
        let object = match schema {
            Value::Bool(true) => return Ok(any()),
            Value::Bool(false) => {
                return Err(unsupported("false", "a schema that accepts nothing"));
            }
            Value::Object(object) => object,
            _ => return Err(unsupported("schema", "a schema is an object or a boolean")),
        };
        for keyword in ["not", "if", "$dynamicRef", "$recursiveRef"] {
            if object.contains_key(keyword) {
                return Err(unsupported(keyword, "not supported by the mock server"));
            }
        }
        if let Some(value) = object.get("const") {
            return Ok(value.clone());
        }
        if let Some(values) = object.get("enum") {
            return match values.as_array().and_then(|values| values.first()) {
                Some(first) => Ok(first.clone()),
                None => Err(unsupported("enum", "an empty enum accepts nothing")),
            };
        }
        if let Some(reference) = object.get("$ref") {
            alone(object, "$ref")?;
            let name = reference
                .as_str()
                .ok_or_else(|| unsupported("$ref", "not a string"))?;
            let target = pointer(self.root, reference).ok_or_else(|| {
                unsupported(
                    "$ref",
                    format!(
                        "{name:?} is not a reference within the schema (#/$defs/..., \
                         #/definitions/...) that names something"
                    ),
                )
            })?;
            if refs.len() >= MAX_REFS {
                return Err(unsupported(
                    "$ref",
                    "references recur without end (no instance of finite size found)",
                ));
            }
            let recurs = refs.contains(&name);
            refs.push(name);
            let value = self.value(target, refs, minimal || recurs);
            refs.pop();
            return value;
        }
        for keyword in ["anyOf", "oneOf", "allOf"] {
            let Some(branches) = object.get(keyword) else {
                continue;
            };
            alone(object, keyword)?;
            let branches = branches
                .as_array()
                .filter(|branches| !branches.is_empty())
                .ok_or_else(|| unsupported(keyword, "must be a non-empty list of schemas"))?;
            if keyword == "allOf" && branches.len() > 1 {
                return Err(unsupported(
                    "allOf",
                    "more than one schema to merge, which the mock does not do",
                ));
            }
            // Below a recurring reference, a branch that does not recur again ends sooner.
            let branch = branches
                .iter()
                .find(|branch| {
                    !minimal
                        || branch
                            .get("$ref")
                            .and_then(Value::as_str)
                            .is_none_or(|r| !refs.contains(&r))
                })
                .unwrap_or(&branches[0]);
            return self.value(branch, refs, minimal);
        }
        match type_name(object)? {
            "null" => Ok(Value::Null),
            "boolean" => Ok(Value::Bool(true)),
            "integer" => number(object, true),
            "number" => number(object, false),
            "string" => string(object),
            "array" => self.array(object, refs, minimal),
            "object" => self.object(object, refs, minimal),
            "any" => Ok(any()),
            other => Err(unsupported("type", format!("unknown type {other:?}"))),
        }
    }

    fn array(
        &self,
        object: &'a Map<String, Value>,
        refs: &mut Vec<&'a str>,
        minimal: bool,
    ) -> Result<Value, Unsupported> {
        if object.contains_key("contains") {
            return Err(unsupported("contains", "not supported by the mock server"));
        }
        let min = count(object, "minItems")?.unwrap_or(0);
        let max = count(object, "maxItems")?;
        if max.is_some_and(|max| max < min) {
            return Err(unsupported("minItems", "more than maxItems"));
        }
        // The schemas of the first items, and of the items after them.
        let (first, rest, rest_keyword): (&[Value], _, _) =
            match (object.get("prefixItems"), object.get("items")) {
                (Some(Value::Array(prefix)), items) => (prefix, items, "items"),
                (_, Some(Value::Array(tuple))) => {
                    (tuple, object.get("additionalItems"), "additionalItems")
                }
                (_, items) => (&[], items, "items"),
            };
        let mut n = if minimal { min } else { min.max(1) };
        if let Some(max) = max {
            n = n.min(max);
        }
        let mut items = Vec::with_capacity(n);
        for i in 0..n {
            match first.get(i).or(rest) {
                Some(Value::Bool(false)) if i >= min => break,
                Some(Value::Bool(false)) => {
                    return Err(unsupported(
                        rest_keyword,
                        "allows fewer items than minItems asks for",
                    ));
                }
                Some(schema) => items.push(self.value(schema, refs, minimal)?),
                None => items.push(any()),
            }
        }
        if object.get("uniqueItems") == Some(&Value::Bool(true))
            && items
                .iter()
                .enumerate()
                .any(|(i, item)| items[..i].contains(item))
        {
            return Err(unsupported(
                "uniqueItems",
                "the mock's items would repeat (it makes each item the same way)",
            ));
        }
        Ok(Value::Array(items))
    }

    fn object(
        &self,
        object: &'a Map<String, Value>,
        refs: &mut Vec<&'a str>,
        minimal: bool,
    ) -> Result<Value, Unsupported> {
        for keyword in [
            "patternProperties",
            "propertyNames",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
        ] {
            let empty = match object.get(keyword) {
                None => true,
                Some(Value::Object(map)) => map.is_empty(),
                Some(_) => false,
            };
            if !empty {
                return Err(unsupported(keyword, "not supported by the mock server"));
            }
        }
        let properties = match object.get("properties") {
            None => None,
            Some(Value::Object(properties)) => Some(properties),
            Some(_) => return Err(unsupported("properties", "not an object")),
        };
        let required: Vec<&str> = match object.get("required") {
            None => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|name| {
                    name.as_str()
                        .ok_or_else(|| unsupported("required", "not a list of names"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(unsupported("required", "not a list of names")),
        };
        let mut out = Map::new();
        for (name, schema) in properties.into_iter().flatten() {
            if minimal && !required.contains(&name.as_str()) {
                continue;
            }
            out.insert(name.clone(), self.value(schema, refs, minimal)?);
        }
        let closed = |keyword: &str| object.get(keyword) == Some(&Value::Bool(false));
        for name in &required {
            if out.contains_key(*name) {
                continue;
            }
            if closed("additionalProperties") || closed("unevaluatedProperties") {
                return Err(unsupported(
                    "required",
                    format!(
                        "{name:?} is required, not among the properties, and no others are allowed"
                    ),
                ));
            }
            let value = match object.get("additionalProperties") {
                Some(schema @ Value::Object(_)) => self.value(schema, refs, minimal)?,
                _ => any(),
            };
            out.insert((*name).to_owned(), value);
        }
        if count(object, "minProperties")?.is_some_and(|min| out.len() < min) {
            return Err(unsupported(
                "minProperties",
                "more than the properties the schema names",
            ));
        }
        if let Some(max) = count(object, "maxProperties")?
            && out.len() > max
        {
            // Leave out the last optional properties.
            let mut extra = out.len() - max;
            let mut keep = vec![true; out.len()];
            for (i, name) in out.keys().enumerate().rev() {
                if extra > 0 && !required.contains(&name.as_str()) {
                    keep[i] = false;
                    extra -= 1;
                }
            }
            if extra > 0 {
                return Err(unsupported(
                    "maxProperties",
                    "fewer than the required properties",
                ));
            }
            out = out
                .into_iter()
                .zip(keep)
                .filter_map(|(entry, keep)| keep.then_some(entry))
                .collect();
        }
        Ok(Value::Object(out))
    }
}

/// Fails when `object` has a constraining keyword besides `keyword` (`$ref`, `anyOf`,
/// `oneOf`, `allOf`), which would need two schemas merged.
fn alone(object: &Map<String, Value>, keyword: &str) -> Result<(), Unsupported> {
    match object
        .keys()
        .find(|other| *other != keyword && ACTING.contains(&other.as_str()))
    {
        Some(other) => Err(unsupported(
            keyword,
            format!("next to `{other}`, which would need schemas merged (the mock does not)"),
        )),
        None => Ok(()),
    }
}

/// The type to generate: `type` (the first of a list), else what the keywords tell.
fn type_name(object: &Map<String, Value>) -> Result<&str, Unsupported> {
    match object.get("type") {
        Some(Value::String(name)) => Ok(name),
        Some(Value::Array(names)) => names
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| unsupported("type", "an empty list, or one of other than names")),
        Some(_) => Err(unsupported(
            "type",
            "neither a type name nor a list of them",
        )),
        None => {
            let has = |keywords: &[&str]| keywords.iter().any(|k| object.contains_key(*k));
            Ok(if has(OBJECT_KEYWORDS) {
                "object"
            } else if has(ARRAY_KEYWORDS) {
                "array"
            } else if has(STRING_KEYWORDS) {
                "string"
            } else if has(NUMBER_KEYWORDS) {
                "number"
            } else {
                "any"
            })
        }
    }
}

/// A non-negative whole number under `keyword`, if there is one.
fn count(object: &Map<String, Value>, keyword: &str) -> Result<Option<usize>, Unsupported> {
    match object.get(keyword) {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .or_else(|| {
                value
                    .as_f64()
                    .filter(|n| *n >= 0.0 && n.fract() == 0.0)
                    .map(|n| n as u64)
            })
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| unsupported(keyword, "not a non-negative whole number")),
    }
}

/// A bound: its value, whether it is exclusive, and the keyword that set it.
type Bound<'k> = (f64, bool, &'k str);

/// The tighter of `inclusive` and `exclusive` (a number, or draft 4's `true`, which
/// makes `inclusive` exclusive); `lower` says which way tighter is.
fn bound<'k>(
    object: &Map<String, Value>,
    inclusive: &'k str,
    exclusive: &'k str,
    lower: bool,
) -> Result<Option<Bound<'k>>, Unsupported> {
    let mut bound = match object.get(inclusive) {
        None => None,
        Some(value) => Some((
            value
                .as_f64()
                .ok_or_else(|| unsupported(inclusive, "not a number"))?,
            false,
            inclusive,
        )),
    };
    match object.get(exclusive) {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => bound = bound.map(|(value, _, _)| (value, true, exclusive)),
        Some(Value::Number(n)) => {
            let value = n.as_f64().unwrap_or(f64::NAN);
            let tighter = bound.is_none_or(|(b, _, _)| if lower { value >= b } else { value <= b });
            if tighter {
                bound = Some((value, true, exclusive));
            }
        }
        Some(_) => return Err(unsupported(exclusive, "not a number")),
    }
    Ok(bound)
}

/// An integer (`integer`) or a number within the schema's bounds (see [`instance`]).
fn number(object: &Map<String, Value>, integer: bool) -> Result<Value, Unsupported> {
    let lower = bound(object, "minimum", "exclusiveMinimum", true)?;
    let upper = bound(object, "maximum", "exclusiveMaximum", false)?;
    let step = match object.get("multipleOf") {
        None => None,
        Some(value) => match value.as_f64() {
            Some(m) if m >= 1.0 && m.fract() == 0.0 && m < 9e15 => Some(m),
            _ => {
                return Err(unsupported(
                    "multipleOf",
                    "only whole, positive multiples are supported",
                ));
            }
        },
    };
    // Values are whole multiples of `unit`, or any number when there is none.
    let unit = step.or(integer.then_some(1.0));
    let value = match (lower, unit) {
        (Some((low, exclusive, _)), Some(unit)) => {
            let mut k = (low / unit).ceil();
            if exclusive && k * unit <= low {
                k += 1.0;
            }
            k * unit
        }
        (Some((low, false, _)), None) => low,
        (Some((low, true, _)), None) => match upper {
            Some((high, high_exclusive, _))
                if low + 1.0 > high || (high_exclusive && low + 1.0 >= high) =>
            {
                low + (high - low) / 2.0
            }
            _ => low + 1.0,
        },
        (None, unit) => {
            let default = unit.unwrap_or(1.0);
            match upper {
                Some((high, exclusive, _)) if default > high || (exclusive && default >= high) => {
                    match unit {
                        Some(unit) => {
                            let mut k = (high / unit).floor();
                            if exclusive && k * unit >= high {
                                k -= 1.0;
                            }
                            k * unit
                        }
                        None if exclusive => high - 1.0,
                        None => high,
                    }
                }
                _ => default,
            }
        }
    };
    if let Some((low, exclusive, keyword)) = lower
        && !(value > low || (!exclusive && value == low))
    {
        return Err(unsupported(
            keyword,
            "no value the mock can make lies within the bounds",
        ));
    }
    if let Some((high, exclusive, keyword)) = upper
        && !(value < high || (!exclusive && value == high))
    {
        return Err(unsupported(
            keyword,
            "no value the mock can make lies within the bounds",
        ));
    }
    if !value.is_finite() {
        return Err(unsupported("minimum", "the bounds are not finite numbers"));
    }
    Ok(if value.fract() == 0.0 && value.abs() < 9e15 {
        json!(value as i64)
    } else {
        json!(value)
    })
}

/// A sample of each format the `jsonschema` crate checks; other formats are only
/// annotations to a validator, and get the plain word.
fn format_sample(format: &str) -> Option<&'static str> {
    Some(match format {
        "email" | "idn-email" => "mock@example.com",
        "date-time" => "2024-01-01T00:00:00Z",
        "date" => "2024-01-01",
        "time" => "12:00:00Z",
        "duration" => "P1D",
        "uuid" => "123e4567-e89b-42d3-a456-426614174000",
        "uri" | "iri" | "uri-reference" | "iri-reference" => "https://example.com/",
        "uri-template" => "https://example.com/{id}",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "json-pointer" => "/mock",
        "relative-json-pointer" => "0/mock",
        "regex" => "mock",
        _ => return None,
    })
}

/// A string within `minLength`/`maxLength`, of the schema's `format` where it has one the
/// mock knows (see [`instance`]).
fn string(object: &Map<String, Value>) -> Result<Value, Unsupported> {
    if object.contains_key("pattern") {
        return Err(unsupported(
            "pattern",
            "the mock cannot generate text that matches a regular expression",
        ));
    }
    let min = count(object, "minLength")?.unwrap_or(0);
    let max = count(object, "maxLength")?;
    if max.is_some_and(|max| max < min) {
        return Err(unsupported("minLength", "more than maxLength"));
    }
    let fits = |n: usize| n >= min && max.is_none_or(|max| n <= max);
    let sample = object
        .get("format")
        .and_then(Value::as_str)
        .and_then(|format| format_sample(format).map(|sample| (format, sample)));
    let text = match sample {
        Some((format, sample)) => {
            let mut text = sample.to_owned();
            if format.ends_with("email") && text.len() < min {
                // A longer local part.
                let pad = "x".repeat(min - text.len());
                text.insert_str("mock".len(), &pad);
            }
            if !fits(text.chars().count()) {
                return Err(unsupported(
                    "format",
                    format!("the mock's {format} sample does not fit minLength/maxLength"),
                ));
            }
            text
        }
        None => {
            let n = 4usize.max(min).min(max.unwrap_or(usize::MAX));
            "mock".chars().cycle().take(n).collect()
        }
    };
    Ok(Value::String(text))
}

/// What the mock did with one completions or chat request's output constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StructuredAnswer {
    /// The request's `x-request-id` header.
    pub id: String,
    /// The request's constraint, if it had one.
    pub constraint: Option<ConstraintKind>,
    /// Whether the answer's text keeps a JSON-schema or choice constraint: `false` when
    /// it was made wrong on purpose (`--invalid-structured-rate`), cut at `max_tokens`,
    /// or empty (`--empty-rate`); `None` without a constraint, or with a regex or a
    /// grammar (answered with the ordinary text). It is the text the mock generated: a
    /// fault that breaks the response on its way (a cut, a malformed chunk, an error
    /// event) leaves it as it was.
    pub structured: Option<bool>,
}

/// The [`StructuredAnswer`]s, in the order the requests were answered, at most
/// [`MAX_KEPT_REQUESTS`] (the oldest go first).
#[derive(Debug, Default)]
pub(crate) struct StructuredLog {
    list: Mutex<VecDeque<StructuredAnswer>>,
}

impl StructuredLog {
    pub(crate) fn push(&self, answer: StructuredAnswer) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() == MAX_KEPT_REQUESTS {
            list.pop_front();
        }
        list.push_back(answer);
    }

    pub(crate) fn list(&self) -> Vec<StructuredAnswer> {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter().cloned().collect()
    }
}
