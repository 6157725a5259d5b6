//! The audio endpoints against a real HTTP client on loopback, and the form parser.

use std::time::Duration;

use serde_json::{Value, json};

use super::{FilePart, Form, parse};
use crate::reply::WORDS;
use crate::{MockConfig, MockServer, spawn};

/// A form as aiohttp writes it: the file, then text fields.
fn form(boundary: &str, file: &[u8], fields: &[(&str, &str)]) -> Vec<u8> {
    let mut body = format!(
        "--{boundary}\r\nContent-Type: audio/wav\r\nContent-Disposition: form-data; \
         name=\"file\"; filename=\"audio.wav\"\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(file);
    body.extend_from_slice(b"\r\n");
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// Bytes that look like the form's own syntax.
const CLIP: &[u8] = b"RIFF\x00\x00\r\n--\r\n\r\nContent-Type: x\r\n--b\xff\x00WAVE";

#[test]
fn forms_are_parsed_with_files_of_any_bytes() {
    let body = form("b0b", CLIP, &[("model", "whisper"), ("stream", "True")]);
    let parsed = parse(&body).unwrap();
    assert_eq!(
        parsed,
        Form {
            file: Some(FilePart {
                file_name: "audio.wav".into(),
                content_type: "audio/wav".into(),
                bytes: CLIP.len(),
            }),
            fields: vec![
                ("model".into(), "whisper".into()),
                ("stream".into(), "True".into()),
            ],
        }
    );
    assert_eq!(parsed.flag("stream"), Ok(true));
    assert_eq!(parsed.flag("missing"), Ok(false));
    assert!(parsed.flag("model").is_err());
    for bad in [
        &b"{\"model\": \"m\"}"[..],
        b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end",
        b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n",
        b"--b\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--b--\r\n",
    ] {
        assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}

async fn post(server: &MockServer, path: &str, id: &str, body: Vec<u8>) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("x-request-id", id)
        .header("content-type", "multipart/form-data; boundary=b0b")
        .body(body)
        .send()
        .await
        .expect("send the request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("read the body"))
}

fn words(n: usize) -> String {
    (0..n).map(|i| WORDS[i % WORDS.len()]).collect()
}

#[tokio::test]
async fn transcriptions_stream_with_usage_on_time_and_record_the_upload() {
    let server = spawn(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let fields = [
        ("model", "whisper"),
        ("max_completion_tokens", "4"),
        ("stream", "True"),
        ("language", "en"),
        ("stream_include_usage", "True"),
        ("stream_continuous_usage_stats", "True"),
    ];
    let clip = vec![7u8; 3000];
    let (status, body) = post(
        &server,
        "/v1/audio/transcriptions",
        "a-0",
        form("b0b", &clip, &fields),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let frames: Vec<&str> = body
        .split_terminator("\n\n")
        .map(|f| f.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(frames.len(), 4 + 2, "{body}");
    assert_eq!(frames[5], "[DONE]");
    for (i, frame) in frames[..4].iter().enumerate() {
        let chunk: Value = serde_json::from_str(frame).unwrap();
        assert_eq!(chunk["object"], json!("transcription.chunk"));
        assert_eq!(chunk["choices"][0]["delta"]["content"], json!(WORDS[i]));
        let finish = if i == 3 { json!("length") } else { Value::Null };
        assert_eq!(chunk["choices"][0]["finish_reason"], finish);
        // 3000 bytes: 3 started KiB stand for the prompt.
        assert_eq!(
            chunk["usage"],
            json!({"prompt_tokens": 3, "total_tokens": 4 + i, "completion_tokens": i + 1})
        );
    }
    let last: Value = serde_json::from_str(frames[4]).unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], json!(4));

    let record = server.requests().pop().unwrap();
    assert_eq!((record.id.as_str(), record.itl_ms.len()), ("a-0", 3));
    assert!(record.ttft_ms >= 20.0, "{record:?}");
    let upload = server.uploads().pop().unwrap();
    assert_eq!(
        upload,
        crate::Upload {
            request_id: Some("a-0".into()),
            endpoint: "transcriptions".into(),
            file_name: "audio.wav".into(),
            content_type: "audio/wav".into(),
            file_bytes: 3000,
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    );
}

#[tokio::test]
async fn translations_answer_alike_whole_or_streamed_and_bad_forms_get_400() {
    let server = spawn(MockConfig::default()).await.unwrap();
    let (status, body) = post(
        &server,
        "/v1/audio/translations",
        "t-0",
        form(
            "b0b",
            CLIP,
            &[("max_completion_tokens", "3"), ("stream", "False")],
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["text"], json!(words(3)));
    assert_eq!(answer["usage"]["completion_tokens"], json!(3));
    assert_eq!(server.uploads()[0].endpoint, "translations");
    // No usage asked for: chunks and [DONE] only.
    let (_, body) = post(
        &server,
        "/v1/audio/translations",
        "t-1",
        form("b0b", CLIP, &[("max_tokens", "2"), ("stream", "true")]),
    )
    .await;
    assert_eq!(body.matches("\"delta\"").count(), 2, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let (status, _) = post(&server, "/v1/audio/transcriptions", "x", b"{}".to_vec()).await;
    assert_eq!(status, 400);
    let no_file = b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--b--\r\n";
    let (status, body) = post(&server, "/v1/audio/transcriptions", "y", no_file.to_vec()).await;
    assert_eq!(status, 400);
    assert!(body.contains("no `file` part"), "{body}");
}
