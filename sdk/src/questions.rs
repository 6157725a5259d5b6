//! The request source of a graded dataset (`gsm8k`, `mcq`): a fixed list of questions,
//! each a ready prompt and the reference its answer is graded against, asked in order and
//! over again from the first when the run wants more requests than there are questions,
//! so that a load test can run longer than its file (accuracy then counts a question once
//! per time it was asked).
//!
//! Each prompt's token count is measured once, the first time the question is asked, for
//! all the new prompts of a batch in one host crossing; a question asked again reuses its
//! count, so wrapping round costs no tokenizer calls. A plugin builds its [`Question`]s
//! from its file (the prompt format is its own) and hands them to a [`QuestionBank`].
//! Generic over the SDK's [`TokenCounter`] so that a plugin's tests run natively.

use crate::sampling::TokenCounter;
use crate::{PluginError, RequestSpec, Sample};

/// One question, ready to ask.
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    /// The whole prompt, sent as it is.
    pub prompt: String,
    /// What a right answer is, handed back to the dataset's `grade`.
    pub reference: String,
}

/// How many requests are made per host crossing, at most.
const MAX_BATCH: usize = 256;

/// The questions in order, wrapping round; each prompt measured once.
pub struct QuestionBank {
    /// The plugin's name, for errors.
    plugin: &'static str,
    questions: Vec<Question>,
    /// Token counts of the prompts, once measured.
    lens: Vec<Option<u32>>,
    total: usize,
    made: usize,
    output_len: u32,
    extra_body: Option<String>,
}

impl QuestionBank {
    /// `num_requests` requests in all (0: each question once), each asking for
    /// `output_len` tokens and carrying `extra_body`. No questions is an `invalid-input`
    /// error naming `plugin`.
    pub fn new(
        plugin: &'static str,
        questions: Vec<Question>,
        num_requests: usize,
        output_len: u32,
        extra_body: Option<String>,
    ) -> Result<Self, PluginError> {
        if questions.is_empty() {
            return Err(PluginError::InvalidInput(format!(
                "{plugin}: no questions to ask"
            )));
        }
        let total = if num_requests == 0 {
            questions.len()
        } else {
            num_requests
        };
        Ok(QuestionBank {
            plugin,
            lens: vec![None; questions.len()],
            questions,
            total,
            made: 0,
            output_len,
            extra_body,
        })
    }

