//! The CLI's observer: prints what a run shows as `vllm bench serve` prints it (its
//! progress lines and result block on standard output, warnings and notes on standard
//! error), draws the progress bar, and arms Ctrl-C/SIGTERM for the measured run.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use super::dashboard::{Dashboard, RunShape, Ui};
use super::interrupt::{self, ServerInterrupt};
use crate::benchmark::Outcome;
use crate::client::live::{LiveCounts, LiveStats};
use crate::client::stop::{Signal, StopSignal};
use crate::observer::{Event, Observer};
use crate::profiler::ProfilerStep;
use crate::pyjson::float_repr;
use crate::record::FailureKind;
use crate::report;
use crate::server_tokenizer::Alignment;
use crate::shard;

/// What a client process prints once it is ready to start.
pub(super) const READY: &str = "bench-shard-ready";

/// A client process's side of the start (`--start-at gate`): says it is ready, then
/// waits for the start time.
fn await_start() -> Result<SystemTime> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{READY}")
        .and_then(|()| out.flush())
        .context("--start-at gate: telling the parent process this one is ready")?;
    drop(out);
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("--start-at gate: reading the start time")?;
    if line.is_empty() {
        bail!("--start-at gate: the parent process ended before saying when to start");
    }
    shard::parse_wall_clock(line.trim())
        .map_err(|e| anyhow::anyhow!("--start-at gate: the parent sent {e}"))
}

