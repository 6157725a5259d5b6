//! Structured output: the generated instances against the `jsonschema` crate (bench's
//! client checks with the same), the wrong answers, the body forms, and the server's
//! answers, streamed and whole, against a real HTTP client.

use serde_json::{Value, json};

use super::*;
use crate::faults::Fault;
use crate::{MockConfig, MockServer, spawn};

/// A validator that also checks `format`s (bench's may or may not; the mock's samples
/// must pass either way).
fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("not a valid schema ({e}): {schema}"))
}

fn accepts(schema: &Value, text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|value| validator(schema).is_valid(&value))
}

/// A person record as a dataset might ask for it: nested objects, arrays, formats,
/// bounds, optional fields (pydantic's `anyOf` with null), enums and local references.
fn person() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Person",
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 6, "maxLength": 10},
            "initials": {"type": "string", "maxLength": 2},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 18, "maximum": 120},
            "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "level": {"type": "integer", "exclusiveMaximum": 0, "multipleOf": 5},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3},
            "none": {"type": "array", "maxItems": 0},
            "role": {"enum": ["admin", "user"]},
            "kind": {"const": "person"},
            "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            "active": {"type": ["boolean", "null"]},
            "address": {"$ref": "#/$defs/Address"},
            "born": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "home": {"type": "string", "format": "uri"},
        },
        "required": ["name", "email", "age", "address"],
        "additionalProperties": false,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "zip": {"type": "string", "minLength": 5, "maxLength": 5},
                },
                "required": ["street", "zip"],
            },
        },
    })
}

fn schemas() -> Vec<Value> {
    vec![
        person(),
        json!({"type": "object"}),
        json!({"type": "array", "items": {"type": "integer", "minimum": -3.5}}),
        json!({"type": "string", "minLength": 11}),
        json!({"type": "number", "maximum": -2.5}),
        json!({"type": "integer", "minimum": 7, "exclusiveMinimum": 9}),
        json!({"type": "boolean"}),
        json!({"type": "null"}),
        json!({"enum": [3, "x"]}),
        json!({"oneOf": [{"type": "integer"}, {"type": "string"}]}),
        json!({"properties": {"a": {"minimum": 2}}, "required": ["a", "b"]}),
        json!({"type": "object", "required": ["x"], "additionalProperties": {"type": "integer"}}),
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}],
               "minItems": 2}),
        // Draft 7: `definitions`, tuple `items`, boolean `exclusiveMinimum` of draft 4.
        json!({"$schema": "http://json-schema.org/draft-07/schema#",
               "definitions": {"n": {"type": "number", "minimum": 0.25}},
               "type": "array", "items": [{"$ref": "#/definitions/n"}]}),
        json!({"$schema": "http://json-schema.org/draft-04/schema#",
               "type": "integer", "minimum": 4, "exclusiveMinimum": true}),
        // A recursive tree: below the recurring reference, only what is required.
        json!({"$ref": "#/$defs/node", "$defs": {"node": {
            "type": "object",
            "properties": {"value": {"type": "integer"},
                           "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["value"]}}}),
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"},
               "c": {"type": "string"}}, "required": ["c"], "maxProperties": 2}),
        json!({"allOf": [{"type": "string", "format": "date-time"}], "description": "when"}),
        json!({"type": "string", "format": "email", "minLength": 20}),
        json!(true),
    ]
}

#[test]
fn every_instance_is_accepted_by_its_schema() {
    for schema in schemas() {
        let instance = instance(&schema).unwrap_or_else(|e| panic!("{e}: {schema}"));
        let errors: Vec<String> = validator(&schema)
            .iter_errors(&instance)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{instance} for {schema}: {errors:?}");
    }
}

