//! vLLM's `--probe-request-rate`: a loop of tiny requests beside the workload, whose
//! latency shows how long the workload makes an unrelated request wait. (`--profile`, the
//! other thing vLLM does around the measured run, is [`crate::profiler`].)
//!
//! The probe loop runs on a thread of its own with its own connection and its own backend
//! instance, so the main send path does not see it: no shared permit, no shared connection
//! pool, no plugin call on the decode worker. Like vLLM's, it sends one probe, waits for
//! its answer, sleeps `1 / rate` and starts again until the workload ends, ignoring
//! `--max-concurrency`; its results stay out of the main metrics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::client::decode::{RequestMeta, build_record};
use crate::client::stop::StopSignal;
use crate::client::worker;
use crate::client::{HttpClient, PreparedRequest};
use crate::metrics::stats;
use crate::prepare::{self, HostHeaders};
use crate::runtime::{BackendPlugin, Prompt, RequestSpec};

/// The text every probe sends (vLLM's).
pub const PROBE_PROMPT: &str = "Hi";

/// The request id of the probes, so a server's log (and the mock's record) tells them
/// from the workload's requests. vLLM sends its probes without one.
pub const PROBE_REQUEST_ID: &str = "bench-probe";

/// vLLM's probe statistics (`probe_*` keys and its "Probe Requests" console block), over
/// the probes that succeeded; failed probes are only counted.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeStats {
    pub completed: usize,
    pub failed: usize,
    /// `np.median` of the successful probes' E2EL, in ms.
    pub median_e2el_ms: f64,
    /// `np.percentile(..., 99)` (linear interpolation), in ms.
    pub p99_e2el_ms: f64,
    pub max_e2el_ms: f64,
}

impl ProbeStats {
    /// The statistics of probes whose E2EL in seconds are `latencies` (the successful
    /// ones) next to `failed` failed ones; `None` when no probe succeeded, as vLLM then
    /// reports nothing of them.
    pub fn of(latencies: &[f64], failed: usize) -> Option<ProbeStats> {
        if latencies.is_empty() {
            return None;
        }
        Some(ProbeStats {
            completed: latencies.len(),
            failed,
            median_e2el_ms: stats::median(latencies) * 1000.0,
            p99_e2el_ms: stats::percentile(latencies, 99.0) * 1000.0,
            max_e2el_ms: stats::max(latencies) * 1000.0,
        })
    }
}

/// What the probe loop measured: the E2EL of each successful probe and the error of each
/// failed one, in the order they were sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeResults {
    /// Seconds from sending a probe to its last output.
    pub latencies: Vec<f64>,
    /// The failed probes' errors (`kind: message`).
    pub errors: Vec<String>,
}

impl ProbeResults {
    /// vLLM's statistics of these results.
    pub fn stats(&self) -> Option<ProbeStats> {
        ProbeStats::of(&self.latencies, self.errors.len())
    }

    /// A warning when probes were sent and none succeeded (vLLM then prints nothing,
    /// which reads as if no probe had been sent).
    pub fn warning(&self) -> Option<String> {
        let first = self.errors.first()?;
        self.latencies.is_empty().then(|| {
            format!(
                "--probe-request-rate: all {} probe requests failed, so no probe statistics \
                 are reported; the first error: {first}",
                self.errors.len()
            )
        })
    }
}

/// The probe request built from the workload's first request, as vLLM builds it from its
/// test request: the text `"Hi"`, one prompt token, one output token, no multimodal
/// content, the run's model (no LoRA adapter), and the first request's extra body.
pub fn probe_spec(first: &RequestSpec) -> RequestSpec {
    RequestSpec {
        prompt: Prompt::Text(PROBE_PROMPT.to_owned()),
        prompt_len: 1,
        expected_output_len: 1,
        multimodal: Vec::new(),
        request_id: Some(PROBE_REQUEST_ID.to_owned()),
        lora_name: None,
        extra_body: first.extra_body.clone(),
        send_at: None,
        session: None,
        // "Hi" in one token answers no schema: the probe measures latency, not form.
        output_constraint: None,
    }
}

/// A probe loop ready to start: its request, built once before the clock, a backend
/// instance of its own to decode the answers, and its own HTTP client.
pub struct Probe {
    interval: Duration,
    rate: f64,
    request: PreparedRequest,
    backend: BackendPlugin,
    client: HttpClient,
}

