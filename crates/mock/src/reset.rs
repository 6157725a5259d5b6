//! vLLM's cache resets, `POST /reset_prefix_cache`, `/reset_mm_cache` and
//! `/reset_encoder_cache` (what `bench sweep serve` calls between benchmark runs): the
//! first empties the stand-in prefix cache (see [`crate::prefix_cache`]), the others have
//! nothing to empty; each answers 200 and is counted and logged (at info, target
//! `bench_mock`), so that a test in another process can see from the server's log that
//! the sweep reset it. `GET /mock/resets` returns the counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};

use crate::Shared;

/// How many times each reset endpoint was called.
#[derive(Debug, Default)]
pub(super) struct Resets {
    prefix: AtomicU64,
    mm: AtomicU64,
    encoder: AtomicU64,
}

impl Resets {
    fn count(&self, endpoint: &'static str, counter: &AtomicU64) -> StatusCode {
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(target: "bench_mock", "{endpoint}: reset {n}");
        StatusCode::OK
    }
}

pub(super) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/reset_prefix_cache",
            post(|State(shared): State<Arc<Shared>>| async move {
                shared.prefix_cache.reset();
                let resets = &shared.resets;
                resets.count("/reset_prefix_cache", &resets.prefix)
            }),
        )
        .route(
            "/reset_mm_cache",
            post(|State(shared): State<Arc<Shared>>| async move {
                let resets = &shared.resets;
                resets.count("/reset_mm_cache", &resets.mm)
            }),
        )
        .route(
            "/reset_encoder_cache",
            post(|State(shared): State<Arc<Shared>>| async move {
                let resets = &shared.resets;
                resets.count("/reset_encoder_cache", &resets.encoder)
            }),
        )
        .route(
            "/mock/resets",
            get(|State(shared): State<Arc<Shared>>| async move {
                let r = &shared.resets;
                axum::Json(serde_json::json!({
                    "reset_prefix_cache": r.prefix.load(Ordering::Relaxed),
                    "reset_mm_cache": r.mm.load(Ordering::Relaxed),
                    "reset_encoder_cache": r.encoder.load(Ordering::Relaxed),
                }))
            }),
        )
}
