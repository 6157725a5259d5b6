//! A run-wide request to stop: raised by Ctrl-C/SIGTERM or by a part of the run that
//! cannot go on (a backend plugin that keeps faulting). The load generator stops
//! releasing requests once it is raised and keeps every result measured so far.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use tokio::sync::Notify;

/// A signal that stops a run. The library installs no handler: the caller (the CLI)
/// catches the signal and raises the run's [`StopSignal`] with it, so that the outcome
/// says which one it was and the process can exit as shells expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }

    /// 128 + the signal number, as a shell reports a process the signal ended.
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 128 + 2,
            Signal::Terminate => 128 + 15,
        }
    }
}

/// Why a run was stopped. Typed because callers branch on it: a signal decides the
/// process's exit code; anything else is a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The user asked (Ctrl-C, SIGTERM).
    Signal(Signal),
    /// A part of the run that cannot go on (a backend plugin that keeps faulting), or
    /// a caller's own reason.
    Other(String),
    /// The run's own stopping rule was met (`--until-confident`, its maximum duration):
    /// the run is complete, not interrupted, and requests in flight finish unhurried.
    Goal(String),
}

impl StopReason {
    /// The signal, when one stopped the run.
    pub fn signal(&self) -> Option<Signal> {
        match self {
            StopReason::Signal(signal) => Some(*signal),
            StopReason::Other(_) | StopReason::Goal(_) => None,
        }
    }

    /// Whether the run's own stopping rule ended it (not an interruption).
    pub fn is_goal(&self) -> bool {
        matches!(self, StopReason::Goal(_))
    }
}

/// `SIGINT received`, or the message: the result's `interrupt_reason`.
impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Signal(signal) => write!(f, "{} received", signal.name()),
            StopReason::Other(message) | StopReason::Goal(message) => f.write_str(message),
        }
    }
}

impl From<Signal> for StopReason {
    fn from(signal: Signal) -> Self {
        StopReason::Signal(signal)
    }
}

impl From<String> for StopReason {
    fn from(message: String) -> Self {
        StopReason::Other(message)
    }
}

impl From<&str> for StopReason {
    fn from(message: &str) -> Self {
        StopReason::Other(message.to_owned())
    }
}

#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    reason: Mutex<Option<StopReason>>,
    /// The first signal received, also when another reason stopped the run first: the
    /// process still owes the shell that signal's exit code.
    signal: OnceLock<Signal>,
    notify: Notify,
}

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal; the first reason given is kept.
    pub fn stop(&self, reason: impl Into<StopReason>) {
        let reason = reason.into();
        if let Some(signal) = reason.signal() {
            let _ = self.signal.set(signal);
        }
        {
            let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
            if r.is_none() {
                *r = Some(reason);
            }
        }
        self.stopped.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Why the run was stopped, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The first signal that raised it, whatever the reason kept.
    pub fn signal(&self) -> Option<Signal> {
        self.signal.get().copied()
    }

    /// Completes once a signal (Ctrl-C, SIGTERM) has raised it, whatever stopped the run
    /// first.
    pub async fn signalled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.signal().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// Completes once the signal is raised.
    pub async fn stopped(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_first_reason_and_wakes_waiters() {
        let s = std::sync::Arc::new(StopSignal::new());
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.stopped().await }
        });
        assert!(!s.is_stopped());
        s.stop(Signal::Interrupt);
        s.stop("later");
        waiter.await.unwrap();
        assert!(s.is_stopped());
        let reason = s.reason().unwrap();
        assert_eq!(reason, StopReason::Signal(Signal::Interrupt));
        assert_eq!(reason.to_string(), "SIGINT received");
        assert_eq!(s.signal().map(Signal::exit_code), Some(130));
    }

    #[tokio::test]
    async fn a_goal_is_no_interruption_and_a_later_signal_still_wakes() {
        let s = std::sync::Arc::new(StopSignal::new());
        s.stop(StopReason::Goal("p99_ttft_ms within 5%".into()));
        assert!(s.reason().unwrap().is_goal());
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.signalled().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        s.stop(Signal::Interrupt);
        waiter.await.unwrap();
        assert!(s.reason().unwrap().is_goal());
        assert_eq!(s.signal(), Some(Signal::Interrupt));
    }

    #[test]
    fn a_signal_after_another_reason_is_still_recorded() {
        let s = StopSignal::new();
        s.stop("backend plugin 'x' faulted on 5 responses in a row");
        s.stop(Signal::Terminate);
        s.stop(Signal::Interrupt);
        assert_eq!(
            s.reason().map(|r| r.to_string()).as_deref(),
            Some("backend plugin 'x' faulted on 5 responses in a row")
        );
        assert_eq!(s.signal(), Some(Signal::Terminate));
        assert_eq!(s.signal().map(Signal::exit_code), Some(143));
    }
}
