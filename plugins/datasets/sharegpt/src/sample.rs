//! vLLM's `ShareGPTDataset` (vLLM 0.32): loading, filtering, shuffling, sampling and
//! oversampling, generic over the SDK's [`TokenCounter`] so that it runs natively in unit
//! tests.

use std::fmt;

use bench_sdk::lengths::{Limits, is_valid_sequence};
use bench_sdk::sampling::{Picker, SampleFlags, TokenCounter};
use bench_sdk::{ContentPart, PluginError, RequestSpec};
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::json_array::{self, ElementError};

/// One conversation of the file, reduced to what vLLM reads from it.
#[derive(Clone, Debug)]
pub struct Conversation {
    /// The first turn (the user's prompt).
    pub prompt: String,
    /// The second turn (the reference completion).
    pub completion: String,
    /// The entry's `image` or, failing that, `video`, as vLLM's `process_image` /
    /// `process_video` turn a path or URL into a content part.
    pub media: Option<ContentPart>,
    /// The entry's place among the kept conversations (its index in [`load`]'s result):
    /// how a multi-turn run finds the turns after the second ([`Loaded::rest`]).
    pub id: usize,
}

/// What [`load_turns`] keeps: the conversations, and for each (by [`Conversation::id`])
/// the text of its turns after the first two (user, reply, user, reply, ...).
#[derive(Debug, Default)]
pub struct Loaded {
    pub conversations: Vec<Conversation>,
    pub rest: Vec<Vec<String>>,
}

/// An entry of the file. Only the first two turns' text is kept (with the turn count),
/// so memory stays near what is sampled even for the full 650 MB ShareGPT file.
#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    conversations: Option<Turns>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    video: Option<String>,
}

/// An entry with every turn kept (multi-turn runs).
#[derive(Deserialize)]
struct EntryAll {
    #[serde(default)]
    conversations: Option<Vec<Turn>>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    video: Option<String>,
}

#[derive(Deserialize)]
struct Turn {
    value: Option<String>,
}

struct Turns {
    count: usize,
    first: Option<Option<String>>,
    second: Option<Option<String>>,
}

impl<'de> Deserialize<'de> for Turns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TurnsVisitor;
        impl<'de> Visitor<'de> for TurnsVisitor {
            type Value = Turns;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of conversation turns")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Turns, A::Error> {
                let first = seq.next_element::<Turn>()?.map(|t| t.value);
                let second = seq.next_element::<Turn>()?.map(|t| t.value);
                let mut count = usize::from(first.is_some()) + usize::from(second.is_some());
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    count += 1;
                }
                Ok(Turns {
                    count,
                    first,
                    second,
                })
            }
        }
        d.deserialize_seq(TurnsVisitor)
    }
}

/// Reads a ShareGPT JSON file (`[{"conversations": [{"value": ...}, ...]}, ...]`) and
/// keeps the entries with at least two turns, in file order, as vLLM's `load_data`.
pub fn load(path: &str) -> Result<Vec<Conversation>, PluginError> {
    let file = open(path)?;
    parse(file, path)
}

/// [`load`] keeping the turns after the first two too (at most `keep_rest` of them, so
/// that a turn cap keeps memory near what is sent), for multi-turn runs.
pub fn load_turns(path: &str, keep_rest: usize) -> Result<Loaded, PluginError> {
    let file = open(path)?;
    parse_turns(file, path, keep_rest)
}

fn open(path: &str) -> Result<std::fs::File, PluginError> {
    std::fs::File::open(path)
        .map_err(|e| PluginError::InvalidConfig(format!("sharegpt: cannot open {path}: {e}")))
}

/// [`load`] from any reader; `name` is the file name shown in errors.
pub fn parse(reader: impl std::io::Read, name: &str) -> Result<Vec<Conversation>, PluginError> {
    let mut kept = Kept::new(name);
    json_array::for_each_element(
        reader,
        |b| serde_json::from_slice::<Entry>(b),
        |entry: Entry| {
            let Some(turns) = entry.conversations else {
                return kept.push(None, false, Vec::new(), entry.image, entry.video);
            };
            let two = (turns.count >= 2).then_some((turns.first, turns.second));
            kept.push(two, false, Vec::new(), entry.image, entry.video)
        },
    )
    .map_err(|e| json_error(e, name))?;
    Ok(kept.loaded.conversations)
}

