//! The `mcq` dataset: multiple-choice accuracy under load, with any JSONL file of
//! questions, their choices and the right answers (MMLU-style sets exported to JSONL, or
//! a set of one's own), each asked zero-shot and graded by the letter the response names
//! (see [`sample`]).
//!
//! It reimplements no one tool's benchmark: the prompt asks for the answer in the form of
//! OpenAI's simple-evals (`Answer: LETTER` on the last line) and the grader reads that
//! form, or a letter at the start of the response (what a completion of the prompt's
//! closing `Answer:` gives), as [`bench_sdk::grading::choice_letter`] says.
//!
//! Needs `--dataset-path`: a JSONL file, one question per line, with a question (a
//! string), a list of 2 to 26 choices (strings; numbers are written as JSON writes them)
//! and the answer, either a letter (`"B"`, any case) or a 0-based integer index (`1`).
//! Lines that start with `#`, and blank lines, are skipped; any other line without the
//! three, with too few or too many choices, or with an answer that is not one of its
//! choices, is an error naming the file, the line and the key.
//!
//! The prompt of a question with four choices (the letters listed are those of the
//! question's choices, comma-separated: `one of A, B.` for two, up to `A, B, ..., Z.`):
//!
//! ```text
//! Answer the following multiple choice question. The last line of your response should be of the form "Answer: LETTER", where LETTER is one of A, B, C, D.
//!
//! Question: {question}
//! A. {choice 0}
//! B. {choice 1}
//! C. {choice 2}
//! D. {choice 3}
//! Answer:
//! ```
//!
//! Questions are asked in file order; when the run wants more requests (`--num-prompts`)
//! than the file has, they start over from the first, in the same order each pass, so a
//! load test can run longer than the file (accuracy then counts a question once per time
//! it was asked); `--num-prompts` equal to the file's questions asks each once. The
//! prompt is sent as it is (no chat template; a chat backend sends it as the user
//! message) and `prompt_len` is its token count with the run's tokenizer, special tokens
//! included. Every request
//! carries `{"stop":["Question:"]}` as its extra body, so that a model that goes on after
//! its answer with a question of its own stops before writing an `Answer:` line that
//! would be graded instead; EOS is left alone.
//!
//! Options: `question-key` (`--mcq-question-key`, `question`), `choices-key`
//! (`--mcq-choices-key`, `choices`), `answer-key` (`--mcq-answer-key`, `answer`): the
//! keys of a line's three fields; `output-len` (`--mcq-output-len`, also `--output-len`;
//! 32).
//!
//! Grading: a sample's reference is `{letter}/{n}`, the right letter and how many choices
//! the question has (`B/4`); a response is right when
//! [`bench_sdk::grading::choice_letter`] reads that letter out of it among the first `n`
//! letters, and invalid when it reads none. A reference of another form is an
//! `invalid-input` error.
//!
//! Where it differs from simple-evals' MMLU: its prompt says "of the following format:
//! 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step
//! before answering.", writes the choices `A) ...` and ends without `Answer:`; here the
//! prompt ends in `Answer:` and asks for no reasoning, so that a short `output-len` is
//! enough and a base model can answer too. An ARC-style `answerKey` of `"1"` to `"4"` is
//! refused rather than guessed (1-based or a label?): convert it to a letter or an index.

pub mod sample;

use bench_sdk::grading::grade_choice;
use bench_sdk::options::option;
use bench_sdk::questions::QuestionBank;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, Sample, SharedFlag, Verdict,
};

use sample::{NAME, Params};

fn options() -> Vec<OptionInfo> {
    vec![
        option(
            "question-key",
            "The key of each line's question (a string)",
            Some("question"),
        )
        .flag("mcq-question-key"),
        option(
            "choices-key",
            "The key of each line's choices (a list of 2 to 26)",
            Some("choices"),
        )
        .flag("mcq-choices-key"),
        option(
            "answer-key",
            "The key of each line's answer: a letter (any case) or a 0-based index",
            Some("answer"),
        )
        .flag("mcq-answer-key"),
        option("output-len", "Output tokens per request", Some("32"))
            .flag("mcq-output-len")
            .count()
            .shared(SharedFlag::OutputLen),
    ]
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let d = Params::default();
    let mut key = |name: &str, default: String| match reader.string(name) {
        None => Ok(default),
        Some(k) if k.is_empty() => Err(PluginError::InvalidConfig(format!(
            "{NAME}: option {name} must not be empty"
        ))),
        Some(k) => Ok(k),
    };
    let question_key = key("question-key", d.question_key)?;
    let choices_key = key("choices-key", d.choices_key)?;
    let answer_key = key("answer-key", d.answer_key)?;
    let params = Params {
        question_key,
        choices_key,
        answer_key,
        output_len: reader.parse_or("output-len", d.output_len)?,
    };
    reader.finish(&options())?;
    Ok(params)
}

