use super::*;
use bench_sdk::native::{decode_sse_split_everywhere, decode_whole};
use bench_sdk::testing::fuzz_backend;
use bench_sdk::{ChatMessage, Session};

fn client(stream: bool, ignore_eos: bool, extra_body: Option<&str>) -> Responses {
    Responses::open(ClientConfig {
        model: "Qwen/Qwen3-0.6B".into(),
        stream,
        ignore_eos,
        extra_body: extra_body.map(str::to_owned),
        options: Vec::new(),
    })
    .unwrap()
}

fn decoder(backend: &Responses) -> ResponsesDecoder {
    backend
        .decoder(&ResponseHead {
            status: 200,
            headers: Vec::new(),
        })
        .unwrap()
}

fn body(backend: &Responses, spec: RequestSpec) -> Value {
    serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap()
}

/// vLLM's payload, field by field: `model`, `input`, `max_output_tokens`, `stream: true`,
/// `store: false`, then `ignore_eos` and the extra body (sampling parameters and
/// `--extra-body`); no `stream_options`. bench's default temperature (0.0, what the
/// other OpenAI backends send) is there unless the extra body sets one.
#[test]
fn bodies_are_vllms() {
    let backend = client(true, true, Some(r#"{"top_p":0.9,"temperature":0.6}"#));
    assert_eq!(backend.default_path(), "/v1/responses");
    assert_eq!(backend.framing(), Framing::Sse);
    let mut spec = RequestSpec::text("The capital of France is".into(), 5, 16);
    spec.request_id = Some("bench-3".into());
    spec.extra_body = Some(r#"{"top_p":0.5,"reasoning":{"effort":"low"}}"#.into());
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
        ]
    );
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        sent,
        json!({
            "model": "Qwen/Qwen3-0.6B",
            "input": "The capital of France is",
            "max_output_tokens": 16,
            "stream": true,
            "store": false,
            "ignore_eos": true,
            "temperature": 0.6,
            "top_p": 0.5,
            "reasoning": {"effort": "low"},
        })
    );

    // --no-stream, a LoRA adapter as the model, no ignore_eos.
    let backend = client(false, false, None);
    assert_eq!(backend.framing(), Framing::Raw);
    spec.lora_name = Some("sql-lora".into());
    spec.extra_body = None;
    assert_eq!(
        body(&backend, spec),
        json!({
            "model": "sql-lora", "input": "The capital of France is", "max_output_tokens": 16,
            "stream": false, "store": false, "temperature": 0.0,
        })
    );
}

