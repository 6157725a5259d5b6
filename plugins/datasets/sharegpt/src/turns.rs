//! ShareGPT conversations replayed turn by turn (`--sharegpt-multi-turn`), beyond vLLM.
//!
//! The conversations are chosen exactly as the single-turn dataset chooses its requests
//! (vLLM's shuffle, filters on the first turn and oversampling; see [`crate::sample`]),
//! so `--num-prompts` counts conversations. Turn `k` sends the conversation's user
//! message `2k` with the whole history before it, where every earlier reply is the
//! server's real answer (the SDK's [`Conversations`]); it asks for as many tokens as the
//! dataset's reply `2k + 1` has (or `--sharegpt-output-len`). A conversation ends after
//! `--sharegpt-max-turns` turns, when the file has no further user message with a reply,
//! or when a turn fails.

use bench_sdk::conversation::{Conversations, NextTurn, ThinkTime};
use bench_sdk::sampling::TokenCounter;
use bench_sdk::{ContentPart, PluginError, Prompt, RequestSpec, TurnResult};

use crate::sample::{Loaded, Params, Sampler};

/// How many turns after a conversation's first two [`crate::sample::load_turns`] needs to
/// keep for at most `max_turns` turns (a user message and its reply per turn).
pub fn rest_to_keep(max_turns: Option<u32>) -> usize {
    max_turns.map_or(usize::MAX, |t| {
        (t as usize).saturating_sub(1).saturating_mul(2)
    })
}

/// The prefix of session ids (`sharegpt-<n>`, `n` counting conversations in sample order).
pub const SESSION_PREFIX: &str = "sharegpt-";

/// The multi-turn options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnParams {
    /// At most this many turns per conversation (none: all the file has).
    pub max_turns: Option<u32>,
    pub think: ThinkTime,
}

/// The multi-turn source: vLLM's sampler picks the conversations, [`Conversations`] keeps
/// their histories.
pub struct MultiTurn {
    sampler: Sampler,
    /// Per conversation id: its turns after the first two.
    rest: Vec<Vec<String>>,
    /// The script of a conversation is its id in `rest`.
    conversations: Conversations<usize>,
    output_len: Option<u32>,
    max_turns: u32,
}

impl MultiTurn {
    /// How many conversations looked at so far vLLM's length filter left out.
    pub fn left_out(&self) -> usize {
        self.sampler.left_out()
    }

    /// `params.tag_ids` is set here: the sampler marks each first turn with its
    /// conversation's id.
    pub fn new(
        loaded: Loaded,
        seed: u64,
        num_requests: usize,
        mut params: Params,
        turns: TurnParams,
        name: &str,
    ) -> Self {
        params.tag_ids = true;
        let output_len = params.output_len;
        let max_turns = turns.max_turns.unwrap_or(u32::MAX);
        MultiTurn {
            sampler: Sampler::new(loaded.conversations, seed, num_requests, params, name),
            rest: loaded.rest,
            conversations: Conversations::new(SESSION_PREFIX, turns.think, seed),
            output_len,
            max_turns,
        }
    }

