//! The results of `bench throughput` and `bench latency` ([`ThroughputResult`],
//! [`LatencyResult`]): their figures, the keys of their `--output-json` files, and their
//! console lines, vLLM's own first (`throughput.py` and `latency.py` print them so), then
//! bench's: the engine, the decode speed, the GPU.

use std::fmt::Write;

use serde_json::{Map, Value, json};

use crate::engine::ModelInfo;
use crate::gpu_telemetry::{GpuReport, TokenTotals};
use crate::pyjson::float_repr;
use crate::record::RequestRecord;

/// What the engine-side of a result says about the native engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSummary {
    pub device: String,
    pub weights: String,
    pub weight_bytes: u64,
    pub parameters: u64,
}

impl From<&ModelInfo> for EngineSummary {
    fn from(info: &ModelInfo) -> Self {
        EngineSummary {
            device: info.device.to_string(),
            weights: info.weights.clone(),
            weight_bytes: info.weight_bytes,
            parameters: info.parameters,
        }
    }
}

/// `bench throughput`'s result: vLLM's figures, then bench's.
#[derive(Debug, Clone)]
pub struct ThroughputResult {
    pub backend: String,
    pub model: String,
    /// Seconds from the release of the workload to its last token (vLLM: around
    /// `llm.generate`).
    pub elapsed_time: f64,
    /// Prompts in the workload (vLLM's `len(requests)`, whatever `--n`).
    pub num_requests: usize,
    /// Requests that failed (a server's errors): their tokens are not counted.
    pub failed_requests: usize,
    pub total_prompt_tokens: u64,
    pub total_output_tokens: u64,
    pub concurrency: Concurrency,
    pub engine: Option<EngineSummary>,
    pub gpu: Option<GpuReport>,
}

/// How many requests were in flight at once, as `serve` reports it: bench's keys, so that
/// a `--max-concurrency` cap can be seen to hold.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Concurrency {
    /// The most successful requests in flight at one instant, from send to last token
    /// (`peak_concurrent_requests`; over every iteration for latency).
    pub peak_requests: usize,
    /// The most sequences the native engine ran in one batch, by its own count
    /// (`engine_peak_running_sequences`); `None` for a server.
    pub engine_peak_sequences: Option<usize>,
}

impl Concurrency {
    /// The concurrency of one run: its records, and the engine's own peak where the target
    /// is the native engine.
    pub(crate) fn of(
        records: &[RequestRecord],
        engine_peak_sequences: Option<usize>,
    ) -> Concurrency {
        let successful: Vec<&RequestRecord> = records.iter().filter(|r| r.succeeded()).collect();
        Concurrency {
            peak_requests: crate::metrics::timeline::peaks(&successful).peak_concurrent_requests,
            engine_peak_sequences,
        }
    }

    /// The larger of two runs' (latency's iterations).
    pub(crate) fn max(self, other: Concurrency) -> Concurrency {
        Concurrency {
            peak_requests: self.peak_requests.max(other.peak_requests),
            engine_peak_sequences: match (self.engine_peak_sequences, other.engine_peak_sequences) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }

    fn extend(&self, doc: &mut Map<String, Value>) {
        doc.insert("peak_concurrent_requests".into(), json!(self.peak_requests));
        if let Some(peak) = self.engine_peak_sequences {
            doc.insert("engine_peak_running_sequences".into(), json!(peak));
        }
    }
}

impl ThroughputResult {
    /// vLLM's `total_num_tokens`: prompt plus output tokens.
    pub fn total_num_tokens(&self) -> u64 {
        self.total_prompt_tokens + self.total_output_tokens
    }

    pub fn requests_per_second(&self) -> f64 {
        self.num_requests as f64 / self.elapsed_time
    }

    pub fn tokens_per_second(&self) -> f64 {
        self.total_num_tokens() as f64 / self.elapsed_time
    }

    pub fn output_tokens_per_second(&self) -> f64 {
        self.total_output_tokens as f64 / self.elapsed_time
    }

    /// The tokens the GPUs' energy per token divides.
    fn token_totals(&self) -> TokenTotals {
        TokenTotals {
            input: self.total_prompt_tokens,
            output: self.total_output_tokens,
        }
    }

