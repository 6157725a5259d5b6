//! The synthetic random family (`random` with `--random-batch-size`, `random-rerank`,
//! `random-mm`) against request sets made by vLLM 0.32's own dataset code
//! (`tests/data/datasets/vllm-requests`, see `random-family.md` there), plus what the
//! references cannot show: images that decode at their bucket sizes, the same bytes for
//! the same seed, videos (Motion JPEG in AVI where vLLM sends MPEG-4 in MP4) of vLLM's
//! frame counts and sizes, and the errors for what bench cannot make.

use serde_json::Value;

use crate::common::{bench, data, vllm_reference};

/// The requests of a reference file (its `meta` line skipped).
fn reference(name: &str) -> Vec<Value> {
    vllm_reference(name).1
}
/// `bench dataset sample` with the given dataset, tokenizer, seed and flags.
fn sample(dataset: &str, tokenizer: &str, seed: u32, n: u32, flags: &[&str]) -> Vec<Value> {
    let tokenizer = data(&format!("tokenizers/{tokenizer}"));
    let mut args: Vec<String> = vec![
        "dataset".into(),
        "sample".into(),
        "--dataset-name".into(),
        dataset.into(),
        "--tokenizer".into(),
        tokenizer.display().to_string(),
        "--seed".into(),
        seed.to_string(),
        "--num-prompts".into(),
        n.to_string(),
        "--request-id-prefix".into(),
        "benchmark-serving".into(),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    let out = bench(&args).assert_success();
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// Width and height from a baseline or progressive JPEG's frame header.
fn jpeg_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..2], [0xFF, 0xD8], "not a JPEG");
    let mut i = 2;
    while i + 9 < bytes.len() {
        assert_eq!(bytes[i], 0xFF, "JPEG segment expected at {i}");
        let marker = bytes[i + 1];
        let len = usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
        if matches!(marker, 0xC0..=0xC2) {
            let h = u16::from_be_bytes([bytes[i + 5], bytes[i + 6]]);
            let w = u16::from_be_bytes([bytes[i + 7], bytes[i + 8]]);
            return (u32::from(w), u32::from(h));
        }
        i += 2 + len;
    }
    panic!("no JPEG frame header")
}

/// The RIFF chunks of an AVI file's lists, depth first: (fourcc, body).
fn riff_chunks(bytes: &[u8], out: &mut Vec<([u8; 4], Vec<u8>)>) {
    let mut i = 0;
    while i + 8 <= bytes.len() {
        let id: [u8; 4] = bytes[i..i + 4].try_into().unwrap();
        let size = u32::from_le_bytes(bytes[i + 4..i + 8].try_into().unwrap()) as usize;
        let body = &bytes[i + 8..i + 8 + size];
        if &id == b"LIST" || &id == b"RIFF" {
            riff_chunks(&body[4..], out);
        } else {
            out.push((id, body.to_vec()));
        }
        i += 8 + size + size % 2;
    }
}

/// The MP4 boxes inside the containers on the way to a track's sizes, depth first.
fn mp4_boxes(bytes: &[u8], out: &mut Vec<([u8; 4], Vec<u8>)>) {
    let mut i = 0;
    while i + 8 <= bytes.len() {
        let size = u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = bytes[i + 4..i + 8].try_into().unwrap();
        assert!(size >= 8 && i + size <= bytes.len(), "bad MP4 box at {i}");
        let body = &bytes[i + 8..i + size];
        if [b"moov", b"trak", b"mdia", b"minf", b"stbl"].contains(&&kind) {
            mp4_boxes(body, out);
        } else {
            out.push((kind, body.to_vec()));
        }
        i += size;
    }
}

/// A video data URL as `[width, height, frames]`: bench's Motion JPEG AVI (every frame
/// decoded to its JPEG header, all of one size) or vLLM's MP4 (the track header's size and
/// the sample table's count), so that both sides compare.
fn video_shape(url: &str) -> [u32; 3] {
    if let Some(payload) = url.strip_prefix("data:video/x-msvideo;base64,") {
        let mut chunks = Vec::new();
        riff_chunks(&unbase64(payload), &mut chunks);
        let sizes: Vec<(u32, u32)> = chunks
            .iter()
            .filter(|(id, _)| id == b"00dc")
            .map(|(_, jpeg)| jpeg_size(jpeg))
            .collect();
        assert!(
            !sizes.is_empty() && sizes.iter().all(|s| *s == sizes[0]),
            "{sizes:?}"
        );
        let strh = &chunks.iter().find(|(id, _)| id == b"strh").unwrap().1;
        assert_eq!(&strh[4..8], b"MJPG");
        return [sizes[0].0, sizes[0].1, sizes.len() as u32];
    }
    let payload = url
        .strip_prefix("data:video/mp4;base64,")
        .unwrap_or_else(|| panic!("not an AVI or MP4 data URL: {}", &url[..40]));
    let mut boxes = Vec::new();
    mp4_boxes(&unbase64(payload), &mut boxes);
    let body = |kind: &[u8; 4]| &boxes.iter().find(|(k, _)| k == kind).unwrap().1;
    let tkhd = body(b"tkhd");
    let fixed = |at: usize| u32::from_be_bytes(tkhd[at..at + 4].try_into().unwrap()) >> 16;
    let stsz = body(b"stsz");
    let count = u32::from_be_bytes(stsz[8..12].try_into().unwrap());
    [fixed(tkhd.len() - 8), fixed(tkhd.len() - 4), count]
}

