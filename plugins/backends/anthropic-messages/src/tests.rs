use super::*;
use bench_sdk::native::{decode_sse_split_everywhere, decode_whole};
use bench_sdk::testing::fuzz_backend;
use bench_sdk::{ChatMessage, Session};

fn config(stream: bool, ignore_eos: bool, extra_body: Option<&str>) -> ClientConfig {
    ClientConfig {
        model: "smollm2".into(),
        stream,
        ignore_eos,
        extra_body: extra_body.map(str::to_owned),
        options: Vec::new(),
    }
}

fn client(stream: bool) -> Messages {
    Messages::open(config(stream, false, None)).unwrap()
}

fn decoder(backend: &Messages) -> MessagesDecoder {
    backend
        .decoder(&ResponseHead {
            status: 200,
            headers: Vec::new(),
        })
        .unwrap()
}

fn body(backend: &Messages, spec: RequestSpec) -> Value {
    serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap()
}

/// The body, field by field: `model`, `messages`, `max_tokens`, `stream`, bench's default
/// temperature (0.0) unless the extra body sets one, then the extra bodies; no
/// `stream_options`. The headers add `anthropic-version`.
#[test]
fn bodies_and_headers() {
    let backend = Messages::open(config(
        true,
        false,
        Some(r#"{"top_p":0.9,"temperature":0.6}"#),
    ))
    .unwrap();
    assert_eq!(backend.default_path(), "/v1/messages");
    assert_eq!(backend.framing(), Framing::Sse);
    let mut spec = RequestSpec::text("The capital of France is".into(), 5, 16);
    spec.request_id = Some("bench-3".into());
    spec.extra_body = Some(r#"{"top_p":0.5,"top_k":20}"#.into());
    spec.session = Some(Session {
        id: "conv-1".into(),
        turn: 0,
    });
    let request = backend.build_request(spec.clone()).unwrap();
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.headers,
        [
            ("Content-Type".to_string(), "application/json".to_string()),
            ("x-request-id".to_string(), "bench-3".to_string()),
            ("X-Session-Id".to_string(), "conv-1".to_string()),
            ("anthropic-version".to_string(), "2023-06-01".to_string()),
        ]
    );
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        sent,
        json!({
            "model": "smollm2",
            "messages": [{"role": "user", "content": "The capital of France is"}],
            "max_tokens": 16,
            "stream": true,
            "temperature": 0.6,
            "top_p": 0.5,
            "top_k": 20,
        })
    );

    // Not streamed, a LoRA adapter as the model, another API version, none at all.
    let mut no_stream = config(false, false, None);
    no_stream.options = vec![("anthropic-version".into(), "2024-01-01".into())];
    let backend = Messages::open(no_stream).unwrap();
    assert_eq!(backend.framing(), Framing::Raw);
    spec.lora_name = Some("sql-lora".into());
    spec.extra_body = None;
    spec.request_id = None;
    spec.session = None;
    let request = backend.build_request(spec.clone()).unwrap();
    assert_eq!(
        request.headers[1],
        ("anthropic-version".into(), "2024-01-01".into())
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&request.body).unwrap(),
        json!({
            "model": "sql-lora",
            "messages": [{"role": "user", "content": "The capital of France is"}],
            "max_tokens": 16, "stream": false, "temperature": 0.0,
        })
    );
    let mut unversioned = config(true, false, None);
    unversioned.options = vec![("anthropic-version".into(), "".into())];
    let request = Messages::open(unversioned)
        .unwrap()
        .build_request(spec)
        .unwrap();
    assert_eq!(request.headers.len(), 1, "{:?}", request.headers);
}

