//! Result files and sweep directories read for the report.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use super::run::{ReportRun, parameters};

/// The result files of a sweep's output directory (vLLM's `sweep serve` layout: one
/// `run=N.json` per run of each combination, under the combination's directory; not the
/// `run=N.pytorch.json` beside it).
fn is_sweep_run(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("run=")?.strip_suffix(".json"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The sweep run files under `dir`, at any depth, in natural path order.
fn sweep_runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("reading {}", dir.display()))?
                .path();
            if path.is_dir() {
                pending.push(path);
            } else if is_sweep_run(&path) {
                found.push(path);
            }
        }
    }
    found.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(found)
}

/// Text in natural order: runs of digits compare as numbers, so that a sweep's
/// `max_concurrency=4` comes before `max_concurrency=16` and `run=2` before `run=10`.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (n, m) = (digits(a), digits(b));
                let trim = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
                let (x, y) = (&a[trim(&a[..n])..n], &b[trim(&b[..m])..m]);
                let order = x.len().cmp(&y.len()).then_with(|| x.cmp(y));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (&a[n..], &b[m..]);
            }
            (Some(x), Some(y)) if x != y => return x.cmp(y),
            _ => (a, b) = (&a[1..], &b[1..]),
        }
    }
}

/// The results at `path`: a result file (bench's or vLLM's `--save-result` JSON; an
/// appended file holds several), or a sweep's output directory (every `run=N.json` under
/// it). Each is named by its label, else by its file; in a sweep, by the parameters that
/// tell its runs apart. A file that cannot be read, is not JSON, or is not a
/// serving benchmark result is an error naming it.
pub fn load(path: &Path) -> Result<Vec<ReportRun>> {
    if path.is_dir() {
        let files = sweep_runs(path)?;
        if files.is_empty() {
            bail!(
                "{}: no sweep results (run=N.json files) under this directory",
                path.display()
            );
        }
        let mut runs = Vec::new();
        for file in files {
            let name = file
                .strip_prefix(path)
                .unwrap_or(&file)
                .with_extension("")
                .display()
                .to_string();
            runs.extend(load_file(&file, &name)?);
        }
        // Named by the parameters that tell the runs apart rather than by their
        // folders' long names, with the run's number when combinations ran more than once.
        let params = parameters(&runs);
        let repeated = runs
            .iter()
            .any(|r| r.result.get("run_number").and_then(Value::as_u64) > Some(0));
        for run in &mut runs {
            if label(&run.result).is_some() || params.is_empty() {
                continue;
            }
            let combination = params
                .iter()
                .map(|k| format!("{k}={}", run.result.get(k).map_or("-".into(), show)))
                .collect::<Vec<_>>()
                .join(", ");
            run.name = match run.result.get("run_number") {
                Some(n) if repeated => format!("{combination} #{n}"),
                _ => combination,
            };
        }
        return Ok(runs);
    }
    let stem = path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    load_file(path, &stem)
}

/// The results in the file at `path`, named `name` (`name #k` in an appended file)
/// unless they have a label.
fn load_file(path: &Path, name: &str) -> Result<Vec<ReportRun>> {
    let docs = match record_file_result(path)? {
        Some(result) => vec![result],
        None => crate::results::read(path)?,
    };
    let several = docs.len() > 1;
    docs.into_iter()
        .enumerate()
        .map(|(k, result)| {
            let at = || match several {
                true => format!("{}: result {}", path.display(), k + 1),
                false => path.display().to_string(),
            };
            if !result.contains_key("completed") {
                bail!(
                    "{}: not a serving benchmark result (`bench serve`, `vllm bench serve`): it has no `completed` key",
                    at()
                );
            }
            let result = Value::Object(result);
            let times = crate::results::request_times(&result).with_context(at)?;
            let Value::Object(result) = result else {
                unreachable!("built as an object above")
            };
            let name = match label(&result) {
                Some(label) => label.to_string(),
                None if several => format!("{name} #{}", k + 1),
                None => name.to_string(),
            };
            Ok(ReportRun {
                name,
                source: at(),
                result,
                times,
            })
        })
        .collect()
}

/// The result in a `--record-file` (`bench serve`): what `bench merge` makes of it, with
/// the per-request lists, marked interrupted when the run did not end; `None` when the
/// file is not a record file.
fn record_file_result(path: &Path) -> Result<Option<Map<String, Value>>> {
    let Some(doc) = bench_core::shard::record_file::read(path)? else {
        return Ok(None);
    };
    let merged = bench_core::shard::merge::merge(vec![(path.display().to_string(), doc)])?;
    let mut result =
        bench_core::report::result_doc(&merged.metrics, &merged.side, &merged.run, true);
    if let Some(interruption) = &merged.interrupted {
        interruption.mark(&mut result);
    }
    match serde_json::to_value(&result).context("the record file's result as JSON")? {
        Value::Object(result) => Ok(Some(result)),
        _ => bail!("a result did not serialise to an object"),
    }
}

/// A result's `--label`, unless empty.
fn label(result: &Map<String, Value>) -> Option<&str> {
    result
        .get("label")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
}

/// A JSON scalar as text (strings without quotes).
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_paths_sort_as_numbers() {
        let mut paths = vec![
            "c=16/run=10.json",
            "c=4/run=2.json",
            "c=16/run=2.json",
            "c=04/run=1.json",
            "b",
        ];
        paths.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            paths,
            [
                "b",
                "c=04/run=1.json",
                "c=4/run=2.json",
                "c=16/run=2.json",
                "c=16/run=10.json"
            ]
        );
    }

    #[test]
    fn a_sweeps_run_files_are_its_results() {
        for (name, is_run) in [
            ("run=0.json", true),
            ("run=12.json", true),
            ("run=0.pytorch.json", false),
            ("run=0.failure.json", false),
            ("run=.json", false),
            ("summary.json", false),
            ("warmup.json", false),
        ] {
            assert_eq!(is_sweep_run(Path::new(name)), is_run, "{name}");
        }
    }
}