/// Standard base64, as in a data URL.
fn unbase64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in text.trim_end_matches('=').as_bytes().chunks(4) {
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            n |= value(c) << (18 - 6 * k);
        }
        out.extend(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// A prompt in one shape for both sides: vLLM's list `[query, doc, ...]` and bench's
/// `{query, documents}` both as a list; a chat message as its text and image sizes.
fn normalize(prompt: &Value) -> Value {
    if let Some(query) = prompt.get("query") {
        let mut all = vec![query.clone()];
        all.extend(prompt["documents"].as_array().unwrap().iter().cloned());
        return Value::Array(all);
    }
    if let Some(content) = prompt.get(0).and_then(|m| m.get("content")) {
        let parts = content.as_array().unwrap().iter().map(|part| {
            if let Some(url) = part.get("video_url") {
                serde_json::json!({"video": video_shape(url["url"].as_str().unwrap())})
            } else if let Some(url) = part.get("image_url") {
                let url = url["url"].as_str().unwrap();
                let payload = url
                    .strip_prefix("data:image/jpeg;base64,")
                    .unwrap_or_else(|| panic!("not a JPEG data URL: {}", &url[..40]));
                let (w, h) = jpeg_size(&unbase64(payload));
                serde_json::json!({"image": [w, h]})
            } else {
                part["text"].clone()
            }
        });
        return Value::Array(parts.collect());
    }
    prompt.clone()
}

fn check(name: &str, got: &[Value]) {
    let want = reference(name);
    assert_eq!(got.len(), want.len(), "{name}: request count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            normalize(&g["prompt"]),
            normalize(&w["prompt"]),
            "{name}: request {i} differs in its prompt"
        );
        for key in ["prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(g[key], w[key], "{name}: request {i} differs in {key}");
        }
    }
}

#[test]
fn random_batches_match_vllm() {
    let flags = [
        "--random-input-len=32",
        "--random-output-len=8",
        "--random-range-ratio=0.5",
        "--random-prefix-len=4",
        "--random-batch-size=3",
    ];
    check(
        "random-batch-qwen3-seed0",
        &sample("random", "qwen3", 0, 10, &flags),
    );
}

#[test]
fn random_rerank_gpt2_seed0_matches_vllm() {
    let flags = [
        "--random-input-len=64",
        "--random-range-ratio=0.5",
        "--random-batch-size=4",
    ];
    check(
        "random-rerank-gpt2-seed0",
        &sample("random-rerank", "gpt2", 0, 12, &flags),
    );
}

#[test]
fn random_rerank_qwen3_seed42_matches_vllm() {
    let flags = [
        "--random-input-len=100",
        "--random-range-ratio=0.3",
        "--random-batch-size=3",
    ];
    check(
        "random-rerank-qwen3-seed42",
        &sample("random-rerank", "qwen3", 42, 10, &flags),
    );
}

#[test]
fn random_rerank_without_reranker_matches_vllm() {
    let flags = [
        "--random-input-len=48",
        "--random-range-ratio=0.2",
        "--random-batch-size=4",
        "--no-reranker",
    ];
    check(
        "random-rerank-noreranker-gpt2-seed42",
        &sample("random-rerank", "gpt2", 42, 9, &flags),
    );
}

/// Texts, lengths, item counts and image sizes as vLLM draws them (the pixels are drawn
/// too: a count or size drawn out of step would show in every later request).
#[test]
fn random_mm_gpt2_seed0_matches_vllm() {
    let flags = [
        "--random-input-len=24",
        "--random-output-len=8",
        "--random-range-ratio=0.5",
        "--random-prefix-len=3",
        "--random-mm-base-items-per-request=2",
        "--random-mm-num-mm-items-range-ratio=0.5",
        r#"--random-mm-limit-mm-per-prompt={"image": 2}"#,
        "--random-mm-bucket-config={(16, 24, 1): 0.5, (8, 8, 1): 0.3, (4, 12, 1): 0.2}",
        "--enable-multimodal-chat",
    ];
    check(
        "random-mm-gpt2-seed0",
        &sample("random-mm", "gpt2", 0, 10, &flags),
    );
}

