//! GSM8K's requests: the file read as vLLM's `read_jsonl` reads it, the few-shot prefix of
//! vLLM's `_build_gsm8k_prompts` (SGLang's `get_few_shot_examples`), then the questions
//! after the examples in file order, over again when the run wants more (the SDK's
//! [`QuestionBank`], generic over its tokenizer so that it runs natively in unit tests).

use bench_sdk::PluginError;
use bench_sdk::custom;
use bench_sdk::grading::final_number;
use bench_sdk::questions::{Question, QuestionBank};
use serde_json::{Map, Value};

/// The plugin's name, which starts its error messages.
pub const NAME: &str = "gsm8k";

/// The `extra-body` of every request: the stop strings of vLLM's GSM8K evaluation and of
/// SGLang's (`["Question", "Assistant:", "<|separator|>"]`), so that a model stops when it
/// starts a question of its own instead of running to `max_tokens`.
pub const EXTRA_BODY: &str = r#"{"stop":["Question","Assistant:","<|separator|>"]}"#;

/// The options.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Solved problems before each question (vLLM's and SGLang's `--num-shots`).
    pub num_shots: u32,
    /// `max_tokens` of every request (vLLM's `--max-tokens`).
    pub output_len: u32,
}

impl Default for Params {
    /// vLLM's defaults (SGLang's `--num-shots` is 5 too).
    fn default() -> Self {
        Params {
            num_shots: 5,
            output_len: 256,
        }
    }
}

/// One line of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// 1-based line number, for error messages.
    pub line: usize,
    pub question: String,
    /// The worked solution, ending in `#### N`.
    pub answer: String,
    /// [`final_number`] of the answer: what a right response ends with.
    pub reference: String,
}

/// The problems of a JSONL file, one `{"question": str, "answer": str}` object per line.
/// Lines that start with `#` are skipped, as vLLM's `read_jsonl` skips them, and so are
/// blank lines ([`custom::commented_jsonl_objects`]). Errors name the file and the
/// 1-based line (`test.jsonl:3: no "answer" field`); an answer without a number to grade
/// by is one, and so is a file that is not UTF-8.
pub fn parse(bytes: &[u8], name: &str) -> Result<Vec<Problem>, PluginError> {
    custom::commented_jsonl_objects(NAME, bytes, name)?
        .into_iter()
        .map(|(at, fields)| problem(at, &fields).map_err(|why| line_error(name, at, why)))
        .collect()
}

fn problem(line: usize, fields: &Map<String, Value>) -> Result<Problem, String> {
    let question = string_field(fields, "question")?;
    let answer = string_field(fields, "answer")?;
    let reference = final_number(&answer).ok_or_else(|| {
        "the \"answer\" has no final number to grade by (GSM8K's answers end in \"#### N\")"
            .to_string()
    })?;
    Ok(Problem {
        line,
        question,
        answer,
        reference,
    })
}

fn string_field(fields: &Map<String, Value>, key: &str) -> Result<String, String> {
    match fields.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{key:?} must be a string")),
        None => Err(format!("no {key:?} field")),
    }
}

fn line_error(name: &str, at: usize, why: String) -> PluginError {
    PluginError::InvalidInput(format!("{NAME}: {name}:{at}: {why}"))
}

/// vLLM's `few_shot_examples`: `Question: {q}\nAnswer: {a}\n\n` for each example, the
/// answer the whole worked solution (calculator annotations and `#### N` included).
pub fn few_shot_prefix(examples: &[Problem]) -> String {
    examples
        .iter()
        .map(|p| format!("Question: {}\nAnswer: {}\n\n", p.question, p.answer))
        .collect()
}

