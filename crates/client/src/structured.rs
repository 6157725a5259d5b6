//! Structured output: each completed response checked against its request's output
//! constraint, so that a run says how many answers the server got right in form
//! (`valid_output_rate`), not only how fast it sent them.
//!
//! A constraint is compiled once, before the clock starts ([`OutputChecks::compile`]
//! shares one compiled check among the requests that ask for the same thing), and applied
//! by the decode worker to a response's whole text after it has arrived: never on the
//! receive path.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use regex::Regex;

use crate::record::OutputValidity;
use crate::runtime::OutputConstraint;

/// One compiled constraint; cloning shares it.
#[derive(Clone)]
pub enum OutputCheck {
    /// The text must be one JSON value that the schema accepts.
    JsonSchema(Arc<jsonschema::Validator>),
    /// The whole text must match (the expression compiled as `\A(?:...)\z`).
    Regex(Arc<Regex>),
    /// The text must be one of these.
    Choice(Arc<[String]>),
    /// A grammar: sent to the server, not judged here (no parser for the servers'
    /// grammar notations).
    Unchecked,
}

impl std::fmt::Debug for OutputCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OutputCheck::JsonSchema(_) => "JsonSchema",
            OutputCheck::Regex(_) => "Regex",
            OutputCheck::Choice(_) => "Choice",
            OutputCheck::Unchecked => "Unchecked",
        })
    }
}

impl OutputCheck {
    /// Judges a completed response's generated text (its content, without reasoning).
    pub fn check(&self, text: &str) -> OutputValidity {
        let invalid = |reason: String| OutputValidity::Invalid { reason };
        match self {
            OutputCheck::JsonSchema(validator) => {
                let value: serde_json::Value = match serde_json::from_str(text) {
                    Ok(value) => value,
                    Err(e) => return invalid(format!("not JSON: {e}")),
                };
                match validator.validate(&value) {
                    Ok(()) => OutputValidity::Valid,
                    Err(e) => invalid(format!("the schema refuses it at {:?}: {e}", {
                        let path = e.instance_path().to_string();
                        if path.is_empty() {
                            "/".to_string()
                        } else {
                            path
                        }
                    })),
                }
            }
            OutputCheck::Regex(regex) => {
                if regex.is_match(text) {
                    OutputValidity::Valid
                } else {
                    invalid("the regular expression does not match the whole text".into())
                }
            }
            OutputCheck::Choice(choices) => {
                if choices.iter().any(|c| c == text) {
                    OutputValidity::Valid
                } else {
                    invalid("none of the choices".into())
                }
            }
            OutputCheck::Unchecked => OutputValidity::Unchecked,
        }
    }
}

/// The checks compiled so far, by constraint: a workload whose requests share a schema
/// compiles it once.
#[derive(Default)]
pub struct OutputChecks {
    compiled: HashMap<String, OutputCheck>,
}