#[test]
fn chat_and_images_go_as_input_messages_and_the_rest_is_refused() {
    let backend = client(true, false, None);
    let mut spec = RequestSpec::text("Describe it".into(), 2, 4);
    spec.multimodal = vec![ContentPart::ImageUrl("data:image/png;base64,AA".into())];
    assert_eq!(
        body(&backend, spec)["input"],
        json!([{"role": "user", "content": [
            {"type": "input_text", "text": "Describe it"},
            {"type": "input_image", "image_url": "data:image/png;base64,AA"},
        ]}])
    );
    let mut spec = RequestSpec::text(String::new(), 2, 4);
    spec.prompt = Prompt::Chat(vec![
        ChatMessage {
            role: "system".into(),
            content: vec![ContentPart::Text("Be brief.".into())],
        },
        ChatMessage {
            role: "user".into(),
            content: vec![ContentPart::Text("Hi".into())],
        },
    ]);
    assert_eq!(
        body(&backend, spec)["input"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
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
    spec.multimodal = vec![ContentPart::Binary(bench_sdk::BinaryData {
        mime_type: "audio/wav".into(),
        file_name: "audio.wav".into(),
        data: vec![0; 4],
    })];
    refused(spec, "openai-audio");
}

/// A stream as vLLM's Responses API sends it for a reasoning model (shortened ids):
/// lifecycle events, a reasoning item with two deltas, a message item with three (one
/// with escapes), the `.done` events that repeat the text, then `response.completed`
/// with the usage. `event:` lines name each event as `type` does.
const REASONING_STREAM: &str = concat!(
    "event: response.created\n",
    "data: {\"response\":{\"id\":\"resp_1\",\"created_at\":1764000000,\"model\":\"Qwen/Qwen3-0.6B\",\"object\":\"response\",\"output\":[],\"status\":\"in_progress\",\"usage\":null},\"sequence_number\":0,\"type\":\"response.created\"}\n\n",
    "event: response.in_progress\n",
    "data: {\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"output\":[],\"status\":\"in_progress\",\"usage\":null},\"sequence_number\":1,\"type\":\"response.in_progress\"}\n\n",
    "event: response.output_item.added\n",
    "data: {\"item\":{\"id\":\"rs_1\",\"summary\":[],\"type\":\"reasoning\",\"content\":null,\"encrypted_content\":null,\"status\":\"in_progress\"},\"output_index\":0,\"sequence_number\":2,\"type\":\"response.output_item.added\"}\n\n",
    "event: response.reasoning_text.delta\n",
    "data: {\"content_index\":0,\"delta\":\"Okay\",\"item_id\":\"rs_1\",\"output_index\":0,\"sequence_number\":3,\"type\":\"response.reasoning_text.delta\"}\n\n",
    "event: response.reasoning_text.delta\n",
    "data: {\"content_index\":0,\"delta\":\", the user\",\"item_id\":\"rs_1\",\"output_index\":0,\"sequence_number\":4,\"type\":\"response.reasoning_text.delta\"}\n\n",
    "event: response.reasoning_text.done\n",
    "data: {\"content_index\":0,\"item_id\":\"rs_1\",\"output_index\":0,\"sequence_number\":5,\"text\":\"Okay, the user\",\"type\":\"response.reasoning_text.done\"}\n\n",
    "event: response.output_item.added\n",
    "data: {\"item\":{\"id\":\"msg_1\",\"content\":[],\"role\":\"assistant\",\"status\":\"in_progress\",\"type\":\"message\"},\"output_index\":1,\"sequence_number\":6,\"type\":\"response.output_item.added\"}\n\n",
    "event: response.content_part.added\n",
    "data: {\"content_index\":0,\"item_id\":\"msg_1\",\"output_index\":1,\"part\":{\"annotations\":[],\"text\":\"\",\"type\":\"output_text\",\"logprobs\":null},\"sequence_number\":7,\"type\":\"response.content_part.added\"}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"content_index\":0,\"delta\":\" Paris\",\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":1,\"sequence_number\":8,\"type\":\"response.output_text.delta\"}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"content_index\":0,\"delta\":\".\\n\\\"é\\\"\",\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":1,\"sequence_number\":9,\"type\":\"response.output_text.delta\"}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"content_index\":0,\"delta\":\"\",\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":1,\"sequence_number\":10,\"type\":\"response.output_text.delta\"}\n\n",
    "event: response.output_text.done\n",
    "data: {\"content_index\":0,\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":1,\"sequence_number\":11,\"text\":\" Paris.\\n\\\"é\\\"\",\"type\":\"response.output_text.done\"}\n\n",
    "event: response.completed\n",
    "data: {\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"output\":[{\"id\":\"msg_1\",\"content\":[{\"annotations\":[],\"text\":\" Paris.\\n\\\"é\\\"\",\"type\":\"output_text\"}],\"role\":\"assistant\",\"status\":\"completed\",\"type\":\"message\"}],\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":8},\"output_tokens\":5,\"output_tokens_details\":{\"reasoning_tokens\":2},\"total_tokens\":17}},\"sequence_number\":12,\"type\":\"response.completed\"}\n\n",
);

#[test]
fn a_reasoning_stream_split_anywhere_gives_its_deltas_and_the_terminal_usage() {
    let backend = client(true, false, None);
    let events = decode_sse_split_everywhere(|| decoder(&backend), REASONING_STREAM);
    assert_eq!(
        events,
        [
            r#"3: chunk content=none reasoning="Okay""#,
            r#"4: chunk content=none reasoning=", the user""#,
            r#"8: chunk content=" Paris" reasoning=none"#,
            r#"9: chunk content=".\n\"é\"" reasoning=none"#,
            // An empty delta is still a token event, timed as vLLM times it.
            r#"10: chunk content="" reasoning=none"#,
            "12: usage prompt=12 completion=5",
            "12: finish incomplete",
        ]
    );
    // The cached prompt tokens ride with the usage.
    let terminal = REASONING_STREAM.lines().rev().nth(1).unwrap();
    let data = terminal.strip_prefix("data: ").unwrap();
    let mut out = Vec::new();
    decoder(&backend)
        .feed(data.as_bytes(), &[data.len() as u32], &mut out)
        .unwrap();
    assert!(
        matches!(&out[0].kind, EventKind::Usage(u) if u.cached_prompt_tokens == Some(8)),
        "{out:?}"
    );
}

/// vLLM 0.32 with `--enable-per-request-metrics` puts the server's timing in the response
/// object (`ResponsesResponse.metrics`, its missing values as nulls): read from the
/// terminal event of a stream, however split, and from a whole response; a response
/// object of another event (`response.created`) is not the request's end and says
/// nothing of it.
#[test]
fn the_servers_per_request_metrics_ride_with_the_terminal_usage() {
    let backend = client(true, false, None);
    let stream = concat!(
        "event: response.created\n",
        "data: {\"response\":{\"id\":\"resp_4\",\"object\":\"response\",\"output\":[],\"status\":\"in_progress\",\"usage\":null,\"metrics\":{\"queue_time_ms\":9.0}},\"sequence_number\":0,\"type\":\"response.created\"}\n\n",
        "event: response.output_text.delta\n",
        "data: {\"content_index\":0,\"delta\":\" Paris\",\"item_id\":\"msg_4\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":1,\"type\":\"response.output_text.delta\"}\n\n",
        "event: response.output_text.delta\n",
        "data: {\"content_index\":0,\"delta\":\".\",\"item_id\":\"msg_4\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":2,\"type\":\"response.output_text.delta\"}\n\n",
        "event: response.completed\n",
        "data: {\"response\":{\"id\":\"resp_4\",\"object\":\"response\",\"output\":[],\"status\":\"completed\",\"usage\":{\"input_tokens\":6,\"output_tokens\":2,\"total_tokens\":8},\"metrics\":{\"time_to_first_token_ms\":41.5,\"generation_time_ms\":8.25,\"queue_time_ms\":0.75,\"mean_itl_ms\":8.25,\"tokens_per_second\":40.0,\"speculative_decoding\":null}},\"sequence_number\":3,\"type\":\"response.completed\"}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), stream),
        [
            r#"1: chunk content=" Paris" reasoning=none"#,
            r#"2: chunk content="." reasoning=none"#,
            "3: usage prompt=6 completion=2",
            "3: server-timing queue=0.75 ttft=41.5 generation=8.25 itl=8.25",
            "3: finish completed",
        ]
    );
    let whole = r#"{"id":"resp_5","object":"response","output":[{"id":"msg_5","content":[{"annotations":[],"text":"Hi","type":"output_text"}],"role":"assistant","status":"completed","type":"message"}],"status":"completed","usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4},"metrics":{"time_to_first_token_ms":12.0,"generation_time_ms":0.0,"queue_time_ms":null,"mean_itl_ms":null,"tokens_per_second":83.3}}"#;
    assert_eq!(
        decode_whole(decoder(&client(false, false, None)), whole),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "0: usage prompt=3 completion=1",
            "0: server-timing queue=none ttft=12 generation=0 itl=none",
            "0: finish completed",
        ]
    );
}

