use super::*;
use bench_sdk::native::{decode_sse_split_everywhere, decode_whole};
use bench_sdk::testing::fuzz_backend;
use std::collections::BTreeMap;

fn client(stream: bool, ignore_eos: bool, extra_body: Option<&str>) -> Audio {
    Audio::open(ClientConfig {
        model: "openai/whisper-large-v3-turbo".into(),
        stream,
        ignore_eos,
        extra_body: extra_body.map(str::to_owned),
        options: Vec::new(),
    })
    .unwrap()
}

fn decoder(backend: &Audio) -> AudioDecoder {
    backend
        .decoder(&ResponseHead {
            status: 200,
            headers: Vec::new(),
        })
        .unwrap()
}

/// A WAV clip as the ASR datasets hand it over (bytes that hold CR, LF and dashes).
fn spec(wav: &[u8]) -> RequestSpec {
    let mut spec = RequestSpec::text(
        "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>".into(),
        4,
        128,
    );
    spec.request_id = Some("asr-0".into());
    spec.multimodal = vec![ContentPart::Binary(BinaryData {
        mime_type: "audio/wav".into(),
        file_name: "audio.wav".into(),
        data: wav.to_vec(),
    })];
    spec
}

/// The form's parts by name: (content type, file name, value), read with a parser of
/// its own (the boundary from the header, parts between its delimiter lines).
fn form(request: &HttpRequest) -> BTreeMap<String, (String, Option<String>, Vec<u8>)> {
    let content_type = &request
        .headers
        .iter()
        .find(|(k, _)| k == "Content-Type")
        .unwrap()
        .1;
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .unwrap();
    let delimiter = format!("\r\n--{boundary}");
    let body = [b"\r\n".as_slice(), &request.body].concat();
    let text = body.as_slice();
    let mut starts: Vec<usize> = (0..text.len())
        .filter(|&i| text[i..].starts_with(delimiter.as_bytes()))
        .collect();
    let last = starts.pop().unwrap();
    assert_eq!(&text[last + delimiter.len()..], b"--\r\n");
    let mut parts = BTreeMap::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(last);
        let part = &text[start + delimiter.len() + 2..end];
        let split = part.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let headers = std::str::from_utf8(&part[..split]).unwrap();
        let mut kind = String::new();
        let (mut name, mut file) = (String::new(), None);
        for line in headers.split("\r\n") {
            if let Some(t) = line.strip_prefix("Content-Type: ") {
                kind = t.to_owned();
            } else if let Some(d) = line.strip_prefix("Content-Disposition: form-data; ") {
                for param in d.split("; ") {
                    let (k, v) = param.split_once('=').unwrap();
                    let v = v.trim_matches('"').to_owned();
                    match k {
                        "name" => name = v,
                        "filename" => file = Some(v),
                        other => panic!("{other}"),
                    }
                }
            }
        }
        parts.insert(name, (kind, file, part[split + 4..].to_vec()));
    }
    parts
}

fn fields(request: &HttpRequest) -> BTreeMap<String, String> {
    form(request)
        .into_iter()
        .filter(|(name, _)| name != "file")
        .map(|(name, (kind, file, value))| {
            assert_eq!(kind, "text/plain; charset=utf-8", "{name}");
            assert_eq!(file, None, "{name}");
            (name, String::from_utf8(value).unwrap())
        })
        .collect()
}