impl OutputChecks {
    /// The check of `constraint`, compiled on first use. A schema that is not JSON or not
    /// a valid schema, or an expression the `regex` crate cannot compile, is an error:
    /// the run would otherwise report every answer invalid.
    pub fn compile(&mut self, constraint: &OutputConstraint) -> Result<OutputCheck> {
        let key = match constraint {
            OutputConstraint::JsonSchema(schema) => format!("j{schema}"),
            OutputConstraint::Regex(regex) => format!("r{regex}"),
            OutputConstraint::Choice(choices) => {
                return Ok(OutputCheck::Choice(choices.clone().into()));
            }
            OutputConstraint::Grammar(_) => return Ok(OutputCheck::Unchecked),
        };
        if let Some(check) = self.compiled.get(&key) {
            return Ok(check.clone());
        }
        let check = match constraint {
            OutputConstraint::JsonSchema(schema) => {
                let schema: serde_json::Value = serde_json::from_str(schema)
                    .context("the output constraint's JSON schema is not JSON")?;
                let validator = jsonschema::validator_for(&schema).map_err(|e| {
                    anyhow::anyhow!("the output constraint's JSON schema is not valid: {e}")
                })?;
                OutputCheck::JsonSchema(Arc::new(validator))
            }
            OutputConstraint::Regex(regex) => OutputCheck::Regex(Arc::new(
                Regex::new(&format!(r"\A(?:{regex})\z")).with_context(|| {
                    format!("the output constraint's regular expression {regex:?} does not compile")
                })?,
            )),
            OutputConstraint::Choice(_) | OutputConstraint::Grammar(_) => {
                unreachable!("returned above")
            }
        };
        self.compiled.insert(key, check.clone());
        Ok(check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(constraint: OutputConstraint, text: &str) -> OutputValidity {
        OutputChecks::default()
            .compile(&constraint)
            .unwrap()
            .check(text)
    }

    fn valid(v: &OutputValidity) -> bool {
        matches!(v, OutputValidity::Valid)
    }

    #[test]
    fn json_must_parse_as_one_value_the_schema_accepts() {
        let schema = || {
            OutputConstraint::JsonSchema(
                r#"{"type":"object","properties":{"age":{"type":"integer","minimum":0}},
                    "required":["age"],"additionalProperties":false}"#
                    .into(),
            )
        };
        assert!(valid(&check(schema(), r#"{"age": 3}"#)));
        assert!(valid(&check(schema(), " {\"age\": 3}\n")));
        for (text, why) in [
            (r#"{"age": 3"#, "not JSON"),
            (r#"{"age": 3} {"age": 4}"#, "not JSON"),
            ("```json\n{\"age\": 3}\n```", "not JSON"),
            (r#"{"age": -1}"#, "/age"),
            (r#"{}"#, "\"/\""),
            (r#"{"age": 3, "x": 1}"#, "refuses"),
        ] {
            match check(schema(), text) {
                OutputValidity::Invalid { reason } => {
                    assert!(reason.contains(why), "{text}: {reason}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn regexes_match_the_whole_text_and_choices_exactly() {
        let email = || OutputConstraint::Regex(r"\w+@\w+\.com\n".into());
        assert!(valid(&check(email(), "alan@enigma.com\n")));
        assert!(!valid(&check(email(), "alan@enigma.com\nmore")));
        assert!(!valid(&check(email(), "say alan@enigma.com\n")));
        let alternatives = OutputConstraint::Regex("a|b".into());
        assert!(
            !valid(&check(alternatives, "ab")),
            "grouped before anchoring"
        );
        let choice = || OutputConstraint::Choice(vec!["Positive".into(), "Negative".into()]);
        assert!(valid(&check(choice(), "Negative")));
        assert!(!valid(&check(choice(), "negative")));
        assert!(!valid(&check(choice(), "Positive ")));
        assert_eq!(
            check(OutputConstraint::Grammar("root ::= \"a\"".into()), "b"),
            OutputValidity::Unchecked
        );
    }

    #[test]
    fn bad_constraints_fail_before_the_run_and_schemas_compile_once() {
        let mut checks = OutputChecks::default();
        let err = checks
            .compile(&OutputConstraint::JsonSchema("{".into()))
            .unwrap_err();
        assert!(format!("{err:#}").contains("not JSON"), "{err:#}");
        let err = checks
            .compile(&OutputConstraint::JsonSchema(r#"{"type": 5}"#.into()))
            .unwrap_err();
        assert!(format!("{err:#}").contains("not valid"), "{err:#}");
        let err = checks
            .compile(&OutputConstraint::Regex("(".into()))
            .unwrap_err();
        assert!(format!("{err:#}").contains("does not compile"), "{err:#}");
        let schema = OutputConstraint::JsonSchema(r#"{"type":"string"}"#.into());
        let (a, b) = (
            checks.compile(&schema).unwrap(),
            checks.compile(&schema).unwrap(),
        );
        let (OutputCheck::JsonSchema(a), OutputCheck::JsonSchema(b)) = (a, b) else {
            panic!("schemas")
        };
        assert!(Arc::ptr_eq(&a, &b));
    }
}