    /// The result file: vLLM's five keys in its order, then bench's.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut doc = Map::new();
        doc.insert("elapsed_time".into(), json!(self.elapsed_time));
        doc.insert("num_requests".into(), json!(self.num_requests));
        doc.insert("total_num_tokens".into(), json!(self.total_num_tokens()));
        doc.insert(
            "requests_per_second".into(),
            json!(self.requests_per_second()),
        );
        doc.insert("tokens_per_second".into(), json!(self.tokens_per_second()));
        doc.insert(
            "output_tokens_per_second".into(),
            json!(self.output_tokens_per_second()),
        );
        doc.insert(
            "total_prompt_tokens".into(),
            json!(self.total_prompt_tokens),
        );
        doc.insert(
            "total_output_tokens".into(),
            json!(self.total_output_tokens),
        );
        doc.insert("failed_requests".into(), json!(self.failed_requests));
        doc.insert("backend".into(), json!(self.backend));
        doc.insert("model".into(), json!(self.model));
        self.concurrency.extend(&mut doc);
        extend_engine_and_gpu(
            &mut doc,
            self.engine.as_ref(),
            self.gpu.as_ref(),
            self.token_totals(),
        );
        doc
    }

    /// vLLM's `save_to_pytorch_benchmark_format` for throughput.
    pub(crate) fn pytorch_metrics(&self) -> (Vec<(&'static str, Value)>, Map<String, Value>) {
        let doc = self.to_json();
        let extra = ["elapsed_time", "num_requests", "total_num_tokens"]
            .iter()
            .map(|&k| (k.to_string(), doc[k].clone()))
            .collect();
        (
            vec![
                ("requests_per_second", json!([doc["requests_per_second"]])),
                ("tokens_per_second", json!([doc["tokens_per_second"]])),
            ],
            extra,
        )
    }
}

/// The percentiles vLLM's latency benchmark reports.
pub const LATENCY_PERCENTILES: [u32; 6] = [10, 25, 50, 75, 90, 99];

/// `bench latency`'s result.
#[derive(Debug, Clone)]
pub struct LatencyResult {
    pub backend: String,
    pub model: String,
    /// Seconds per measured iteration, in order.
    pub latencies: Vec<f64>,
    /// Requests per iteration (`--batch-size` times `--n`).
    pub batch_size: usize,
    /// Prompt and output tokens of one iteration.
    pub prompt_tokens_per_iter: u64,
    pub output_tokens_per_iter: u64,
    /// Over the measured iterations.
    pub concurrency: Concurrency,
    pub engine: Option<EngineSummary>,
    pub gpu: Option<GpuReport>,
}

impl LatencyResult {
    /// vLLM's `np.mean(latencies)`.
    pub fn avg_latency(&self) -> f64 {
        self.latencies.iter().sum::<f64>() / self.latencies.len() as f64
    }

    /// vLLM's `np.percentile(latencies, [10, 25, 50, 75, 90, 99])` (linear interpolation).
    pub fn percentiles(&self) -> Vec<(u32, f64)> {
        let mut sorted = self.latencies.clone();
        sorted.sort_by(f64::total_cmp);
        LATENCY_PERCENTILES
            .iter()
            .map(|&p| (p, numpy_percentile(&sorted, f64::from(p))))
            .collect()
    }

    /// Output tokens per second of the mean iteration: the decode speed of the batch.
    pub fn output_tokens_per_second(&self) -> f64 {
        self.output_tokens_per_iter as f64 / self.avg_latency()
    }

    /// The tokens of every measured iteration, which the GPUs' energy per token divides.
    fn token_totals(&self) -> TokenTotals {
        let iterations = self.latencies.len() as u64;
        TokenTotals {
            input: self.prompt_tokens_per_iter * iterations,
            output: self.output_tokens_per_iter * iterations,
        }
    }

    /// The result file: vLLM's three keys, then bench's.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut doc = Map::new();
        doc.insert("avg_latency".into(), json!(self.avg_latency()));
        doc.insert("latencies".into(), json!(self.latencies));
        let percentiles: Map<String, Value> = self
            .percentiles()
            .into_iter()
            .map(|(p, v)| (p.to_string(), json!(v)))
            .collect();
        doc.insert("percentiles".into(), Value::Object(percentiles));
        doc.insert("batch_size".into(), json!(self.batch_size));
        doc.insert(
            "prompt_tokens_per_iteration".into(),
            json!(self.prompt_tokens_per_iter),
        );
        doc.insert(
            "output_tokens_per_iteration".into(),
            json!(self.output_tokens_per_iter),
        );
        doc.insert(
            "output_tokens_per_second".into(),
            json!(self.output_tokens_per_second()),
        );
        doc.insert("backend".into(), json!(self.backend));
        doc.insert("model".into(), json!(self.model));
        self.concurrency.extend(&mut doc);
        extend_engine_and_gpu(
            &mut doc,
            self.engine.as_ref(),
            self.gpu.as_ref(),
            self.token_totals(),
        );
        doc
    }

