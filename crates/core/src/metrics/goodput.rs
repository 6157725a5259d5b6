//! Goodput: the rate of requests that met every service level objective (`--goodput`).
//!
//! Follows vLLM's `parse_goodput`/`check_goodput_args` (same accepted syntax, same error
//! messages) and its per-request test in `calculate_metrics`: a request is good when each
//! configured SLO, converted from milliseconds to seconds, is `>=` its TTFT, TPOT or E2EL.

use anyhow::{Result, bail};

use crate::pyjson::float_repr;

/// The SLO names vLLM accepts, in the order its error message lists them.
const VALID_NAMES: [&str; 3] = ["ttft", "tpot", "e2el"];

/// Service level objectives in milliseconds; `None` means not constrained.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Goodput {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

impl Goodput {
    /// True when no SLO was given: vLLM then reports `request_goodput: null` and prints no
    /// goodput line.
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2el_ms.is_none()
    }

    /// Whether one successful request (times in seconds) meets every configured SLO.
    /// `tpot` is 0 for requests with at most one output token, as in vLLM.
    pub fn is_good(&self, ttft: f64, tpot: f64, e2el: f64) -> bool {
        [
            (self.ttft_ms, ttft),
            (self.tpot_ms, tpot),
            (self.e2el_ms, e2el),
        ]
        .into_iter()
        .all(|(slo_ms, value)| slo_ms.is_none_or(|ms| ms / 1000.0 >= value))
    }
}

/// Parses `--goodput` pairs such as `["ttft:100", "tpot:50"]` (milliseconds).
///
/// Like vLLM, every pair is parsed before any is validated, a repeated name keeps its
/// last value, and the messages are vLLM's own.
pub fn parse_goodput(pairs: &[String]) -> Result<Goodput> {
    let mut parsed: Vec<(String, f64)> = Vec::new();
    for pair in pairs {
        let value = match pair.split(':').collect::<Vec<_>>().as_slice() {
            [name, value] => parse_python_float(value).map(|v| (name.to_string(), v)),
            _ => None,
        };
        let Some((name, value)) = value else {
            bail!(
                "Invalid format found for service level objectives. Specify service level \
                 objectives for goodput as \"KEY:VALUE\" pairs, where the key is a metric \
                 name, and the value is a number in milliseconds."
            );
        };
        match parsed.iter_mut().find(|(n, _)| *n == name) {
            Some(existing) => existing.1 = value,
            None => parsed.push((name, value)),
        }
    }
    let mut goodput = Goodput::default();
    for (name, value) in parsed {
        let slot = match name.as_str() {
            "ttft" => &mut goodput.ttft_ms,
            "tpot" => &mut goodput.tpot_ms,
            "e2el" => &mut goodput.e2el_ms,
            _ => bail!(
                "Invalid metric name found, {name}: {}. The service level objective name \
                 should be one of ['{}']. ",
                float_repr(value),
                VALID_NAMES.join("', '")
            ),
        };
        if value < 0.0 {
            bail!(
                "Invalid value found, {name}: {}. The service level objective value should be \
                 non-negative.",
                float_repr(value)
            );
        }
        *slot = Some(value);
    }
    Ok(goodput)
}

/// Python's `float(str)` for the forms users type: surrounding whitespace is ignored and
/// a single `_` may separate two digits.
fn parse_python_float(text: &str) -> Option<f64> {
    let bytes = text.trim().as_bytes();
    let underscores_ok = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'_'
            || (i > 0
                && bytes[i - 1].is_ascii_digit()
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
    });
    if !underscores_ok {
        return None;
    }
    text.trim().replace('_', "").parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_each_slo_in_milliseconds() {
        let g = parse_goodput(&pairs(&["ttft:1_00", "tpot:50.5", "e2el: 1e3 "])).unwrap();
        assert_eq!(g.ttft_ms, Some(100.0));
        assert_eq!(g.tpot_ms, Some(50.5));
        assert_eq!(g.e2el_ms, Some(1000.0));
        assert!(!g.is_empty());
        assert!(parse_goodput(&[]).unwrap().is_empty());
    }

    #[test]
    fn later_pair_overrides_earlier_one() {
        let g = parse_goodput(&pairs(&["ttft:100", "ttft:20"])).unwrap();
        assert_eq!(g.ttft_ms, Some(20.0));
    }

    #[test]
    fn rejects_bad_format_with_vllm_message() {
        for bad in [
            "ttft",
            "ttft:1:2",
            "ttft:abc",
            "ttft:",
            "ttft:1_",
            "ttft:1._5",
        ] {
            let err = parse_goodput(&pairs(&[bad])).unwrap_err().to_string();
            assert!(
                err.starts_with("Invalid format found for service level objectives."),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn rejects_unknown_name_and_negative_value_with_vllm_messages() {
        let err = parse_goodput(&pairs(&["itl:5"])).unwrap_err().to_string();
        assert_eq!(
            err,
            "Invalid metric name found, itl: 5.0. The service level objective name should \
             be one of ['ttft', 'tpot', 'e2el']. "
        );
        let err = parse_goodput(&pairs(&["tpot:-1.5"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "Invalid value found, tpot: -1.5. The service level objective value should be \
             non-negative."
        );
        // Format errors win over name errors because every pair is parsed first.
        let err = parse_goodput(&pairs(&["itl:5", "ttft"]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Invalid format found"), "{err}");
    }

    #[test]
    fn each_slo_is_an_inclusive_upper_bound_in_seconds() {
        let ttft = Goodput {
            ttft_ms: Some(100.0),
            ..Goodput::default()
        };
        assert!(ttft.is_good(0.1, 9.0, 9.0));
        assert!(!ttft.is_good(0.1001, 0.0, 0.0));

        let tpot = Goodput {
            tpot_ms: Some(20.0),
            ..Goodput::default()
        };
        assert!(tpot.is_good(9.0, 0.02, 9.0));
        assert!(!tpot.is_good(0.0, 0.021, 0.0));

        let e2el = Goodput {
            e2el_ms: Some(500.0),
            ..Goodput::default()
        };
        assert!(e2el.is_good(9.0, 9.0, 0.5));
        assert!(!e2el.is_good(0.0, 0.0, 0.51));

        let all = Goodput {
            ttft_ms: Some(100.0),
            tpot_ms: Some(20.0),
            e2el_ms: Some(500.0),
        };
        assert!(all.is_good(0.1, 0.02, 0.5));
        assert!(!all.is_good(0.1, 0.02, 0.6));
        assert!(Goodput::default().is_good(1e9, 1e9, 1e9));
    }
}
