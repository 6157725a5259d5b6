//! Pooling APIs: embeddings, vLLM's pooling and rerank endpoints, and Infinity's
//! embeddings, for bench's pooling backends (vLLM's `POOLING_BACKENDS`).
//!
//! - `POST /v1/embeddings` (vLLM and OpenAI): `input` (a text, texts, token ids or lists
//!   of them) or vLLM's `messages` (chat messages, for multimodal embedding models);
//! - `POST /embeddings` (Infinity): `input` (a text or texts; with `modality` a URL);
//! - `POST /pooling` (vLLM): `input`, answered with `"object": "pooling"` items;
//! - `POST /rerank` and `POST /v1/rerank` (vLLM, Jina/Cohere-style): `query` and
//!   `documents`, answered with a relevance score per document, best first.
//!
//! Each answer is one JSON body, sent at the request's arrival + `ttft` (no tokens are
//! generated, so `itl` plays no part), with one result per input: an embedding of
//! [`DIMENSION`] numbers, or a score per document. `usage` is vLLM's: `prompt_tokens` and
//! `total_tokens` (the same), and for the embeddings and pooling APIs `completion_tokens:
//! 0` and `prompt_tokens_details: null`. Prompt tokens follow the mock's rough rule: a
//! text counts its whitespace-separated words, token ids their number, and a multimodal
//! item (an image part, or Infinity's URL) one token; a rerank request counts the query
//! once per document plus each document, as a cross-encoder reads the pairs.
//!
//! A request with an `x-request-id` header is recorded in `GET /mock/requests` like a
//! stream: `ttft_ms` is arrival to the hand-over of the body, `itl_ms` is empty. Requests
//! take their number and fault from the same plan as generation requests: HTTP errors
//! and resets apply to them; faults of streams (cuts, stalls, dribbling, in-band errors,
//! malformed chunks, empty answers, a missing `[DONE]`) do not, and such a request is
//! answered normally.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::conn::Conn;
use super::server::{MAX_BODY_BYTES, Shared, error_response, next_request, unix_now};
use super::timing;

/// The length of every embedding the mock returns.
pub const DIMENSION: usize = 16;

/// Which API a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PoolingApi {
    /// vLLM's and OpenAI's `/v1/embeddings`.
    Embeddings,
    /// Infinity's `/embeddings`.
    Infinity,
    /// vLLM's `/pooling`.
    Pooling,
    /// vLLM's `/rerank` and `/v1/rerank`.
    Rerank,
}

pub(super) async fn embeddings(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    pool(&shared, PoolingApi::Embeddings, &conn, request).await
}

pub(super) async fn infinity_embeddings(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    pool(&shared, PoolingApi::Infinity, &conn, request).await
}

pub(super) async fn pooling(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    pool(&shared, PoolingApi::Pooling, &conn, request).await
}

pub(super) async fn rerank(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
) -> Response {
    pool(&shared, PoolingApi::Rerank, &conn, request).await
}

async fn pool(shared: &Shared, api: PoolingApi, conn: &Conn, request: Request) -> Response {
    // When the request reached the socket, not when this handler got to it.
    let arrival = conn.arrival().map_or_else(Instant::now, Instant::from_std);
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|id| id.len() <= timing::MAX_ID_BYTES)
        .map(str::to_owned);
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(err) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the request body: {err}"),
            );
        }
    };
    let (k, _) = match next_request(shared, conn) {
        Ok(next) => next,
        Err(failed) => return *failed,
    };
    let answer = match answer(api, &body, k, unix_now(), &shared.model) {
        Ok(answer) => answer,
        Err(message) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("invalid request: {message}"),
            );
        }
    };
    let wants_bytes = api != PoolingApi::Rerank
        && serde_json::from_slice::<Value>(&body)
            .is_ok_and(|r| r.get("encoding_format") == Some(&json!("bytes")));
    let (body, metadata) = if wants_bytes {
        let (vectors, metadata) = as_bytes(answer);
        (Bytes::from(vectors), Some(metadata))
    } else {
        (Bytes::from(answer.to_string()), None)
    };
    tokio::time::sleep_until(arrival + shared.ttft).await;
    let since_arrival = Instant::now().saturating_duration_since(arrival);
    shared.timing.first_token(since_arrival);
    if let Some(id) = request_id {
        let mut pending = timing::PendingRequest::new(id, 0);
        pending.first_token(since_arrival);
        shared.timing.finish(pending);
    }
    match metadata {
        None => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Some(metadata) => (
            [
                (
                    axum::http::header::CONTENT_TYPE,
                    "application/octet-stream".to_string(),
                ),
                (axum::http::HeaderName::from_static("metadata"), metadata),
            ],
            body,
        )
            .into_response(),
    }
}

