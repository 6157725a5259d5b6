//! OpenAI's other APIs (vLLM's `openai-responses` and `openai-audio`), each against the
//! mock speaking it. Its helpers serve `backends_anthropic.rs` too.
//!
//! The truth is the server's own record of each request (`/mock/requests`, by request
//! id) and the text the `openai` backend gets from the same server (token `i` of every
//! answer is the same word, whatever the API).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

pub(crate) const PROMPTS: usize = 6;
pub(crate) const OUTPUT_LEN: usize = 8;
pub(crate) const TTFT: Duration = Duration::from_millis(40);
pub(crate) const ITL: Duration = Duration::from_millis(10);

/// A run of `backend` against `m` with `args`, its request ids `<prefix><index>`.
pub(crate) fn run(m: &Mock, backend: &str, prefix: &str, args: &[&str]) -> Value {
    let out = Bench::against(&m.url)
        .backend(backend)
        .random(16, OUTPUT_LEN as u32)
        .prompts(PROMPTS as u64)
        .args(["--max-concurrency", "3", "--request-id-prefix", prefix])
        .args(args)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], PROMPTS, "{backend}: {out}");
    assert_eq!(r["failed"], 0, "{backend}: {out}");
    r
}

pub(crate) fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The words of an answer of the mock (each starts with a space).
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(' ').skip(1).map(|w| format!(" {w}")).collect()
}

