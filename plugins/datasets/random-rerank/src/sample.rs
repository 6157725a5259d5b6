//! vLLM's `RandomDatasetForReranking.sample` (vLLM 0.32), draw for draw, on the SDK's
//! [`bench_sdk::synthetic`] module:
//! 1. one query length and offset (`get_sampling_params` for one request), the query
//!    taking half the input length less one separator token;
//! 2. `num_requests` document lengths and offsets, each document taking what the query
//!    left of the input length (with `--no-reranker`: the whole input length, and one
//!    request fewer, since the query is embedded as one of the batch's texts);
//! 3. the query's tokens (index 0) fitted to its length, then each document's (index
//!    1, 2, ...), consecutive allowed tokens from its offset plus its index;
//! 4. the documents in requests of `--random-batch-size`, each with the query.
//!
//! Generic over the SDK's [`Codec`] so that it runs natively in unit tests.

use bench_sdk::rng::Generator;
use bench_sdk::sampling::{Codec, fit_to_length_batch};
use bench_sdk::synthetic::{Vocabulary, prompt_len, sampling_params};
use bench_sdk::{PluginError, Prompt, RequestSpec, RerankInput};

/// The dataset's name, which begins every message it writes.
pub(crate) const NAME: &str = "random-rerank";

/// The options of `vllm bench serve --dataset-name random-rerank`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--random-input-len`: tokens of a query and one document together.
    pub input_len: i64,
    /// `--random-range-ratio` for input lengths, in [0, 1).
    pub input_range_ratio: f64,
    /// `--random-range-ratio` for output lengths (checked, as vLLM does, though there
    /// is no output).
    pub output_range_ratio: f64,
    /// `--random-batch-size`: documents per request, at least 1.
    pub batch_size: u32,
    /// Not `--no-reranker`: the server scores (query, document) pairs natively.
    pub reranker: bool,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            input_len: 1024,
            input_range_ratio: 0.0,
            output_range_ratio: 0.0,
            batch_size: 1,
            reranker: true,
        }
    }
}

/// The sampler: the query and the document lengths are drawn in [`Sampler::new`], the
/// documents built a batch of requests at a time.
pub struct Sampler {
    rng: Generator,
    vocab: Vocabulary,
    query: String,
    query_len: u32,
    doc_lens: Vec<i64>,
    doc_offsets: Vec<i64>,
    /// The next document to build.
    next: usize,
    batch_size: usize,
    reranker: bool,
    /// Tokens more or fewer than asked for, over the query and the documents so far.
    pub token_mismatch: i64,
}

impl Sampler {
    pub fn new(
        tok: &impl Codec,
        mut rng: Generator,
        num_requests: usize,
        p: &Params,
    ) -> Result<Self, PluginError> {
        let ratios = (p.input_range_ratio, p.output_range_ratio);
        let separators = i64::from(p.reranker);
        let query_param = if p.reranker {
            p.input_len.div_euclid(2) - separators
        } else {
            p.input_len
        };
        let query = sampling_params(NAME, tok, &mut rng, 1, query_param, 0, ratios)?;
        let query_len = query.input[0];
        let (num_docs, batch_size, doc_param) = if p.reranker {
            (
                num_requests,
                p.batch_size,
                p.input_len - query_len - separators,
            )
        } else {
            // vLLM asserts this: the query takes one text of every batch.
            if num_requests < 2 || p.batch_size < 2 {
                return Err(PluginError::InvalidConfig(format!(
                    "{NAME}: with no-reranker the query is one of each request's texts, so \
                     --num-prompts and batch-size must both be at least 2 (got {num_requests} \
                     and {})",
                    p.batch_size
                )));
            }
            (num_requests - 1, p.batch_size - 1, p.input_len)
        };
        let docs = sampling_params(NAME, tok, &mut rng, num_docs, doc_param, 0, ratios)?;
        let vocab = Vocabulary::new(NAME, tok)?;
        let sequence = vocab.sequence(&[], 0, query_len, query.offsets[0], 0);
        let fitted = fit_to_length_batch(tok, vec![sequence], vocab.vocab_size, &mut rng)?
            .pop()
            .expect("one fitted sequence per input");
        Ok(Sampler {
            query_len: prompt_len(NAME, &fitted)?,
            token_mismatch: fitted.mismatch,
            query: fitted.text,
            rng,
            vocab,
            doc_lens: docs.input,
            doc_offsets: docs.offsets,
            next: 0,
            batch_size: batch_size.max(1) as usize,
            reranker: p.reranker,
        })
    }

    /// How many requests the source makes.
    pub fn size(&self) -> usize {
        self.doc_lens.len().div_ceil(self.batch_size)
    }

    /// How many documents are left to build.
    pub fn remaining(&self) -> usize {
        self.doc_lens.len() - self.next
    }

