//! Conversations replayed turn by turn (a `session` column): the rows with the same value
//! are one conversation, its turns in file order. The conversations are picked as vLLM's
//! file datasets pick rows ([`Picker`]: shuffled with the seed, oversampled when short), so
//! `--num-prompts` counts conversations. Turn `k` sends row `k`'s prompt after the whole
//! history, in which every earlier answer is the server's real one (the SDK's
//! [`Conversations`]), asking for the row's output length; the first turn goes at its row's
//! send time when there is a send-time column, later ones the think time after the
//! previous answer. A conversation ends after its last row, or when a turn fails.

use std::collections::HashMap;

use bench_sdk::conversation::{Conversations, NextTurn, ThinkTime, user_message};
use bench_sdk::sampling::{Picker, SampleFlags, TokenCounter};
use bench_sdk::{PluginError, Prompt, RequestSpec, Session, TurnResult};

use crate::sample::{Item, Params};

/// The prefix of session ids (`file-<n>`, `n` counting conversations in sample order).
pub const SESSION_PREFIX: &str = "file-";

/// Groups rows into conversations: in the order each first appears, turns in file order.
pub fn group(items: Vec<Item>) -> Vec<Vec<Item>> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut conversations: Vec<Vec<Item>> = Vec::new();
    for item in items {
        let key = item.conversation.clone().unwrap_or_default();
        let i = *index.entry(key).or_insert_with(|| {
            conversations.push(Vec::new());
            conversations.len() - 1
        });
        conversations[i].push(item);
    }
    conversations
}

/// The multi-turn source.
pub struct MultiTurn {
    turns: Vec<Vec<Item>>,
    picker: Picker<usize>,
    conversations: Conversations<usize>,
    total: usize,
    output_len: u32,
}

impl MultiTurn {
    pub fn new(
        turns: Vec<Vec<Item>>,
        seed: u64,
        num_requests: usize,
        params: &Params,
        think: ThinkTime,
    ) -> Self {
        let mut flags = params.flags;
        if params.columns.send_time.is_some() {
            flags = SampleFlags {
                disable_shuffle: true,
                no_oversample: true,
            };
        }
        let n = if num_requests == 0 {
            turns.len()
        } else {
            num_requests
        };
        let total = if flags.no_oversample {
            n.min(turns.len())
        } else {
            n
        };
        MultiTurn {
            picker: Picker::new((0..turns.len()).collect(), seed, n, flags),
            turns,
            conversations: Conversations::new(SESSION_PREFIX, think, seed),
            total,
            output_len: params.output_len,
        }
    }

    /// How many conversations are replayed.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The next (up to) `max` conversations' first turns.
    pub fn next_batch(
        &mut self,
        tok: &impl TokenCounter,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let (turns, output_len) = (&self.turns, self.output_len);
        let make = |ids: &[usize], want: usize, out: &mut Vec<RequestSpec>| {
            let batch = &ids[..want.min(256).min(ids.len())];
            let prompts: Vec<String> = batch.iter().map(|&c| turns[c][0].prompt.clone()).collect();
            let counts = tok.token_counts(&prompts)?;
            for ((&c, prompt), n) in batch.iter().zip(prompts).zip(counts) {
                let first = &turns[c][0];
                let prompt_len = u32::try_from(n).unwrap_or(u32::MAX);
                let mut spec =
                    RequestSpec::text(prompt, prompt_len, first.output_len.unwrap_or(output_len));
                // The conversation's index, until it is started below.
                spec.session = Some(Session {
                    id: c.to_string(),
                    turn: 0,
                });
                spec.send_at = first.send_at;
                out.push(spec);
            }
            Ok(batch.len())
        };
        let firsts = self.picker.next_batch(max, make, || {
            PluginError::Internal("file: no conversations".into())
        })?;
        firsts
            .into_iter()
            .map(|spec| {
                let c = spec
                    .session
                    .as_ref()
                    .and_then(|s| s.id.parse::<usize>().ok())
                    .ok_or_else(|| {
                        PluginError::Internal("file: a first turn lost its row".into())
                    })?;
                let Prompt::Text(text) = spec.prompt else {
                    return Err(PluginError::Internal("file: first turns are text".into()));
                };
                let mut started = self.conversations.start(
                    c,
                    user_message(text),
                    spec.prompt_len,
                    spec.expected_output_len,
                );
                started.send_at = spec.send_at;
                Ok(started)
            })
            .collect()
    }

