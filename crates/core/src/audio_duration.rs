//! The length in seconds of the audio each request uploads, for vLLM's `rtfx` (inverse
//! real-time factor: seconds of audio the server got through per second of benchmark).
//!
//! vLLM 0.32's audio request function sets `input_audio_duration` to
//! `soundfile.info(clip).duration` (frames over the rate) of the file it uploads, and no
//! other request function sets it. Here a request's audio is what it uploads as a file:
//! the `binary` content parts of its spec (its `multimodal` list and its chat messages'
//! parts), which only a multipart backend can send. Audio a chat request carries inline
//! (an `audio-url` data URL, `--enable-multimodal-chat`) is not counted, as vLLM does not
//! count it; no backend is named.
//!
//! The clips are measured once, before the clock starts, with the SDK's `audio` module
//! (the soundfile rules it is tested against: WAV and FLAC from their headers, MP3 and
//! Ogg/Vorbis by decoding), on every core when there are many. The module is plain Rust
//! over bytes with no tie to the SDK's wasm bindings, so the host shares it instead of
//! holding a second copy of those rules.

use crate::runtime::{ContentPart, Prompt, RequestSpec};

/// The measured workload: seconds of uploaded audio per request index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AudioSeconds {
    /// One entry per request, in workload order; empty when no request uploads a file.
    pub seconds: Vec<f64>,
    /// Parts that could not be measured (counted as 0 seconds).
    pub unmeasured: usize,
    /// Why the first of them could not be measured.
    pub first_error: Option<String>,
}

impl AudioSeconds {
    /// The one warning of a run with clips that could not be measured.
    pub fn warning(&self) -> Option<String> {
        let why = self.first_error.as_deref()?;
        Some(format!(
            "{} uploaded audio file(s) could not be measured ({why}); they count as 0 \
             seconds of audio in rtfx",
            self.unmeasured
        ))
    }
}

/// The files (binary parts) a request uploads.
fn uploads(spec: &RequestSpec) -> impl Iterator<Item = &crate::runtime::BinaryData> {
    let chat = match &spec.prompt {
        Prompt::Chat(messages) => messages.as_slice(),
        _ => &[],
    };
    chat.iter()
        .flat_map(|m| m.content.iter())
        .chain(spec.multimodal.iter())
        .filter_map(|part| match part {
            ContentPart::Binary(data) => Some(data),
            _ => None,
        })
}

/// Whether an upload is meant as audio: an `audio/` media type, or none that says what it
/// is (then its bytes decide). An image or document upload is not audio, and no warning.
fn is_audio(mime: &str) -> bool {
    let mime = mime.trim().to_ascii_lowercase();
    mime.is_empty() || mime.starts_with("audio/") || mime == "application/octet-stream"
}

/// Seconds of audio one request uploads, and the errors of the parts that could not be
/// measured.
fn request_seconds(spec: &RequestSpec, errors: &mut Vec<String>) -> f64 {
    let mut total = 0.0;
    for data in uploads(spec).filter(|d| is_audio(&d.mime_type)) {
        match bench_sdk::audio::seconds(&data.data) {
            Ok(s) => total += s,
            Err(e) => errors.push(format!("{}: {e}", data.file_name)),
        }
    }
    total
}

