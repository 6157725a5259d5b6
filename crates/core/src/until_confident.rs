//! `--until-confident FIGURE:REL`: keep sending until the 95% confidence interval of a
//! figure (`p99_ttft`, `mean_tpot`, `median_e2el`, ...) lies within REL of the figure,
//! then stop, as MLPerf LoadGen's early stopping and AIPerf's convergence mode end a run
//! once it has measured enough, instead of after a number of requests picked in advance.
//!
//! [`watch`] looks at the run's live figures every [`LOOK_EVERY`]; once every goal is met
//! ([`crate::metrics::goals`]) it stops the run with a [`StopReason::Goal`]: no more
//! requests are sent, those in flight finish, and the run counts as complete, not
//! interrupted. `--num-prompts` is the most it sends, and the maximum duration ends it if
//! the goals are not met by then.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::live::LiveStats;
use crate::client::stop::{StopReason, StopSignal};
use crate::metrics::goals::{Ended, Goal, UntilConfident};

/// How often the live figures are looked at.
pub const LOOK_EVERY: Duration = Duration::from_millis(200);

/// Looks at `live` every [`LOOK_EVERY`] on the current tokio runtime until every goal is
/// met or `max_duration` has passed, then stops the run with a [`StopReason::Goal`]
/// saying which. Ends quietly when something else stops the run first.
pub fn watch(
    config: UntilConfident,
    live: Arc<LiveStats>,
    stop: Arc<StopSignal>,
) -> tokio::task::JoinHandle<Ended> {
    let start = Instant::now();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.stopped() => return Ended::Workload,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            let snapshot = live.snapshot();
            let met = config.goals.iter().all(|goal| {
                goal.live(&snapshot)
                    .is_some_and(|(estimate, interval)| interval.within(estimate, goal.rel))
            });
            if met {
                let goals: Vec<String> = config.goals.iter().map(Goal::to_string).collect();
                stop.stop(StopReason::Goal(format!(
                    "--until-confident: {} after {} requests",
                    goals.join(", "),
                    snapshot.completed
                )));
                return Ended::Confident;
            }
            if start.elapsed() >= config.max_duration {
                stop.stop(StopReason::Goal(format!(
                    "--until-confident: the maximum duration of {:.0} s passed first",
                    config.max_duration.as_secs_f64()
                )));
                return Ended::MaxDuration;
            }
        }
    })
}
