//! The `custom_image` dataset: vLLM's `--dataset-name custom_image`
//! (`CustomImageDataset`), a JSONL file of prompts with images (see [`sample`]).
//!
//! Options (vLLM's flag in brackets): `output-len` (`--custom-output-len`, 256),
//! `enable-multimodal-chat` (`--enable-multimodal-chat`), `ensure-client-side-data`
//! (`--custom-ensure-client-side-data`: local images inline as data URLs instead of
//! `file://` references the server must read), `disable-shuffle`, `no-oversample`.
//!
//! Local image paths are read from the dataset file's directory (the only one the host
//! grants a plugin): a relative path is taken relative to the dataset file.

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Files, Params, Sampler};

pub(crate) const NAME: &str = "custom_image";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option("output-len", "Output tokens per request", Some("256"))
            .flag("custom-output-len")
            .integer()
            .shared(SharedFlag::OutputLen),
        option(
            "enable-multimodal-chat",
            "Send each prompt and its images as one chat message",
            Some("false"),
        )
        .flag("enable-multimodal-chat")
        .switch(),
        option(
            "ensure-client-side-data",
            "Read local images and send them inline as data URLs instead of file:// \
             references",
            Some("false"),
        )
        .flag("custom-ensure-client-side-data")
        .switch(),
    ];
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let output_len: i64 = reader.parse_or("output-len", 256)?;
    let chat = reader.flag("enable-multimodal-chat", false)?;
    let inline = reader.flag("ensure-client-side-data", false)?;
    let flags = SampleFlags::read(&mut reader)?;
    reader.finish(&options())?;
    let output_len = u32::try_from(output_len).map_err(|_| {
        PluginError::InvalidConfig(format!(
            "{NAME}: option output-len={output_len}: the lines carry no output lengths, so \
             it must be a token count (0 or more)"
        ))
    })?;
    Ok(Params {
        output_len,
        chat,
        inline,
        flags,
    })
}

/// Local files, relative paths taken from the dataset file's directory.
struct DatasetDir(String);

impl Files for DatasetDir {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        let full = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("{}/{path}", self.0)
        };
        std::fs::read(&full).map_err(|e| {
            format!(
                "cannot read image {path}: {e} (a plugin sees only the dataset file's \
                 directory; put images there and refer to them relative to the file)"
            )
        })
    }
}

/// The request source.
pub struct CustomImageDataset {
    sampler: Sampler,
    dir: DatasetDir,
}

impl Dataset for CustomImageDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Prompts with images from a JSONL file ({\"prompt\", \"image_files\"} \
                          or {\"content\": [...]} per line, via --dataset-path), sampled as \
                          vLLM's `--dataset-name custom_image`"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let (path, text) = bench_sdk::custom::read_jsonl_file(NAME, config.path)?;
        let rows = sample::parse(&text, &path)?;
        let dir = match path.rfind('/') {
            Some(i) => path[..i].to_string(),
            None => ".".to_string(),
        };
        let n = config.num_requests as usize;
        let sampler = Sampler::new(rows, host::run_seed(), n, params, &path);
        Ok(CustomImageDataset {
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

bench_sdk::export_dataset!(CustomImageDataset);