/// Measures every request's uploaded audio; empty [`AudioSeconds::seconds`] when no request
/// uploads a file (nothing is allocated for text workloads).
pub fn measure(specs: &[RequestSpec]) -> AudioSeconds {
    if !specs.iter().any(|s| uploads(s).next().is_some()) {
        return AudioSeconds::default();
    }
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let chunk = specs.len().div_ceil(threads).max(1);
    let parts: Vec<(Vec<f64>, Vec<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut errors = Vec::new();
                    let seconds = chunk
                        .iter()
                        .map(|s| request_seconds(s, &mut errors))
                        .collect();
                    (seconds, errors)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("measuring audio clips panicked"))
            .collect()
    });
    let mut out = AudioSeconds {
        seconds: Vec::with_capacity(specs.len()),
        ..AudioSeconds::default()
    };
    for (seconds, errors) in parts {
        out.seconds.extend(seconds);
        out.unmeasured += errors.len();
        if out.first_error.is_none() {
            out.first_error = errors.into_iter().next();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{BinaryData, ChatMessage};

    fn clip(name: &str) -> Vec<u8> {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/datasets/audio"
        );
        std::fs::read(format!("{dir}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn binary(mime: &str, name: &str, data: Vec<u8>) -> ContentPart {
        ContentPart::Binary(BinaryData {
            mime_type: mime.into(),
            file_name: name.into(),
            data,
        })
    }

    fn spec(prompt: Prompt, multimodal: Vec<ContentPart>) -> RequestSpec {
        RequestSpec {
            prompt,
            prompt_len: 1,
            expected_output_len: 1,
            multimodal,
            request_id: None,
            lora_name: None,
            extra_body: None,
            send_at: None,
            session: None,
            output_constraint: None,
        }
    }

    fn upload(name: &str) -> RequestSpec {
        spec(
            Prompt::Text("p".into()),
            vec![binary("audio/wav", name, clip(name))],
        )
    }

    /// soundfile's durations of the test clips (frames over the rate, which is what
    /// `soundfile.info(path).duration` gives), as `tests/data/datasets/audio/README.md`
    /// lists them: written and read back with soundfile 0.14.0 / libsndfile 1.2.2 by
    /// `scripts/audio_test_clips.py` (no soundfile is installed beside vLLM here).
    const SOUNDFILE: &[(&str, f64)] = &[
        ("tone.wav", 1.0),
        ("float.wav", 8000.0 / 16000.0),
        ("stereo24.wav", 5512.0 / 22050.0),
        ("glide.flac", 24000.0 / 16000.0),
        ("glide.ogg", 20000.0 / 16000.0),
        ("glide.mp3", 32000.0 / 16000.0),
    ];

    #[test]
    fn each_encoding_measures_as_soundfile_info() {
        let specs: Vec<RequestSpec> = SOUNDFILE.iter().map(|(name, _)| upload(name)).collect();
        let measured = measure(&specs);
        let want: Vec<f64> = SOUNDFILE.iter().map(|&(_, s)| s).collect();
        assert_eq!(measured.seconds, want);
        assert_eq!((measured.unmeasured, measured.warning()), (0, None));
    }

    #[test]
    fn a_request_sums_its_uploads_in_chat_parts_and_multimodal() {
        let chat = Prompt::Chat(vec![ChatMessage {
            role: "user".into(),
            content: vec![
                ContentPart::Text("transcribe".into()),
                binary("audio/flac", "a.flac", clip("glide.flac")),
            ],
        }]);
        let both = spec(chat, vec![binary("", "b.wav", clip("tone.wav"))]);
        assert_eq!(measure(&[both]).seconds, [1.5 + 1.0]);
    }

    #[test]
    fn inline_audio_and_text_workloads_count_nothing() {
        // A chat request's audio data URL is sent inline, which vLLM does not count.
        let inline = spec(
            Prompt::Chat(vec![ChatMessage {
                role: "user".into(),
                content: vec![ContentPart::AudioUrl(
                    "data:audio/wav;base64,UklGRg==".into(),
                )],
            }]),
            vec![],
        );
        let text = spec(Prompt::Text("p".into()), vec![]);
        assert_eq!(measure(&[inline, text]), AudioSeconds::default());
    }

    #[test]
    fn an_unreadable_clip_counts_zero_with_one_warning() {
        let bad = |name: &str| {
            spec(
                Prompt::Text("p".into()),
                vec![binary("audio/wav", name, b"not audio at all".to_vec())],
            )
        };
        let image = spec(
            Prompt::Text("p".into()),
            vec![binary("image/png", "x.png", b"\x89PNG".to_vec())],
        );
        let measured = measure(&[bad("a.wav"), upload("tone.wav"), bad("b.wav"), image]);
        assert_eq!(measured.seconds, [0.0, 1.0, 0.0, 0.0]);
        assert_eq!(measured.unmeasured, 2);
        let warning = measured.warning().unwrap();
        assert!(
            warning.starts_with("2 uploaded audio file(s) could not be measured (a.wav: "),
            "{warning}"
        );
    }

    #[test]
    fn many_requests_keep_their_order_across_threads() {
        let names = ["tone.wav", "float.wav", "glide.flac"];
        let specs: Vec<RequestSpec> = (0..50).map(|i| upload(names[i % 3])).collect();
        let want: Vec<f64> = (0..50).map(|i| [1.0, 0.5, 1.5][i % 3]).collect();
        assert_eq!(measure(&specs).seconds, want);
    }
}
