//! What the plugin boundary costs: the OpenAI completions decoder of `bench-sdk`, run
//! natively and inside the first-party `openai` wasm plugin through the host runtime
//! (the one `decode` call per response: copying the head and the frames in, the flat
//! output out, its checks: everything the host pays per response). Prints the CPU time per chunk of each and their ratio, for a
//! plain vLLM stream, whose chunks repeat the same bytes around the text (the decoder then
//! scans only the text), and for one with `--logprobs 1`, whose chunks differ throughout
//! (every chunk read in full).
//!
//! A third row is the floor of any wasm decoder: the fixture plugin `echo-backend`
//! (tests/fixtures/plugins, built on the first run) through the same call, which reports
//! every frame as a chunk without reading a byte of it. What it costs is the boundary
//! (copying the response into the sandbox, the call, lifting and checking the result)
//! plus the least a decoder does per chunk, compiled by Cranelift.
//!
//!     cargo bench -p bench --bench decode
//!     BENCH_DECODE_PLUGIN=path/to/openai.wasm cargo bench -p bench --bench decode
//!
//! The second form measures another build of the plugin (other flags, another SDK).
//! CPU time is the calling thread's (CLOCK_THREAD_CPUTIME_ID), so other load on the
//! machine does not inflate it.

use std::time::Duration;

use bench::runtime::{ClientConfig, HostContext, PluginRef, ResponseHead, Runtime, RuntimeConfig};
use bench_sdk::Decoder;
use bench_sdk::openai::{ChoiceFields, OpenAiClient};

#[path = "../../tests/common/fixtures.rs"]
mod fixtures;

/// Chunks per response, as in the issue's measurements (128 tokens plus the usage chunk).
const TOKENS: usize = 128;

/// A response's frame payloads laid end to end, and where each ends.
struct Response {
    buffer: Vec<u8>,
    ends: Vec<u32>,
}

