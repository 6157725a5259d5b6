//! `/metrics` read: the Prometheus text format parsed into a [`Snapshot`], and the
//! [`Scraper`] that fetches it.

use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::spec_decode;
use crate::client::Tls;

/// One line of the exposition: a series and its value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    pub(super) name: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) value: f64,
}

/// One scrape of `/metrics`: every series that parsed, and vLLM's speculative-decoding
/// counters read with vLLM's own rules (which differ from a Prometheus parser's at the
/// edges, see [`spec_decode::SpecDecodeCounters`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub(super) samples: Vec<Sample>,
    pub(super) spec_decode: Option<spec_decode::SpecDecodeCounters>,
}

impl Snapshot {
    /// Parses the Prometheus text format: `name{labels} value [timestamp]` per line,
    /// `#` lines are comments. Lines that do not parse are skipped: a scrape reports what
    /// it can read and never fails a run.
    pub fn parse(text: &str) -> Snapshot {
        let mut samples = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(sample) = parse_line(line) {
                samples.push(sample);
            }
        }
        Snapshot {
            samples,
            spec_decode: spec_decode::SpecDecodeCounters::parse(text),
        }
    }

    /// Whether no series parsed (an empty body, or text that is not the exposition format).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Whether any series' name starts with `prefix` (a server family's namespace).
    pub(super) fn has_prefix(&self, prefix: &str) -> bool {
        self.samples.iter().any(|s| s.name.starts_with(prefix))
    }

    /// The series of `name`, with their labels.
    fn series<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The sum of every series of `name` (a counter across engines or label sets);
    /// `None` when there is none.
    pub fn total(&self, name: &str) -> Option<f64> {
        self.series(name)
            .map(|s| s.value)
            .fold(None, |acc, v| Some(acc.unwrap_or(0.0) + v))
    }

    /// The largest series of `name` (a ratio gauge reported per engine or rank).
    pub fn max(&self, name: &str) -> Option<f64> {
        self.series(name)
            .map(|s| s.value)
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            })
    }

    /// The sum of `names`' totals; `None` unless every one is present.
    pub(super) fn sum(&self, names: &[&str]) -> Option<f64> {
        names.iter().map(|n| self.total(n)).sum()
    }

    /// The value of label `label` on the first series of `name` that has it.
    #[cfg(test)]
    pub(super) fn label<'a>(&'a self, name: &'a str, label: &str) -> Option<&'a str> {
        self.series(name)
            .flat_map(|s| s.labels.iter())
            .find(|(k, _)| k == label)
            .map(|(_, v)| v.as_str())
    }
}

/// `name{labels} value [timestamp]`; `None` when the line is not a finite sample.
fn parse_line(line: &str) -> Option<Sample> {
    // The name ends at `{` or at whitespace; the labels may hold anything inside quotes.
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    value.is_finite().then(|| Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `a="x",b="y \" z"}` (the text after `{`): the labels and the text after the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.push((key, value));
        s = &s[end + 1..];
    }
}

/// Reads a server's `/metrics`, over one connection kept for the run.
#[derive(Debug, Clone)]
pub struct Scraper {
    url: String,
    client: reqwest::Client,
}

impl Scraper {
    /// A scraper of `{base_url}/metrics` whose scrapes give up after `timeout`; `tls` as
    /// for the run's requests (`--insecure`).
    pub fn new(base_url: &str, timeout: Duration, tls: Tls) -> Result<Scraper> {
        let client = crate::client::reqwest_builder(tls)
            .timeout(timeout)
            .pool_max_idle_per_host(1)
            .build()
            .context("building the HTTP client for /metrics")?;
        Ok(Scraper {
            url: format!("{}/metrics", base_url.trim_end_matches('/')),
            client,
        })
    }

    /// One scrape: an error for a refused connection, a timeout, an HTTP error status or
    /// a body that holds no metrics at all.
    pub async fn scrape(&self) -> Result<Snapshot> {
        let url = &self.url;
        let response = self
            .client
            .get(url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = response.status();
        if !status.is_success() {
            bail!("GET {url}: HTTP {status}");
        }
        let text = response
            .text()
            .await
            .with_context(|| format!("GET {url}: reading the body"))?;
        let snapshot = Snapshot::parse(&text);
        if snapshot.is_empty() {
            bail!("GET {url}: no Prometheus metrics in the answer");
        }
        Ok(snapshot)
    }
}

/// Reads `{base_url}/metrics` once (a few seconds at most).
pub async fn scrape(base_url: &str, tls: Tls) -> Result<Snapshot> {
    Scraper::new(base_url, Duration::from_secs(5), tls)?
        .scrape()
        .await
}
