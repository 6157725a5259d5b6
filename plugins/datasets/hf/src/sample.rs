//! vLLM's `HuggingFaceDataset.sample` for each kind, on items already in vLLM's order
//! (see [`crate::order`]): requests are made from the items in order, skipping those
//! vLLM's rules filter out, until there are `--num-prompts`; then vLLM's oversampling.
//! Generic over the SDK's tokenizer traits, so that it runs natively in unit tests.

use bench_sdk::lengths::{Limits, is_valid_sequence};
use bench_sdk::sampling::{ChatTemplate, Picker, SampleFlags, TokenCounter};
use bench_sdk::{ChatMessage, ContentPart, PluginError, Prompt, RequestSpec};

use crate::kinds::{Item, Kind};

/// How a kind turns items into requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules {
    pub kind: Kind,
    /// `--hf-output-len`, else the kind's default; `None`: each item's completion length
    /// (then vLLM's length filter applies).
    pub output_len: Option<u32>,
    /// Wrap the prompt in the tokenizer's chat template (the kinds vLLM templates, unless
    /// `--skip-chat-template`).
    pub chat_template: bool,
    /// `--enable-multimodal-chat`: the prompt becomes a user message holding the text and
    /// the media.
    pub multimodal_chat: bool,
    /// Items whose measure (Blazedit's distance, ASR's seconds) is outside are skipped.
    pub measure_range: Option<(f64, f64)>,
}

impl Rules {
    /// vLLM's length filter, where the kind
    /// applies it: to a completion's length (when it is the output length), or always
    /// (MLPerf).
    fn length_filter(&self) -> Option<Limits> {
        let dynamic = self.output_len.is_none();
        match self.kind {
            Kind::Aimo if dynamic => Some(Limits {
                max_prompt_len: 2048,
                max_total_len: 32000,
                ..Limits::default()
            }),
            Kind::Conversation | Kind::MmConversation if dynamic => Some(Limits::default()),
            Kind::MlPerf => Some(Limits::default()),
            _ => None,
        }
    }

    /// The kinds vLLM applies the chat template to.
    pub fn templated(kind: Kind) -> bool {
        matches!(
            kind,
            Kind::InstructCoder | Kind::MtBench | Kind::HumanEval | Kind::Gsm8k | Kind::Blazedit
        )
    }
}

/// The chat template over whole conversations (BFCL, MLPerf), and token counts without
/// special tokens (MLPerf's reference answers).
pub trait Messages {
    /// The chat template over `messages` with the generation prompt, and `tools` (a JSON
    /// array of OpenAI tool definitions) in scope when given.
    fn render(&self, messages: &[ChatMessage], tools: Option<&str>) -> Result<String, PluginError>;
    fn plain_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError>;
}

impl Messages for bench_sdk::sampling::HostTokenizer {
    fn render(&self, messages: &[ChatMessage], tools: Option<&str>) -> Result<String, PluginError> {
        match tools {
            Some(tools) => bench_sdk::host::apply_chat_template_with_tools(messages, tools, true),
            None => bench_sdk::host::apply_chat_template(messages, true),
        }
    }

    fn plain_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
        Ok(bench_sdk::host::encode_batch(texts, false)?
            .iter()
            .map(Vec::len)
            .collect())
    }
}

/// What a tokenizer must do for the sampler.
pub trait Tokenizer: TokenCounter + ChatTemplate + Messages {}
impl<T: TokenCounter + ChatTemplate + Messages> Tokenizer for T {}

/// How many items are tokenized per host crossing.
const MAX_BATCH: usize = 256;

/// Why items made no request, counted for the log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Skipped {
    /// Outside vLLM's length limits.
    pub length: usize,
    /// Outside `measure_range`.
    pub measure: usize,
    /// Rows vLLM cannot use (BFCL rows without a question or functions).
    pub invalid: usize,
    /// BFCL conversations the chat template failed on, counted by their plain text.
    pub untemplated: usize,
}

