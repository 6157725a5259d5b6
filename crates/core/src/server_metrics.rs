//! What the server itself reports about a run: its Prometheus `/metrics` counters read
//! before and after the run, and the difference. vLLM exposes `/metrics` always,
//! llama.cpp's `llama-server` with `--metrics`; a server without it (or with none of the
//! counters below) gets a note, never a failure.
//!
//! Today that is the prefix cache: how many prompt tokens the server took from its cache
//! rather than computing them, so a run against a warm cache (the same seed twice, say)
//! says so instead of silently reporting a faster TTFT. The scrape happens outside the
//! timed run (after the warm-up, before the first request, and after the last response).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The counters of one server family: prompt tokens served from the prefix cache, and the
/// prompt tokens it was asked for (cached or not), each a sum of Prometheus series.
struct CacheCounters {
    server: &'static str,
    /// Counters whose sum is the prompt tokens taken from the cache.
    hits: &'static [&'static str],
    /// Counters whose sum is every prompt token the server looked up.
    queries: &'static [&'static str],
}

/// The servers whose cache counters we know, checked against their sources: vLLM's
/// `v1/metrics/loggers.py` (0.32) and llama.cpp's `server-task.cpp` (`to_metrics`, where
/// `prompt_tokens_total` excludes the cached tokens).
const CACHE_COUNTERS: &[CacheCounters] = &[
    CacheCounters {
        server: "vllm",
        hits: &["vllm:prefix_cache_hits_total"],
        queries: &["vllm:prefix_cache_queries_total"],
    },
    CacheCounters {
        server: "llama.cpp",
        hits: &["llamacpp:prompt_tokens_cached_total"],
        queries: &[
            "llamacpp:prompt_tokens_total",
            "llamacpp:prompt_tokens_cached_total",
        ],
    },
];

/// Metric values by name (labels dropped, series of one name summed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot(HashMap<String, f64>);

impl Snapshot {
    /// Parses the Prometheus text format: `name{labels} value [timestamp]` per line,
    /// `#` lines are comments. Lines that do not parse are skipped: a scrape reports what
    /// it can read and never fails a run.
    pub fn parse(text: &str) -> Snapshot {
        let mut values: HashMap<String, f64> = HashMap::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // The name ends at `{` or at whitespace; the labels may hold spaces inside quotes.
            let name_end = line
                .find(|c: char| c == '{' || c.is_whitespace())
                .unwrap_or(line.len());
            let name = &line[..name_end];
            let rest = &line[name_end..];
            let after_labels = if rest.starts_with('{') {
                match closing_brace(rest) {
                    Some(end) => &rest[end + 1..],
                    None => continue,
                }
            } else {
                rest
            };
            let Some(value) = after_labels.split_whitespace().next() else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            if name.is_empty() || !value.is_finite() {
                continue;
            }
            *values.entry(name.to_owned()).or_default() += value;
        }
        Snapshot(values)
    }

    fn sum(&self, names: &[&str]) -> Option<f64> {
        let found: Vec<f64> = names
            .iter()
            .filter_map(|n| self.0.get(*n))
            .copied()
            .collect();
        (found.len() == names.len()).then(|| found.iter().sum())
    }
}

/// The index of the `}` that closes the label set `s` starts with, skipping quoted values.
fn closing_brace(s: &str) -> Option<usize> {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(i),
            _ => {}
        }
    }
    None
}

/// What the server's counters say happened during the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerCache {
    /// Which server's counters were read (`vllm`, `llama.cpp`).
    pub server: &'static str,
    /// Prompt tokens the server took from its prefix cache during the run.
    pub cached_prompt_tokens: u64,
    /// Prompt tokens it looked up in the cache (cached or computed) during the run.
    pub queried_prompt_tokens: u64,
}

impl ServerCache {
    /// Cached over queried prompt tokens; 0 when nothing was queried.
    pub fn hit_rate(&self) -> f64 {
        if self.queried_prompt_tokens == 0 {
            0.0
        } else {
            self.cached_prompt_tokens as f64 / self.queried_prompt_tokens as f64
        }
    }

