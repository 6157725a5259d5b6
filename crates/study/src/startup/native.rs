//! The start time of the native engine: `Engine::load` to its first generated token.
//!
//! vLLM's benchmark starts each iteration in a new process; bench measures the engine in
//! its own process, so "cold" cannot mean a new process. The engine keeps no compile
//! cache: what a cold start pays that a warm one does not is reading the weights from
//! disk. So here:
//!
//! - a **cold** start first drops the model's files from the operating system's page
//!   cache (`posix_fadvise(POSIX_FADV_DONTNEED)`), so the load reads them from the disk;
//!   the first start of the run, a cold one, also pays what a process pays once (candle's
//!   thread pool, a CUDA context). Where the file system keeps the pages regardless
//!   (tmpfs), a [`Step::Note`] says so: those cold loads read memory.
//! - **warm-ups** load the model unmeasured, leaving its files in the page cache, and
//!   **warm** starts load it again from there.
//!
//! Each start ends at the first token of a one-token `Hello` prompt (one token, greedy),
//! and the engine is dropped before the next start. The result splits the time into
//! `load` and `first_token`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use super::{EngineTimes, Phase, StartTimes, StartupResult, Step};
use bench_core::engine::{Engine, EngineConfig, Events, FinishReason, GenRequest, Sampling};

/// `bench startup --model`'s configuration.
#[derive(Debug, Clone)]
pub struct NativeStartupConfig {
    /// `model` resolved to a local path (see [`bench_core::targets::engine::resolve_model`]).
    pub engine: EngineConfig,
    /// The model as the user named it, for the result.
    pub model: String,
    pub iterations: super::Iterations,
}