/// A video bucket whose limit is 0 is drawn and dropped, as in vLLM.
#[test]
fn random_mm_qwen3_seed42_matches_vllm() {
    let flags = [
        "--random-input-len=40",
        "--random-output-len=16",
        "--random-range-ratio=0.25",
        "--random-mm-base-items-per-request=3",
        "--random-mm-num-mm-items-range-ratio=1.0",
        r#"--random-mm-limit-mm-per-prompt={"image": 3, "video": 0}"#,
        "--random-mm-bucket-config={(10, 20, 1): 1, (30, 10, 1): 2, (20, 20, 8): 0.5}",
        "--enable-multimodal-chat",
    ];
    check(
        "random-mm-qwen3-seed42",
        &sample("random-mm", "qwen3", 42, 8, &flags),
    );
}

/// The default buckets (256x256 and 1280x720 images): every image decodes at one of
/// them, one per request; the same seed gives the same bytes, another seed others.
#[test]
fn random_mm_defaults_same_seed_same_bytes() {
    let flags = ["--random-input-len=16", "--enable-multimodal-chat"];
    let first = sample("random-mm", "gpt2", 7, 6, &flags);
    for request in &first {
        let parts = normalize(&request["prompt"]);
        let images: Vec<&Value> = parts.as_array().unwrap()[1..].iter().collect();
        assert_eq!(images.len(), 1, "{parts}");
        let size = &images[0]["image"];
        assert!(
            *size == serde_json::json!([256, 256]) || *size == serde_json::json!([1280, 720]),
            "{size}"
        );
    }
    assert_eq!(sample("random-mm", "gpt2", 7, 6, &flags), first);
    assert_ne!(sample("random-mm", "gpt2", 8, 6, &flags), first);
}

/// `custom_image` (vLLM's `CustomImageDataset`) with chat messages: the same lines, order,
/// oversampling, lengths and `file://` references as vLLM.
#[test]
fn custom_image_gpt2_seed0_matches_vllm() {
    let path = data("datasets/custom_image/images.jsonl");
    let flags = [
        "--dataset-path",
        path.to_str().unwrap(),
        "--custom-output-len=64",
        "--enable-multimodal-chat",
    ];
    let got = sample("custom_image", "gpt2", 0, 7, &flags);
    let want = reference("custom_image-gpt2-seed0");
    assert_eq!(got.len(), want.len());
    let parts = |prompt: &Value| -> Vec<(String, String)> {
        prompt[0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let kind = p["type"].as_str().unwrap().to_string();
                let value = p.get("text").unwrap_or(&p["image_url"]["url"]);
                (kind, value.as_str().unwrap().to_string())
            })
            .collect()
    };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(parts(&g["prompt"]), parts(&w["prompt"]), "request {i}");
        for key in ["prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(g[key], w[key], "request {i} differs in {key}");
        }
    }
}

/// `--custom-ensure-client-side-data`: local images (next to the dataset file) go inline
/// as data URLs of the files' own bytes; a data URL stays as it is.
#[test]
fn custom_image_client_side_data_inlines_local_files() {
    let path = data("datasets/custom_image/images.jsonl");
    let flags = [
        "--dataset-path",
        path.to_str().unwrap(),
        "--enable-multimodal-chat",
        "--custom-ensure-client-side-data",
        "--disable-shuffle",
    ];
    let got = sample("custom_image", "gpt2", 0, 5, &flags);
    let red = std::fs::read(data("datasets/custom_image/red.png")).unwrap();
    let blue = std::fs::read(data("datasets/custom_image/blue.jpg")).unwrap();
    let urls: Vec<Vec<String>> = got
        .iter()
        .map(|r| {
            r["prompt"][0]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["image_url"]["url"].as_str().map(str::to_string))
                .collect()
        })
        .collect();
    let inline = |url: &str, mime: &str, bytes: &[u8]| {
        let payload = url
            .strip_prefix(&format!("data:{mime};base64,"))
            .unwrap_or_else(|| panic!("not inline {mime}: {}", &url[..url.len().min(60)]));
        assert_eq!(unbase64(payload), bytes);
    };
    inline(&urls[0][0], "image/png", &red);
    inline(&urls[1][0], "image/png", &red);
    inline(&urls[1][1], "image/jpeg", &blue);
    inline(&urls[3][0], "image/jpeg", &blue);
    assert_eq!(urls[4], ["data:image/png;base64,iVBORw0KGgo="]);
}

#[test]
fn custom_image_bad_line_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"prompt\": \"a\", \"image_files\": [\"x.png\"]}\n{\"prompt\": \"b\"}\n",
    )
    .unwrap();
    let out = bench(&[
        "dataset",
        "sample",
        "--dataset-name",
        "custom_image",
        "--dataset-path",
        path.to_str().unwrap(),
        "--tokenizer",
        &data("tokenizers/gpt2").display().to_string(),
        "--num-prompts",
        "2",
    ])
    .assert_failure();
    assert!(
        out.stderr.contains("bad.jsonl:2: a line needs"),
        "the error should name the file and line 2:\n{out}"
    );
}

