//! The `file` dataset (beyond vLLM): prompts from any JSON array, JSON Lines, CSV/TSV or
//! Parquet file (read with [`bench_sdk::table`]), mapped by column names, sampled as vLLM's
//! file datasets sample theirs (see [`sample`]).
//!
//! Needs `--dataset-path`; the format comes from the file name unless `format` says.
//! Options (flag in brackets): `prompt-column` (`--file-prompt-column`, `prompt`),
//! `output-len-column` (`--file-output-len-column`), `send-time-column`
//! (`--file-send-time-column`, seconds from the start: the run replays the file at those
//! times), `session-column` (`--file-session-column`: a conversation id per row; the
//! conversations are replayed turn by turn with the server's answers, see [`turns`], with
//! `think-time` and `think-time-distribution`, `--file-think-time[-distribution]`),
//! `output-len` (`--file-output-len`, 256, or `--output-len`), `chat-template`
//! (`--file-chat-template`), `format` (`--file-format`), `disable-shuffle`,
//! `no-oversample`.

pub mod sample;
pub mod turns;

use bench_sdk::conversation::ThinkTime;
use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::table::{self, Format, ReadOptions};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, TurnResult, host,
};

use sample::{Columns, Params, Sampler};
use turns::MultiTurn;

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
            "The column holding each row's conversation id: conversations are replayed \
             turn by turn (rows in file order) with the server's answers as history, and \
             --num-prompts counts conversations",
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
    options.extend(ThinkTime::options(Some("file")));
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests): the
/// sampling parameters and the format override.
pub fn parse_options(
    pairs: Vec<(String, String)>,
) -> Result<(Params, Option<Format>, ThinkTime), PluginError> {
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
    let think = ThinkTime::read(&mut reader)?;
    if think != ThinkTime::None && columns.session.is_none() {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: think-time needs conversations (session-column, --file-session-column)"
        )));
    }
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
        think,
    ))
}

/// The request source: single requests, or conversations with a session column.
pub enum FileDataset {
    Single(Sampler),
    Turns(MultiTurn),
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
        // Only with a session column do requests carry sessions; otherwise the host runs
        // an ordinary run.
        .multi_turn()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let (params, format, think) = parse_options(config.options)?;
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
        let seed = host::run_seed();
        let n = config.num_requests as usize;
        if params.columns.session.is_some() {
            let conversations = turns::group(items);
            host::log_info(&format!(
                "{NAME}: {} conversations in {path}",
                conversations.len()
            ));
            return Ok(FileDataset::Turns(MultiTurn::new(
                conversations,
                seed,
                n,
                &params,
                think,
            )));
        }
        Ok(FileDataset::Single(Sampler::new(
            items, seed, n, params, &path,
        )?))
    }

    fn size_hint(&self) -> Option<u32> {
        let total = match self {
            FileDataset::Single(s) => s.total(),
            FileDataset::Turns(t) => t.total(),
        };
        u32::try_from(total).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        match self {
            FileDataset::Single(s) => s.next_batch(&HostTokenizer, max as usize),
            FileDataset::Turns(t) => t.next_batch(&HostTokenizer, max as usize),
        }
    }

    fn next_turn(&mut self, turn: TurnResult) -> Result<Option<RequestSpec>, PluginError> {
        match self {
            FileDataset::Turns(t) => t.next_turn(&HostTokenizer, turn),
            FileDataset::Single(_) => Ok(None),
        }
    }
}

bench_sdk::export_dataset!(FileDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_map_columns() {
        let (params, format, think) = parse_options(vec![]).unwrap();
        assert_eq!(params, Params::default());
        assert_eq!((format, think), (None, ThinkTime::None));
        let (params, format, think) = parse_options(opts(&[
            ("prompt-column", "question"),
            ("output-len-column", "n"),
            ("send-time-column", "t"),
            ("session-column", "conv"),
            ("output-len", "12"),
            ("chat-template", "true"),
            ("format", "parquet"),
            ("disable-shuffle", "true"),
            ("think-time", "2"),
        ]))
        .unwrap();
        assert_eq!(format, Some(Format::Parquet));
        assert_eq!(think, ThinkTime::Fixed(2.0));
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
            (
                opts(&[("think-time", "1")]),
                "think-time needs conversations",
            ),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("expected {needle:?}, got {other:?}"),
            }
        }
    }
}