#[test]
fn instances_are_what_the_rules_say() {
    let instance = instance(&person()).unwrap();
    assert_eq!(
        instance.to_string(),
        json!({
            "name": "mockmo", "initials": "mo", "email": "mock@example.com", "age": 18,
            "score": 0.5, "level": -5, "tags": ["mock", "mock"], "none": [], "role": "admin",
            "kind": "person", "nickname": "mock", "active": true,
            "address": {"street": "mock", "zip": "mockm"}, "born": "2024-01-01",
            "id": "123e4567-e89b-42d3-a456-426614174000", "home": "https://example.com/",
        })
        .to_string(),
        "every property, in the schema's order"
    );
    let expect = |schema: Value, want: Value| {
        assert_eq!(super::instance(&schema).unwrap(), want, "{schema}");
    };
    expect(
        json!({"type": "integer", "minimum": 7, "exclusiveMinimum": 9}),
        json!(10),
    );
    expect(json!({"type": "number", "maximum": -2.5}), json!(-2.5));
    expect(
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"},
               "c": {"type": "string"}}, "required": ["c"], "maxProperties": 2}),
        json!({"a": "mock", "c": "mock"}),
    );
    expect(
        json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
            "properties": {"value": {"type": "integer"},
                           "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["value"]}}}),
        json!({"value": 1, "children": [{"value": 1}]}),
    );
    expect(json!({"type": ["null", "string"]}), Value::Null);
    expect(
        json!({"type": "string", "format": "email", "minLength": 20}),
        json!("mockxxxx@example.com"),
    );
}

#[test]
fn what_the_mock_cannot_satisfy_is_named() {
    for (schema, keyword) in [
        (json!({"type": "string", "pattern": "^a+$"}), "pattern"),
        (
            json!({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}),
            "not",
        ),
        (
            json!({"if": {"type": "string"}, "then": {"minLength": 2}}),
            "if",
        ),
        (
            json!({"type": "array", "contains": {"const": 1}}),
            "contains",
        ),
        (
            json!({"type": "object", "patternProperties": {"^x": {}}}),
            "patternProperties",
        ),
        (json!({"$ref": "https://example.com/schema.json"}), "$ref"),
        (json!({"$ref": "#/$defs/missing"}), "$ref"),
        (
            json!({"$ref": "#/$defs/a", "type": "object", "$defs": {"a": {}}}),
            "$ref",
        ),
        (
            json!({"allOf": [{"type": "string"}, {"minLength": 3}]}),
            "allOf",
        ),
        (
            json!({"type": "string", "minLength": 5, "maxLength": 3}),
            "minLength",
        ),
        (
            json!({"type": "integer", "minimum": 1.2, "maximum": 1.8}),
            "maximum",
        ),
        (json!({"type": "number", "multipleOf": 0.1}), "multipleOf"),
        (
            json!({"type": "array", "uniqueItems": true, "minItems": 2}),
            "uniqueItems",
        ),
        (
            json!({"type": "object", "required": ["a"], "additionalProperties": false}),
            "required",
        ),
        (json!({"enum": []}), "enum"),
        (json!({"type": "tuple"}), "type"),
        (json!(false), "false"),
        (json!({"$ref": "#"}), "$ref"),
    ] {
        match instance(&schema) {
            Err(unsupported) => assert_eq!(unsupported.keyword, keyword, "{schema}: {unsupported}"),
            Ok(value) => panic!("{schema} gave {value}"),
        }
    }
}

fn json_constraint(schema: Value) -> Constraint {
    Constraint::Json(schema)
}

