//! Ctrl-C and SIGTERM: during the measured run ([`watch`]), and while bench runs a server
//! of its own ([`ServerInterrupt`]).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use bench_study::server_process::signal_group;
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
        super::dashboard::restore_if_shown();
        eprintln!("{} received again: quitting without saving.", again.name());
        std::process::exit(i32::from(again.exit_code()));
    });
    Ok(())
}

/// Ctrl-C and SIGTERM while bench runs a server of its own (`sweep`, `startup`): the
/// first stops the benchmark in flight, if any, and sends SIGTERM to the server's process
/// group (its ready check then fails at once, and the caller stops it as usual, SIGKILL
/// after its grace); a second kills the group and quits with the signal's exit code.
/// The handlers run on a small runtime of their own, alive as long as this.
pub struct ServerInterrupt {
    /// The running server's process group (0: none).
    server: Arc<AtomicU32>,
    /// The stop signal of the benchmark in flight, while one runs.
    run: Arc<Mutex<Option<Arc<StopSignal>>>>,
    interrupted: Arc<AtomicBool>,
    _runtime: tokio::runtime::Runtime,
}

impl ServerInterrupt {
    /// `what` finishes the first signal's message: "<SIGNAL> received: stopping `what`".
    pub fn install(what: String) -> Result<ServerInterrupt> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting the signal handlers' runtime")?;
        let server = Arc::new(AtomicU32::new(0));
        let run: Arc<Mutex<Option<Arc<StopSignal>>>> = Arc::default();
        let interrupted = Arc::new(AtomicBool::new(false));
        let (mut int, mut term) = {
            let _enter = runtime.enter();
            (
                signal(SignalKind::interrupt()).context("installing a SIGINT handler")?,
                signal(SignalKind::terminate()).context("installing a SIGTERM handler")?,
            )
        };
        let (group, stop, flag) = (server.clone(), run.clone(), interrupted.clone());
        runtime.spawn(async move {
            for count in 0.. {
                let signal = tokio::select! {
                    _ = int.recv() => Signal::Interrupt,
                    _ = term.recv() => Signal::Terminate,
                };
                flag.store(true, Ordering::SeqCst);
                if count == 0 {
                    eprintln!(
                        "\n{} received: stopping {what}. Again to quit at once.",
                        signal.name()
                    );
                    if let Some(stop) = stop.lock().unwrap_or_else(PoisonError::into_inner).as_ref()
                    {
                        stop.stop(signal);
                    }
                    signal_group(group.load(Ordering::SeqCst), libc::SIGTERM);
                } else {
                    eprintln!("{} received again: quitting.", signal.name());
                    signal_group(group.load(Ordering::SeqCst), libc::SIGKILL);
                    std::process::exit(i32::from(signal.exit_code()));
                }
            }
        });
        Ok(ServerInterrupt {
            server,
            run,
            interrupted,
            _runtime: runtime,
        })
    }

    /// Whether a signal came.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Follows a server just spawned; one spawned after a signal is stopped at once.
    pub fn server_spawned(&self, pid: u32) {
        self.server.store(pid, Ordering::SeqCst);
        if self.interrupted() {
            signal_group(pid, libc::SIGTERM);
        }
    }

    /// The server stopped: a signal no longer reaches it.
    pub fn server_stopped(&self) {
        self.server.store(0, Ordering::SeqCst);
    }

    /// Where the benchmark in flight puts its stop signal (and takes it out after).
    pub fn run_slot(&self) -> &Arc<Mutex<Option<Arc<StopSignal>>>> {
        &self.run
    }

    /// The result of what ran meanwhile, with an interrupt named as the reason it failed.
    pub fn result<T>(&self, result: Result<T>) -> Result<T> {
        if !self.interrupted() {
            return result;
        }
        Err(match result {
            Ok(_) => anyhow::anyhow!("interrupted"),
            Err(e) => e.context("interrupted"),
        })
    }
}
