//! The Hugging Face datasets vLLM supports: which hub ids each kind answers to, its
//! defaults (split, subset, output length), and how a row of its files becomes an
//! [`Item`] (vLLM's field mapping).

use bench_sdk::table::{Place, Row, Value};
use bench_sdk::{ChatMessage, ContentPart, PluginError};

use crate::{audio, media};

/// A dataset kind, named after vLLM's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `ConversationDataset`: ShareGPT-style `conversations`.
    Conversation,
    /// `MultiModalConversationDataset`: the same with the row's image (LLaVA-OneVision).
    MmConversation,
    /// `NextEditPredictionDataset`: Zed's zeta edits.
    NextEdit,
    /// `MLPerfDataset`: a system prompt and a question, in the chat template.
    MlPerf,
    /// `MMStarDataset`: a question (before its options) and an image.
    MmStar,
    /// `InstructCoderDataset`.
    InstructCoder,
    /// `AIMODataset`: `problem` and `solution`.
    Aimo,
    /// `MTBenchDataset`: the first of `turns`.
    MtBench,
    /// `BlazeditDataset`: `code`, `change_request`, `norm_distance`.
    Blazedit,
    /// `HumanEvalDataset`: `prompt`.
    HumanEval,
    /// `GSM8KDataset`: `question`.
    Gsm8k,
    /// `VisionArenaDataset`: the first user turn and the first image.
    VisionArena,
    /// `MMVUDataset`: question, choices and a video.
    Mmvu,
    /// `ASRDataset`: audio clips for transcription.
    Asr,
    /// `BFCLDataset`: function-calling prompts with their tool schemas.
    Bfcl,
}

/// What vLLM sets for a kind before loading it.
pub struct Spec {
    pub kind: Kind,
    /// The hub ids vLLM picks this kind for.
    pub ids: &'static [&'static str],
    /// `--hf-split` when not given.
    pub split: &'static str,
    /// `--hf-subset` when not given.
    pub subset: Option<&'static str>,
    /// vLLM ignores `--hf-subset` for this kind.
    pub no_subset: bool,
    /// The output length when `--hf-output-len` is not given; `None`: each row's
    /// completion length.
    pub output_len: Option<u32>,
}

/// In vLLM's order of precedence.
pub const SPECS: &[Spec] = &[
    Spec {
        kind: Kind::VisionArena,
        ids: &[
            "lmarena-ai/VisionArena-Chat",
            "lmarena-ai/vision-arena-bench-v0.1",
        ],
        split: "train",
        subset: None,
        no_subset: true,
        output_len: Some(128),
    },
    Spec {
        kind: Kind::Mmvu,
        ids: &["yale-nlp/MMVU"],
        split: "validation",
        subset: None,
        no_subset: true,
        output_len: Some(128),
    },
    Spec {
        kind: Kind::InstructCoder,
        ids: &["likaixin/InstructCoder"],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: Some(200),
    },
    Spec {
        kind: Kind::MtBench,
        ids: &["philschmid/mt-bench"],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: Some(256),
    },
    Spec {
        kind: Kind::HumanEval,
        ids: &["openai/openai_humaneval"],
        split: "test",
        subset: None,
        no_subset: false,
        output_len: Some(256),
    },
    Spec {
        kind: Kind::Gsm8k,
        ids: &["openai/gsm8k"],
        split: "test",
        subset: Some("main"),
        no_subset: false,
        output_len: Some(256),
    },
    Spec {
        kind: Kind::MmConversation,
        ids: &["lmms-lab/LLaVA-OneVision-Data"],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: None,
    },
    Spec {
        kind: Kind::Conversation,
        ids: &["Aeala/ShareGPT_Vicuna_unfiltered"],
        // vLLM sets no split for it (and then fails); `train` is the only one it has.
        split: "train",
        subset: None,
        no_subset: false,
        output_len: None,
    },
    Spec {
        kind: Kind::Aimo,
        ids: &[
            "AI-MO/aimo-validation-aime",
            "AI-MO/NuminaMath-1.5",
            "AI-MO/NuminaMath-CoT",
        ],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: None,
    },
    Spec {
        kind: Kind::NextEdit,
        ids: &["zed-industries/zeta"],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: None,
    },
    Spec {
        kind: Kind::Asr,
        ids: &[
            "openslr/librispeech_asr",
            "facebook/voxpopuli",
            "LIUM/tedlium",
            "edinburghcstr/ami",
            "speechcolab/gigaspeech",
            "kensho/spgispeech",
            "ArtificialAnalysis/Earnings22-Cleaned-AA",
            "D4nt3/esb-datasets-earnings22-validation-tiny-filtered",
        ],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: Some(1024),
    },
    Spec {
        kind: Kind::Blazedit,
        ids: &["vdaita/edit_5k_char", "vdaita/edit_10k_char"],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: Some(4000),
    },
    Spec {
        kind: Kind::MlPerf,
        ids: &[
            "mgoin/mlperf-inference-llama2-data",
            "mgoin/mlperf-inference-llama3.1-data",
        ],
        split: "train",
        subset: None,
        no_subset: false,
        output_len: None,
    },
    Spec {
        kind: Kind::MmStar,
        ids: &["Lin-Chen/MMStar"],
        split: "val",
        subset: None,
        no_subset: true,
        output_len: Some(128),
    },
    Spec {
        kind: Kind::Bfcl,
        ids: &["gorilla-llm/Berkeley-Function-Calling-Leaderboard"],
        split: "train",
        subset: None,
        no_subset: true,
        output_len: Some(512),
    },
];