#[test]
fn response_incomplete_is_a_terminal_event_too() {
    let backend = client(true, false, None);
    let body = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
        "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "1: usage prompt=3 completion=1",
            "1: finish incomplete",
        ]
    );
}

#[test]
fn error_events_and_streams_without_a_terminal_event_fail() {
    let backend = client(true, false, None);
    // OpenAI's `error` event keeps its message at the top level.
    let body = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
        "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"the engine died\",\"param\":null,\"sequence_number\":3}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "1: error server: the server reported an error: the engine died",
        ]
    );
    // `response.failed` keeps it in `response.error`.
    let body = concat!(
        "data: {\"type\":\"response.reasoning_text.delta\",\"delta\":\"Hm\"}\n\n",
        "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"out of memory\"},\"usage\":null}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content=none reasoning="Hm""#,
            "1: error server: the server reported an error: out of memory",
        ]
    );
    // vLLM's own in-band error object, on an event of any type.
    let body = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
        "data: {\"error\":{\"object\":\"error\",\"message\":\"boom\",\"type\":\"InternalServerError\",\"code\":500}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "1: error server: the server reported an error: boom",
        ]
    );
    // ... but not on a delta: vLLM reads only a delta event's text.
    let body = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\",\"error\":{\"message\":\"x\"}}\n\n",
        "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
    );
    assert_eq!(
        decode_sse_split_everywhere(|| decoder(&backend), body),
        [
            r#"0: chunk content="Hi" reasoning=none"#,
            "1: usage prompt=1 completion=1",
        ]
    );
    // Deltas and no terminal event: cut short, no usage.
    let cut: String = REASONING_STREAM
        .split_inclusive("\n\n")
        .filter(|event| !event.contains("response.completed"))
        .collect();
    let events = decode_sse_split_everywhere(|| decoder(&backend), &cut);
    assert_eq!(events.len(), 6, "{events:?}");
    assert!(
        events[5].starts_with("11: error malformed: the stream ended without a terminal event"),
        "{events:?}"
    );
    // No delta at all: nothing to add, the host fails it for want of output.
    let body = "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n";
    assert!(decode_sse_split_everywhere(|| decoder(&backend), body).is_empty());
    // A frame that is not JSON.
    let body = "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"\n\n";
    let events = decode_sse_split_everywhere(|| decoder(&backend), body);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].starts_with("0: error malformed: invalid JSON"),
        "{events:?}"
    );
}

