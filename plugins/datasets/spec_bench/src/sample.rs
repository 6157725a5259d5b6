//! vLLM's `SpecBench.load_data` (vLLM 0.32): `question.jsonl` read with pandas, the rows
//! of `--spec-bench-category` (all when none) kept, each row's prompt its first turn.
//! Sampling is `CustomDataset.sample`, the SDK's [`bench_sdk::custom`].

use bench_sdk::PluginError;
use bench_sdk::custom::{CustomParams, JsonlPrompts, read_jsonl_prompts};
use serde_json::Value;

/// The options of `vllm bench serve --dataset-name spec_bench`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--spec-bench-category`: only the questions of this category.
    pub category: Option<String>,
    /// `--spec-bench-output-len` and the sampling flags.
    pub custom: CustomParams,
}

/// Reads Spec-Bench's JSONL (one question per non-blank line), keeping the first turn of
/// the questions of `category` (all when `None`). Errors name the file and the line.
pub fn parse(text: &str, name: &str, category: Option<&str>) -> Result<JsonlPrompts, PluginError> {
    read_jsonl_prompts("spec_bench", text, name, category, |fields| {
        match fields.get("turns") {
            Some(Value::Array(turns)) => match turns.first() {
                Some(Value::String(first)) => Ok(first.clone()),
                Some(_) => Err("the first of \"turns\" must be a string".into()),
                None => Err("\"turns\" is empty".into()),
            },
            Some(_) => Err("\"turns\" must be a list of strings".into()),
            None => Err(
                "no \"turns\" field (Spec-Bench questions are {\"question_id\", \
                         \"category\", \"turns\": [...]})"
                    .into(),
            ),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::custom::CustomSampler;
    use bench_sdk::rng::Random;
    use bench_sdk::sampling::{ChatTemplate, SampleFlags, TokenCounter};
    use bench_sdk::{Prompt, RequestSpec};

    const FILE: &str = r#"{"question_id": 1, "category": "writing", "turns": ["Write a poem.", "Shorter."]}
{"question_id": 2, "category": "qa", "turns": ["Who wrote Hamlet?"]}

{"question_id": 3, "category": "qa", "turns": ["What is the capital of Peru?"]}
{"question_id": 4, "category": "math_reasoning", "turns": ["2 + 2 = ?"]}
"#;

    #[test]
    fn first_turns_of_the_category_are_kept() {
        let all = parse(FILE, "q.jsonl", None).unwrap();
        assert_eq!(all.total, 4);
        let got: Vec<(usize, &str)> = all
            .rows
            .iter()
            .map(|r| (r.line, r.prompt.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "Write a poem."),
                (2, "Who wrote Hamlet?"),
                (4, "What is the capital of Peru?"),
                (5, "2 + 2 = ?")
            ]
        );
        let qa = parse(FILE, "q.jsonl", Some("qa")).unwrap();
        assert_eq!((qa.rows.len(), qa.total), (2, 4));
        assert!(matches!(
            parse(FILE, "q.jsonl", Some("poetry")),
            Err(PluginError::InvalidConfig(m))
                if m.contains("no row of category \"poetry\" (the file has: math_reasoning, qa, writing)")
        ));
    }

    #[test]
    fn malformed_rows_name_file_and_line() {
        for (text, category, want) in [
            (
                "{\"turns\": [\"a\"]}\n{\"turns\": \n",
                None,
                "q.jsonl:2: EOF while parsing",
            ),
            (
                "{\"turns\": [\"a\"]}\n\n{\"prompt\": \"b\"}\n",
                None,
                "q.jsonl:3: no \"turns\" field",
            ),
            ("{\"turns\": []}\n", None, "q.jsonl:1: \"turns\" is empty"),
            (
                "{\"turns\": \"abc\"}\n",
                None,
                "q.jsonl:1: \"turns\" must be a list",
            ),
            ("[1]\n", None, "q.jsonl:1: expected a JSON object"),
            (
                "{\"turns\": [\"a\"]}\n",
                Some("qa"),
                "q.jsonl:1: no string \"category\"",
            ),
        ] {
            match parse(text, "q.jsonl", category) {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains(want), "{m:?} lacks {want:?}")
                }
                other => panic!("expected an error for {text:?}, got {other:?}"),
            }
        }
    }

    /// A marker template; characters as tokens.
    struct Chars;

    impl ChatTemplate for Chars {
        fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
            Ok(format!("<u>{user}</u>"))
        }
    }

    impl TokenCounter for Chars {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.chars().count()).collect())
        }
    }

    fn texts(specs: &[RequestSpec]) -> Vec<(String, u32, u32)> {
        specs
            .iter()
            .map(|s| match &s.prompt {
                Prompt::Text(t) => (t.clone(), s.prompt_len, s.expected_output_len),
                other => panic!("text expected, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn sampled_as_vllms_custom_dataset() {
        let rows = parse(FILE, "q.jsonl", None).unwrap().rows;
        let params = CustomParams {
            output_len: 9,
            ..CustomParams::default()
        };
        let mut s = CustomSampler::new("spec_bench", rows.clone(), 5, 6, params.clone(), "q.jsonl")
            .unwrap();
        let got = texts(&s.next_batch(&Chars, 100).unwrap());
        // Shuffled with random.seed(5), then two oversampled from a fresh random.seed(5).
        let mut order: Vec<String> = rows
            .iter()
            .map(|r| format!("<u>{}</u>", r.prompt))
            .collect();
        Random::new(5).shuffle(&mut order);
        let mut rng = Random::new(5);
        let extra: Vec<String> = (0..2)
            .map(|_| rng.choice(&order).unwrap().clone())
            .collect();
        let want: Vec<String> = order.iter().chain(&extra).cloned().collect();
        assert_eq!(got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(), want);
        for (text, len, out) in &got {
            assert_eq!((*len as usize, *out), (text.chars().count(), 9));
        }
        let params = CustomParams {
            flags: SampleFlags {
                no_oversample: true,
                disable_shuffle: true,
            },
            ..params
        };
        let mut s = CustomSampler::new("spec_bench", rows, 5, 6, params, "q.jsonl").unwrap();
        assert_eq!(s.total(), 4);
        let got = texts(&s.next_batch(&Chars, 100).unwrap());
        assert_eq!(got[0].0, "<u>Write a poem.</u>");
        assert_eq!(got.len(), 4);
    }
}
