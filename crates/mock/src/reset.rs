//! vLLM's cache resets, `POST /reset_prefix_cache`, `/reset_mm_cache` and
//! `/reset_encoder_cache` (what `bench sweep serve` calls between benchmark runs): the
//! first empties the stand-in prefix cache (see [`crate::prefix_cache`]), the others have
//! nothing to empty; each answers 200 and is counted and logged (at info, target
//! `bench_mock`), so that a test in another process can see from the server's log that
//! the sweep reset it. `GET /mock/resets` returns the counts.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;

/// How many times each reset endpoint was called.
#[derive(Debug, Default)]
pub(super) struct Resets {
    pub(super) prefix: AtomicU64,
    pub(super) mm: AtomicU64,
    pub(super) encoder: AtomicU64,
}

impl Resets {
    pub(super) fn count(&self, endpoint: &'static str, counter: &AtomicU64) -> StatusCode {
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(target: "bench_mock", "{endpoint}: reset {n}");
        StatusCode::OK
    }
}