    /// The next (up to) `max` conversations' first turns: one user message (with the
    /// entry's image or video), in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &impl TokenCounter,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let firsts = self.sampler.next_batch(tok, max)?;
        firsts
            .into_iter()
            .map(|spec| {
                let id = spec
                    .session
                    .as_ref()
                    .and_then(|s| s.id.parse::<usize>().ok())
                    .filter(|&id| id < self.rest.len())
                    .ok_or_else(|| {
                        PluginError::Internal("sharegpt: a first turn lost its conversation".into())
                    })?;
                let Prompt::Text(text) = spec.prompt else {
                    return Err(PluginError::Internal(
                        "sharegpt: first turns are text".into(),
                    ));
                };
                let mut content = vec![ContentPart::Text(text)];
                content.extend(spec.multimodal);
                let first = bench_sdk::ChatMessage {
                    role: "user".into(),
                    content,
                };
                Ok(self
                    .conversations
                    .start(id, first, spec.prompt_len, spec.expected_output_len))
            })
            .collect()
    }

    /// The turn after `turn`, or `None` when its conversation is over.
    pub fn next_turn(
        &mut self,
        tok: &impl TokenCounter,
        turn: TurnResult,
    ) -> Result<Option<RequestSpec>, PluginError> {
        let Some(&mut id) = self.conversations.lookup(&turn)? else {
            return Ok(None);
        };
        let next = turn.session.turn + 1;
        // User message `2 * next` of the conversation is `rest[2 * (next - 1)]`.
        let at = 2 * (next as usize - 1);
        let rest = &self.rest[id];
        let has_turn = at < rest.len() && (self.output_len.is_some() || at + 1 < rest.len());
        if !turn.success || next >= self.max_turns || !has_turn {
            self.conversations.end(&turn)?;
            return Ok(None);
        }
        let mut texts = vec![turn.generated_text.clone(), rest[at].clone()];
        if self.output_len.is_none() {
            texts.push(rest[at + 1].clone());
        }
        let counts = tok.token_counts(&texts)?;
        let tokens = |i: usize| u32::try_from(counts[i]).unwrap_or(u32::MAX);
        // A reply of no tokens would ask for none, which servers refuse.
        let output_len = self.output_len.unwrap_or_else(|| tokens(2).max(1));
        let user = bench_sdk::conversation::user_message(texts.swap_remove(1));
        self.conversations.continue_with(
            &turn,
            tokens(0),
            NextTurn {
                user,
                user_tokens: tokens(1),
                output_len,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::parse_turns;
    use bench_sdk::Session;
    use bench_sdk::sampling::SampleFlags;

    /// Counts whitespace-separated words.
    struct Words;

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    const FILE: &str = r#"[
        {"conversations": [
            {"value": "a0 a0 a0 a0"}, {"value": "r0 r0 r0 r0 r0"},
            {"value": "a1 a1 a1 a1 a1 a1"}, {"value": "r1 r1 r1 r1 r1 r1 r1"},
            {"value": "a2"}, {"value": "r2 r2 r2 r2 r2 r2 r2 r2 r2"},
            {"value": "a3 without reply"}
        ]},
        {"conversations": [{"value": "b0 b0 b0 b0"}, {"value": "q0 q0 q0 q0"}]},
        {"conversations": [{"value": "too short"}, {"value": "q0 q0 q0 q0"}, {"value": "c1"}, {"value": "q1"}]}
    ]"#;

    fn source(turns: TurnParams, output_len: Option<u32>, n: usize) -> MultiTurn {
        let loaded = parse_turns(FILE.as_bytes(), "t.json", rest_to_keep(turns.max_turns)).unwrap();
        let params = Params {
            output_len,
            flags: SampleFlags {
                disable_shuffle: true,
                ..SampleFlags::default()
            },
            ..Params::default()
        };
        MultiTurn::new(loaded, 0, n, params, turns, "t.json")
    }

    fn chat(spec: &RequestSpec) -> Vec<(String, String)> {
        let Prompt::Chat(chat) = &spec.prompt else {
            panic!("chat prompts")
        };
        chat.iter()
            .map(|m| match &m.content[..] {
                [ContentPart::Text(t)] => (m.role.clone(), t.clone()),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn answered(spec: &RequestSpec, answer: &str, success: bool) -> TurnResult {
        let s = spec.session.as_ref().unwrap();
        TurnResult {
            session: Session {
                id: s.id.clone(),
                turn: s.turn,
            },
            success,
            generated_text: answer.into(),
            ttft: 0.01,
            latency: 0.1,
            finished_at: 10.0,
        }
    }

    /// Plays every conversation to its end, the server answering `ANSWER <turn>`.
    fn play(src: &mut MultiTurn, firsts: Vec<RequestSpec>) -> Vec<Vec<RequestSpec>> {
        firsts
            .into_iter()
            .map(|first| {
                let mut turns = vec![first];
                loop {
                    let last = turns.last().unwrap();
                    let answer = format!("ANSWER {}", last.session.as_ref().unwrap().turn);
                    match src
                        .next_turn(&Words, answered(last, &answer, true))
                        .unwrap()
                    {
                        Some(next) => turns.push(next),
                        None => break turns,
                    }
                }
            })
            .collect()
    }

    #[test]
    fn turns_carry_the_servers_answers_and_the_files_reply_lengths() {
        let mut src = source(TurnParams::default(), None, 2);
        let firsts = src.next_batch(&Words, 10).unwrap();
        assert!(src.next_batch(&Words, 10).unwrap().is_empty());
        let played = play(&mut src, firsts);
        // The third entry's first prompt is too short for vLLM's filter: two conversations.
        assert_eq!(played.len(), 2);
        let a = &played[0];
        // The last user message has no reply: three turns.
        assert_eq!(a.len(), 3);
        assert_eq!(
            chat(&a[2]),
            [
                ("user".into(), "a0 a0 a0 a0".into()),
                ("assistant".into(), "ANSWER 0".into()),
                ("user".into(), "a1 a1 a1 a1 a1 a1".into()),
                ("assistant".into(), "ANSWER 1".into()),
                ("user".into(), "a2".into()),
            ]
        );
        let lens: Vec<(u32, u32, u32)> = a
            .iter()
            .map(|s| {
                (
                    s.session.as_ref().unwrap().turn,
                    s.prompt_len,
                    s.expected_output_len,
                )
            })
            .collect();
        // Prompt: 4; 4 + 2 + 6; 12 + 2 + 1. Output: the file's reply lengths 5, 7, 9.
        assert_eq!(lens, [(0, 4, 5), (1, 12, 7), (2, 15, 9)]);
        assert!(
            a.iter()
                .all(|s| s.session.as_ref().unwrap().id == "sharegpt-0")
        );
        assert!(a.iter().all(|s| s.send_at.is_none()));
        assert_eq!(played[1].len(), 1);
        assert_eq!(played[1][0].session.as_ref().unwrap().id, "sharegpt-1");
    }

    #[test]
    fn max_turns_think_time_fixed_output_and_failures_end_or_shape_turns() {
        let turns = TurnParams {
            max_turns: Some(2),
            think: ThinkTime::Fixed(1.5),
        };
        let mut src = source(turns, Some(3), 1);
        let firsts = src.next_batch(&Words, 10).unwrap();
        let played = play(&mut src, firsts);
        assert_eq!(played[0].len(), 2);
        assert_eq!(played[0][1].expected_output_len, 3);
        assert_eq!(played[0][1].send_at, Some(11.5));

        // With a fixed output length, a last user message without reply is a turn too.
        let mut src = source(TurnParams::default(), Some(3), 1);
        let firsts = src.next_batch(&Words, 10).unwrap();
        assert_eq!(play(&mut src, firsts)[0].len(), 4);

        // A failed turn ends its conversation.
        let mut src = source(TurnParams::default(), None, 1);
        let first = src.next_batch(&Words, 10).unwrap().remove(0);
        assert!(
            src.next_turn(&Words, answered(&first, "", false))
                .unwrap()
                .is_none()
        );
        assert!(
            src.next_turn(&Words, answered(&first, "x", true))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn oversampled_conversations_get_sessions_of_their_own() {
        let mut src = source(TurnParams::default(), None, 5);
        let firsts = src.next_batch(&Words, 10).unwrap();
        let ids: Vec<&str> = firsts
            .iter()
            .map(|s| s.session.as_ref().unwrap().id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "sharegpt-0",
                "sharegpt-1",
                "sharegpt-2",
                "sharegpt-3",
                "sharegpt-4"
            ]
        );
        // Each plays its conversation's own turns.
        let played = play(&mut src, firsts);
        for conv in &played {
            let first = &chat(&conv[0])[0].1;
            assert_eq!(conv.len(), if first.starts_with("a0") { 3 } else { 1 });
        }
    }
}
