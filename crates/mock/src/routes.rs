//! The mock server's routes: every endpoint and the handler that answers it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::time::Instant;

use crate::ServerFamily;
use crate::audio::{Upload, parse};
use crate::conn::Conn;
use crate::reply::Api;
use crate::server::{MAX_BODY_BYTES, Shared, error_response, generate};
use crate::{pooling, timing, tokenize};

pub(crate) fn router(shared: Arc<Shared>, tokenize: bool) -> Router {
    let router = if tokenize {
        Router::new()
            .route("/tokenize", post(tokenize::tokenize))
            .route("/detokenize", post(tokenize::detokenize))
    } else {
        Router::new()
    };
    router
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/generate_stream", post(tgi_generate_stream))
        .route(
            "/v2/models/{model}/generate_stream",
            post(triton_generate_stream),
        )
        .route("/generate", post(sglang_generate))
        .route("/completion", post(llama_cpp_completion))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        .route("/v1/audio/transcriptions", post(transcriptions))
        .route("/v1/audio/translations", post(translations))
        .route("/v1/embeddings", post(pooling::embeddings))
        .route("/embeddings", post(pooling::infinity_embeddings))
        .route("/pooling", post(pooling::pooling))
        .route("/rerank", post(pooling::rerank))
        .route("/v1/rerank", post(pooling::rerank))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/mock/timing", get(timing_report))
        .route("/mock/requests", get(requests_report))
        .route("/mock/aborted", get(aborted_report))
        .route("/mock/structured", get(structured_report))
        .route("/mock/answers", get(answers_report))
        .merge(resets())
        .with_state(shared)
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Completions, &conn, request).await
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Chat, &conn, request).await
}

/// TGI's `/generate_stream`.
async fn tgi_generate_stream(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Tgi, &conn, request).await
}

/// Triton's `/v2/models/<model>/generate_stream` (TensorRT-LLM's `ensemble`); any model
/// name is served.
async fn triton_generate_stream(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Triton, &conn, request).await
}

/// SGLang's native `/generate`.
async fn sglang_generate(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Sglang, &conn, request).await
}

/// llama.cpp's native `/completion`.
async fn llama_cpp_completion(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::LlamaCpp, &conn, request).await
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": shared.model,
            "object": "model",
            "created": shared.started,
            "owned_by": "bench-mock",
            "root": shared.model,
            "parent": null,
        }],
    }))
    .into_response()
}

/// vLLM's `/health`: 200 with an empty body once the server can take requests.
/// Prometheus metrics: a server family's that follow the load when asked for (see
/// [`ServerMetrics`]), else vLLM's prefix-cache counters (see [`prefix_cache`]), which
/// the vLLM family shows too.
async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let text = match shared.load.family() {
        None | Some(ServerFamily::Vllm) => shared.prefix_cache.metrics_text(),
        Some(ServerFamily::None) => return StatusCode::NOT_FOUND.into_response(),
        Some(_) => String::new(),
    } + &shared.load.metrics_text(Instant::now());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn health() -> StatusCode {
    StatusCode::OK
}

/// The server's own timing so far, for clients in another process (scripts/perf.sh).
async fn timing_report(State(shared): State<Arc<Shared>>) -> axum::Json<timing::TimingSnapshot> {
    axum::Json(shared.timing.snapshot())
}

/// The server's per-request timing, for clients in another process (scripts/perf.sh).
async fn requests_report(
    State(shared): State<Arc<Shared>>,
) -> axum::Json<Vec<timing::RequestTiming>> {
    axum::Json(shared.timing.requests())
}

/// The ids of the requests whose client went away early, for clients in another process.
async fn aborted_report(State(shared): State<Arc<Shared>>) -> axum::Json<Vec<String>> {
    axum::Json(shared.timing.aborted_ids())
}

/// The output constraints of the requests and whether their answers kept them.
async fn structured_report(
    State(shared): State<Arc<Shared>>,
) -> axum::Json<Vec<crate::structured::StructuredAnswer>> {
    axum::Json(shared.structured.list())
}

/// The requests that asked a question of the answer key and whether their answers were
/// right.
async fn answers_report(
    State(shared): State<Arc<Shared>>,
) -> axum::Json<Vec<crate::answers::GradedAnswer>> {
    axum::Json(shared.answers.list())
}

/// `POST /v1/responses`.
async fn responses(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Responses, &conn, request).await
}

/// `POST /v1/messages`.
async fn messages(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    generate(&shared, Api::Messages, &conn, request).await
}

/// `POST /v1/audio/transcriptions`.
async fn transcriptions(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    audio(&shared, "transcriptions", &conn, request).await
}

/// `POST /v1/audio/translations`.
async fn translations(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    audio(&shared, "translations", &conn, request).await
}

/// Records the upload, then answers as every generation request is answered.
async fn audio(shared: &Shared, endpoint: &str, conn: &Conn, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(err) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the request body: {err}"),
            );
        }
    };
    let form = match parse(&body) {
        Ok(form) => form,
        Err(err) => {
            return error_response(StatusCode::BAD_REQUEST, &format!("invalid request: {err}"));
        }
    };
    let Some(file) = &form.file else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "invalid request: the form has no `file` part",
        );
    };
    shared.uploads.push(Upload {
        request_id: parts
            .headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        endpoint: endpoint.to_owned(),
        file_name: file.file_name.clone(),
        content_type: file.content_type.clone(),
        file_bytes: file.bytes,
        fields: form.fields.clone(),
    });
    let request = Request::from_parts(parts, Body::from(body));
    generate(shared, Api::Audio, conn, request).await
}

/// The cache resets vLLM serves (see `reset.rs`).
fn resets() -> Router<Arc<Shared>> {
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
