//! The start time of a server command: spawn to the ready check's first 2xx answer.
//!
//! The ready check defaults to `GET /health` at the command's `--host` and `--port`, as
//! vLLM's sweep waits for its servers (`sweep/server.py`): vLLM, SGLang, TGI and
//! llama.cpp's servers answer it 200 only once the model is loaded and the engine can take
//! requests, which is the moment vLLM's startup benchmark times (its `LLM(...)` returns
//! when the engine is ready). Any other URL can be given (`/v1/models` where a server has
//! no `/health`).
//!
//! Cold starts get fresh, empty caches: every variable of [`ServerStartupConfig::cache_env`]
//! points at its own new directory, removed after the start. vLLM's own cold start does
//! this for `VLLM_CACHE_ROOT` and, through inductor's `fresh_cache`, for
//! `TORCHINDUCTOR_CACHE_DIR` and `TRITON_CACHE_DIR`; bench's default list adds the CUDA
//! driver's JIT cache. The warm-ups and warm starts share one set of directories, which the
//! warm-ups fill (so warm starts never touch the user's own caches either).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use super::{Iterations, Phase, StartTimes, StartupResult, Step};
use crate::server_process::{ServerCommand, ServerProcess, join_command};

/// The cache variables a cold start makes fresh unless told otherwise: vLLM's
/// (`VLLM_CACHE_ROOT`: torch.compile artefacts and the rest of vLLM's cache),
/// inductor's and Triton's (what vLLM's `fresh_cache` replaces), and the CUDA driver's
/// PTX JIT cache (`CUDA_CACHE_PATH`). `XDG_CACHE_HOME` is not among them: the Hugging Face
/// hub cache lives under it by default, and a cold start should not download the model.
pub const DEFAULT_CACHE_ENV: [&str; 4] = [
    "VLLM_CACHE_ROOT",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "CUDA_CACHE_PATH",
];

/// `bench startup --serve-cmd`'s configuration.
#[derive(Debug, Clone)]
pub struct ServerStartupConfig {
    /// The server command line (program and arguments).
    pub argv: Vec<String>,
    /// GET until it answers 2xx (see [`default_ready_url`]).
    pub ready_url: String,
    /// Longest wait for one start, from the spawn.
    pub ready_timeout: Duration,
    /// Time between ready checks: the resolution of the measurement.
    pub poll: Duration,
    /// After SIGTERM, how long the server gets before SIGKILL.
    pub stop_grace: Duration,
    /// Variables pointed at fresh directories on cold starts and at the shared warm ones
    /// otherwise.
    pub cache_env: Vec<String>,
    /// Where the cache directories and each start's log (`<phase>-<n>/server.log`) go.
    pub work_dir: PathBuf,
    pub iterations: Iterations,
}

/// `/health` at the server's address as vLLM's sweep finds it in the command
/// ([`crate::sweep::server_base_url`]: `--host`, default localhost, and `-p`/`--port`,
/// default 8000).
pub fn default_ready_url(argv: &[String]) -> String {
    format!("{}/health", crate::sweep::server_base_url(argv))
}

/// Runs the cold starts, the warm-ups and the warm starts in turn. A start that fails
/// (the command exits, or is not ready in time) ends the benchmark with an error naming
/// the command and its log; the server is stopped in every case.
pub fn run(
    config: &ServerStartupConfig,
    on_step: &mut dyn FnMut(Step<'_>),
) -> Result<StartupResult> {
    config.iterations.check()?;
    if config.iterations.warmup == 0 && config.iterations.warm > 0 {
        on_step(Step::Note(
            "--num-iters-warmup 0: the first warm start finds the warm starts' shared caches \
             empty (each cold start's own are removed after it), so it pays what a cold start \
             pays; give --num-iters-warmup 1 or more to measure warm starts only",
        ));
    }
    std::fs::create_dir_all(&config.work_dir)
        .with_context(|| format!("creating {}", config.work_dir.display()))?;
    let warm_caches = config.work_dir.join("warm-cache");
    let mut result = StartupResult {
        cold: Vec::new(),
        warmup: Vec::new(),
        warm: Vec::new(),
        target: target_keys(config),
    };
    for (phase, index, of) in config.iterations.schedule() {
        on_step(Step::Starting { phase, index, of });
        let run_dir = config
            .work_dir
            .join(format!("{}-{}", phase.name(), index + 1));
        let caches = match phase {
            Phase::Cold => run_dir.join("cache"),
            Phase::Warmup | Phase::Warm => warm_caches.clone(),
        };
        let started = start_once(config, &run_dir, &caches, on_step)
            .with_context(|| format!("{} start {} of {of}", phase.name(), index + 1));
        if phase == Phase::Cold {
            remove_caches(&caches)?;
        }
        let times = started?;
        on_step(Step::Finished {
            phase,
            index,
            of,
            times: &times,
        });
        match phase {
            Phase::Cold => result.cold.push(times),
            Phase::Warmup => result.warmup.push(times),
            Phase::Warm => result.warm.push(times),
        }
    }
    remove_caches(&warm_caches)?;
    Ok(result)
}

/// One start: fresh or shared cache directories made, the server spawned with them,
/// awaited and stopped.
fn start_once(
    config: &ServerStartupConfig,
    run_dir: &Path,
    caches: &Path,
    on_step: &mut dyn FnMut(Step<'_>),
) -> Result<StartTimes> {
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let mut env = Vec::with_capacity(config.cache_env.len());
    for var in &config.cache_env {
        let dir = caches.join(var);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        env.push((var.clone(), dir.display().to_string()));
    }
    let command = ServerCommand {
        argv: config.argv.clone(),
        env,
        log: Some(run_dir.join("server.log")),
        cwd: None,
    };
    let mut server = ServerProcess::spawn(&command)?;
    on_step(Step::Spawned { pid: server.pid() });
    let ready = server.wait_ready(&config.ready_url, config.ready_timeout, config.poll);
    // Stopped before the result is looked at: a failed start leaves nothing running.
    let stopped = server.stop(config.stop_grace);
    let ready = ready?;
    stopped?;
    Ok(StartTimes {
        startup: ready.as_secs_f64(),
        engine: None,
    })
}

fn remove_caches(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing the cache directory {}", dir.display()))
        }
        _ => Ok(()),
    }
}

fn target_keys(config: &ServerStartupConfig) -> Map<String, Value> {
    Map::from_iter([
        ("serve_cmd".to_owned(), json!(join_command(&config.argv))),
        ("ready_url".to_owned(), json!(config.ready_url)),
        ("cache_env".to_owned(), json!(config.cache_env)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn default_ready_url_follows_vllms_address_rule() {
        assert_eq!(
            default_ready_url(&argv("vllm serve m")),
            "http://localhost:8000/health"
        );
        assert_eq!(
            default_ready_url(&argv("vllm serve m --host 10.0.0.2 -p 9000")),
            "http://10.0.0.2:9000/health"
        );
    }
}
