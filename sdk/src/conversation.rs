//! What every multi-turn dataset needs, whatever its file looks like: one chat history per
//! conversation that holds the server's real answers (never the dataset's), session ids
//! the host and the backends understand, and the think time between an answer and the
//! next turn, drawn reproducibly.
//!
//! A dataset starts each conversation with [`Conversations::start`] (its first turn, from
//! `next-batch`), and in `next-turn` looks the conversation up ([`Conversations::lookup`]),
//! decides what the user says next from its own data, and calls
//! [`Conversations::continue_with`], which appends the answer and the new user message to
//! the history and returns the request. The history's prompt length is kept as a running
//! sum of the messages' token counts (as vLLM counts a prompt: without a chat template),
//! so a next turn only tokenizes the answer and the new message.

use crate::options::option;
use crate::rng::Generator;
use crate::{ChatMessage, ContentPart, OptionInfo, PluginError, Prompt, RequestSpec, TurnResult};

/// How long the simulated user waits after an answer before sending the next turn.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ThinkTime {
    /// At once: the host sends the next turn as soon as the answer has been read.
    #[default]
    None,
    /// This many seconds after the answer ended.
    Fixed(f64),
    /// Drawn from an exponential distribution with this mean, per conversation and turn
    /// from the run seed, so the same seed gives the same waits whatever order the
    /// answers arrive in.
    Exponential(f64),
}

/// The choices of the think-time distribution option ([`ThinkTime::options`]).
pub const THINK_TIME_DISTRIBUTIONS: [&str; 2] = ["fixed", "exponential"];

impl ThinkTime {
    /// The two options a conversation dataset declares for it: `think-time` (seconds) and
    /// `think-time-distribution`, with flags `--<prefix>-think-time` and
    /// `--<prefix>-think-time-distribution` (no flags when `flag_prefix` is `None`).
    pub fn options(flag_prefix: Option<&str>) -> [OptionInfo; 2] {
        let mut time = option(
            "think-time",
            "Seconds between an answer and the next turn of its conversation (none: at once)",
            None,
        )
        .number();
        let mut dist = option(
            "think-time-distribution",
            "fixed: every wait is think-time; exponential: waits drawn with think-time as \
             their mean, reproducibly from the seed",
            Some("fixed"),
        )
        .choices(&THINK_TIME_DISTRIBUTIONS);
        if let Some(prefix) = flag_prefix {
            time = time.flag(&format!("{prefix}-think-time"));
            dist = dist.flag(&format!("{prefix}-think-time-distribution"));
        }
        [time, dist]
    }

    /// Reads the two options of [`ThinkTime::options`].
    pub fn read(reader: &mut crate::OptionReader) -> Result<Self, PluginError> {
        let seconds: Option<f64> = reader.parse("think-time")?;
        let dist = reader.string("think-time-distribution");
        Self::from_parts(seconds, dist.as_deref())
    }

    /// A think time from its seconds and distribution name, checked.
    pub fn from_parts(
        seconds: Option<f64>,
        distribution: Option<&str>,
    ) -> Result<Self, PluginError> {
        let Some(seconds) = seconds else {
            return match distribution {
                None | Some("fixed") => Ok(ThinkTime::None),
                Some(_) => Err(PluginError::InvalidConfig(
                    "think-time-distribution needs think-time".into(),
                )),
            };
        };
        if !seconds.is_finite() || seconds < 0.0 {
            return Err(PluginError::InvalidConfig(format!(
                "think-time must be a number of seconds >= 0, got {seconds}"
            )));
        }
        match distribution.map(str::trim).unwrap_or("fixed") {
            "fixed" => Ok(ThinkTime::Fixed(seconds)),
            "exponential" => Ok(ThinkTime::Exponential(seconds)),
            other => Err(PluginError::InvalidConfig(format!(
                "think-time-distribution={other:?}: expected one of {}",
                THINK_TIME_DISTRIBUTIONS.join(", ")
            ))),
        }
    }

    /// The wait before turn `turn` (>= 1) of conversation `conversation`. Each draw has a
    /// generator of its own, seeded from `seed`, the conversation and the turn: turns
    /// finish in whatever order the server answers them, and the waits must not depend on
    /// it.
    pub fn draw(&self, seed: u64, conversation: u64, turn: u32) -> Option<f64> {
        match *self {
            ThinkTime::None => None,
            ThinkTime::Fixed(s) => Some(s),
            ThinkTime::Exponential(mean) => {
                let entropy =
                    (u128::from(seed) << 64) ^ (u128::from(conversation) << 32) ^ u128::from(turn);
                let u = Generator::new(entropy).random();
                // Inverse CDF; `1 - u` is in (0, 1], so the log is finite.
                Some(-mean * (1.0 - u).ln())
            }
        }
    }
}

