//! vLLM's `CustomAudioDataset` (vLLM 0.32): a JSONL file whose lines are
//! `{"prompt": ..., "audio": "<path>", "output_tokens": n}`, read and shuffled as vLLM's
//! `CustomDataset` (Python's `random.seed(seed)`, as the SDK's
//! [`Picker`](bench_sdk::sampling::Picker)), one request per line in order, then
//! oversampled when the lines run out (unless `--no-oversample`).
//!
//! Each clip is decoded (soundfile's `read`, the SDK's [`audio::decode`]) and re-encoded as
//! a 16-bit PCM WAV (soundfile's default for `format="WAV"`), as vLLM does for every
//! request. With `--enable-multimodal-chat` the prompt is sent as it is, in one user
//! message beside the clip (a `data:audio/wav;base64,` URL; vLLM sends the same bytes as an
//! `input_audio` part), and measured without a chat template; otherwise the prompt is
//! wrapped in the tokenizer's chat template when it has one (unless
//! `--skip-chat-template`) and the clip goes as a file upload (`audio.wav`, what vLLM's
//! transcription client names it).

use bench_sdk::audio;
use bench_sdk::custom::{self, CustomParams, PromptRow};
use bench_sdk::dataset::Positions;
use bench_sdk::rng::Random;
use bench_sdk::sampling::{ChatTemplate, TokenCounter};
use bench_sdk::{BinaryData, ChatMessage, ContentPart, PluginError, Prompt, RequestSpec};
use serde_json::Value;

/// One line of the file: its prompt (and `output_tokens`) and the clip it names.
#[derive(Clone, Debug)]
pub struct Row {
    pub text: PromptRow,
    /// The `audio` path as the line gives it.
    pub audio: String,
}

/// Parses the JSONL file: one object per non-blank line with a string `prompt` and a
/// string `audio` (the clip's path). Errors name the file and the 1-based line.
pub fn parse(text: &str, name: &str) -> Result<Vec<Row>, PluginError> {
    let mut rows = Vec::new();
    for (at, mut fields) in custom::jsonl_objects(text, name)? {
        let bad = |why: String| custom::line_error(name, at, why);
        let prompt = custom::prompt_field(&mut fields).map_err(bad)?;
        let audio = match fields.remove("audio") {
            Some(Value::String(p)) if !p.is_empty() => p,
            Some(_) => return Err(bad("\"audio\" must be a clip's path (a string)".into())),
            None => return Err(bad("no \"audio\" field (the clip's path)".into())),
        };
        rows.push(Row {
            text: PromptRow {
                line: at,
                prompt,
                output_tokens: fields.remove("output_tokens"),
            },
            audio,
        });
    }
    Ok(rows)
}

/// How the dataset is sampled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    /// `--custom-output-len` (256; -1 reads `output_tokens`), `--skip-chat-template`,
    /// `--disable-shuffle`, `--no-oversample`.
    pub custom: CustomParams,
    /// `--enable-multimodal-chat`.
    pub chat: bool,
}

/// Reads a clip a line names (a closure-like stand-in in tests).
pub trait Clips {
    fn read(&self, path: &str) -> Result<Vec<u8>, String>;
}

/// Decoding and re-encoding a clip costs far more than tokenizing its prompt, so a host
/// call makes at most this many requests from lines (the host's `max` aims at 250 ms).
const MAX_BATCH: usize = 32;

/// The error text by which the host says the tokenizer has no chat template (vLLM then
/// sends the prompt as it is).
const NO_TEMPLATE: &str = "no chat template";