/// [`load_turns`] from any reader.
pub fn parse_turns(
    reader: impl std::io::Read,
    name: &str,
    keep_rest: usize,
) -> Result<Loaded, PluginError> {
    let mut kept = Kept::new(name);
    json_array::for_each_element(
        reader,
        |b| serde_json::from_slice::<EntryAll>(b),
        |entry: EntryAll| {
            let mut turns = entry.conversations.unwrap_or_default().into_iter();
            if turns.len() < 2 {
                return kept.push(None, false, Vec::new(), entry.image, entry.video);
            }
            let first = turns.next().map(|t| t.value);
            let second = turns.next().map(|t| t.value);
            let rest: Vec<Option<String>> = turns.take(keep_rest).map(|t| t.value).collect();
            kept.push(Some((first, second)), true, rest, entry.image, entry.video)
        },
    )
    .map_err(|e| json_error(e, name))?;
    Ok(kept.loaded)
}

fn json_error(e: ElementError<PluginError>, name: &str) -> PluginError {
    match e {
        ElementError::Json(e) => PluginError::InvalidInput(format!("sharegpt: {name}: {e}")),
        ElementError::Other(e) => e,
    }
}

/// One of an entry's first two turns: absent, without a string `value`, or its text.
type FirstTwo = Option<Option<String>>;

/// The entries kept so far, and the index of the next entry of the file.
struct Kept<'a> {
    name: &'a str,
    index: usize,
    loaded: Loaded,
}

impl<'a> Kept<'a> {
    fn new(name: &'a str) -> Self {
        Kept {
            name,
            index: 0,
            loaded: Loaded::default(),
        }
    }

    /// Keeps an entry whose first two turns are `two` (none: fewer than two turns, not
    /// kept, as vLLM skips them). With `all`, the turns after them (`rest`) are kept too.
    fn push(
        &mut self,
        two: Option<(FirstTwo, FirstTwo)>,
        all: bool,
        rest: Vec<Option<String>>,
        image: Option<String>,
        video: Option<String>,
    ) -> Result<(), PluginError> {
        let at = self.index;
        self.index += 1;
        let Some((first, second)) = two else {
            return Ok(());
        };
        let name = self.name;
        let missing = |which: usize| {
            PluginError::InvalidInput(format!(
                "sharegpt: {name}: entry {at}: conversations[{which}] has no string \"value\""
            ))
        };
        let prompt = first.flatten().ok_or_else(|| missing(0))?;
        let completion = second.flatten().ok_or_else(|| missing(1))?;
        let image = image.filter(|s| !s.is_empty());
        let video = video.filter(|s| !s.is_empty());
        let media = match (image, video) {
            (Some(image), _) => Some(ContentPart::ImageUrl(media_url(image, true))),
            (None, Some(video)) => Some(ContentPart::VideoUrl(media_url(video, false))),
            (None, None) => None,
        };
        if all {
            let rest = rest
                .into_iter()
                .enumerate()
                .map(|(i, t)| t.ok_or_else(|| missing(i + 2)))
                .collect::<Result<Vec<_>, _>>()?;
            self.loaded.rest.push(rest);
        }
        let id = self.loaded.conversations.len();
        self.loaded.conversations.push(Conversation {
            prompt,
            completion,
            media,
            id,
        });
        Ok(())
    }
}

/// vLLM's `process_image` / `process_video` for a string: URLs pass through, anything
/// else is a local path and becomes a `file://` URL.
fn media_url(path: String, image: bool) -> String {
    let schemes: &[&str] = if image {
        &["http://", "https://", "file://", "data:image/"]
    } else {
        &["http://", "https://", "file://"]
    };
    if schemes.iter().any(|s| path.starts_with(s)) {
        path
    } else {
        format!("file://{path}")
    }
}

