//! `bench dataset sample`: run a dataset plugin and write its requests as JSONL, to
//! inspect a workload or compare it with another tool's (one `{prompt, prompt_len,
//! expected_output_len, request_id}` object per line, vLLM's field names; `send_at`,
//! `session`, `multi_modal_data`, `extra_body`, `lora_name` and `output_constraint` where a
//! dataset sets them).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use super::args::{DatasetArgs, ModelArgs};
use super::console::Console;
use super::plugin_flags::{Parsed, Role};
use crate::runtime::{ChatMessage, ContentPart, OutputConstraint, PluginRef, Prompt};
use crate::tokenizer::hub_cache_roots_from_env;
use crate::workload::{self, WorkloadConfig};

#[derive(Args, Debug)]
pub struct DatasetCommand {
    #[command(subcommand)]
    action: DatasetAction,
}

#[derive(Subcommand, Debug)]
enum DatasetAction {
    /// Sample requests and write them as JSONL.
    Sample(SampleArgs),
}

#[derive(Args, Debug)]
struct SampleArgs {
    #[command(flatten)]
    model: ModelArgs,

    #[command(flatten)]
    dataset: DatasetArgs,

    #[command(flatten)]
    sandbox: super::plugin::SandboxArgs,

    /// Prefix of request ids (as vLLM's --request-id-prefix); none when not given.
    #[arg(long)]
    request_id_prefix: Option<String>,

    /// Output file; standard output when not given.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub fn run(cmd: DatasetCommand, plugins: &Parsed) -> Result<()> {
    let DatasetAction::Sample(args) = cmd.action;
    args.model.check_tokenizer_mode()?;
    let tokenizer = args
        .model
        .tokenizer
        .as_ref()
        .or(args.model.model.as_ref())
        .context("--tokenizer (or --model) is needed to sample a dataset")?;
    let hub_cache = hub_cache_roots_from_env();
    let config = WorkloadConfig {
        dataset: PluginRef::parse(&args.dataset.dataset_name)?,
        dataset_path: args.dataset.resolved_dataset_path(&hub_cache)?,
        num_prompts: args.dataset.num_prompts,
        seed: args.dataset.seed,
        options: {
            // The plugin's own flags and the general ones, then --dataset-option (which wins).
            let mut options = plugins.options(Role::Dataset, args.dataset.shared_values());
            options.extend(args.dataset.option_pairs()?);
            options
        },
        request_id_prefix: args.request_id_prefix.clone(),
        hub_cache,
        chat_template_kwargs: args.dataset.template_kwargs()?,
        lora: None,
        runtime: args.sandbox.runtime_config()?,
        progress: true,
    };
    for w in plugins.warnings(args.dataset.shared_values()) {
        eprintln!("WARNING: {w}");
    }
    // No run, no signals: only the preparation's messages reach it.
    let mut console = Console::new(false, Duration::ZERO);
    let workload = workload::load(&config, tokenizer, &mut console)?;
    let (specs, references) = (workload.specs, workload.references);
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    for (i, spec) in specs.iter().enumerate() {
        let prompt = match &spec.prompt {
            Prompt::Text(t) => serde_json::json!(t),
            Prompt::TokenIds(ids) => serde_json::json!(ids),
            Prompt::Chat(messages) => chat_json(messages),
            Prompt::Texts(texts) => serde_json::json!(texts),
            Prompt::Rerank(r) => serde_json::json!({"query": r.query, "documents": r.documents}),
        };
        let mut line = serde_json::json!({
            "prompt": prompt,
            "prompt_len": spec.prompt_len,
            "expected_output_len": spec.expected_output_len,
            "request_id": spec.request_id,
        });
        // Trace replay and multi-turn fields, only where a dataset sets them.
        if let Some(at) = spec.send_at {
            line["send_at"] = serde_json::json!(at);
        }
        if let Some(session) = &spec.session {
            line["session"] = serde_json::json!({"id": session.id, "turn": session.turn});
        }
        // What goes with the prompt, as a backend sends it: multimodal items (vLLM's
        // `multi_modal_data`), per-request body fields (tools), a LoRA adapter.
        if !spec.multimodal.is_empty() {
            let items: Vec<serde_json::Value> =
                spec.multimodal.iter().map(content_part_json).collect();
            line["multi_modal_data"] = serde_json::json!(items);
        }
        if let Some(body) = &spec.extra_body {
            line["extra_body"] = serde_json::from_str(body).with_context(|| {
                format!("request {:?}: extra body is not JSON", spec.request_id)
            })?;
        }
        if let Some(lora) = &spec.lora_name {
            line["lora_name"] = serde_json::json!(lora);
        }
        if let Some(constraint) = &spec.output_constraint {
            line["output_constraint"] = constraint_json(constraint);
        }
        // A graded dataset's reference (what its grader will compare the answer with).
        if let Some(Some(reference)) = references.get(i) {
            line["reference"] = serde_json::json!(reference);
        }
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// A structured-output constraint as `{kind: value}`: `json_schema` as the schema itself
/// (text that is not JSON stays text), `regex`, `choice` and `grammar` as given.
fn constraint_json(constraint: &OutputConstraint) -> serde_json::Value {
    match constraint {
        OutputConstraint::JsonSchema(schema) => serde_json::json!({
            "json_schema": serde_json::from_str::<serde_json::Value>(schema)
                .unwrap_or_else(|_| serde_json::json!(schema)),
        }),
        OutputConstraint::Regex(regex) => serde_json::json!({ "regex": regex }),
        OutputConstraint::Choice(choices) => serde_json::json!({ "choice": choices }),
        OutputConstraint::Grammar(grammar) => serde_json::json!({ "grammar": grammar }),
    }
}

/// Chat messages in OpenAI's shape (`[{role, content: [{type, ...}]}]`).
fn chat_json(messages: &[ChatMessage]) -> serde_json::Value {
    messages
        .iter()
        .map(|m| serde_json::json!({"role": m.role, "content": m.content.iter().map(content_part_json).collect::<Vec<_>>()}))
        .collect()
}

/// A content part in OpenAI's shape; binary data by its name, type and size.
fn content_part_json(part: &ContentPart) -> serde_json::Value {
    match part {
        ContentPart::Text(t) => serde_json::json!({"type": "text", "text": t}),
        ContentPart::ImageUrl(u) => {
            serde_json::json!({"type": "image_url", "image_url": {"url": u}})
        }
        ContentPart::AudioUrl(u) => {
            serde_json::json!({"type": "audio_url", "audio_url": {"url": u}})
        }
        ContentPart::VideoUrl(u) => {
            serde_json::json!({"type": "video_url", "video_url": {"url": u}})
        }
        ContentPart::Binary(b) => serde_json::json!({
            "type": "file",
            "file": {"filename": b.file_name, "mime_type": b.mime_type, "bytes": b.data.len()},
        }),
    }
}
