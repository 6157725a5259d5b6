//! The `custom_audio` dataset: vLLM's `--dataset-name custom_audio`
//! (`CustomAudioDataset`), a JSONL file of prompts with audio clips (see [`sample`]).
//!
//! Options (vLLM's flag in brackets): `output-len` (`--custom-output-len`, 256; -1 reads
//! each line's `output_tokens`), `enable-multimodal-chat` (`--enable-multimodal-chat`: the
//! prompt and the clip in one chat message), `skip-chat-template` (`--skip-chat-template`,
//! which vLLM does not pass to this dataset), `disable-shuffle`, `no-oversample`.
//!
//! Shardable: the host may prepare the set with one instance per core, each decoding only
//! the clips of its own positions.
//!
//! Clips are read from the dataset file's folder, the only one the host grants a plugin: a
//! relative path is taken relative to the dataset file (vLLM takes it relative to its
//! working directory), and a path outside that folder is an error naming the line.

pub mod sample;

use bench_sdk::custom::CustomParams;
use bench_sdk::dataset::Positions;
use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Clips, Params, Sampler};

const NAME: &str = "custom_audio";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "output-len",
            "Output tokens per request; -1 takes each line's \"output_tokens\"",
            Some("256"),
        )
        .flag("custom-output-len")
        .integer()
        .shared(SharedFlag::OutputLen),
        option(
            "enable-multimodal-chat",
            "Send each prompt and its clip as one chat message (the clip as a WAV data URL) \
             instead of the prompt with the clip as a file upload",
            Some("false"),
        )
        .flag("enable-multimodal-chat")
        .switch(),
        option(
            "skip-chat-template",
            "Send prompts as they are instead of wrapped in the tokenizer's chat template",
            Some("false"),
        )
        .flag("skip-chat-template")
        .switch(),
    ];
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let defaults = CustomParams::default();
    let output_len: i64 = reader.parse_or("output-len", defaults.output_len)?;
    CustomParams::check_output_len(NAME, "output-len", output_len)?;
    let chat = reader.flag("enable-multimodal-chat", false)?;
    let skip_chat_template = reader.flag("skip-chat-template", false)?;
    let flags = SampleFlags::read(&mut reader)?;
    reader.finish(&options())?;
    Ok(Params {
        custom: CustomParams {
            output_len,
            skip_chat_template,
            flags,
        },
        chat,
    })
}

/// A path's components with `.` and `..` resolved without the file system (so a clip
/// cannot leave the folder through `..`).
fn components(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if out.last().is_some_and(|p| *p != "..") => {
                out.pop();
            }
            ".." if path.starts_with('/') => {}
            _ => out.push(part),
        }
    }
    out
}

/// Where the clip `clip` is, given the dataset file's folder `dir`: the path to open, or
/// why it cannot be read.
pub fn resolve(dir: &str, clip: &str) -> Result<String, String> {
    let joined = if clip.starts_with('/') {
        clip.to_string()
    } else {
        format!("{dir}/{clip}")
    };
    let absolute = joined.starts_with('/');
    let (want, got) = (components(dir), components(&joined));
    if absolute != dir.starts_with('/')
        || got.len() <= want.len()
        || !got.starts_with(&want)
        || got[want.len()..].contains(&"..")
    {
        return Err(format!(
            "the clip {clip} is outside the dataset's folder {dir}: a plugin can read only \
             under the folder of --dataset-path, so the clip must be there (a relative path \
             is taken from that folder)"
        ));
    }
    let path = got.join("/");
    Ok(if absolute { format!("/{path}") } else { path })
}

/// The clips, read from under the dataset file's folder.
struct DatasetDir(String);

impl Clips for DatasetDir {
    fn read(&self, clip: &str) -> Result<Vec<u8>, String> {
        let path = resolve(&self.0, clip)?;
        std::fs::read(&path).map_err(|e| format!("cannot read the clip {clip} ({path}): {e}"))
    }
}

/// The request source.
pub struct CustomAudioDataset {
    sampler: Sampler,
    dir: DatasetDir,
}

impl Dataset for CustomAudioDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Prompts with audio clips from a JSONL file ({\"prompt\", \"audio\", \
                          \"output_tokens\"} per line, via --dataset-path; clips in WAV, FLAC, \
                          MP3 or Ogg/Vorbis under the file's folder), sampled as vLLM's \
                          `--dataset-name custom_audio`"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
        // Decoding clips costs far more than the shuffle and picks every shard repeats.
        .shardable()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let positions = Positions::of(&config)?;
        let params = parse_options(config.options)?;
        let (path, text) = bench_sdk::custom::read_jsonl_file(NAME, config.path)?;
        let rows = sample::parse(&text, &path)?;
        let dir = match path.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => path[..i].to_string(),
            None => ".".to_string(),
        };
        let n = config.num_requests as usize;
        let sampler = Sampler::new(rows, host::run_seed(), n, params, &path, positions)?;
        Ok(CustomAudioDataset {
            sampler,
            dir: DatasetDir(dir),
        })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler
            .next_batch(&HostTokenizer, &self.dir, max as usize)
    }
}

bench_sdk::export_dataset!(CustomAudioDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p, Params::default());
        assert_eq!((p.custom.output_len, p.chat), (256, false));
        let p = parse_options(opts(&[
            ("output-len", "-1"),
            ("enable-multimodal-chat", "true"),
            ("skip-chat-template", "true"),
            ("no-oversample", "true"),
        ]))
        .unwrap();
        assert_eq!(
            (p.custom.output_len, p.chat, p.custom.skip_chat_template),
            (-1, true, true)
        );
        assert!(p.custom.flags.no_oversample && !p.custom.flags.disable_shuffle);
        for (pairs, needle) in [
            (opts(&[("output-len", "-3")]), "or -1"),
            (opts(&[("custom-output-len", "5")]), "unknown option"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn clips_resolve_under_the_dataset_folder_only() {
        assert_eq!(resolve("/d/x", "a.wav").unwrap(), "/d/x/a.wav");
        assert_eq!(resolve("/d/x", "./s/../b.mp3").unwrap(), "/d/x/b.mp3");
        assert_eq!(resolve("/d/x", "/d/x/s/c.flac").unwrap(), "/d/x/s/c.flac");
        assert_eq!(resolve("data", "s/a.wav").unwrap(), "data/s/a.wav");
        assert_eq!(resolve(".", "a.wav").unwrap(), "a.wav");
        for (dir, clip) in [
            ("/d/x", "../y/a.wav"),
            ("/d/x", "/d/y/a.wav"),
            ("/d/x", "/d/xa.wav"),
            ("/d/x", "s/../../x"),
            ("/d/x", "."),
            ("data", "/data/a.wav"),
            (".", "../a.wav"),
        ] {
            let err = resolve(dir, clip).unwrap_err();
            assert!(
                err.contains(&format!(
                    "the clip {clip} is outside the dataset's folder {dir}"
                )),
                "{dir} {clip}: {err}"
            );
        }
    }
}