/// The options of `vllm bench serve --dataset-name sharegpt` this dataset honours.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    /// `--sharegpt-output-len`: replaces every completion's length (and lifts the
    /// minimum output length check).
    pub output_len: Option<u32>,
    /// `--disable-shuffle`, `--no-oversample`.
    pub flags: SampleFlags,
    /// Multi-turn runs: each request made is a conversation's first turn, and carries
    /// the conversation's [`Conversation::id`] as its session id (the dataset replaces it
    /// with a session of its own).
    pub tag_ids: bool,
}

/// How many conversations are tokenized per host crossing.
const MAX_BATCH: usize = 256;

/// vLLM's `ShareGPTDataset(random_seed=seed, dataset_path=...).sample(...)` on the
/// conversations [`load`] kept, producing the requests in batches (so each host call stays
/// short): shuffle with Python's `random.seed(seed)`, take the valid ones in order, then,
/// when short, oversample with a fresh `random.seed(seed)`.
pub struct Sampler {
    picker: Picker<Conversation>,
    output_len: Option<u32>,
    tag_ids: bool,
    /// The file name, for errors.
    name: String,
    /// Conversations looked at that vLLM's length filter left out.
    left_out: usize,
}

impl Sampler {
    pub fn new(
        conversations: Vec<Conversation>,
        seed: u64,
        num_requests: usize,
        params: Params,
        name: &str,
    ) -> Self {
        Sampler {
            picker: Picker::new(conversations, seed, num_requests, params.flags),
            output_len: params.output_len,
            tag_ids: params.tag_ids,
            name: name.to_string(),
            left_out: 0,
        }
    }

    /// The next (up to) `max` requests, in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &impl TokenCounter,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let (fixed, tag_ids) = (self.output_len, self.tag_ids);
        let left_out = &mut self.left_out;
        let make = |convs: &[Conversation], want: usize, out: &mut Vec<RequestSpec>| {
            scan(tok, fixed, tag_ids, convs, want, out, left_out)
        };
        self.picker.next_batch(max, make, || {
            PluginError::InvalidInput(format!(
                "sharegpt: {}: no conversation passes vLLM's filters (at least 2 turns, \
                 prompt of 4 to 1024 tokens, output of at least 4 tokens unless output-len is \
                 set, at most 2048 tokens in all), so there is nothing to sample",
                self.name
            ))
        })
    }

    /// How many conversations looked at so far vLLM's length filter left out.
    pub fn left_out(&self) -> usize {
        self.left_out
    }
}