/// A user message of one text part.
pub fn user_message(text: String) -> ChatMessage {
    ChatMessage {
        role: "user".into(),
        content: vec![ContentPart::Text(text)],
    }
}

/// One open conversation.
struct Open<S> {
    /// The dataset's own state (what the user says next).
    script: S,
    /// Every message so far, the server's answers included.
    history: Vec<ChatMessage>,
    /// Tokens of the history's messages (the next prompt's length before the new message).
    history_tokens: u32,
}

/// A turn the dataset continues a conversation with.
#[derive(Clone, Debug)]
pub struct NextTurn {
    /// What the user says.
    pub user: ChatMessage,
    /// Its length in tokens.
    pub user_tokens: u32,
    /// The output length to ask for.
    pub output_len: u32,
}

/// The open conversations of a multi-turn dataset, with a dataset-specific script `S`.
///
/// Session ids are `<prefix><n>`, `n` counting conversations from 0 in the order they were
/// started, so they are the same for the same seed and unique within a run.
pub struct Conversations<S> {
    prefix: String,
    think: ThinkTime,
    seed: u64,
    /// Indexed by `n`; `None` once a conversation has ended (its history freed).
    open: Vec<Option<Open<S>>>,
}

impl<S> Conversations<S> {
    /// Conversations whose session ids start with `prefix`, waiting `think` (drawn from
    /// `seed`) between an answer and the next turn.
    pub fn new(prefix: impl Into<String>, think: ThinkTime, seed: u64) -> Self {
        Conversations {
            prefix: prefix.into(),
            think,
            seed,
            open: Vec::new(),
        }
    }

    /// How many conversations were started.
    pub fn started(&self) -> usize {
        self.open.len()
    }

    /// Starts a conversation whose first user message is `first` (`first_tokens` tokens
    /// long), asking for `output_len`; `script` is what the dataset needs to go on.
    /// Returns the first turn's request (a chat prompt of that one message, turn 0).
    pub fn start(
        &mut self,
        script: S,
        first: ChatMessage,
        first_tokens: u32,
        output_len: u32,
    ) -> RequestSpec {
        let n = self.open.len();
        let history = vec![first];
        let mut spec = RequestSpec::text(String::new(), first_tokens, output_len);
        spec.prompt = Prompt::Chat(history.clone());
        spec.session = Some(crate::Session {
            id: format!("{}{n}", self.prefix),
            turn: 0,
        });
        self.open.push(Some(Open {
            script,
            history,
            history_tokens: first_tokens,
        }));
        spec
    }

    /// The conversation `turn` belongs to: its script, for the dataset to decide the next
    /// turn from. `None` when the conversation has ended. An id this set never gave out is
    /// an input error (the host handed another dataset's turn).
    pub fn lookup(&mut self, turn: &TurnResult) -> Result<Option<&mut S>, PluginError> {
        let n = self.index(turn)?;
        Ok(self.open[n].as_mut().map(|o| &mut o.script))
    }

