//! The multiple-choice requests: each line of the file read into a question, its choices
//! and the right letter, asked zero-shot in file order, over again when the run wants
//! more (the SDK's [`QuestionBank`], generic over its tokenizer so that it runs natively
//! in unit tests).

use bench_sdk::PluginError;
use bench_sdk::custom;
use bench_sdk::questions::{Question, QuestionBank};
use serde_json::{Map, Value};

/// The plugin's name, which starts its error messages.
pub const NAME: &str = "mcq";

/// The fewest choices a question may have.
pub const MIN_CHOICES: usize = 2;
/// The most choices a question may have: one per letter, `A` to `Z`.
pub const MAX_CHOICES: usize = 26;

/// The `extra-body` of every request: a model that goes on after its letter with a
/// question of its own (a base model completing the prompt does) stops there, instead of
/// writing an "Answer:" line the grader would read.
pub const EXTRA_BODY: &str = r#"{"stop":["Question:"]}"#;

/// The options.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The key of a line's question.
    pub question_key: String,
    /// The key of a line's list of choices.
    pub choices_key: String,
    /// The key of a line's answer (a letter or a 0-based index).
    pub answer_key: String,
    /// `max_tokens` of every request.
    pub output_len: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            question_key: "question".into(),
            choices_key: "choices".into(),
            answer_key: "answer".into(),
            output_len: 32,
        }
    }
}

/// One question of the file, ready to ask: its prompt ([`prompt`]) and its reference,
/// `{letter}/{choices}` ([`reference()`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// 1-based line number.
    pub line: usize,
    pub question: Question,
}

/// The letter of choice `index` (from 0): `A`, `B`, ...
pub fn letter(index: usize) -> char {
    assert!(index < MAX_CHOICES, "no letter for choice {index}");
    char::from(b'A' + index as u8)
}

/// The prompt of a question with `choices` (2 to 26 of them):
///
/// ```text
/// Answer the following multiple choice question. The last line of your response should
/// be of the form "Answer: LETTER", where LETTER is one of A, B, C, D.
///
/// Question: {question}
/// A. {choice 0}
/// B. {choice 1}
/// C. {choice 2}
/// D. {choice 3}
/// Answer:
/// ```
///
/// (the instruction is one line; the letters listed, comma-separated, are those of the
/// choices).
pub fn prompt(question: &str, choices: &[String]) -> String {
    let letters: Vec<String> = (0..choices.len()).map(|i| letter(i).to_string()).collect();
    let mut p = format!(
        "Answer the following multiple choice question. The last line of your response \
         should be of the form \"Answer: LETTER\", where LETTER is one of {}.\n\n\
         Question: {question}\n",
        letters.join(", ")
    );
    for (i, choice) in choices.iter().enumerate() {
        p.push_str(&format!("{}. {choice}\n", letter(i)));
    }
    p.push_str("Answer:");
    p
}

/// A sample's reference: the right letter and how many choices there were, `B/4`.
pub fn reference(answer: usize, choices: usize) -> String {
    format!("{}/{choices}", letter(answer))
}

/// [`reference()`] read back: the right letter and the number of choices. Anything else
/// (`B`, `b/4`, `E/4`, `B/27`, `B/+4`) is an `invalid-input` error.
pub fn parse_reference(reference: &str) -> Result<(char, usize), PluginError> {
    let parsed = reference.split_once('/').and_then(|(l, n)| {
        let mut chars = l.chars();
        let letter = chars.next().filter(|c| c.is_ascii_uppercase())?;
        if chars.next().is_some() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = n.parse().ok()?;
        let index = (letter as u8 - b'A') as usize;
        ((MIN_CHOICES..=MAX_CHOICES).contains(&n) && index < n).then_some((letter, n))
    });
    parsed.ok_or_else(|| {
        PluginError::InvalidInput(format!(
            "{NAME}: malformed reference {reference:?}: expected the right letter and the \
             number of choices, e.g. \"B/4\""
        ))
    })
}

