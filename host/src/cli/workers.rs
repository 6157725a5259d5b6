//! `bench serve --workers N`: one run as N client processes on this machine, each a
//! shard (`--shard I/N`), started together and merged here as `bench merge` merges them.
//!
//! Processes rather than threads: each has its own async runtime, dispatcher and decode
//! thread, and the one-machine case goes through exactly the shard and merge path that
//! shards on several machines (a Kubernetes Indexed Job) take, so each tests the other.
//! The processes start with `--start-at gate`: each, once warmed up with its connections
//! open, prints [`READY`] on standard output and reads the shared start from standard
//! input; once all are ready this process writes one wall-clock time, a moment ahead,
//! to every one. They run in one process group of their own: a Ctrl-C here stops them
//! once, as it stops one run (a second kills them).
//!
//! The processes are not pinned to cores of their own. Measured on 16 cores (README,
//! Performance), pinning each to its own contiguous group lost 14 to 24% against letting
//! them share all the client's cores: each process has threads of uneven load (its
//! async runtime's, the dispatcher, the decode thread), and a pinned process's busy
//! thread cannot take a core another process leaves idle.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use super::console::{Console, READY, exit_code};
use super::interrupt::ServerInterrupt;
use super::plugin_flags::Parsed;
use super::serve::{self, Resolved, ServeArgs, WORKER_ENV};
use crate::benchmark::Outcome;
use crate::shard;

/// How far ahead of the last process's readiness the shared start is set: time for the
/// start to reach every process through its pipe.
const START_MARGIN: Duration = Duration::from_millis(50);

/// What a client process says, read from its standard output.
enum Heard {
    Ready,
    /// Its output ended before it was ready: it failed (or was stopped).
    Ended(usize),
}

pub fn run(args: ServeArgs, plugins: &Parsed) -> Result<ExitCode> {
    let workers = args.workers as usize;
    // The flags are checked once, here, before any process starts.
    let Resolved {
        config, warnings, ..
    } = serve::resolve(&args, plugins)?;
    if config.native.is_some() {
        bail!(
            "--workers: --backend native runs the model in this process, which no other \
             process shares; use --workers against a server"
        );
    }
    if args.num_runs > 1 {
        bail!("--workers runs one run: leave out --num-runs");
    }
    if let Some(cap) = args.max_concurrency
        && cap < workers
    {
        bail!("--max-concurrency {cap} is fewer than the {workers} --workers: each needs a slot");
    }
    let otlp = super::otlp::exporter(&args.otlp)?;
    for w in &warnings {
        eprintln!("WARNING: {w}");
    }
    let dir = tempfile::Builder::new()
        .prefix("bench-workers-")
        .tempdir()
        .context("--workers: a folder for the shards' records")?;
    let outputs: Vec<PathBuf> = (0..workers)
        .map(|i| dir.path().join(format!("shard-{i}.json")))
        .collect();
    println!("Running the benchmark as {workers} client processes (--workers)");
    let signals = ServerInterrupt::install(format!(
        "the {workers} client processes: no more requests are sent, requests in flight get \
         {:.1} s to finish, then the results so far are merged and saved",
        config.load.shutdown_grace.as_secs_f64()
    ))?;
    let mut children = spawn(workers, &outputs, &signals)?;
    let (tx, rx) = mpsc::channel();
    for (i, child) in children.iter_mut().enumerate() {
        let stderr = child.stderr.take().context("a client process's errors")?;
        std::thread::spawn(move || relay_errors(stderr, &format!("[shard {i}/{workers}] ")));
        let stdout = child.stdout.take().context("a client process's output")?;
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut ready = false;
            // Everything else it prints (its own share's report) is read and dropped.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !ready && line == READY {
                    ready = true;
                    let _ = tx.send(Heard::Ready);
                }
            }
            if !ready {
                let _ = tx.send(Heard::Ended(i));
            }
        });
    }
    drop(tx);
    let mut stdins: Vec<Option<ChildStdin>> = children.iter_mut().map(|c| c.stdin.take()).collect();
    let mut ready = 0;
    while ready < workers {
        match rx.recv() {
            Ok(Heard::Ready) => ready += 1,
            Ok(Heard::Ended(i)) => {
                // The others would wait for a start that never comes.
                stdins.clear();
                let status = children[i].wait();
                for child in &mut children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return signals.result(Err(anyhow::anyhow!(
                    "--workers: client process {i} (shard {i}/{workers}) ended before the \
                     run started ({}); its error is above",
                    status.map_or_else(|e| e.to_string(), |s| s.to_string())
                )));
            }
            Err(_) => bail!("--workers: lost the client processes' output"),
        }
    }
    let start = SystemTime::now() + START_MARGIN;
    let line = format!("@{:.6}\n", start.duration_since(UNIX_EPOCH)?.as_secs_f64());
    for (i, stdin) in stdins.iter_mut().enumerate() {
        if let Some(stdin) = stdin {
            stdin
                .write_all(line.as_bytes())
                .with_context(|| format!("--workers: starting client process {i}"))?;
        }
    }
    drop(stdins);
    for (i, child) in children.iter_mut().enumerate() {
        let status = child
            .wait()
            .with_context(|| format!("--workers: waiting for client process {i}"))?;
        // A process whose requests all failed exits with failure yet wrote its records;
        // only one that wrote none is lost.
        if !outputs[i].exists() {
            return signals.result(Err(anyhow::anyhow!(
                "--workers: client process {i} (shard {i}/{workers}) ended ({status}) without \
                 its records; its error is above"
            )));
        }
    }
    signals.server_stopped();
    let merged = shard::merge::merge(super::merge::read_inputs(&outputs)?)?;
    let mut console = Console::new(false, config.load.shutdown_grace);
    let mut outcome: Outcome =
        super::merge::show_and_save(merged, &config.report.save, &mut console)?;
    super::serve_plots::write(&args.plots, &config, &outcome)?;
    super::otlp::export(otlp.as_ref(), &config, &outcome);
    if signals.interrupted() {
        outcome.signal = Some(crate::client::stop::Signal::Interrupt);
    }
    Ok(exit_code(&outcome))
}