    /// The next (up to) `max` requests. A request's `prompt_len` is vLLM's: with a
    /// reranker, (query + separator) once per document plus the documents; without, the
    /// query once plus the documents.
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let end = self
            .doc_lens
            .len()
            .min(self.next + max.saturating_mul(self.batch_size));
        let sequences = (self.next..end)
            .map(|i| {
                self.vocab
                    .sequence(&[], 0, self.doc_lens[i], self.doc_offsets[i], i + 1)
            })
            .collect();
        self.next = end;
        let fitted = fit_to_length_batch(tok, sequences, self.vocab.vocab_size, &mut self.rng)?;
        fitted
            .chunks(self.batch_size)
            .map(|batch| {
                let mut len = if self.reranker {
                    (self.query_len + 1).saturating_mul(batch.len() as u32)
                } else {
                    self.query_len
                };
                for doc in batch {
                    self.token_mismatch += doc.mismatch;
                    len = len.saturating_add(prompt_len(NAME, doc)?);
                }
                let documents: Vec<String> = batch.iter().map(|d| d.text.clone()).collect();
                let prompt = if self.reranker {
                    Prompt::Rerank(RerankInput {
                        query: self.query.clone(),
                        documents,
                    })
                } else {
                    let mut texts = Vec::with_capacity(documents.len() + 1);
                    texts.push(self.query.clone());
                    texts.extend(documents);
                    Prompt::Texts(texts)
                };
                let mut spec = RequestSpec::text(String::new(), len, 0);
                spec.prompt = prompt;
                Ok(spec)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::synthetic::toy::Toy;

    fn drain(n: usize, p: &Params, max: usize) -> Vec<RequestSpec> {
        let tok = Toy { bos: false };
        let mut sampler = Sampler::new(&tok, Generator::new(5), n, p).unwrap();
        let size = sampler.size();
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&tok, max).unwrap();
            assert!(got.len() <= max);
            if got.is_empty() {
                break;
            }
            all.extend(got);
        }
        assert_eq!(all.len(), size);
        all
    }

    fn len(tok: &Toy, text: &str) -> u32 {
        tok.encode(text, false).unwrap().len() as u32
    }

    #[test]
    fn reranker_requests_pair_one_query_with_batches_of_documents() {
        let tok = Toy { bos: false };
        let p = Params {
            input_len: 24,
            input_range_ratio: 0.5,
            batch_size: 3,
            ..Params::default()
        };
        let all = drain(7, &p, 100);
        // 7 documents in requests of 3, 3 and 1, whatever the host's batch size.
        assert_eq!(all.len(), 3);
        assert_eq!(format!("{:?}", drain(7, &p, 1)), format!("{all:?}"));
        let mut queries = Vec::new();
        for (spec, want_docs) in all.iter().zip([3, 3, 1]) {
            let Prompt::Rerank(r) = &spec.prompt else {
                panic!("expected a rerank input, got {:?}", spec.prompt);
            };
            assert_eq!(r.documents.len(), want_docs);
            queries.push(r.query.clone());
            // vLLM's count: (query + a separator) per document, plus the documents.
            let docs: u32 = r.documents.iter().map(|d| len(&tok, d)).sum();
            assert_eq!(
                spec.prompt_len,
                (len(&tok, &r.query) + 1) * want_docs as u32 + docs
            );
            assert_eq!(spec.expected_output_len, 0);
            // The query takes about half of input-len less the separator (11, +-50%).
            assert!((5..=17).contains(&len(&tok, &r.query)), "{r:?}");
        }
        assert!(queries.windows(2).all(|w| w[0] == w[1]), "one query");
    }

    #[test]
    fn without_reranker_the_query_is_the_first_text_of_each_batch() {
        let tok = Toy { bos: false };
        let p = Params {
            input_len: 10,
            batch_size: 4,
            reranker: false,
            ..Params::default()
        };
        // 9 prompts: the query and 8 documents, in requests of the query + 3 documents.
        let all = drain(9, &p, 2);
        assert_eq!(all.len(), 3);
        for (spec, docs) in all.iter().zip([3, 3, 2]) {
            let Prompt::Texts(texts) = &spec.prompt else {
                panic!("expected texts, got {:?}", spec.prompt);
            };
            assert_eq!(texts.len(), docs + 1);
            let total: u32 = texts.iter().map(|t| len(&tok, t)).sum();
            assert_eq!(spec.prompt_len, total, "the query counted once");
            assert!(texts.iter().all(|t| len(&tok, t) == 10), "fixed lengths");
        }
        let err = Sampler::new(&tok, Generator::new(0), 1, &p).err().unwrap();
        assert!(
            matches!(&err, PluginError::InvalidConfig(m) if m.contains("at least 2")),
            "{err}"
        );
    }
}
