//! `bench report`: result files in, one self-contained HTML page out. The page loads
//! nothing: its style sheet and script are inline, its charts inline SVG, and its
//! Content-Security-Policy forbids every fetch, so it opens the same offline, from a mail
//! attachment or a CI artifact. Every text a result file carries is escaped (a result file
//! is untrusted input). The page is complete without JavaScript; the script only adds
//! one checkbox per result to hide or show its column and charts.

mod charts;
mod html;
mod summary;

use std::cmp::Ordering;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use crate::plot::{PALETTE, RequestTimes};
use html::escape;

/// How many result colours there are (the charts' palette); results past it reuse them.
const PALETTE_SIZE: usize = PALETTE.len();

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The page may load nothing and run only its own inline script: a result file cannot
/// make it fetch anything, even if escaping were ever to miss a place.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// One result file as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRun {
    /// Its column title: the result's label, else its file's name (untrusted text).
    pub name: String,
    /// Where it was read from, shown under the name.
    pub source: String,
    /// The result's keys and values, in the file's order.
    pub result: Map<String, Value>,
    /// Each request's times, when the result was saved with `--save-detailed`
    /// ([`crate::results::request_times`]).
    pub times: Option<Vec<RequestTimes>>,
}

/// What the report shows: one or more results, side by side in that order (the first
/// is the baseline the others' differences are taken from).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub runs: Vec<ReportRun>,
    /// The timeline's ITL bands, ascending milliseconds (vLLM's
    /// `--timeline-itl-thresholds`, 25 and 50 by default).
    pub itl_thresholds_ms: Vec<f64>,
}

/// The result files of a sweep's output directory (vLLM's `sweep serve` layout: one
/// `run=N.json` per run of each combination, under the combination's directory; not the
/// `run=N.pytorch.json` beside it).
fn is_sweep_run(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("run=")?.strip_suffix(".json"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The sweep run files under `dir`, at any depth, in path order.
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
/// it). Each is named by its label, else by its file (and, in a sweep, its
/// combination's directory). A file that cannot be read, is not JSON, or is not a
/// benchmark result is an error naming it.
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
    let docs = crate::results::read(path)?;
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
                    "{}: not a benchmark result (it has no `completed` key)",
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

/// A result's `--label`, unless empty.
fn label(result: &Map<String, Value>) -> Option<&str> {
    result
        .get("label")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
}

/// The parameters a sweep merged into a result: the keys after `run_number` (the serve
/// then the bench parameters, as vLLM's `sweep serve` appends them), with their values.
fn swept(result: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    result
        .iter()
        .skip_while(|(k, _)| *k != "run_number")
        .skip(1)
}

/// A JSON scalar as text (strings without quotes).
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The run settings whose values tell the runs of a sweep apart, in this order of
/// preference as the curves' x axis.
const LOAD_SETTINGS: [&str; 4] = [
    "request_rate",
    "max_concurrency",
    "num_prompts",
    "burstiness",
];

/// The parameters that differ between the runs: the keys a sweep adds after
/// `run_number` (its serve and bench parameters, as vLLM's `sweep serve` appends them),
/// then the load settings; each kept when its values are not all the same. Empty for a
/// single run.
pub fn parameters(runs: &[ReportRun]) -> Vec<String> {
    let mut candidates: Vec<&str> = Vec::new();
    for run in runs {
        let swept = swept(&run.result).map(|(k, _)| k.as_str());
        for key in swept.chain(LOAD_SETTINGS) {
            if !candidates.contains(&key) {
                candidates.push(key);
            }
        }
    }
    candidates
        .into_iter()
        .filter(|key| {
            let mut values = runs.iter().map(|r| r.result.get(*key));
            let first = values.next().flatten();
            values.any(|v| v != first)
        })
        .map(String::from)
        .collect()
}

/// The report's HTML page.
pub fn render(report: &Report) -> Result<String> {
    let runs = &report.runs;
    let params = parameters(runs);
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let sources: Vec<&str> = runs.iter().map(|r| r.source.as_str()).collect();
    let results: Vec<&Map<String, Value>> = runs.iter().map(|r| &r.result).collect();
    let detailed: Vec<(usize, &ReportRun, &[RequestTimes])> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r, r.times.as_deref()?)))
        .collect();

    let title = match runs.as_slice() {
        [one] => format!("bench report: {}", one.name),
        _ => format!("bench report: {} results", runs.len()),
    };
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}",
        escape(&title)
    );
    for i in 0..PALETTE_SIZE {
        let _ = writeln!(page, ".c{i} {{ background: {}; }}", charts::color(i).hex());
    }
    page.push_str("</style></head><body><main>");
    let _ = write!(page, "<header><h1>{}</h1><p>", escape(&title));
    match runs.as_slice() {
        [one] => page.push_str(&escape(&one.source)),
        _ if params.is_empty() => page.push_str("Side by side; differences are from the first."),
        _ => {
            let _ = write!(
                page,
                "A sweep over {}; differences are from the first.",
                escape(&params.join(", "))
            );
        }
    }
    page.push_str("</p><div id=\"run-toggles\"></div></header>");

    page.push_str("<section id=\"summary\"><h2>Summary</h2>");
    page.push_str(&summary::table(&names, &sources, &results, &params));
    page.push_str("</section>");

    let summary_only: Vec<&str> = runs
        .iter()
        .filter(|r| r.times.is_none())
        .map(|r| r.name.as_str())
        .collect();
    if !summary_only.is_empty() {
        let _ = write!(
            page,
            "<p class=\"note\" id=\"not-detailed\">Saved without per-request times: {}. \
             The latency distributions, the timeline and throughput over time need them: \
             run <code>bench serve</code> with <code>--save-result --save-detailed</code>.</p>",
            escape(&summary_only.join(", "))
        );
    }
    if !detailed.is_empty() {
        let figures = charts::distributions(&detailed)?;
        section(
            &mut page,
            "distributions",
            "Latency distributions",
            &figures,
        );
        let figures = charts::throughput(&detailed)?;
        section(
            &mut page,
            "throughput-over-time",
            "Throughput over time",
            &figures,
        );
    }
    if runs.len() > 1 && !params.is_empty() {
        // The load settings vary along a curve; the other parameters make the curves
        // (not the sweep's own `_`-names of its parameter sets, which vary with them).
        let curve_by: Vec<String> = params
            .iter()
            .filter(|p| !LOAD_SETTINGS.contains(&p.as_str()) && !p.starts_with('_'))
            .cloned()
            .collect();
        let mut figures = charts::curves(runs, &curve_by)?;
        figures.extend(charts::pareto(runs)?);
        section(&mut page, "sweep", "Sweep", &figures);
    }
    if !detailed.is_empty() {
        let figures = charts::timelines(&detailed, &report.itl_thresholds_ms)?;
        section(&mut page, "timeline", "Timeline", &figures);
    }

    let _ = writeln!(
        page,
        "<footer>Made by bench {} from {} result file{}.</footer></main>\
         <script>{SCRIPT}</script></body></html>",
        env!("CARGO_PKG_VERSION"),
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    Ok(page)
}

