//! A server command run by bench itself (`bench sweep serve --serve-cmd`, `bench startup`):
//! spawned in a process group of its own, its output in a log file, awaited until an HTTP
//! check answers 2xx, and stopped with the whole group (SIGTERM, a grace, then SIGKILL), so
//! that neither a failed run nor a panic leaves a server (or the workers it forked) behind.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long [`Drop`] lets a server that was not stopped shut down before killing it.
const DROP_GRACE: Duration = Duration::from_secs(2);

/// A server command line, as the user gave it, and where it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerCommand {
    /// The program and its arguments (see [`split_command`]).
    pub argv: Vec<String>,
    /// Variables added to bench's own environment.
    pub env: Vec<(String, String)>,
    /// The file that takes the server's stdout and stderr; `None`: bench's own.
    pub log: Option<PathBuf>,
    /// The working directory; `None`: bench's own.
    pub cwd: Option<PathBuf>,
}

impl ServerCommand {
    /// The command line as a shell would take it back (for messages and `--dry-run`).
    pub fn display(&self) -> String {
        join_command(&self.argv)
    }
}

/// A running server command; the leader of its own process group.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    command: String,
    log: Option<PathBuf>,
    spawned_at: Instant,
    /// Set once the leader has been reaped: `stop` is then a no-op returning it.
    exited: Option<ExitStatus>,
}

impl ServerProcess {
    /// Starts `cmd` in a new process group, stdout and stderr to `cmd.log` (created,
    /// truncated). The error names the command (and the log file when that failed).
    pub fn spawn(cmd: &ServerCommand) -> Result<ServerProcess> {
        let Some((program, args)) = cmd.argv.split_first() else {
            bail!("the server command is empty");
        };
        let command = cmd.display();
        let mut process = Command::new(program);
        process
            .args(args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            // Its own group: the signals of `stop` reach every process it forks, and a
            // Ctrl-C on bench's terminal does not reach it behind bench's back.
            .process_group(0);
        if let Some(cwd) = &cmd.cwd {
            process.current_dir(cwd);
        }
        if let Some(log) = &cmd.log {
            let out = File::create(log)
                .with_context(|| format!("creating the server log {}", log.display()))?;
            let err = out
                .try_clone()
                .with_context(|| format!("opening the server log {}", log.display()))?;
            process.stdout(out).stderr(err);
        }
        let spawned_at = Instant::now();
        let child = process
            .spawn()
            .with_context(|| format!("starting the server command `{command}`"))?;
        Ok(ServerProcess {
            child,
            command,
            log: cmd.log.clone(),
            spawned_at,
            exited: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn spawned_at(&self) -> Instant {
        self.spawned_at
    }

    /// The command line it runs.
    pub fn command(&self) -> &str {
        &self.command
    }

    pub fn log(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// Its exit status if it has ended (reaping it), `None` while it runs.
    pub fn try_exited(&mut self) -> Result<Option<ExitStatus>> {
        if self.exited.is_none() {
            self.exited = self
                .child
                .try_wait()
                .with_context(|| format!("waiting for `{}`", self.command))?;
        }
        Ok(self.exited)
    }

    /// GETs `url` every `poll` until it answers 2xx and returns the time from the spawn to
    /// that answer. Fails as soon as the process exits (with its status and where its
    /// output went), or when `timeout` has passed since the spawn.
    pub fn wait_ready(&mut self, url: &str, timeout: Duration, poll: Duration) -> Result<Duration> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the readiness check's runtime")?;
        let client = reqwest::Client::builder()
            .timeout(poll.max(Duration::from_secs(1)))
            .build()
            .context("building the readiness check's HTTP client")?;
        loop {
            if let Some(status) = self.try_exited()? {
                bail!(
                    "the server command `{}` exited ({status}) before {url} answered{}",
                    self.command,
                    self.log_hint()
                );
            }
            let last = match rt.block_on(async { client.get(url).send().await }) {
                Ok(response) if response.status().is_success() => {
                    return Ok(self.spawned_at.elapsed());
                }
                Ok(response) => format!("HTTP {}", response.status()),
                Err(e) => error_chain(&e),
            };
            if self.spawned_at.elapsed() >= timeout {
                bail!(
                    "the server command `{}` was not ready after {:.1} s: {url} gave {last}{}",
                    self.command,
                    timeout.as_secs_f64(),
                    self.log_hint()
                );
            }
            std::thread::sleep(poll);
        }
    }

    /// SIGTERM to the process group, up to `grace` for the leader to exit, then SIGKILL to
    /// the group. Idempotent: once stopped, returns the same status.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        // The child leads its own group.
        let group = self.child.id();
        signal_group(group, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        let status = loop {
            if let Some(status) = self.try_exited()? {
                break status;
            }
            if Instant::now() >= deadline {
                signal_group(group, libc::SIGKILL);
                let status = self
                    .child
                    .wait()
                    .with_context(|| format!("waiting for `{}` after SIGKILL", self.command))?;
                self.exited = Some(status);
                break status;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // Whatever the leader left in its group (workers that ignored SIGTERM) goes too.
        // The group id cannot have been reused while any of them lives.
        signal_group(group, libc::SIGKILL);
        Ok(status)
    }

    fn log_hint(&self) -> String {
        match &self.log {
            Some(log) => format!("; its output is in {}", log.display()),
            None => String::new(),
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Err(e) = self.stop(DROP_GRACE) {
            tracing::warn!("stopping the server command: {e:#}");
        }
    }
}

/// Sends `signal` to the process group `group` (a [`ServerProcess::pid`]; 0 sends
/// nothing): what a signal handler on another thread uses to stop a server it does not
/// own. ESRCH (nothing left in the group) is the expected end and is not an error.
pub fn signal_group(group: u32, signal: libc::c_int) {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return;
    };
    if group > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory involved.
        unsafe {
            libc::kill(-group, signal);
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Splits a command line as Python's `shlex.split` does (vLLM's `--serve-cmd`): quotes and
/// backslashes as a POSIX shell takes them, no expansion.
pub fn split_command(s: &str) -> Result<Vec<String>> {
    shlex::split(s).with_context(|| format!("unbalanced quotes in the command line `{s}`"))
}

/// The words back as one command line, quoted where a shell needs it (`shlex.join`).
pub fn join_command(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            shlex::try_quote(a)
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| a.clone())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn sh(script: &str, log: Option<PathBuf>) -> ServerCommand {
        ServerCommand {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            log,
            ..ServerCommand::default()
        }
    }

    /// Whether `pid` runs (a zombie, dead but not yet reaped by its parent, does not).
    fn alive(pid: libc::pid_t) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                // The state follows the command name's closing parenthesis.
                let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
                !matches!(state, Some(Some('Z' | 'X')))
            })
            .unwrap_or(false)
    }

    #[test]
    fn split_and_join_follow_shlex() {
        assert_eq!(
            split_command(r#"vllm serve "my model" --x='a b' c\ d"#).unwrap(),
            ["vllm", "serve", "my model", "--x=a b", "c d"]
        );
        assert!(split_command("vllm 'serve").is_err());
        let argv = split_command("a 'b c' d").unwrap();
        assert_eq!(join_command(&argv), "a 'b c' d");
        assert_eq!(split_command(&join_command(&argv)).unwrap(), argv);
    }

    #[test]
    fn spawn_error_names_the_command() {
        let cmd = ServerCommand {
            argv: vec!["/nonexistent/server".into(), "--port".into(), "1".into()],
            ..ServerCommand::default()
        };
        let err = format!("{:#}", ServerProcess::spawn(&cmd).unwrap_err());
        assert!(err.contains("/nonexistent/server --port 1"), "{err}");
    }

    #[test]
    fn output_goes_to_the_log_and_early_exit_fails_the_ready_check() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let mut server =
            ServerProcess::spawn(&sh("echo hello; echo oops >&2; exit 3", Some(log.clone())))
                .unwrap();
        let err = server
            .wait_ready(
                "http://127.0.0.1:9/health",
                Duration::from_secs(10),
                Duration::from_millis(20),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("exit status: 3"), "{err}");
        assert!(err.contains("server.log"), "{err}");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "hello\noops\n");
        assert_eq!(server.stop(Duration::ZERO).unwrap().code(), Some(3));
    }

    #[test]
    fn wait_ready_returns_once_the_url_answers_2xx() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/health", listener.local_addr().unwrap());
        // The first request gets a 503, the second a 200.
        let answers = std::thread::spawn(move || {
            for status in ["503 Service Unavailable", "200 OK"] {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).unwrap();
                write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
                .unwrap();
            }
        });
        let mut server = ServerProcess::spawn(&sh("sleep 30", None)).unwrap();
        let ready = server
            .wait_ready(&url, Duration::from_secs(10), Duration::from_millis(10))
            .unwrap();
        answers.join().unwrap();
        assert!(ready < Duration::from_secs(10));
        assert!(ready <= server.spawned_at().elapsed());
    }