#[test]
fn wrong_answers_alternate_between_not_json_and_json_the_schema_refuses() {
    for schema in schemas() {
        let constraint = json_constraint(schema.clone());
        let valid = super::instance(&schema).unwrap().to_string();
        for before in 0..4 {
            let text = wrong(&constraint, &valid, before);
            assert!(!accepts(&schema, &text), "{text:?} for {schema}");
            let parses = serde_json::from_str::<Value>(&text).is_ok();
            // Of these, only `true` accepts anything, so only its wrong JSON is not JSON.
            assert_eq!(
                parses,
                before % 2 == 1 && schema != json!(true),
                "{text:?}: {schema}"
            );
        }
    }
    let valid = instance(&person()).unwrap().to_string();
    assert_eq!(not_json(&valid), valid[..valid.len() - 1]);
    let refused: Value =
        serde_json::from_str(&wrong(&json_constraint(person()), &valid, 1)).unwrap();
    assert!(
        refused.get("name").is_none(),
        "the first required property is left out"
    );
    assert_eq!(refused.as_object().unwrap().len(), 15);
    // No required property: a root of a type the schema refuses.
    let object = json_constraint(json!({"type": "object"}));
    assert_eq!(wrong(&object, "{}", 1), r#""mock""#);
    let strings = json_constraint(json!({"type": ["string", "array", "null"]}));
    assert_eq!(wrong(&strings, r#""mock""#, 3), "0.5");
    // A number that still parses without its last character.
    let number = json_constraint(json!({"type": "integer", "minimum": 10}));
    assert_eq!(wrong(&number, "10", 0), "[10");
    let choice = Constraint::Choice(vec!["yes".into(), "yes?".into()]);
    assert_eq!(wrong(&choice, "yes", 0), "yes??");
}

fn fields(body: Value) -> Result<Option<Constraint>, String> {
    serde_json::from_value::<Fields>(body).unwrap().constraint()
}

#[test]
fn every_body_form_is_read() {
    let schema = json!({"type": "object", "required": ["a"]});
    let json = Ok(Some(Constraint::Json(schema.clone())));
    assert_eq!(
        fields(json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "x", "schema": schema, "strict": true}}})),
        json
    );
    assert_eq!(
        fields(json!({"structured_outputs": {"json": schema}})),
        json
    );
    assert_eq!(
        fields(json!({"structured_outputs": {"json": schema.to_string(),
            "disable_any_whitespace": true}})),
        json
    );
    assert_eq!(fields(json!({"guided_json": schema})), json);
    let any_object = Ok(Some(Constraint::Json(json!({"type": "object"}))));
    assert_eq!(
        fields(json!({"response_format": {"type": "json_object"}})),
        any_object
    );
    assert_eq!(
        fields(json!({"structured_outputs": {"json_object": true}})),
        any_object
    );
    assert_eq!(
        fields(json!({"response_format": {"type": "text"}})),
        Ok(None)
    );
    assert_eq!(fields(json!({"structured_outputs": null})), Ok(None));
    assert_eq!(fields(json!({})), Ok(None));
    let choice = Ok(Some(Constraint::Choice(vec!["a".into(), "b".into()])));
    assert_eq!(
        fields(json!({"structured_outputs": {"choice": ["a", "b"]}})),
        choice
    );
    assert_eq!(fields(json!({"guided_choice": ["a", "b"]})), choice);
    assert_eq!(
        fields(json!({"structured_outputs": {"regex": "a+"}})),
        Ok(Some(Constraint::Regex))
    );
    assert_eq!(
        fields(json!({"structured_outputs": {"grammar": "root ::= \"a\""}})),
        Ok(Some(Constraint::Grammar))
    );
    for (body, says) in [
        (
            json!({"structured_outputs": {"regex": "a", "choice": ["a"]}}),
            "only one kind",
        ),
        (
            json!({"response_format": {"type": "json_object"}, "guided_regex": "a"}),
            "only one kind",
        ),
        (json!({"structured_outputs": {"choice": []}}), "non-empty"),
        (
            json!({"structured_outputs": {"json": "{"}}),
            "not a JSON schema",
        ),
        (
            json!({"response_format": {"type": "json_schema"}}),
            "missing",
        ),
        (json!({"response_format": {"type": "yaml"}}), "yaml"),
        (json!({"structured_outputs": ["json"]}), "an object"),
    ] {
        let err = fields(body.clone()).unwrap_err();
        assert!(err.contains(says), "{body}: {err}");
    }
}

