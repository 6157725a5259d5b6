//! The `hf` dataset: vLLM's `--dataset-name hf`, reading local files only.
//!
//! `--dataset-path` is a data file (JSON, JSONL, CSV or Parquet) or a folder: a Hugging
//! Face cache repository (`~/.cache/huggingface/hub/datasets--ORG--NAME`, read at the
//! snapshot `refs/main` names; its files are links into its `blobs/`, so the snapshot
//! folder alone cannot be read), a snapshot copied without links, a clone of the
//! dataset's repository, or any folder of data files ([`files`] finds the subset's
//! and split's files). The kind of dataset (vLLM's class: InstructCoder, GSM8K, ...) is
//! chosen by `--hf-name ORG/NAME`, else by the hub id the path shows
//! (`datasets--ORG--NAME` or a path ending in `ORG/NAME`). Nothing is downloaded: the
//! plugin sees only the path the host grants it.
//!
//! The rows are put in the order vLLM's `datasets.load_dataset(streaming=True).shuffle(seed)`
//! gives ([`order`]), mapped to prompts as vLLM's class does ([`kinds`]) and sampled with
//! its filters, output lengths, chat template and oversampling ([`sample`]).

pub mod audio;
pub mod bfcl;
pub mod files;
pub mod kinds;
pub mod media;
pub mod order;
pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::table::{self, ReadOptions};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use kinds::{Ctx, Fields, Item, Kind, Spec};
use order::Shuffle;
use sample::{Rules, Sampler};

const NAME: &str = "hf";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "hf-name",
            "The dataset's hub id (ORG/NAME), which picks how its rows are read; needed when \
             --dataset-path does not show it",
            None,
        )
        .flag("hf-name"),
        option(
            "hf-subset",
            "The subset: a folder of that name in the dataset's folder",
            None,
        )
        .flag("hf-subset"),
        option(
            "hf-split",
            "The split (train, validation, test, ...); default: the dataset's as in vLLM",
            None,
        )
        .flag("hf-split"),
        option(
            "hf-output-len",
            "Output tokens per request, replacing the dataset's default or each row's \
             reference length",
            None,
        )
        .flag("hf-output-len")
        .count(),
        option(
            "no-stream",
            "Shuffle as vLLM does with --no-stream (one permutation of all rows) instead of \
             a streamed dataset's shuffle buffer",
            Some("false"),
        )
        .flag("no-stream")
        .switch(),
        option(
            "skip-chat-template",
            "Send prompts as they are instead of wrapped in the tokenizer's chat template \
             (InstructCoder, MT-Bench, HumanEval, GSM8K, Blazedit)",
            Some("false"),
        )
        .flag("skip-chat-template")
        .switch(),
        option(
            "enable-multimodal-chat",
            "Send the prompt and its image or video as one chat message",
            Some("false"),
        )
        .flag("enable-multimodal-chat")
        .switch(),
        option(
            "blazedit-min-distance",
            "Blazedit: skip rows whose normalized edit distance is below this",
            Some("0.0"),
        )
        .flag("blazedit-min-distance")
        .number(),
        option(
            "blazedit-max-distance",
            "Blazedit: skip rows whose normalized edit distance is above this",
            Some("1.0"),
        )
        .flag("blazedit-max-distance")
        .number(),
        option(
            "asr-min-audio-len-sec",
            "ASR: skip clips shorter than this many seconds",
            Some("0.0"),
        )
        .flag("asr-min-audio-len-sec")
        .number(),
        option(
            "asr-max-audio-len-sec",
            "ASR: skip clips longer than this many seconds (default: no limit)",
            None,
        )
        .flag("asr-max-audio-len-sec")
        .number(),
        option(
            "bfcl-categories",
            "BFCL: comma-separated categories (BFCL_v3_<category>.json files)",
            Some("simple,live_simple,multiple"),
        )
        .flag("bfcl-categories"),
    ];
    options.extend(SampleFlags::options());
    options
}

/// The options, read and checked (no host call, so it runs natively in tests).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub hf_name: Option<String>,
    pub subset: Option<String>,
    pub split: Option<String>,
    pub output_len: Option<u32>,
    pub no_stream: bool,
    pub skip_chat_template: bool,
    pub multimodal_chat: bool,
    pub blazedit_range: (f64, f64),
    pub asr_range: (f64, f64),
    pub bfcl_categories: Vec<String>,
    pub flags: SampleFlags,
}

pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut r = OptionReader::new(NAME, pairs);
    let params = Params {
        hf_name: r.string("hf-name").filter(|s| !s.is_empty()),
        subset: r.string("hf-subset").filter(|s| !s.is_empty()),
        split: r.string("hf-split").filter(|s| !s.is_empty()),
        output_len: r.parse("hf-output-len")?,
        no_stream: r.flag("no-stream", false)?,
        skip_chat_template: r.flag("skip-chat-template", false)?,
        multimodal_chat: r.flag("enable-multimodal-chat", false)?,
        blazedit_range: (
            r.parse_or("blazedit-min-distance", 0.0)?,
            r.parse_or("blazedit-max-distance", 1.0)?,
        ),
        // vLLM reads 0 (or none) as no limit: `x or default`.
        asr_range: (
            r.parse_or("asr-min-audio-len-sec", 0.0)?,
            r.parse::<f64>("asr-max-audio-len-sec")?
                .filter(|&m| m != 0.0)
                .unwrap_or(f64::INFINITY),
        ),
        bfcl_categories: bfcl::categories(r.string("bfcl-categories").as_deref()),
        flags: SampleFlags::read(&mut r)?,
    };
    r.finish(&options())?;
    Ok(params)
}

/// The error for a dataset that is not on disk: what to download and what to pass.
fn not_on_disk(hub_id: &str) -> PluginError {
    PluginError::InvalidConfig(format!(
        "{NAME}: bench never downloads datasets, and {hub_id} was given without a local \
         copy. Fetch it first (e.g. `huggingface-cli download --repo-type dataset {hub_id}`) \
         and point at the copy: --dataset-path ~/.cache/huggingface/hub/datasets--{} \
         (the cache's repository folder; its snapshot's links point into it) or any folder \
         or data file of the dataset with --hf-name {hub_id}",
        hub_id.replace('/', "--")
    ))
}

fn unsupported(hub_id: Option<&str>, path: &str) -> PluginError {
    let ids = kinds::all_ids().join(", ");
    PluginError::InvalidConfig(match hub_id {
        Some(id) => format!("{NAME}: unsupported dataset {id}; the hf dataset reads one of: {ids}"),
        None => format!(
            "{NAME}: cannot tell which dataset {path} holds: give its hub id with --hf-name \
             (one of: {ids})"
        ),
    })
}

/// Where the rows come from, resolved from the options and the path.
struct Resolved {
    spec: &'static Spec,
    hub_id: String,
    path: String,
}

fn resolve(params: &Params, path: Option<String>) -> Result<Resolved, PluginError> {
    let Some(path) = path else {
        return Err(match &params.hf_name {
            Some(id) => not_on_disk(id),
            None => PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a local copy of the dataset: a snapshot folder \
                 or a data file) and, when the path does not show it, --hf-name ORG/NAME"
            )),
        });
    };
    let path = files::snapshot_of(&path);
    let hub_id = params
        .hf_name
        .clone()
        .or_else(|| files::hub_id_from_path(&path, &kinds::all_ids()));
    let spec = hub_id
        .as_deref()
        .and_then(kinds::spec_for)
        .ok_or_else(|| unsupported(hub_id.as_deref(), &path))?;
    Ok(Resolved {
        spec,
        hub_id: hub_id.expect("a spec was found for it"),
        path,
    })
}

