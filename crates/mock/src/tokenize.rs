//! vLLM's `POST /tokenize` and `POST /detokenize`, served with `--tokenize`.
//!
//! The tokenizer is one token per Unicode character, the token id being the character's
//! code point: no client tokenizer agrees with it, so a client that re-aligns its prompts
//! to the server's tokenizer (vLLM's client does, for `random` prompts) visibly does so.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
pub(super) struct TokenizeRequest {
    prompt: String,
}

#[derive(Deserialize)]
pub(super) struct DetokenizeRequest {
    tokens: Vec<u32>,
}

/// `{"count", "max_model_len", "tokens"}`, as vLLM answers.
pub(super) async fn tokenize(Json(request): Json<TokenizeRequest>) -> Response {
    let tokens: Vec<u32> = request.prompt.chars().map(u32::from).collect();
    Json(json!({"count": tokens.len(), "max_model_len": 1 << 20, "tokens": tokens})).into_response()
}

/// `{"prompt"}`; a token that is not a character's code point is a 400.
pub(super) async fn detokenize(Json(request): Json<DetokenizeRequest>) -> Response {
    match request
        .tokens
        .iter()
        .map(|&t| char::from_u32(t).ok_or(t))
        .collect::<Result<String, u32>>()
    {
        Ok(prompt) => Json(json!({ "prompt": prompt })).into_response(),
        Err(t) => {
            super::server::error_response(StatusCode::BAD_REQUEST, &format!("unknown token {t}"))
        }
    }
}
