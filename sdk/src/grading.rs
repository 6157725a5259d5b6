//! Graders: reading the answer out of a model's text, for datasets that know their right
//! answers ([`crate::Dataset::grade`]). Each says whose rule it follows, so that an accuracy
//! bench reports is the accuracy the reference tool would report for the same texts.

use crate::Verdict;

impl Verdict {
    /// The verdict of a grader that tells right from wrong: score 1 or 0, and what it read.
    pub fn exact(correct: bool, extracted: Option<String>) -> Verdict {
        Verdict {
            correct,
            score: if correct { 1.0 } else { 0.0 },
            extracted,
        }
    }
}

/// The final number of a text, as vLLM's GSM8K evaluation (`tests/evals/gsm8k`) and
/// SGLang's (`benchmark/gsm8k`) read it with `get_answer_value`: commas removed, the last
/// run of digits (`\d+`), then Python's `ast.literal_eval`. None where they find no number
/// or `literal_eval` refuses it: a run with a leading zero ("007"; "0" and "00" are 0) or
/// with a digit other than 0 to 9 (Python's `\d` takes every Unicode decimal digit, its
/// integer literals only ASCII ones). The number comes back in its canonical decimal form,
/// so two answers are the same number exactly when the strings are equal, however long
/// they are (Python's integers have no limit either). A minus sign is not part of it, as
/// `\d+` does not take one: vLLM compares magnitudes, and so does this.
pub fn final_number(text: &str) -> Option<String> {
    // The last run of decimal digits, commas skipped inside it as `replace(",", "")`
    // joins "1,000" into one run.
    let mut run_end = None;
    let mut run_start = 0;
    for (at, c) in text.char_indices().rev() {
        if c == ',' {
            continue;
        }
        if is_decimal_digit(c) {
            if run_end.is_none() {
                run_end = Some(at + c.len_utf8());
            }
            run_start = at;
        } else if run_end.is_some() {
            break;
        }
    }
    let end = run_end?;
    let run: String = text[run_start..end].chars().filter(|&c| c != ',').collect();
    if !run.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = run.trim_start_matches('0');
    if trimmed.is_empty() {
        Some("0".to_owned())
    } else if trimmed.len() != run.len() {
        // `ast.literal_eval("007")`: leading zeros in a decimal literal are a SyntaxError.
        None
    } else {
        Some(run)
    }
}

/// Whether `c` is what Python's `\d` matches in a text pattern: a Unicode decimal digit
/// (category Nd). ASCII digits are the case that matters; the others are recognised as
/// digits so that, as in Python, they join a run and make it invalid rather than split it.
fn is_decimal_digit(c: char) -> bool {
    // Nd digits come in blocks of ten. ASCII is the case that matters; these are the
    // other blocks of the Basic Multilingual Plane a model's text plausibly holds (Arabic,
    // Extended Arabic, NKo, Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Thai,
    // Lao, fullwidth). `char::is_numeric` would also take fractions and numerals (No, Nl),
    // which Python's `\d` does not.
    const ND_STARTS: [u32; 12] = [
        0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0E50, 0x0ED0,
        0xFF10,
    ];
    let code = c as u32;
    c.is_ascii_digit()
        || ND_STARTS
            .iter()
            .any(|&start| (start..start + 10).contains(&code))
}

/// Grades a GSM8K answer: right when [`final_number`] of `output` is `reference` (a number
/// in canonical form, as [`final_number`] of the problem's worked solution gives it).
pub fn grade_final_number(reference: &str, output: &str) -> Verdict {
    let extracted = final_number(output);
    Verdict::exact(extracted.as_deref() == Some(reference), extracted)
}

/// The letter a multiple-choice answer names, among the first `choices` letters (`A`, `B`,
/// ...). The rule, in order:
/// 1. the last "answer" (any case), then optionally "is" and a colon, then optionally `(`
///    or `**`, then one of the letters not followed by a letter or digit ("Answer: B",
///    "the answer is (C)", "**Answer:** D"): the form the prompt asks for, and what
///    OpenAI's simple-evals reads (`Answer\s*:\s*([A-D])`);
/// 2. otherwise a text that begins with one of the letters not followed by a letter or
///    digit (" B", "C. 42", "(A)"): what a completion of a prompt ending in "Answer:"
///    gives.
///
/// None when neither finds a letter (an invalid answer, graded wrong).
pub fn choice_letter(text: &str, choices: usize) -> Option<char> {
    let valid = |c: char| c.is_ascii_uppercase() && ((c as u8 - b'A') as usize) < choices;
    let lower = text.to_ascii_lowercase();
    // 1. After the last "answer" that names a letter.
    let mut from = lower.len();
    while let Some(at) = lower[..from].rfind("answer") {
        if let Some(letter) = letter_at(&text[at + "answer".len()..], &valid, true) {
            return Some(letter);
        }
        from = at;
    }
    // 2. At the start.
    letter_at(text, &valid, false)
}