    fn index(&self, turn: &TurnResult) -> Result<usize, PluginError> {
        turn.session
            .id
            .strip_prefix(self.prefix.as_str())
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n < self.open.len())
            .ok_or_else(|| {
                PluginError::InvalidInput(format!(
                    "next-turn for an unknown session {:?}",
                    turn.session.id
                ))
            })
    }

    /// Ends the conversation of `turn` (it failed, or its script is done), freeing its
    /// history.
    pub fn end(&mut self, turn: &TurnResult) -> Result<(), PluginError> {
        let n = self.index(turn)?;
        self.open[n] = None;
        Ok(())
    }

    /// The next turn after `turn`: the server's answer (`turn.generated_text`, of
    /// `answer_tokens` tokens) and `next.user` are appended to the history, and the
    /// request asks for `next.output_len` with the whole history as its chat prompt,
    /// sent the think time after the answer ended. `None` when the conversation has
    /// already ended.
    pub fn continue_with(
        &mut self,
        turn: &TurnResult,
        answer_tokens: u32,
        next: NextTurn,
    ) -> Result<Option<RequestSpec>, PluginError> {
        let n = self.index(turn)?;
        let Some(open) = self.open[n].as_mut() else {
            return Ok(None);
        };
        open.history.push(ChatMessage {
            role: "assistant".into(),
            content: vec![ContentPart::Text(turn.generated_text.clone())],
        });
        open.history.push(next.user);
        open.history_tokens = open
            .history_tokens
            .saturating_add(answer_tokens)
            .saturating_add(next.user_tokens);
        let index = turn.session.turn + 1;
        let mut spec = RequestSpec::text(String::new(), open.history_tokens, next.output_len);
        spec.prompt = Prompt::Chat(open.history.clone());
        spec.session = Some(crate::Session {
            id: turn.session.id.clone(),
            turn: index,
        });
        spec.send_at = self
            .think
            .draw(self.seed, n as u64, index)
            .map(|wait| turn.finished_at + wait);
        Ok(Some(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Session;

    fn result(id: &str, turn: u32, answer: &str, finished_at: f64) -> TurnResult {
        TurnResult {
            session: Session {
                id: id.into(),
                turn,
            },
            success: true,
            generated_text: answer.into(),
            ttft: 0.1,
            latency: 0.2,
            finished_at,
        }
    }

    fn texts(spec: &RequestSpec) -> Vec<(String, String)> {
        let Prompt::Chat(chat) = &spec.prompt else {
            panic!("a chat prompt")
        };
        chat.iter()
            .map(|m| match &m.content[..] {
                [ContentPart::Text(t)] => (m.role.clone(), t.clone()),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn next(text: &str, tokens: u32, output_len: u32) -> NextTurn {
        NextTurn {
            user: user_message(text.into()),
            user_tokens: tokens,
            output_len,
        }
    }

    #[test]
    fn histories_hold_the_real_answers_and_count_their_tokens() {
        let mut c = Conversations::new("s-", ThinkTime::Fixed(0.5), 1);
        let a = c.start("script a", user_message("hello".into()), 2, 10);
        let b = c.start("script b", user_message("other".into()), 3, 11);
        assert_eq!(a.session.as_ref().unwrap().id, "s-0");
        assert_eq!(b.session.as_ref().unwrap().id, "s-1");
        assert_eq!(
            (a.prompt_len, a.expected_output_len, a.send_at),
            (2, 10, None)
        );
        assert_eq!(texts(&a), [("user".into(), "hello".into())]);

        let done = result("s-0", 0, "the server said this", 4.0);
        assert_eq!(c.lookup(&done).unwrap(), Some(&mut "script a"));
        let second = c
            .continue_with(&done, 5, next("and then?", 3, 7))
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&second),
            [
                ("user".into(), "hello".into()),
                ("assistant".into(), "the server said this".into()),
                ("user".into(), "and then?".into())
            ]
        );
        let session = second.session.as_ref().unwrap();
        assert_eq!((session.id.as_str(), session.turn), ("s-0", 1));
        assert_eq!((second.prompt_len, second.expected_output_len), (10, 7));
        assert_eq!(second.send_at, Some(4.5));

        // The other conversation is untouched; an ended one gives no next turn.
        c.end(&result("s-1", 0, "x", 1.0)).unwrap();
        assert_eq!(c.lookup(&result("s-1", 0, "x", 1.0)).unwrap(), None);
        assert!(
            c.continue_with(&result("s-1", 0, "x", 1.0), 1, next("y", 1, 1))
                .unwrap()
                .is_none()
        );
        for bad in ["s-2", "t-0", "s-x"] {
            assert!(matches!(
                c.lookup(&result(bad, 0, "", 0.0)),
                Err(PluginError::InvalidInput(_))
            ));
        }
    }

    #[test]
    fn think_times_are_fixed_or_drawn_per_conversation_and_turn() {
        assert_eq!(ThinkTime::None.draw(0, 0, 1), None);
        assert_eq!(ThinkTime::Fixed(2.0).draw(0, 5, 3), Some(2.0));
        let e = ThinkTime::Exponential(2.0);
        let draws: Vec<f64> = (0..2000).map(|c| e.draw(7, c, 1).unwrap()).collect();
        // Reproducible, and different per conversation, turn and seed.
        assert_eq!(e.draw(7, 3, 1), Some(draws[3]));
        assert_ne!(e.draw(7, 3, 2), Some(draws[3]));
        assert_ne!(e.draw(8, 3, 1), Some(draws[3]));
        assert!(draws.iter().all(|&d| d >= 0.0 && d.is_finite()));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 2.0).abs() < 0.2, "mean {mean}");
    }

    #[test]
    fn think_time_options_are_checked() {
        assert_eq!(ThinkTime::from_parts(None, None).unwrap(), ThinkTime::None);
        assert_eq!(
            ThinkTime::from_parts(Some(1.5), None).unwrap(),
            ThinkTime::Fixed(1.5)
        );
        assert_eq!(
            ThinkTime::from_parts(Some(1.5), Some("exponential")).unwrap(),
            ThinkTime::Exponential(1.5)
        );
        for (s, d) in [
            (Some(-1.0), None),
            (Some(f64::NAN), None),
            (Some(1.0), Some("gamma")),
            (None, Some("exponential")),
        ] {
            assert!(
                matches!(
                    ThinkTime::from_parts(s, d),
                    Err(PluginError::InvalidConfig(_))
                ),
                "{s:?} {d:?}"
            );
        }
        let [t, d] = ThinkTime::options(Some("sharegpt"));
        assert_eq!(t.cli_flag.as_deref(), Some("sharegpt-think-time"));
        assert_eq!(
            d.cli_flag.as_deref(),
            Some("sharegpt-think-time-distribution")
        );
    }
}
