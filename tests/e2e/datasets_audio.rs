//! Audio datasets: `custom_audio` (vLLM's `CustomAudioDataset`) and the clips of `hf`'s ASR
//! sets, end to end through the real binary, against vLLM 0.32's own request sets for the
//! clips of `tests/data/datasets/audio` (`vllm-requests/audio.md`): the same prompts,
//! lengths and order, and the same WAV files (byte for byte where the decoded samples are
//! soundfile's: every WAV subtype and FLAC; the same rate, channels and frames for MP3
//! and Ogg/Vorbis).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::{Bench, Run, bench, data, flag_value, mock, vllm_reference};

fn clips_path() -> String {
    data("datasets/audio/clips.jsonl").display().to_string()
}

fn lines(out: &Run) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// Standard base64 (the test crate has no decoder of its own).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c:?}"),
        }
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c) << (18 - 6 * i);
        }
        let n = chunk.len() - 1;
        out.extend_from_slice(&acc.to_be_bytes()[1..1 + n]);
    }
    out
}

/// The rate, channels and frames of a 16-bit PCM WAV file (what every clip is sent as).
fn wav_shape(wav: &[u8]) -> (u64, u64, u64) {
    assert_eq!((&wav[..4], &wav[8..16]), (&b"RIFF"[..], &b"WAVEfmt "[..]));
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([wav[at], wav[at + 1]]));
    let u32_at = |at: usize| u64::from(u32::from_le_bytes(wav[at..at + 4].try_into().unwrap()));
    assert_eq!((u16_at(20), u16_at(34)), (1, 16), "16-bit integer PCM");
    assert_eq!(&wav[36..40], b"data");
    let (channels, rate) = (u16_at(22), u32_at(24));
    assert_eq!(u32_at(40) as usize, wav.len() - 44);
    (rate, channels, u32_at(40) / 2 / channels)
}

/// The clip each prompt of `clips.jsonl` names.
fn clip_of_prompt() -> HashMap<String, String> {
    std::fs::read_to_string(clips_path())
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["prompt"].as_str().unwrap().to_string(),
                v["audio"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Whether bench decodes a clip to soundfile's very samples (integer and float WAV,
/// FLAC); MP3 and Vorbis decoders differ by a step in a few samples.
fn exact_decoder(clip: &str) -> bool {
    clip.ends_with(".wav") || clip.ends_with(".flac")
}

/// `bench dataset sample` flags for a custom_audio reference's call.
fn custom_audio_flags(meta: &Value) -> Vec<String> {
    let s = flag_value;
    let sample = &meta["sample"];
    let mut args: Vec<String> = [
        "dataset",
        "sample",
        "--dataset-name",
        "custom_audio",
        "--dataset-path",
        &clips_path(),
        "--tokenizer",
        &data(&format!("tokenizers/{}", s(&meta["tokenizer"])))
            .display()
            .to_string(),
        "--seed",
        &s(&meta["seed"]),
        "--num-prompts",
        &s(&meta["num_requests"]),
        "--request-id-prefix",
        "benchmark-serving",
    ]
    .map(String::from)
    .to_vec();
    if let Some(len) = sample.get("output_len") {
        args.push(format!("--custom-output-len={}", s(len)));
    }
    if sample.get("enable_multimodal_chat") == Some(&Value::Bool(true)) {
        args.push("--enable-multimodal-chat".into());
    }
    args
}

/// With `--enable-multimodal-chat`: the plain prompt and the clip as a WAV data URL in one
/// user message, the same texts, lengths (gpt2's count, no template), output lengths from
/// `output_tokens`, order and oversampling as vLLM, and the WAV vLLM sends in its
/// `input_audio` part, decoded to the source's rate, channels and length.
#[test]
fn custom_audio_chat_matches_vllm() {
    let (meta, want) = vllm_reference("custom_audio-gpt2-seed0-chat");
    let out = bench(&custom_audio_flags(&meta)).assert_success();
    let got = lines(&out);
    assert_eq!(got.len(), want.len(), "{out}");
    let clips = clip_of_prompt();
    let mut exact = 0;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let content = g["prompt"][0]["content"].as_array().unwrap();
        assert_eq!(g["prompt"][0]["role"], "user");
        assert_eq!(content.len(), 2, "request {i}: {g}");
        assert_eq!(content[0]["text"], w["prompt"], "request {i}");
        for key in ["prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(g[key], w[key], "request {i} differs in {key}");
        }
        let url = content[1]["audio_url"]["url"].as_str().unwrap();
        let wav = base64_decode(url.strip_prefix("data:audio/wav;base64,").unwrap());
        let vllm = &w["multi_modal_data"]["input_audio"];
        let shape = (
            vllm["rate"].as_u64().unwrap(),
            vllm["channels"].as_u64().unwrap(),
            vllm["frames"].as_u64().unwrap(),
        );
        assert_eq!(wav_shape(&wav), shape, "request {i}");
        let clip = &clips[w["prompt"].as_str().unwrap()];
        if exact_decoder(clip) {
            let sha = format!("{:x}", Sha256::digest(&wav));
            assert_eq!(sha, vllm["sha256"].as_str().unwrap(), "request {i}: {clip}");
            exact += 1;
        }
    }
    assert!(exact >= 4, "WAV and FLAC clips compared byte for byte");
}

/// Without it: the prompt in Qwen3's chat template (counted as transformers counts it),
/// the clip as an `audio.wav` upload of vLLM's size, in vLLM's order for seed 1.
#[test]
fn custom_audio_uploads_match_vllm_with_a_chat_template() {
    let (meta, want) = vllm_reference("custom_audio-qwen3-seed1");
    let out = bench(&custom_audio_flags(&meta)).assert_success();
    let got = lines(&out);
    assert_eq!(got.len(), want.len(), "{out}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for key in ["prompt", "prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(g[key], w[key], "request {i} differs in {key}");
        }
        assert!(
            g["prompt"]
                .as_str()
                .unwrap()
                .starts_with("<|im_start|>user\n")
        );
        let file = &g["multi_modal_data"][0]["file"];
        assert_eq!(
            (&file["filename"], &file["mime_type"], &file["bytes"]),
            (
                &Value::from("audio.wav"),
                &Value::from("audio/wav"),
                &w["multi_modal_data"]["audio"]["bytes"]
            ),
            "request {i}"
        );
    }
}