    /// vLLM's `save_to_pytorch_benchmark_format` for latency.
    pub(crate) fn pytorch_metrics(&self) -> (Vec<(&'static str, Value)>, Map<String, Value>) {
        let doc = self.to_json();
        let extra = ["avg_latency", "percentiles"]
            .iter()
            .map(|&k| (k.to_string(), doc[k].clone()))
            .collect();
        (vec![("latency", doc["latencies"].clone())], extra)
    }
}

/// numpy's default (`linear`) percentile of sorted values.
fn numpy_percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let rank = p / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

fn extend_engine_and_gpu(
    doc: &mut Map<String, Value>,
    engine: Option<&EngineSummary>,
    gpu: Option<&GpuReport>,
    tokens: TokenTotals,
) {
    if let Some(e) = engine {
        doc.insert("engine_device".into(), json!(e.device));
        doc.insert("engine_weights".into(), json!(e.weights));
        doc.insert("engine_weight_bytes".into(), json!(e.weight_bytes));
        doc.insert("engine_parameters".into(), json!(e.parameters));
    }
    if let Some(gpu) = gpu {
        doc.extend(gpu.result_keys(tokens));
    }
}

/// vLLM's three throughput lines, then the failed requests and the GPU block.
pub fn throughput(r: &ThroughputResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Throughput: {:.2} requests/s, {:.2} total tokens/s, {:.2} output tokens/s",
        r.requests_per_second(),
        r.tokens_per_second(),
        r.output_tokens_per_second()
    );
    let _ = writeln!(out, "Total num prompt tokens:  {}", r.total_prompt_tokens);
    let _ = writeln!(out, "Total num output tokens:  {}", r.total_output_tokens);
    let _ = writeln!(out, "Elapsed time (s):         {:.2}", r.elapsed_time);
    if r.failed_requests > 0 {
        let _ = writeln!(
            out,
            "Failed requests:          {} of {} (not counted)",
            r.failed_requests, r.num_requests
        );
    }
    if let Some(gpu) = &r.gpu {
        for line in gpu.console_lines(r.token_totals()) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// vLLM's latency lines (Python's `str` of the floats), then the batch's decode speed and
/// the GPU block.
pub fn latency(r: &LatencyResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Avg latency: {} seconds", float_repr(r.avg_latency()));
    for (p, value) in r.percentiles() {
        let _ = writeln!(
            out,
            "{p}% percentile latency: {} seconds",
            float_repr(value)
        );
    }
    let _ = writeln!(
        out,
        "Output tokens/s (batch of {}, {} tokens per iteration): {:.2}",
        r.batch_size,
        r.output_tokens_per_iter,
        r.output_tokens_per_second()
    );
    if let Some(gpu) = &r.gpu {
        for line in gpu.console_lines(r.token_totals()) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_prints_vllms_lines() {
        let r = ThroughputResult {
            backend: "native".into(),
            model: "m".into(),
            elapsed_time: 4.0,
            num_requests: 10,
            failed_requests: 0,
            total_prompt_tokens: 100,
            total_output_tokens: 300,
            concurrency: Default::default(),
            engine: None,
            gpu: None,
        };
        let text = throughput(&r);
        assert!(text.starts_with(
            "Throughput: 2.50 requests/s, 100.00 total tokens/s, 75.00 output tokens/s\n\
             Total num prompt tokens:  100\nTotal num output tokens:  300\n"
        ));
        assert!(!text.contains("Failed"));
    }

    #[test]
    fn latency_prints_vllms_lines_with_pythons_floats() {
        let r = LatencyResult {
            backend: "native".into(),
            model: "m".into(),
            latencies: vec![0.5, 1.5],
            batch_size: 8,
            prompt_tokens_per_iter: 256,
            output_tokens_per_iter: 1024,
            concurrency: Default::default(),
            engine: None,
            gpu: None,
        };
        let text = latency(&r);
        assert!(
            text.starts_with("Avg latency: 1.0 seconds\n10% percentile latency: 0.6 seconds\n"),
            "{text}"
        );
        assert!(
            text.contains("99% percentile latency: 1.49 seconds\n"),
            "{text}"
        );
        assert!(text.contains("Output tokens/s (batch of 8, 1024 tokens per iteration): 1024.00"));
    }
}
