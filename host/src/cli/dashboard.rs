//! `--ui dashboard`: a full-screen view of the measured run while it goes on, drawn with
//! ratatui on the terminal's alternate screen from the run's [`LiveStats`].
//!
//! It runs on a thread of its own and redraws from a [`LiveStats::snapshot`] four times a
//! second: the run's requests pay nothing for it beyond the counting [`LiveStats`] does
//! anyway (one short lock per finished request, on the decode thread). It is started once
//! the run is announced ([`super::console::Console`], on `Observer::live_stats`) and
//! torn down, the terminal restored (main screen back, cursor shown), before the result
//! block is printed, which then reads as it does with the console.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Style, Stylize as _};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use ratatui::{Frame, Terminal, backend::CrosstermBackend};

use crate::client::live::{LiveMetric, LiveSnapshot, LiveStats};

/// `--ui`: how a run is shown.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ui {
    /// vLLM's lines and progress bar.
    #[default]
    Console,
    /// A live full-screen view of the run, then the result block.
    Dashboard,
}

/// How often the view is redrawn.
const REDRAW: Duration = Duration::from_millis(250);

/// The percentiles shown of each latency.
const QUANTILES: [(&str, f64); 3] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];

/// Whether the dashboard can be drawn: standard output (where it is drawn) and standard
/// error (whose lines would scribble over it) are both a terminal.
pub(super) fn terminal_available() -> bool {
    std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// What the run announced about itself, for the view's header.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunShape {
    /// The workload's size.
    pub requests: u64,
    /// Requests per second; infinite for all at once.
    pub request_rate: f64,
    pub max_concurrency: Option<usize>,
    /// `--duration`: the run sends for this long, however many requests that is.
    pub duration: Option<Duration>,
}

/// A line the run wanted shown while the dashboard was up: shown in it, and printed where
/// the console prints it once the dashboard is gone.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub line: String,
    pub stderr: bool,
}

/// The dashboard of one run, drawn until [`Dashboard::finish`] (or drop).
pub(super) struct Dashboard {
    /// Dropped to tell the drawing thread to stop.
    done: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    held: Arc<Mutex<Vec<Held>>>,
}

impl Dashboard {
    /// Switches to the alternate screen and starts drawing `live`.
    pub(super) fn start(live: Arc<LiveStats>, shape: RunShape) -> std::io::Result<Dashboard> {
        let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        SHOWN.store(true, Ordering::SeqCst);
        let held: Arc<Mutex<Vec<Held>>> = Arc::default();
        let (done, stopped) = mpsc::channel::<()>();
        let shown = held.clone();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("bench-dashboard".into())
            .spawn(move || {
                let _ = terminal.clear();
                loop {
                    let snapshot = live.snapshot();
                    let messages: Vec<String> = shown
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .iter()
                        .map(|h| h.line.clone())
                        .collect();
                    let elapsed = started.elapsed();
                    // A terminal gone (closed window) leaves nothing to draw on; the run
                    // goes on.
                    if terminal
                        .draw(|frame| draw(frame, &snapshot, &shape, elapsed, &messages))
                        .is_err()
                    {
                        return;
                    }
                    match stopped.recv_timeout(REDRAW) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            });
        let thread = match thread {
            Ok(thread) => thread,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        Ok(Dashboard {
            done: Some(done),
            thread: Some(thread),
            held,
        })
    }

    /// Keeps a line the run wanted shown: in the view now, printed after it.
    pub(super) fn hold(&self, line: String, stderr: bool) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Held { line, stderr });
    }

    /// Stops drawing, restores the terminal and hands back the lines held meanwhile.
    pub(super) fn finish(mut self) -> Vec<Held> {
        self.stop();
        std::mem::take(&mut *self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn stop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
            restore();
        }
    }
}