/// The texts the `openai` backend gets from `m`: the mock's first `OUTPUT_LEN` words.
pub(crate) fn reference(m: &Mock) -> Vec<String> {
    let r = run(m, "openai", "ref-", &[]);
    r["generated_texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

/// Per request: bench's TTFT is never less than the server's and its gaps are the
/// server's, one per token after the first. `Some(why)` when only the bounds a busy
/// machine can break were missed.
pub(crate) fn check_timing(m: &Mock, r: &Value, prefix: &str) -> Option<String> {
    let records = m.server.as_ref().unwrap().requests();
    let ttfts = numbers(&r["ttfts"]);
    let itls = r["itls"].as_array().unwrap();
    let mut missed = Vec::new();
    for i in 0..PROMPTS {
        let id = format!("{prefix}{i}");
        let record = records
            .iter()
            .rfind(|rec| rec.id == id)
            .unwrap_or_else(|| panic!("the server has no record of {id}"));
        let ttft_ms = ttfts[i] * 1e3;
        let gaps: Vec<f64> = numbers(&itls[i]).iter().map(|s| s * 1e3).collect();
        assert!(
            ttft_ms >= record.ttft_ms - 0.5,
            "{id}: {ttft_ms} < {record:?}"
        );
        assert_eq!(gaps.len(), record.itl_ms.len(), "{id}: {gaps:?} {record:?}");
        assert_eq!(gaps.len(), OUTPUT_LEN - 1, "{id}");
        if ttft_ms - record.ttft_ms >= 10.0 {
            missed.push(format!("{id}: TTFT {ttft_ms} ms, the server's {record:?}"));
        }
        let (ours, theirs) = (gaps.iter().sum::<f64>(), record.itl_ms.iter().sum::<f64>());
        if (ours - theirs).abs() >= 10.0 {
            missed.push(format!("{id}: gaps {gaps:?}, the server's {record:?}"));
        }
    }
    (!missed.is_empty()).then(|| missed.join("; "))
}

/// Runs `attempt` (given its number, for fresh request ids) under the measured load rule of
/// [`within_bounds`]: its exact checks panic on every attempt; only a missed timing bound
/// (`Some`) is tried again, and fails the test when the machine was quiet.
pub(crate) fn with_attempts(what: &str, mut attempt: impl FnMut(usize) -> Option<String>) {
    let mut n = 0;
    within_bounds(what, || {
        n += 1;
        attempt(n).map_or(Ok(()), Err)
    });
}

#[test]
fn openai_responses_times_reasoning_and_output_deltas_as_the_mock_sent_them() {
    const REASONING: usize = 3;
    let _alone = gate::exclusive();
    let m = mock(bench::mock::MockConfig {
        ttft: TTFT,
        itl: ITL,
        reasoning: bench::mock::Reasoning {
            tokens: REASONING as u32,
            ..Default::default()
        },
        ..Default::default()
    });
    let texts = reference(&m);
    // The prompt lengths the server reported for the same prompts through the completions
    // API (the mock counts words either way).
    let input_lens = run(&m, "openai", "ref-in-", &[])["input_lens"].clone();
    let lens = input_lens.as_array().unwrap();
    assert_eq!(lens.len(), PROMPTS);
    // Not the dataset's 16 tokens: the server's usage decides.
    assert!(lens.iter().any(|n| n != 16), "{input_lens}");
    with_attempts("openai-responses", |n| {
        let prefix = format!("resp{n}-");
        let r = run(&m, "openai-responses", &prefix, &[]);
        // vLLM takes the prompt length from the terminal event's usage too.
        assert_eq!(r["input_lens"], input_lens);
        assert_eq!(r["backend"], "openai-responses");
        // The text is the output deltas' (reasoning is timed, not returned, as in vLLM);
        // the output length is the terminal event's usage, reasoning included.
        for (got, full) in r["generated_texts"].as_array().unwrap().iter().zip(&texts) {
            assert_eq!(got.as_str().unwrap(), words(full)[REASONING..].concat());
        }
        assert_eq!(r["total_output_tokens"], PROMPTS * OUTPUT_LEN, "{r:#}");
        assert!(
            r["output_lens"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n == OUTPUT_LEN),
            "{}",
            r["output_lens"]
        );
        // The first reasoning delta is the first token; content starts REASONING later.
        let records = m.server.as_ref().unwrap().requests();
        for i in 0..PROMPTS {
            let id = format!("{prefix}{i}");
            let record = records.iter().rfind(|rec| rec.id == id).unwrap();
            let first_content = record.first_content_ms.unwrap();
            let due = record.ttft_ms + record.itl_ms[..REASONING].iter().sum::<f64>();
            assert!((first_content - due).abs() < 1e-6, "{record:?}");
        }
        check_timing(&m, &r, &prefix)
    });
}

#[test]
fn openai_responses_reads_whole_responses_without_streaming() {
    let m = mock(Default::default());
    let texts = reference(&m);
    // The `stream` option (the host's `--no-stream` reaches plugins the same way).
    let r = run(
        &m,
        "openai-responses",
        "whole-",
        &["--backend-option", "stream=false"],
    );
    assert_eq!(r["generated_texts"].as_array().unwrap(), &texts);
    assert_eq!(r["total_output_tokens"], PROMPTS * OUTPUT_LEN);
    for gaps in r["itls"].as_array().unwrap() {
        assert!(gaps.as_array().unwrap().is_empty(), "{gaps}");
    }
}

#[test]
fn openai_responses_fails_on_error_events_and_streams_without_a_terminal_event() {
    // Every other request to arrive is faulted: 2 of 4.
    for (faults, needle) in [
        (
            bench::mock::Faults {
                error_event_rate: 0.5,
                ..Default::default()
            },
            "the server reported an error: mock server: request",
        ),
        (
            bench::mock::Faults {
                no_done_rate: 0.5,
                ..Default::default()
            },
            "the stream ended without a terminal event",
        ),
    ] {
        half_faulted("openai-responses", faults, needle);
    }
}

/// 4 requests of `backend` against a mock that faults every other one with `faults`:
/// 2 complete, and 2 fail with an error that contains `needle`.
pub(crate) fn half_faulted(backend: &str, faults: bench::mock::Faults, needle: &str) {
    let m = mock(bench::mock::MockConfig {
        faults,
        ..Default::default()
    });
    let out = Bench::against(&m.url)
        .backend(backend)
        .random(16, OUTPUT_LEN as u32)
        .prompts(4)
        .save_detailed()
        .run();
    assert!(out.success(), "{out}");
    let r = out.json();
    assert_eq!(r["completed"], 2, "{out}");
    assert_eq!(r["failed"], 2, "{out}");
    let failures: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .filter(|e| !e.is_empty())
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures.iter().all(|e| e.contains(needle)),
        "{backend}, {needle}: {failures:?}"
    );
}

/// `bench dataset sample` of the same workload: each request's upload size by request id,
/// and its expected output length.
fn sampled_uploads(flags: &[String]) -> HashMap<String, (u64, u64)> {
    let mut args: Vec<String> = vec!["dataset".into(), "sample".into()];
    args.extend(flags.iter().cloned());
    let out = bench(&args).assert_success();
    out.stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let file = &v["multi_modal_data"][0]["file"];
            assert_eq!(file["mime_type"], "audio/wav", "{v}");
            (
                v["request_id"].as_str().unwrap().to_owned(),
                (
                    file["bytes"].as_u64().unwrap(),
                    v["expected_output_len"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Checks the mock's record of every upload of a run against the sampled workload: one
/// per request, to `endpoint`, the WAV as the dataset made it, vLLM's form fields.
fn check_uploads(m: &Mock, endpoint: &str, prefix: &str, want: &HashMap<String, (u64, u64)>) {
    let uploads: Vec<_> = m
        .server
        .as_ref()
        .unwrap()
        .uploads()
        .into_iter()
        .filter(|u| {
            u.request_id
                .as_deref()
                .is_some_and(|id| id.starts_with(prefix))
        })
        .collect();
    assert_eq!(uploads.len(), want.len(), "{uploads:?}");
    for upload in &uploads {
        let id = upload.request_id.as_deref().unwrap();
        let (bytes, output_len) = want[id];
        assert_eq!(upload.endpoint, endpoint, "{upload:?}");
        assert_eq!(
            (upload.file_name.as_str(), upload.content_type.as_str()),
            ("audio.wav", "audio/wav")
        );
        assert_eq!(upload.file_bytes as u64, bytes, "{upload:?}");
        let field = |name: &str| {
            upload
                .fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(field("model"), Some("mock"), "{upload:?}");
        assert_eq!(
            field("max_completion_tokens"),
            Some(output_len.to_string().as_str())
        );
        for (name, value) in [
            ("stream", "True"),
            ("language", "en"),
            ("stream_include_usage", "True"),
            ("stream_continuous_usage_stats", "True"),
        ] {
            assert_eq!(field(name), Some(value), "{name}: {upload:?}");
        }
        // vLLM sends no prompt: the server prompts its model itself.
        assert_eq!(field("prompt"), None);
    }
}

#[test]
fn openai_audio_uploads_custom_audio_clips_and_times_the_transcription() {
    let _alone = gate::exclusive();
    let m = mock(bench::mock::MockConfig {
        ttft: TTFT,
        itl: ITL,
        ..Default::default()
    });
    let texts = reference(&m);
    let clips = data("datasets/audio/clips.jsonl").display().to_string();
    let output_len = OUTPUT_LEN.to_string();
    let dataset = [
        "--dataset-name",
        "custom_audio",
        "--dataset-path",
        &clips,
        "--custom-output-len",
        &output_len,
    ];
    with_attempts("openai-audio", |n| {
        let prefix = format!("aud{n}-");
        let out = Bench::against(&m.url)
            .backend("openai-audio")
            .args(dataset)
            .prompts(PROMPTS as u64)
            .args(["--max-concurrency", "3", "--request-id-prefix", &prefix])
            .save_detailed()
            .run()
            .assert_success();
        let r = out.json();
        assert_eq!(r["completed"], PROMPTS, "{out}");
        assert_eq!(r["backend"], "openai-audio");
        assert_eq!(r["generated_texts"].as_array().unwrap(), &texts);
        assert_eq!(r["total_output_tokens"], PROMPTS * OUTPUT_LEN, "{r:#}");
        let mut flags: Vec<String> = dataset.iter().map(|s| s.to_string()).collect();
        flags.extend(
            [
                "--tokenizer",
                &gpt2(),
                "--num-prompts",
                &PROMPTS.to_string(),
                "--request-id-prefix",
                &prefix,
            ]
            .map(str::to_owned),
        );
        check_uploads(&m, "transcriptions", &prefix, &sampled_uploads(&flags));
        check_timing(&m, &r, &prefix)
    });
}

#[test]
fn openai_audio_translates_an_hf_asr_set() {
    let m = mock(Default::default());
    let root = data("datasets/audio/asr").display().to_string();
    let dataset: Vec<String> = [
        "--dataset-name",
        "hf",
        "--dataset-path",
        &root,
        "--hf-name",
        "openslr/librispeech_asr",
        "--hf-subset",
        "clean",
        "--hf-split",
        "train",
        "--num-prompts",
        "4",
        "--request-id-prefix",
        "asr-",
    ]
    .map(str::to_owned)
    .to_vec();
    let out = Bench::against(&m.url)
        .backend("openai-audio")
        .args(&dataset)
        .args(["--endpoint", "/v1/audio/translations"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 4, "{out}");
    assert_eq!(r["failed"], 0, "{out}");
    let mut flags = dataset.clone();
    flags.extend(["--tokenizer".to_owned(), gpt2()]);
    let want = sampled_uploads(&flags);
    check_uploads(&m, "translations", "asr-", &want);
    // The output lengths are the server's usage: what each request asked for.
    let asked: u64 = want.values().map(|(_, n)| n).sum();
    assert_eq!(r["total_output_tokens"], asked, "{r:#}");
}

/// Seconds of audio in a 16-bit PCM WAV upload, from its size: the clips the datasets
/// upload, re-encoded as soundfile writes them (44-byte header, 2 bytes a sample), by
/// their frames, channels and rate as `tests/data/datasets/audio/README.md` lists them.
fn upload_seconds(bytes: usize) -> f64 {
    let custom_audio = [
        (16000, 1, 16000),
        (8000, 1, 16000),
        (5512, 2, 22050),
        (24000, 1, 16000),
        (20000, 1, 16000),
        (32000, 1, 16000),
    ];
    let asr_rows = [3200, 7200, 10400, 13600, 18400, 8800, 5600, 12000].map(|f| (f, 1, 8000));
    custom_audio
        .iter()
        .chain(&asr_rows)
        .find(|&&(frames, channels, _)| 44 + 2 * frames * channels == bytes)
        .map(|&(frames, _, rate)| frames as f64 / f64::from(rate))
        .unwrap_or_else(|| panic!("no test clip uploads as {bytes} bytes"))
}

/// vLLM's `rtfx`: the seconds of audio the completed requests uploaded (the mock's record
/// of each upload) over the benchmark duration, in the result file and on the console.
fn check_rtfx(m: &Mock, prefix: &str, out: &Run) {
    let r = out.json();
    assert_eq!(r["failed"], 0, "{out}");
    let audio: f64 = m
        .server
        .as_ref()
        .unwrap()
        .uploads()
        .iter()
        .filter(|u| {
            u.request_id
                .as_deref()
                .is_some_and(|id| id.starts_with(prefix))
        })
        .map(|u| upload_seconds(u.file_bytes))
        .sum();
    assert!(audio > 0.0);
    let want = audio / r["duration"].as_f64().unwrap();
    let rtfx = r["rtfx"].as_f64().unwrap();
    assert!(
        (rtfx - want).abs() <= 1e-9 * want,
        "rtfx {rtfx}, want {want}"
    );
    let line = format!("{:<40} {:<10.2}", "RTFx (Inverse Real-Time Factor):", rtfx);
    assert!(out.stdout.contains(&line), "{line:?} not in\n{out}");
}

#[test]
fn audio_uploads_give_vllms_rtfx_and_inline_chat_audio_none() {
    let m = mock(Default::default());
    let clips = data("datasets/audio/clips.jsonl").display().to_string();
    let custom_audio = ["--dataset-name", "custom_audio", "--dataset-path", &clips];
    let out = Bench::against(&m.url)
        .backend("openai-audio")
        .args(custom_audio)
        .args(["--custom-output-len", "4", "--request-id-prefix", "rtfx-"])
        .prompts(12)
        .save_result()
        .run()
        .assert_success();
    assert_eq!(out.json()["completed"], 12, "{out}");
    check_rtfx(&m, "rtfx-", &out);

    let root = data("datasets/audio/asr").display().to_string();
    let out = Bench::against(&m.url)
        .backend("openai-audio")
        .args(["--dataset-name", "hf", "--dataset-path", &root])
        .args([
            "--hf-name",
            "openslr/librispeech_asr",
            "--hf-subset",
            "clean",
        ])
        .args(["--hf-split", "train", "--request-id-prefix", "rtfx-asr-"])
        .prompts(5)
        .save_result()
        .run()
        .assert_success();
    assert_eq!(out.json()["completed"], 5, "{out}");
    check_rtfx(&m, "rtfx-asr-", &out);

    // The same clips inline in chat messages: vLLM's chat client sets no audio duration.
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .args(custom_audio)
        .args(["--enable-multimodal-chat", "--custom-output-len", "4"])
        .prompts(6)
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(
        (r["completed"].as_u64(), r["rtfx"].as_f64()),
        (Some(6), Some(0.0)),
        "{out}"
    );
    assert!(!out.stdout.contains("RTFx"), "{out}");
}