#[test]
fn pieces_are_up_to_four_characters_escaped() {
    let pieces = pieces("{\"a\":\"é\n\"}");
    let pieces: Vec<&str> = pieces.iter().map(|p| &**p).collect();
    assert_eq!(pieces, [r#"{\"a\""#, r#":\"é\n"#, r#"\"}"#]);
}

// The server.

async fn server(config: MockConfig) -> MockServer {
    spawn(config).await.expect("start the mock server")
}

/// What a client saw of one answer.
#[derive(Debug)]
struct Seen {
    status: u16,
    /// The content text (a chat answer's reasoning left out).
    text: String,
    finish_reason: Option<String>,
    completion_tokens: Option<u64>,
    /// The streamed chunks with content, each one's text.
    chunks: Vec<String>,
    body: Value,
}

async fn ask(server: &MockServer, path: &str, id: &str, body: &Value) -> Seen {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("x-request-id", id)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("send the request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("read the body");
    let mut seen = Seen {
        status,
        text: String::new(),
        finish_reason: None,
        completion_tokens: None,
        chunks: Vec::new(),
        body: Value::Null,
    };
    let content = |choice: &Value| {
        choice
            .get("text")
            .or_else(|| choice.get("delta").and_then(|d| d.get("content")))
            .or_else(|| choice.get("message").and_then(|m| m.get("content")))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if body["stream"] == json!(true) && status == 200 {
        for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
            if data == "[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_str(data).expect("a JSON chunk");
            if let Some(choice) = chunk["choices"].get(0) {
                if let Some(piece) = content(choice) {
                    seen.text.push_str(&piece);
                    seen.chunks.push(piece);
                }
                if let Some(reason) = choice["finish_reason"].as_str() {
                    seen.finish_reason = Some(reason.to_owned());
                }
            }
            if let Some(tokens) = chunk["usage"]["completion_tokens"].as_u64() {
                seen.completion_tokens = Some(tokens);
            }
        }
    } else {
        seen.body = serde_json::from_str(&text).expect("a JSON body");
        if let Some(choice) = seen.body["choices"].get(0) {
            seen.text = content(choice).unwrap_or_default();
            seen.finish_reason = choice["finish_reason"].as_str().map(str::to_owned);
        }
        seen.completion_tokens = seen.body["usage"]["completion_tokens"].as_u64();
    }
    seen
}

/// A request body for `path` with `extra` members (the constraint, `max_tokens`, ...).
fn request(path: &str, stream: bool, extra: Value) -> Value {
    let mut body = if path.ends_with("chat/completions") {
        json!({"model": "m", "messages": [{"role": "user", "content": "give me JSON"}]})
    } else {
        json!({"model": "m", "prompt": "give me JSON"})
    };
    body["stream"] = json!(stream);
    body["stream_options"] = json!({"include_usage": true});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

const PATHS: [&str; 2] = ["/v1/completions", "/v1/chat/completions"];

fn response_format(schema: &Value) -> Value {
    json!({"response_format": {"type": "json_schema",
        "json_schema": {"name": "bench_output", "schema": schema}}})
}

#[tokio::test]
async fn both_forms_get_valid_json_streamed_and_whole_on_both_endpoints() {
    let server = server(MockConfig::default()).await;
    let schema = person();
    let valid = instance(&schema).unwrap().to_string();
    let tokens = valid.chars().count().div_ceil(4) as u64;
    let mut n = 0;
    for path in PATHS {
        for form in [
            response_format(&schema),
            json!({"structured_outputs": {"json": schema}}),
        ] {
            for stream in [true, false] {
                let id = format!("s-{n}");
                n += 1;
                let seen = ask(&server, path, &id, &request(path, stream, form.clone())).await;
                assert_eq!(seen.status, 200, "{path} {form}: {seen:?}");
                assert_eq!(seen.text, valid, "{path} {form} stream {stream}");
                assert!(accepts(&schema, &seen.text));
                assert_eq!(seen.finish_reason.as_deref(), Some("stop"), "{seen:?}");
                assert_eq!(seen.completion_tokens, Some(tokens), "{seen:?}");
                if stream {
                    assert_eq!(seen.chunks.len() as u64, tokens);
                    assert!(
                        seen.chunks
                            .iter()
                            .all(|c| (1..=4).contains(&c.chars().count()))
                    );
                }
            }
        }
    }
    let records = server.structured();
    assert_eq!(records.len(), 8);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            record,
            &StructuredAnswer {
                id: format!("s-{i}"),
                constraint: Some(ConstraintKind::JsonSchema),
                structured: Some(true),
            }
        );
    }
    // Streams keep the ordinary timing record: one gap per piece after the first.
    let timing = server.requests();
    assert_eq!(timing.len(), 4, "the streamed ones: {timing:?}");
    assert!(timing.iter().all(|t| t.itl_ms.len() as u64 == tokens - 1));
}

#[tokio::test]
async fn max_tokens_cuts_the_text_into_invalid_json() {
    let server = server(MockConfig::default()).await;
    let schema = person();
    let valid = instance(&schema).unwrap().to_string();
    for (path, limit) in [
        ("/v1/completions", "max_tokens"),
        ("/v1/chat/completions", "max_completion_tokens"),
    ] {
        for stream in [true, false] {
            let mut extra = response_format(&schema);
            extra[limit] = json!(5);
            let seen = ask(&server, path, "cut", &request(path, stream, extra)).await;
            assert_eq!(seen.text, valid[..20], "{path} stream {stream}: {seen:?}");
            assert!(serde_json::from_str::<Value>(&seen.text).is_err());
            assert_eq!(seen.finish_reason.as_deref(), Some("length"));
            assert_eq!(seen.completion_tokens, Some(5));
        }
    }
    // A limit the text fits in leaves it whole.
    let mut extra = response_format(&schema);
    extra["max_tokens"] = json!(1000);
    let seen = ask(
        &server,
        "/v1/completions",
        "fits",
        &request("/v1/completions", true, extra),
    )
    .await;
    assert_eq!(seen.text, valid);
    let records = server.structured();
    assert_eq!(records.len(), 5);
    assert!(
        records[..4].iter().all(|r| r.structured == Some(false)),
        "{records:?}"
    );
    assert_eq!(records[4].structured, Some(true));
}

/// Constrained requests, interleaved with others that the rate does not count.
async fn mixed_run(server: &MockServer, schema: &Value, constrained: usize) -> Vec<Seen> {
    let mut seen = Vec::new();
    for i in 0..constrained {
        let path = PATHS[i % 2];
        let stream = i % 3 == 0;
        let body = request(
            path,
            stream,
            json!({"structured_outputs": {"json": schema}}),
        );
        seen.push(ask(server, path, &format!("j-{i}"), &body).await);
        // Neither a plain request nor a regex one is counted.
        let plain = request(path, stream, json!({"max_tokens": 3}));
        ask(server, path, &format!("p-{i}"), &plain).await;
        let regex = request(path, stream, json!({"structured_outputs": {"regex": "a+"}}));
        ask(server, path, &format!("r-{i}"), &regex).await;
    }
    seen
}

#[tokio::test]
async fn the_invalid_rate_breaks_the_exact_share_of_constrained_requests() {
    let server = server(MockConfig {
        invalid_structured_rate: 0.25,
        ..MockConfig::default()
    })
    .await;
    let schema = person();
    let seen = mixed_run(&server, &schema, 8).await;
    let valid: Vec<bool> = seen.iter().map(|s| accepts(&schema, &s.text)).collect();
    // --fail-rate's pattern: constrained requests 3 and 7.
    assert_eq!(
        valid,
        [true, true, true, false, true, true, true, false],
        "{seen:?}"
    );
    // The first wrong one is not JSON, the second JSON the schema refuses.
    assert!(serde_json::from_str::<Value>(&seen[3].text).is_err());
    assert!(serde_json::from_str::<Value>(&seen[7].text).is_ok());
    // The record says what the client found, request by request.
    let records = server.structured();
    assert_eq!(records.len(), 24);
    for (i, ok) in valid.iter().enumerate() {
        let of = |id: String| records.iter().find(|r| r.id == id).unwrap().clone();
        assert_eq!(of(format!("j-{i}")).structured, Some(*ok));
        assert_eq!(
            of(format!("j-{i}")).constraint,
            Some(ConstraintKind::JsonSchema)
        );
        assert_eq!(
            of(format!("p-{i}")),
            StructuredAnswer {
                id: format!("p-{i}"),
                constraint: None,
                structured: None
            }
        );
        let regex = of(format!("r-{i}"));
        assert_eq!(
            (regex.constraint, regex.structured),
            (Some(ConstraintKind::Regex), None)
        );
    }
}

#[tokio::test]
async fn the_invalid_rate_is_planned_apart_from_the_other_faults() {
    // Every other request fails with 500; of the answered constrained ones, half are wrong.
    let server = server(MockConfig {
        fail_rate: 0.5,
        invalid_structured_rate: 0.5,
        ..MockConfig::default()
    })
    .await;
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}},
                        "required": ["a"]});
    let mut answered = Vec::new();
    for i in 0..8 {
        let path = PATHS[i % 2];
        let seen = ask(
            &server,
            path,
            &format!("f-{i}"),
            &request(path, false, response_format(&schema)),
        )
        .await;
        assert_eq!(seen.status, if i % 2 == 1 { 500 } else { 200 }, "{seen:?}");
        if seen.status == 200 {
            answered.push(accepts(&schema, &seen.text));
        }
    }
    // The answered ones are the constrained plan's requests 0 to 3: 1 and 3 are wrong.
    assert_eq!(answered, [true, false, true, false]);
    let records = server.structured();
    let recorded: Vec<Option<bool>> = records.iter().map(|r| r.structured).collect();
    assert_eq!(
        recorded,
        answered.iter().map(|v| Some(*v)).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_choice_is_answered_with_the_first_and_broken_with_none_of_them() {
    let choices = json!({"structured_outputs": {"choice": ["positive", "negative"]}});
    let right = server(MockConfig::default()).await;
    let wrong = server(MockConfig {
        invalid_structured_rate: 1.0,
        ..MockConfig::default()
    })
    .await;
    for path in PATHS {
        for stream in [true, false] {
            let body = request(path, stream, choices.clone());
            let seen = ask(&right, path, "c", &body).await;
            assert_eq!(seen.text, "positive", "{seen:?}");
            assert_eq!(seen.completion_tokens, Some(2));
            let seen = ask(&wrong, path, "c", &body).await;
            assert_eq!(seen.text, "positive?", "{seen:?}");
        }
    }
    let kinds = |server: &MockServer| -> Vec<(Option<ConstraintKind>, Option<bool>)> {
        server
            .structured()
            .iter()
            .map(|r| (r.constraint, r.structured))
            .collect()
    };
    assert_eq!(
        kinds(&right),
        vec![(Some(ConstraintKind::Choice), Some(true)); 4]
    );
    assert_eq!(
        kinds(&wrong),
        vec![(Some(ConstraintKind::Choice), Some(false)); 4]
    );
}

#[tokio::test]
async fn a_regex_or_a_grammar_gets_the_ordinary_text() {
    let server = server(MockConfig::default()).await;
    for constraint in [
        json!({"regex": "[0-9]+"}),
        json!({"grammar": "root ::= \"a\""}),
    ] {
        let extra = json!({"structured_outputs": constraint, "max_tokens": 3});
        let seen = ask(
            &server,
            "/v1/completions",
            "g",
            &request("/v1/completions", true, extra),
        )
        .await;
        assert_eq!(seen.text, " the of and");
        assert_eq!(seen.finish_reason.as_deref(), Some("length"));
    }
    let records = server.structured();
    assert_eq!(records[0].constraint, Some(ConstraintKind::Regex));
    assert_eq!(records[1].constraint, Some(ConstraintKind::Grammar));
    assert!(records.iter().all(|r| r.structured.is_none()));
}

#[tokio::test]
async fn an_unsupported_keyword_is_a_400_that_names_it() {
    let server = server(MockConfig {
        invalid_structured_rate: 1.0,
        ..MockConfig::default()
    })
    .await;
    let schema = json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}});
    for path in PATHS {
        for stream in [true, false] {
            let seen = ask(
                &server,
                path,
                "bad",
                &request(path, stream, response_format(&schema)),
            )
            .await;
            assert_eq!(seen.status, 400, "{seen:?}");
            let error = &seen.body["error"];
            assert_eq!(error["type"], json!("BadRequestError"), "{error}");
            assert_eq!(error["code"], json!(400), "{error}");
            let message = error["message"].as_str().unwrap();
            assert!(message.contains("`pattern`"), "{message}");
        }
    }
    assert!(
        server.structured().is_empty(),
        "a refused request leaves no record"
    );
    // Nor did they use up the plan: its first constrained request is the first wrong one.
    let schema = json!({"type": "string"});
    let seen = ask(
        &server,
        PATHS[0],
        "ok",
        &request(PATHS[0], false, response_format(&schema)),
    )
    .await;
    assert_eq!(seen.text, r#""mock"#);
}