/// The API has no `ignore_eos`, and vLLM drops it without a word: refused, saying why and
/// what to do instead.
#[test]
fn ignore_eos_is_refused_with_the_reason() {
    match Messages::open(config(true, true, None)) {
        Err(PluginError::InvalidConfig(m)) => {
            assert!(m.starts_with("anthropic-messages: --ignore-eos"), "{m}");
            assert!(m.contains("drops fields it does not know"), "{m}");
            assert!(m.contains(r#"--extra-body '{"ignore_eos": true}'"#), "{m}");
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("--ignore-eos accepted"),
    }
    // Sent on purpose through the extra body, it goes.
    let backend = Messages::open(config(true, false, Some(r#"{"ignore_eos":true}"#))).unwrap();
    let spec = RequestSpec::text("x".into(), 1, 4);
    assert_eq!(body(&backend, spec)["ignore_eos"], json!(true));
}

#[test]
fn system_messages_lead_images_are_blocks_and_the_rest_is_refused() {
    let backend = client(true);
    let mut spec = RequestSpec::text("Describe it".into(), 2, 4);
    spec.multimodal = vec![
        ContentPart::ImageUrl("data:image/png;base64,AAAA".into()),
        ContentPart::ImageUrl("https://example.com/cat.jpg".into()),
    ];
    assert_eq!(
        body(&backend, spec)["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Describe it"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        ]}])
    );
    let message = |role: &str, text: &str| ChatMessage {
        role: role.into(),
        content: vec![ContentPart::Text(text.into())],
    };
    let mut spec = RequestSpec::text(String::new(), 2, 4);
    spec.prompt = Prompt::Chat(vec![
        message("system", "Be brief."),
        message("system", "Answer in French."),
        message("user", "Hi"),
        message("assistant", "Salut"),
        message("system", "Now in English."),
        message("user", "Again"),
    ]);
    let sent = body(&backend, spec);
    assert_eq!(sent["system"], json!("Be brief.\n\nAnswer in French."));
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Salut"},
            {"role": "system", "content": "Now in English."},
            {"role": "user", "content": "Again"},
        ])
    );
    let refused = |spec: RequestSpec, needle: &str| match backend.build_request(spec) {
        Err(PluginError::Unsupported(m)) => {
            assert!(m.starts_with(NAME) && m.contains(needle), "{m}")
        }
        other => panic!("{other:?}"),
    };
    let mut spec = RequestSpec::text(String::new(), 2, 4);
    spec.prompt = Prompt::TokenIds(vec![1, 2]);
    refused(spec, "token-id");
    let mut spec = RequestSpec::text("x".into(), 2, 4);
    spec.multimodal = vec![ContentPart::AudioUrl("data:audio/wav;base64,AA".into())];
    refused(spec, "not audio or video");
    let mut spec = RequestSpec::text(String::new(), 2, 4);
    spec.prompt = Prompt::Chat(vec![ChatMessage {
        role: "system".into(),
        content: vec![ContentPart::ImageUrl("data:image/png;base64,AA".into())],
    }]);
    refused(spec, "system message holds text only");
}

/// A stream as vLLM 0.32's `/v1/messages` sent it (SmolLM2-135M-Instruct on CPU, a system
/// prompt, 6 tokens; captured with curl), one escape added to a delta.
const VLLM_STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"chatcmpl-b095e69b8019a231\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"smollm2\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":27,\"output_tokens\":0}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"},\"index\":0}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"The\"},\"index\":0}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" capital\"},\"index\":0}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" of\"},\"index\":0}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" \\\"France\\\"\"},\"index\":0}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" is\"},\"index\":0}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" Paris\"},\"index\":0}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":27,\"output_tokens\":6}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn a_vllm_stream_split_anywhere_gives_its_deltas_the_counts_and_the_stop_reason() {
    let backend = client(true);
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), VLLM_STREAM),
        [
            "0: usage prompt=27 completion=none",
            r#"2: chunk content="The" reasoning=none"#,
            r#"3: chunk content=" capital" reasoning=none"#,
            r#"4: chunk content=" of" reasoning=none"#,
            r#"5: chunk content=" \"France\"" reasoning=none"#,
            r#"6: chunk content=" is" reasoning=none"#,
            r#"7: chunk content=" Paris" reasoning=none"#,
            "9: usage prompt=27 completion=6",
            "9: finish max_tokens",
        ]
    );
}

/// A reasoning model's stream in vLLM's shapes (`message_stream_converter`): a thinking
/// block whose signature comes as a `signature_delta` before it stops, then a text block,
/// then a tool call's arguments; `ping` events between.
#[test]
fn thinking_text_and_tool_input_deltas_are_told_apart() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":9,\"output_tokens\":0}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"},\"index\":0}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Hmm\"},\"index\":0}\n\n",
        "event: ping\n",
        "data: {\"type\":\"ping\"}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\", so\"},\"index\":0}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"signature_delta\",\"signature\":\"5f1e\"},\"index\":0}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"},\"index\":1}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Paris\"},\"index\":1}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"},\"index\":2}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"},\"index\":2}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":9,\"output_tokens\":7}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&client(true)), stream),
        [
            "0: usage prompt=9 completion=none",
            r#"2: chunk content=none reasoning="Hmm""#,
            r#"4: chunk content=none reasoning=", so""#,
            r#"8: chunk content="Paris" reasoning=none"#,
            "10: chunk content=none reasoning=none",
            "11: chunk content=none reasoning=none",
            "12: usage prompt=9 completion=7",
            "12: finish tool_use",
        ]
    );
}

