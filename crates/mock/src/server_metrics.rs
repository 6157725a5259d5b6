//! The mock's stand-in for a server's own `/metrics`: with `--server-metrics FAMILY`, it
//! exposes that server's names (vLLM, SGLang, llama.cpp, TGI) with values that follow its
//! load by known rules, so a test can derive what a client must report from the mock's
//! configuration and its record of the requests:
//! - running requests: those admitted and not yet past their last token's deadline
//!   (arrival + ttft + (n - 1) * itl); waiting: none (the mock never queues);
//! - KV-cache usage: running requests over `--kv-capacity`, at most 1;
//! - queue time: every finished request observed `--queue-ms` in the queue histogram;
//! - preemptions: every `--preempt-every`-th finished request counts one;
//! - speculative decoding: every finished request of n tokens made ceil(n / (a + 1))
//!   drafts of `--spec-tokens` k tokens, of which the first a = `--spec-accepted` were
//!   accepted, so vLLM's acceptance rate is a / k and its length 1 + a.
//!
//! A request counts as finished once its last token's deadline has passed, whether or not
//! the client read it: the counters move with time, as a real server's do.

use std::sync::Mutex;

use tokio::time::Instant;

/// Which server's metric names `/metrics` uses, and the rules' parameters.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ServerMetrics {
    /// Expose this server's own metrics on `/metrics`, moving with the load: vllm, sglang,
    /// llama.cpp or tgi; none answers `/metrics` with 404, as a server without it does
    /// (default: only vLLM's prefix-cache counters).
    #[arg(long = "server-metrics", value_enum)]
    pub family: Option<Family>,
    /// Requests that fill the KV cache: usage is running requests over this.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub kv_capacity: u32,
    /// The queue time every finished request reports, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub queue_ms: u64,
    /// Every this many finished requests count one preemption (0: none).
    #[arg(long, default_value_t = 0)]
    pub preempt_every: u64,
    /// Draft tokens per speculative step (0: speculative decoding off).
    #[arg(long, default_value_t = 0)]
    pub spec_tokens: u32,
    /// Draft tokens accepted per step, at most --spec-tokens.
    #[arg(long, default_value_t = 0)]
    pub spec_accepted: u32,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics {
            family: None,
            kv_capacity: 16,
            queue_ms: 0,
            preempt_every: 0,
            spec_tokens: 0,
            spec_accepted: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    Vllm,
    Sglang,
    #[value(name = "llama.cpp")]
    LlamaCpp,
    Tgi,
    /// No `/metrics` at all (404).
    None,
}

/// What the counters have seen.
#[derive(Debug, Default)]
struct Counts {
    /// Last-token deadlines and token counts of requests not yet counted as finished.
    running: Vec<(Instant, u32)>,
    finished: u64,
    drafts: u64,
    queue_s: f64,
}

/// The server-metrics state shared by the handlers.
#[derive(Debug, Default)]
pub(super) struct Load {
    config: ServerMetrics,
    counts: Mutex<Counts>,
}

impl Load {
    pub(super) fn new(config: ServerMetrics) -> Load {
        Load {
            config,
            counts: Mutex::default(),
        }
    }

    /// Whether `/metrics` shows a family's metrics (then not the default ones).
    pub(super) fn family(&self) -> Option<Family> {
        self.config.family
    }

