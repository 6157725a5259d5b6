//! The `gsm8k` dataset: GSM8K accuracy under load, with the few-shot prompts of vLLM's
//! GSM8K evaluation (`tests/evals/gsm8k/gsm8k_eval.py`, `_build_gsm8k_prompts`) and of
//! SGLang's (`benchmark/gsm8k/bench_sglang.py`), each response graded as both grade it
//! (see [`sample`]).
//!
//! Needs `--dataset-path`: a JSONL file of `{"question": str, "answer": str}` lines,
//! GSM8K's own format (the answer a worked solution ending in `#### N`), e.g. GSM8K's
//! `test.jsonl`. Lines that start with `#` are skipped, as vLLM's `read_jsonl` skips them,
//! and so are blank lines; any other line that is not such an object, or whose answer has
//! no number, is an error naming the file and the line.
//!
//! The prompts: the first `num-shots` problems of the file, each as
//! `Question: {question}\nAnswer: {answer}\n\n`, make a prefix; every other problem, in
//! file order, is asked as `{prefix}Question: {question}\nAnswer:`. When the run wants
//! more requests (`--num-prompts`) than there are questions left, they start over from
//! the first question, in the same order each pass, so a load test can run longer than
//! the file (accuracy then counts a question once per time it was asked); `--num-prompts
//! 1314` asks each of `test.jsonl`'s questions once (5 shots). The prompt is sent as it
//! is (no chat template; a chat backend sends it as the user message, as vLLM's
//! `--use-chat-completions` does) and `prompt_len` is its token count with the run's
//! tokenizer, special tokens included.
//! Every request carries vLLM's and SGLang's stop strings as its extra body,
//! `{"stop":["Question","Assistant:","<|separator|>"]}`, and EOS is left alone: an answer
//! must stop by itself.
//!
//! Options: `num-shots` (`--gsm8k-num-shots`, 5: the solved examples before each
//! question), `output-len` (`--gsm8k-output-len`, also `--output-len`; 256, vLLM's
//! `--max-tokens`).
//!
//! Grading: a sample's reference is the final number of its answer, read as vLLM's and
//! SGLang's `get_answer_value` reads it ([`bench_sdk::grading::final_number`]: commas
//! removed, the last run of digits); a response is right when the final number read the
//! same way out of it is that number ([`bench_sdk::grading::grade_final_number`]), and
//! invalid when it has none.
//!
//! Where it differs:
//! - vLLM takes its examples from GSM8K's `train.jsonl` and asks `test.jsonl`; with one
//!   file, the examples are its first `num-shots` lines, as SGLang takes them from the
//!   file it asks. Unlike SGLang, those lines are not asked again, so that no prompt holds
//!   its own answer: with GSM8K's `test.jsonl` and 5 shots, 1,314 questions are asked
//!   (vLLM asks all 1,319 after 5 examples from `train.jsonl`; SGLang asks 1,319 of which
//!   the first 5 are the examples).
//! - vLLM and SGLang ask each question once (`--num-questions` at most the file's
//!   length); here questions wrap round.
//! - Sampling parameters are the run's: vLLM's script sends `temperature` 0 and `seed`
//!   42, SGLang's `temperature` 0; give them with `--extra-body` for the same answers.
//! - Blank lines are skipped (`json.loads` refuses them); vLLM's `gen_prefix` option (a
//!   text after `Answer:`) is not offered.

pub mod sample;

use bench_sdk::grading::{final_number, grade_final_number};
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
            "num-shots",
            "Solved problems before each question: the file's first lines, which are then \
             not asked themselves",
            Some("5"),
        )
        .flag("gsm8k-num-shots")
        .count(),
        option(
            "output-len",
            "Output tokens per request (max_tokens; an answer usually stops before, at a \
             stop string)",
            Some("256"),
        )
        .flag("gsm8k-output-len")
        .count()
        .shared(SharedFlag::OutputLen),
    ]
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let d = Params::default();
    let params = Params {
        num_shots: reader.parse_or("num-shots", d.num_shots)?,
        output_len: reader.parse_or("output-len", d.output_len)?,
    };
    reader.finish(&options())?;
    Ok(params)
}

