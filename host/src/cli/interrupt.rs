//! Ctrl-C and SIGTERM during the measured run.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};

use crate::client::stop::{Signal, StopSignal};

/// From now on, the first SIGINT or SIGTERM raises `stop` (no more requests; those in
/// flight get `grace`), and a second one ends the process at once with the exit code of
/// that signal. Must be called on a tokio runtime; the handlers live as long as it does.
///
/// Installed only for the measured run: before it (loading, warm-up) nothing is lost by
/// dying on the spot, which is what the default handlers do.
pub fn watch(stop: Arc<StopSignal>, grace: Duration) -> Result<()> {
    let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    tokio::spawn(async move {
        let next = async |int: &mut tokio::signal::unix::Signal,
                          term: &mut tokio::signal::unix::Signal| {
            tokio::select! {
                _ = int.recv() => Signal::Interrupt,
                _ = term.recv() => Signal::Terminate,
            }
        };
        let signal = next(&mut int, &mut term).await;
        eprintln!(
            "\n{} received: sending no more requests; requests in flight get {:.1} s to \
             finish, then the results so far are reported and saved. Press Ctrl-C again \
             to quit at once.",
            signal.name(),
            grace.as_secs_f64()
        );
        stop.stop(signal);
        let again = next(&mut int, &mut term).await;
        eprintln!("{} received again: quitting without saving.", again.name());
        std::process::exit(i32::from(again.exit_code()));
    });
    Ok(())
}