/// The letter at the start of `rest` (after whitespace; after "is" and a colon when
/// `after_answer`; after `(` or `**`), if a valid one stands alone there.
fn letter_at(rest: &str, valid: &dyn Fn(char) -> bool, after_answer: bool) -> Option<char> {
    let mut rest = rest.trim_start();
    if after_answer {
        rest = rest.strip_prefix("**").unwrap_or(rest).trim_start();
        if let Some(after) = rest.strip_prefix("is") {
            rest = after.trim_start();
        }
        rest = rest.strip_prefix(':').unwrap_or(rest).trim_start();
        rest = rest.strip_prefix("**").unwrap_or(rest).trim_start();
    }
    rest = rest
        .strip_prefix('(')
        .or_else(|| rest.strip_prefix("**"))
        .unwrap_or(rest);
    let mut chars = rest.chars();
    let letter = chars.next().filter(|&c| valid(c))?;
    match chars.next() {
        Some(next) if next.is_alphanumeric() => None,
        _ => Some(letter),
    }
}

/// Grades a multiple-choice answer: right when [`choice_letter`] of `output` is the letter
/// `reference` names (`"B"`); `choices` is how many the question had.
pub fn grade_choice(reference: &str, output: &str, choices: usize) -> Verdict {
    let extracted = choice_letter(output, choices);
    let correct = extracted.is_some_and(|c| reference.len() == 1 && reference.starts_with(c));
    Verdict::exact(correct, extracted.map(String::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict's fields (the generated type has no `PartialEq`).
    fn view(v: &Verdict) -> (bool, f64, Option<&str>) {
        (v.correct, v.score, v.extracted.as_deref())
    }

    #[test]
    fn the_final_number_is_read_as_vllm_reads_it() {
        // A GSM8K solution: the label is the number after "####".
        let solution = "She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18";
        assert_eq!(final_number(solution).as_deref(), Some("18"));
        // Commas go before the digits are read: "1,000" is 1000, "3,4" is 34.
        assert_eq!(final_number("#### 1,000").as_deref(), Some("1000"));
        assert_eq!(final_number("3,4").as_deref(), Some("34"));
        // The last number wins, whatever comes after it.
        assert_eq!(final_number("5 apples and 7 pears.").as_deref(), Some("7"));
        // A decimal's last run: "2.50" reads as 50, as `\d+` does.
        assert_eq!(final_number("$2.50").as_deref(), Some("50"));
        // No sign: `\d+` takes none.
        assert_eq!(final_number("-12").as_deref(), Some("12"));
        // literal_eval's rules for leading zeros.
        assert_eq!(final_number("007"), None);
        assert_eq!(final_number("00").as_deref(), Some("0"));
        assert_eq!(final_number("0").as_deref(), Some("0"));
        // Nothing to read.
        assert_eq!(final_number("no idea"), None);
        assert_eq!(final_number(""), None);
        // A non-ASCII decimal digit joins the run and makes it invalid, as in Python;
        // fractions (No) are not digits at all.
        assert_eq!(final_number("12\u{0663}"), None);
        assert_eq!(final_number("12\u{00BD}").as_deref(), Some("12"));
        // As long as Python's integers.
        let long = "123456789012345678901234567890";
        assert_eq!(final_number(long).as_deref(), Some(long));
    }

    #[test]
    fn final_number_grades() {
        let right = grade_final_number("18", "So the answer is 18.\n\nQuestion");
        assert_eq!(view(&right), (true, 1.0, Some("18")));
        let wrong = grade_final_number("18", "#### 19");
        assert_eq!(view(&wrong), (false, 0.0, Some("19")));
        let invalid = grade_final_number("18", "I do not know.");
        assert_eq!(view(&invalid), (false, 0.0, None));
    }

    #[test]
    fn choice_letters_are_read_after_answer_or_at_the_start() {
        assert_eq!(choice_letter("Answer: B", 4), Some('B'));
        assert_eq!(
            choice_letter("Let me think. A is wrong.\nAnswer: C", 4),
            Some('C')
        );
        assert_eq!(choice_letter("The answer is (D).", 4), Some('D'));
        assert_eq!(choice_letter("**Answer:** A", 4), Some('A'));
        assert_eq!(choice_letter(" B", 4), Some('B'));
        assert_eq!(choice_letter("C. 42", 4), Some('C'));
        assert_eq!(choice_letter("(A) because", 4), Some('A'));
        // The last "answer" that names a letter wins.
        assert_eq!(
            choice_letter("answer: A? No. Final answer: D", 4),
            Some('D')
        );
        // A letter past the choices, a word, or nothing: no answer.
        assert_eq!(choice_letter("Answer: E", 4), None);
        assert_eq!(choice_letter("Because it is", 4), None);
        assert_eq!(choice_letter("Answer: Bob", 4), None);
        assert_eq!(choice_letter("", 4), None);
    }

    #[test]
    fn choices_grade() {
        assert!(grade_choice("B", "Answer: B", 4).correct);
        assert!(!grade_choice("B", "Answer: C", 4).correct);
        let none = grade_choice("B", "no letter here", 4);
        assert_eq!(view(&none), (false, 0.0, None));
    }
}
