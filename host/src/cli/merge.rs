//! `bench merge`: the shards of one run (`bench serve --shard I/N`) into one result, every
//! metric recomputed from all their records (`bench_core::shard`); also a run's
//! `--record-file`, one shard of itself.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::console::Console;
use crate::benchmark::Outcome;
use crate::observer::{Event, Observer};
use crate::report::{self, SaveOptions};
use crate::shard::ShardDoc;
use crate::shard::merge::{self, Merged};

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' records: the files `--shard-output` wrote, or any text holding
    /// `bench-shard-result: ` lines (`kubectl logs` of the shards). Every shard of the run
    /// once. Or the file of a run's `--record-file`: its result, also when the run was
    /// killed before it ended (then of the requests it had finished, marked interrupted).
    #[arg(required = true, value_name = "SHARD_RESULTS")]
    pub inputs: Vec<PathBuf>,

    /// Where to save the merged result (vLLM's result JSON, with the same keys as a run of
    /// one process, plus `shards`: each shard's client).
    #[arg(short, long, value_name = "RESULT")]
    pub output: PathBuf,

    /// Also save the per-request lists (vLLM's --save-detailed).
    #[arg(long)]
    pub save_detailed: bool,
}

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let merged = merge::merge(read_inputs(&args.inputs)?)?;
    let save = SaveOptions {
        save_result: true,
        save_detailed: args.save_detailed,
        append_result: false,
        result_dir: None,
        result_filename: Some(args.output.display().to_string()),
        pytorch_format: true,
        interrupted: None,
        run_suffix: None,
    };
    let mut console = Console::new(false, std::time::Duration::ZERO);
    let outcome = show_and_save(merged, &save, &mut console)?;
    Ok(super::console::exit_code(&outcome))
}

/// A merged run as a run of one process ends: its results shown, its result saved as
/// `save` says (marked interrupted when a shard was).
pub(super) fn show_and_save(
    merged: Merged,
    save: &SaveOptions,
    observer: &mut dyn Observer,
) -> Result<Outcome> {
    let Merged {
        metrics,
        side,
        run,
        requests,
        interrupted,
        shutdown_grace,
    } = merged;
    for w in &metrics.warnings {
        observer.event(Event::Warning(w));
    }
    for n in &metrics.notes {
        observer.event(Event::Note(n));
    }
    observer.event(Event::Results {
        metrics: &metrics,
        side: &side,
        run: &run,
    });
    if let Some(interruption) = &interrupted {
        observer.event(Event::Interrupted {
            interruption,
            requests,
            grace: shutdown_grace,
        });
    }
    let save = SaveOptions {
        interrupted: interrupted.clone(),
        ..save.clone()
    };
    let saved = report::save(&metrics, &side, &run, &save)?;
    if let Some(path) = &saved {
        observer.event(Event::Saved {
            path,
            interrupted: interrupted.is_some(),
        });
    }
    Ok(Outcome {
        metrics,
        side,
        run,
        requests,
        interrupted,
        signal: None,
        saved,
        shard: None,
    })
}

/// Every shard document in `paths` (each a shard file, a log holding several, or a
/// `--record-file`), each with the file it came from.
pub(super) fn read_inputs(paths: &[PathBuf]) -> Result<Vec<(String, ShardDoc)>> {
    let mut docs = Vec::new();
    for path in paths {
        let in_file = match crate::shard::record_file::read(path)? {
            Some(doc) => vec![doc],
            None => ShardDoc::read_all(path)?,
        };
        for doc in in_file {
            docs.push((path.display().to_string(), doc));
        }
    }
    Ok(docs)
}