/// A whole response (`--no-stream`) as vLLM returns it for a reasoning model.
const WHOLE: &str = concat!(
    "{\"id\":\"resp_2\",\"created_at\":1764000000,\"incomplete_details\":null,\"model\":\"Qwen/Qwen3-0.6B\",\"object\":\"response\",",
    "\"output\":[{\"id\":\"rs_2\",\"summary\":[],\"type\":\"reasoning\",\"content\":[{\"text\":\"Okay, \\\"so\\\"\",\"type\":\"reasoning_text\"}],\"status\":null},",
    "{\"id\":\"msg_2\",\"content\":[{\"annotations\":[],\"text\":\" Paris.\",\"type\":\"output_text\",\"logprobs\":null}],\"role\":\"assistant\",\"status\":\"completed\",\"type\":\"message\"}],",
    "\"status\":\"completed\",\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":9,\"output_tokens_details\":{\"reasoning_tokens\":4},\"total_tokens\":21},\"error\":null}",
);

#[test]
fn a_whole_response_gives_its_texts_and_usage() {
    let backend = client(false, false, None);
    assert_eq!(
        decode_whole(decoder(&backend), WHOLE),
        [
            r#"0: chunk content=" Paris." reasoning="Okay, \"so\"""#,
            "0: usage prompt=12 completion=9",
            "0: finish completed",
        ]
    );
    let failed = r#"{"id":"resp_3","object":"response","output":[],"status":"failed","error":{"code":"server_error","message":"out of memory"},"usage":null}"#;
    assert_eq!(
        decode_whole(decoder(&backend), failed),
        [
            "0: finish failed",
            "0: error server: the server reported an error: out of memory",
        ]
    );
    // vLLM's error object (a 4xx/5xx body read as a whole response).
    let error = r#"{"error":{"object":"error","message":"max_output_tokens is too large","type":"BadRequestError","code":400}}"#;
    assert_eq!(
        decode_whole(decoder(&backend), error),
        ["0: error server: the server reported an error: max_output_tokens is too large"]
    );
}

