//! The mock's stand-in for a prefix cache, and its Prometheus `/metrics`.
//!
//! With `--prefix-cache`, a generation request whose body is byte for byte one the server
//! has answered before counts all its prompt tokens as served from the cache (same seed,
//! same workload: a warm cache). That is coarser than a real server's block-level prefix
//! matching, and enough to test that a client notices a warm cache. `/metrics` exposes the
//! counters under vLLM's names (`vllm:prefix_cache_queries_total`,
//! `vllm:prefix_cache_hits_total`, in tokens), so bench reads the mock as it reads vLLM.
//! Answers report the tokens served from the cache in `usage.prompt_tokens_details.cached_tokens`,
//! as vLLM does. Without `--prefix-cache` nothing is hashed, every lookup misses, and
//! usage has no such member.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(super) struct PrefixCache {
    /// `None` when the cache is off.
    seen: Option<Mutex<HashSet<u64>>>,
    hasher: RandomState,
    queries: AtomicU64,
    hits: AtomicU64,
}

impl PrefixCache {
    pub(super) fn new(enabled: bool) -> PrefixCache {
        PrefixCache {
            seen: enabled.then(Mutex::default),
            ..PrefixCache::default()
        }
    }

    /// Whether `--prefix-cache` is on (answers then report their cached tokens).
    pub(super) fn enabled(&self) -> bool {
        self.seen.is_some()
    }

    /// Looks a request up: the prompt tokens it takes from the cache (all or none), after
    /// which the request is in the cache.
    pub(super) fn lookup(&self, body: &[u8], prompt_tokens: u32) -> u32 {
        self.queries
            .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
        let Some(seen) = &self.seen else {
            return 0;
        };
        let key = self.hasher.hash_one(body);
        let hit = !seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key);
        if !hit {
            return 0;
        }
        self.hits
            .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
        prompt_tokens
    }

    /// Forgets every request seen (vLLM's `/reset_prefix_cache`); the counters go on.
    pub(super) fn reset(&self) {
        if let Some(seen) = &self.seen {
            seen.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clear();
        }
    }

    /// The counters in the Prometheus text format.
    pub(super) fn metrics_text(&self) -> String {
        let queries = self.queries.load(Ordering::Relaxed);
        let hits = self.hits.load(Ordering::Relaxed);
        format!(
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.\n\
             # TYPE vllm:prefix_cache_queries_total counter\n\
             vllm:prefix_cache_queries_total{{model_name=\"mock\"}} {queries}.0\n\
             # HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n\
             # TYPE vllm:prefix_cache_hits_total counter\n\
             vllm:prefix_cache_hits_total{{model_name=\"mock\"}} {hits}.0\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the counter `name` in the exposition text.
    fn counter(text: &str, name: &str) -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in:\n{text}"))
    }

    #[test]
    fn a_repeated_body_is_a_hit_and_the_counters_say_so() {
        let cache = PrefixCache::new(true);
        assert_eq!(cache.lookup(b"{\"prompt\":\"a b c\"}", 3), 0);
        assert_eq!(cache.lookup(b"{\"prompt\":\"d e\"}", 2), 0);
        assert_eq!(cache.lookup(b"{\"prompt\":\"a b c\"}", 3), 3);
        let text = cache.metrics_text();
        assert_eq!(counter(&text, "vllm:prefix_cache_queries_total"), 8.0);
        assert_eq!(counter(&text, "vllm:prefix_cache_hits_total"), 3.0);
    }

    #[test]
    fn a_reset_forgets_what_was_seen() {
        let cache = PrefixCache::new(true);
        assert_eq!(cache.lookup(b"same", 2), 0);
        cache.reset();
        assert_eq!(cache.lookup(b"same", 2), 0);
        assert_eq!(cache.lookup(b"same", 2), 2);
    }

    #[test]
    fn without_the_flag_nothing_is_cached() {
        let cache = PrefixCache::new(false);
        assert_eq!(cache.lookup(b"same", 5), 0);
        assert_eq!(cache.lookup(b"same", 5), 0);
        let text = cache.metrics_text();
        assert_eq!(counter(&text, "vllm:prefix_cache_queries_total"), 10.0);
        assert_eq!(counter(&text, "vllm:prefix_cache_hits_total"), 0.0);
    }
}