/// Runs the cold starts, the warm-ups and the warm starts in turn.
pub fn run(
    config: &NativeStartupConfig,
    on_step: &mut dyn FnMut(Step<'_>),
) -> Result<StartupResult> {
    config.iterations.check()?;
    let files = model_files(&config.engine.model)?;
    let mut result = StartupResult {
        cold: Vec::new(),
        warmup: Vec::new(),
        warm: Vec::new(),
        target: Map::new(),
    };
    let mut noted_resident = false;
    for (phase, index, of) in config.iterations.schedule() {
        on_step(Step::Starting { phase, index, of });
        if phase == Phase::Cold {
            let (resident, total) = evict(&files)?;
            if !noted_resident && total > 0 && resident * 2 > total {
                noted_resident = true;
                on_step(Step::Note(&format!(
                    "the page cache kept {} of the {} bytes of the model's files after \
                     posix_fadvise(DONTNEED) (a file system such as tmpfs keeps them): cold \
                     loads read them from memory",
                    resident, total
                )));
            }
        }
        let (times, engine) = start_once(&config.engine)
            .with_context(|| format!("{} start {} of {of}", phase.name(), index + 1))?;
        if result.target.is_empty() {
            let info = engine.info();
            result.target = Map::from_iter([
                ("model".to_owned(), json!(config.model)),
                ("engine_device".to_owned(), json!(info.device.to_string())),
                ("engine_weights".to_owned(), json!(info.weights)),
                ("engine_weight_bytes".to_owned(), json!(info.weight_bytes)),
                ("engine_parameters".to_owned(), Value::from(info.parameters)),
                ("engine_threads".to_owned(), json!(info.threads)),
            ]);
        }
        drop(engine);
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
    Ok(result)
}

/// Loads the engine and generates one token.
fn start_once(config: &EngineConfig) -> Result<(StartTimes, Engine)> {
    let started = Instant::now();
    let mut engine =
        Engine::load(config).with_context(|| format!("loading {}", config.model.display()))?;
    let loaded = Instant::now();
    let prompt: Vec<u32> = engine
        .tokenizer()
        .encode("Hello", false)
        .map_err(|e| anyhow::anyhow!("tokenizing the prompt: {e}"))?
        .get_ids()
        .to_vec();
    if prompt.is_empty() {
        bail!("the model's tokenizer gives no token for the prompt `Hello`");
    }
    let request = GenRequest {
        prompt,
        max_tokens: 1,
        ignore_eos: true,
        sampling: Sampling::default(),
        not_before: None,
    };
    let mut first = FirstToken(None);
    engine
        .generate(std::slice::from_ref(&request), &mut first)
        .context("generating the first token")?;
    let Some(at) = first.0 else {
        bail!("the engine generated no token");
    };
    let times = StartTimes {
        startup: (at - started).as_secs_f64(),
        engine: Some(EngineTimes {
            load: (loaded - started).as_secs_f64(),
            first_token: (at - loaded).as_secs_f64(),
        }),
    };
    Ok((times, engine))
}

/// The time of the first sampled token.
struct FirstToken(Option<Instant>);

impl Events for FirstToken {
    fn token(&mut self, _index: usize, _token: u32, at: Instant) {
        self.0.get_or_insert(at);
    }

    fn finished(&mut self, _index: usize, _reason: FinishReason, _at: Instant) {}
}

/// The files a load reads: the `.gguf` file, or every file of the model directory.
fn model_files(model: &Path) -> Result<Vec<PathBuf>> {
    if model.is_file() {
        return Ok(vec![model.to_path_buf()]);
    }
    let entries =
        std::fs::read_dir(model).with_context(|| format!("reading {}", model.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading {}", model.display()))?
            .path();
        if path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Drops `files` from the page cache; returns the bytes still resident afterwards and
/// the files' total size.
fn evict(files: &[PathBuf]) -> Result<(u64, u64)> {
    let (mut resident, mut total) = (0, 0);
    for path in files {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: posix_fadvise on an open descriptor; offset 0, length 0 is the whole file.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            bail!(
                "dropping {} from the page cache: {}",
                path.display(),
                std::io::Error::from_raw_os_error(rc)
            );
        }
        let (r, t) = residency(&file).with_context(|| format!("mapping {}", path.display()))?;
        resident += r;
        total += t;
    }
    Ok((resident, total))
}

/// Bytes of `file` in the page cache (mincore(2) over a read-only mapping), and its size.
fn residency(file: &File) -> std::io::Result<(u64, u64)> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok((0, 0));
    }
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    // SAFETY: a fresh read-only shared mapping of an open file, unmapped below; mincore
    // writes one byte per page into `pages`, which has that many.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mut pages = vec![0u8; len.div_ceil(page) as usize];
        let rc = libc::mincore(addr, len as usize, pages.as_mut_ptr());
        let err = std::io::Error::last_os_error();
        libc::munmap(addr, len as usize);
        if rc != 0 {
            return Err(err);
        }
        let resident = pages.iter().filter(|&&p| p & 1 == 1).count() as u64;
        Ok(((resident * page).min(len), len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Whether `path` is on a tmpfs, whose pages cannot be dropped.
    fn on_tmpfs(path: &Path) -> bool {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: statfs(2) into a zeroed struct of the right type.
        unsafe {
            let mut st: libc::statfs = std::mem::zeroed();
            libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type == libc::TMPFS_MAGIC
        }
    }

    #[test]
    fn evict_drops_a_file_from_the_page_cache() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&vec![7u8; 256 * 1024]).unwrap();
        // Written back first: dirty pages are not dropped.
        file.as_file().sync_all().unwrap();
        let f = File::open(file.path()).unwrap();
        let (resident, total) = residency(&f).unwrap();
        assert_eq!((resident, total), (256 * 1024, 256 * 1024), "just written");
        let (resident, total) = evict(&[file.path().to_path_buf()]).unwrap();
        assert_eq!(total, 256 * 1024);
        if !on_tmpfs(file.path()) {
            assert_eq!(resident, 0, "{} kept after eviction", resident);
        }
    }
}