/// vLLM's form, field by field: the clip as `file` (`audio.wav`, `audio/wav`), `model`,
/// `max_completion_tokens`, `stream`, `language: en`, `stream_include_usage`,
/// `stream_continuous_usage_stats`, `ignore_eos` when set, then the extra body, each
/// value as Python's `str` writes it; no prompt. bench's default temperature is there
/// unless the extra body sets one.
#[test]
fn the_form_is_vllms() {
    let wav = b"RIFF\x24\x00\x00\x00WAVEfmt \r\n--\r\n\x00\xff".to_vec();
    let backend = client(true, true, Some(r#"{"temperature":0,"top_p":0.5}"#));
    assert_eq!(backend.default_path(), "/v1/audio/transcriptions");
    assert_eq!(backend.framing(), Framing::Sse);
    let mut spec = spec(&wav);
    spec.extra_body = Some(r#"{"language":"fr","response_format":"json","seed":null}"#.into());
    let request = backend.build_request(spec).unwrap();
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.headers[1],
        ("x-request-id".to_string(), "asr-0".to_string())
    );
    let parts = form(&request);
    assert_eq!(
        parts["file"],
        ("audio/wav".into(), Some("audio.wav".into()), wav.clone())
    );
    let want: BTreeMap<String, String> = [
        ("model", "openai/whisper-large-v3-turbo"),
        ("max_completion_tokens", "128"),
        ("stream", "True"),
        ("language", "fr"),
        ("stream_include_usage", "True"),
        ("stream_continuous_usage_stats", "True"),
        ("ignore_eos", "True"),
        ("temperature", "0"),
        ("top_p", "0.5"),
        ("response_format", "json"),
        ("seed", "None"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(fields(&request), want);
    // The same request, the same bytes (the boundary comes from the request id).
    assert_eq!(
        backend.build_request(self::spec(&wav)).unwrap().body,
        backend.build_request(self::spec(&wav)).unwrap().body
    );

    // --no-stream, a LoRA adapter: no stream usage fields; a float in Python's form.
    let backend = client(false, false, None);
    assert_eq!(backend.framing(), Framing::Raw);
    let mut spec = self::spec(&wav);
    spec.lora_name = Some("asr-lora".into());
    let got = fields(&backend.build_request(spec).unwrap());
    assert_eq!(got["model"], "asr-lora");
    assert_eq!(got["stream"], "False");
    assert_eq!(got["temperature"], "0.0");
    assert!(!got.contains_key("stream_include_usage"), "{got:?}");
    assert!(!got.contains_key("ignore_eos"), "{got:?}");
}

#[test]
fn requests_without_one_clip_are_refused() {
    let backend = client(true, false, None);
    let refused = |spec: RequestSpec, needle: &str| match backend.build_request(spec) {
        Err(PluginError::Unsupported(m)) => {
            assert!(m.starts_with(NAME) && m.contains(needle), "{m}")
        }
        other => panic!("{other:?}"),
    };
    refused(RequestSpec::text("hi".into(), 1, 4), "no audio clip");
    let mut two = spec(b"RIFF");
    two.multimodal
        .push(ContentPart::ImageUrl("data:image/png;base64,AA".into()));
    refused(two, "2 multimodal items");
    let mut chat = spec(b"RIFF");
    chat.prompt = Prompt::Chat(Vec::new());
    refused(chat, "--enable-multimodal-chat");
}

#[test]
fn python_writes_values_so() {
    for (value, text) in [
        (json!(true), "True"),
        (json!(false), "False"),
        (json!(null), "None"),
        (json!(3), "3"),
        (json!(-2), "-2"),
        (json!(0.0), "0.0"),
        (json!(1.5), "1.5"),
        (json!(1e20), "1e+20"),
        (json!("en"), "en"),
    ] {
        assert_eq!(python_str(&value), text, "{value}");
    }
}

/// A stream as vLLM's transcription endpoint sends it with `stream_include_usage` and
/// `stream_continuous_usage_stats`: usage on every chunk, then a last frame with the
/// usage and no choices.
const TRANSCRIPTION_STREAM: &str = concat!(
    "data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1764000000,\"model\":\"openai/whisper-large-v3-turbo\",\"choices\":[{\"delta\":{\"content\":\" The\"},\"finish_reason\":null,\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":30,\"total_tokens\":31,\"completion_tokens\":1}}\n\n",
    "data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1764000000,\"model\":\"openai/whisper-large-v3-turbo\",\"choices\":[{\"delta\":{\"content\":\" \\\"quick\\\"\"},\"finish_reason\":null,\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":30,\"total_tokens\":33,\"completion_tokens\":3}}\n\n",
    "data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1764000000,\"model\":\"openai/whisper-large-v3-turbo\",\"choices\":[{\"delta\":{\"content\":\" fox.\"},\"finish_reason\":\"stop\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":30,\"total_tokens\":35,\"completion_tokens\":5}}\n\n",
    "data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1764000000,\"model\":\"openai/whisper-large-v3-turbo\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"total_tokens\":35,\"completion_tokens\":5}}\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn a_transcription_stream_split_anywhere_gives_its_chunks_and_usage() {
    let backend = client(true, false, None);
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), TRANSCRIPTION_STREAM),
        [
            r#"0: chunk content=" The" reasoning=none"#,
            "0: usage prompt=30 completion=1",
            r#"1: chunk content=" \"quick\"" reasoning=none"#,
            "1: usage prompt=30 completion=3",
            r#"2: chunk content=" fox." reasoning=none"#,
            "2: usage prompt=30 completion=5",
            "2: finish stop",
            "3: usage prompt=30 completion=5",
        ]
    );
    // vLLM's error object in the stream.
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\" The\"}}]}\n\n",
        "data: {\"error\":{\"object\":\"error\",\"message\":\"audio too long\",\"type\":\"BadRequestError\",\"code\":400}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content=" The" reasoning=none"#,
            "1: error server: the server reported an error: audio too long",
        ]
    );
}

#[test]
fn a_whole_answer_is_its_text() {
    let backend = client(false, false, None);
    assert_eq!(
        decode_whole(
            decoder(&backend),
            r#"{"text":" The \"quick\" fox.","usage":{"type":"duration","seconds":3}}"#
        ),
        [r#"0: chunk content=" The \"quick\" fox." reasoning=none"#]
    );
    assert_eq!(
        decode_whole(
            decoder(&backend),
            r#"{"text":" fox.","usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32}}"#
        ),
        [
            r#"0: chunk content=" fox." reasoning=none"#,
            "0: usage prompt=30 completion=2",
        ]
    );
    assert_eq!(
        decode_whole(
            decoder(&backend),
            r#"{"error":{"message":"bad audio","code":400}}"#
        ),
        ["0: error server: the server reported an error: bad audio"]
    );
    let events = decode_whole(decoder(&backend), r#"{"text":" fox"#);
    assert!(
        events.len() == 1 && events[0].starts_with("0: error malformed: invalid JSON"),
        "{events:?}"
    );
}

/// The SDK's decoder fuzzing harness over a stream and a whole answer, each read
/// streamed and whole.
#[test]
fn damaged_frames_never_panic() {
    let stream: Vec<&[u8]> = TRANSCRIPTION_STREAM
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::as_bytes)
        .collect();
    let whole: &[u8] = br#"{"text":" The fox.","usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
    let responses = [&stream[..], &[whole]];
    let streamed = fuzz_backend(&responses, &client(true, false, None));
    assert!(
        streamed[0].iter().any(|l| l.contains(": chunk content=\"")),
        "{streamed:?}"
    );
    let events = fuzz_backend(&responses, &client(false, false, None));
    assert_eq!(
        events[1][0],
        r#"0: chunk content=" The fox." reasoning=none"#
    );
}
