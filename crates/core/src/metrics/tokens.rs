//! Token accounting beyond vLLM's keys: the time to the first content token of reasoning
//! runs, ITL split among the tokens of a chunk (`--split-itl-by-tokens`), and whether the
//! server's token totals agree with the client's counts.
//!
//! vLLM 0.32's chat request function times reasoning deltas like content (its TTFT is the
//! first chunk with `choices`, reasoning or not) and leaves the reasoning text out of
//! `generated_text`, while the server's `usage.completion_tokens` counts the reasoning
//! tokens too. The shared keys keep exactly that; what follows is reported under keys of
//! its own.

use super::client::{ClientStats, PromptTokenCheck, TokenCountCheck};
use super::stats::Summary;
use crate::record::RequestRecord;

/// Totals that differ by more than this share of the server's total are reported as a
/// mismatch: a server and a client tokenizer that disagree by a token now and then (a
/// special token, a merge at a chunk boundary) stay below it, a different tokenizer or
/// chat template or a server that miscounts does not.
pub const MISMATCH_SHARE: f64 = 0.01;

/// A reasoning run's own numbers: present when any successful request streamed reasoning
/// text (`reasoning_content` or `reasoning` deltas).
#[derive(Debug, Clone, PartialEq)]
pub struct ReasoningStats {
    /// Successful requests with reasoning text.
    pub requests_with_reasoning: usize,
    /// Successful requests whose answer had no content text at all (reasoning only, cut
    /// by `max_tokens`): they have no time to the first content token and are left out of
    /// its statistics.
    pub requests_without_content: usize,
    /// The tokenizer's count of the reasoning texts of successful requests (each text on
    /// its own, as vLLM counts a generated text); `None` without a tokenizer.
    pub reasoning_tokens: Option<u64>,
    /// Time to the first content token, over successful requests that had content, in
    /// milliseconds like TTFT's (`mean_ttfc_ms`, ...).
    pub ttfc: Summary,
}

/// The reasoning statistics of `ordered`'s successful generation records, or `None` when
/// none had reasoning text. `reasoning_tokens` is the caller's count (it tokenizes the
/// texts once, for the output-count check as well).
pub fn reasoning(
    ordered: &[RequestRecord],
    reasoning_tokens: Option<u64>,
    percentiles: &[f64],
) -> Option<ReasoningStats> {
    let successful = || {
        ordered
            .iter()
            .filter(|r| r.succeeded() && r.pooled_results.is_none())
    };
    let requests_with_reasoning = successful()
        .filter(|r| !r.reasoning_text.is_empty())
        .count();
    if requests_with_reasoning == 0 {
        return None;
    }
    let ttfcs: Vec<f64> = successful().filter_map(|r| r.ttfc).collect();
    Some(ReasoningStats {
        requests_with_reasoning,
        requests_without_content: successful().filter(|r| r.ttfc.is_none()).count(),
        reasoning_tokens,
        ttfc: Summary::of_seconds(ttfcs, percentiles),
    })
}

/// One request's ITL with each chunk's gap split evenly among the tokens the chunk
/// carried (`chunk_tokens`, one count per chunk, so one more than `itl`): a chunk of `n`
/// tokens after a gap `g` gives `n` gaps of `g / n`, and the first chunk's tokens after
/// its first arrived with it (gaps of 0). A chunk that says it carries no token keeps its
/// gap as one entry, as vLLM counts it, so the gaps still add up to `latency - ttft`.
/// With one token in every chunk this is the ITL itself, and with `N` tokens in all and
/// at least one per chunk it has `N - 1` entries.
///
/// `None` when the counts do not fit the gaps (none known, or a count per chunk missing).
pub fn split_itl(itl: &[f64], chunk_tokens: &[u32]) -> Option<Vec<f64>> {
    let (&first, rest) = chunk_tokens.split_first()?;
    if rest.len() != itl.len() {
        return None;
    }
    let entries = |n: u32| n.max(1) as usize;
    let total = entries(first) - 1 + rest.iter().map(|&n| entries(n)).sum::<usize>();
    let mut split = Vec::with_capacity(total);
    split.resize(entries(first) - 1, 0.0);
    for (&gap, &n) in itl.iter().zip(rest) {
        let n = entries(n);
        split.extend(std::iter::repeat_n(gap / n as f64, n));
    }
    Some(split)
}