/// The requests: the first `num_shots` problems make the prefix, the others are asked
/// (`{prefix}Question: {question}\nAnswer:`) in file order, wrapping round; `num_requests`
/// 0 asks each of them once. The file `name` is for errors.
pub fn question_bank(
    mut problems: Vec<Problem>,
    params: &Params,
    num_requests: usize,
    name: &str,
) -> Result<QuestionBank, PluginError> {
    let shots = params.num_shots as usize;
    if problems.len() <= shots {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: {name} has {} problems and num-shots is {shots}: the examples are \
             not asked, so it needs at least {} problems",
            problems.len(),
            shots + 1
        )));
    }
    let asked = problems.split_off(shots);
    let prefix = few_shot_prefix(&problems);
    let questions = asked
        .into_iter()
        .map(|p| Question {
            prompt: format!("{prefix}Question: {}\nAnswer:", p.question),
            reference: p.reference,
        })
        .collect();
    QuestionBank::new(
        NAME,
        questions,
        num_requests,
        params.output_len,
        Some(EXTRA_BODY.into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::sampling::TokenCounter;
    use bench_sdk::{Prompt, Sample};
    use serde_json::Value;

    /// Counts words as tokens.
    struct Words;

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    fn text(sample: &Sample) -> &str {
        match &sample.request.prompt {
            Prompt::Text(t) => t,
            other => panic!("gsm8k makes text prompts, got {other:?}"),
        }
    }

    /// Four problems: "Q<i>?" answered "<i> + <i>.\n#### <2i>".
    fn four_lines() -> String {
        (1..=4)
            .map(|i| {
                format!(
                    "{{\"question\": \"Q{i}?\", \"answer\": \"{i} + {i}.\\n#### {}\"}}\n",
                    2 * i
                )
            })
            .collect()
    }

    fn bank(text: &str, num_shots: u32, num_requests: usize) -> QuestionBank {
        let problems = parse(text.as_bytes(), "four.jsonl").unwrap();
        let params = Params {
            num_shots,
            output_len: 77,
        };
        question_bank(problems, &params, num_requests, "four.jsonl").unwrap()
    }

    fn drain(b: &mut QuestionBank) -> Vec<Sample> {
        let mut all = Vec::new();
        loop {
            let got = b.next_samples(&Words, 10).unwrap();
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }

    #[test]
    fn prompts_are_vllms_few_shot_format() {
        let mut b = bank(&four_lines(), 2, 0);
        assert_eq!(b.total(), 2);
        let got = drain(&mut b);
        let prefix = "Question: Q1?\nAnswer: 1 + 1.\n#### 2\n\n\
                      Question: Q2?\nAnswer: 2 + 2.\n#### 4\n\n";
        assert_eq!(text(&got[0]), format!("{prefix}Question: Q3?\nAnswer:"));
        assert_eq!(text(&got[1]), format!("{prefix}Question: Q4?\nAnswer:"));
        let references: Vec<_> = got.iter().map(|s| s.reference.as_deref()).collect();
        assert_eq!(references, [Some("6"), Some("8")]);
        for sample in &got {
            let spec = &sample.request;
            assert_eq!(
                spec.prompt_len as usize,
                text(sample).split_whitespace().count()
            );
            assert_eq!(spec.expected_output_len, 77);
            assert_eq!(
                spec.extra_body.as_deref(),
                Some(r#"{"stop":["Question","Assistant:","<|separator|>"]}"#)
            );
            let body: Value = serde_json::from_str(spec.extra_body.as_deref().unwrap()).unwrap();
            assert_eq!(body["stop"][2], "<|separator|>");
            assert!(spec.multimodal.is_empty() && spec.output_constraint.is_none());
        }
        // No shots: the bare question.
        let got = drain(&mut bank(&four_lines(), 0, 1));
        assert_eq!(text(&got[0]), "Question: Q1?\nAnswer:");
        // The examples are not asked again when the questions wrap round.
        let got = drain(&mut bank(&four_lines(), 2, 5));
        let references: Vec<_> = got.iter().map(|s| s.reference.clone().unwrap()).collect();
        assert_eq!(references, ["6", "8", "6", "8", "6"]);
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let good = "{\"question\": \"Q?\", \"answer\": \"#### 1\"}";
        for (bad, needle) in [
            ("{\"question\": \"Q?\"", "gsm8k: four.jsonl:3: "),
            ("[1, 2]", "four.jsonl:3: expected a JSON object"),
            (
                "{\"answer\": \"#### 1\"}",
                "four.jsonl:3: no \"question\" field",
            ),
            (
                "{\"question\": \"Q?\"}",
                "four.jsonl:3: no \"answer\" field",
            ),
            (
                "{\"question\": \"Q?\", \"answer\": 18}",
                "four.jsonl:3: \"answer\" must be a string",
            ),
            (
                "{\"question\": \"Q?\", \"answer\": \"I do not know\"}",
                "four.jsonl:3: the \"answer\" has no final number",
            ),
        ] {
            // A comment line counts as a line.
            let text = format!("{good}\n# a comment\n{bad}\n{good}\n");
            match parse(text.as_bytes(), "four.jsonl") {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}");
                    assert!(m.starts_with("gsm8k: four.jsonl:3: "), "{m:?}");
                }
                other => panic!("expected an input error for {bad:?}, got {other:?}"),
            }
        }
        let bad = parse(b"{}\n\xff\n", "g.jsonl").unwrap_err();
        assert!(
            matches!(bad, PluginError::InvalidInput(m) if m.starts_with("gsm8k: g.jsonl:2: not UTF-8"))
        );
        // Comments and blank lines are skipped.
        let text = format!("# header\n{good}\n\n{good}\n");
        let problems = parse(text.as_bytes(), "c.jsonl").unwrap();
        assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [2, 4]);
        // The examples are not asked: a question must be left.
        let problems = parse(four_lines().as_bytes(), "four.jsonl").unwrap();
        let params = Params {
            num_shots: 4,
            output_len: 1,
        };
        match question_bank(problems, &params, 1, "four.jsonl") {
            Err(PluginError::InvalidConfig(m)) => {
                assert!(
                    m.contains("four.jsonl has 4 problems and num-shots is 4"),
                    "{m}"
                )
            }
            other => panic!("expected a config error, got {:?}", other.err()),
        }
    }

    #[test]
    fn the_gsm8k_test_split_reads() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../tests/data/datasets/gsm8k/test.jsonl"
        );
        let data = std::fs::read(path).unwrap();
        let problems = parse(&data, "test.jsonl").unwrap();
        assert_eq!(problems.len(), 1319);
        assert_eq!(problems[0].reference, "18");
        assert!(
            problems[0]
                .question
                .starts_with("Janet\u{2019}s ducks lay 16 eggs")
        );
        assert_eq!(problems[1].reference, "3");
        // With vLLM's five shots the first question asked is the sixth line's.
        let sixth = problems[5].clone();
        let mut b = question_bank(problems, &Params::default(), 0, "test.jsonl").unwrap();
        assert_eq!(b.total(), 1314);
        let got = b.next_samples(&Words, 1).unwrap();
        assert!(text(&got[0]).starts_with("Question: Janet\u{2019}s ducks"));
        assert!(text(&got[0]).ends_with(&format!("Question: {}\nAnswer:", sixth.question)));
        assert_eq!(got[0].reference.as_deref(), Some(sixth.reference.as_str()));
        assert_eq!(got[0].request.expected_output_len, 256);
    }
}