/// Every hub id a kind answers to.
pub fn all_ids() -> Vec<&'static str> {
    SPECS.iter().flat_map(|s| s.ids.iter().copied()).collect()
}

/// The kind vLLM picks for `hub_id`.
pub fn spec_for(hub_id: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.ids.contains(&hub_id))
}

/// What a row contributes to a request, before tokenizing.
#[derive(Clone, Debug)]
pub struct Item {
    /// The user text (before any chat template).
    pub prompt: String,
    /// The reference answer, when the output length is the answer's length.
    pub completion: Option<String>,
    /// An image, video or audio item sent with the prompt.
    pub media: Option<ContentPart>,
    /// Blazedit's `norm_distance`; ASR's clip length in seconds: what vLLM filters on.
    pub measure: Option<f64>,
    /// BFCL: the chat messages sent as they are, the request body with its `tools`, and
    /// those tools (a JSON array) for the chat template that measures the prompt.
    pub messages: Option<Vec<ChatMessage>>,
    pub extra_body: Option<String>,
    pub tools: Option<String>,
    /// vLLM looks at the row and skips it (BFCL rows without a usable question).
    pub skip: bool,
}

impl Item {
    pub fn text(prompt: String) -> Self {
        Item {
            prompt,
            completion: None,
            media: None,
            measure: None,
            messages: None,
            extra_body: None,
            tools: None,
            skip: false,
        }
    }
}

/// Reads fields of one row, with errors naming the file and the row.
pub struct Fields<'a> {
    pub row: &'a Row,
    pub file: &'a str,
}

impl<'a> Fields<'a> {
    pub fn error(&self, why: impl std::fmt::Display) -> PluginError {
        self.row.place.error(self.file, why)
    }

    pub fn place(&self) -> Place {
        self.row.place
    }

    pub fn value(&self, name: &str) -> Result<&'a Value, PluginError> {
        self.row.get(name).ok_or_else(|| {
            let columns: Vec<&str> = self.row.columns().collect();
            self.error(format!(
                "no \"{name}\" field (fields: {})",
                columns.join(", ")
            ))
        })
    }

    pub fn string(&self, name: &str) -> Result<String, PluginError> {
        string_of(self.value(name)?, name).map_err(|e| self.error(e))
    }

    pub fn number(&self, name: &str) -> Result<f64, PluginError> {
        let v = self.value(name)?;
        v.as_f64()
            .ok_or_else(|| self.error(format!("\"{name}\" is {}, not a number", v.kind())))
    }
}

fn string_of(v: &Value, what: &str) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("\"{what}\" is {}, not a string", v.kind()))
}