/// vLLM's `CustomAudioDataset(...).sample(...)`, a batch per host call, or one shard of it.
///
/// Every line makes one request, so the whole set is known up front: position `i` is the
/// `i`-th line after the shuffle, and past the lines, the line Python's `random.choice`
/// picks among them (the oversampling draws of the SDK's `Picker`, made here from the
/// indices alone). A shard makes only its own positions (decoding only their clips) and
/// keeps a made request only while a later position of its own repeats the line.
pub struct Sampler {
    /// The lines, shuffled.
    rows: Vec<Row>,
    /// The line of each position of the whole set.
    order: Vec<usize>,
    positions: Positions,
    /// The next position to look at.
    next: usize,
    /// How many of this source's positions still to come use each line.
    uses: Vec<u32>,
    /// The request made from a line, while `uses` says it is needed again.
    made: Vec<Option<RequestSpec>>,
    params: Params,
    name: String,
    total: usize,
    /// Whether the tokenizer has a chat template, once a prompt found out.
    has_template: Option<bool>,
}

impl Sampler {
    /// `rows` must not be empty (vLLM fails on an empty file too).
    pub fn new(
        mut rows: Vec<Row>,
        seed: u64,
        num_requests: usize,
        params: Params,
        name: &str,
        positions: Positions,
    ) -> Result<Self, PluginError> {
        if rows.is_empty() {
            return Err(PluginError::InvalidInput(format!(
                "{name}: the file has no prompts"
            )));
        }
        let num_requests = if num_requests == 0 {
            rows.len()
        } else {
            num_requests
        };
        let flags = params.custom.flags;
        if !flags.disable_shuffle {
            Random::new(i128::from(seed)).shuffle(&mut rows);
        }
        let from_rows = rows.len().min(num_requests);
        let mut order: Vec<usize> = (0..from_rows).collect();
        if !flags.no_oversample && num_requests > from_rows {
            // vLLM's `maybe_oversample_requests`: `random.seed(seed)`, then a
            // `random.choice` among the requests made so far per missing request.
            let made = order.clone();
            let mut rng = Random::new(i128::from(seed));
            for _ in from_rows..num_requests {
                order.push(*rng.choice(&made).expect("rows are not empty"));
            }
        }
        let mut uses = vec![0u32; rows.len()];
        let mut total = 0;
        for (position, &row) in order.iter().enumerate() {
            if positions.keeps(position) {
                uses[row] += 1;
                total += 1;
            }
        }
        Ok(Sampler {
            made: vec![None; rows.len()],
            rows,
            order,
            positions,
            next: 0,
            uses,
            params,
            name: name.to_string(),
            total,
            has_template: None,
        })
    }

    /// How many requests this source makes in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The next (up to) `max` requests of this source, in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        clips: &impl Clips,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let mut out = Vec::new();
        while out.len() < max {
            // This round's positions (their lines, in order) and the lines to make.
            let (mut picks, mut to_make) = (Vec::new(), Vec::new());
            let mut position = self.positions.next_from(self.next);
            while position < self.order.len()
                && out.len() + picks.len() < max
                && to_make.len() < MAX_BATCH
            {
                let row = self.order[position];
                if self.made[row].is_none() && !to_make.contains(&row) {
                    to_make.push(row);
                }
                picks.push(row);
                self.next = position + 1;
                position = self.positions.next_from(self.next);
            }
            if picks.is_empty() {
                break;
            }
            let specs = self.make(tok, clips, &to_make)?;
            for (row, spec) in to_make.into_iter().zip(specs) {
                self.made[row] = Some(spec);
            }
            for row in picks {
                self.uses[row] -= 1;
                let spec = if self.uses[row] == 0 {
                    self.made[row].take()
                } else {
                    self.made[row].clone()
                };
                out.push(spec.expect("made above"));
            }
        }
        Ok(out)
    }

    /// The requests of lines `rows` (one tokenizer call for all).
    fn make(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        clips: &impl Clips,
        rows: &[usize],
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let (params, name) = (&self.params, self.name.as_str());
        let mut prompts = Vec::with_capacity(rows.len());
        let mut output_lens = Vec::with_capacity(rows.len());
        for &i in rows {
            let row = &self.rows[i];
            output_lens.push(custom::output_len(
                &row.text,
                params.custom.output_len,
                name,
            )?);
            let templated = !params.chat && !params.custom.skip_chat_template;
            prompts.push(if templated {
                chat_prompt(tok, &row.text.prompt, &mut self.has_template)?
            } else {
                row.text.prompt.clone()
            });
        }
        let counts = tok.token_counts(&prompts)?;
        let mut out = Vec::with_capacity(rows.len());
        for (((&i, prompt), n), output_len) in rows.iter().zip(prompts).zip(counts).zip(output_lens)
        {
            let row = &self.rows[i];
            let at =
                |why: String| PluginError::InvalidInput(format!("{name}:{}: {why}", row.text.line));
            let prompt_len =
                u32::try_from(n).map_err(|_| at(format!("a prompt of {n} tokens is too long")))?;
            let bytes = clips.read(&row.audio).map_err(&at)?;
            let wav = audio::to_pcm16_wav(&bytes)
                .map_err(|why| at(format!("clip {}: {why}", row.audio)))?
                .bytes;
            let mut spec = RequestSpec::text(String::new(), prompt_len, output_len);
            if params.chat {
                spec.prompt = Prompt::Chat(vec![ChatMessage {
                    role: "user".into(),
                    content: vec![
                        ContentPart::Text(prompt),
                        ContentPart::AudioUrl(audio::wav_data_url(&wav)),
                    ],
                }]);
            } else {
                spec.prompt = Prompt::Text(prompt);
                spec.multimodal = vec![ContentPart::Binary(BinaryData {
                    mime_type: "audio/wav".into(),
                    file_name: "audio.wav".into(),
                    data: wav,
                })];
            }
            out.push(spec);
        }
        Ok(out)
    }
}