/// The process's exit code for a run that finished: a signal's own (128 + its number,
/// what shells and schedulers read as "stopped by it"), failure for a run stopped early
/// otherwise or one where every request failed, success else.
pub(super) fn exit_code(outcome: &Outcome) -> ExitCode {
    if let Some(signal) = outcome.signal {
        return ExitCode::from(signal.exit_code());
    }
    if let Some(i) = &outcome.interrupted {
        eprintln!("error: the benchmark was stopped early: {}", i.reason);
        return ExitCode::FAILURE;
    }
    if outcome.all_failed() {
        let m = &outcome.metrics;
        // Of the requests sent (a timed run sends more than its workload of `requests`).
        let sent = m.completed + m.failed + m.cancelled;
        match outcome.first_failure() {
            Some(first) => eprintln!(
                "error: every request failed ({} of {sent}); first error: {first}",
                m.failed
            ),
            // None failed: the client cancelled every one (--request-cancellation-rate,
            // or a --duration run's drain cut them all).
            None if m.cancelled > 0 => eprintln!(
                "error: no request completed: the client cancelled all {} of {sent} \
                 (see --request-cancellation-rate, --duration-grace)",
                m.cancelled
            ),
            None => eprintln!("error: no request completed ({sent} sent)"),
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Preparation shows a progress bar once it has taken this long (a quick one shows none).
const PREPARATION_BAR_AFTER: Duration = Duration::from_secs(1);

/// Whether what bench writes on standard error may carry colour: only when it is a
/// terminal that takes colour and `NO_COLOR` is not set (or `CLICOLOR_FORCE` asks for it).
/// This is clap's own decision (`anstream`'s), so its errors, the log lines and the
/// messages bench prints all agree.
pub fn stderr_colour() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// Prints a run's events on the terminal.
pub struct Console {
    /// Draw the progress bar of the measured run (off with `--disable-tqdm`).
    pub progress_bar: bool,
    /// `--shutdown-grace-sec`, for what a Ctrl-C says.
    pub shutdown_grace: Duration,
    /// The preparation's bar, once preparation has taken [`PREPARATION_BAR_AFTER`].
    preparation: Option<ProgressBar>,
    /// A series of runs (`--num-runs`): one Ctrl-C listener for all of them, so that a
    /// signal between two runs (or while the next one loads) ends the series too.
    series: Option<ServerInterrupt>,
    /// `--ui`: [`Ui::Dashboard`] draws [`Dashboard`] during each measured run.
    ui: Ui,
    /// The measured run as announced, for the dashboard's header.
    shape: RunShape,
    /// The dashboard of the run in flight.
    dashboard: Option<Dashboard>,
    /// The live figures of the run about to start, for its progress bar's message (in
    /// flight, failed): made when a bar will be drawn, taken by [`Console::progress_bar`].
    progress_live: Option<Arc<LiveStats>>,
}

impl Console {
    /// A console; `progress_bar` draws the bars (off with `--disable-tqdm`).
    pub fn new(progress_bar: bool, shutdown_grace: Duration) -> Console {
        Console {
            progress_bar,
            shutdown_grace,
            preparation: None,
            series: None,
            ui: Ui::Console,
            shape: RunShape {
                requests: 0,
                request_rate: f64::INFINITY,
                max_concurrency: None,
                duration: None,
            },
            dashboard: None,
            progress_live: None,
        }
    }

    /// `--ui`. The dashboard needs a terminal on standard output and standard error:
    /// without one, a warning, and the console.
    pub fn with_ui(mut self, ui: Ui) -> Console {
        self.ui = match ui {
            Ui::Dashboard if !super::dashboard::terminal_available() => {
                eprintln!(
                    "WARNING: --ui dashboard needs standard output and standard error to be a \
                     terminal; showing the console instead"
                );
                Ui::Console
            }
            ui => ui,
        };
        self
    }

    /// Takes the dashboard down (the terminal as it was) and prints what the run said
    /// meanwhile.
    fn end_dashboard(&mut self) {
        let Some(dashboard) = self.dashboard.take() else {
            return;
        };
        for held in dashboard.finish() {
            match held.stderr {
                true => eprintln!("{}", held.line),
                false => println!("{}", held.line),
            }
        }
    }

    /// A console for a series of runs: from now on the first Ctrl-C or SIGTERM stops the
    /// run in flight as in a single run (or the next one as soon as it starts) and ends
    /// the series; a second quits at once.
    pub fn for_series(mut self) -> Result<Console> {
        self.series = Some(ServerInterrupt::install(format!(
            "the runs: no more requests are sent, requests in flight get {:.1} s to finish, \
             then the results so far are reported and saved",
            self.shutdown_grace.as_secs_f64()
        ))?);
        Ok(self)
    }
}

impl Observer for Console {
    fn event(&mut self, event: Event<'_>) {
        if let Some((line, stderr)) = message(&event) {
            match &self.dashboard {
                Some(dashboard) => dashboard.hold(line, stderr),
                None if stderr => eprintln!("{line}"),
                None => println!("{line}"),
            }
            return;
        }
        // Anything else (the result, an interruption) is for the normal screen.
        self.end_dashboard();
        match event {
            Event::FetchingModel => {
                println!("Model not specified, fetching first model from server...");
            }
            Event::ModelFound { id } => println!("First model name: {id}, first model id: {id}"),
            Event::Preparing {
                made,
                total,
                elapsed,
            } => {
                if self.preparation.is_none() && elapsed >= PREPARATION_BAR_AFTER {
                    let bar = ProgressBar::new(total);
                    if let Ok(style) = ProgressStyle::with_template(
                        "Preparing requests {percent:>3}%|{wide_bar}| {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}]",
                    ) {
                        bar.set_style(style);
                    }
                    self.preparation = Some(bar);
                }
                if let Some(bar) = &self.preparation {
                    bar.set_position(made);
                }
            }
            Event::Prepared { requests, took } => {
                self.shape.requests = requests as u64;
                if let Some(bar) = self.preparation.take() {
                    bar.finish_and_clear();
                    eprintln!(
                        "Prepared {requests} requests in {:.1} s ({:.0} requests/s)",
                        took.as_secs_f64(),
                        requests as f64 / took.as_secs_f64().max(1e-9)
                    );
                }
            }
            Event::Alignment(alignment) => print_alignment(alignment),
            Event::ReadyCheckStarted => println!("Starting initial single prompt test run..."),
            Event::ReadyCheckPassed => println!("Initial test run completed."),
            Event::ReadyCheckSkipped => println!("Skipping endpoint ready check."),
            Event::WarmUpStarted { requests } => println!("Warming up with {requests} requests..."),
            Event::WarmUpDone => println!(
                "Warmup run completed. (Warm-ups repeat the first prompt: a server prefix cache is now warm for it.)"
            ),
            Event::RunStarting {
                request_rate,
                burstiness,
                ramp_up,
                max_concurrency,
                self_timed,
                duration,
            } => {
                self.shape.request_rate = request_rate;
                self.shape.max_concurrency = max_concurrency;
                self.shape.duration = duration;
                println!("Starting main benchmark run...");
                if let Some(d) = duration {
                    println!(
                        "Duration: {} s (the workload is sent again from its first request when it runs out)",
                        d.as_secs_f64()
                    );
                }
                if self_timed {
                    println!("Self timing is set, using the timestamps from the trace file.");
                    return;
                }
                match ramp_up {
                    Some(r) => {
                        println!(
                            "Traffic ramp-up strategy: {}.",
                            report::strategy_name(r.strategy)
                        );
                        println!(
                            "Will increase RPS from {} to {} RPS over the duration of the benchmark.",
                            r.start_rps, r.end_rps
                        );
                    }
                    None => println!("Traffic request rate: {request_rate}"),
                }
                let distribution = if burstiness == 1.0 {
                    "Poisson process"
                } else {
                    "Gamma distribution"
                };
                println!("Burstiness factor: {burstiness} ({distribution})");
                match max_concurrency {
                    Some(c) => println!("Maximum request concurrency: {c}"),
                    None => println!("Maximum request concurrency: None"),
                }
            }
            Event::Results { metrics, side, run } => {
                print!("{}", report::console(metrics, side, run))
            }
            Event::EngineLoaded { info } => println!(
                "Loaded {} ({}, {} parameters, {} weights, {:.1} MB) on {}",
                info.name,
                info.architecture,
                info.parameters,
                info.weights,
                info.weight_bytes as f64 / 1e6,
                info.device
            ),
            Event::LatencyIteration {
                warm_up,
                index,
                of,
                seconds,
            } => {
                if warm_up && index == 0 {
                    println!("Warming up...");
                }
                let what = if warm_up { "Warmup" } else { "Profiling" };
                eprintln!("{what} iteration {}/{of}: {seconds:.4} s", index + 1);
            }
            Event::ThroughputResults(result) => print!("{}", report::offline::throughput(result)),
            Event::LatencyResults(result) => print!("{}", report::offline::latency(result)),
            Event::Interrupted {
                interruption: i,
                requests,
                grace,
            } => println!(
                "Benchmark interrupted ({}): {} of {requests} requests not sent (not counted), {} \
                 cancelled after the {:.1} s grace period (counted as failed with kind '{}').",
                i.reason,
                i.not_sent,
                i.cancelled,
                grace.as_secs_f64(),
                FailureKind::Interrupted,
            ),
            Event::Saved { path, interrupted } => println!(
                "Results saved to {}{}",
                path.display(),
                if interrupted {
                    " (marked as interrupted)"
                } else {
                    ""
                }
            ),
            // `Event` may grow (it is non-exhaustive); a new kind is shown once this
            // console learns it.
            _ => {}
        }
    }

    fn progress_bar(&mut self, requests: u64) -> ProgressBar {
        self.shape.requests = requests;
        // The dashboard shows the run's progress itself.
        if !self.progress_bar || self.ui == Ui::Dashboard {
            return ProgressBar::hidden();
        }
        // vLLM's tqdm bar, and after its rate the requests in flight and failed; a timed
        // run's, whose number of requests is not known before it ends, counts the answers
        // against the clock.
        let (pb, template) = match self.shape.duration {
            None => (
                ProgressBar::new(requests),
                "{percent:>3}%|{wide_bar}| {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}{msg}]"
                    .to_owned(),
            ),
            Some(d) => (
                ProgressBar::no_length(),
                format!(
                    "{{spinner}} {{pos}} answered [{{elapsed_precise}} of {}, {{per_sec}}{{msg}}]",
                    hms(d)
                ),
            ),
        };
        if let Ok(style) = ProgressStyle::with_template(&template) {
            pb.set_style(style);
        }
        if self.shape.duration.is_some() {
            // The spinner and the clock move between answers too.
            pb.enable_steady_tick(Duration::from_millis(250));
        }
        if let Some(live) = self.progress_live.take() {
            follow(&pb, live);
        }
        pb
    }

    fn arm_stop(&mut self, stop: &Arc<StopSignal>) -> Result<()> {
        let Some(series) = &self.series else {
            return interrupt::watch(stop.clone(), self.shutdown_grace);
        };
        *series
            .run_slot()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(stop.clone());
        if series.interrupted() {
            stop.stop(Signal::Interrupt);
        }
        Ok(())
    }

    /// `--ui dashboard`: the run's figures, drawn while it goes on.
    fn live_stats(&mut self) -> Option<Arc<LiveStats>> {
        if self.ui != Ui::Dashboard {
            // The progress bar's message, where a bar is drawn (indicatif draws none on
            // a standard error that is not a terminal).
            self.progress_live = (self.progress_bar && std::io::stderr().is_terminal())
                .then(|| Arc::new(LiveStats::default()));
            return self.progress_live.clone();
        }
        self.end_dashboard();
        let live = Arc::new(LiveStats::default());
        match Dashboard::start(live.clone(), self.shape) {
            Ok(dashboard) => self.dashboard = Some(dashboard),
            Err(e) => eprintln!("WARNING: --ui dashboard: {e}; showing the console instead"),
        }
        Some(live)
    }

    /// A client process of `--workers`: says it is ready on standard output and reads the
    /// shared start from standard input ([`super::workers`] holds the other end).
    fn await_start(&mut self) -> Result<std::time::SystemTime> {
        await_start()
    }
}

/// Keeps `pb`'s message at the run's requests in flight and failed (by kind), four times
/// a second, until the bar is finished or gone (a run that failed drops it unfinished):
/// from a thread of its own, which holds the bar weakly and reads only
/// [`LiveStats::counts`] (no histogram is copied).
/// A duration as `HH:MM:SS`, as the bar's elapsed time is written.
fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn follow(pb: &ProgressBar, live: Arc<LiveStats>) {
    let weak = pb.downgrade();
    let started = std::thread::Builder::new()
        .name("bench-progress".into())
        .spawn(move || {
            while let Some(pb) = weak.upgrade()
                && !pb.is_finished()
            {
                pb.set_message(progress_message(&live.counts()));
                drop(pb);
                std::thread::sleep(Duration::from_millis(250));
            }
        });
    if let Err(e) = started {
        eprintln!("WARNING: the progress bar shows no requests in flight: {e}");
    }
}

/// `, 8 in flight`, and `, 2 failed (http-503 2)` once a request failed.
fn progress_message(counts: &LiveCounts) -> String {
    let mut message = format!(", {} in flight", counts.in_flight());
    if counts.failed > 0 {
        let kinds: Vec<String> = counts
            .failures_by_kind
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        message.push_str(&format!(
            ", {} failed ({})",
            counts.failed,
            kinds.join(", ")
        ));
    }
    message
}

/// The line of an event that is one line of text (a warning, a note, the profiler's and
/// the probes' announcements), and whether it goes to standard error: while the
/// dashboard is up, such lines are shown in it and printed once it is gone.
fn message(event: &Event<'_>) -> Option<(String, bool)> {
    Some(match event {
        Event::Profiler(step) => (
            match step {
                ProfilerStep::Starting => "Starting profiler...",
                ProfilerStep::Started => "Profiler started",
                ProfilerStep::Stopping => "Stopping profiler...",
                ProfilerStep::Stopped => "Profiler stopped",
            }
            .to_owned(),
            false,
        ),
        Event::ProbeStarting { rate } => (
            format!("Probe request rate: {} req/s", float_repr(*rate)),
            false,
        ),
        Event::Warning(w) => (format!("WARNING: {w}"), true),
        Event::Note(n) => (format!("note: {n}"), true),
        _ => return None,
    })
}

/// vLLM's messages about the prompt re-alignment, with what bench adds in parentheses.
fn print_alignment(alignment: &Alignment) {
    match alignment {
        Alignment::NotText | Alignment::Agrees => {}
        Alignment::Unavailable(why) => {
            println!("WARNING: /tokenize unavailable, skipping alignment. ({why})");
        }
        Alignment::Realigned {
            server,
            expected,
            shortened,
            failed,
        } => {
            println!(
                "WARNING: tokenizer mismatch (server={server}, expected={expected}), \
                 re-aligning prompts."
            );
            println!(
                "Re-aligned prompts: {shortened} cut to their prompt_len in the server's \
                 tokens, {failed} kept as sampled because a /tokenize or /detokenize call \
                 failed."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_message_says_in_flight_and_failures_by_kind() {
        let mut counts = LiveCounts {
            sent: 10,
            completed: 4,
            failed: 0,
            cancelled: 1,
            failures_by_kind: Vec::new(),
        };
        assert_eq!(progress_message(&counts), ", 5 in flight");
        counts.failed = 3;
        counts.failures_by_kind = vec![(FailureKind::Reset, 2), (FailureKind::Timeout, 1)];
        assert_eq!(
            progress_message(&counts),
            format!(
                ", 2 in flight, 3 failed ({} 2, {} 1)",
                FailureKind::Reset,
                FailureKind::Timeout
            )
        );
    }
}