pub struct Sampler {
    picker: Picker<Item>,
    rules: Rules,
    skipped: Skipped,
    /// The source, for errors.
    name: String,
}

impl Sampler {
    /// `items` are in the order vLLM reads them; `seed` seeds the oversampling and, with
    /// `python_shuffle` (BFCL), a Python `random.Random(seed).shuffle` of the items first.
    pub fn new(
        items: Vec<Item>,
        seed: u64,
        num_requests: usize,
        rules: Rules,
        no_oversample: bool,
        python_shuffle: bool,
        name: &str,
    ) -> Self {
        let flags = SampleFlags {
            disable_shuffle: !python_shuffle,
            no_oversample,
        };
        Sampler {
            picker: Picker::new(items, seed, num_requests, flags),
            rules,
            skipped: Skipped::default(),
            name: name.to_string(),
        }
    }

    pub fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    /// The next (up to) `max` requests, in vLLM's order.
    pub fn next_batch<T: Tokenizer>(
        &mut self,
        tok: &T,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let rules = &self.rules;
        let skipped = &mut self.skipped;
        let make = |items: &[Item], want: usize, out: &mut Vec<RequestSpec>| {
            scan(tok, rules, items, want, out, skipped)
        };
        let name = &self.name;
        self.picker.next_batch(max, make, || {
            PluginError::InvalidInput(format!(
                "hf: {name}: no row passes vLLM's filters for this dataset, so there is \
                 nothing to sample"
            ))
        })
    }
}