/// A section of charts.
fn section(page: &mut String, id: &str, title: &str, figures: &[charts::Figure]) {
    if figures.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<section id=\"{id}\"><h2>{}</h2><div class=\"charts\">",
        escape(title)
    );
    for figure in figures {
        figure.html(page);
    }
    page.push_str("</div></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(name: &str, result: Value) -> ReportRun {
        ReportRun {
            name: name.into(),
            source: format!("{name}.json"),
            result: result.as_object().unwrap().clone(),
            times: None,
        }
    }

    #[test]
    fn parameters_are_the_sweeps_keys_then_the_load_settings_that_differ() {
        let runs = [
            run(
                "a",
                json!({"request_rate": 1.0, "max_concurrency": 8, "run_number": 0, "max_num_seqs": 4, "x": 1}),
            ),
            run(
                "b",
                json!({"request_rate": 2.0, "max_concurrency": 8, "run_number": 0, "max_num_seqs": 8, "x": 1}),
            ),
        ];
        assert_eq!(parameters(&runs), ["max_num_seqs", "request_rate"]);
        assert!(parameters(&runs[..1]).is_empty());
        let plain = [
            run(
                "a",
                json!({"request_rate": 1.0, "max_concurrency": null, "completed": 3}),
            ),
            run(
                "b",
                json!({"request_rate": 1.0, "max_concurrency": 4, "completed": 4}),
            ),
        ];
        assert_eq!(parameters(&plain), ["max_concurrency"]);
    }

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

    #[test]
    fn the_page_is_self_contained_and_escapes_result_text() {
        let page = render(&Report {
            itl_thresholds_ms: vec![25.0, 50.0],
            runs: vec![
                run(
                    "<script>alert(1)</script>",
                    json!({"model_id": "m\"><img src=x>", "completed": 2}),
                ),
                run("b", json!({"model_id": "m", "completed": 3})),
            ],
        })
        .unwrap();
        assert_eq!(
            page.matches("<script>").count(),
            1,
            "only the page's own script"
        );
        assert!(!page.contains("<img"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        for attr in [
            "src=\"http",
            "href=\"http",
            "src='http",
            "href='http",
            "url(",
        ] {
            assert!(!page.contains(attr), "{attr}");
        }
        assert!(page.contains("default-src 'none'"));
    }
}
