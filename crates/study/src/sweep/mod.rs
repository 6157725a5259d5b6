//! `bench sweep serve`, `serve_sla` and `serve_workload`, as vLLM's `bench sweep`: a server
//! command started once per serve-parameter combination ([`crate::server_process`]), every
//! bench-parameter combination run `num_runs` times against it, the server's caches reset
//! between runs, and every result kept where a later run (`--resume`, `bench sweep plot`,
//! `bench report`) reads it back:
//!
//! ```text
//! EXPERIMENT_DIR/
//!   SERVE--<serve name>-server.log        the server's stdout and stderr (server.log
//!                                        without serve parameters)
//!   SERVE--<serve name>-BENCH--<bench name>/
//!     run=0.json ... run=N-1.json        bench serve's result, the parameters merged in
//!     summary.json                       the runs' results, a list (the combination is done)
//!   summary.csv                          every run's row
//! ```
//!
//! `serve_sla` puts each value it measures in a folder of its own below the combination
//! (`max_concurrency=8/run=0.json`, ...), shared by every SLA of `--sla-params` (a value
//! measured for one is read back for the next), and writes `SLA--<criteria>.json` (the
//! runs it used) once a search is done, and `sla_results.json` (the answers). The
//! orchestration is generic over how one benchmark runs ([`Driver`]): the CLI runs it in
//! process with `bench serve`'s own flags.

pub mod params;
pub mod sla;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

pub use params::Params;
pub use sla::{Sla, SlaVariable};

use crate::server_process::{ServerCommand, ServerProcess, join_command};

/// One run's result with its parameters merged in (a row of `summary.csv`).
pub type Row = serde_json::Map<String, Value>;

/// A combination is finished when this file is in its folder.
const SUMMARY: &str = "summary.json";

/// vLLM's cache-reset endpoints, called between benchmark runs; a server without one
/// answers 404 (or 405), which is fine.
pub const RESET_ENDPOINTS: [&str; 3] = [
    "/reset_prefix_cache",
    "/reset_mm_cache",
    "/reset_encoder_cache",
];

/// How the server command is started, awaited and stopped.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// The readiness check's URL; `None`: `/health` on the server's address (see
    /// [`server_base_url`]).
    pub ready_url: Option<String>,
    pub ready_timeout: Duration,
    pub ready_poll: Duration,
    /// Between SIGTERM and SIGKILL when the server is stopped.
    pub stop_grace: Duration,
}

/// What every sweep shares.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The server command (its words); `None`: no server is managed, the benchmarks run
    /// against one already running (and nothing resets it unless `after_bench_cmd` does).
    pub serve_cmd: Option<Vec<String>>,
    /// `bench serve`'s flags (without `bench serve` itself).
    pub bench_cmd: Vec<String>,
    /// Run after each benchmark instead of the cache resets.
    pub after_bench_cmd: Option<Vec<String>>,
    /// Whether `after_bench_cmd`'s output is shown (else discarded).
    pub show_stdout: bool,
    pub server: ServerSettings,
    /// At least one (an empty combination runs the command as it is).
    pub serve_params: Vec<Params>,
    pub bench_params: Vec<Params>,
    /// Serve and bench keys whose values must agree (`--link-vars`).
    pub link_vars: Vec<(String, String)>,
    pub experiment_dir: PathBuf,
    pub num_runs: usize,
    /// Report the commands, run nothing, write nothing.
    pub dry_run: bool,
    /// Requests of one unmeasured run before each combination's runs (`warmup.json`, not
    /// in the summaries); 0: none.
    pub warmup_num_prompts: u64,
    /// Record a failed run (`run=N.failure.json`) or server combination
    /// (`SERVE-<name>-failure.json`) and go on, instead of ending the sweep.
    pub continue_on_error: bool,
}

