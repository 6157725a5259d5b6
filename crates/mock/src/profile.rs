//! vLLM's profiler endpoints, `POST /start_profile` and `POST /stop_profile` (what
//! `bench serve --profile` calls around its run): each answers 200 with an empty body, as
//! a vLLM server started with a profiler configuration does, and is recorded with how many
//! streamed requests the server had finished by then, so a test can tell that the
//! profiler was started before the run's first request and stopped after its last.
//! `GET /mock/profile` returns the record to clients in another process.

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use serde::Serialize;

use crate::timing::TimingRecorder;

/// One call to a profiler endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileCall {
    /// `/start_profile` or `/stop_profile`.
    pub path: &'static str,
    /// Streamed requests with an `x-request-id` the server had finished when the call
    /// arrived (the entries of `GET /mock/requests` then).
    pub finished_requests: usize,
    /// The call's `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// The profiler calls received, in arrival order.
#[derive(Debug)]
pub struct ProfileLog {
    calls: Mutex<Vec<ProfileCall>>,
    timing: Arc<TimingRecorder>,
}

impl ProfileLog {
    pub fn new(timing: Arc<TimingRecorder>) -> ProfileLog {
        ProfileLog {
            calls: Mutex::default(),
            timing,
        }
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<ProfileCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn record(&self, path: &'static str, headers: &HeaderMap) -> StatusCode {
        let call = ProfileCall {
            path,
            finished_requests: self.timing.requests().len(),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        };
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
        StatusCode::OK
    }
}

/// The profiler endpoints and `GET /mock/profile`, over `log`.
pub fn router(log: Arc<ProfileLog>) -> Router {
    Router::new()
        .route(
            "/start_profile",
            post(
                |State(log): State<Arc<ProfileLog>>, headers: HeaderMap| async move {
                    log.record("/start_profile", &headers)
                },
            ),
        )
        .route(
            "/stop_profile",
            post(
                |State(log): State<Arc<ProfileLog>>, headers: HeaderMap| async move {
                    log.record("/stop_profile", &headers)
                },
            ),
        )
        .route(
            "/mock/profile",
            get(|State(log): State<Arc<ProfileLog>>| async move { axum::Json(log.calls()) }),
        )
        .with_state(log)
}