/// `100 * |server - client| / server`: how far a client count is from the server's, in
/// percent of the server's (0 when both are 0).
pub fn difference_pct(server: u64, client: u64) -> f64 {
    if server == 0 && client == 0 {
        return 0.0;
    }
    100.0 * server.abs_diff(client) as f64 / server.max(1) as f64
}

/// Whether the totals differ by more than [`MISMATCH_SHARE`] of the server's.
pub fn totals_differ(server: u64, client: u64) -> bool {
    difference_pct(server, client) > 100.0 * MISMATCH_SHARE
}

impl TokenCountCheck {
    /// The server's output-token total against the tokenizer's, when they differ by more
    /// than [`MISMATCH_SHARE`]: `(server, tokenizer, percent)`.
    pub fn totals_mismatch(&self) -> Option<(u64, u64, f64)> {
        totals_differ(self.server_tokens, self.tokenizer_tokens).then(|| {
            (
                self.server_tokens,
                self.tokenizer_tokens,
                difference_pct(self.server_tokens, self.tokenizer_tokens),
            )
        })
    }
}

impl PromptTokenCheck {
    /// The server's prompt-token total against the dataset's, when they differ by more
    /// than [`MISMATCH_SHARE`]: `(server, dataset, percent)`.
    pub fn totals_mismatch(&self) -> Option<(u64, u64, f64)> {
        totals_differ(self.server_tokens, self.dataset_tokens).then(|| {
            (
                self.server_tokens,
                self.dataset_tokens,
                difference_pct(self.server_tokens, self.dataset_tokens),
            )
        })
    }
}