/// Grades `output` against `reference` (a GSM8K answer's final number): right when the
/// output's final number is that number. A reference that is not a number in canonical
/// form (what [`final_number`] gives) is an `invalid-input` error.
pub fn grade(reference: &str, output: &str) -> Result<Verdict, PluginError> {
    if final_number(reference).as_deref() != Some(reference) {
        return Err(PluginError::InvalidInput(format!(
            "{NAME}: reference {reference:?} is not a number (a GSM8K reference is the final \
             number of the problem's answer, e.g. \"18\")"
        )));
    }
    Ok(grade_final_number(reference, output))
}

/// The request source: the file's questions after the examples, a batch per host call.
pub struct Gsm8kDataset {
    questions: QuestionBank,
}

impl Dataset for Gsm8kDataset {
    fn describe() -> DatasetDescription {
        // No EOS rule: answers must stop by themselves (at EOS or a stop string), as in
        // vLLM's and SGLang's evaluations. Making a request is cheap: not shardable.
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "GSM8K accuracy under load: vLLM's and SGLang's few-shot GSM8K \
                          prompts, each answer graded by its final number (--dataset-path: \
                          a JSONL of {\"question\", \"answer\"}, e.g. GSM8K's test.jsonl)"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a JSONL file of {{\"question\", \"answer\"}} \
                 lines, e.g. GSM8K's test.jsonl)"
            ))
        })?;
        let bytes = std::fs::read(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let problems = sample::parse(&bytes, &path)?;
        let questions =
            sample::question_bank(problems, &params, config.num_requests as usize, &path)?;
        Ok(Gsm8kDataset { questions })
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

bench_sdk::export_dataset!(Gsm8kDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p, Params::default());
        assert_eq!((p.num_shots, p.output_len), (5, 256));
        let p = parse_options(opts(&[("num-shots", "0"), ("output-len", "64")])).unwrap();
        assert_eq!(
            p,
            Params {
                num_shots: 0,
                output_len: 64
            }
        );
        for (pairs, needle) in [
            (opts(&[("num_shots", "5")]), "unknown option \"num_shots\""),
            (opts(&[("num-shots", "-1")]), "num-shots"),
            (opts(&[("output-len", "many")]), "output-len"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}");
                    assert!(m.starts_with("gsm8k: "), "{m:?}");
                }
                other => panic!("expected a config error containing {needle:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_description_asks_for_a_path_and_nothing_else() {
        let d = Gsm8kDataset::describe();
        assert_eq!(d.info.name, "gsm8k");
        assert!(matches!(d.path, PathUse::Required));
        assert!(!d.ignore_eos_by_default && !d.shardable && !d.multi_turn);
        assert!(!d.align_to_server_tokenizer);
        let flags: Vec<_> = d.info.options.iter().map(|o| o.cli_flag.clone()).collect();
        assert_eq!(
            flags,
            [
                Some("gsm8k-num-shots".to_string()),
                Some("gsm8k-output-len".to_string())
            ]
        );
    }

    /// A verdict's fields (the generated type has no `PartialEq`).
    fn view(v: &Verdict) -> (bool, f64, Option<&str>) {
        (v.correct, v.score, v.extracted.as_deref())
    }

    #[test]
    fn answers_are_graded_by_their_final_number() {
        let right = Gsm8kDataset::grade("18", " She makes 9 * 2 = $18.\n#### 18\n\n").unwrap();
        assert_eq!(view(&right), (true, 1.0, Some("18")));
        let commas = Gsm8kDataset::grade("70000", "The profit is $70,000.").unwrap();
        assert!(commas.correct);
        let wrong = Gsm8kDataset::grade("18", "So the answer is 16.").unwrap();
        assert_eq!(view(&wrong), (false, 0.0, Some("16")));
        let invalid = Gsm8kDataset::grade("18", "I cannot tell.").unwrap();
        assert_eq!(view(&invalid), (false, 0.0, None));
        for bad in ["", "eighteen", "018", "1,8", "-18", "18 "] {
            match Gsm8kDataset::grade(bad, "18") {
                Err(PluginError::InvalidInput(m)) => assert!(m.contains("is not a number"), "{m}"),
                other => panic!("expected an input error for {bad:?}, got {other:?}"),
            }
        }
    }
}