/// What a sweep reports as it goes (the CLI prints it).
#[derive(Debug)]
pub enum Event<'a> {
    /// A serve combination begins; `log` is `None` in a dry run or without a server.
    Server {
        params: &'a Params,
        command: Option<&'a str>,
        log: Option<&'a Path>,
    },
    /// Every result of the serve combination is there: its server is not started.
    ServerNotNeeded,
    /// The server command was spawned (the CLI stops its process group on Ctrl-C).
    ServerSpawned {
        pid: u32,
    },
    ServerReady {
        after: Duration,
    },
    ServerStopped {
        status: ExitStatus,
    },
    /// One benchmark run: `bench serve` with `argv`, its result at `output`; `run` is
    /// `None` for the warm-up.
    Benchmark {
        argv: &'a [String],
        output: &'a Path,
        run: Option<usize>,
    },
    /// With `continue_on_error`: a run, or a whole server combination, failed; what
    /// happened is in `record`.
    Failed {
        error: &'a anyhow::Error,
        record: &'a Path,
    },
    /// With `continue_on_error`: no run of a combination succeeded; it has no summary, so
    /// `--resume` runs it again.
    NoSuccessfulRuns {
        dir: &'a Path,
    },
    /// Its result was there already (`--resume`): not run again.
    Skipped {
        output: &'a Path,
    },
    /// A reset endpoint answered; `done` is false when the server has none.
    Reset {
        endpoint: &'static str,
        done: bool,
    },
    /// The SLA search (or workload scan) tries a value.
    Testing {
        variable: SlaVariable,
        value: u64,
    },
    /// A value's margin against the SLA (met when zero or less).
    SlaChecked {
        sla: &'a Sla,
        value: u64,
        margin: f64,
    },
    SlaFound {
        sla: &'a Sla,
        variable: SlaVariable,
        value: u64,
        measured: usize,
    },
    /// `serve_workload`'s estimates from the serial and the batch runs.
    WorkloadRange {
        variable: SlaVariable,
        serial: u64,
        batch: u64,
    },
    /// Where the results are (or, in a dry run, would be).
    Saved {
        dir: &'a Path,
    },
}

/// How one benchmark runs, and where a sweep's events go.
pub trait Driver {
    /// Runs `bench serve` with `argv` (flags only), which save its result where they say.
    fn bench(&mut self, argv: &[String]) -> Result<()>;
    fn event(&mut self, event: Event<'_>);
    /// Whether the user stopped the sweep (Ctrl-C): a failure then ends it even with
    /// `continue_on_error`.
    fn stopped(&self) -> bool;
}

/// `output_dir/name` (name: the time now, `%Y%m%d_%H%M%S`, as vLLM's), which must not
/// exist yet, or with `resume` must.
pub fn experiment_dir(output_dir: &Path, name: Option<&str>, resume: bool) -> Result<PathBuf> {
    let name = name.map_or_else(
        || chrono::Local::now().format("%Y%m%d_%H%M%S").to_string(),
        str::to_owned,
    );
    let dir = output_dir.join(name);
    match (resume, dir.exists()) {
        (true, false) => bail!("cannot resume from {}: it does not exist", dir.display()),
        (false, true) => bail!(
            "{} exists: pass --resume to finish it, or another --experiment-name",
            dir.display()
        ),
        _ => Ok(dir),
    }
}

/// The server's address as vLLM finds it in the command: `--host` (default `localhost`)
/// and `--port` or `-p` (default 8000).
pub fn server_base_url(cmd: &[String]) -> String {
    let after = |keys: &[&str]| {
        cmd.iter()
            .position(|a| keys.contains(&a.as_str()))
            .and_then(|i| cmd.get(i + 1))
            .cloned()
    };
    let host = after(&["--host"]).unwrap_or_else(|| "localhost".into());
    let port = after(&["-p", "--port"]).unwrap_or_else(|| "8000".into());
    format!("http://{host}:{port}")
}

/// The folder of a serve and bench combination (`extra`: more name parts), as vLLM names
/// it; the experiment folder itself when both are empty.
fn comb_dir(exp: &Path, serve: &Params, bench: &Params, extra: &[String]) -> PathBuf {
    let mut parts = Vec::new();
    if !serve.is_empty() {
        parts.extend(["SERVE-".to_owned(), params::name(serve)]);
    }
    if !bench.is_empty() {
        parts.extend(["BENCH-".to_owned(), params::name(bench)]);
    }
    parts.extend_from_slice(extra);
    exp.join(params::sanitize_filename(&parts.join("-")))
}

/// `bench` with `{key: value}` laid over it.
fn with(bench: &Params, key: &str, value: u64) -> Params {
    let mut p = bench.clone();
    p.insert(key.to_owned(), json!(value));
    p
}

/// The sweep's state while one serve combination runs.
struct Runner<'a> {
    cfg: &'a SweepConfig,
    driver: &'a mut dyn Driver,
    /// The managed server's address, for the resets.
    reset_base: Option<String>,
    /// The address of the serve command's server (also in a dry run): where a benchmark
    /// whose command names none (`--base-url`, `--host`, `--port`) is sent.
    server_base: Option<String>,
    /// Whether benchmarks may run: not in a dry run, and not when a managed server was
    /// not started because every result was there.
    live: bool,
}