    #[test]
    fn wait_ready_times_out_naming_the_url() {
        let mut server = ServerProcess::spawn(&sh("sleep 30", None)).unwrap();
        let err = server
            .wait_ready(
                "http://127.0.0.1:9/health",
                Duration::from_millis(200),
                Duration::from_millis(20),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("not ready after 0.2 s"), "{err}");
        assert!(err.contains("127.0.0.1:9/health"), "{err}");
    }

    #[test]
    fn stop_kills_the_whole_group_even_when_sigterm_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        // The leader and a forked worker both ignore SIGTERM.
        let script = format!(
            "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {}; sleep 30' & wait",
            pidfile.display()
        );
        let mut server = ServerProcess::spawn(&sh(&script, None)).unwrap();
        let worker: libc::pid_t = loop {
            if let Ok(text) = std::fs::read_to_string(&pidfile)
                && let Ok(pid) = text.trim().parse()
            {
                break pid;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let leader = server.pid() as libc::pid_t;
        let started = Instant::now();
        let status = server.stop(Duration::from_millis(200)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!alive(leader));
        // The worker was killed; give the kernel a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(worker) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(worker), "the forked worker {worker} survived");
        // Idempotent.
        assert_eq!(
            server.stop(Duration::ZERO).unwrap().signal(),
            Some(libc::SIGKILL)
        );
    }

    #[test]
    fn sigterm_ends_a_well_behaved_server_within_the_grace() {
        let mut server = ServerProcess::spawn(&sh("exec sleep 30", None)).unwrap();
        let started = Instant::now();
        let status = server.stop(Duration::from_secs(10)).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn drop_stops_the_server() {
        let server = ServerProcess::spawn(&sh("exec sleep 30", None)).unwrap();
        let pid = server.pid() as libc::pid_t;
        drop(server);
        assert!(!alive(pid));
    }
}