/// Anthropic's own API: the prompt's cache reads and writes in `message_start` (the
/// prompt is their sum with `input_tokens`), `message_delta` with the output count alone.
#[test]
fn anthropics_cache_counts_make_the_prompt_and_the_cached_tokens() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&client(true)), stream),
        [
            "0: usage prompt=2105 completion=none",
            r#"1: chunk content="Hi" reasoning=none"#,
            "2: usage prompt=none completion=3",
            "2: finish end_turn",
        ]
    );
    let start = stream
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("data: ")
        .unwrap();
    let mut out = Vec::new();
    decoder(&client(true))
        .feed(start.as_bytes(), &[start.len() as u32], &mut out)
        .unwrap();
    assert!(
        matches!(&out[0].kind, EventKind::Usage(u) if u.cached_prompt_tokens == Some(2000)),
        "{out:?}"
    );
}

#[test]
fn error_events_and_streams_without_message_stop_fail() {
    let backend = client(true);
    // Anthropic's error event (vLLM sends the same when its chat stream fails).
    let body = concat!(
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"},\"index\":0}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "1: error server: the server reported an error: Overloaded",
        ]
    );
    // An error event without a message: its JSON is quoted.
    let body = "data: {\"type\":\"error\",\"error\":{\"type\":\"internal_error\"}}\n\n";
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [r#"0: error server: the server reported an error: "{\"type\":\"internal_error\"}""#]
    );
    // vLLM's chat error object on any event but a delta.
    let body = concat!(
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"},\"error\":{\"message\":\"x\"}}\n\n",
        "data: {\"error\":{\"object\":\"error\",\"message\":\"boom\",\"type\":\"InternalServerError\",\"code\":500}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "1: error server: the server reported an error: boom",
        ]
    );
    // Deltas and no message_stop: cut short.
    let cut: String = VLLM_STREAM
        .split_inclusive("\n\n")
        .filter(|event| !event.contains("message_stop"))
        .collect();
    let events = decode_sse_split_everywhere(|| decoder(&backend), &cut);
    assert_eq!(events.len(), 10, "{events:?}");
    assert!(
        events[9].starts_with("9: error malformed: the stream ended without message_stop"),
        "{events:?}"
    );
    // No delta at all: nothing to add, the host fails it for want of output.
    let body = concat!(
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":null}}\n\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    assert!(decode_sse_split_everywhere(|| decoder(&backend), body).is_empty());
    // A frame that is not JSON.
    let body = "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hi\"\n\n";
    let events = decode_sse_split_everywhere(|| decoder(&backend), body);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].starts_with("0: error malformed: invalid JSON"),
        "{events:?}"
    );
}

/// A whole message (`stream=false`) as vLLM 0.32 returned it (captured), one with a
/// thinking block before its text, and the error object vLLM answers a bad request with
/// (status 400, captured).
#[test]
fn a_whole_message_gives_its_texts_counts_and_stop_reason() {
    let backend = client(false);
    let vllm = r#"{"id":"chatcmpl-9487257e86a4b0af","type":"message","role":"assistant","content":[{"type":"text","text":"The capital of France is Paris"}],"model":"smollm2","stop_reason":"max_tokens","usage":{"input_tokens":37,"output_tokens":6}}"#;
    assert_eq!(
        decode_whole(decoder(&backend), vllm),
        [
            r#"0: chunk content="The capital of France is Paris" reasoning=none"#,
            "0: usage prompt=37 completion=6",
            "0: finish max_tokens",
        ]
    );
    let thinking = r#"{"id":"m","type":"message","content":[{"type":"thinking","thinking":"Okay, \"so\"","signature":"ab"},{"type":"text","text":" Paris."},{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_read_input_tokens":8,"output_tokens":9}}"#;
    assert_eq!(
        decode_whole(decoder(&backend), thinking),
        [
            r#"0: chunk content=" Paris." reasoning="Okay, \"so\"""#,
            "0: usage prompt=20 completion=9",
            "0: finish end_turn",
        ]
    );
    let error = r#"{"type":"error","error":{"type":"BadRequestError","message":"max_completion_tokens=6000 cannot be greater than max_model_len=2048. Please request fewer output tokens. (parameter=max_completion_tokens, value=6000)"}}"#;
    let events = decode_whole(decoder(&backend), error);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].starts_with(
            "0: error server: the server reported an error: max_completion_tokens=6000 cannot"
        ),
        "{events:?}"
    );
}

