//! Reading result files back: bench's and vLLM's `bench serve` result JSON, one document
//! per file or several (one per line, as `--append-result` writes them), and the
//! per-request lists that `--save-detailed` keeps (`start_times`, `ttfts`, `itls`,
//! `latencies`, `input_lens`, `output_lens`, `errors`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Every result document in the file at `path`: one JSON document, or several one after
/// another (an appended file). Each must be a JSON object.
pub fn read(path: &Path) -> Result<Vec<serde_json::Map<String, Value>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut docs = Vec::new();
    for (i, doc) in serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .enumerate()
    {
        let doc =
            doc.with_context(|| format!("{}: result {} is not valid JSON", path.display(), i + 1))?;
        let Value::Object(map) = doc else {
            bail!("{}: result {} is not a JSON object", path.display(), i + 1);
        };
        docs.push(map);
    }
    if docs.is_empty() {
        bail!("{}: no result in the file", path.display());
    }
    Ok(docs)
}

/// The `--save-detailed` lists of a result, one entry per request in workload order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Detailed {
    /// When each request was sent, on the sender's clock (vLLM's `time.perf_counter()`).
    pub start_times: Vec<f64>,
    pub ttfts: Vec<f64>,
    pub itls: Vec<Vec<f64>>,
    /// Send to last chunk; absent from vLLM's files, where it is `ttft + sum(itl)`.
    pub latencies: Option<Vec<f64>>,
    pub input_lens: Vec<u64>,
    pub output_lens: Vec<u64>,
    /// The error of each request, `""` when it succeeded.
    pub errors: Vec<String>,
}

impl Detailed {
    /// Request `i`'s latency: its `latencies` entry, or where the file has none (vLLM's)
    /// its TTFT plus its gaps, as vLLM's `serve` rebuilds it for the timeline.
    pub fn latency(&self, i: usize) -> f64 {
        match &self.latencies {
            Some(l) => l[i],
            None => self.ttfts[i] + self.itls[i].iter().sum::<f64>(),
        }
    }
}

/// A result's per-request lists, `None` when it was not saved with `--save-detailed`
/// (no `ttfts`, `itls` or `start_times`). The lists present must be of one length; where
/// `input_lens`, `output_lens` or `errors` are missing they read as zeros and no errors.
pub fn detailed(result: &Value) -> Result<Option<Detailed>> {
    let (Some(ttfts), Some(itls), Some(start_times)) = (
        result.get("ttfts"),
        result.get("itls"),
        result.get("start_times"),
    ) else {
        return Ok(None);
    };
    let ttfts = floats("ttfts", ttfts)?;
    let n = ttfts.len();
    let itls = list("itls", itls)?
        .iter()
        .map(|v| floats("itls", v))
        .collect::<Result<Vec<_>>>()?;
    let start_times = floats("start_times", start_times)?;
    let latencies = result
        .get("latencies")
        .map(|v| floats("latencies", v))
        .transpose()?;
    let counts = |key: &str| -> Result<Vec<u64>> {
        match result.get(key) {
            None => Ok(vec![0; n]),
            Some(v) => list(key, v)?
                .iter()
                .map(|x| {
                    x.as_f64()
                        .map(|f| f.max(0.0) as u64)
                        .with_context(|| format!("{key}: {x} is not a number"))
                })
                .collect(),
        }
    };
    let input_lens = counts("input_lens")?;
    let output_lens = counts("output_lens")?;
    let errors = match result.get("errors") {
        None => vec![String::new(); n],
        Some(v) => list("errors", v)?
            .iter()
            .map(|e| e.as_str().unwrap_or_default().to_string())
            .collect(),
    };
    let lengths = [
        ("itls", itls.len()),
        ("start_times", start_times.len()),
        ("latencies", latencies.as_ref().map_or(n, Vec::len)),
        ("input_lens", input_lens.len()),
        ("output_lens", output_lens.len()),
        ("errors", errors.len()),
    ];
    if let Some((key, len)) = lengths.iter().find(|(_, len)| *len != n) {
        bail!("{key} has {len} entries but ttfts has {n}: the per-request lists disagree");
    }
    Ok(Some(Detailed {
        start_times,
        ttfts,
        itls,
        latencies,
        input_lens,
        output_lens,
        errors,
    }))
}

