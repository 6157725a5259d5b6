//! Structured output: how a backend asks a server for a request's [`OutputConstraint`].
//!
//! A dataset says what a response must be (a JSON schema, a regular expression, a choice,
//! a grammar); the backend says it in its API's words, chosen by the `structured-output`
//! option ([`option_info`]), and the host checks every response against the constraint.
//! OpenAI's `response_format` can say only a JSON schema, so the other kinds need vLLM's
//! `structured_outputs`; a constraint a backend cannot send is refused before the run
//! starts, never sent as free text.

use serde_json::{Map, Value, json};

use crate::options::{OptionReader, option};
use crate::{OptionInfo, OutputConstraint, PluginError, RequestSpec};

/// The option's key: `--backend-option structured-output=...`.
pub const OPTION: &str = "structured-output";

/// The name a JSON schema is sent under in `response_format` (the API requires one).
pub const SCHEMA_NAME: &str = "bench_output";

/// Which field of the request body carries the constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// OpenAI's `response_format: {"type": "json_schema", "json_schema": {...}}`, which
    /// vLLM, SGLang, llama.cpp's server and hosted APIs take: JSON schemas only.
    ResponseFormat,
    /// vLLM's `structured_outputs: {"json" | "regex" | "choice" | "grammar": ...}`, what
    /// vLLM's own structured-output benchmark sends (there under its older name
    /// `guided_json` and the like).
    StructuredOutputs,
}

/// The `structured-output` option, for a backend's `describe`.
pub fn option_info() -> OptionInfo {
    option(
        OPTION,
        "How a request's output constraint (structured output, from the dataset) is sent: \
         response-format (OpenAI's response_format, JSON schemas only) or structured-outputs \
         (vLLM's structured_outputs: JSON schema, regex, choice or grammar)",
        Some("response-format"),
    )
    .choices(&["response-format", "structured-outputs"])
}

impl Form {
    /// Reads the `structured-output` option (default: `response-format`).
    pub fn read(plugin: &str, options: &mut OptionReader) -> Result<Form, PluginError> {
        match options.string(OPTION).as_deref() {
            None | Some("response-format") => Ok(Form::ResponseFormat),
            Some("structured-outputs") => Ok(Form::StructuredOutputs),
            Some(other) => Err(PluginError::InvalidConfig(format!(
                "{plugin}: option {OPTION}={other:?} is not one of response-format, \
                 structured-outputs"
            ))),
        }
    }

    /// Puts the request's constraint, if it has one, into `body` in this form.
    pub fn insert(
        self,
        plugin: &str,
        spec: &RequestSpec,
        body: &mut Map<String, Value>,
    ) -> Result<(), PluginError> {
        let Some(constraint) = &spec.output_constraint else {
            return Ok(());
        };
        match (self, constraint) {
            (Form::ResponseFormat, OutputConstraint::JsonSchema(schema)) => {
                let schema = parse_schema(plugin, schema)?;
                body.insert(
                    "response_format".into(),
                    json!({
                        "type": "json_schema",
                        "json_schema": { "name": SCHEMA_NAME, "schema": schema },
                    }),
                );
            }
            (Form::ResponseFormat, other) => {
                return Err(PluginError::Unsupported(format!(
                    "{plugin}: OpenAI's response_format takes only JSON schemas, and this \
                     request asks for a {}; send it with --backend-option \
                     {OPTION}=structured-outputs (vLLM's structured_outputs)",
                    kind(other)
                )));
            }
            (Form::StructuredOutputs, constraint) => {
                let value = match constraint {
                    OutputConstraint::JsonSchema(schema) => {
                        json!({ "json": parse_schema(plugin, schema)? })
                    }
                    OutputConstraint::Regex(regex) => json!({ "regex": regex }),
                    OutputConstraint::Choice(choices) => json!({ "choice": choices }),
                    OutputConstraint::Grammar(grammar) => json!({ "grammar": grammar }),
                };
                body.insert("structured_outputs".into(), value);
            }
        }
        Ok(())
    }
}

/// Refuses a request that carries an output constraint, for a backend whose API has no
/// way to send one: the run stops before it starts instead of measuring free text.
pub fn refuse(plugin: &str, spec: &RequestSpec) -> Result<(), PluginError> {
    match &spec.output_constraint {
        None => Ok(()),
        Some(constraint) => Err(PluginError::Unsupported(format!(
            "{plugin}: this backend cannot send structured output (the request asks for a {}); \
             use --backend openai-chat or openai, which send it with option {OPTION}",
            kind(constraint)
        ))),
    }
}

