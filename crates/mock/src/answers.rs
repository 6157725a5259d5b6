//! Graded questions on `/v1/completions` and `/v1/chat/completions`: an answer key
//! (`--answer-key`), the request it matches, and the answer the mock gives it, right or,
//! on purpose, wrong, so that a client's accuracy under load has a known value.
//!
//! The key is a JSONL file, one question a line, read once when the server starts (a line
//! that is not a question is an error naming the file and the line; blank lines are
//! skipped). A question is numbered by its line, from 0. Two kinds, told apart by
//! `choices`:
//!
//! - GSM8K: `{"question": str, "answer": str}`, the answer a worked solution ending in
//!   `#### N`. Its label is what vLLM's GSM8K benchmark (`get_answer_value`) makes of it:
//!   commas removed, the last run of ASCII digits, kept as written (leading zeros too; a
//!   grader decides what to make of those). An answer without a digit is refused.
//! - Multiple choice: `{"question": str, "choices": [str, ...], "answer": A}`, `A` a letter
//!   (`"B"`, either case) or a 0-based index; the right letter is `'A' + index`. At least 2
//!   choices (else no answer could be wrong) and at most 26 (the letters).
//!
//! Other members of a line are ignored. A question is matched with its text trimmed of
//! surrounding whitespace, and must not be empty.
//!
//! A request is matched by its prompt text (completions: `prompt`, a string or a one-string
//! list; chat: the text of the messages, parts included, concatenated in order): the key
//! question whose text occurs in it last, at the greatest `rfind` position, wins, since a
//! few-shot prompt carries solved questions before the one it asks (on a tie, the longer
//! question, then the first in the key). A prompt of token ids, or one that contains no
//! key question, gets the mock's ordinary answer, and so does a request with a JSON-schema
//! or choice constraint (its structured answer comes first, see `structured.rs`).
//!
//! The answer: GSM8K `The answer is N.\n#### N`, multiple choice `Answer: X`. It takes the
//! place of the ordinary words exactly as a structured answer does: in pieces of up to
//! four characters, each one output token, after the reasoning tokens of a chat answer,
//! ending with `finish_reason` `"stop"`, or cut at `max_tokens` (`"length"`).
//!
//! `--wrong-answer-rate` answers a share of the matched requests wrongly, by the plan of
//! the other faults (see `FaultPlan`) counted over the matched requests alone: GSM8K with
//! the label plus one (a label beyond `u64` gets a `1` appended), multiple choice with the
//! next letter, wrapping within the question's choices.
//!
//! Every matched request that is answered (not one a fault or a 400 refuses at once)
//! leaves a [`GradedAnswer`], with or without an `x-request-id`, read with
//! [`crate::MockServer::answers`] or `GET /mock/answers`.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::faults::FaultPlan;
use crate::reply::Api;
use crate::timing::MAX_KEPT_REQUESTS;

#[cfg(test)]
mod tests;

/// What the right answer to a key question is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expected {
    /// A GSM8K label: the digits, as the key's answer wrote them.
    Number(String),
    /// A multiple-choice answer: the index of the right choice, of `count`.
    Choice { index: usize, count: usize },
}

impl Expected {
    /// The answer text, right or wrong.
    pub(crate) fn text(&self, right: bool) -> String {
        match self {
            Expected::Number(label) => {
                let label = if right {
                    label.clone()
                } else {
                    plus_one(label)
                };
                format!("The answer is {label}.\n#### {label}")
            }
            Expected::Choice { index, count } => {
                let index = if right { *index } else { (index + 1) % count };
                format!("Answer: {}", letter(index))
            }
        }
    }
}

/// The label one more, as an integer; a label beyond `u64` gets a `1` appended, which
/// makes another number all the same.
fn plus_one(label: &str) -> String {
    match label.parse::<u64>().ok().and_then(|n| n.checked_add(1)) {
        Some(n) => n.to_string(),
        None => format!("{label}1"),
    }
}

/// The letter of choice `index` (below 26, checked when the key is read).
fn letter(index: usize) -> char {
    char::from(b'A' + u8::try_from(index).unwrap_or(0))
}

/// One question of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// Its 0-based line in the key file.
    pub line: usize,
    /// Its text, trimmed.
    pub text: String,
    pub expected: Expected,
}

/// The questions of `--answer-key`, in the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnswerKey {
    questions: Vec<Question>,
}

/// A line of the key as it comes.
#[derive(Deserialize)]
struct Line {
    question: String,
    #[serde(default)]
    choices: Option<Vec<String>>,
    answer: Value,
}

impl AnswerKey {
    /// Reads the key file; the error names the file, and the line where one is at fault.
    pub(crate) fn read(path: &Path) -> anyhow::Result<AnswerKey> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the answer key {}: {e}", path.display()))?;
        AnswerKey::parse(&text)
            .map_err(|e| anyhow::anyhow!("mock server --answer-key {}: {e}", path.display()))
    }

    /// The key from the file's text; the error names the line (from 1) at fault.
    pub(crate) fn parse(text: &str) -> Result<AnswerKey, String> {
        let mut questions = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let question = question(i, line).map_err(|why| format!("line {}: {why}", i + 1))?;
            questions.push(question);
        }
        if questions.is_empty() {
            return Err("no questions".to_owned());
        }
        Ok(AnswerKey { questions })
    }

    /// The question `prompt` asks: of those whose text it contains, the one found last
    /// (see the module documentation).
    pub(crate) fn find(&self, prompt: &str) -> Option<&Question> {
        self.questions
            .iter()
            .filter_map(|q| prompt.rfind(&q.text).map(|at| (at, q)))
            // `max_by_key` keeps the last maximum: compare on reversed lines so that the
            // first in the key wins a full tie.
            .max_by_key(|(at, q)| (*at, q.text.len(), std::cmp::Reverse(q.line)))
            .map(|(_, q)| q)
    }
}