/// The prompt in the chat template, or as it is when the tokenizer has none (vLLM checks
/// `tokenizer.chat_template is not None`).
fn chat_prompt(
    tok: &impl ChatTemplate,
    prompt: &str,
    has_template: &mut Option<bool>,
) -> Result<String, PluginError> {
    if *has_template == Some(false) {
        return Ok(prompt.to_string());
    }
    match tok.chat_prompt(prompt) {
        Ok(p) => {
            *has_template = Some(true);
            Ok(p)
        }
        Err(e) if has_template.is_none() && e.to_string().contains(NO_TEMPLATE) => {
            *has_template = Some(false);
            Ok(prompt.to_string())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::rng::Random;
    use bench_sdk::sampling::SampleFlags;

    /// Characters as tokens; a `<u>...</u>` chat template unless `plain`.
    struct Chars {
        plain: bool,
    }

    impl TokenCounter for Chars {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.chars().count()).collect())
        }
    }

    impl ChatTemplate for Chars {
        fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
            if self.plain {
                Err(PluginError::InvalidConfig(
                    "the tokenizer at x has no chat template (...)".into(),
                ))
            } else {
                Ok(format!("<u>{user}</u>"))
            }
        }
    }

    /// Half a second of 16 kHz silence at "a.wav", a quarter at "b.wav".
    struct TwoClips;

    impl Clips for TwoClips {
        fn read(&self, path: &str) -> Result<Vec<u8>, String> {
            match path {
                "a.wav" => Ok(audio::pcm16_wav(&[0.25; 8000], 1, 16000)),
                "b.wav" => Ok(audio::pcm16_wav(&[0.5; 4000], 1, 16000)),
                "bad.wav" => Ok(b"not audio".to_vec()),
                _ => Err(format!("cannot read the clip {path}: no such file")),
            }
        }
    }

    const FILE: &str = r#"{"prompt": "one", "audio": "a.wav", "output_tokens": 5}

