//! The runs a report shows, and the parameters that differ between them.

use serde_json::{Map, Value};

use crate::plot::PALETTE;
use crate::results::RequestTimes;

/// How many result colours there are (the charts' palette); results past it reuse them.
pub(super) const PALETTE_SIZE: usize = PALETTE.len();

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

/// The parameters a sweep merged into a result: the keys after `run_number` (the serve
/// then the bench parameters, as vLLM's `sweep serve` appends them), with their values.
fn swept(result: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    result
        .iter()
        .skip_while(|(k, _)| *k != "run_number")
        .skip(1)
}

/// The load settings: the parameters of a sweep that vary along its curves.
pub(super) const LOAD_SETTINGS: [&str; 4] = [
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