/// `value[index]` of a list, described as `what` in errors.
fn nth<'v>(v: &'v Value, index: usize, what: &str) -> Result<&'v Value, String> {
    match v.as_list() {
        Some(items) => items
            .get(index)
            .ok_or_else(|| format!("{what} has no item {index}")),
        None => Err(format!("{what} is {}, not a list", v.kind())),
    }
}

fn field<'v>(v: &'v Value, name: &str, what: &str) -> Result<&'v Value, String> {
    v.get(name)
        .ok_or_else(|| format!("{what} has no \"{name}\" (it is {})", v.kind()))
}

/// Where zeta's editable region starts in a reference output.
const ZETA_REGION_START: &str = "<|editable_region_start|>";

/// What rows are read with besides their fields.
pub struct Ctx<'a> {
    /// Picks VisionArena's variant.
    pub hub_id: &'a str,
    /// MMVU: its remote video URL prefix and the local snapshot that replaces it.
    pub video_root: Option<(String, String)>,
    /// The snapshot or data folder, against which ASR clip paths are read.
    pub root: &'a str,
}

/// The row's item, `None` when vLLM's pre-filter drops it (conversations with fewer than
/// two turns).
pub fn item(kind: Kind, f: &Fields, ctx: &Ctx) -> Result<Option<Item>, PluginError> {
    let hub_id = ctx.hub_id;
    let video_root = ctx.video_root.as_ref();
    let item = match kind {
        Kind::Conversation | Kind::MmConversation => {
            let conv = f.value("conversations")?;
            let turns = conv.as_list().ok_or_else(|| {
                f.error(format!("\"conversations\" is {}, not a list", conv.kind()))
            })?;
            if turns.len() < 2 {
                return Ok(None);
            }
            let text = |i: usize| {
                field(&turns[i], "value", &format!("conversations[{i}]"))
                    .and_then(|v| string_of(v, &format!("conversations[{i}].value")))
                    .map_err(|e| f.error(e))
            };
            let mut item = Item::text(text(0)?);
            item.completion = Some(text(1)?);
            // vLLM adds the row's image when the dataset has that column.
            if let Some(image) = f.row.get("image").filter(|v| !v.is_null()) {
                item.media = Some(media::image(image).map_err(|e| f.error(e))?);
            }
            item
        }
        Kind::InstructCoder => Item::text(format!(
            "{}\n\n{} Just output the code, do not include any explanation.",
            f.string("input")?,
            f.string("instruction")?
        )),
        Kind::Aimo => {
            let mut item = Item::text(f.string("problem")?);
            item.completion = Some(f.string("solution")?);
            item
        }
        Kind::MtBench => {
            let turns = f.value("turns")?;
            Item::text(
                nth(turns, 0, "\"turns\"")
                    .and_then(|v| string_of(v, "turns[0]"))
                    .map_err(|e| f.error(e))?,
            )
        }
        Kind::HumanEval => Item::text(f.string("prompt")?),
        Kind::Gsm8k => Item::text(f.string("question")?),
        Kind::Blazedit => {
            let code = f.string("code")?;
            let change = f.string("change_request")?;
            let mut item = Item::text(format!(
                "Given a code file, please apply the change requests and generate the new \
                 file.\n\nOriginal file:\n```python\n{code}\n```\n\nChange request:\n{change}\
                 \n\nPlease generate the new code file in the \"New file\" section below."
            ));
            item.measure = Some(f.number("norm_distance")?);
            item
        }
        Kind::VisionArena => {
            let column = if hub_id == "lmarena-ai/vision-arena-bench-v0.1" {
                "turns"
            } else {
                "conversation"
            };
            let prompt = nth(f.value(column)?, 0, &format!("\"{column}\""))
                .and_then(|turn| nth(turn, 0, &format!("{column}[0]")))
                .and_then(|msg| field(msg, "content", &format!("{column}[0][0]")))
                .and_then(|v| string_of(v, &format!("{column}[0][0].content")))
                .map_err(|e| f.error(e))?;
            let image = nth(f.value("images")?, 0, "\"images\"").map_err(|e| f.error(e))?;
            let mut item = Item::text(prompt);
            item.media = Some(media::image(image).map_err(|e| f.error(e))?);
            item
        }
        Kind::Mmvu => {
            let mut prompt = f.string("question")?;
            prompt.push(' ');
            let choices = f.value("choices")?;
            let fields = choices.as_map().ok_or_else(|| {
                f.error(format!("\"choices\" is {}, not an object", choices.kind()))
            })?;
            let parts: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}.{}", python_str(v)))
                .collect();
            prompt.push_str(&parts.join(" "));
            let mut video = f.string("video")?;
            if let Some((remote, local)) = video_root
                && video.contains(remote.as_str())
            {
                video = video.replace(remote.as_str(), local);
            }
            let mut item = Item::text(prompt);
            item.media = Some(media::video(video));
            item
        }
        Kind::NextEdit => {
            let output = f.string("output")?;
            // Python's `output[output.find(marker):]`: from the marker, or the last
            // character when there is none.
            let completion = match output.find(ZETA_REGION_START) {
                Some(at) => output[at..].to_string(),
                None => output
                    .chars()
                    .next_back()
                    .map(String::from)
                    .unwrap_or_default(),
            };
            let mut item = Item::text(format!(
                "### Instruction:\nYou are a code completion assistant and your task is to \
                 analyze user edits and then rewrite an excerpt that the user provides, \
                 suggesting the appropriate edits within the excerpt, taking into account the \
                 cursor location.\n\n### User Edits:\n\n{}\n\n### User Excerpt:\n\n{}\n\n\
                 ### Response:\n\n",
                f.string("events")?,
                f.string("input")?
            ));
            item.completion = Some(completion);
            item
        }
        Kind::MlPerf => {
            let message = |role: &str, text: String| ChatMessage {
                role: role.into(),
                content: vec![ContentPart::Text(text)],
            };
            let question = f.string("question")?;
            let mut item = Item::text(question.clone());
            item.messages = Some(vec![
                message("system", f.string("system_prompt")?),
                message("user", question),
            ]);
            item.completion = Some(f.string("output")?);
            item
        }
        Kind::MmStar => {
            let question = match f.row.get("question") {
                None | Some(Value::Null) => String::new(),
                Some(_) => f.string("question")?,
            };
            let text = question
                .split_once("Options:")
                .map_or(question.as_str(), |(before, _)| before)
                .trim()
                .to_string();
            let mut item = Item::text(text);
            item.media = Some(media::image(f.value("image")?).map_err(|e| f.error(e))?);
            item
        }
        Kind::Asr => {
            let root = ctx.root;
            let read = |path: &str| {
                let full = if path.starts_with('/') {
                    path.to_string()
                } else {
                    format!("{root}/{path}")
                };
                std::fs::read(&full).map_err(|e| format!("cannot read audio file {full}: {e}"))
            };
            let clip = audio::clip(f.value("audio")?, &read).map_err(|e| f.error(e))?;
            let mut item = Item::text(String::new());
            item.media = Some(clip.part);
            item.measure = Some(clip.seconds);
            item
        }
        Kind::Bfcl => {
            return Err(PluginError::Internal(format!(
                "{kind:?} rows are read by their own loader"
            )));
        }
    };
    Ok(Some(item))
}