/// One request's times, in seconds, as the charts read them: the same whether they come
/// from a run's records or from a result file's `--save-detailed` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTimes {
    /// When the request was sent, seconds after the first request of the run was sent.
    pub start: f64,
    /// Time to the first token; `None` for a failed request.
    pub ttft: Option<f64>,
    /// The gaps between successive output chunks (vLLM's `itl`).
    pub itl: Vec<f64>,
    /// Send to the last output chunk (vLLM's `latency`).
    pub latency: f64,
    /// Whether the request succeeded.
    pub ok: bool,
    /// Prompt tokens (vLLM's `input_lens`).
    pub input_len: u32,
    /// Output tokens as the metrics counted them (vLLM's `output_lens`; 0 when failed).
    pub output_len: u32,
}

/// The charts' view of a detailed result ([`detailed`]), `None` when it is not detailed.
/// Start times are made relative to the first request's; a request whose `errors` entry
/// is not empty is failed.
pub fn request_times(result: &Value) -> Result<Option<Vec<RequestTimes>>> {
    let Some(d) = detailed(result)? else {
        return Ok(None);
    };
    let t0 = d.start_times.iter().copied().fold(f64::INFINITY, f64::min);
    let times = (0..d.ttfts.len())
        .map(|i| {
            let ok = d.errors[i].is_empty();
            RequestTimes {
                start: d.start_times[i] - t0,
                ttft: ok.then_some(d.ttfts[i]),
                itl: d.itls[i].clone(),
                latency: d.latency(i),
                ok,
                input_len: u32::try_from(d.input_lens[i]).unwrap_or(u32::MAX),
                output_len: u32::try_from(d.output_lens[i]).unwrap_or(u32::MAX),
            }
        })
        .collect();
    Ok(Some(times))
}

fn list<'a>(key: &str, v: &'a Value) -> Result<&'a Vec<Value>> {
    v.as_array().with_context(|| format!("{key} is not a list"))
}

/// A list of numbers; `"inf"`, `"-inf"` and `"nan"` as Python's `json` may have written
/// them as strings, and `null`, read as NaN.
fn floats(key: &str, v: &Value) -> Result<Vec<f64>> {
    list(key, v)?
        .iter()
        .map(|x| number(x).with_context(|| format!("{key}: {x} is not a number")))
        .collect()
}

/// A JSON value as a number: a number, `null` (NaN), or the strings `inf`, `-inf`,
/// `nan` (how vLLM's results write them; see `pyjson`).
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Null => Some(f64::NAN),
        Value::String(s) => match s.as_str() {
            "inf" | "Infinity" => Some(f64::INFINITY),
            "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
            "nan" | "NaN" => Some(f64::NAN),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_summary_result_is_not_detailed() {
        let r = json!({"completed": 3, "mean_ttft_ms": 1.0});
        assert_eq!(request_times(&r).unwrap(), None);
    }

    #[test]
    fn detailed_lists_become_request_times_relative_to_the_first_send() {
        let r = json!({
            "start_times": [100.5, 100.0, 101.0],
            "ttfts": [0.1, 0.2, 0.0],
            "itls": [[0.01, 0.02], [0.03], []],
            "input_lens": [10, 20, 30],
            "output_lens": [3, 2, 0],
            "errors": ["", "", "http-500: boom"],
        });
        let t = request_times(&r).unwrap().unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[1].start, 0.0);
        assert_eq!(t[0].start, 0.5);
        // No `latencies` (vLLM's files): ttft plus the gaps.
        assert!((t[0].latency - 0.13).abs() < 1e-12);
        assert_eq!(t[0].ttft, Some(0.1));
        assert!(!t[2].ok && t[2].ttft.is_none());
        assert_eq!((t[1].input_len, t[1].output_len), (20, 2));
    }

    #[test]
    fn lists_of_different_lengths_are_an_error_naming_the_list() {
        let r = json!({"start_times": [0.0], "ttfts": [0.1, 0.2], "itls": [[], []]});
        let e = request_times(&r).unwrap_err().to_string();
        assert!(e.contains("start_times has 1 entries"), "{e}");
    }

    #[test]
    fn appended_files_hold_one_result_per_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "{\"a\": 1}\n{\"a\": 2}").unwrap();
        let docs = read(&path).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["a"], json!(2));
        std::fs::write(&path, "[1]").unwrap();
        let e = format!("{:#}", read(&path).unwrap_err());
        assert!(
            e.contains("r.json") && e.contains("not a JSON object"),
            "{e}"
        );
    }
}
