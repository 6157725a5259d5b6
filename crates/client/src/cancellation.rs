//! Requests the client cancels on purpose (`--request-cancellation-rate P
//! --request-cancellation-delay S`, AIPerf's flags): a user closing a tab, an agent's
//! timeout. Which requests is a seeded choice by workload index; how long after being sent
//! is the delay.
//!
//! The semantics are AIPerf's. The delay counts from when the request was fully written to
//! the socket, so the server always has the whole request, and the same delay cancels at
//! the same point of a request's life however long it waited for a connection or a
//! concurrency slot. A response that completes before the delay is not cancelled. A
//! cancelled request's connection is closed (the server sees the client go away), and its
//! record says `cancelled`: neither completed nor failed, kept out of the latency
//! statistics and counted on its own.

use std::time::Duration;

use rand::{Rng, SeedableRng};

/// Which requests the client cancels, and when.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cancellation {
    /// The share of requests cancelled, from 0 to 1 (the flag takes a percentage).
    pub fraction: f64,
    /// From the request fully sent to the connection closed.
    pub delay: Duration,
    /// The choice's seed (the run's `--seed`): the same seed cancels the same requests.
    pub seed: u64,
}

impl Cancellation {
    /// The delay after which request `index` (its place in the workload) is cancelled, or
    /// `None` when it runs to its end.
    ///
    /// Each index draws from a generator of its own, seeded from the run's seed and the
    /// index, so the choice does not depend on the order requests are sent in, on
    /// conversations' later turns, or on how a run is split into shards (`--shard`,
    /// `--workers`): every process picks the same requests.
    pub fn delay_for(&self, index: usize) -> Option<Duration> {
        if self.fraction <= 0.0 {
            return None;
        }
        // The golden ratio's odd constant spreads neighbouring indices over the seed space;
        // the generator's own seeding mixes them further.
        let key = self.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let draw: f64 = rand::rngs::StdRng::seed_from_u64(key).random();
        (draw < self.fraction).then_some(self.delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancellation(fraction: f64, seed: u64) -> Cancellation {
        Cancellation {
            fraction,
            delay: Duration::from_millis(250),
            seed,
        }
    }

    #[test]
    fn the_share_chosen_is_the_rate_and_the_seed_fixes_which() {
        let picked = |c: Cancellation| -> Vec<usize> {
            (0..20_000).filter(|&i| c.delay_for(i).is_some()).collect()
        };
        let a = picked(cancellation(0.25, 7));
        // 25% of 20,000 with a binomial spread of about 61: well inside 4.5 of them.
        assert!((a.len() as i64 - 5_000).abs() < 275, "{}", a.len());
        assert_eq!(a, picked(cancellation(0.25, 7)));
        assert_ne!(a, picked(cancellation(0.25, 8)));
        assert!(picked(cancellation(0.0, 7)).is_empty());
        assert_eq!(picked(cancellation(1.0, 7)).len(), 20_000);
        assert_eq!(
            cancellation(1.0, 7).delay_for(3),
            Some(Duration::from_millis(250))
        );
    }
}