/// Tokenizes about as many of `convs` as are still wanted (most pass the filters) and
/// keeps the valid ones, up to `want`; returns how many it looked at, and counts those the
/// filter left out in `left_out`. With a fixed output length (`fixed`) the completion's
/// length is never used, so it is not tokenized.
fn scan(
    tok: &impl TokenCounter,
    fixed: Option<u32>,
    tag_ids: bool,
    convs: &[Conversation],
    want: usize,
    out: &mut Vec<RequestSpec>,
    left_out: &mut usize,
) -> Result<usize, PluginError> {
    let batch = &convs[..want.clamp(16, MAX_BATCH).min(convs.len())];
    let mut texts = Vec::with_capacity(batch.len() * 2);
    for c in batch {
        texts.push(c.prompt.clone());
        if fixed.is_none() {
            texts.push(c.completion.clone());
        }
    }
    let counts = tok.token_counts(&texts)?;
    let per = if fixed.is_none() { 2 } else { 1 };
    let (mut looked_at, mut taken) = (0, 0);
    for (c, n) in batch.iter().zip(counts.chunks(per)) {
        if taken == want {
            break;
        }
        // Looked at: whether it is kept or not, the next call starts after it.
        looked_at += 1;
        let prompt_len = n[0];
        let output_len = fixed.map_or_else(|| n[1], |o| o as usize);
        if !is_valid_sequence(prompt_len, output_len, Limits::default(), fixed.is_some()) {
            *left_out += 1;
            continue;
        }
        // Valid sequences are short (at most 2048 tokens), so the lengths fit.
        let mut spec = RequestSpec::text(c.prompt.clone(), prompt_len as u32, output_len as u32);
        spec.multimodal.extend(c.media.clone());
        if tag_ids {
            spec.session = Some(bench_sdk::Session {
                id: c.id.to_string(),
                turn: 0,
            });
        }
        out.push(spec);
        taken += 1;
    }
    Ok(looked_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;
    use bench_sdk::rng::Random;

    /// Counts whitespace-separated words; records how many texts it was asked for.
    struct Words(std::cell::Cell<usize>);

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            self.0.set(self.0.get() + texts.len());
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    fn drain(
        tok: &Words,
        convs: Vec<Conversation>,
        seed: u64,
        n: usize,
        p: &Params,
        batch: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let mut sampler = Sampler::new(convs, seed, n, p.clone(), "t.json");
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(tok, batch)?;
            assert!(got.len() <= batch);
            if got.is_empty() {
                return Ok(all);
            }
            all.extend(got);
        }
    }

    /// All requests; the batch size the host drains with must change nothing.
    fn sample(
        tok: &Words,
        convs: Vec<Conversation>,
        seed: u64,
        n: usize,
        p: &Params,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let all = drain(tok, convs.clone(), seed, n, p, 1000)?;
        for batch in [1, 2, 3] {
            let again = drain(&Words(Default::default()), convs.clone(), seed, n, p, batch)?;
            assert_eq!(prompts(&again), prompts(&all), "batch {batch}");
        }
        Ok(all)
    }

    fn words(n: usize, tag: &str) -> String {
        vec![tag; n].join(" ")
    }

    fn conv(prompt_words: usize, completion_words: usize, tag: &str) -> Conversation {
        Conversation {
            prompt: words(prompt_words, tag),
            completion: words(completion_words, "c"),
            media: None,
            id: 0,
        }
    }

    fn prompts(specs: &[RequestSpec]) -> Vec<(String, u32, u32)> {
        specs
            .iter()
            .map(|s| match &s.prompt {
                Prompt::Text(t) => (
                    t.split(' ').next().unwrap().to_string(),
                    s.prompt_len,
                    s.expected_output_len,
                ),
                other => panic!("sharegpt makes text prompts, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn parse_keeps_two_turn_entries_in_order() {
        let json = r#"[
            {"id": "a", "conversations": [{"from": "human", "value": "p1"}, {"from": "gpt", "value": "c1"}, {"from": "human", "value": "x"}]},
            {"id": "b", "conversations": [{"from": "human", "value": "only"}]},
            {"id": "c"},
            {"id": "d", "conversations": [{"value": "p2"}, {"value": "c2"}], "image": "pics/cat.png"},
            {"id": "e", "conversations": [{"value": "p3"}, {"value": "c3"}], "image": "", "video": "https://v/x.mp4"}
        ]"#;
        let got = parse(json.as_bytes(), "t.json").unwrap();
        assert_eq!(
            got.iter()
                .map(|c| (c.prompt.as_str(), c.completion.as_str()))
                .collect::<Vec<_>>(),
            [("p1", "c1"), ("p2", "c2"), ("p3", "c3")]
        );
        assert!(got[0].media.is_none());
        assert!(
            matches!(&got[1].media, Some(ContentPart::ImageUrl(u)) if u == "file://pics/cat.png")
        );
        assert!(matches!(&got[2].media, Some(ContentPart::VideoUrl(u)) if u == "https://v/x.mp4"));
    }

    #[test]
    fn malformed_json_names_file_line_and_column() {
        let json = "[\n  {\"conversations\": [\n    {\"value\": \"a\"},,\n  ]}\n]";
        match parse(json.as_bytes(), "share.json") {
            Err(PluginError::InvalidInput(m)) => {
                assert!(m.contains("share.json"), "{m}");
                assert!(m.contains("line 3 column"), "{m}");
            }
            other => panic!("expected invalid input, got {other:?}"),
        }
        // A used turn without text is an input error too.
        let json = r#"[{"conversations": [{"from": "human"}, {"value": "c"}]}]"#;
        match parse(json.as_bytes(), "share.json") {
            Err(PluginError::InvalidInput(m)) => {
                assert!(m.contains("entry 0: conversations[0]"), "{m}")
            }
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn shuffles_like_python_and_filters_in_order() {
        // The order of Python's random.seed(5); random.shuffle(l) (Random is checked
        // against CPython in the SDK).
        let mut order: Vec<usize> = (0..6).collect();
        Random::new(5).shuffle(&mut order);
        let tags = ["a", "b", "c", "d", "e", "f"];
        // "c" has a 3-word prompt (too short) and "e" a 2-word completion (too short).
        let convs: Vec<Conversation> = tags
            .iter()
            .map(|&t| match t {
                "c" => conv(3, 10, t),
                "e" => conv(10, 2, t),
                _ => conv(5, 7, t),
            })
            .collect();
        let tok = Words(Default::default());
        let got = sample(&tok, convs, 5, 3, &Params::default()).unwrap();
        let want: Vec<(String, u32, u32)> = order
            .iter()
            .map(|&i| tags[i])
            .filter(|&t| t != "c" && t != "e")
            .take(3)
            .map(|t| (t.to_string(), 5, 7))
            .collect();
        assert_eq!(prompts(&got), want);
    }

    #[test]
    fn conversations_the_filter_leaves_out_are_counted() {
        // Two of five are too short; with all five wanted, all are looked at.
        let convs = vec![
            conv(5, 7, "a"),
            conv(3, 7, "b"),
            conv(5, 7, "c"),
            conv(5, 2, "d"),
            conv(5, 7, "e"),
        ];
        let tok = Words(Default::default());
        let mut sampler = Sampler::new(convs, 0, 5, Params::default(), "t.json");
        let mut made = 0;
        loop {
            let got = sampler.next_batch(&tok, 2).unwrap();
            if got.is_empty() {
                break;
            }
            made += got.len();
        }
        // Three valid ones, oversampled to five.
        assert_eq!(made, 5);
        assert_eq!(sampler.left_out(), 2);
    }

    #[test]
    fn output_len_overrides_and_skips_the_minimum() {
        let convs = vec![conv(5, 1, "a"), conv(5, 900, "b")];
        let p = Params {
            output_len: Some(2),
            flags: SampleFlags {
                disable_shuffle: true,
                ..SampleFlags::default()
            },
            ..Params::default()
        };
        let tok = Words(Default::default());
        let got = sample(&tok, convs, 0, 2, &p).unwrap();
        assert_eq!(
            prompts(&got),
            [("a".to_string(), 5, 2), ("b".to_string(), 5, 2)]
        );
        assert_eq!(
            tok.0.get(),
            2,
            "completions are not tokenized when output-len is set"
        );
    }

    #[test]
    fn oversamples_with_a_fresh_python_rng() {
        let convs = vec![conv(5, 5, "a"), conv(5, 5, "b"), conv(5, 5, "c")];
        let p = Params {
            flags: SampleFlags {
                disable_shuffle: true,
                ..SampleFlags::default()
            },
            ..Params::default()
        };
        let got = sample(&Words(Default::default()), convs, 9, 7, &p).unwrap();
        // What Python's random.seed(9); [random.choice("abc") for _ in range(4)] picks.
        let mut rng = Random::new(9);
        let extra: Vec<String> = (0..4)
            .map(|_| rng.choice(&["a", "b", "c"]).unwrap().to_string())
            .collect();
        let got: Vec<String> = prompts(&got).into_iter().map(|(t, _, _)| t).collect();
        assert_eq!(got[..3], ["a", "b", "c"]);
        assert_eq!(got[3..], extra[..]);

        let p = Params {
            flags: SampleFlags {
                disable_shuffle: true,
                no_oversample: true,
            },
            ..Params::default()
        };
        let convs = vec![conv(5, 5, "a")];
        assert_eq!(
            sample(&Words(Default::default()), convs, 9, 7, &p)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn nothing_valid_is_an_input_error() {
        let convs = vec![conv(1, 5, "a")];
        match drain(
            &Words(Default::default()),
            convs,
            0,
            2,
            &Params::default(),
            256,
        ) {
            Err(PluginError::InvalidInput(m)) => assert!(m.contains("t.json"), "{m}"),
            other => panic!("expected invalid input, got {other:?}"),
        }
    }
}