impl Runner<'_> {
    /// Runs (or reads back) one combination's `num_runs` runs in `dir` and writes its
    /// `summary.json`; `None` in a dry run.
    fn comb(&mut self, serve: &Params, bench: &Params, dir: &Path) -> Result<Option<Vec<Row>>> {
        if self.cfg.warmup_num_prompts > 0 {
            let warmup = with(bench, "num_prompts", self.cfg.warmup_num_prompts);
            self.run_or_record(serve, &warmup, None, &dir.join("warmup.json"))?;
        }
        let mut rows = Vec::new();
        for run in 0..self.cfg.num_runs {
            let output = dir.join(format!("run={run}.json"));
            if let Some(row) = self.run_or_record(serve, bench, Some(run), &output)? {
                rows.push(row);
            }
        }
        if self.cfg.dry_run {
            return Ok(None);
        }
        if rows.is_empty() {
            self.driver.event(Event::NoSuccessfulRuns { dir });
            return Ok(Some(rows));
        }
        write_json(
            &dir.join(SUMMARY),
            &Value::Array(rows.iter().cloned().map(Value::Object).collect()),
        )?;
        Ok(Some(rows))
    }

    /// [`Runner::run_one`]; with `continue_on_error` a failure is recorded beside
    /// `output` (`<stem>.failure.json`) and the run counts as not done.
    fn run_or_record(
        &mut self,
        serve: &Params,
        bench: &Params,
        run: Option<usize>,
        output: &Path,
    ) -> Result<Option<Row>> {
        let error = match self.run_one(serve, bench, run, output) {
            Err(e) if self.cfg.continue_on_error && !self.driver.stopped() => e,
            other => return other,
        };
        let stem = output.file_stem().unwrap_or_default().to_string_lossy();
        let record = output.with_file_name(format!("{stem}.failure.json"));
        write_json(
            &record,
            &json!({
                "run_number": run.map_or(-1, |r| r as i64),
                "error": format!("{error:#}"),
                "serve_overrides": serve,
                "bench_overrides": bench,
            }),
        )?;
        self.driver.event(Event::Failed {
            error: &error,
            record: &record,
        });
        // The next run still wants a clean server; a failure here was already reported.
        if self.live {
            let _ = self.after_bench();
        }
        Ok(None)
    }

    fn run_one(
        &mut self,
        serve: &Params,
        bench: &Params,
        run: Option<usize>,
        output: &Path,
    ) -> Result<Option<Row>> {
        let mut save = Params::new();
        save.insert("percentile_metrics".into(), json!("ttft,tpot,itl,e2el"));
        save.insert("save_result".into(), json!(true));
        let dir = output.parent().unwrap_or(Path::new("."));
        save.insert("result_dir".into(), json!(dir.display().to_string()));
        let name = output.file_name().map(|n| n.to_string_lossy().into_owned());
        save.insert("result_filename".into(), json!(name));
        let with_bench = params::apply_to_cmd(bench, &self.cfg.bench_cmd);
        let names_server = with_bench.iter().any(|a| {
            ["--base-url", "--host", "--port"].contains(&a.split('=').next().unwrap_or(""))
        });
        if let Some(base) = self.server_base.as_ref().filter(|_| !names_server) {
            save.insert("base_url".into(), json!(base));
        }
        let argv = params::apply_to_cmd(&save, &with_bench);
        self.driver.event(Event::Benchmark {
            argv: &argv,
            output,
            run,
        });
        let merge = |mut row: Row| {
            row.insert("run_number".into(), json!(run.map_or(-1, |r| r as i64)));
            row.extend(serve.clone());
            row.extend(bench.clone());
            row
        };
        if output.exists() {
            self.driver.event(Event::Skipped { output });
            return Ok(Some(merge(read_object(output)?)));
        }
        if self.cfg.dry_run {
            return Ok(None);
        }
        if !self.live {
            bail!(
                "{} is missing although its combination's {SUMMARY} is there; remove {SUMMARY} \
                 to run it again",
                output.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if let Err(e) = self.driver.bench(&argv) {
            // A failed or interrupted run may have saved what it had (the result and the
            // PyTorch records beside it, see `report::save`): it must not count as finished
            // for --resume.
            let _ = std::fs::remove_file(output);
            let _ = std::fs::remove_file(output.with_extension("pytorch.json"));
            return Err(e);
        }
        if !output.exists() {
            bail!("the benchmark wrote no result at {}", output.display());
        }
        self.after_bench()?;
        let row = merge(read_object(output)?);
        write_json(output, &Value::Object(row.clone()))?;
        Ok(Some(row))
    }

    /// `--after-bench-cmd`, else the managed server's cache resets.
    fn after_bench(&mut self) -> Result<()> {
        if let Some(cmd) = &self.cfg.after_bench_cmd {
            return run_after_bench(cmd, self.cfg.show_stdout);
        }
        let Some(base) = &self.reset_base else {
            return Ok(());
        };
        for (endpoint, done) in reset_caches(base)? {
            self.driver.event(Event::Reset { endpoint, done });
        }
        Ok(())
    }
}

fn run_after_bench(cmd: &[String], show_stdout: bool) -> Result<()> {
    let Some((program, args)) = cmd.split_first() else {
        return Ok(());
    };
    let line = join_command(cmd);
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(if show_stdout {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .status()
        .with_context(|| format!("--after-bench-cmd `{line}`"))?;
    if !status.success() {
        bail!("--after-bench-cmd `{line}` failed ({status})");
    }
    Ok(())
}

/// POSTs every [`RESET_ENDPOINTS`] on `base`: whether each reset something (404 or 405:
/// the server has no such cache). Any other answer is an error naming the endpoint.
pub fn reset_caches(base: &str) -> Result<Vec<(&'static str, bool)>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the cache resets' runtime")?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .context("building the cache resets' HTTP client")?;
    rt.block_on(async {
        let mut done = Vec::new();
        for endpoint in RESET_ENDPOINTS {
            let url = format!("{base}{endpoint}");
            let response = client
                .post(&url)
                .send()
                .await
                .with_context(|| format!("resetting the server's caches: POST {url}"))?;
            let status = response.status();
            match status.as_u16() {
                200..=299 => done.push((endpoint, true)),
                404 | 405 => done.push((endpoint, false)),
                _ => bail!("resetting the server's caches: POST {url} answered {status}"),
            }
        }
        Ok(done)
    })
}

/// Runs `body` with the serve combination's server started (when one is managed, needed
/// and this is no dry run), then stops it, whether `body` succeeded or not.
fn with_server<T>(
    cfg: &SweepConfig,
    driver: &mut dyn Driver,
    serve: &Params,
    needed: bool,
    body: impl FnOnce(&mut Runner<'_>) -> Result<T>,
) -> Result<T> {
    let Some(serve_cmd) = &cfg.serve_cmd else {
        driver.event(Event::Server {
            params: serve,
            command: None,
            log: None,
        });
        let mut runner = Runner {
            cfg,
            driver,
            reset_base: None,
            server_base: None,
            live: !cfg.dry_run,
        };
        return body(&mut runner);
    };
    let argv = params::apply_to_cmd(serve, serve_cmd);
    let command = join_command(&argv);
    let base = server_base_url(&argv);
    // The benchmarks' address: vLLM's default host `localhost` as IPv4 loopback, where
    // servers listen by default (a client may try ::1 first).
    let bench_base = base.replace("://localhost:", "://127.0.0.1:");
    let start = needed && !cfg.dry_run;
    let log = start.then(|| server_log(&cfg.experiment_dir, serve));
    driver.event(Event::Server {
        params: serve,
        command: Some(&command),
        log: log.as_deref(),
    });
    if !start {
        if !needed {
            driver.event(Event::ServerNotNeeded);
        }
        let mut runner = Runner {
            cfg,
            driver,
            reset_base: None,
            server_base: Some(bench_base),
            live: false,
        };
        return body(&mut runner);
    }
    std::fs::create_dir_all(&cfg.experiment_dir)
        .with_context(|| format!("creating {}", cfg.experiment_dir.display()))?;
    let mut server = ServerProcess::spawn(&ServerCommand {
        argv: argv.clone(),
        log,
        ..ServerCommand::default()
    })?;
    driver.event(Event::ServerSpawned { pid: server.pid() });
    let ready_url = cfg
        .server
        .ready_url
        .clone()
        .unwrap_or_else(|| format!("{base}/health"));
    let result = server
        .wait_ready(&ready_url, cfg.server.ready_timeout, cfg.server.ready_poll)
        .and_then(|after| {
            driver.event(Event::ServerReady { after });
            let mut runner = Runner {
                cfg,
                driver: &mut *driver,
                reset_base: Some(base.clone()),
                server_base: Some(bench_base),
                live: true,
            };
            body(&mut runner)
        });
    let stopped = server.stop(cfg.server.stop_grace);
    if let Ok(status) = &stopped {
        driver.event(Event::ServerStopped { status: *status });
    }
    let value = result?;
    stopped.with_context(|| format!("stopping the server command `{command}`"))?;
    Ok(value)
}

/// [`with_server`]; with `continue_on_error` a failure (the server did not start, or a run
/// failed beyond what `continue_on_error` records) is recorded in
/// `SERVE-<name>-failure.json` and the sweep goes on with the next serve combination.
fn for_server(
    cfg: &SweepConfig,
    driver: &mut dyn Driver,
    serve: &Params,
    needed: bool,
    body: impl FnOnce(&mut Runner<'_>) -> Result<()>,
) -> Result<()> {
    let error = match with_server(cfg, driver, serve, needed, body) {
        Err(e) if cfg.continue_on_error && !driver.stopped() => e,
        other => return other,
    };
    let name = if serve.is_empty() {
        "default".to_owned()
    } else {
        params::name(serve)
    };
    std::fs::create_dir_all(&cfg.experiment_dir)
        .with_context(|| format!("creating {}", cfg.experiment_dir.display()))?;
    let record = cfg.experiment_dir.join(params::sanitize_filename(&format!(
        "SERVE-{name}-failure.json"
    )));
    write_json(
        &record,
        &json!({"error": format!("{error:#}"), "serve_overrides": serve}),
    )?;
    driver.event(Event::Failed {
        error: &error,
        record: &record,
    });
    Ok(())
}

/// `SERVE--<name>-server.log`, or `server.log` without serve parameters.
fn server_log(exp: &Path, serve: &Params) -> PathBuf {
    let prefix = if serve.is_empty() {
        String::new()
    } else {
        format!("SERVE--{}-", params::name(serve))
    };
    exp.join(params::sanitize_filename(&format!("{prefix}server.log")))
}

fn read_object(path: &Path) -> Result<Row> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    match serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?
    {
        Value::Object(map) => Ok(map),
        _ => bail!("{} is not a JSON object", path.display()),
    }
}

/// As vLLM's `json.dump(..., indent=4)`.
fn write_json(path: &Path, value: &Value) -> Result<()> {
    let mut text = Vec::new();
    bench_core::pyjson::to_writer_indented(&mut text, value, 4)
        .with_context(|| format!("encoding {}", path.display()))?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `summary.csv` as pandas writes a frame of the rows: an index column, the union of the
/// keys in first-seen order, missing cells empty; lists and objects as JSON.
pub fn write_summary_csv(path: &Path, rows: &[Row]) -> Result<()> {
    let mut columns: Vec<&str> = Vec::new();
    for row in rows {
        for key in row.keys() {
            if !columns.contains(&key.as_str()) {
                columns.push(key);
            }
        }
    }
    let mut out =
        csv::Writer::from_path(path).with_context(|| format!("writing {}", path.display()))?;
    let header = std::iter::once("").chain(columns.iter().copied());
    out.write_record(header)
        .with_context(|| format!("writing {}", path.display()))?;
    for (i, row) in rows.iter().enumerate() {
        let cells = columns.iter().map(|c| match row.get(*c) {
            None | Some(Value::Null) => String::new(),
            Some(v @ (Value::Array(_) | Value::Object(_))) => v.to_string(),
            Some(v) => params::value_text(v),
        });
        out.write_record(std::iter::once(i.to_string()).chain(cells))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    out.flush()
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes `summary.csv` (not in a dry run) and says where the results are.
fn finish(cfg: &SweepConfig, driver: &mut dyn Driver, rows: &[Row]) -> Result<()> {
    if !cfg.dry_run {
        std::fs::create_dir_all(&cfg.experiment_dir)
            .with_context(|| format!("creating {}", cfg.experiment_dir.display()))?;
        write_summary_csv(&cfg.experiment_dir.join("summary.csv"), rows)?;
    }
    driver.event(Event::Saved {
        dir: &cfg.experiment_dir,
    });
    Ok(())
}

/// `bench sweep serve`: every serve × bench combination (those `link_vars` allow), each
/// run `num_runs` times. Returns every run's row (none in a dry run).
pub fn serve(cfg: &SweepConfig, driver: &mut dyn Driver) -> Result<Vec<Row>> {
    let mut all = Vec::new();
    for serve in &cfg.serve_params {
        let needed = cfg.bench_params.iter().any(|b| {
            !comb_dir(&cfg.experiment_dir, serve, b, &[])
                .join(SUMMARY)
                .exists()
        });
        for_server(cfg, driver, serve, needed, |run| {
            for bench in &cfg.bench_params {
                if !params::linked(serve, bench, &cfg.link_vars) {
                    continue;
                }
                let dir = comb_dir(&cfg.experiment_dir, serve, bench, &[]);
                all.extend(run.comb(serve, bench, &dir)?.unwrap_or_default());
            }
            Ok(())
        })?;
    }
    finish(cfg, driver, &all)?;
    Ok(all)
}

/// The value that stands for an unbounded rate or concurrency (vLLM's).
pub const SLA_INF: u64 = 65536;

/// One search's answer (an item of `sla_results.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct SlaAnswer {
    pub serve: Params,
    pub bench: Params,
    pub sla: Sla,
    /// The largest value that met every criterion; 0 when none did.
    pub value: u64,
    /// The values measured, in order, with their margins.
    pub history: Vec<(u64, f64)>,
}

fn check_not_in_bench(cfg: &SweepConfig, variable: SlaVariable) -> Result<()> {
    if cfg
        .bench_params
        .iter()
        .any(|b| params::has_param(b, variable.key()))
    {
        bail!(
            "--bench-params must not set {}: the sweep chooses its values",
            variable.key()
        );
    }
    Ok(())
}

/// `bench sweep serve_sla`: for every serve × bench combination and every SLA, the
/// largest value of `variable` that meets it ([`sla::search`]). Values measured for one
/// SLA are read back for the next. Returns the answers (none in a dry run).
pub fn serve_sla(
    cfg: &SweepConfig,
    variable: SlaVariable,
    slas: &[Sla],
    driver: &mut dyn Driver,
) -> Result<Vec<SlaAnswer>> {
    check_not_in_bench(cfg, variable)?;
    let sla_file = |dir: &Path, sla: &Sla| {
        dir.join(params::sanitize_filename(&format!(
            "SLA--{}.json",
            sla.text("-")
        )))
    };
    let mut all = Vec::new();
    let mut answers = Vec::new();
    for serve in &cfg.serve_params {
        let needed = cfg.bench_params.iter().any(|b| {
            let dir = comb_dir(&cfg.experiment_dir, serve, b, &[]);
            slas.iter().any(|s| !sla_file(&dir, s).exists())
        });
        for_server(cfg, driver, serve, needed, |run| {
            for bench in &cfg.bench_params {
                if !params::linked(serve, bench, &cfg.link_vars) {
                    continue;
                }
                let dir = comb_dir(&cfg.experiment_dir, serve, bench, &[]);
                for sla in slas {
                    let at = |value: u64| dir.join(format!("{}={value}", variable.key()));
                    if cfg.dry_run {
                        // The first run's commands; the rest depends on its results.
                        run.comb(serve, &with(bench, variable.key(), SLA_INF), &at(SLA_INF))?;
                        continue;
                    }
                    let mut data = Vec::new();
                    let found = sla::search(SLA_INF, |value| {
                        run.driver.event(Event::Testing { variable, value });
                        let rows = run
                            .comb(serve, &with(bench, variable.key(), value), &at(value))?
                            .unwrap_or_default();
                        let margin = sla.margin(&rows)?;
                        run.driver.event(Event::SlaChecked { sla, value, margin });
                        let estimate = mean(&rows, |r| variable.estimate(r))?;
                        data.extend(rows);
                        Ok(sla::Probe { margin, estimate })
                    })?;
                    run.driver.event(Event::SlaFound {
                        sla,
                        variable,
                        value: found.value,
                        measured: found.history.len(),
                    });
                    write_json(
                        &sla_file(&dir, sla),
                        &Value::Array(data.iter().cloned().map(Value::Object).collect()),
                    )?;
                    all.extend(data);
                    answers.push(SlaAnswer {
                        serve: serve.clone(),
                        bench: bench.clone(),
                        sla: sla.clone(),
                        value: found.value,
                        history: found.history,
                    });
                }
            }
            Ok(())
        })?;
    }
    if !cfg.dry_run {
        let results: Vec<Value> = answers
            .iter()
            .map(|a| {
                json!({
                    "serve_params": a.serve,
                    "bench_params": a.bench,
                    "sla": a.sla.text(", "),
                    "sla_variable": variable.key(),
                    "value": a.value,
                    "measured": a.history.iter().map(|(v, m)| json!({"value": v, "margin": m})).collect::<Vec<_>>(),
                })
            })
            .collect();
        std::fs::create_dir_all(&cfg.experiment_dir)
            .with_context(|| format!("creating {}", cfg.experiment_dir.display()))?;
        write_json(
            &cfg.experiment_dir.join("sla_results.json"),
            &Value::Array(results),
        )?;
    }
    finish(cfg, driver, &all)?;
    Ok(answers)
}

fn mean(rows: &[Row], f: impl Fn(&Row) -> Result<f64>) -> Result<f64> {
    if rows.is_empty() {
        bail!("no runs to estimate from");
    }
    let mut sum = 0.0;
    for r in rows {
        sum += f(r)?;
    }
    Ok(sum / rows.len() as f64)
}

/// The requests of a combination's runs: `num_prompts` of its parameters, else
/// `--num-prompts` of the bench command, else `default`.
fn dataset_size(bench: &Params, bench_cmd: &[String], default: u64) -> Result<u64> {
    if let Some(v) = bench.get("num_prompts") {
        return v
            .as_u64()
            .with_context(|| format!("num_prompts {v} in --bench-params is not a count"));
    }
    let mut args = bench_cmd.iter();
    while let Some(a) = args.next() {
        let value = match a.strip_prefix("--num-prompts") {
            Some("") => args.next().map(String::as_str),
            Some(rest) => rest.strip_prefix('='),
            None => continue,
        };
        if let Some(v) = value {
            return v
                .parse()
                .with_context(|| format!("--num-prompts {v} in --bench-cmd is not a count"));
        }
    }
    Ok(default)
}

/// `bench sweep serve_workload`: for every serve × bench combination, one serial run
/// (`variable` = 1, concurrency 1), one batch run (`variable` = the dataset's size, all
/// requests at once), and `iters - 2` values evenly between what those two sustained
/// ([`sla::workload_values`]). Returns every run's row (none in a dry run).
pub fn serve_workload(
    cfg: &SweepConfig,
    variable: SlaVariable,
    iters: usize,
    default_num_prompts: u64,
    driver: &mut dyn Driver,
) -> Result<Vec<Row>> {
    check_not_in_bench(cfg, variable)?;
    if iters < 2 {
        bail!("the number of workload iterations must be at least 2, got {iters}");
    }
    let key = variable.key();
    let mut all = Vec::new();
    for serve in &cfg.serve_params {
        for_server(cfg, driver, serve, true, |run| {
            for bench in &cfg.bench_params {
                if !params::linked(serve, bench, &cfg.link_vars) {
                    continue;
                }
                let size = dataset_size(bench, &cfg.bench_cmd, default_num_prompts)?;
                let level = |run: &mut Runner<'_>, base: &Params, value: u64| {
                    run.driver.event(Event::Testing { variable, value });
                    let extra = ["WL-".to_owned(), format!("{key}={value}")];
                    let dir = comb_dir(&cfg.experiment_dir, serve, base, &extra);
                    run.comb(serve, &with(base, key, value), &dir)
                };
                let serial = level(run, &with(bench, "max_concurrency", 1), 1)?;
                let batch = level(run, &with(bench, "max_concurrency", size), size)?;
                let (Some(serial), Some(batch)) = (serial, batch) else {
                    continue;
                };
                let low = mean(&serial, |r| variable.estimate(r))?;
                let high = mean(&batch, |r| variable.estimate(r))?;
                run.driver.event(Event::WorkloadRange {
                    variable,
                    serial: low.ceil() as u64,
                    batch: high.floor() as u64,
                });
                all.extend(serial);
                for value in sla::workload_values(low, high, iters) {
                    all.extend(level(run, bench, value)?.unwrap_or_default());
                }
                all.extend(batch);
            }
            Ok(())
        })?;
    }
    finish(cfg, driver, &all)?;
    Ok(all)
}

#[cfg(test)]
mod tests;