{"prompt": "three", "audio": "b.wav", "output_tokens": 7.9}
{"prompt": "", "audio": "a.wav", "output_tokens": "11"}
"#;

    fn params(chat: bool, output_len: i64) -> Params {
        Params {
            custom: CustomParams {
                output_len,
                skip_chat_template: false,
                flags: SampleFlags {
                    disable_shuffle: true,
                    no_oversample: false,
                },
            },
            chat,
        }
    }

    fn drain(p: Params, n: usize, seed: u64, tok: &Chars) -> Vec<RequestSpec> {
        let rows = parse(FILE, "d.jsonl").unwrap();
        let mut sampler = Sampler::new(rows, seed, n, p, "d.jsonl", Positions::ALL).unwrap();
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(tok, &TwoClips, 2).unwrap();
            if got.is_empty() {
                break;
            }
            all.extend(got);
        }
        assert_eq!(all.len(), sampler.total());
        all
    }

    fn upload(spec: &RequestSpec) -> &BinaryData {
        match &spec.multimodal[..] {
            [ContentPart::Binary(b)] => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn clips_go_as_wav_uploads_beside_templated_prompts() {
        let all = drain(params(false, -1), 5, 0, &Chars { plain: false });
        let texts: Vec<&Prompt> = all.iter().map(|s| &s.prompt).collect();
        assert!(matches!(texts[0], Prompt::Text(t) if t == "<u>one</u>"));
        assert_eq!(all[0].prompt_len, "<u>one</u>".len() as u32);
        assert_eq!(
            all.iter()
                .take(3)
                .map(|s| s.expected_output_len)
                .collect::<Vec<_>>(),
            [5, 7, 11]
        );
        let b = upload(&all[1]);
        assert_eq!(
            (b.mime_type.as_str(), b.file_name.as_str()),
            ("audio/wav", "audio.wav")
        );
        let clip = audio::decode(&b.data).unwrap();
        assert_eq!((clip.rate, clip.frames()), (16000, 4000));
        // 0.5 is 16384 in 16 bits, read back as 16384 / 32768 and written again unchanged.
        assert_eq!(i16::from_le_bytes([b.data[44], b.data[45]]), 16384);
        // Oversampled past the three lines with a fresh random.seed(0).
        let mut rng = Random::new(0);
        let picks: Vec<u32> = (0..2)
            .map(|_| *rng.choice(&[10u32, 12, 7]).unwrap())
            .collect();
        let got: Vec<u32> = all[3..].iter().map(|s| s.prompt_len).collect();
        assert_eq!(got, picks);
    }

    #[test]
    fn without_a_chat_template_prompts_go_as_they_are() {
        let all = drain(params(false, 20), 3, 0, &Chars { plain: true });
        assert!(matches!(&all[1].prompt, Prompt::Text(t) if t == "three"));
        assert_eq!((all[1].prompt_len, all[1].expected_output_len), (5, 20));
    }

    #[test]
    fn multimodal_chat_sends_the_plain_prompt_and_a_wav_data_url() {
        let all = drain(params(true, 256), 2, 0, &Chars { plain: false });
        let Prompt::Chat(m) = &all[0].prompt else {
            panic!("{:?}", all[0].prompt)
        };
        assert!(all[0].multimodal.is_empty());
        assert_eq!((m.len(), m[0].role.as_str()), (1, "user"));
        assert!(matches!(&m[0].content[0], ContentPart::Text(t) if t == "one"));
        assert_eq!(all[0].prompt_len, 3, "no chat template in the count");
        let ContentPart::AudioUrl(url) = &m[0].content[1] else {
            panic!("{:?}", m[0].content)
        };
        let wav = TwoClips.read("a.wav").unwrap();
        let want = audio::wav_data_url(&audio::decode(&wav).unwrap().to_wav());
        assert_eq!(url, &want);
    }

    #[test]
    fn shuffles_with_the_seed_and_stops_without_oversampling() {
        let mut p = params(false, 1);
        p.custom.flags = SampleFlags {
            disable_shuffle: false,
            no_oversample: true,
        };
        let all = drain(p, 10, 3, &Chars { plain: true });
        let mut order = vec![3u32, 5, 0];
        Random::new(3).shuffle(&mut order);
        assert_eq!(all.iter().map(|s| s.prompt_len).collect::<Vec<_>>(), order);
    }

    /// Reads count how often each clip is decoded.
    struct Counting(std::cell::RefCell<Vec<String>>);

    impl Clips for Counting {
        fn read(&self, path: &str) -> Result<Vec<u8>, String> {
            self.0.borrow_mut().push(path.to_string());
            TwoClips.read(path)
        }
    }

    #[test]
    fn shards_interleave_into_the_whole_set_and_decode_only_their_own() {
        let mut p = params(true, 9);
        p.custom.flags.disable_shuffle = false;
        let tok = Chars { plain: true };
        let sample = |positions: Positions, max: usize| {
            let rows = parse(FILE, "d.jsonl").unwrap();
            let mut sampler = Sampler::new(rows, 5, 11, p.clone(), "d.jsonl", positions).unwrap();
            let clips = Counting(Default::default());
            let mut all = Vec::new();
            loop {
                let got = sampler.next_batch(&tok, &clips, max).unwrap();
                if got.is_empty() {
                    break;
                }
                all.extend(got);
            }
            assert_eq!(all.len(), sampler.total());
            (all, clips.0.into_inner())
        };
        let (whole, reads) = sample(Positions::ALL, 4);
        assert_eq!(whole.len(), 11);
        // Three lines, each decoded once however often it is oversampled.
        assert_eq!(reads.len(), 3, "{reads:?}");
        for count in [2u32, 3] {
            let shards: Vec<Vec<RequestSpec>> = (0..count)
                .map(|i| sample(Positions::shard(i, count).unwrap(), 2).0)
                .collect();
            let mut merged = Vec::new();
            for i in 0..whole.len() {
                merged.push(shards[i % count as usize][i / count as usize].clone());
            }
            assert_eq!(
                format!("{merged:?}"),
                format!("{whole:?}"),
                "{count} shards"
            );
        }
        // The same order as the SDK's Picker (shuffle, then random.choice picks).
        let mut lens = vec![3u32, 5, 0];
        Random::new(5).shuffle(&mut lens);
        let mut rng = Random::new(5);
        let picks: Vec<u32> = (0..8).map(|_| *rng.choice(&lens).unwrap()).collect();
        let got: Vec<u32> = whole.iter().map(|s| s.prompt_len).collect();
        assert_eq!(got[..3], lens[..]);
        assert_eq!(got[3..], picks[..]);
    }

    #[test]
    fn bad_lines_and_clips_name_file_and_line() {
        for (text, needle) in [
            ("{\"audio\": \"a.wav\"}", "d.jsonl:1: no \"prompt\""),
            ("\n{\"prompt\": \"x\"}", "d.jsonl:2: no \"audio\""),
            ("{\"prompt\": \"x\", \"audio\": 3}", "\"audio\" must be"),
            ("{\"prompt\": 1, \"audio\": \"a\"}", "\"prompt\" must be"),
            ("[1]", "expected a JSON object"),
            ("{\"prompt\": ", "d.jsonl:1: EOF"),
        ] {
            match parse(text, "d.jsonl") {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}")
                }
                other => panic!("expected an error with {needle:?}, got {other:?}"),
            }
        }
        for (text, output_len, needle) in [
            (
                "{\"prompt\": \"x\", \"audio\": \"a.wav\"}\n{\"prompt\": \"y\", \"audio\": \"gone.wav\"}",
                4,
                "d.jsonl:2: cannot read the clip gone.wav",
            ),
            (
                "{\"prompt\": \"x\", \"audio\": \"bad.wav\"}",
                4,
                "d.jsonl:1: clip bad.wav: not an audio encoding",
            ),
            (
                "{\"prompt\": \"x\", \"audio\": \"a.wav\"}",
                -1,
                "d.jsonl:1: no \"output_tokens\"",
            ),
        ] {
            let rows = parse(text, "d.jsonl").unwrap();
            let p = params(false, output_len);
            let mut sampler = Sampler::new(rows, 0, 2, p, "d.jsonl", Positions::ALL).unwrap();
            let err = match sampler.next_batch(&Chars { plain: true }, &TwoClips, 5) {
                Err(PluginError::InvalidInput(m)) => m,
                other => panic!("expected an error with {needle:?}, got {other:?}"),
            };
            assert!(err.contains(needle), "{err:?} lacks {needle:?}");
        }
        assert!(
            Sampler::new(
                Vec::new(),
                0,
                1,
                Params::default(),
                "d.jsonl",
                Positions::ALL
            )
            .is_err()
        );
    }
}