/// The shortcut for delta events of one shape reads every frame as a full read of it
/// alone does: frames that differ from the kept one in the text (valid or not), in the
/// delta's kind, or elsewhere.
#[test]
fn delta_events_of_one_shape_read_as_each_read_alone() {
    let template = |kind: &str, key: &str, text: &str, index: &str| {
        format!(
            "{{\"type\":\"content_block_delta\",\"delta\":{{\"type\":\"{kind}\",\"{key}\":\"{text}\"}},\"index\":{index}}}"
        )
    };
    let mut frames = Vec::new();
    for (kind, key) in [
        ("text_delta", "text"),
        ("thinking_delta", "thinking"),
        ("input_json_delta", "partial_json"),
        ("signature_delta", "signature"),
        ("text_delta", "thinking"),
    ] {
        for text in [
            " Paris", "", "\\n\\\"", "é", "x\\", "a\\u00e9", " the", "\\\"", "y",
        ] {
            for index in ["0", "1", "01", "1.5", ""] {
                frames.push(template(kind, key, text, index));
            }
        }
    }
    // Literals cut or ended early, bytes changed elsewhere.
    let base = template("text_delta", "text", " ok", "0");
    frames.push(base.replace(" ok", "\\"));
    frames.push(base.replace(" ok\"", " ok"));
    frames.push(base.replace(" ok", "a\",\"text\":\"b"));
    frames.push(base.replace(" ok", "a\",\"type\":\"thinking_delta"));
    frames.push(base.replace("\"index\":0", "\"index\":0,\"error\":null"));
    frames.push(base.replace("content_block_delta", "message_delta"));
    frames.push(base.clone());
    let backend = client(true);
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let all = bench_sdk::openai::render_frames(&mut decoder(&backend), &refs);
    let mut alone = Vec::new();
    for (i, frame) in refs.iter().enumerate() {
        for line in bench_sdk::openai::render_frames(&mut decoder(&backend), &[frame]) {
            // Renumbered, and without the cut-stream error of a one-frame stream.
            if !line.contains("without message_stop") {
                alone.push(line.replacen("0: ", &format!("{i}: "), 1));
            }
        }
    }
    let all: Vec<String> = all
        .into_iter()
        .filter(|l| !l.contains("without message_stop"))
        .collect();
    assert_eq!(all, alone);
    // 4 kinds with a token (a text delta without its text is an empty one) x 8 texts
    // that read x 3 indexes that read, plus 4 of the altered frames: the base, its copy
    // with a null error, and the two whose literal ends early.
    assert_eq!(all.iter().filter(|l| l.contains("chunk")).count(), 100);
    assert!(all.iter().any(|l| l.contains("reasoning=\"")));
    assert!(all.iter().any(|l| l.contains("invalid JSON")));
}

/// The SDK's decoder fuzzing harness over a stream and a whole message, each read
/// streamed and whole.
#[test]
fn damaged_frames_never_panic() {
    let stream: Vec<&[u8]> = VLLM_STREAM
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::as_bytes)
        .collect();
    let whole = r#"{"type":"message","content":[{"type":"thinking","thinking":"a"},{"type":"text","text":"Hi \"x\""}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}"#;
    let responses = [&stream[..], &[whole.as_bytes()]];
    let streamed = fuzz_backend(&responses, &client(true));
    let wholes = fuzz_backend(&responses, &client(false));
    // Each sample read in its own mode gives its text.
    assert!(
        streamed[0].iter().any(|l| l.contains(": chunk content=\"")),
        "{streamed:?}"
    );
    assert!(
        wholes[1].iter().any(|l| l.contains(": chunk content=\"")),
        "{wholes:?}"
    );
}