impl Probe {
    /// Builds the probe request with `backend` (which keeps building the workload's) and
    /// forks it for the loop. `rate` is probes per second, positive and finite.
    pub fn prepare(
        rate: f64,
        backend: &mut BackendPlugin,
        first: &RequestSpec,
        headers: &HostHeaders,
        client: HttpClient,
    ) -> Result<Probe> {
        let interval = Duration::try_from_secs_f64(1.0 / rate)
            .ok()
            .filter(|_| rate.is_finite() && rate > 0.0)
            .with_context(|| {
                format!("--probe-request-rate must be a positive number, got {rate}")
            })?;
        let request = prepare::prepare_one(
            backend,
            0,
            &probe_spec(first),
            headers,
            &mut Default::default(),
        )
        .context("--probe-request-rate: building the probe request")?;
        let backend = backend
            .fork()
            .context("--probe-request-rate: a backend instance for the probes")?;
        Ok(Probe {
            interval,
            rate,
            request,
            backend,
            client,
        })
    }

    /// Probes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Starts the loop on its own thread. Raising `abort` (the run's stop signal) ends it
    /// at once, the probe in flight abandoned; [`RunningProbe::finish`] ends it after the
    /// probe in flight has been answered.
    pub fn start(self, abort: Arc<StopSignal>) -> Result<RunningProbe> {
        let end = Arc::new(StopSignal::new());
        let thread = std::thread::Builder::new()
            .name("bench-probe".into())
            .spawn({
                let end = end.clone();
                move || self.run(&end, &abort)
            })
            .context("starting the probe thread")?;
        Ok(RunningProbe {
            end,
            thread: Some(thread),
        })
    }

    /// The loop: send, wait for the answer, decode it, sleep the interval; until `end`
    /// or `abort`. Plugin calls happen here, outside the loop's runtime.
    fn run(mut self, end: &StopSignal, abort: &StopSignal) -> Result<ProbeResults> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("the probe loop's runtime")?;
        let t0 = Instant::now();
        let mut results = ProbeResults::default();
        while !end.is_stopped() && !abort.is_stopped() {
            let sent = rt.block_on(async {
                tokio::select! {
                    raw = self.client.send(&self.request) => Some(raw),
                    () = abort.stopped() => None,
                }
            });
            let Some(raw) = sent else { break };
            let meta = RequestMeta {
                index: 0,
                request_id: self.request.request_id.clone(),
                prompt_len: self.request.prompt_len,
                expected_output_len: self.request.expected_output_len,
                intended_start_time: 0.0,
                dispatch: raw.start,
                concurrency_wait: Duration::ZERO,
                session: None,
                endpoint: 0,
                check: None,
            };
            if self.backend.faulted() {
                self.backend = self.backend.fork()?;
            }
            let decoded = worker::decode_response(&mut self.backend, &raw);
            let record = build_record(&meta, &raw, decoded, t0);
            match record.failure() {
                None => results.latencies.push(record.latency),
                Some(failure) => results.errors.push(failure.to_string()),
            }
            rt.block_on(async {
                tokio::select! {
                    () = tokio::time::sleep(self.interval) => {}
                    () = end.stopped() => {}
                    () = abort.stopped() => {}
                }
            });
        }
        Ok(results)
    }
}

/// A probe loop in progress. Dropped without [`RunningProbe::finish`] (the run failed),
/// it still ends the loop, after the probe in flight.
pub struct RunningProbe {
    end: Arc<StopSignal>,
    thread: Option<std::thread::JoinHandle<Result<ProbeResults>>>,
}

impl RunningProbe {
    /// Ends the loop once its probe in flight is answered (vLLM awaits it too) and returns
    /// what it measured. Blocks: call it off the async runtime's threads.
    pub fn finish(mut self) -> Result<ProbeResults> {
        self.end.stop("the workload ended");
        let thread = self
            .thread
            .take()
            .context("the probe loop was already finished")?;
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("the probe thread panicked"))?
    }
}