/// vLLM's `encoding_format: "bytes"` form of a JSON answer: the vectors as little-endian
/// float32, one after the other, and the answer's other members as the `metadata`
/// header, its `data` items giving where each vector is and its shape.
pub(super) fn as_bytes(mut answer: Value) -> (Vec<u8>, String) {
    let mut vectors = Vec::new();
    if let Some(Value::Array(items)) = answer.get_mut("data") {
        for item in items.iter_mut() {
            let vector = item
                .get("embedding")
                .or(item.get("data"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let start = vectors.len();
            for x in &vector {
                vectors.extend_from_slice(&(x.as_f64().unwrap_or(0.0) as f32).to_le_bytes());
            }
            *item = json!({
                "index": item["index"],
                "embed_dtype": "float32",
                "endianness": "little",
                "start": start,
                "end": vectors.len(),
                "shape": [vector.len()],
            });
        }
    }
    (vectors, answer.to_string())
}

/// The response body to a request `body` of `api`, the server's `k`-th request; `Err`
/// names what is wrong with the request.
pub(super) fn answer(
    api: PoolingApi,
    body: &[u8],
    k: u64,
    created: u64,
    model: &str,
) -> Result<Value, String> {
    let request: Value =
        serde_json::from_slice(body).map_err(|e| format!("not a JSON body: {e}"))?;
    if api == PoolingApi::Rerank {
        return rerank_answer(&request, k, model);
    }
    let (results, prompt_tokens) = match (request.get("input"), request.get("messages")) {
        (Some(input), None) => inputs(input)?,
        (None, Some(messages)) if api == PoolingApi::Embeddings => (1, messages_tokens(messages)?),
        (Some(_), Some(_)) => return Err("both `input` and `messages`".into()),
        (None, _) => return Err("`input` is required".into()),
    };
    let data: Vec<Value> = (0..results)
        .map(|index| {
            let vector = vector(k, index);
            match api {
                PoolingApi::Pooling => json!({"index": index, "object": "pooling", "data": vector}),
                _ => json!({"index": index, "object": "embedding", "embedding": vector}),
            }
        })
        .collect();
    Ok(match api {
        PoolingApi::Infinity => json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            "id": format!("infinity-{k}"),
            "created": created,
        }),
        _ => json!({
            "id": format!("{}-{k}", if api == PoolingApi::Pooling { "pool" } else { "embd" }),
            "object": "list",
            "created": created,
            "model": model,
            "data": data,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens,
                "completion_tokens": 0,
                "prompt_tokens_details": null,
            },
        }),
    })
}

/// A rerank answer: one score per document, best first.
fn rerank_answer(request: &Value, k: u64, model: &str) -> Result<Value, String> {
    let query = request
        .get("query")
        .and_then(Value::as_str)
        .ok_or("`query` must be a string")?;
    let documents = request
        .get("documents")
        .and_then(Value::as_array)
        .ok_or("`documents` must be an array")?;
    let query_tokens = words(query);
    let mut prompt_tokens = 0u64;
    let mut results = Vec::with_capacity(documents.len());
    for (index, document) in documents.iter().enumerate() {
        let text = document.as_str().ok_or("every document must be a string")?;
        prompt_tokens += query_tokens + words(text);
        // A score in (0, 1) that depends on the request and the document only.
        let score = (vector(k, index)[0] + 1.0) / 2.0;
        results.push((index, text, score));
    }
    results.sort_by(|a, b| b.2.total_cmp(&a.2));
    let results: Vec<Value> = results
        .into_iter()
        .map(|(index, text, score)| {
            json!({"index": index, "document": {"text": text}, "relevance_score": score})
        })
        .collect();
    Ok(json!({
        "id": format!("rerank-{k}"),
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        "results": results,
    }))
}

/// How many results an `input` asks for and its prompt tokens: a text or a token-id list
/// is one input; a list of texts or of token-id lists is one per element.
fn inputs(input: &Value) -> Result<(usize, u64), String> {
    match input {
        Value::String(text) => Ok((1, words(text))),
        Value::Array(items) if items.iter().all(Value::is_u64) => Ok((1, items.len() as u64)),
        Value::Array(items) => {
            let mut tokens = 0;
            for item in items {
                tokens += match item {
                    Value::String(text) => words(text),
                    Value::Array(ids) if ids.iter().all(Value::is_u64) => ids.len() as u64,
                    _ => return Err("`input` items must be texts or token-id lists".into()),
                };
            }
            Ok((items.len(), tokens))
        }
        _ => Err("`input` must be a text, texts or token ids".into()),
    }
}

