//! What the tokens cost (`--cost-per-hour`): the deployment's price per hour turned into
//! the run's cost and its prices per million tokens and per request (not in vLLM's
//! result).
//!
//! The run's cost is the price times the measured run's duration (the result's
//! `duration`, first send to last response): what the deployment cost while it served
//! the benchmark. Each price below divides that whole cost by one kind of unit, as
//! genai-bench and similar tools price a deployment's tokens: per million output tokens
//! is the whole cost over the output tokens, per million input tokens the whole cost over
//! the input tokens, and so on. Each attributes all of the cost to its own unit, so they
//! are not additive: the input price plus the output price is not the price of a token,
//! and a server's per-token list prices, which split the cost between input and output,
//! are not what these are.
//!
//! A price whose denominator is 0 (no output tokens, no completed request) is `None`, not
//! an infinity. A price of 0 gives costs of 0: a deployment one does not pay for by the
//! hour still gets its keys, all 0.

use anyhow::{Result, ensure};

/// Tokens per million, the unit of the per-token prices.
const MILLION: f64 = 1e6;

/// Seconds per hour, the unit of the price.
const SECONDS_PER_HOUR: f64 = 3600.0;

/// A run's cost at the deployment's price, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// The price given (`--cost-per-hour`), USD per hour.
    pub per_hour_usd: f64,
    /// The price times the run's duration: the run's whole cost.
    pub run_usd: f64,
    /// The whole cost per million input tokens; `None` without input tokens.
    pub per_million_input_tokens_usd: Option<f64>,
    /// The whole cost per million output tokens; `None` without output tokens.
    pub per_million_output_tokens_usd: Option<f64>,
    /// The whole cost per million tokens, input and output together; `None` without
    /// tokens.
    pub per_million_tokens_usd: Option<f64>,
    /// The whole cost per completed request; `None` when none completed.
    pub per_request_usd: Option<f64>,
}

/// What the cost is divided by: the run's totals, as its result reports them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTotals {
    /// The result's `duration` (seconds).
    pub duration_s: f64,
    /// `total_input_tokens`.
    pub input_tokens: u64,
    /// `total_output_tokens`.
    pub output_tokens: u64,
    /// `completed`.
    pub completed: usize,
}

/// Checks a price per hour: a number of US dollars, 0 or more. A negative, NaN or
/// infinite price would give costs that mean nothing, so it is refused before the run.
pub fn check_price(per_hour_usd: f64) -> Result<()> {
    ensure!(
        per_hour_usd.is_finite() && per_hour_usd >= 0.0,
        "--cost-per-hour must be a price in US dollars per hour, 0 or more, got {per_hour_usd}"
    );
    Ok(())
}

impl Cost {
    /// The cost of a run with `totals` at `per_hour_usd` (checked with [`check_price`]).
    pub fn of_run(per_hour_usd: f64, totals: RunTotals) -> Result<Cost> {
        check_price(per_hour_usd)?;
        let run_usd = per_hour_usd * totals.duration_s / SECONDS_PER_HOUR;
        let per = |units: u64| (units > 0).then(|| run_usd / units as f64);
        let per_million = |tokens: u64| per(tokens).map(|usd| usd * MILLION);
        Ok(Cost {
            per_hour_usd,
            run_usd,
            per_million_input_tokens_usd: per_million(totals.input_tokens),
            per_million_output_tokens_usd: per_million(totals.output_tokens),
            per_million_tokens_usd: per_million(totals.input_tokens + totals.output_tokens),
            per_request_usd: per(totals.completed as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(input_tokens: u64, output_tokens: u64, completed: usize) -> RunTotals {
        RunTotals {
            duration_s: 90.0,
            input_tokens,
            output_tokens,
            completed,
        }
    }

    #[test]
    fn cost_divides_the_runs_whole_cost_by_each_unit() {
        // $4/h for 90 s is $0.10, whatever it is divided by.
        let cost = Cost::of_run(4.0, totals(20_000, 5_000, 40)).unwrap();
        assert_eq!(cost.per_hour_usd, 4.0);
        assert!((cost.run_usd - 0.1).abs() < 1e-15, "{}", cost.run_usd);
        let close = |got: Option<f64>, want: f64| {
            let got = got.unwrap();
            assert!((got - want).abs() <= 1e-12 * want, "{got} != {want}");
        };
        close(cost.per_million_input_tokens_usd, 5.0);
        close(cost.per_million_output_tokens_usd, 20.0);
        close(cost.per_million_tokens_usd, 4.0);
        close(cost.per_request_usd, 0.0025);
        // Each takes the whole cost: they do not add up to the price of all tokens.
        let sum = cost.per_million_input_tokens_usd.unwrap()
            + cost.per_million_output_tokens_usd.unwrap();
        assert!(sum > cost.per_million_tokens_usd.unwrap());
    }

    #[test]
    fn cost_with_a_zero_denominator_is_none() {
        // A pooling run: input tokens only.
        let cost = Cost::of_run(4.0, totals(1_000, 0, 10)).unwrap();
        assert_eq!(cost.per_million_output_tokens_usd, None);
        assert!(cost.per_million_input_tokens_usd.is_some());
        assert!(cost.per_million_tokens_usd.is_some());
        // Nothing completed: no tokens, no requests.
        let cost = Cost::of_run(4.0, totals(0, 0, 0)).unwrap();
        assert_eq!(cost.per_million_input_tokens_usd, None);
        assert_eq!(cost.per_million_output_tokens_usd, None);
        assert_eq!(cost.per_million_tokens_usd, None);
        assert_eq!(cost.per_request_usd, None);
        // The run still cost its time.
        assert!(cost.run_usd > 0.0);
    }

    #[test]
    fn cost_at_a_price_of_zero_is_zero_not_none() {
        let cost = Cost::of_run(0.0, totals(20_000, 5_000, 40)).unwrap();
        assert_eq!(cost.run_usd, 0.0);
        assert_eq!(cost.per_million_input_tokens_usd, Some(0.0));
        assert_eq!(cost.per_million_output_tokens_usd, Some(0.0));
        assert_eq!(cost.per_million_tokens_usd, Some(0.0));
        assert_eq!(cost.per_request_usd, Some(0.0));
    }

    #[test]
    fn cost_refuses_a_price_that_is_not_a_number_of_dollars() {
        for bad in [-1.0, -0.01, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Cost::of_run(bad, totals(1, 1, 1)).unwrap_err().to_string();
            assert!(err.contains("--cost-per-hour"), "{err}");
        }
        assert!(check_price(0.0).is_ok());
        assert!(check_price(3.5).is_ok());
    }
}
