//! CPU time of the client itself, so a result can say how busy the load generator was
//! and what share of that went to the backend plugin's decoding; and the monotonic clock
//! that vLLM's timestamps are read from.

use std::time::Duration;

/// The client's CPU time during the run, from the first release to the last record
/// decoded: what the load generator cost, and how much of it was the backend plugin.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ClientCpu {
    /// All threads of the process.
    pub total_s: f64,
    /// The decode thread (plugin calls and record building).
    pub decode_s: f64,
}

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clock ids exist on every Linux.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time used by the calling thread so far.
pub fn thread() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time used by the whole process (all threads) so far.
pub fn process() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`): what Python's `time.perf_counter()`
/// reads on Linux, and so the clock of vLLM's `start_times`.
pub fn monotonic() -> Duration {
    clock(libc::CLOCK_MONOTONIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_in_thread_and_process_time_but_sleep_does_not() {
        // The process clock is read before the thread clock at the start and after it at
        // the end, so that its interval holds the thread's: with no other thread busy (a
        // test alone in its process, as under cargo-nextest) the two deltas differ only by
        // the order of the reads.
        let (p0, t0) = (process(), thread());
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            thread() - t0 < Duration::from_millis(20),
            "sleeping is not CPU"
        );
        // Busy until the thread clock shows 40 ms (however loaded the machine is); a clock
        // that never moves fails on the wall-clock limit.
        let spin = std::time::Instant::now();
        while thread() - t0 < Duration::from_millis(40) {
            assert!(
                spin.elapsed() < Duration::from_secs(20),
                "thread time stuck"
            );
            std::hint::spin_loop();
        }
        let t = thread() - t0;
        let p = process() - p0;
        assert!(p >= t, "the process includes the thread: {p:?} < {t:?}");
    }
}
