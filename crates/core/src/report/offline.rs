//! The console lines of `bench throughput` and `bench latency`: vLLM's own lines first
//! (`throughput.py` and `latency.py` print them so), then bench's: the engine, the
//! decode speed, the GPU.

use std::fmt::Write;

use crate::offline::{LatencyResult, ThroughputResult};
use crate::pyjson::float_repr;

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
        for line in gpu.console_lines(r.total_output_tokens) {
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
        let tokens = r.output_tokens_per_iter * r.latencies.len() as u64;
        for line in gpu.console_lines(tokens) {
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