/// The shortcut for delta events of one shape reads every frame as a full read of it
/// alone does: frames that differ from the kept one in the delta and the sequence number
/// (valid or not: a number with a leading zero, a float, a broken literal), or elsewhere.
#[test]
fn delta_events_of_one_shape_read_as_each_read_alone() {
    let template = |delta: &str, number: &str, kind: &str| {
        format!(
            "{{\"content_index\":0,\"delta\":\"{delta}\",\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":1,\"sequence_number\":{number},\"type\":\"response.{kind}.delta\"}}"
        )
    };
    let mut frames = Vec::new();
    for kind in ["output_text", "reasoning_text"] {
        for (i, delta) in [
            " Paris", "", "\\n\\\"", "é", "x\\", "a\\u00e9", " the", "\\\"", "y",
        ]
        .iter()
        .enumerate()
        {
            for number in [
                (i + 8).to_string(),
                "9".into(),
                "10".into(),
                "100".into(),
                "0".into(),
                "07".into(),
                "1.5".into(),
                "-1".into(),
                "".into(),
                "1e3".into(),
            ] {
                frames.push(template(delta, &number, kind));
            }
        }
    }
    // Literals cut or ended early, bytes changed elsewhere.
    let base = template(" ok", "12", "output_text");
    frames.push(base.replace(" ok", "\\"));
    frames.push(base.replace(" ok\"", " ok"));
    frames.push(base.replace("msg_1", "msg_2"));
    frames.push(base.replace("\"logprobs\":[]", "\"logprobs\":[1]"));
    frames.push(base.replace("12,", "12 ,"));
    frames.push(base.replace(" ok", "a\",\"error\":\"b"));
    frames.push(base.clone());
    let backend = client(true, false, None);
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let all = bench_sdk::openai::render_frames(&mut decoder(&backend), &refs);
    let mut alone = Vec::new();
    for (i, frame) in refs.iter().enumerate() {
        for line in bench_sdk::openai::render_frames(&mut decoder(&backend), &[frame]) {
            // Renumbered, and without the cut-stream error of a one-frame stream.
            if !line.contains("without a terminal event") {
                alone.push(line.replacen("0: ", &format!("{i}: "), 1));
            }
        }
    }
    let all: Vec<String> = all
        .into_iter()
        .filter(|l| !l.contains("without a terminal event"))
        .collect();
    assert_eq!(all, alone);
    assert!(all.iter().filter(|l| l.contains("chunk")).count() > 100);
    assert!(all.iter().any(|l| l.contains("invalid JSON")));
}

/// The SDK's decoder fuzzing harness over a stream and a whole response, each read
/// streamed and whole.
#[test]
fn damaged_frames_never_panic() {
    let stream: Vec<&[u8]> = REASONING_STREAM
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::as_bytes)
        .collect();
    let responses = [&stream[..], &[WHOLE.as_bytes()]];
    let streamed = fuzz_backend(&responses, &client(true, false, None));
    let whole = fuzz_backend(&responses, &client(false, false, None));
    // Each sample read in its own mode gives its text.
    assert!(
        streamed[0].iter().any(|l| l.contains(": chunk content=\"")),
        "{streamed:?}"
    );
    assert!(
        whole[1].iter().any(|l| l.contains(": chunk content=\"")),
        "{whole:?}"
    );
}