/// The questions of a JSONL file: one object per line with a question (a string), a list
/// of 2 to 26 choices (strings, or numbers as JSON writes them) and the answer (a letter,
/// any case, or a 0-based integer index), under the keys `params` names. Lines that
/// start with `#`, and blank lines, are skipped ([`custom::commented_jsonl_objects`]).
/// Errors name the file, the 1-based line and the key (`q.jsonl:3: "answer": "E" is not
/// one of the 4 choices (A to D)`); a file that is not UTF-8 is one.
pub fn parse(bytes: &[u8], name: &str, params: &Params) -> Result<Vec<Entry>, PluginError> {
    custom::commented_jsonl_objects(NAME, bytes, name)?
        .into_iter()
        .map(|(at, fields)| {
            entry(at, &fields, params)
                .map_err(|why| PluginError::InvalidInput(format!("{NAME}: {name}:{at}: {why}")))
        })
        .collect()
}

fn entry(line: usize, fields: &Map<String, Value>, p: &Params) -> Result<Entry, String> {
    let get = |key: &str| fields.get(key).ok_or_else(|| format!("no {key:?} field"));
    let key = &p.question_key;
    let Value::String(question) = get(key)? else {
        return Err(format!("{key:?} must be a string"));
    };
    let key = &p.choices_key;
    let Value::Array(items) = get(key)? else {
        return Err(format!("{key:?} must be a list of choices"));
    };
    if !(MIN_CHOICES..=MAX_CHOICES).contains(&items.len()) {
        return Err(format!(
            "{key:?} must hold {MIN_CHOICES} to {MAX_CHOICES} choices, it has {}",
            items.len()
        ));
    }
    let choices = items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(format!("{key:?}: choice {i} must be a string or a number")),
        })
        .collect::<Result<Vec<String>, String>>()?;
    let n = choices.len();
    let key = &p.answer_key;
    let last = letter(n - 1);
    let answer = match get(key)? {
        Value::String(s) => {
            let mut chars = s.trim().chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) if c.is_ascii_alphabetic() => {
                    (c.to_ascii_uppercase() as u8 - b'A') as usize
                }
                _ => {
                    return Err(format!(
                        "{key:?}: {s:?} is not a letter (the answer is a letter A to {last}, \
                         or a 0-based index)"
                    ));
                }
            }
        }
        Value::Number(num) => match num.as_u64() {
            Some(i) => usize::try_from(i).unwrap_or(usize::MAX),
            None => {
                return Err(format!(
                    "{key:?}: {num} is not a 0-based index (the answer is a letter A to \
                     {last}, or an index 0 to {})",
                    n - 1
                ));
            }
        },
        other => {
            return Err(format!(
                "{key:?} must be a letter or a 0-based index, got {other}"
            ));
        }
    };
    if answer >= n {
        let given = match get(key)? {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        return Err(format!(
            "{key:?}: {given} is not one of the {n} choices (A to {last}, or 0 to {})",
            n - 1
        ));
    }
    Ok(Entry {
        line,
        question: Question {
            prompt: prompt(question, &choices),
            reference: reference(answer, n),
        },
    })
}