/// The prompt tokens of chat messages: text words, one per other content part.
fn messages_tokens(messages: &Value) -> Result<u64, String> {
    let messages = messages.as_array().ok_or("`messages` must be an array")?;
    let mut tokens = 0;
    for message in messages {
        tokens += match message.get("content") {
            Some(Value::String(text)) => words(text),
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|part| match part.get("text").and_then(Value::as_str) {
                    Some(text) if part.get("type") == Some(&json!("text")) => words(text),
                    _ => 1,
                })
                .sum(),
            _ => return Err("every message needs a `content`".into()),
        };
    }
    Ok(tokens)
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// A unit-length vector for request `k`'s `index`-th input: reproducible, and different
/// for different inputs.
fn vector(k: u64, index: usize) -> Vec<f64> {
    let mut state = (k << 20) ^ index as u64 ^ 0x9E37_79B9_7F4A_7C15;
    let mut values: Vec<f64> = (0..DIMENSION)
        .map(|_| {
            // SplitMix64.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect();
    let norm = values
        .iter()
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    for v in &mut values {
        // Rounded so the body stays short and parses back to the same numbers.
        *v = (*v / norm * 1e6).round() / 1e6;
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer_to(api: PoolingApi, body: Value) -> Result<Value, String> {
        answer(api, body.to_string().as_bytes(), 7, 1_700_000_000, "mock")
    }

    #[test]
    fn embeddings_answer_one_vector_per_input_with_vllms_usage() {
        let a = answer_to(
            PoolingApi::Embeddings,
            json!({"model": "m", "input": ["a b", "c d e"], "truncate_prompt_tokens": -1}),
        )
        .unwrap();
        assert_eq!(a["object"], "list");
        assert_eq!(a["id"], "embd-7");
        assert_eq!(
            a["usage"],
            json!({"prompt_tokens": 5, "total_tokens": 5, "completion_tokens": 0, "prompt_tokens_details": null})
        );
        let data = a["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        for (i, item) in data.iter().enumerate() {
            assert_eq!(item["index"], i);
            assert_eq!(item["object"], "embedding");
            let v: Vec<f64> = serde_json::from_value(item["embedding"].clone()).unwrap();
            assert_eq!(v.len(), DIMENSION);
            let norm: f64 = v.iter().map(|x| x * x).sum();
            assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        }
        assert_ne!(data[0]["embedding"], data[1]["embedding"]);
        // Token ids: one input, or one per list.
        let a = answer_to(PoolingApi::Embeddings, json!({"input": [5, 6, 7]})).unwrap();
        assert_eq!(
            (
                a["data"].as_array().unwrap().len(),
                &a["usage"]["prompt_tokens"]
            ),
            (1, &json!(3))
        );
        let a = answer_to(PoolingApi::Embeddings, json!({"input": [[5, 6], [7]]})).unwrap();
        assert_eq!(
            (
                a["data"].as_array().unwrap().len(),
                &a["usage"]["prompt_tokens"]
            ),
            (2, &json!(3))
        );
    }

    #[test]
    fn chat_embeddings_count_text_words_and_one_token_per_image() {
        let a = answer_to(
            PoolingApi::Embeddings,
            json!({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
                {"type": "text", "text": "Represent the given image."},
            ]}]}),
        )
        .unwrap();
        assert_eq!(a["usage"]["prompt_tokens"], 5);
        assert_eq!(a["data"].as_array().unwrap().len(), 1);
        // Only the embeddings API takes messages.
        assert!(answer_to(PoolingApi::Pooling, json!({"messages": []})).is_err());
    }

    #[test]
    fn infinity_pooling_and_rerank_shapes() {
        let a = answer_to(
            PoolingApi::Infinity,
            json!({"model": "m", "input": "data:image/png;base64,AAAA", "modality": "image"}),
        )
        .unwrap();
        assert_eq!(a["id"], "infinity-7");
        assert_eq!(a["usage"], json!({"prompt_tokens": 1, "total_tokens": 1}));
        let a = answer_to(PoolingApi::Pooling, json!({"input": "one two"})).unwrap();
        assert_eq!(a["data"][0]["object"], "pooling");
        assert_eq!(a["data"][0]["data"].as_array().unwrap().len(), DIMENSION);
        let a = answer_to(
            PoolingApi::Rerank,
            json!({"query": "q r", "documents": ["a", "b c d", "e"]}),
        )
        .unwrap();
        // (2 + 1) + (2 + 3) + (2 + 1).
        assert_eq!(a["usage"], json!({"prompt_tokens": 11, "total_tokens": 11}));
        let results = a["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        let scores: Vec<f64> = results
            .iter()
            .map(|r| r["relevance_score"].as_f64().unwrap())
            .collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        let mut indexes: Vec<u64> = results
            .iter()
            .map(|r| r["index"].as_u64().unwrap())
            .collect();
        indexes.sort();
        assert_eq!(indexes, [0, 1, 2]);
        for r in results {
            let i = r["index"].as_u64().unwrap() as usize;
            assert_eq!(r["document"]["text"], ["a", "b c d", "e"][i]);
        }
    }

    #[test]
    fn bytes_answers_carry_the_vectors_and_a_metadata_header() {
        let a = answer_to(PoolingApi::Embeddings, json!({"input": ["a", "b c"]})).unwrap();
        let first = a["data"][0]["embedding"][0].as_f64().unwrap();
        let (vectors, metadata) = as_bytes(a);
        assert_eq!(vectors.len(), 2 * DIMENSION * 4);
        let got = f32::from_le_bytes(vectors[..4].try_into().unwrap());
        assert!((f64::from(got) - first).abs() < 1e-6);
        let metadata: Value = serde_json::from_str(&metadata).unwrap();
        assert_eq!(metadata["usage"]["prompt_tokens"], 3);
        assert_eq!(
            metadata["data"][1],
            json!({"index": 1, "embed_dtype": "float32", "endianness": "little",
                   "start": DIMENSION * 4, "end": 2 * DIMENSION * 4, "shape": [DIMENSION]})
        );
    }

    #[test]
    fn bad_requests_are_named() {
        assert_eq!(
            answer_to(PoolingApi::Embeddings, json!({})).unwrap_err(),
            "`input` is required"
        );
        assert!(answer_to(PoolingApi::Embeddings, json!({"input": {}})).is_err());
        assert!(answer_to(PoolingApi::Rerank, json!({"query": "q"})).is_err());
        assert!(answer(PoolingApi::Pooling, b"{", 0, 0, "m").is_err());
    }
    /// Every endpoint over HTTP: the answer comes `ttft` after arrival, fault-planned
    /// HTTP errors apply, and requests with an id are recorded.
    #[tokio::test]
    async fn served_after_the_ttft_and_recorded() {
        let server = crate::spawn(crate::MockConfig {
            ttft: std::time::Duration::from_millis(40),
            fail_rate: 0.2,
            ..Default::default()
        })
        .await
        .unwrap();
        let client = reqwest::Client::new();
        let requests = [
            ("/v1/embeddings", json!({"input": ["a", "b"]})),
            ("/embeddings", json!({"input": "a b"})),
            ("/pooling", json!({"input": [1, 2]})),
            ("/rerank", json!({"query": "q", "documents": ["x"]})),
            ("/v1/rerank", json!({"query": "q", "documents": ["x", "y"]})),
        ];
        let mut statuses = Vec::new();
        for (i, (path, body)) in requests.iter().enumerate() {
            let sent = std::time::Instant::now();
            let response = client
                .post(format!("{}{path}", server.base_url()))
                .header("x-request-id", format!("t-{i}"))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            let status = response.status();
            let answer: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            statuses.push(status.as_u16());
            if status == StatusCode::OK {
                assert!(
                    sent.elapsed() >= std::time::Duration::from_millis(40),
                    "{path}"
                );
                assert!(
                    answer.get("data").or(answer.get("results")).is_some(),
                    "{answer}"
                );
            } else {
                assert!(
                    answer["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("on purpose")
                );
            }
        }
        // Request 4 of 5 fails at a rate of 0.2 (floor((k+1)*0.2) > floor(k*0.2)).
        assert_eq!(statuses, [200, 200, 200, 200, 500]);
        let recorded = server.requests();
        let ids: Vec<&str> = recorded.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["t-0", "t-1", "t-2", "t-3"]);
        for r in &recorded {
            assert!(r.ttft_ms >= 40.0 && r.ttft_ms < 1000.0, "{r:?}");
            assert!(r.itl_ms.is_empty());
        }
        assert_eq!(server.timing().first_tokens, 4);
        server.shutdown().await.unwrap();
    }
}