/// The items of the chosen files, in vLLM's order; counts the rows vLLM's pre-filter
/// drops.
fn load_items(
    params: &Params,
    r: &Resolved,
    seed: u64,
) -> Result<(Vec<Item>, usize, String), PluginError> {
    let split = params.split.as_deref().unwrap_or(r.spec.split);
    let subset = if r.spec.no_subset {
        None
    } else {
        match (&params.subset, r.spec.subset) {
            (Some(s), _) => Some((s.as_str(), true)),
            (None, Some(s)) => Some((s, false)),
            (None, None) => None,
        }
    };
    if r.spec.kind == Kind::Bfcl {
        let root = files::repo_root(&r.path);
        let items = bfcl::load(&root, &params.bfcl_categories)?;
        let note = format!(
            "{NAME}: {} as Bfcl, categories {}",
            r.hub_id,
            params.bfcl_categories.join(",")
        );
        return Ok((items, 0, note));
    }
    let chosen = files::data_files(&r.path, subset, split)?;
    let mut tables = Vec::with_capacity(chosen.files.len());
    for file in &chosen.files {
        tables.push(table::read(file, &ReadOptions::default())?);
    }
    let counts: Vec<usize> = tables.iter().map(|t| t.rows.len()).collect();
    let shuffle = match (params.flags.disable_shuffle, params.no_stream) {
        (true, _) => Shuffle::None,
        (false, false) => Shuffle::Stream,
        (false, true) => Shuffle::Full,
    };
    let order = order::row_order(&counts, seed, shuffle);
    let mut index = Vec::with_capacity(order.len());
    for (t, n) in counts.iter().enumerate() {
        index.extend((0..*n).map(|i| (t, i)));
    }
    let video_root = (r.spec.kind == Kind::Mmvu).then(|| {
        (
            format!("https://huggingface.co/datasets/{}/resolve/main", r.hub_id),
            files::repo_root(&r.path),
        )
    });
    let root = files::repo_root(&r.path);
    let ctx = Ctx {
        hub_id: &r.hub_id,
        video_root,
        root: &root,
    };
    let mut items = Vec::with_capacity(order.len());
    let mut dropped = 0;
    for i in order {
        let (t, row) = index[i];
        let fields = Fields {
            row: &tables[t].rows[row],
            file: &tables[t].path,
        };
        match kinds::item(r.spec.kind, &fields, &ctx)? {
            Some(item) => items.push(item),
            None => dropped += 1,
        }
    }
    let mut note = format!(
        "{NAME}: {} as {:?} from {} file(s), split {split}",
        r.hub_id,
        r.spec.kind,
        chosen.files.len()
    );
    if chosen.unsplit {
        note.push_str(" (no file names a split: all are read)");
    }
    Ok((items, dropped, note))
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct HfDataset {
    sampler: Sampler,
    size_hint: Option<u32>,
    reported: bool,
}

impl Dataset for HfDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "The Hugging Face datasets of vLLM's `--dataset-name hf` (InstructCoder, \
                          AIMO, MT-Bench, Blazedit, HumanEval, GSM8K, ShareGPT-style \
                          conversations, LLaVA-OneVision, VisionArena, MMVU, MMStar, zeta, \
                          MLPerf, ASR sets, BFCL), read from a local snapshot folder \
                          or data file (--dataset-path; --hf-name ORG/NAME when the path does \
                          not show it), shuffled and sampled as vLLM does"
                .into(),
            options: options(),
        })
        // Optional so that `--hf-name` alone reaches the plugin, which says how to give a
        // local copy.
        .path(PathUse::Optional)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let resolved = resolve(&params, config.path)?;
        let seed = host::run_seed();
        let (items, dropped, note) = load_items(&params, &resolved, seed)?;
        host::log_info(&note);
        if dropped > 0 {
            host::log_info(&format!(
                "{NAME}: {dropped} conversation(s) with fewer than 2 turns left out, as vLLM does"
            ));
        }
        let kind = resolved.spec.kind;
        let rules = Rules {
            kind,
            // vLLM's zeta sampler takes no output length: always the reference's.
            output_len: if kind == Kind::NextEdit {
                None
            } else {
                params.output_len.or(resolved.spec.output_len)
            },
            chat_template: Rules::templated(kind) && !params.skip_chat_template,
            // The kinds vLLM turns into a chat message with the flag.
            multimodal_chat: params.multimodal_chat
                && matches!(
                    kind,
                    Kind::Conversation
                        | Kind::MmConversation
                        | Kind::VisionArena
                        | Kind::Mmvu
                        | Kind::MmStar
                ),
            measure_range: match kind {
                Kind::Blazedit => Some(params.blazedit_range),
                Kind::Asr => Some(params.asr_range),
                _ => None,
            },
        };
        let n = config.num_requests as usize;
        let size_hint = (!params.flags.no_oversample).then_some(config.num_requests);
        let sampler = Sampler::new(
            items,
            seed,
            n,
            rules,
            params.flags.no_oversample,
            kind == Kind::Bfcl && !params.flags.disable_shuffle,
            &resolved.path,
        );
        Ok(HfDataset {
            sampler,
            size_hint,
            reported: false,
        })
    }

    fn size_hint(&self) -> Option<u32> {
        self.size_hint
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if batch.is_empty() && !self.reported {
            self.reported = true;
            let s = self.sampler.skipped();
            if s.length > 0 {
                host::log_info(&format!(
                    "{NAME}: {} row(s) skipped by vLLM's length filter (prompt 4 to 1024 \
                     tokens, output at least 4, 2048 in all; AIMO: 2048 and 32000)",
                    s.length
                ));
            }
            if s.measure > 0 {
                host::log_warn(&format!(
                    "{NAME}: {} row(s) skipped outside the --blazedit-min/max-distance or \
                     --asr-min/max-audio-len-sec range",
                    s.measure
                ));
            }
            if s.invalid > 0 {
                host::log_info(&format!(
                    "{NAME}: {} BFCL row(s) without a question or functions skipped, as vLLM does",
                    s.invalid
                ));
            }
            if s.untemplated > 0 {
                host::log_warn(&format!(
                    "{NAME}: the chat template failed on {} BFCL conversation(s): their prompt \
                     length counts the messages' plain text, as vLLM does",
                    s.untemplated
                ));
            }
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(HfDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_have_vllms_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p.blazedit_range, (0.0, 1.0));
        assert_eq!(p.output_len, None);
        assert!(!p.no_stream && !p.skip_chat_template && !p.multimodal_chat);
        let p = parse_options(opts(&[
            ("hf-name", "openai/gsm8k"),
            ("hf-output-len", "7"),
            ("blazedit-min-distance", "0.1"),
            ("no-oversample", "true"),
        ]))
        .unwrap();
        assert_eq!(p.hf_name.as_deref(), Some("openai/gsm8k"));
        assert_eq!(p.output_len, Some(7));
        assert_eq!(p.blazedit_range.0, 0.1);
        assert!(p.flags.no_oversample);
        assert!(matches!(
            parse_options(opts(&[("hf-outputlen", "7")])),
            Err(PluginError::InvalidConfig(m)) if m.contains("unknown option")
        ));
    }

    #[test]
    fn a_hub_id_without_a_path_says_how_to_give_a_local_copy() {
        let p = parse_options(opts(&[("hf-name", "likaixin/InstructCoder")])).unwrap();
        match resolve(&p, None) {
            Err(PluginError::InvalidConfig(m)) => {
                assert!(m.contains("never downloads"), "{m}");
                assert!(
                    m.contains(
                        "--dataset-path ~/.cache/huggingface/hub/datasets--likaixin--InstructCoder "
                    ),
                    "{m}"
                );
                assert!(m.contains("--hf-name likaixin/InstructCoder"), "{m}");
            }
            other => panic!("{:?}", other.map(|r| r.hub_id)),
        }
        let p = parse_options(vec![]).unwrap();
        match resolve(&p, Some("/data/rows.jsonl".into())) {
            Err(PluginError::InvalidConfig(m)) => assert!(m.contains("--hf-name"), "{m}"),
            other => panic!("{:?}", other.map(|r| r.hub_id)),
        }
        let p = parse_options(opts(&[("hf-name", "me/mine")])).unwrap();
        match resolve(&p, Some("/data/rows.jsonl".into())) {
            Err(PluginError::InvalidConfig(m)) => {
                assert!(m.contains("unsupported dataset me/mine"), "{m}")
            }
            other => panic!("{:?}", other.map(|r| r.hub_id)),
        }
        let r = resolve(
            &p_default(),
            Some("/h/datasets--openai--gsm8k/snapshots/r".into()),
        )
        .unwrap();
        assert_eq!(
            (r.hub_id.as_str(), r.spec.kind),
            ("openai/gsm8k", Kind::Gsm8k)
        );
    }

    fn p_default() -> Params {
        parse_options(vec![]).unwrap()
    }
}
