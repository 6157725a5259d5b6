//! What the server itself reports about a run: its Prometheus `/metrics` read before and
//! after the run (and, with `--server-metrics-interval`, during it), and what changed.
//! vLLM and SGLang expose `/metrics` always, llama.cpp's `llama-server` with `--metrics`,
//! TGI on its router's port; a server without it, or without the metrics below, gets a
//! note, never a failure.
//!
//! What is reported (see [`report`]): the prefix cache (prompt tokens the server took from
//! its cache rather than computing them, so a run against a warm cache says so instead of
//! silently reporting a faster TTFT), speculative decoding (vLLM's own
//! `spec_decode_*` result keys, computed as `vllm bench serve` computes them, see
//! [`spec_decode`]), preemptions, the server-side queue time, and the peaks of gauges
//! (KV-cache usage, requests running and waiting), which only a scrape during the run can
//! see. The before and after scrapes happen outside the timed run (after the warm-ups,
//! before the first request, and after the last response).

pub(crate) mod names;
pub mod report;
pub mod run;
pub mod scrape;
pub mod spec_decode;
#[cfg(test)]
mod tests;

pub use report::{ServerCache, ServerReport};
pub use run::{RunScrapes, ScrapeConfig};
pub use scrape::{Scraper, Snapshot, scrape};
