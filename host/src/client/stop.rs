//! A run-wide request to stop: raised by Ctrl-C/SIGTERM or by a part of the run that
//! cannot go on (a backend plugin that keeps faulting). The load generator stops
//! releasing requests once it is raised and keeps every result measured so far.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    reason: Mutex<Option<String>>,
    notify: Notify,
}

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal; the first reason given is kept.
    pub fn stop(&self, reason: impl Into<String>) {
        {
            let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
            if r.is_none() {
                *r = Some(reason.into());
            }
        }
        self.stopped.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Why the run was stopped, if it was.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
        s.stop("interrupted");
        s.stop("later");
        waiter.await.unwrap();
        assert!(s.is_stopped());
        assert_eq!(s.reason().as_deref(), Some("interrupted"));
    }
}