impl Drop for Dashboard {
    /// A run that ends in an error (or a panic) leaves the terminal as it found it too.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a dashboard holds the terminal (on the alternate screen), for a process that
/// ends without dropping it ([`restore_if_shown`]).
static SHOWN: AtomicBool = AtomicBool::new(false);

/// The main screen back if a dashboard holds it: for a second Ctrl-C, which ends the
/// process at once (`interrupt::watch`) without the dashboard's own restore.
pub(super) fn restore_if_shown() {
    if SHOWN.load(Ordering::SeqCst) {
        restore();
    }
}

/// The main screen back, with its cursor.
fn restore() {
    SHOWN.store(false, Ordering::SeqCst);
    let mut out = std::io::stdout();
    let _ = execute!(out, terminal::LeaveAlternateScreen, cursor::Show);
    let _ = out.flush();
}

fn draw(
    frame: &mut Frame,
    s: &LiveSnapshot,
    shape: &RunShape,
    elapsed: Duration,
    messages: &[String],
) {
    let [header, counts, latencies, bottom] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Min(4),
    ])
    .areas(frame.area());
    let [failures, notes] =
        Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(bottom);

    let rate = if shape.request_rate.is_infinite() {
        "inf".to_owned()
    } else {
        format!("{} req/s", shape.request_rate)
    };
    let cap = shape
        .max_concurrency
        .map_or_else(|| "none".to_owned(), |c| c.to_string());
    frame.render_widget(
        Paragraph::new(format!(
            "Elapsed: {:.1} s{}   Request rate: {rate}   Max concurrency: {cap}   (Ctrl-C stops the run; the result follows)",
            elapsed.as_secs_f64(),
            shape
                .duration
                .map(|d| format!(" of {:.0} s", d.as_secs_f64()))
                .unwrap_or_default()
        ))
        .block(Block::bordered().title(" bench serve: live dashboard ".bold())),
        header,
    );

    let ended = s.completed + s.failed + s.cancelled;
    let in_flight = s.sent.saturating_sub(ended);
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let lines = vec![
        Line::from(match shape.duration {
            // A timed run's number of requests is known when it ends.
            Some(_) => format!(
                "Sent: {}   Completed: {}   Failed: {}   Cancelled: {}",
                s.sent, s.completed, s.failed, s.cancelled
            ),
            None => format!(
                "Sent: {} / {}   Completed: {}   Failed: {}   Cancelled: {}",
                s.sent, shape.requests, s.completed, s.failed, s.cancelled
            ),
        }),
        Line::from(format!("In flight: {in_flight}")),
        Line::from(format!(
            "Request throughput: {:.2} req/s   Output token throughput: {:.1} tok/s",
            s.completed as f64 / seconds,
            s.output_tokens as f64 / seconds
        )),
        Line::from(format!("Output tokens: {}", s.output_tokens)),
        Line::from(match s.schedule_lag() {
            lag if lag.is_empty() => "Schedule lag: -".to_owned(),
            lag => format!(
                "Schedule lag (ms): p50 {:.2}   p99 {:.2}   max {:.2}",
                lag.value_at_quantile(0.5) as f64 / 1000.0,
                lag.value_at_quantile(0.99) as f64 / 1000.0,
                lag.max() as f64 / 1000.0
            ),
        }),
    ];
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Requests (since the start) ")),
        counts,
    );

    let rows = LiveMetric::ALL.into_iter().map(|metric| {
        let h = s.histogram(metric);
        let ms = |micros: f64| format!("{:.2}", micros / 1000.0);
        let mut cells = vec![metric.name().to_uppercase(), h.len().to_string()];
        if h.is_empty() {
            cells.extend(std::iter::repeat_n("-".to_owned(), 1 + QUANTILES.len()));
        } else {
            cells.push(ms(h.mean()));
            cells.extend(
                QUANTILES
                    .iter()
                    .map(|(_, q)| ms(h.value_at_quantile(*q) as f64)),
            );
        }
        Row::new(cells)
    });
    let header_row = Row::new(
        ["Metric (ms)", "Count", "Mean"]
            .into_iter()
            .chain(QUANTILES.iter().map(|(name, _)| *name)),
    )
    .style(Style::new().bold());
    frame.render_widget(
        Table::new(rows, [Constraint::Length(12); 2 + 1 + QUANTILES.len()])
            .header(header_row)
            .block(Block::bordered().title(" Latencies so far ")),
        latencies,
    );

    let mut failure_lines: Vec<Line> = if s.failures_by_kind.is_empty() {
        vec![Line::from("none")]
    } else {
        s.failures_by_kind
            .iter()
            .map(|(kind, n)| Line::from(format!("{kind}: {n}")))
            .collect()
    };
    // The server's gauges at the latest read of its /metrics, under the failures.
    if !s.server_gauges.is_empty() {
        failure_lines.push(Line::from(""));
        failure_lines.push(Line::from("Server /metrics:".bold()));
    }
    for (source, gauges) in &s.server_gauges {
        if s.server_gauges.len() > 1 {
            failure_lines.push(Line::from(source.as_str()));
        }
        failure_lines.extend(
            gauges
                .iter()
                .map(|(name, value)| Line::from(format!("{name}: {value}"))),
        );
    }
    frame.render_widget(
        Paragraph::new(failure_lines)
            .block(Block::bordered().title(" Failures by kind, server gauges ")),
        failures,
    );
    // The latest messages that fit.
    let room = usize::from(notes.height.saturating_sub(2));
    let latest: Vec<Line> = messages
        .iter()
        .skip(messages.len().saturating_sub(room))
        .map(|m| Line::from(m.as_str()))
        .collect();
    frame.render_widget(
        Paragraph::new(latest).block(Block::bordered().title(" Warnings and notes ")),
        notes,
    );
}
