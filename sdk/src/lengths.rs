//! vLLM's `is_valid_sequence`: the length filter its file datasets (ShareGPT, the
//! Hugging Face conversations, AIMO, MLPerf) apply to a prompt and its reference output.

/// The limits of [`is_valid_sequence`]; [`Limits::default`] is vLLM's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The fewest tokens a prompt (and, unless skipped, an output) may have.
    pub min_len: usize,
    pub max_prompt_len: usize,
    /// Prompt and output together.
    pub max_total_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_len: 4,
            max_prompt_len: 1024,
            max_total_len: 2048,
        }
    }
}

/// Whether vLLM keeps a prompt of `prompt_len` tokens with `output_len` output tokens;
/// `skip_min_output_len_check` lifts the output's minimum (vLLM does when the output
/// length was given rather than measured).
pub fn is_valid_sequence(
    prompt_len: usize,
    output_len: usize,
    limits: Limits,
    skip_min_output_len_check: bool,
) -> bool {
    !(prompt_len < limits.min_len
        || (!skip_min_output_len_check && output_len < limits.min_len)
        || prompt_len > limits.max_prompt_len
        || prompt_len + output_len > limits.max_total_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllms_rules() {
        let d = Limits::default();
        assert!(is_valid_sequence(4, 4, d, false));
        assert!(!is_valid_sequence(3, 100, d, false));
        assert!(!is_valid_sequence(100, 3, d, false));
        assert!(is_valid_sequence(100, 3, d, true));
        assert!(!is_valid_sequence(3, 100, d, true));
        assert!(is_valid_sequence(1024, 1024, d, false));
        assert!(!is_valid_sequence(1025, 10, d, false));
        assert!(!is_valid_sequence(1000, 1049, d, false));
        let aimo = Limits {
            max_prompt_len: 2048,
            max_total_len: 32000,
            ..d
        };
        assert!(is_valid_sequence(2000, 20000, aimo, false));
        assert!(!is_valid_sequence(2049, 10, aimo, false));
    }
}
