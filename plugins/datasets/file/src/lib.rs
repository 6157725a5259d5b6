//! The `file` dataset (beyond vLLM): prompts from any JSON array, JSON Lines, CSV/TSV or
//! Parquet file (read with [`bench_sdk::table`]), mapped by column names, sampled as vLLM's
//! file datasets sample theirs (see [`sample`]).
//!
//! Needs `--dataset-path`; the format comes from the file name unless `format` says.
//! Options (flag in brackets): `prompt-column` (`--file-prompt-column`, `prompt`),
//! `output-len-column` (`--file-output-len-column`), `send-time-column`
//! (`--file-send-time-column`, seconds from the start: the run replays the file at those
//! times), `session-column` (`--file-session-column`: a conversation id per row),
//! `output-len` (`--file-output-len`, 256, or `--output-len`), `chat-template`
//! (`--file-chat-template`), `format` (`--file-format`), `disable-shuffle`,
//! `no-oversample`.

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::table::{self, Format, ReadOptions};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Columns, Params, Sampler};

const NAME: &str = "file";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "prompt-column",
            "The column holding each prompt's text",
            Some("prompt"),
        )
        .flag("file-prompt-column"),
        option(
            "output-len-column",
            "The column holding each request's output tokens (empty cells take output-len)",
            None,
        )
        .flag("file-output-len-column"),
        option(
            "send-time-column",
            "The column holding each request's send time in seconds from the start; the \
             file is then replayed at those times, in its order, each row once",
            None,
        )
        .flag("file-send-time-column"),
        option(
            "session-column",
            "The column holding each row's conversation id (sent as a session header by \
             backends told to; turns counted in file order)",
            None,
        )
        .flag("file-session-column"),
        option("output-len", "Output tokens per request", Some("256"))
            .flag("file-output-len")
            .count()
            .shared(SharedFlag::OutputLen),
        option(
            "chat-template",
            "Wrap each prompt in the tokenizer's chat template",
            Some("false"),
        )
        .flag("file-chat-template")
        .switch(),
        option(
            "format",
            "The file's format when its name does not say: json, jsonl, csv, tsv or parquet",
            None,
        )
        .flag("file-format")
        .choices(&Format::NAMES),
    ];
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests): the
/// sampling parameters and the format override.
pub fn parse_options(
    pairs: Vec<(String, String)>,
) -> Result<(Params, Option<Format>), PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let mut column = |name: &str| -> Result<Option<String>, PluginError> {
        match reader.string(name) {
            Some(c) if c.is_empty() => Err(PluginError::InvalidConfig(format!(
                "{NAME}: option {name}: expected a column name"
            ))),
            other => Ok(other),
        }
    };
    let columns = Columns {
        prompt: column("prompt-column")?.unwrap_or_else(|| "prompt".into()),
        output_len: column("output-len-column")?,
        send_time: column("send-time-column")?,
        session: column("session-column")?,
    };
    let defaults = Params::default();
    let output_len = reader.parse_or("output-len", defaults.output_len)?;
    let chat_template = reader.flag("chat-template", false)?;
    let format = match reader.string("format") {
        None => None,
        Some(f) => Some(Format::from_name(&f).ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: option format={f:?}: expected one of {}",
                Format::NAMES.join(", ")
            ))
        })?),
    };
    let flags = SampleFlags::read(&mut reader)?;
    reader.finish(&options())?;
    Ok((
        Params {
            columns,
            output_len,
            chat_template,
            flags,
        },
        format,
    ))
}

/// The request source.
pub struct FileDataset {
    sampler: Sampler,
}

impl Dataset for FileDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Prompts from a JSON, JSONL, CSV/TSV or Parquet file mapped by column \
                          (prompt, output length, send time, conversation), shuffled and \
                          oversampled as vLLM's file datasets"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let (params, format) = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a .json, .jsonl, .csv, .tsv or .parquet file)"
            ))
        })?;
        // Parquet decodes only the mapped columns; the text formats keep every column, so
        // that an error can list what a row has.
        let parquet = format.or_else(|| Format::from_path(&path)) == Some(Format::Parquet);
        let read = ReadOptions {
            format,
            columns: parquet.then(|| params.columns.names()),
        };
        let table = table::read(&path, &read)?;
        let items = sample::items(table.rows, &params.columns, &path)?;
        if params.columns.send_time.is_some() {
            host::log_info(&format!(
                "{NAME}: send times from column {:?}: the first rows in file order, each once",
                params.columns.send_time.as_deref().unwrap_or_default()
            ));
        }
        let sampler = Sampler::new(
            items,
            host::run_seed(),
            config.num_requests as usize,
            params,
            &path,
        )?;
        Ok(FileDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(FileDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_map_columns() {
        let (params, format) = parse_options(vec![]).unwrap();
        assert_eq!(params, Params::default());
        assert_eq!(format, None);
        let (params, format) = parse_options(opts(&[
            ("prompt-column", "question"),
            ("output-len-column", "n"),
            ("send-time-column", "t"),
            ("session-column", "conv"),
            ("output-len", "12"),
            ("chat-template", "true"),
            ("format", "parquet"),
            ("disable-shuffle", "true"),
        ]))
        .unwrap();
        assert_eq!(format, Some(Format::Parquet));
        assert_eq!(
            params.columns,
            Columns {
                prompt: "question".into(),
                output_len: Some("n".into()),
                send_time: Some("t".into()),
                session: Some("conv".into()),
            }
        );
        assert_eq!(params.columns.names(), ["question", "n", "t", "conv"]);
        assert!(params.chat_template && params.flags.disable_shuffle);
        assert_eq!(params.output_len, 12);
        for (pairs, needle) in [
            (opts(&[("format", "xml")]), "expected one of json, jsonl"),
            (opts(&[("prompt-column", "")]), "expected a column name"),
            (opts(&[("output-len", "-1")]), "output-len=\"-1\""),
            (opts(&[("column", "x")]), "unknown option"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("expected {needle:?}, got {other:?}"),
            }
        }
    }
}