    /// The turn after `turn`, or `None` when its conversation is over.
    pub fn next_turn(
        &mut self,
        tok: &impl TokenCounter,
        turn: TurnResult,
    ) -> Result<Option<RequestSpec>, PluginError> {
        let Some(&mut c) = self.conversations.lookup(&turn)? else {
            return Ok(None);
        };
        let next = turn.session.turn as usize + 1;
        if !turn.success || next >= self.turns[c].len() {
            self.conversations.end(&turn)?;
            return Ok(None);
        }
        let row = &self.turns[c][next];
        let texts = [turn.generated_text.clone(), row.prompt.clone()];
        let counts = tok.token_counts(&texts)?;
        let tokens = |i: usize| u32::try_from(counts[i]).unwrap_or(u32::MAX);
        let output_len = row.output_len.unwrap_or(self.output_len);
        let [_, prompt] = texts;
        self.conversations.continue_with(
            &turn,
            tokens(0),
            NextTurn {
                user: user_message(prompt),
                user_tokens: tokens(1),
                output_len,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{Columns, items};
    use bench_sdk::table::{Format, ReadOptions, parse};
    use bench_sdk::{ChatMessage, ContentPart};

    struct Words;

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    fn source(n: usize, flags: SampleFlags) -> MultiTurn {
        let columns = Columns {
            output_len: Some("n".into()),
            session: Some("c".into()),
            ..Columns::default()
        };
        let text = "prompt,n,c\nhello there,5,a\nwho are you,,b\nand then what,7,a\nbye now,2,a\n";
        let rows = parse(
            text.as_bytes().to_vec(),
            "f.csv",
            Format::Csv,
            &ReadOptions::default(),
        )
        .unwrap();
        let turns = group(items(rows, &columns, "f.csv").unwrap());
        let params = Params {
            columns,
            output_len: 9,
            flags,
            ..Params::default()
        };
        MultiTurn::new(turns, 0, n, &params, ThinkTime::Fixed(0.5))
    }

    fn chat(spec: &RequestSpec) -> Vec<(String, String)> {
        let Prompt::Chat(chat) = &spec.prompt else {
            panic!("chat prompts")
        };
        chat.iter()
            .map(|m: &ChatMessage| match &m.content[..] {
                [ContentPart::Text(t)] => (m.role.clone(), t.clone()),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn done(spec: &RequestSpec, answer: &str, success: bool) -> TurnResult {
        TurnResult {
            session: spec.session.clone().unwrap(),
            success,
            generated_text: answer.into(),
            ttft: 0.1,
            latency: 0.2,
            finished_at: 3.0,
        }
    }

    #[test]
    fn conversations_go_turn_by_turn_with_the_servers_answers() {
        let flags = SampleFlags {
            disable_shuffle: true,
            no_oversample: true,
        };
        let mut src = source(0, flags);
        assert_eq!(src.total(), 2);
        let firsts = src.next_batch(&Words, 10).unwrap();
        assert_eq!(firsts.len(), 2);
        let u = |t: &str| ("user".to_string(), t.to_string());
        let a = |t: &str| ("assistant".to_string(), t.to_string());
        assert_eq!(chat(&firsts[0]), [u("hello there")]);
        assert_eq!(
            (firsts[0].prompt_len, firsts[0].expected_output_len),
            (2, 5)
        );
        assert_eq!(firsts[1].expected_output_len, 9);
        let s0 = firsts[0].session.clone().unwrap();
        assert_eq!((s0.id.as_str(), s0.turn), ("file-0", 0));
        // Turn 1 of conversation a: the server's answer, then row 3.
        let second = src
            .next_turn(&Words, done(&firsts[0], "the real answer", true))
            .unwrap()
            .unwrap();
        assert_eq!(
            chat(&second),
            [u("hello there"), a("the real answer"), u("and then what")]
        );
        assert_eq!((second.prompt_len, second.expected_output_len), (8, 7));
        assert_eq!(second.send_at, Some(3.5));
        let third = src
            .next_turn(&Words, done(&second, "ok", true))
            .unwrap()
            .unwrap();
        assert_eq!(chat(&third).last().unwrap(), &u("bye now"));
        assert_eq!(third.session.as_ref().unwrap().turn, 2);
        // The last row: the conversation ends; b has one row only.
        assert!(
            src.next_turn(&Words, done(&third, "x", true))
                .unwrap()
                .is_none()
        );
        assert!(
            src.next_turn(&Words, done(&firsts[1], "x", true))
                .unwrap()
                .is_none()
        );
        assert!(src.next_batch(&Words, 10).unwrap().is_empty());
    }

    #[test]
    fn a_failed_turn_ends_its_conversation_and_oversampling_repeats_conversations() {
        let mut src = source(3, SampleFlags::default());
        let firsts = src.next_batch(&Words, 10).unwrap();
        assert_eq!(firsts.len(), 3);
        let ids: Vec<String> = firsts
            .iter()
            .map(|s| s.session.as_ref().unwrap().id.clone())
            .collect();
        assert_eq!(ids, ["file-0", "file-1", "file-2"]);
        let a = firsts
            .iter()
            .find(|s| chat(s)[0].1 == "hello there")
            .unwrap();
        assert!(
            src.next_turn(&Words, done(a, "x", false))
                .unwrap()
                .is_none()
        );
    }
}
