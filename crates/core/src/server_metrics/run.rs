//! The scrapes of one run: before the clock, at an interval during the run (an option),
//! after the last response, and the notes that say what was not found.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::report::ServerReport;
use super::scrape::{Scraper, Snapshot, scrape};
use crate::client::Tls;
use crate::client::live::LiveStats;
use crate::observer::{Event, Observer};

/// Whether and how often a run reads the server's `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScrapeConfig {
    /// Read it before and after the run (`--no-server-metrics` turns it off).
    pub enabled: bool,
    /// Also read it every so often during the run (`--server-metrics-interval`), for the
    /// peaks of gauges and the timeline.
    pub interval: Option<Duration>,
}

impl Default for ScrapeConfig {
    fn default() -> Self {
        ScrapeConfig {
            enabled: true,
            interval: None,
        }
    }
}

/// The scrapes taken during the run.
#[derive(Debug, Default)]
pub struct Scrapes {
    /// Seconds since the run started, and what was read then.
    pub points: Vec<(f64, Snapshot)>,
    /// Scrapes that failed (timed out, refused, an error status) and were skipped.
    pub failed: usize,
}

/// The task that reads `/metrics` during the run: its own task on the client's runtime,
/// one kept connection, each read cut off before the next is due, so that it never
/// queues reads or holds the send path; a failed read is counted and skipped.
pub struct Interval {
    stop: watch::Sender<()>,
    task: JoinHandle<Scrapes>,
}

impl Interval {
    /// Starts reading `{base_url}/metrics` every `every` (the first read at once).
    /// With `live`, each read's gauges also go there, under `source`.
    pub fn start(
        base_url: &str,
        every: Duration,
        tls: Tls,
        live: Option<(Arc<LiveStats>, String)>,
    ) -> Result<Interval> {
        // Shorter than the interval, so a slow server never has two reads in flight.
        let timeout = every.mul_f64(0.8).min(Duration::from_secs(5));
        let scraper = Scraper::new(base_url, timeout, tls)?;
        let (stop, mut stopped) = watch::channel(());
        let task = tokio::spawn(async move {
            let start = Instant::now();
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut scrapes = Scrapes::default();
            loop {
                tokio::select! {
                    // Raised, or the sender dropped: the run is over.
                    _ = stopped.changed() => break,
                    _ = ticks.tick() => {}
                }
                let t = start.elapsed().as_secs_f64();
                tokio::select! {
                    _ = stopped.changed() => break,
                    read = scraper.scrape() => match read {
                        Ok(snapshot) => {
                            if let Some((live, source)) = &live {
                                let gauges = super::report::live_gauges(&snapshot);
                                live.set_server_gauges(source, gauges);
                            }
                            scrapes.points.push((t, snapshot));
                        }
                        Err(_) => scrapes.failed += 1,
                    },
                }
            }
            scrapes
        });
        Ok(Interval { stop, task })
    }

    /// Stops the reads and returns them.
    pub async fn finish(self) -> Scrapes {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// A run's scrapes, from before the clock to the report.
#[derive(Default)]
pub struct RunScrapes {
    config: ScrapeConfig,
    /// Certificate checks for https, as for the run's requests (`--insecure`).
    tls: Tls,
    base_url: String,
    /// With several servers: the one these scrapes read, named in the notes.
    name: Option<String>,
    /// The scrape before the clock; `None` when scraping is off or not done yet.
    before: Option<Result<Snapshot>>,
    during: Option<Interval>,
}

impl RunScrapes {
    pub fn new(base_url: &str, config: ScrapeConfig, tls: Tls) -> RunScrapes {
        RunScrapes {
            config,
            tls,
            base_url: base_url.to_owned(),
            name: None,
            before: None,
            during: None,
        }
    }

    /// The same scrapes, their notes starting with `name` (one of several servers).
    pub fn named(self, name: &str) -> RunScrapes {
        RunScrapes {
            name: Some(name.to_owned()),
            ..self
        }
    }

    /// The scrape before the clock starts (after the warm-ups, whose requests would
    /// otherwise count).
    pub async fn before_run(&mut self) {
        if self.config.enabled {
            self.before = Some(scrape(&self.base_url, self.tls).await);
        }
    }

    /// Starts the scrapes during the run, where asked and where the one before worked: a
    /// server without `/metrics` is not asked again and again. With `live`, each read's
    /// gauges also go there (under the server's name, or its URL).
    pub fn start(&mut self, live: Option<&Arc<LiveStats>>) -> Result<()> {
        if let (Some(Ok(_)), Some(every)) = (&self.before, self.config.interval) {
            let source = self.name.clone().unwrap_or_else(|| self.base_url.clone());
            let live = live.map(|l| (l.clone(), source));
            self.during = Some(Interval::start(&self.base_url, every, self.tls, live)?);
        }
        Ok(())
    }

    /// Stops the scrapes during the run (call as soon as the last response is in).
    pub async fn stop(&mut self) -> Scrapes {
        match self.during.take() {
            Some(during) => during.finish().await,
            None => Scrapes::default(),
        }
    }

    /// The scrape after the run and the report; a server without metrics bench knows
    /// gets a note, never an error, and so does every metric its family does not expose.
    pub async fn report(
        self,
        during: Scrapes,
        observer: &mut dyn Observer,
    ) -> Option<ServerReport> {
        let name = self.name.as_deref();
        let scraped = match self.before? {
            Ok(before) => scrape(&self.base_url, self.tls)
                .await
                .map(|after| (before, after)),
            Err(e) => Err(e),
        };
        let (before, after) = match scraped {
            Ok(scrapes) => scrapes,
            Err(e) => {
                note(observer, name, &format!("no server metrics ({e:#})"));
                return None;
            }
        };
        if during.failed > 0 {
            note(
                observer,
                name,
                &format!(
                    "{} of {} reads of the server's /metrics during the run failed and were skipped",
                    during.failed,
                    during.failed + during.points.len()
                ),
            );
        }
        let Some(report) = ServerReport::between(&before, &during.points, &after) else {
            note(
                observer,
                name,
                "the server's /metrics has none of the metrics bench knows (vLLM's, SGLang's, \
                 llama.cpp's, TGI's)",
            );
            return None;
        };
        if let Some(cache) = report.cache.filter(|c| c.cached_prompt_tokens > 0) {
            note(
                observer,
                name,
                &format!(
                    "the server served {} of {} prompt tokens ({:.1}%) from its prefix cache \
                 during this run; its TTFTs reflect that cache",
                    cache.cached_prompt_tokens,
                    cache.queried_prompt_tokens,
                    100.0 * cache.hit_rate()
                ),
            );
        }
        if !report.not_found.is_empty() {
            note(
                observer,
                name,
                &format!(
                    "not in the server's /metrics ({}): {}",
                    report.server,
                    report.not_found.join(", ")
                ),
            );
        }
        Some(report)
    }
}

/// A note of the scrapes' report, starting with the server's name when there are several.
fn note(observer: &mut dyn Observer, name: Option<&str>, text: &str) {
    match name {
        Some(name) => observer.event(Event::Note(&format!("{name}: {text}"))),
        None => observer.event(Event::Note(text)),
    }
}