    /// A generation request of `tokens` tokens whose last token is due at `end`.
    pub(super) fn admit(&self, end: Instant, tokens: u32) {
        if matches!(self.config.family, None | Some(Family::None)) {
            return;
        }
        self.lock().running.push((end, tokens));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The exposition text at `now`, in the family's names.
    pub(super) fn metrics_text(&self, now: Instant) -> String {
        let Some(family) = self.config.family.filter(|f| *f != Family::None) else {
            return String::new();
        };
        let c = &self.config;
        let mut counts = self.lock();
        let per_draft = u64::from(c.spec_accepted) + 1;
        let mut done = Vec::new();
        counts.running.retain(|&(end, tokens)| {
            let finished = end <= now;
            if finished {
                done.push(tokens);
            }
            !finished
        });
        for tokens in done {
            counts.finished += 1;
            counts.drafts += u64::from(tokens).div_ceil(per_draft);
            counts.queue_s += c.queue_ms as f64 / 1000.0;
        }
        let running = counts.running.len() as u64;
        let usage = (running as f64 / f64::from(c.kv_capacity)).min(1.0);
        let finished = counts.finished;
        let preempted = finished.checked_div(c.preempt_every).unwrap_or(0);
        let (drafts, queue_s) = (counts.drafts, counts.queue_s);
        drop(counts);
        let mut t = String::new();
        let put = |t: &mut String, kind: &str, name: &str, labels: &str, value: String| {
            t.push_str(&format!("# TYPE {name} {kind}\n{name}{labels} {value}\n"));
        };
        match family {
            Family::Vllm => {
                let l = "{engine=\"0\",model_name=\"mock\"}";
                put(
                    &mut t,
                    "gauge",
                    "vllm:num_requests_running",
                    l,
                    format!("{running}.0"),
                );
                put(
                    &mut t,
                    "gauge",
                    "vllm:num_requests_waiting",
                    l,
                    "0.0".into(),
                );
                put(
                    &mut t,
                    "gauge",
                    "vllm:kv_cache_usage_perc",
                    l,
                    format!("{usage:?}"),
                );
                put(
                    &mut t,
                    "counter",
                    "vllm:num_preemptions_total",
                    l,
                    format!("{preempted}.0"),
                );
                histogram(
                    &mut t,
                    "vllm:request_queue_time_seconds",
                    l,
                    finished,
                    queue_s,
                );
                if c.spec_tokens > 0 {
                    let k = u64::from(c.spec_tokens);
                    let a = u64::from(c.spec_accepted.min(c.spec_tokens));
                    t.push_str(&format!(
                        "vllm:spec_decode_num_drafts_total{l} {drafts}.0\n\
                         vllm:spec_decode_num_draft_tokens_total{l} {}.0\n\
                         vllm:spec_decode_num_accepted_tokens_total{l} {}.0\n",
                        drafts * k,
                        drafts * a
                    ));
                    for pos in 0..k {
                        let accepted = if pos < a { drafts } else { 0 };
                        t.push_str(&format!(
                            "vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",model_name=\"mock\",position=\"{pos}\"}} {accepted}.0\n"
                        ));
                    }
                }
            }
            Family::Sglang => {
                let l = "{model_name=\"mock\",tp_rank=\"0\"}";
                put(
                    &mut t,
                    "gauge",
                    "sglang:num_running_reqs",
                    l,
                    format!("{running}.0"),
                );
                put(&mut t, "gauge", "sglang:num_queue_reqs", l, "0.0".into());
                put(
                    &mut t,
                    "gauge",
                    "sglang:token_usage",
                    l,
                    format!("{usage:?}"),
                );
                put(
                    &mut t,
                    "counter",
                    "sglang:num_retracted_requests_total",
                    l,
                    format!("{preempted}.0"),
                );
                histogram(&mut t, "sglang:queue_time_seconds", l, finished, queue_s);
                if c.spec_tokens > 0 {
                    let rate = f64::from(c.spec_accepted) / f64::from(c.spec_tokens);
                    let length = 1.0 + f64::from(c.spec_accepted);
                    put(
                        &mut t,
                        "gauge",
                        "sglang:spec_accept_rate",
                        l,
                        format!("{rate:?}"),
                    );
                    put(
                        &mut t,
                        "gauge",
                        "sglang:spec_accept_length",
                        l,
                        format!("{length:?}"),
                    );
                }
            }
            Family::LlamaCpp => {
                put(
                    &mut t,
                    "gauge",
                    "llamacpp:requests_processing",
                    "",
                    running.to_string(),
                );
                put(
                    &mut t,
                    "gauge",
                    "llamacpp:requests_deferred",
                    "",
                    "0".into(),
                );
                put(
                    &mut t,
                    "gauge",
                    "llamacpp:kv_cache_usage_ratio",
                    "",
                    format!("{usage}"),
                );
            }
            Family::Tgi => {
                put(
                    &mut t,
                    "gauge",
                    "tgi_batch_current_size",
                    "",
                    running.to_string(),
                );
                put(&mut t, "gauge", "tgi_queue_size", "", "0".into());
                histogram(&mut t, "tgi_request_queue_duration", "", finished, queue_s);
            }
            Family::None => {}
        }
        t
    }
}

/// A histogram's `_count` and `_sum` (its buckets left out: a client reads the mean).
fn histogram(t: &mut String, name: &str, labels: &str, count: u64, sum: f64) {
    t.push_str(&format!(
        "# TYPE {name} histogram\n{name}_count{labels} {count}.0\n{name}_sum{labels} {sum:?}\n"
    ));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{series} not in\n{text}"))
    }

