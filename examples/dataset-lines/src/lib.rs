//! An example dataset plugin: one request per non-empty line of a text file.
//!
//! It shows the whole contract in one file: describe the options and their flags, say that
//! a file is needed, validate the options (unknown ones are an error), read the file the
//! host granted, measure prompts with the run's tokenizer, shuffle with a seed derived from
//! `--seed`, and hand requests out in batches.
//!
//! ```text
//! bench serve --dataset-name ./dataset_lines.wasm --dataset-path prompts.txt \
//!       --output-len 64 --lines-shuffle ...
//! ```
//!
//! (`--dataset-option output-len=64 --dataset-option shuffle=true` sets the same.)

use bench_sdk::options::option;
use bench_sdk::rng::Random;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

const NAME: &str = "lines";

fn options() -> Vec<OptionInfo> {
    vec![
        // Answers to the general `--output-len`, as vLLM's own datasets do.
        option(
            "output-len",
            "Output tokens to ask for per request",
            Some("128"),
        )
        .flag("lines-output-len")
        .count()
        .shared(SharedFlag::OutputLen),
        option(
            "shuffle",
            "Shuffle the lines with a seed derived from --seed",
            Some("false"),
        )
        .flag("lines-shuffle")
        .switch(),
    ]
}

/// The prompts of a text file: its lines without surrounding whitespace, empty ones
/// skipped.
pub fn prompts(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Requests for `prompts` given their token counts, cycling through the file when the
/// run asks for more requests than there are lines.
pub fn requests(
    prompts: &[String],
    counts: &[usize],
    num_requests: usize,
    output_len: u32,
) -> Vec<RequestSpec> {
    (0..num_requests)
        .map(|i| {
            let k = i % prompts.len();
            RequestSpec::text(prompts[k].clone(), counts[k] as u32, output_len)
        })
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
        let shuffle = reader.flag("shuffle", false)?;
        reader.finish(&options())?;

        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!("{NAME}: needs --dataset-path (a text file)"))
        })?;
        // The host grants read access to this path only.
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let mut prompts = prompts(&text);
        if prompts.is_empty() {
            return Err(PluginError::InvalidInput(format!(
                "{NAME}: {path} has no non-empty line"
            )));
        }
        if shuffle {
            // Draws happen in the plugin; only the seed crosses from the host.
            Random::new(i128::from(host::derive_seed(NAME))).shuffle(&mut prompts);
        }
        // One crossing for all prompts: the host tokenizes natively, in parallel.
        let counts: Vec<usize> = host::encode_batch(&prompts, true)?
            .iter()
            .map(Vec::len)
            .collect();
        let requests = requests(&prompts, &counts, config.num_requests as usize, output_len);
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

// Makes `Lines` the plugin's `dataset` export (only in the wasm build).
bench_sdk::export_dataset!(Lines);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;

    #[test]
    fn lines_become_prompts() {
        let text = "  first line \r\n\n\tsecond\n   \nthird";
        assert_eq!(prompts(text), ["first line", "second", "third"]);
    }

    #[test]
    fn requests_cycle_through_the_file() {
        let p = prompts("a b\nc\n");
        let got = requests(&p, &[2, 1], 5, 16);
        let got: Vec<(String, u32, u32)> = got
            .into_iter()
            .map(|r| match r.prompt {
                Prompt::Text(t) => (t, r.prompt_len, r.expected_output_len),
                other => panic!("text prompts only, got {other:?}"),
            })
            .collect();
        let want = [("a b", 2), ("c", 1), ("a b", 2), ("c", 1), ("a b", 2)];
        assert_eq!(got, want.map(|(t, n)| (t.to_string(), n, 16)).to_vec());
    }
}