/// A dataset folder of its own, with `clips.jsonl` holding `lines` and a copy of one clip.
fn scratch(lines: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(data("datasets/audio/tone.wav"), dir.path().join("tone.wav")).unwrap();
    let path = dir.path().join("clips.jsonl");
    std::fs::write(&path, lines).unwrap();
    (dir, path.display().to_string())
}

fn sample_file(path: &str) -> Run {
    bench(&[
        "dataset",
        "sample",
        "--dataset-name",
        "custom_audio",
        "--dataset-path",
        path,
        "--tokenizer",
        &crate::common::gpt2(),
        "--num-prompts",
        "3",
    ])
}

/// Bad lines name the file and line; a missing clip names its path; a clip outside the
/// dataset's folder says it must be under it.
#[test]
fn custom_audio_errors_name_the_file_the_line_and_the_clip() {
    let ok = r#"{"prompt": "a", "audio": "tone.wav"}"#;
    let (_dir, path) = scratch(&format!("{ok}\n{{\"prompt\": \"b\"}}\n"));
    let out = sample_file(&path).assert_failure();
    assert!(
        out.stderr
            .contains(&format!("{path}:2: no \"audio\" field")),
        "{out}"
    );

    let (_dir, path) = scratch(&format!(
        "{ok}\n\n{{\"prompt\": \"b\", \"audio\": \"gone/nope.wav\"}}\n"
    ));
    let out = sample_file(&path).assert_failure();
    assert!(
        out.stderr
            .contains(&format!("{path}:3: cannot read the clip gone/nope.wav")),
        "{out}"
    );

    let outside = data("datasets/audio/glide.mp3").display().to_string();
    let (_dir, path) = scratch(&format!(
        "{{\"prompt\": \"b\", \"audio\": \"{outside}\"}}\n"
    ));
    let out = sample_file(&path).assert_failure();
    assert!(
        out.stderr.contains(&format!(
            "{path}:1: the clip {outside} is outside the dataset's folder"
        )),
        "{out}"
    );

    let (dir, path) = scratch(r#"{"prompt": "b", "audio": "notes.txt"}"#);
    std::fs::write(dir.path().join("notes.txt"), "not a clip").unwrap();
    let out = sample_file(&path).assert_failure();
    assert!(
        out.stderr
            .contains(&format!("{path}:1: clip notes.txt: not an audio encoding")),
        "{out}"
    );
}

/// `bench serve` against the mock server: every request (each with its clip as an
/// `audio_url` part) completes, and the dataset's input tokens are the prompts' counts.
#[test]
fn custom_audio_serves_chat_requests_to_the_mock_server() {
    let m = mock(Default::default());
    let flags = [
        "--dataset-name",
        "custom_audio",
        "--dataset-path",
        &clips_path(),
        "--enable-multimodal-chat",
        "--custom-output-len",
        "4",
    ];
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .args(flags)
        .prompts(12)
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 12, "{out}");
    assert_eq!(r["failed"], 0, "{out}");
    let gpt2 = crate::common::gpt2();
    let mut args = vec![
        "dataset",
        "sample",
        "--tokenizer",
        &gpt2,
        "--num-prompts",
        "12",
    ];
    args.extend(flags);
    let sampled = bench(&args).assert_success();
    let prompt_tokens: u64 = lines(&sampled)
        .iter()
        .map(|l| l["prompt_len"].as_u64().unwrap())
        .sum();
    // The mock server reports its own (word) counts as usage; the dataset's are kept too.
    assert_eq!(r["input_tokens_dataset_count"], prompt_tokens, "{out}");
}