#[tokio::test]
async fn a_chat_answer_reasons_first_then_gives_the_structured_content() {
    let server = server(MockConfig {
        reasoning: crate::Reasoning {
            tokens: 3,
            ..crate::Reasoning::default()
        },
        ..MockConfig::default()
    })
    .await;
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}});
    let path = "/v1/chat/completions";
    let seen = ask(
        &server,
        path,
        "r",
        &request(path, true, response_format(&schema)),
    )
    .await;
    assert_eq!(seen.text, r#"{"answer":1}"#);
    // 3 reasoning tokens and 3 pieces.
    assert_eq!(seen.completion_tokens, Some(6));
    assert_eq!(seen.finish_reason.as_deref(), Some("stop"));
    let mut extra = response_format(&schema);
    extra["max_completion_tokens"] = json!(4);
    let seen = ask(&server, path, "r", &request(path, false, extra)).await;
    assert_eq!(seen.text, r#"{"an"#);
    assert_eq!(
        seen.body["choices"][0]["message"]["reasoning_content"],
        json!(" the of and")
    );
}

#[test]
fn a_quarter_breaks_every_fourth_constrained_request() {
    let plan = FaultPlan::new(&[(Fault::InvalidStructured, 0.25)]);
    let wrong: Vec<u64> = (0..8)
        .filter_map(|_| match plan.next_counted() {
            (k, Some((Fault::InvalidStructured, _))) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(wrong, [3, 7]);
}

#[tokio::test]
async fn a_rate_out_of_range_is_refused() {
    for rate in [1.5, -0.1, f64::NAN] {
        let config = MockConfig {
            invalid_structured_rate: rate,
            ..MockConfig::default()
        };
        let err = spawn(config).await.unwrap_err().to_string();
        assert!(err.contains("--invalid-structured-rate"), "{err}");
    }
    // It is not added to the other faults' rates.
    let config = MockConfig {
        fail_rate: 0.75,
        invalid_structured_rate: 0.75,
        ..MockConfig::default()
    };
    assert!(spawn(config).await.is_ok());
}