/// Copies what a client process writes on standard error to this one's, each line after
/// `prefix` (which shard said it), as bytes: a line need not be UTF-8.
fn relay_errors(stderr: std::process::ChildStderr, prefix: &str) {
    let mut lines = BufReader::new(stderr);
    let mut line = Vec::new();
    while matches!(lines.read_until(b'\n', &mut line), Ok(n) if n > 0) {
        let mut out = std::io::stderr().lock();
        let _ = out
            .write_all(prefix.as_bytes())
            .and_then(|()| out.write_all(&line));
        line.clear();
    }
}

/// Starts the client processes, all in one process group (the first one's) that
/// `signals` follows.
fn spawn(workers: usize, outputs: &[PathBuf], signals: &ServerInterrupt) -> Result<Vec<Child>> {
    let exe = std::env::current_exe().context("--workers: this program's path")?;
    let mut argv = without_workers(std::env::args_os().skip(1));
    if !argv.iter().any(|a| {
        a.to_str()
            .is_some_and(|a| a.starts_with("--request-id-prefix"))
    }) {
        // One run's ids: the processes would each draw their own default prefix.
        argv.push(format!("--request-id-prefix=bench-{:08x}-", rand::random::<u32>()).into());
    }
    let mut children: Vec<Child> = Vec::with_capacity(workers);
    for (i, output) in outputs.iter().enumerate() {
        let group = children.first().map_or(0, |c| c.id() as i32);
        let child = Command::new(&exe)
            .args(&argv)
            .arg(format!("--shard={i}/{workers}"))
            .arg("--start-at=gate")
            .arg("--shard-output")
            .arg(output)
            .env(WORKER_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(group)
            .spawn()
            .with_context(|| format!("--workers: starting client process {i}"));
        match child {
            Ok(child) => {
                if i == 0 {
                    signals.server_spawned(child.id());
                }
                children.push(child);
            }
            Err(e) => {
                for mut child in children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(e);
            }
        }
    }
    Ok(children)
}

/// The command line without `--workers N` (or `--workers=N`): what each client process
/// runs, with its shard's flags added.
fn without_workers(argv: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in argv {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        match arg.to_str() {
            Some("--workers") => skip_value = true,
            Some(a) if a.starts_with("--workers=") => {}
            _ => out.push(arg),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workers_flag_is_taken_out_in_both_forms() {
        let argv = |args: &[&str]| args.iter().map(OsString::from).collect::<Vec<_>>();
        let out = without_workers(
            argv(&[
                "serve",
                "--workers",
                "4",
                "--num-prompts",
                "8",
                "--workers=2",
                "--seed",
                "1",
            ])
            .into_iter(),
        );
        assert_eq!(out, argv(&["serve", "--num-prompts", "8", "--seed", "1"]));
    }
}