/// `hf`'s ASR kind on MP3, Ogg/Vorbis and FLAC bytes (a made-up LibriSpeech-layout set):
/// vLLM's duration filter keeps the same clips, in the same order, each uploaded as a WAV
/// of the size vLLM writes (the same frames; `dataset sample` shows an upload's size).
#[test]
fn hf_asr_clips_of_every_encoding_like_vllm() {
    let (meta, want) = vllm_reference("hf-asr-mp3-ogg-qwen3-seed0");
    let s = flag_value;
    let init = &meta["init"];
    let sample = &meta["sample"];
    let root = data(&format!("datasets/{}", s(&meta["dataset_path"])));
    assert!(Path::new(&root).is_dir());
    let args: Vec<String> = vec![
        "dataset".into(),
        "sample".into(),
        "--dataset-name".into(),
        "hf".into(),
        "--dataset-path".into(),
        root.display().to_string(),
        "--hf-name".into(),
        s(&init["hf_name"]),
        "--hf-subset".into(),
        s(&init["dataset_subset"]),
        "--hf-split".into(),
        s(&init["dataset_split"]),
        "--tokenizer".into(),
        data("tokenizers/qwen3").display().to_string(),
        "--seed".into(),
        s(&meta["seed"]),
        "--num-prompts".into(),
        s(&meta["num_requests"]),
        "--request-id-prefix".into(),
        "benchmark-serving".into(),
        format!(
            "--asr-min-audio-len-sec={}",
            s(&sample["asr_min_audio_len_sec"])
        ),
        format!(
            "--asr-max-audio-len-sec={}",
            s(&sample["asr_max_audio_len_sec"])
        ),
    ];
    let out = Bench::new()
        .args(&args)
        .env("BENCH_LOG", "info")
        .run()
        .assert_success();
    let got = lines(&out);
    assert_eq!(got.len(), want.len(), "{out}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for key in ["prompt", "prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(g[key], w[key], "request {i} differs in {key}");
        }
        let file = &g["multi_modal_data"][0]["file"];
        let vllm = &w["multi_modal_data"]["audio"];
        assert_eq!(file["mime_type"], "audio/wav");
        // The same frames at 8 kHz mono: the same 16-bit WAV size.
        assert_eq!(file["bytes"], vllm["bytes"], "request {i}: {g}\n{w}");
    }
    // Without oversampling: the six clips of 0.5 to 2 s, the other two counted.
    let n = args.iter().position(|a| a == "--num-prompts").unwrap();
    let mut args = args.clone();
    args[n + 1] = "100".into();
    args.push("--no-oversample".into());
    let out = bench(&args).assert_success();
    assert_eq!(lines(&out).len(), 6, "{out}");
    assert!(out.stderr.contains("2 row(s) skipped"), "{out}");
}