/// How Python's `str()` shows a value in an f-string (MMVU's choices).
fn python_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        other => other.to_json().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(json: &str) -> Row {
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        let Value::Map(fields) = Value::from(value) else {
            panic!("an object")
        };
        Row {
            place: Place::Line(3),
            fields,
        }
    }

    fn get(kind: Kind, json: &str) -> Result<Option<Item>, PluginError> {
        let r = row(json);
        item(
            kind,
            &Fields {
                row: &r,
                file: "d.jsonl",
            },
            &Ctx {
                hub_id: "x/y",
                video_root: None,
                root: "/nonexistent",
            },
        )
    }

    #[test]
    fn fields_map_as_vllm_does() {
        let it = get(
            Kind::InstructCoder,
            r#"{"input": "def f(): pass", "instruction": "Add a docstring."}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            it.prompt,
            "def f(): pass\n\nAdd a docstring. Just output the code, do not include any explanation."
        );
        let it = get(Kind::Conversation, r#"{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (it.prompt.as_str(), it.completion.as_deref()),
            ("hi", Some("yo"))
        );
        assert!(
            get(
                Kind::Conversation,
                r#"{"conversations": [{"value": "hi"}]}"#
            )
            .unwrap()
            .is_none()
        );
        let it = get(Kind::MtBench, r#"{"turns": ["one", "two"]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(it.prompt, "one");
        let it = get(
            Kind::Blazedit,
            r#"{"code": "x = 1", "change_request": "use 2", "norm_distance": 0.25}"#,
        )
        .unwrap()
        .unwrap();
        assert!(it.prompt.starts_with("Given a code file, please apply the change requests and generate the new file.\n\nOriginal file:\n```python\nx = 1\n```\n\nChange request:\nuse 2\n\nPlease generate"));
        assert_eq!(it.measure, Some(0.25));
        let it = get(
            Kind::Mmvu,
            r#"{"question": "Q?", "choices": {"A": "a", "B": null}, "video": "https://v/1.mp4"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(it.prompt, "Q? A.a B.None");
        assert_eq!(
            format!("{:?}", it.media),
            format!(
                "{:?}",
                Some(ContentPart::VideoUrl("https://v/1.mp4".into()))
            )
        );
    }

    #[test]
    fn the_other_kinds_map_as_vllm_does() {
        let it = get(
            Kind::NextEdit,
            r#"{"events": "E", "input": "I", "output": "pre<|editable_region_start|>body"}"#,
        )
        .unwrap()
        .unwrap();
        assert!(
            it.prompt
                .starts_with("### Instruction:\nYou are a code completion assistant")
        );
        assert!(
            it.prompt
                .ends_with("### User Edits:\n\nE\n\n### User Excerpt:\n\nI\n\n### Response:\n\n")
        );
        assert_eq!(
            it.completion.as_deref(),
            Some("<|editable_region_start|>body")
        );
        let it = get(
            Kind::NextEdit,
            r#"{"events": "", "input": "", "output": "xyz"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(it.completion.as_deref(), Some("z"));
        let it = get(
            Kind::MlPerf,
            r#"{"system_prompt": "Be kind.", "question": "Why?", "output": "Because."}"#,
        )
        .unwrap()
        .unwrap();
        let m = it.messages.unwrap();
        assert_eq!((m[0].role.as_str(), m[1].role.as_str()), ("system", "user"));
        assert_eq!(it.completion.as_deref(), Some("Because."));
        let it = get(
            Kind::MmStar,
            r#"{"question": " Which? Options: A: x, B: y", "image": "https://i/1.png"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(it.prompt, "Which?");
        assert!(it.media.is_some());
    }

    #[test]
    fn missing_or_wrong_fields_name_file_and_line() {
        for (kind, json, needle) in [
            (
                Kind::Gsm8k,
                r#"{"q": "x"}"#,
                "d.jsonl:3: no \"question\" field (fields: q)",
            ),
            (
                Kind::HumanEval,
                r#"{"prompt": 3}"#,
                "d.jsonl:3: \"prompt\" is an integer, not a string",
            ),
            (
                Kind::Conversation,
                r#"{"conversations": [{"value": "a"}, {"v": 1}]}"#,
                "conversations[1] has no \"value\"",
            ),
            (Kind::MtBench, r#"{"turns": []}"#, "\"turns\" has no item 0"),
        ] {
            match get(kind, json) {
                Err(PluginError::InvalidInput(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("{kind:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn hub_ids_pick_kinds() {
        assert_eq!(spec_for("openai/gsm8k").unwrap().kind, Kind::Gsm8k);
        assert_eq!(spec_for("openai/gsm8k").unwrap().subset, Some("main"));
        assert_eq!(
            spec_for("likaixin/InstructCoder").unwrap().output_len,
            Some(200)
        );
        assert!(spec_for("someone/else").is_none());
        let ids = all_ids();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(ids.len(), unique.len());
    }
}