/// Question `line` (0-based) of the key, from its JSON.
fn question(line: usize, json: &str) -> Result<Question, String> {
    let parsed: Line = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let text = parsed.question.trim();
    if text.is_empty() {
        return Err("the question is empty".to_owned());
    }
    let expected = match parsed.choices {
        None => match &parsed.answer {
            Value::String(answer) => Expected::Number(
                label(answer).ok_or("the answer has no number (GSM8K's `#### N`)")?,
            ),
            _ => {
                return Err(
                    "`answer` must be a string (GSM8K) or, with `choices`, a letter or an index"
                        .to_owned(),
                );
            }
        },
        Some(choices) => {
            let count = choices.len();
            if !(2..=26).contains(&count) {
                return Err(format!(
                    "a multiple-choice question needs 2 to 26 choices, this one has {count}"
                ));
            }
            let index = choice_index(&parsed.answer)?;
            if index >= count {
                return Err(format!(
                    "the answer {} is not among the {count} choices",
                    parsed.answer
                ));
            }
            Expected::Choice { index, count }
        }
    };
    Ok(Question {
        line,
        text: text.to_owned(),
        expected,
    })
}

/// A multiple-choice answer's index: a letter (`"B"` is 1) or a 0-based index.
fn choice_index(answer: &Value) -> Result<usize, String> {
    let index = match answer {
        Value::String(text) => match text.trim().as_bytes() {
            [c] if c.is_ascii_alphabetic() => Some(usize::from(c.to_ascii_uppercase() - b'A')),
            _ => None,
        },
        Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
        _ => None,
    };
    index.ok_or_else(|| {
        format!("a multiple-choice answer must be a letter or a 0-based index, got {answer}")
    })
}

/// vLLM's `get_answer_value` on a GSM8K answer: commas removed, the last run of ASCII
/// digits (`re.findall(r"\d+", ...)[-1]`); `None` without a digit.
pub(crate) fn label(answer: &str) -> Option<String> {
    let text: String = answer.chars().filter(|c| *c != ',').collect();
    let bytes = text.as_bytes();
    // Digits are ASCII, so the byte after any other byte starts a character.
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |at| at + 1);
    Some(text[start..end].to_owned())
}

/// A matched request's answer: the question, whether the answer is the right one, and its
/// text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Graded {
    /// The question's 0-based line in the key.
    pub question: usize,
    pub right: bool,
    pub text: String,
}

/// The answer to a completions or chat request `body` when its prompt asks a key
/// question (`None` otherwise), right or, when `plan` (`--wrong-answer-rate`, asked only
/// for a matched request) says so, wrong.
pub(crate) fn answer(key: &AnswerKey, api: Api, body: &[u8], plan: &FaultPlan) -> Option<Graded> {
    let prompt = prompt_text(api, body)?;
    let question = key.find(&prompt)?;
    let right = plan.next().1.is_none();
    Some(Graded {
        question: question.line,
        right,
        text: question.expected.text(right),
    })
}

/// The prompt text of a completions or chat request (see the module documentation);
/// `None` for other APIs, token ids, or a body without text.
pub(crate) fn prompt_text(api: Api, body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Completion {
        prompt: Value,
    }
    #[derive(Deserialize)]
    struct Chat {
        messages: Vec<Message>,
    }
    #[derive(Deserialize)]
    struct Message {
        #[serde(default)]
        content: Value,
    }
    match api {
        Api::Completions => {
            let request: Completion = serde_json::from_slice(body).ok()?;
            match request.prompt {
                Value::String(text) => Some(text),
                Value::Array(mut list) if list.len() == 1 => match list.pop() {
                    Some(Value::String(text)) => Some(text),
                    _ => None,
                },
                _ => None,
            }
        }
        Api::Chat => {
            let request: Chat = serde_json::from_slice(body).ok()?;
            let mut text = String::new();
            for message in request.messages {
                match message.content {
                    Value::String(content) => text.push_str(&content),
                    Value::Array(parts) => {
                        for part in parts {
                            if let Some(part) = part.get("text").and_then(Value::as_str) {
                                text.push_str(part);
                            }
                        }
                    }
                    _ => {}
                }
            }
            Some(text)
        }
        _ => None,
    }
}

/// What the mock answered to one request that asked a question of `--answer-key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradedAnswer {
    /// The request's `x-request-id` header, if it had one.
    pub id: Option<String>,
    /// The question's 0-based line in the key file.
    pub question: usize,
    /// Whether the answer the mock generated is the right one, whole: `false` when it was
    /// made wrong on purpose (`--wrong-answer-rate`), cut at `max_tokens` (whatever a
    /// grader makes of what is left), or empty (`--empty-rate`). A fault that breaks the
    /// response on its way (a cut, a malformed chunk, an error event) leaves it as it was.
    pub correct: bool,
}

/// The [`GradedAnswer`]s, in the order the requests were answered, at most
/// [`MAX_KEPT_REQUESTS`] (the oldest go first).
#[derive(Debug, Default)]
pub(crate) struct AnswerLog {
    list: Mutex<VecDeque<GradedAnswer>>,
}

impl AnswerLog {
    pub(crate) fn push(&self, answer: GradedAnswer) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() == MAX_KEPT_REQUESTS {
            list.pop_front();
        }
        list.push_back(answer);
    }

    pub(crate) fn list(&self) -> Vec<GradedAnswer> {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter().cloned().collect()
    }
}