    /// The difference between two scrapes of the same server, from the first family of
    /// counters both have; `None` when neither has any.
    pub fn between(before: &Snapshot, after: &Snapshot) -> Option<ServerCache> {
        CACHE_COUNTERS.iter().find_map(|family| {
            let delta = |names: &[&str]| -> Option<u64> {
                let d = after.sum(names)? - before.sum(names)?;
                // A counter that went down was reset (a restarted server): no figure.
                (d >= 0.0).then_some(d.round() as u64)
            };
            Some(ServerCache {
                server: family.server,
                cached_prompt_tokens: delta(family.hits)?,
                queried_prompt_tokens: delta(family.queries)?,
            })
        })
    }
}

/// Reads `{base_url}/metrics` (a few seconds at most).
pub async fn scrape(base_url: &str) -> Result<Snapshot> {
    let url = format!("{}/metrics", base_url.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .context("building the HTTP client for /metrics")?;
    let response = client
        .get(&url)
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
    Ok(Snapshot::parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_is_summed_by_name_across_label_sets() {
        let text = r#"
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 96.0
vllm:prefix_cache_hits_total{engine="1",model_name="a } b \" c"} 4.0 1700000000000
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000
llamacpp:prompt_tokens_total 12
broken{no_end="x" 5
nan_metric NaN
not_a_number abc
"#;
        let s = Snapshot::parse(text);
        assert_eq!(s.0.get("vllm:prefix_cache_hits_total"), Some(&100.0));
        assert_eq!(s.0.get("vllm:prefix_cache_queries_total"), Some(&1000.0));
        assert_eq!(s.0.get("llamacpp:prompt_tokens_total"), Some(&12.0));
        assert_eq!(s.0.len(), 3, "{s:?}");
    }

    #[test]
    fn the_run_is_the_difference_of_two_scrapes() {
        let before = Snapshot::parse(
            "llamacpp:prompt_tokens_total 500\nllamacpp:prompt_tokens_cached_total 20\n",
        );
        let after = Snapshot::parse(
            "llamacpp:prompt_tokens_total 600\nllamacpp:prompt_tokens_cached_total 920\n",
        );
        let cache = ServerCache::between(&before, &after).unwrap();
        assert_eq!(cache.server, "llama.cpp");
        // 900 cached, 100 computed: 1,000 looked up.
        assert_eq!(cache.cached_prompt_tokens, 900);
        assert_eq!(cache.queried_prompt_tokens, 1000);
        assert!((cache.hit_rate() - 0.9).abs() < 1e-12);

        let vllm_before =
            Snapshot::parse("vllm:prefix_cache_hits_total 0\nvllm:prefix_cache_queries_total 10\n");
        let vllm_after = Snapshot::parse(
            "vllm:prefix_cache_hits_total 64\nvllm:prefix_cache_queries_total 138\n",
        );
        let cache = ServerCache::between(&vllm_before, &vllm_after).unwrap();
        assert_eq!((cache.server, cache.cached_prompt_tokens), ("vllm", 64));
        assert_eq!(cache.queried_prompt_tokens, 128);
    }

    #[test]
    fn no_known_counters_or_a_reset_give_no_figure() {
        let other = Snapshot::parse("process_cpu_seconds_total 3\n");
        assert_eq!(ServerCache::between(&other, &other), None);
        let before = Snapshot::parse(
            "vllm:prefix_cache_hits_total 50\nvllm:prefix_cache_queries_total 60\n",
        );
        let restarted =
            Snapshot::parse("vllm:prefix_cache_hits_total 1\nvllm:prefix_cache_queries_total 2\n");
        assert_eq!(ServerCache::between(&before, &restarted), None);
    }

    #[test]
    fn scraping_reads_the_servers_metrics_endpoint() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let n = conn.read(&mut request).unwrap();
            let body = "llamacpp:prompt_tokens_cached_total 7\n";
            write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let s = rt.block_on(scrape(&format!("http://{addr}/"))).unwrap();
        assert_eq!(s.0.get("llamacpp:prompt_tokens_cached_total"), Some(&7.0));
        let request = server.join().unwrap();
        assert!(
            request.starts_with("GET /metrics HTTP/1.1\r\n"),
            "{request}"
        );
    }
}
