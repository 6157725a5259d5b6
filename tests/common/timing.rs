//! Time bounds that a busy machine can break, told apart from bench's own slowness.
//!
//! A test with a wall-clock bound (a bad flag fails within 2 s, a stopped run ends within
//! its grace period) runs through [`within_bounds`]. When the bound is missed, the run is
//! repeated alone among the end-to-end tests ([`super::gate`]) while [`CpuWatch`] measures
//! how much of the machine's CPU other processes took meanwhile. A bound missed on a quiet machine fails
//! the test: that is bench. A bound missed while other processes kept the machine busy is
//! tried again, and after [`ATTEMPTS`] such misses the bound is skipped with a message;
//! every other check of the run still holds on every attempt.

use std::time::Instant;

use super::gate;
pub use super::skip::skipped;

/// How often a run is tried before a missed bound is put down to the machine.
pub const ATTEMPTS: usize = 3;

/// The share of the machine's CPU time that other processes must take during a run for a
/// missed bound to be theirs.
pub const BUSY: f64 = 0.25;

/// CPU time on this machine since [`CpuWatch::start`]: all of it, and what this process
/// and the children it has waited for took.
pub struct CpuWatch {
    machine: Option<(u64, u64)>,
    ours: Option<u64>,
    started: Instant,
}

impl CpuWatch {
    pub fn start() -> CpuWatch {
        CpuWatch {
            machine: machine_ticks(),
            ours: own_ticks(),
            started: Instant::now(),
        }
    }

    /// The share (0 to 1) of the machine's CPU time since the start that went to other
    /// processes than this one and the children it has waited for; `None` where `/proc`
    /// cannot tell, or the interval is too short to tell.
    pub fn others(&self) -> Option<f64> {
        let (busy0, all0) = self.machine?;
        let (busy1, all1) = machine_ticks()?;
        let ours = own_ticks()?.saturating_sub(self.ours?);
        let all = all1.saturating_sub(all0);
        // Ticks are 10 ms: a shorter interval than a quarter second on two cores says
        // nothing.
        if all < 50 {
            return None;
        }
        let others = busy1.saturating_sub(busy0).saturating_sub(ours);
        Some(others as f64 / all as f64)
    }

    /// A description of the interval for messages, with the share [`Self::others`] gave
    /// (read once, so that a message says the share that decided).
    pub fn describe(&self, others: Option<f64>) -> String {
        let took = self.started.elapsed();
        match others {
            Some(share) => format!(
                "other processes took {:.0}% of the machine's CPU over these {took:.1?}",
                share * 100.0
            ),
            None => format!("the machine's CPU use over these {took:.1?} is unknown"),
        }
    }
}

/// Busy and total CPU ticks of the whole machine (`/proc/stat`), all cores together.
fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = fields[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    Some((busy, busy + idle + iowait))
}

/// CPU ticks of this process and of the children it has waited for (`/proc/self/stat`:
/// utime, stime, cutime, cstime).
fn own_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which may itself hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 14 of the file is the 12th after the name (state is field 3).
    fields[11..15]
        .iter()
        .map(|f| f.parse::<u64>().ok())
        .sum::<Option<u64>>()
}

/// Runs `attempt` until it keeps its time bounds: it panics on any failure of bench's
/// behaviour and returns `Err(what was missed)` only when a wall-clock bound was missed.
/// See the module's documentation for when a miss fails the test, is tried again, or is
/// skipped with a message naming `what`.
#[track_caller]
pub fn within_bounds(what: &str, mut attempt: impl FnMut() -> Result<(), String>) {
    let mut alone = None;
    let mut load = String::new();
    for i in 1..=ATTEMPTS {
        let watch = CpuWatch::start();
        let Err(missed) = attempt() else {
            return;
        };
        let others = watch.others();
        let busy = others.is_some_and(|share| share >= BUSY);
        load = watch.describe(others);
        if alone.is_some() && !busy {
            panic!("{missed}\n({load}: not the machine's load)");
        }
        eprintln!(
            "attempt {i}/{ATTEMPTS} of {what}: {missed} ({load}); trying again{}",
            if alone.is_none() { " alone" } else { "" }
        );
        // The other end-to-end tests are other processes' load only once they wait.
        alone.get_or_insert_with(gate::exclusive);
    }
    // The last attempt's measured load is part of the line: `.ci/run` fails a skip for load
    // whose line does not show at least BUSY of the machine taken by others.
    skipped(format_args!(
        "{what}: the time bound was missed in {ATTEMPTS} attempts while other processes \
         kept the machine busy (last attempt: {load})"
    ));
}