/// Makes requests from the front of `items`, at most `want`; returns how many items it
/// looked at.
fn scan<T: Tokenizer>(
    tok: &T,
    rules: &Rules,
    items: &[Item],
    want: usize,
    out: &mut Vec<RequestSpec>,
    skipped: &mut Skipped,
) -> Result<usize, PluginError> {
    let batch = &items[..want.clamp(16, MAX_BATCH).min(items.len())];
    let in_range = |item: &Item| {
        !item.skip
            && match (rules.measure_range, item.measure) {
                (Some((lo, hi)), Some(m)) => m >= lo && m <= hi,
                _ => true,
            }
    };
    let dynamic = rules.output_len.is_none();
    // The prompts as sent, and (when the output length comes from the data) the
    // completions. Items filtered out before tokenizing are left out.
    let mut prompts = Vec::with_capacity(batch.len());
    let mut completions = Vec::new();
    for item in batch.iter().filter(|i| in_range(i)) {
        let prompt = match &item.messages {
            Some(messages) if rules.kind == Kind::Bfcl => {
                // vLLM renders the tool schemas with the messages (they are much of the
                // prompt), and falls back to the contents joined by newlines when BFCL's
                // messages do not render.
                tok.render(messages, item.tools.as_deref())
                    .unwrap_or_else(|_| {
                        skipped.untemplated += 1;
                        messages
                            .iter()
                            .map(|m| match m.content.first() {
                                Some(ContentPart::Text(t)) => t.as_str(),
                                _ => "",
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
            }
            Some(messages) => tok.render(messages, None)?,
            None if rules.chat_template => tok.chat_prompt(&item.prompt)?,
            None => item.prompt.clone(),
        };
        prompts.push(prompt);
        if dynamic {
            completions.push(item.completion.clone().unwrap_or_default());
        }
    }
    let prompt_counts = tok.token_counts(&prompts)?;
    let completion_counts = match (dynamic, rules.kind) {
        (false, _) => Vec::new(),
        (true, Kind::MlPerf) => tok.plain_counts(&completions)?,
        (true, _) => tok.token_counts(&completions)?,
    };
    let mut counted = prompts.into_iter().zip(prompt_counts).enumerate();
    let (mut looked_at, mut taken) = (0, 0);
    for item in batch {
        if taken == want {
            break;
        }
        looked_at += 1;
        if item.skip {
            skipped.invalid += 1;
            continue;
        }
        if !in_range(item) {
            skipped.measure += 1;
            continue;
        }
        let (i, (prompt, prompt_len)) = counted.next().expect("one count per item in range");
        let output_len = match rules.output_len {
            Some(fixed) => fixed as usize,
            None => completion_counts[i],
        };
        if let Some(limits) = rules.length_filter()
            && !is_valid_sequence(prompt_len, output_len, limits, false)
        {
            skipped.length += 1;
            continue;
        }
        out.push(request(rules, item, prompt, prompt_len, output_len));
        taken += 1;
    }
    Ok(looked_at)
}

fn request(
    rules: &Rules,
    item: &Item,
    prompt: String,
    prompt_len: usize,
    output_len: usize,
) -> RequestSpec {
    let prompt_len = u32::try_from(prompt_len).unwrap_or(u32::MAX);
    let output_len = u32::try_from(output_len).unwrap_or(u32::MAX);
    let mut spec = RequestSpec::text(prompt, prompt_len, output_len);
    if let (Some(messages), Kind::Bfcl) = (&item.messages, rules.kind) {
        spec.prompt = Prompt::Chat(messages.clone());
    } else if rules.multimodal_chat {
        let Prompt::Text(text) = std::mem::replace(&mut spec.prompt, Prompt::Text(String::new()))
        else {
            unreachable!("made as text above")
        };
        let mut content = vec![ContentPart::Text(text)];
        content.extend(item.media.clone());
        spec.prompt = Prompt::Chat(vec![ChatMessage {
            role: "user".into(),
            content,
        }]);
    } else {
        spec.multimodal.extend(item.media.clone());
    }
    spec.extra_body = item.extra_body.clone();
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::rng::Random;

    /// Counts words; the chat template wraps the text in `<u> ... </u>` (two more words).
    struct Words;

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    impl ChatTemplate for Words {
        fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
            Ok(format!("<u> {user} </u>"))
        }
    }

    impl Messages for Words {
        fn render(
            &self,
            messages: &[ChatMessage],
            tools: Option<&str>,
        ) -> Result<String, PluginError> {
            if messages.iter().any(|m| m.role == "bad") {
                return Err(PluginError::Unsupported("no template".into()));
            }
            Ok(match tools {
                Some(tools) => format!("<chat> {} {tools} </chat>", messages.len()),
                None => format!("<chat> {} </chat>", messages.len()),
            })
        }

        /// Words, less a leading "<s>" (the toy's special token).
        fn plain_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts
                .iter()
                .map(|t| t.split_whitespace().filter(|w| *w != "<s>").count())
                .collect())
        }
    }

    fn words(n: usize, tag: &str) -> String {
        vec![tag; n].join(" ")
    }

    fn item(prompt_words: usize, completion_words: Option<usize>, tag: &str) -> Item {
        let mut it = Item::text(words(prompt_words, tag));
        it.completion = completion_words.map(|n| words(n, "c"));
        it
    }

    fn rules(kind: Kind, output_len: Option<u32>) -> Rules {
        Rules {
            kind,
            output_len,
            chat_template: Rules::templated(kind),
            multimodal_chat: false,
            measure_range: None,
        }
    }

    fn drain(
        items: Vec<Item>,
        n: usize,
        rules: Rules,
        no_oversample: bool,
        batch: usize,
    ) -> Result<(Vec<RequestSpec>, Skipped), PluginError> {
        let mut s = Sampler::new(items, 3, n, rules, no_oversample, false, "t");
        let mut all = Vec::new();
        loop {
            let got = s.next_batch(&Words, batch)?;
            assert!(got.len() <= batch);
            if got.is_empty() {
                return Ok((all, s.skipped().clone()));
            }
            all.extend(got);
        }
    }

    fn summary(specs: &[RequestSpec]) -> Vec<(String, u32, u32)> {
        specs
            .iter()
            .map(|s| match &s.prompt {
                Prompt::Text(t) => (t.clone(), s.prompt_len, s.expected_output_len),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// All requests, checking that the host's batch size changes nothing.
    fn sample(items: Vec<Item>, n: usize, rules: Rules) -> (Vec<RequestSpec>, Skipped) {
        let all = drain(items.clone(), n, rules.clone(), false, 1000).unwrap();
        for batch in [1, 2, 5] {
            let again = drain(items.clone(), n, rules.clone(), false, batch).unwrap();
            assert_eq!(summary(&again.0), summary(&all.0), "batch {batch}");
            assert_eq!(again.1, all.1, "batch {batch}");
        }
        all
    }

    #[test]
    fn templated_kinds_wrap_and_count_the_template() {
        let items = vec![item(3, None, "a"), item(5, None, "b")];
        let (got, _) = sample(items.clone(), 2, rules(Kind::HumanEval, Some(256)));
        assert_eq!(
            summary(&got),
            [
                ("<u> a a a </u>".to_string(), 5, 256),
                ("<u> b b b b b </u>".to_string(), 7, 256)
            ]
        );
        let mut r = rules(Kind::Gsm8k, Some(9));
        r.chat_template = false;
        let (got, _) = sample(items, 1, r);
        assert_eq!(summary(&got), [("a a a".to_string(), 3, 9)]);
    }

    #[test]
    fn dynamic_output_filters_by_length_as_vllm() {
        let items = vec![
            item(5, Some(7), "a"),
            item(3, Some(7), "short"),
            item(5, Some(2), "tiny"),
            item(1100, Some(10), "long"),
            item(5, Some(6), "b"),
        ];
        let (got, skipped) = sample(items.clone(), 2, rules(Kind::Conversation, None));
        let tags: Vec<(u32, u32)> = got
            .iter()
            .map(|s| (s.prompt_len, s.expected_output_len))
            .collect();
        assert_eq!(tags, [(5, 7), (5, 6)]);
        assert_eq!(skipped.length, 3);
        // AIMO's limits let the long prompt through.
        let (got, _) = sample(items.clone(), 2, rules(Kind::Aimo, None));
        assert_eq!(got[1].prompt_len, 1100);
        // A fixed output length lifts the filter.
        let (got, skipped) = sample(items, 5, rules(Kind::Conversation, Some(4)));
        assert_eq!(got.len(), 5);
        assert_eq!(skipped.length, 0);
        assert!(got.iter().all(|s| s.expected_output_len == 4));
    }

    #[test]
    fn measures_outside_the_range_are_skipped_and_counted() {
        let mut items: Vec<Item> = (0..6).map(|i| item(4, None, &format!("t{i}"))).collect();
        for (i, it) in items.iter_mut().enumerate() {
            it.measure = Some(i as f64 / 10.0);
        }
        let mut r = rules(Kind::Blazedit, Some(4000));
        r.chat_template = false;
        r.measure_range = Some((0.1, 0.3));
        let (got, skipped) = drain(items, 10, r, true, 100).unwrap();
        let firsts: Vec<String> = summary(&got)
            .into_iter()
            .map(|(t, _, _)| t[..2].to_string())
            .collect();
        assert_eq!(firsts, ["t1", "t2", "t3"]);
        assert_eq!(skipped.measure, 3);
    }

    #[test]
    fn oversampling_picks_with_pythons_random() {
        let items = vec![item(4, None, "a"), item(4, None, "b")];
        let mut r = rules(Kind::Gsm8k, Some(1));
        r.chat_template = false;
        let (got, _) = sample(items, 6, r);
        let tags: Vec<String> = summary(&got)
            .into_iter()
            .map(|(t, _, _)| t[..1].to_string())
            .collect();
        let mut rng = Random::new(3);
        let extra: Vec<String> = (0..4)
            .map(|_| rng.choice(&["a", "b"]).unwrap().to_string())
            .collect();
        assert_eq!(tags[..2], ["a", "b"]);
        assert_eq!(tags[2..], extra[..]);
    }

    #[test]
    fn multimodal_items_go_with_the_prompt_or_into_the_chat_message() {
        let mut it = item(4, None, "a");
        it.media = Some(ContentPart::ImageUrl("data:image/png;base64,AA==".into()));
        let mut r = rules(Kind::VisionArena, Some(128));
        let (got, _) = drain(vec![it.clone()], 1, r.clone(), false, 10).unwrap();
        assert_eq!(
            format!("{:?}", got[0].multimodal),
            format!("{:?}", [it.media.clone().unwrap()])
        );
        r.multimodal_chat = true;
        let (got, _) = drain(vec![it.clone()], 1, r, false, 10).unwrap();
        assert!(got[0].multimodal.is_empty());
        match &got[0].prompt {
            Prompt::Chat(m) => {
                assert_eq!(m.len(), 1);
                assert_eq!(m[0].role, "user");
                assert_eq!(
                    format!("{:?}", m[0].content[1]),
                    format!("{:?}", it.media.unwrap())
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn messages_are_sent_as_they_are_and_skipped_rows_counted() {
        let message = |role: &str, text: &str| ChatMessage {
            role: role.into(),
            content: vec![ContentPart::Text(text.into())],
        };
        let mut good = item(0, None, "");
        good.messages = Some(vec![message("system", "s"), message("user", "a b c")]);
        good.extra_body = Some("{\"tool_choice\":\"auto\"}".into());
        good.tools = Some("[t]".into());
        let mut bad = good.clone();
        bad.messages = Some(vec![message("bad", "x y"), message("user", "z")]);
        let mut skip = item(0, None, "");
        skip.skip = true;
        let r = rules(Kind::Bfcl, Some(512));
        let (got, skipped) = drain(vec![skip, good, bad], 2, r, false, 10).unwrap();
        assert_eq!(skipped.invalid, 1);
        assert_eq!(skipped.untemplated, 1);
        // "<chat> 2 [t] </chat>" (the tools rendered) is 4 words; the fallback "x y\nz" 3.
        assert_eq!((got[0].prompt_len, got[1].prompt_len), (4, 3));
        assert!(matches!(&got[0].prompt, Prompt::Chat(m) if m.len() == 2));
        assert_eq!(
            got[0].extra_body.as_deref(),
            Some("{\"tool_choice\":\"auto\"}")
        );
        assert_eq!(got[0].expected_output_len, 512);
    }

    #[test]
    fn mlperf_renders_messages_counts_answers_plainly_and_always_filters() {
        let message = |role: &str, text: &str| ChatMessage {
            role: role.into(),
            content: vec![ContentPart::Text(text.into())],
        };
        let mut it = item(0, None, "");
        it.messages = Some(vec![message("system", "s"), message("user", "q")]);
        it.completion = Some("<s> a b c d e".into());
        let (got, _) = drain(vec![it.clone()], 1, rules(Kind::MlPerf, None), true, 10).unwrap();
        // "<chat> 2 </chat>": 3 words, too short for vLLM's filter (at least 4).
        assert!(got.is_empty());
        let (got, skipped) =
            drain(vec![it.clone()], 1, rules(Kind::MlPerf, Some(9)), true, 10).unwrap();
        assert!(got.is_empty() && skipped.length == 1);
        // Zeta keeps everything, and its output length counts special tokens.
        let mut z = item(2, Some(1), "z");
        z.completion = Some("<s> x".into());
        let (got, _) = drain(vec![z], 1, rules(Kind::NextEdit, None), true, 10).unwrap();
        assert_eq!((got[0].prompt_len, got[0].expected_output_len), (2, 2));
        assert!(matches!(&got[0].prompt, Prompt::Text(_)));
    }

    #[test]
    fn nothing_valid_is_an_input_error_unless_not_oversampling() {
        let items = vec![item(1, Some(10), "a")];
        assert!(matches!(
            drain(items.clone(), 2, rules(Kind::Conversation, None), false, 10),
            Err(PluginError::InvalidInput(m)) if m.contains("no row passes")
        ));
        let (got, _) = drain(items, 2, rules(Kind::Conversation, None), true, 10).unwrap();
        assert!(got.is_empty());
    }
}