    /// How many requests the source makes in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The next (up to) `max` samples (at most 256 per call); the prompts not measured
    /// yet are counted in one crossing.
    pub fn next_samples(
        &mut self,
        tok: &impl TokenCounter,
        max: usize,
    ) -> Result<Vec<Sample>, PluginError> {
        let want = max.min(MAX_BATCH).min(self.total - self.made);
        let picks: Vec<usize> = (self.made..self.made + want)
            .map(|k| k % self.questions.len())
            .collect();
        let mut todo: Vec<usize> = picks
            .iter()
            .copied()
            .filter(|&i| self.lens[i].is_none())
            .collect();
        todo.sort_unstable();
        todo.dedup();
        if !todo.is_empty() {
            let texts: Vec<String> = todo
                .iter()
                .map(|&i| self.questions[i].prompt.clone())
                .collect();
            let counts = tok.token_counts(&texts)?;
            if counts.len() != texts.len() {
                return Err(PluginError::Internal(format!(
                    "{}: {} token counts for {} prompts",
                    self.plugin,
                    counts.len(),
                    texts.len()
                )));
            }
            for (&i, n) in todo.iter().zip(counts) {
                self.lens[i] = Some(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        let samples = picks
            .into_iter()
            .map(|i| {
                let q = &self.questions[i];
                let len = self.lens[i].expect("measured above");
                let mut spec = RequestSpec::text(q.prompt.clone(), len, self.output_len);
                spec.extra_body = self.extra_body.clone();
                Sample::graded(spec, q.reference.clone())
            })
            .collect();
        self.made += want;
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Prompt;
    use std::cell::RefCell;

    /// Counts words as tokens, and remembers each call's texts.
    #[derive(Default)]
    struct Words(RefCell<Vec<Vec<String>>>);

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            self.0.borrow_mut().push(texts.to_vec());
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    impl Words {
        /// How many prompts it was asked to count, over all calls.
        fn measured(&self) -> usize {
            self.0.borrow().iter().map(Vec::len).sum()
        }
    }

    fn text(sample: &Sample) -> &str {
        match &sample.request.prompt {
            Prompt::Text(t) => t,
            other => panic!("expected a text prompt, got {other:?}"),
        }
    }

    /// `n` questions: the `i`-th (from 0) is `i + 1` words, its reference `i`.
    fn questions(n: usize) -> Vec<Question> {
        (0..n)
            .map(|i| Question {
                prompt: format!("question {}", "w ".repeat(i)),
                reference: i.to_string(),
            })
            .collect()
    }

    fn bank(n: usize, num_requests: usize) -> QuestionBank {
        QuestionBank::new("p", questions(n), num_requests, 7, Some("{\"x\":1}".into())).unwrap()
    }

    fn drain(bank: &mut QuestionBank, tok: &Words, batch: usize) -> Vec<Sample> {
        let mut all = Vec::new();
        loop {
            let got = bank.next_samples(tok, batch).unwrap();
            assert!(got.len() <= batch);
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }

    fn view(samples: &[Sample]) -> Vec<(String, u32, Option<String>)> {
        samples
            .iter()
            .map(|s| {
                (
                    text(s).to_string(),
                    s.request.prompt_len,
                    s.reference.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn questions_wrap_round_in_order() {
        let mut b = bank(3, 8);
        assert_eq!(b.total(), 8);
        let tok = Words::default();
        let got = drain(&mut b, &tok, 3);
        let references: Vec<_> = got.iter().map(|s| s.reference.clone().unwrap()).collect();
        assert_eq!(references, ["0", "1", "2", "0", "1", "2", "0", "1"]);
        assert_eq!(text(&got[0]), text(&got[6]));
        for (sample, q) in got.iter().zip(questions(3).iter().cycle()) {
            let spec = &sample.request;
            assert_eq!(text(sample), q.prompt);
            assert_eq!(
                spec.prompt_len as usize,
                q.prompt.split_whitespace().count()
            );
            assert_eq!(spec.expected_output_len, 7);
            assert_eq!(spec.extra_body.as_deref(), Some("{\"x\":1}"));
        }
        // The same requests whatever the batch size.
        let all = drain(&mut bank(3, 8), &Words::default(), 1000);
        assert_eq!(view(&all), view(&got));
        // 0 asks each question once; no extra body is none.
        let mut once = QuestionBank::new("p", questions(3), 0, 1, None).unwrap();
        assert_eq!(once.total(), 3);
        let got = drain(&mut once, &Words::default(), 10);
        assert_eq!(view(&got), view(&all[..3]));
        assert!(got.iter().all(|s| s.request.extra_body.is_none()));
    }

    #[test]
    fn each_prompt_is_measured_once_in_one_crossing_per_batch() {
        let tok = Words::default();
        let got = drain(&mut bank(3, 8), &tok, 3);
        assert_eq!(got.len(), 8);
        // The first batch measured all three; the wrapped-round ones reused the counts.
        assert_eq!(tok.0.borrow().len(), 1);
        assert_eq!(tok.measured(), 3);
        // A batch that holds a question twice measures it once.
        let tok = Words::default();
        let got = drain(&mut bank(2, 5), &tok, 5);
        assert_eq!(got.len(), 5);
        assert_eq!(*tok.0.borrow(), [vec!["question ", "question w "]]);
        // At most 256 requests per call.
        let tok = Words::default();
        let mut b = bank(300, 600);
        assert_eq!(b.next_samples(&tok, 1000).unwrap().len(), 256);
        assert_eq!(b.next_samples(&tok, 1000).unwrap().len(), 256);
        assert_eq!(b.next_samples(&tok, 1000).unwrap().len(), 88);
        assert!(b.next_samples(&tok, 1000).unwrap().is_empty());
        // The second batch measured the 44 it had not seen; the third, none.
        let calls: Vec<usize> = tok.0.borrow().iter().map(Vec::len).collect();
        assert_eq!(calls, [256, 44]);
    }

    #[test]
    fn no_questions_and_a_short_count_are_errors() {
        match QuestionBank::new("p", Vec::new(), 1, 1, None) {
            Err(PluginError::InvalidInput(m)) => assert_eq!(m, "p: no questions to ask"),
            other => panic!("expected an input error, got {:?}", other.err()),
        }
        struct Short;
        impl TokenCounter for Short {
            fn token_counts(&self, _: &[String]) -> Result<Vec<usize>, PluginError> {
                Ok(vec![1])
            }
        }
        match bank(2, 2).next_samples(&Short, 2) {
            Err(PluginError::Internal(m)) => assert_eq!(m, "p: 1 token counts for 2 prompts"),
            other => panic!("expected an internal error, got {other:?}"),
        }
    }
}