/// The requests: the questions in file order, wrapping round; `num_requests` 0 asks each
/// of them once. A file without questions is an error naming the file `name`.
pub fn question_bank(
    entries: Vec<Entry>,
    params: &Params,
    num_requests: usize,
    name: &str,
) -> Result<QuestionBank, PluginError> {
    if entries.is_empty() {
        return Err(PluginError::InvalidInput(format!(
            "{NAME}: {name}: the file has no questions"
        )));
    }
    let questions = entries.into_iter().map(|e| e.question).collect();
    QuestionBank::new(
        NAME,
        questions,
        num_requests,
        params.output_len,
        Some(EXTRA_BODY.into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::sampling::TokenCounter;
    use bench_sdk::{Prompt, Sample};

    /// Counts words as tokens.
    struct Words;

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    fn text(sample: &Sample) -> &str {
        match &sample.request.prompt {
            Prompt::Text(t) => t,
            other => panic!("mcq makes text prompts, got {other:?}"),
        }
    }

    /// Three questions: the answer as an upper-case letter, an index, a lower-case letter.
    const THREE: &str = concat!(
        r#"{"question": "What is 2 + 2?", "choices": ["3", "4", "5", "6"], "answer": "B"}"#,
        "\n",
        r#"{"question": "Which is a colour?", "choices": ["Red", "Seven", "Run"], "answer": 0}"#,
        "\n",
        r#"{"question": "Is 7 prime?", "choices": ["No", "Yes"], "answer": "b"}"#,
        "\n",
    );

    fn bank(text: &str, num_requests: usize) -> QuestionBank {
        let p = Params {
            output_len: 9,
            ..Params::default()
        };
        let entries = parse(text.as_bytes(), "three.jsonl", &p).unwrap();
        question_bank(entries, &p, num_requests, "three.jsonl").unwrap()
    }

    fn drain(b: &mut QuestionBank) -> Vec<Sample> {
        let mut all = Vec::new();
        loop {
            let got = b.next_samples(&Words, 10).unwrap();
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }

    fn references(samples: &[Sample]) -> Vec<String> {
        samples
            .iter()
            .map(|s| s.reference.clone().unwrap())
            .collect()
    }

    #[test]
    fn prompts_are_the_zero_shot_format() {
        let mut b = bank(THREE, 0);
        assert_eq!(b.total(), 3);
        let got = drain(&mut b);
        assert_eq!(
            text(&got[0]),
            "Answer the following multiple choice question. The last line of your response \
             should be of the form \"Answer: LETTER\", where LETTER is one of A, B, C, D.\n\
             \n\
             Question: What is 2 + 2?\n\
             A. 3\n\
             B. 4\n\
             C. 5\n\
             D. 6\n\
             Answer:"
        );
        assert!(text(&got[1]).contains("where LETTER is one of A, B, C.\n\n"));
        assert!(
            text(&got[1])
                .ends_with("Question: Which is a colour?\nA. Red\nB. Seven\nC. Run\nAnswer:")
        );
        assert!(text(&got[2]).contains("where LETTER is one of A, B.\n\n"));
        assert_eq!(references(&got), ["B/4", "A/3", "B/2"]);
        for sample in &got {
            let spec = &sample.request;
            assert_eq!(
                spec.prompt_len as usize,
                text(sample).split_whitespace().count()
            );
            assert_eq!(spec.expected_output_len, 9);
            assert_eq!(
                spec.extra_body.as_deref(),
                Some(r#"{"stop":["Question:"]}"#)
            );
            let body: Value = serde_json::from_str(spec.extra_body.as_deref().unwrap()).unwrap();
            assert!(body["stop"].is_array());
        }
    }

    #[test]
    fn keys_are_the_options() {
        let p = Params {
            question_key: "stem".into(),
            choices_key: "options".into(),
            answer_key: "label".into(),
            ..Params::default()
        };
        let line = r#"{"stem": "1 + 1?", "options": [1, 2, 3.5], "label": 1, "question": 5}"#;
        let got = parse(line.as_bytes(), "k.jsonl", &p).unwrap();
        assert_eq!(got[0].question.reference, "B/3");
        assert!(
            got[0]
                .question
                .prompt
                .ends_with("Question: 1 + 1?\nA. 1\nB. 2\nC. 3.5\nAnswer:")
        );
        // The default keys are not read.
        match parse(line.as_bytes(), "k.jsonl", &Params::default()) {
            Err(PluginError::InvalidInput(m)) => {
                assert_eq!(m, "mcq: k.jsonl:1: \"question\" must be a string")
            }
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn bad_lines_name_the_file_line_and_key() {
        let good = r#"{"question": "Q?", "choices": ["a", "b"], "answer": "A"}"#;
        let many: Vec<String> = (0..27).map(|i| format!("\"c{i}\"")).collect();
        let many = format!(
            r#"{{"question": "Q?", "choices": [{}], "answer": 0}}"#,
            many.join(", ")
        );
        for (bad, needle) in [
            ("{\"question\": ", "mcq: q.jsonl:3: "),
            ("\"Q?\"", "q.jsonl:3: expected a JSON object"),
            (
                r#"{"choices": ["a", "b"], "answer": "A"}"#,
                "q.jsonl:3: no \"question\" field",
            ),
            (
                r#"{"question": "Q?", "answer": "A"}"#,
                "q.jsonl:3: no \"choices\" field",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b"]}"#,
                "q.jsonl:3: no \"answer\" field",
            ),
            (
                r#"{"question": ["Q?"], "choices": ["a", "b"], "answer": "A"}"#,
                "q.jsonl:3: \"question\" must be a string",
            ),
            (
                r#"{"question": "Q?", "choices": "a b", "answer": "A"}"#,
                "q.jsonl:3: \"choices\" must be a list",
            ),
            (
                r#"{"question": "Q?", "choices": ["a"], "answer": "A"}"#,
                "q.jsonl:3: \"choices\" must hold 2 to 26 choices, it has 1",
            ),
            (
                &many,
                "q.jsonl:3: \"choices\" must hold 2 to 26 choices, it has 27",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", null], "answer": "A"}"#,
                "q.jsonl:3: \"choices\": choice 1 must be a string or a number",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b", "c", "d"], "answer": "E"}"#,
                "q.jsonl:3: \"answer\": \"E\" is not one of the 4 choices (A to D, or 0 to 3)",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b", "c", "d"], "answer": 4}"#,
                "q.jsonl:3: \"answer\": 4 is not one of the 4 choices",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b"], "answer": -1}"#,
                "q.jsonl:3: \"answer\": -1 is not a 0-based index",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b"], "answer": 1.0}"#,
                "q.jsonl:3: \"answer\": 1.0 is not a 0-based index",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b"], "answer": "1"}"#,
                "q.jsonl:3: \"answer\": \"1\" is not a letter",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b"], "answer": "AB"}"#,
                "q.jsonl:3: \"answer\": \"AB\" is not a letter",
            ),
            (
                r#"{"question": "Q?", "choices": ["a", "b"], "answer": null}"#,
                "q.jsonl:3: \"answer\" must be a letter or a 0-based index, got null",
            ),
        ] {
            // A comment line counts as a line.
            let text = format!("{good}\n# a comment\n{bad}\n{good}\n");
            match parse(text.as_bytes(), "q.jsonl", &Params::default()) {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}");
                    assert!(m.starts_with("mcq: q.jsonl:3: "), "{m:?}");
                }
                other => panic!("expected an input error for {bad:?}, got {other:?}"),
            }
        }
        let bad = parse(b"{}\n\xff\n", "q.jsonl", &Params::default()).unwrap_err();
        assert!(
            matches!(bad, PluginError::InvalidInput(m) if m.starts_with("mcq: q.jsonl:2: not UTF-8"))
        );
        // Comments and blank lines are skipped; a file of none is an error.
        let text = format!("# header\n{good}\n\n {good}\n");
        let got = parse(text.as_bytes(), "q.jsonl", &Params::default()).unwrap();
        assert_eq!(got.iter().map(|q| q.line).collect::<Vec<_>>(), [2, 4]);
        let none = parse(b"# only a comment\n\n", "e.jsonl", &Params::default()).unwrap();
        match question_bank(none, &Params::default(), 1, "e.jsonl") {
            Err(PluginError::InvalidInput(m)) => {
                assert_eq!(m, "mcq: e.jsonl: the file has no questions")
            }
            other => panic!("expected an input error, got {:?}", other.err()),
        }
    }

    #[test]
    fn references_read_back() {
        assert_eq!(reference(1, 4), "B/4");
        assert_eq!(reference(25, 26), "Z/26");
        assert_eq!(parse_reference("B/4").unwrap(), ('B', 4));
        assert_eq!(parse_reference("Z/26").unwrap(), ('Z', 26));
        assert_eq!(parse_reference("A/2").unwrap(), ('A', 2));
        for bad in [
            "", "B", "B/", "/4", "b/4", "E/4", "B/1", "A/27", "B/+4", "B/4 ", "BB/4", "B/4/4",
        ] {
            match parse_reference(bad) {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.starts_with("mcq: malformed reference"), "{m}")
                }
                other => panic!("expected an input error for {bad:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_arithmetic_file_reads() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../tests/data/datasets/mcq/arithmetic.jsonl"
        );
        let data = std::fs::read_to_string(path).unwrap();
        let entries = parse(data.as_bytes(), "arithmetic.jsonl", &Params::default()).unwrap();
        let questions: Vec<Question> = entries.into_iter().map(|e| e.question).collect();
        assert_eq!(questions.len(), 40);
        // Four choices each, the right letters spread evenly over A to D.
        let mut per_letter = [0; 4];
        for q in &questions {
            let (letter, n) = parse_reference(&q.reference).unwrap();
            assert_eq!(n, 4);
            per_letter[(letter as u8 - b'A') as usize] += 1;
            assert!(q.prompt.contains("one of A, B, C, D.\n\nQuestion: "));
        }
        assert_eq!(per_letter, [10, 10, 10, 10]);
        assert_eq!(questions[0].reference, "A/4");
        assert!(
            questions[0]
                .prompt
                .ends_with("Question: What is 2 + 3?\nA. 5\nB. 6\nC. 4\nD. 7\nAnswer:")
        );
        // Both forms of answer occur.
        let lines: Vec<Value> = data
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(lines.iter().any(|l| l["answer"].is_string()));
        assert!(lines.iter().any(|l| l["answer"].is_u64()));
    }
}
