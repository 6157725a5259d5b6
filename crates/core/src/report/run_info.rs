//! What the reports say about a run besides its metrics ([`RunInfo`]), and the formats of
//! its times as vLLM writes them.

use chrono::{DateTime, Local, NaiveDateTime, Timelike};
use serde_json::{Map, Value};

use crate::client::cancellation::Cancellation;
use crate::schedule::{RampUp, RampUpStrategy, RpsChange};

/// vLLM's date format for the result's `date` key and file name.
pub const DATE_FORMAT: &str = "%Y%m%d-%H%M%S";

/// What the command line knows about a run, for the reports (vLLM's `args` and the
/// values its `main` adds to the result). The benchmark duration lives in
/// [`crate::metrics::Metrics`], which needs it for the throughputs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunInfo {
    /// When the run finished (vLLM takes `datetime.now()` after the benchmark); written
    /// as `date` and into the default file name with [`DATE_FORMAT`].
    pub date: DateTime<Local>,
    /// When the benchmark clock started: `rps_change_events` offsets count from here.
    pub started_at: DateTime<Local>,
    /// `--backend`, written as both `backend` and `endpoint_type`.
    pub backend: String,
    /// `--label`; `None` writes `null` and names files after the backend.
    pub label: Option<String>,
    pub model_id: String,
    /// `None` when no tokenizer was loaded.
    pub tokenizer_id: Option<String>,
    pub num_prompts: usize,
    /// Requests per second; `f64::INFINITY` for "all at once" (serialised `"inf"`).
    #[serde(with = "infinite_as_inf")]
    pub request_rate: f64,
    pub burstiness: f64,
    pub max_concurrency: Option<usize>,
    pub ramp_up: Option<RampUp>,
    /// The whole request rates a ramp-up passed through (from the schedule).
    pub rps_change_events: Vec<RpsChange>,
    /// `--metadata KEY=VALUE` pairs (vLLM splits at the first `=` and trims both
    /// sides, and the values are strings), and the scenario file's record (`--config`),
    /// written as top-level keys of the result.
    pub metadata: Vec<(String, Value)>,
    /// The parsed command line as vLLM's `vars(args)` (snake_case keys, secrets such as
    /// headers redacted, infinite floats as `"inf"`), for the `.pytorch.json` records.
    pub args: Map<String, Value>,
    /// `--request-cancellation-rate` and `-delay`, when given.
    #[serde(default)]
    pub cancellation: Option<Cancellation>,
    /// A run with several `--base-url`s: the URLs in their order (the records' endpoint
    /// indices) and how requests were spread; `None` with one.
    #[serde(default)]
    pub endpoints: Option<EndpointsInfo>,
    /// `--duration`: the run sent for this many seconds, its workload again and again;
    /// `None`: it sent its workload once.
    #[serde(default)]
    pub duration_limit_s: Option<f64>,
}

/// The endpoints of a run with several servers.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EndpointsInfo {
    pub urls: Vec<String>,
    /// `--url-selection-strategy` (`round-robin`, `least-outstanding`).
    pub routing: String,
}

impl RunInfo {
    /// `date` as vLLM writes it.
    pub fn date_string(&self) -> String {
        self.date.format(DATE_FORMAT).to_string()
    }
}

/// A rate that may be infinite, serialised as a number or `"inf"` (JSON has no infinity,
/// and serde_json would write `null`).
mod infinite_as_inf {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        match x.is_infinite() {
            true => s.serialize_str("inf"),
            false => s.serialize_f64(*x),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Rate {
            Number(f64),
            Text(String),
        }
        match Rate::deserialize(d)? {
            Rate::Number(x) => Ok(x),
            Rate::Text(t) if t == "inf" => Ok(f64::INFINITY),
            Rate::Text(t) => Err(serde::de::Error::custom(format!(
                "{t:?} is not a rate (a number or \"inf\")"
            ))),
        }
    }
}

/// vLLM's name for a ramp-up strategy.
pub fn strategy_name(strategy: RampUpStrategy) -> &'static str {
    match strategy {
        RampUpStrategy::Linear => "linear",
        RampUpStrategy::Exponential => "exponential",
    }
}

/// The wall-clock stamp of an rps change, `started_at + offset`, as Python's
/// `datetime.isoformat()`.
pub(crate) fn rps_change_timestamp(started_at: DateTime<Local>, offset: f64) -> String {
    let delta = chrono::TimeDelta::microseconds((offset * 1e6).round() as i64);
    python_isoformat((started_at + delta).naive_local())
}

/// Python's `datetime.isoformat()` of a naive time: microseconds only when non-zero.
fn python_isoformat(time: NaiveDateTime) -> String {
    let seconds = time.format("%Y-%m-%dT%H:%M:%S").to_string();
    match time.nanosecond() / 1000 % 1_000_000 {
        0 => seconds,
        micros => format!("{seconds}.{micros:06}"),
    }
}

#[cfg(test)]
mod helper_tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone};

    #[test]
    fn isoformat_omits_zero_microseconds_like_python() {
        let day = NaiveDate::from_ymd_opt(2025, 3, 4).unwrap();
        let whole = day.and_hms_opt(5, 6, 7).unwrap();
        assert_eq!(python_isoformat(whole), "2025-03-04T05:06:07");
        let fractional = day.and_hms_micro_opt(5, 6, 7, 890).unwrap();
        assert_eq!(python_isoformat(fractional), "2025-03-04T05:06:07.000890");
    }

    #[test]
    fn rps_changes_are_stamped_from_the_start_time() {
        let start = Local.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).unwrap();
        assert_eq!(rps_change_timestamp(start, 0.0), "2025-03-04T05:06:07");
        assert_eq!(
            rps_change_timestamp(start, 61.25),
            "2025-03-04T05:07:08.250000"
        );
    }
}