/// Grades `output` against `reference` (`{letter}/{n}`): right when the letter the
/// output names, among the first `n`, is `letter`.
pub fn grade(reference: &str, output: &str) -> Result<Verdict, PluginError> {
    let (letter, choices) = sample::parse_reference(reference)?;
    Ok(grade_choice(&letter.to_string(), output, choices))
}

/// The request source: the file's questions, a batch per host call.
pub struct McqDataset {
    questions: QuestionBank,
}

impl Dataset for McqDataset {
    fn describe() -> DatasetDescription {
        // No EOS rule: answers must stop by themselves. Making a request is cheap: not
        // shardable.
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Multiple-choice accuracy under load: questions of a JSONL file \
                          (--dataset-path; a question, 2 to 26 choices and the answer as a \
                          letter or a 0-based index per line) asked zero-shot, each answer \
                          graded by the letter it names"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a JSONL file of {{\"question\", \"choices\", \
                 \"answer\"}} lines)"
            ))
        })?;
        let bytes = std::fs::read(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let entries = sample::parse(&bytes, &path, &params)?;
        let questions =
            sample::question_bank(entries, &params, config.num_requests as usize, &path)?;
        Ok(McqDataset { questions })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.questions.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        Ok(self
            .next_samples(max)?
            .into_iter()
            .map(|s| s.request)
            .collect())
    }

    fn next_samples(&mut self, max: u32) -> Result<Vec<Sample>, PluginError> {
        self.questions.next_samples(&HostTokenizer, max as usize)
    }

    fn grade(reference: &str, output: &str) -> Result<Verdict, PluginError> {
        grade(reference, output)
    }
}

bench_sdk::export_dataset!(McqDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_their_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p, Params::default());
        assert_eq!(
            (
                p.question_key.as_str(),
                p.choices_key.as_str(),
                p.answer_key.as_str(),
                p.output_len
            ),
            ("question", "choices", "answer", 32)
        );
        let p = parse_options(opts(&[
            ("question-key", "stem"),
            ("choices-key", "options"),
            ("answer-key", "label"),
            ("output-len", "4"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                question_key: "stem".into(),
                choices_key: "options".into(),
                answer_key: "label".into(),
                output_len: 4
            }
        );
        for (pairs, needle) in [
            (
                opts(&[("question_key", "q")]),
                "unknown option \"question_key\"",
            ),
            (
                opts(&[("answer-key", "")]),
                "option answer-key must not be empty",
            ),
            (opts(&[("output-len", "-1")]), "output-len"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}");
                    assert!(m.starts_with("mcq: "), "{m:?}");
                }
                other => panic!("expected a config error containing {needle:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_description_asks_for_a_path_and_nothing_else() {
        let d = McqDataset::describe();
        assert_eq!(d.info.name, "mcq");
        assert!(matches!(d.path, PathUse::Required));
        assert!(!d.ignore_eos_by_default && !d.shardable && !d.multi_turn);
        assert!(!d.align_to_server_tokenizer);
        let flags: Vec<_> = d
            .info
            .options
            .iter()
            .map(|o| o.cli_flag.clone().unwrap())
            .collect();
        assert_eq!(
            flags,
            [
                "mcq-question-key",
                "mcq-choices-key",
                "mcq-answer-key",
                "mcq-output-len"
            ]
        );
    }

    /// A verdict's fields (the generated type has no `PartialEq`).
    fn view(v: &Verdict) -> (bool, f64, Option<&str>) {
        (v.correct, v.score, v.extracted.as_deref())
    }

    #[test]
    fn answers_are_graded_by_their_letter() {
        let right = McqDataset::grade("B/4", "The sum is 4.\nAnswer: B").unwrap();
        assert_eq!(view(&right), (true, 1.0, Some("B")));
        let completion = McqDataset::grade("C/4", " C. 5").unwrap();
        assert!(completion.correct);
        let wrong = McqDataset::grade("B/4", "Answer: D").unwrap();
        assert_eq!(view(&wrong), (false, 0.0, Some("D")));
        // A letter past the question's choices is no answer.
        let past = McqDataset::grade("B/3", "Answer: D").unwrap();
        assert_eq!(view(&past), (false, 0.0, None));
        let invalid = McqDataset::grade("B/4", "I am not sure.").unwrap();
        assert_eq!(view(&invalid), (false, 0.0, None));
        for bad in ["B", "b/4", "E/4", "B/27", "4/B"] {
            match McqDataset::grade(bad, "Answer: B") {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains("malformed reference"), "{m}")
                }
                other => panic!("expected an input error for {bad:?}, got {other:?}"),
            }
        }
    }
}