/// A vLLM-style streamed completions response: `TOKENS` chunks, then the usage chunk.
/// `logprobs` gives each chunk the `logprobs` object vLLM sends for `--logprobs 1`, so
/// the bytes around the text differ from chunk to chunk.
fn response(logprobs: bool) -> Response {
    let words = [" the", " of", " and", " to", " in", " a", " is", " that"];
    let mut buffer = Vec::new();
    let mut ends = Vec::new();
    let mut offset = 0;
    for i in 0..TOKENS {
        let word = words[i % words.len()];
        let finish = if i + 1 == TOKENS {
            r#""length""#
        } else {
            "null"
        };
        let logprobs = if logprobs {
            // Python's repr of a float: up to 17 significant digits.
            let logprob = -0.1 * (i % 7) as f64 - 0.000_123_456_789_012_345_6 * i as f64;
            format!(
                r#"{{"text_offset":[{offset}],"token_logprobs":[{logprob:?}],"tokens":["{word}"],"top_logprobs":[{{"{word}":{logprob:?}}}]}}"#
            )
        } else {
            "null".to_owned()
        };
        offset += word.len();
        buffer.extend_from_slice(
            format!(
                r#"{{"id":"cmpl-5c1b6a6e0d8a4c5f","object":"text_completion","created":1763800000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{{"index":0,"text":"{word}","logprobs":{logprobs},"finish_reason":{finish},"stop_reason":null}}],"usage":null}}"#
            )
            .as_bytes(),
        );
        ends.push(buffer.len() as u32);
    }
    buffer.extend_from_slice(br#"{"id":"cmpl-5c1b6a6e0d8a4c5f","object":"text_completion","created":1763800000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":128,"total_tokens":256,"completion_tokens":128}}"#);
    ends.push(buffer.len() as u32);
    Response { buffer, ends }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU nanoseconds per chunk of `decode_one`, over enough responses to run ~1 s.
fn per_chunk(mut decode_one: impl FnMut() -> usize) -> f64 {
    for _ in 0..50 {
        decode_one();
    }
    let mut responses = 0u64;
    let start = thread_cpu();
    while thread_cpu() - start < Duration::from_secs(1) {
        for _ in 0..20 {
            assert!(decode_one() > TOKENS, "every chunk must decode to an event");
        }
        responses += 20;
    }
    (thread_cpu() - start).as_nanos() as f64 / (responses as f64 * (TOKENS + 1) as f64)
}

fn config() -> ClientConfig {
    ClientConfig {
        model: "m".into(),
        ignore_eos: false,
        stream: true,
        extra_body: None,
        options: vec![],
    }
}

fn main() {
    let streams = [
        (
            "vLLM stream: the same bytes around every chunk's text",
            response(false),
        ),
        (
            "vLLM stream with --logprobs 1: every chunk differs outside its text",
            response(true),
        ),
    ];

    let sdk_config = bench_sdk::ClientConfig {
        model: "m".into(),
        ignore_eos: false,
        stream: true,
        extra_body: None,
        options: vec![],
    };
    let (client, _) = OpenAiClient::open("openai", sdk_config).expect("client");
    let fields = ChoiceFields {
        holder: None,
        content: "text",
        reasoning: &[],
    };

    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let plugin_ref = match std::env::var_os("BENCH_DECODE_PLUGIN") {
        Some(path) => PluginRef::File(path.into()),
        None => PluginRef::Builtin("openai".into()),
    };
    let mut plugin = runtime
        .load_backend(&plugin_ref, HostContext::default())
        .expect("the openai plugin");
    plugin.open(config()).expect("open");
    let mut floor = runtime
        .load_backend(&fixtures::fixture("echo-backend"), HostContext::default())
        .expect("the echo-backend fixture");
    floor.open(config()).expect("open echo-backend");
    // The head vLLM's server (uvicorn) sends with a stream.
    let head = ResponseHead {
        status: 200,
        headers: b"date: Sun, 22 Nov 2026 17:00:00 GMT\r\nserver: uvicorn\r\n\
                   content-type: text/event-stream; charset=utf-8\r\n\
                   x-request-id: bench-run-0\r\ntransfer-encoding: chunked\r\n"
            .to_vec(),
    };

    let row = |name: &str, ns: f64| {
        println!(
            "| {name:<36} | {ns:>8.0} | {:>20.0} |",
            1e9 / (ns * (TOKENS + 1) as f64)
        )
    };
    println!("OpenAI completions decoder, {TOKENS}-token responses");
    for (what, Response { buffer, ends }) in &streams {
        // Like the host: a decoder per response, fed the whole response, then finished.
        let mut events = Vec::new();
        let native_ns = per_chunk(|| {
            events.clear();
            let mut decoder = client.decoder(fields);
            decoder
                .feed(buffer, ends, &mut events)
                .expect("native decode");
            decoder.finish(&mut events).expect("native finish");
            events.len()
        });
        let wasm_ns = per_chunk(|| {
            let decoded = plugin.decode(&head, buffer, ends).expect("wasm decode");
            decoded.chunks.frames.len() + decoded.events.len()
        });
        let floor_ns = per_chunk(|| {
            let decoded = floor.decode(&head, buffer, ends).expect("echo decode");
            decoded.chunks.frames.len() + decoded.events.len()
        });
        println!();
        println!("{what} ({} bytes per response)", buffer.len());
        println!("| path                                 | ns/chunk | responses/s per core |");
        println!("|--------------------------------------|---------:|---------------------:|");
        row("native (bench-sdk, same code)", native_ns);
        row("wasm plugin through the host runtime", wasm_ns);
        row("wasm floor: echo-backend, reads none", floor_ns);
        println!("wasm / native: {:.2}x", wasm_ns / native_ns);
        println!(
            "floor / native: {:.2}x (what any wasm decoder pays before reading a byte)",
            floor_ns / native_ns
        );
    }
}