/// Videos: with vLLM's own request set for the same seed (made with OpenCV's MPEG-4), the
/// same texts, lengths, item order and, per video, the same width, height and frame
/// count; bench's are Motion JPEG AVI data URLs in `video_url` parts. The pixels are
/// drawn as vLLM draws them, so the images and texts after a video stay in step.
#[test]
fn random_mm_videos_match_vllms_shapes_and_decode() {
    let flags = [
        "--random-input-len=20",
        "--random-output-len=8",
        "--random-range-ratio=0.5",
        "--random-mm-base-items-per-request=2",
        "--random-mm-num-mm-items-range-ratio=0.5",
        r#"--random-mm-limit-mm-per-prompt={"image": 2, "video": 1}"#,
        "--random-mm-bucket-config={(8, 12, 1): 0.5, (10, 6, 4): 0.3, (6, 14, 3): 0.2}",
        "--enable-multimodal-chat",
    ];
    let got = sample("random-mm", "gpt2", 3, 8, &flags);
    check("random-mm-video-gpt2-seed3", &got);
    let mut videos = 0;
    for request in &got {
        for part in request["prompt"][0]["content"].as_array().unwrap() {
            if let Some(url) = part.get("video_url") {
                let url = url["url"].as_str().unwrap();
                assert!(
                    url.starts_with("data:video/x-msvideo;base64,"),
                    "{}",
                    &url[..40]
                );
                assert_eq!(part["type"], "video_url");
                videos += 1;
            }
        }
    }
    assert!(videos > 0);
    assert_eq!(sample("random-mm", "gpt2", 3, 8, &flags), got);

    // Without chat the video goes with the request's multimodal items, and a bigger
    // video (vLLM's default 1280x720 at 16 frames is the usual one) decodes the same way.
    let plain = sample(
        "random-mm",
        "gpt2",
        1,
        2,
        &[
            "--random-input-len=8",
            "--random-mm-bucket-config={(72, 128, 5): 1.0}",
        ],
    );
    for request in &plain {
        let items = request["multi_modal_data"]
            .as_array()
            .unwrap_or_else(|| panic!("no multimodal items: {request}"));
        let shapes: Vec<[u32; 3]> = items
            .iter()
            .map(|p| video_shape(p["video_url"]["url"].as_str().unwrap()))
            .collect();
        assert_eq!(shapes, [[128, 72, 5]]);
    }
}

/// `random-mm` is shardable: prepared by 1, 3 or 4 instances at once (each encoding the
/// images of its own positions), the request set is the same, byte for byte, images and
/// videos included.
#[test]
fn random_mm_sharded_preparation_makes_the_same_requests() {
    use bench::runtime::{HostContext, PluginRef, Runtime, RuntimeConfig};
    use bench::tokenizer::Tokenizer;
    use std::sync::Arc;

    // Compiling the plugin and running four instances keeps the cores busy.
    crate::common::gate::enter();
    let cache = tempfile::tempdir().unwrap();
    let tokenizer = Arc::new(Tokenizer::load(data("tokenizers/gpt2").to_str().unwrap()).unwrap());
    let options: Vec<(String, String)> = [
        ("input-len", "24"),
        ("mm-base-items-per-request", "2"),
        ("mm-num-mm-items-range-ratio", "0.5"),
        (
            "mm-bucket-config",
            "{(16, 24, 1): 0.5, (8, 8, 1): 0.3, (12, 16, 3): 0.2}",
        ),
        ("mm-limit-mm-per-prompt", r#"{"image": 2, "video": 1}"#),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let make = |shards: u32| {
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            max_shards: Some(shards),
            ..RuntimeConfig::default()
        })
        .unwrap();
        let host = HostContext {
            tokenizer: Some(tokenizer.clone()),
            seed: 3,
        };
        let mut dataset = runtime
            .load_dataset(&PluginRef::parse("random-mm").unwrap(), host, None)
            .unwrap();
        assert!(dataset.description().unwrap().shardable);
        dataset.sample(70, options.clone()).unwrap()
    };
    let whole = make(1);
    assert_eq!(whole.len(), 70);
    let videos = whole
        .iter()
        .filter(|r| format!("{:?}", r.request.multimodal).contains("VideoUrl"))
        .count();
    assert!(videos > 0, "the set holds videos too");
    for shards in [3, 4] {
        let sharded = make(shards);
        assert_eq!(sharded.len(), 70);
        for (i, (a, b)) in whole.iter().zip(&sharded).enumerate() {
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "request {i}, {shards} shards"
            );
        }
    }
}