/// The constraint's kind in words, for errors.
pub fn kind(constraint: &OutputConstraint) -> &'static str {
    match constraint {
        OutputConstraint::JsonSchema(_) => "JSON schema",
        OutputConstraint::Regex(_) => "regular expression",
        OutputConstraint::Choice(_) => "choice",
        OutputConstraint::Grammar(_) => "grammar",
    }
}

fn parse_schema(plugin: &str, schema: &str) -> Result<Value, PluginError> {
    serde_json::from_str(schema).map_err(|e| {
        PluginError::InvalidInput(format!(
            "{plugin}: the request's JSON schema is not JSON ({e})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::pairs;

    fn spec(constraint: OutputConstraint) -> RequestSpec {
        let mut spec = RequestSpec::text("p".into(), 1, 1);
        spec.output_constraint = Some(constraint);
        spec
    }

    fn body(form: Form, constraint: OutputConstraint) -> Result<Value, PluginError> {
        let mut body = Map::new();
        form.insert("t", &spec(constraint), &mut body)?;
        Ok(Value::Object(body))
    }

    #[test]
    fn each_form_sends_what_the_server_reads() {
        let schema = r#"{"type":"object","required":["a"]}"#;
        assert_eq!(
            body(
                Form::ResponseFormat,
                OutputConstraint::JsonSchema(schema.into())
            )
            .unwrap(),
            json!({"response_format": {"type": "json_schema", "json_schema": {
                "name": SCHEMA_NAME, "schema": {"type": "object", "required": ["a"]}}}})
        );
        assert_eq!(
            body(
                Form::StructuredOutputs,
                OutputConstraint::JsonSchema(schema.into())
            )
            .unwrap(),
            json!({"structured_outputs": {"json": {"type": "object", "required": ["a"]}}})
        );
        assert_eq!(
            body(
                Form::StructuredOutputs,
                OutputConstraint::Regex(r"\d+".into())
            )
            .unwrap(),
            json!({"structured_outputs": {"regex": "\\d+"}})
        );
        assert_eq!(
            body(
                Form::StructuredOutputs,
                OutputConstraint::Choice(vec!["yes".into(), "no".into()])
            )
            .unwrap(),
            json!({"structured_outputs": {"choice": ["yes", "no"]}})
        );
        assert_eq!(
            body(
                Form::StructuredOutputs,
                OutputConstraint::Grammar("root ::= \"a\"".into())
            )
            .unwrap(),
            json!({"structured_outputs": {"grammar": "root ::= \"a\""}})
        );
        // No constraint, no field.
        let mut plain = Map::new();
        Form::ResponseFormat
            .insert("t", &RequestSpec::text("p".into(), 1, 1), &mut plain)
            .unwrap();
        assert!(plain.is_empty());
    }

    #[test]
    fn what_a_form_cannot_say_is_refused_with_the_way_out() {
        let err = body(Form::ResponseFormat, OutputConstraint::Regex("a".into())).unwrap_err();
        let PluginError::Unsupported(message) = err else {
            panic!("{err:?}")
        };
        assert!(
            message.contains("structured-output=structured-outputs"),
            "{message}"
        );
        let err = body(
            Form::ResponseFormat,
            OutputConstraint::JsonSchema("{".into()),
        );
        assert!(matches!(err, Err(PluginError::InvalidInput(m)) if m.contains("not JSON")));
        let err = refuse("t", &spec(OutputConstraint::Choice(vec![]))).unwrap_err();
        assert!(matches!(err, PluginError::Unsupported(m) if m.contains("cannot send")));
        refuse("t", &RequestSpec::text("p".into(), 1, 1)).unwrap();
    }

    #[test]
    fn the_option_reads_both_forms_and_refuses_others() {
        let read = |value: &str| {
            let mut options = OptionReader::new("t", pairs(&[(OPTION, value)]));
            Form::read("t", &mut options)
        };
        assert_eq!(read("response-format").unwrap(), Form::ResponseFormat);
        assert_eq!(read("structured-outputs").unwrap(), Form::StructuredOutputs);
        assert!(matches!(read("xml"), Err(PluginError::InvalidConfig(_))));
        let mut none = OptionReader::new("t", Vec::new());
        assert_eq!(Form::read("t", &mut none).unwrap(), Form::ResponseFormat);
    }
}
