//! {{name}}: a bench dataset plugin, one request per non-empty line of a text file.
//!
//! ```text
//! bench --plugin {{crate}}.wasm --dataset-path prompts.txt --{{name}}-output-len 64 ...
//! ```

use bench_sdk::options::option;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

const NAME: &str = "{{name}}";

fn options() -> Vec<OptionInfo> {
    // Answers to the general --output-len too, as vLLM's own datasets do.
    vec![
        option(
            "output-len",
            "Output tokens to ask for per request",
            Some("128"),
        )
        .flag("{{name}}-output-len")
        .count()
        .shared(SharedFlag::OutputLen),
    ]
}

/// The prompts of a text file: its lines without surrounding whitespace, empty ones
/// skipped.
pub fn prompts(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

pub struct Lines {
    requests: std::vec::IntoIter<RequestSpec>,
    total: u32,
}

impl Dataset for Lines {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "One request per non-empty line of a text file (--dataset-path)".into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let mut reader = OptionReader::new(NAME, config.options);
        let output_len: u32 = reader.parse_or("output-len", 128)?;
        reader.finish(&options())?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!("{NAME}: needs --dataset-path (a text file)"))
        })?;
        // bench grants read access to this path only.
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let prompts = prompts(&text);
        if prompts.is_empty() {
            return Err(PluginError::InvalidInput(format!(
                "{NAME}: {path} has no non-empty line"
            )));
        }
        // One call for all prompts: bench tokenizes them natively with the run's tokenizer.
        let lengths = host::encode_batch(&prompts, true)?;
        // Cycles through the file when the run asks for more requests than it has lines.
        let requests: Vec<RequestSpec> = (0..config.num_requests as usize)
            .map(|i| {
                let k = i % prompts.len();
                RequestSpec::text(prompts[k].clone(), lengths[k].len() as u32, output_len)
            })
            .collect();
        Ok(Lines {
            total: requests.len() as u32,
            requests: requests.into_iter(),
        })
    }

    fn size_hint(&self) -> Option<u32> {
        Some(self.total)
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        Ok(self.requests.by_ref().take(max as usize).collect())
    }
}

// Makes `Lines` the plugin's `dataset` export (in the wasm build).
bench_sdk::export_dataset!(Lines);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_prompts() {
        let text = "  first line \r\n\n\tsecond\n   \nthird";
        assert_eq!(prompts(text), ["first line", "second", "third"]);
    }

    #[test]
    fn an_unknown_option_is_refused_by_name() {
        let config = DatasetConfig {
            num_requests: 1,
            path: None,
            options: vec![("outptu-len".into(), "8".into())],
            shard: None,
        };
        let Err(PluginError::InvalidConfig(message)) = Lines::open(config) else {
            panic!("an unknown option was accepted");
        };
        assert!(message.contains("outptu-len"), "{message}");
    }
}