impl Drop for RunningProbe {
    fn drop(&mut self) {
        self.end.stop("the run ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::side_reports::SideReports;

    #[test]
    fn probe_statistics_are_numpys_median_p99_and_max() {
        // np.median([.01, .02, .03, .05]) = .025; np.percentile(..., 99): virtual index
        // 3 * .99 = 2.97 between .03 and .05 -> .05 - .02 * .03 = .0494.
        let s = ProbeStats::of(&[0.05, 0.01, 0.03, 0.02], 2).unwrap();
        assert_eq!((s.completed, s.failed), (4, 2));
        assert!((s.median_e2el_ms - 25.0).abs() < 1e-9, "{s:?}");
        assert!((s.p99_e2el_ms - 49.4).abs() < 1e-9, "{s:?}");
        assert!((s.max_e2el_ms - 50.0).abs() < 1e-9, "{s:?}");
        let one = ProbeStats::of(&[0.007], 0).unwrap();
        assert_eq!(one.median_e2el_ms, one.max_e2el_ms);
        assert_eq!(one.p99_e2el_ms, one.max_e2el_ms);
    }

    #[test]
    fn no_successful_probe_means_no_statistics_and_a_warning() {
        assert_eq!(ProbeStats::of(&[], 3), None);
        let failed = ProbeResults {
            latencies: vec![],
            errors: vec!["http-500: boom".into(), "timeout: slow".into()],
        };
        assert_eq!(failed.stats(), None);
        let warning = failed.warning().unwrap();
        assert!(warning.contains("all 2 probe requests failed"), "{warning}");
        assert!(warning.contains("http-500: boom"), "{warning}");
        // Some succeeded, or none was sent: nothing to warn about.
        let mixed = ProbeResults {
            latencies: vec![0.01],
            errors: vec!["http-500: boom".into()],
        };
        assert_eq!(mixed.warning(), None);
        assert_eq!(mixed.stats().map(|s| (s.completed, s.failed)), Some((1, 1)));
        assert_eq!(ProbeResults::default().warning(), None);
    }

    /// A generation run at an infinite rate, for the reports.
    fn run_info() -> crate::report::RunInfo {
        use chrono::{Local, TimeZone};
        crate::report::RunInfo {
            date: Local.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).unwrap(),
            started_at: Local.with_ymd_and_hms(2025, 3, 4, 5, 5, 0).unwrap(),
            backend: "openai".into(),
            label: None,
            model_id: "m".into(),
            tokenizer_id: Some("m".into()),
            num_prompts: 4,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
            ramp_up: None,
            rps_change_events: vec![],
            metadata: vec![],
            args: serde_json::Map::new(),
            cancellation: None,
            endpoints: None,
            duration_limit_s: None,
        }
    }

    #[test]
    fn the_reports_show_vllms_probe_block_and_keys_where_vllm_puts_them() {
        let m = crate::metrics::tests::fixture_metrics();
        let run = run_info();
        let without = crate::report::console(&m, &SideReports::default(), &run);
        assert!(!without.contains("Probe"), "{without}");
        let doc = crate::report::result_doc(&m, &SideReports::default(), &run, false);
        assert!(doc.get("probe_completed").is_none());

        let side = SideReports {
            probe: ProbeStats::of(&[0.05, 0.01, 0.03, 0.02], 2),
            ..SideReports::default()
        };
        let console = crate::report::console(&m, &side, &run);
        let block = [
            "------------------Probe Requests------------------",
            "Probe requests completed:                4         ",
            "Probe requests failed:                   2         ",
            "Median probe E2EL (ms):                  25.00     ",
            "P99 probe E2EL (ms):                     49.40     ",
            "Max probe E2EL (ms):                     50.00     ",
        ]
        .join("\n");
        let at = console.find(&block).unwrap_or_else(|| panic!("{console}"));
        // After the throughputs, before the first metric section.
        assert!(console.find("Request throughput (req/s):").unwrap() < at);
        assert!(
            at < console.find("Time to First Token").unwrap(),
            "{console}"
        );

        let doc = crate::report::result_doc(&m, &side, &run, false);
        let keys: Vec<&str> = doc.keys().collect();
        let rtfx = keys.iter().position(|&k| k == "rtfx").unwrap();
        assert_eq!(
            keys[rtfx + 1..rtfx + 6],
            [
                "probe_completed",
                "probe_failed",
                "probe_median_e2el_ms",
                "probe_p99_e2el_ms",
                "probe_max_e2el_ms"
            ]
        );
        assert_eq!(doc.get("probe_completed"), Some(&serde_json::json!(4)));
        assert_eq!(doc.get("probe_failed"), Some(&serde_json::json!(2)));
        let p99 = doc.get("probe_p99_e2el_ms").unwrap().as_f64().unwrap();
        assert!((p99 - 49.4).abs() < 1e-9);
    }

    #[test]
    fn the_probe_is_a_one_token_text_request_with_the_first_requests_extra_body() {
        let first = RequestSpec {
            prompt: Prompt::Text("a long first prompt".into()),
            prompt_len: 900,
            expected_output_len: 128,
            multimodal: vec![crate::runtime::ContentPart::ImageUrl(
                "data:image/png;base64,AA".into(),
            )],
            request_id: Some("run-0".into()),
            lora_name: Some("adapter".into()),
            extra_body: Some(r#"{"temperature":0}"#.into()),
            send_at: Some(3.0),
            session: Some(crate::runtime::Session {
                id: "c0".into(),
                turn: 0,
            }),
            output_constraint: Some(crate::runtime::OutputConstraint::Regex("a+".into())),
        };
        let probe = probe_spec(&first);
        assert!(matches!(&probe.prompt, Prompt::Text(t) if t == "Hi"));
        assert_eq!((probe.prompt_len, probe.expected_output_len), (1, 1));
        assert!(probe.multimodal.is_empty());
        assert_eq!(probe.request_id.as_deref(), Some(PROBE_REQUEST_ID));
        assert_eq!(probe.lora_name, None);
        assert_eq!(probe.extra_body, first.extra_body);
        assert_eq!((probe.send_at, probe.session.is_none()), (None, true));
        assert!(probe.output_constraint.is_none());
    }
}