/// What the token-count checks have to say, as `(warnings, notes)`, output tokens first.
///
/// Totals that differ by more than [`MISMATCH_SHARE`] are not all a problem. A server's
/// `completion_tokens` counts the tokens it generated, and re-tokenising the text they
/// decode to need not give them back even with the server's own tokenizer: special
/// tokens (an EOS generated under `--ignore-eos`) leave no text, and tokens re-merge
/// across their boundaries. What tells that apart from a `--tokenizer` that is not the
/// server's is the prompts: when every request's server prompt count differs from the
/// dataset's by the same number of tokens (0, or a chat template's or BOS token's
/// constant), the two tokenizers count the same text the same way, and an output
/// difference is the server's counting, worth a note. When the prompt differences vary
/// the tokenizer is not the server's, and that is a warning; without the server's prompt
/// counts there is no telling, and the warning says both.
pub fn mismatch_notes(client: &ClientStats) -> (Vec<String>, Vec<String>) {
    let (mut warnings, mut notes) = (Vec::new(), Vec::new());
    let share = 100.0 * MISMATCH_SHARE;
    // Prompts counted alike on at least two requests: one request is trivially constant.
    let same_tokenizer = client
        .prompt_tokens
        .filter(|check| check.requests_with_usage >= 2)
        .and_then(|check| check.constant_offset.map(|offset| (check, offset)));
    if let Some(check) = client
        .token_counts
        .filter(|check| check.mismatched_requests > 0)
    {
        let TokenCountCheck {
            requests_with_usage,
            server_tokens: server,
            tokenizer_tokens: tokenizer,
            mismatched_requests,
        } = check;
        let pct = difference_pct(server, tokenizer);
        let head = format!(
            "{mismatched_requests} of {requests_with_usage} requests reported a \
             usage.completion_tokens that differs from the tokenizer's count of their text \
             (reasoning included): {server} tokens by the server, {tokenizer} by the \
             tokenizer, {pct:.2}% apart; the server's counts are used"
        );
        let within = if check.totals_mismatch().is_none() {
            format!(" (within {share}% in all)")
        } else {
            String::new()
        };
        match (same_tokenizer, client.prompt_tokens) {
            // A few tokens in all: one note, whatever the cause.
            _ if !within.is_empty() => notes.push(format!("{head}{within}")),
            (Some(_), _) => notes.push(format!(
                "{head}. Expected: the server counts the tokens it generated, and \
                 re-tokenising their text does not give all of them back (special tokens \
                 such as an EOS under --ignore-eos leave no text; tokens re-merge). The \
                 prompts' counts agree with the server's, so --tokenizer counts as the \
                 server does; output lengths follow vLLM's rule (the server's usage where \
                 vLLM's client reads it)"
            )),
            (None, Some(prompts)) => warnings.push(format!(
                "{head}; the prompts' counts differ from the server's by varying amounts \
                 too ({} of {} requests): the server does not count as --tokenizer does \
                 (check that --tokenizer is the server's)",
                prompts.mismatched_requests, prompts.requests_with_usage
            )),
            (None, None) => warnings.push(format!(
                "{head}. The server sent no prompt counts to tell why: either --tokenizer \
                 is not the server's, or re-tokenising the generated text does not give the \
                 server's tokens back (special tokens such as an EOS under --ignore-eos \
                 leave no text)"
            )),
        }
    }
    if let Some(prompts) = client.prompt_tokens
        && let Some((server, dataset, pct)) = prompts.totals_mismatch()
    {
        let head = format!(
            "input token totals differ by {pct:.2}% (more than {share}%): the server's usage \
             says {server}, the dataset counted {dataset} for the same requests"
        );
        match same_tokenizer {
            Some((_, offset)) => notes.push(format!(
                "{head}, {offset:+} tokens on every request: the tokens the server adds to \
                 each prompt (a chat template, a BOS token)"
            )),
            None => warnings.push(format!(
                "{head} (the server counts with its own tokenizer and chat template; the \
                 difference varies from request to request, which a template alone does \
                 not explain: check that --tokenizer is the server's)"
            )),
        }
    }
    (warnings, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunks_gap_is_split_among_its_tokens() {
        // Chunks of 2, 3, 1 and 4 tokens: the first chunk's second token came with it.
        let split = split_itl(&[0.75, 0.5, 1.0], &[2, 3, 1, 4]).unwrap();
        assert_eq!(
            split,
            vec![0.0, 0.25, 0.25, 0.25, 0.5, 0.25, 0.25, 0.25, 0.25]
        );
        // N tokens, N - 1 gaps, adding up to the chunk gaps.
        assert_eq!(split.len(), 2 + 3 + 1 + 4 - 1);
        assert_eq!(split.iter().sum::<f64>(), 2.25);
        // One token per chunk is vLLM's ITL.
        assert_eq!(
            split_itl(&[0.5, 0.25], &[1, 1, 1]).unwrap(),
            vec![0.5, 0.25]
        );
        // A chunk without a token (a role-only delta) keeps its gap whole.
        assert_eq!(
            split_itl(&[0.5, 0.25], &[0, 0, 2]).unwrap(),
            vec![0.5, 0.125, 0.125]
        );
        // Counts that do not fit the gaps are not used.
        assert_eq!(split_itl(&[0.5], &[]), None);
        assert_eq!(split_itl(&[0.5], &[1, 1, 1]), None);
        assert_eq!(split_itl(&[], &[3]).unwrap(), vec![0.0, 0.0]);
    }

    #[test]
    fn totals_differ_beyond_one_percent_of_the_servers() {
        assert!(!totals_differ(1000, 1010));
        assert!(!totals_differ(1000, 990));
        assert!(totals_differ(1000, 1011));
        assert!(totals_differ(1000, 989));
        assert!(!totals_differ(0, 0));
        assert!(totals_differ(0, 3));
        assert!((difference_pct(200, 150) - 25.0).abs() < 1e-12);
    }
}
