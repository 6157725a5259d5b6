//! vLLM's `SpeedBench.load_data` (vLLM 0.32): `<dataset-path>/<subset>.jsonl` read with
//! pandas, the rows of `--speed-bench-category` (all when none) kept, each row's prompt
//! the `content` of its first `messages` entry. Sampling is `CustomDataset.sample`, the
//! SDK's [`bench_sdk::custom`].

use bench_sdk::PluginError;
use bench_sdk::custom::{CustomParams, JsonlPrompts, read_jsonl_prompts};
use serde_json::Value;

/// vLLM's choices for `--speed-bench-dataset-subset`.
pub const SUBSETS: [&str; 6] = [
    "qualitative",
    "throughput_1k",
    "throughput_2k",
    "throughput_8k",
    "throughput_16k",
    "throughput_32k",
];

/// How to get the data, for errors (nothing is downloaded).
pub const HOW_TO_GET: &str = "SPEED-Bench (huggingface.co/datasets/nvidia/SPEED-Bench) is read \
     from a local folder and never downloaded; prepare it with NeMo-Skills' script (`curl -LsSf \
     https://raw.githubusercontent.com/NVIDIA-NeMo/Skills/refs/heads/main/nemo_skills/dataset/\
     speed-bench/prepare.py | python3 -`) and pass the folder holding qualitative.jsonl, \
     throughput_1k.jsonl, ... as --dataset-path";

/// The options of `vllm bench serve --dataset-name speed_bench`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--speed-bench-dataset-subset`, one of [`SUBSETS`].
    pub subset: String,
    /// `--speed-bench-category`.
    pub category: Option<String>,
    /// `--speed-bench-output-len`, `--skip-chat-template` and the sampling flags.
    pub custom: CustomParams,
}

/// The subset's file name and text. `dir` must be a folder (vLLM requires one; a hub id
/// or a single file is an error saying how to get the data).
pub fn read_subset(dir: &str, subset: &str) -> Result<(String, String), PluginError> {
    if !std::path::Path::new(dir).is_dir() {
        return Err(PluginError::InvalidConfig(format!(
            "speed_bench: --dataset-path {dir} is not a folder. {HOW_TO_GET}"
        )));
    }
    let file = format!("{}/{subset}.jsonl", dir.trim_end_matches('/'));
    let text = std::fs::read_to_string(&file).map_err(|e| {
        PluginError::InvalidConfig(format!(
            "speed_bench: cannot read {file} (subset {subset:?}): {e}. {HOW_TO_GET}"
        ))
    })?;
    Ok((file, text))
}

/// Reads a SPEED-Bench subset (one row per non-blank line), keeping the first message of
/// the rows of `category` (all when `None`). Errors name the file and the line.
pub fn parse(text: &str, name: &str, category: Option<&str>) -> Result<JsonlPrompts, PluginError> {
    read_jsonl_prompts("speed_bench", text, name, category, |fields| {
        let first = match fields.get("messages") {
            Some(Value::Array(messages)) => messages
                .first()
                .ok_or_else(|| "\"messages\" is empty".to_string())?,
            Some(_) => return Err("\"messages\" must be a list of messages".into()),
            None => {
                return Err(format!(
                    "no \"messages\" field (SPEED-Bench rows have \"messages\": \
                     [{{\"role\", \"content\"}}, ...]). {HOW_TO_GET}"
                ));
            }
        };
        match first.get("content") {
            Some(Value::String(content)) => Ok(content.clone()),
            _ => Err("the first message has no string \"content\"".into()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"question_id": "a", "category": "coding", "messages": [{"role": "user", "content": "Write a sort."}]}
{"question_id": "b", "category": "writing", "messages": [{"role": "user", "content": "A haiku."}, {"role": "assistant", "content": "x"}]}
{"question_id": "c", "category": "coding", "messages": [{"role": "user", "content": "Fix this bug."}]}
"#;

    #[test]
    fn first_messages_of_the_category_are_kept() {
        let all = parse(FILE, "q.jsonl", None).unwrap();
        let prompts: Vec<&str> = all.rows.iter().map(|r| r.prompt.as_str()).collect();
        assert_eq!(prompts, ["Write a sort.", "A haiku.", "Fix this bug."]);
        let coding = parse(FILE, "q.jsonl", Some("coding")).unwrap();
        assert_eq!((coding.rows.len(), coding.total), (2, 3));
        assert_eq!(coding.rows[1].line, 3);
        assert!(matches!(
            parse(FILE, "q.jsonl", Some("math")),
            Err(PluginError::InvalidConfig(m)) if m.contains("(the file has: coding, writing)")
        ));
    }

    #[test]
    fn bad_rows_and_paths_are_clear_errors() {
        for (text, want) in [
            ("{\"turns\": [\"a\"]}\n", "q.jsonl:1: no \"messages\" field"),
            ("{\"messages\": []}\n", "q.jsonl:1: \"messages\" is empty"),
            (
                "{\"messages\": [{\"role\": \"user\"}]}\n",
                "q.jsonl:1: the first message has no string \"content\"",
            ),
            ("{\"messages\": [\n", "q.jsonl:1: EOF while parsing"),
        ] {
            match parse(text, "q.jsonl", None) {
                Err(PluginError::InvalidInput(m)) => assert!(m.contains(want), "{m:?}"),
                other => panic!("expected an error for {text:?}, got {other:?}"),
            }
        }
        let dir = std::env::temp_dir().join(format!("speed_bench_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("qualitative.jsonl");
        std::fs::write(&file, FILE).unwrap();
        let d = dir.to_str().unwrap();
        let (name, text) = read_subset(d, "qualitative").unwrap();
        assert_eq!(
            (name.as_str(), text.as_str()),
            (file.to_str().unwrap(), FILE)
        );
        assert!(matches!(
            read_subset(d, "throughput_1k"),
            Err(PluginError::InvalidConfig(m)) if m.contains("throughput_1k.jsonl") && m.contains("prepare.py")
        ));
        assert!(matches!(
            read_subset(file.to_str().unwrap(), "qualitative"),
            Err(PluginError::InvalidConfig(m)) if m.contains("is not a folder")
        ));
        assert!(matches!(
            read_subset("nvidia/SPEED-Bench", "qualitative"),
            Err(PluginError::InvalidConfig(m)) if m.contains("is not a folder") && m.contains("never downloaded")
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