    #[test]
    fn values_follow_the_requests_admitted_and_finished() {
        let load = Load::new(ServerMetrics {
            family: Some(Family::Vllm),
            kv_capacity: 4,
            queue_ms: 250,
            preempt_every: 2,
            spec_tokens: 3,
            spec_accepted: 2,
        });
        let t0 = Instant::now();
        let l = "{engine=\"0\",model_name=\"mock\"}";
        for (end_ms, tokens) in [(10, 7), (20, 3), (30, 9)] {
            load.admit(t0 + Duration::from_millis(end_ms), tokens);
        }
        let at = |ms| load.metrics_text(t0 + Duration::from_millis(ms));
        let text = at(0);
        assert_eq!(value(&text, &format!("vllm:num_requests_running{l}")), 3.0);
        assert_eq!(value(&text, &format!("vllm:kv_cache_usage_perc{l}")), 0.75);
        assert_eq!(
            value(&text, &format!("vllm:spec_decode_num_drafts_total{l}")),
            0.0
        );
        let text = at(25);
        assert_eq!(value(&text, &format!("vllm:num_requests_running{l}")), 1.0);
        assert_eq!(value(&text, &format!("vllm:num_preemptions_total{l}")), 1.0);
        assert_eq!(
            value(&text, &format!("vllm:request_queue_time_seconds_sum{l}")),
            0.5
        );
        // 7 tokens: 3 drafts of 3 (2 accepted each); 3 tokens: 1 draft.
        assert_eq!(
            value(&text, &format!("vllm:spec_decode_num_drafts_total{l}")),
            4.0
        );
        assert_eq!(
            value(
                &text,
                &format!("vllm:spec_decode_num_draft_tokens_total{l}")
            ),
            12.0
        );
        assert_eq!(
            value(
                &text,
                &format!("vllm:spec_decode_num_accepted_tokens_total{l}")
            ),
            8.0
        );
        assert_eq!(
            value(
                &text,
                "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"mock\",position=\"2\"}"
            ),
            0.0
        );
        let text = at(30);
        assert_eq!(value(&text, &format!("vllm:num_requests_running{l}")), 0.0);
        assert_eq!(
            value(&text, &format!("vllm:request_queue_time_seconds_count{l}")),
            3.0
        );
    }

    #[test]
    fn each_family_has_its_own_names_and_none_is_quiet() {
        let t0 = Instant::now();
        for (family, name) in [
            (
                Family::Sglang,
                "sglang:token_usage{model_name=\"mock\",tp_rank=\"0\"}",
            ),
            (Family::LlamaCpp, "llamacpp:kv_cache_usage_ratio"),
            (Family::Tgi, "tgi_batch_current_size"),
        ] {
            let load = Load::new(ServerMetrics {
                family: Some(family),
                kv_capacity: 2,
                ..ServerMetrics::default()
            });
            load.admit(t0 + Duration::from_secs(1), 4);
            let text = load.metrics_text(t0);
            let expected = if family == Family::Tgi { 1.0 } else { 0.5 };
            assert_eq!(value(&text, name), expected, "{text}");
        }
        let off = Load::new(ServerMetrics::default());
        off.admit(t0, 1);
        assert_eq!(off.metrics_text(t0), "");
    }
}
