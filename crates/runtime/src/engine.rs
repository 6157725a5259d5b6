//! The process-wide wasmtime engine, its epoch ticker, and the compiled-component cache.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use crate::error::wasm_error;

/// A callback for [`CompileEvent`]s.
#[derive(Clone)]
pub struct CompileNotice(pub Arc<dyn Fn(&CompileEvent<'_>) + Send + Sync>);

impl fmt::Debug for CompileNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CompileNotice")
    }
}

/// The compilation of a component the cache does not hold.
#[derive(Debug)]
pub enum CompileEvent<'a> {
    Started {
        plugin: &'a str,
        /// The component's size in bytes.
        bytes: usize,
    },
    Finished {
        plugin: &'a str,
        elapsed: Duration,
        /// Where the compiled code was cached, when it was.
        cached_at: Option<&'a Path>,
    },
}

/// How often the ticker thread advances the engine's epoch: the granularity of call time
/// budgets. Coarse enough to cost nothing, fine enough that a budget ends on time.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The one engine of this process: compiled code and the epoch counter are shared by every
/// plugin, so a component compiled once serves every store.
pub(crate) fn engine() -> Result<Engine> {
    static ENGINE: OnceLock<std::result::Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config.wasm_component_model(true);
            // Interrupts guest code that runs past its call's deadline (loops included).
            config.epoch_interruption(true);
            let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
            spawn_ticker(&engine).map_err(|e| format!("starting the epoch ticker thread: {e}"))?;
            Ok(engine)
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("creating the WebAssembly engine: {e}"))
}

/// A plain thread that ticks the epoch; it holds only a weak reference, so it ends if the
/// engine is ever dropped.
fn spawn_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("bench-epoch-ticker".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .map(drop)
}

/// The number of epoch ticks that covers `budget` (rounded up, plus one because the
/// current tick is already partly spent).
pub(crate) fn budget_ticks(budget: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    u64::try_from(budget.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX / 2) + 1
}

/// The compile cache's usual directory, from the environment: `$BENCH_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/bench`, else `~/.cache/bench`. For the CLI: the library reads no
/// environment, it takes the directory in [`super::RuntimeConfig::cache_dir`].
pub fn cache_dir_from_env() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("BENCH_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("bench")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/bench")))
}

/// The compiled components cached in `dir` (the cache directory the CLI uses): their
/// count and total size in bytes.
pub fn cache_usage(dir: &Path) -> Result<(usize, u64)> {
    let components = dir.join("components");
    let entries = match std::fs::read_dir(&components) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", components.display())),
    };
    let (mut count, mut bytes) = (0, 0);
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", components.display()))?;
        if entry.path().extension().is_some_and(|e| e == "cwasm") {
            count += 1;
            bytes += entry.metadata().map_or(0, |m| m.len());
        }
    }
    Ok((count, bytes))
}

/// Deletes every compiled component cached in `dir` (the next load of each plugin
/// compiles it again); returns how many files and bytes were freed.
pub fn clear_cache(dir: &Path) -> Result<(usize, u64)> {
    let usage = cache_usage(dir)?;
    let components = dir.join("components");
    match std::fs::remove_dir_all(&components) {
        Ok(()) => Ok(usage),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((0, 0)),
        Err(e) => Err(e).with_context(|| format!("deleting {}", components.display())),
    }
}

/// A `Hasher` over SHA-256, so the engine's compatibility hash gives the same cache key in
/// every run of the same binary (std's `DefaultHasher` makes no such promise).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(
            digest[..8]
                .try_into()
                .expect("a SHA-256 digest has 32 bytes"),
        )
    }
}

/// The hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache file for `wasm` compiled by `engine`: keyed by the wasm's hash and the
/// engine's compatibility hash (wasmtime version, target, settings).
fn cache_path(dir: &Path, engine: &Engine, wasm: &[u8]) -> PathBuf {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let engine_key = hex(&hasher.0.finalize()[..8]);
    dir.join("components")
        .join(format!("{}-{engine_key}.cwasm", sha256_hex(wasm)))
}

/// Compiles `wasm` into a component, reusing the compiled code cached in `cache_dir` when
/// there is some. A cache that cannot be read or written only costs a warning.
pub(crate) fn compile(
    engine: &Engine,
    wasm: &[u8],
    cache_dir: Option<&Path>,
    plugin: &str,
    notice: Option<&CompileNotice>,
) -> Result<Component> {
    // The CLI describes a plugin while it parses the command line and loads it again to
    // run it. The second load reads the disk cache the first one wrote; where there is
    // none (no cache directory, or it could not be written), the process keeps the
    // compiled component instead, so the plugin is not compiled, and announced, twice.
    // Keyed by the cache directory too: a runtime given a usable one fills it.
    type Memo = HashMap<(String, Option<PathBuf>), Component>;
    static UNCACHED: OnceLock<Mutex<Memo>> = OnceLock::new();
    let uncached = UNCACHED.get_or_init(Default::default);
    let key = (sha256_hex(wasm), cache_dir.map(Path::to_path_buf));
    if let Some(component) = uncached.lock().expect("compiled components").get(&key) {
        return Ok(component.clone());
    }
    let (component, on_disk) = compile_or_load(engine, wasm, cache_dir, plugin, notice)?;
    if !on_disk {
        uncached
            .lock()
            .expect("compiled components")
            .insert(key, component.clone());
    }
    Ok(component)
}

/// [`compile`] without the process's own memo: from the disk cache, else compiled; with
/// whether the disk cache holds it now.
fn compile_or_load(
    engine: &Engine,
    wasm: &[u8],
    cache_dir: Option<&Path>,
    plugin: &str,
    notice: Option<&CompileNotice>,
) -> Result<(Component, bool)> {
    let path = cache_dir.map(|dir| cache_path(dir, engine, wasm));
    if let Some(path) = &path
        && path.is_file()
    {
        // SAFETY: the file is one this process family wrote with `Component::serialize`
        // into bench's own cache directory, under a name that binds it to the exact wasm
        // bytes and engine configuration; wasmtime checks the header and version again.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(component) => return Ok((component, true)),
            Err(e) => tracing::warn!(
                "ignoring the unusable compiled-plugin cache entry {}: {e:#}",
                path.display()
            ),
        }
    }
    let tell = |event: CompileEvent<'_>| {
        if let Some(CompileNotice(notice)) = notice {
            notice(&event);
        }
    };
    tell(CompileEvent::Started {
        plugin,
        bytes: wasm.len(),
    });
    let started = Instant::now();
    let component = Component::from_binary(engine, wasm)
        .map_err(wasm_error)
        .with_context(|| format!("plugin '{plugin}': compiling the WebAssembly component"))?;
    let mut cached_at = None;
    if let Some(path) = &path {
        match store_in_cache(&component, path) {
            Ok(()) => cached_at = Some(path.as_path()),
            Err(e) => tracing::warn!(
                "could not cache the compiled plugin '{plugin}' at {}: {e:#}",
                path.display()
            ),
        }
    }
    tell(CompileEvent::Finished {
        plugin,
        elapsed: started.elapsed(),
        cached_at,
    });
    Ok((component, cached_at.is_some()))
}

/// Writes the serialized component next to its final name and renames it into place, so a
/// concurrent reader never sees a half-written file.
fn store_in_cache(component: &Component, path: &Path) -> Result<()> {
    let bytes = component.serialize().map_err(wasm_error)?;
    let dir = path.parent().context("cache path has no parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Unique per process and per call, so concurrent writers never share a temporary file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let unique = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{unique}", std::process::id()));
    std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_covers_the_whole_duration() {
        assert_eq!(budget_ticks(Duration::from_secs(1)), 101);
        assert_eq!(budget_ticks(Duration::from_millis(15)), 3);
        assert!(budget_ticks(Duration::MAX) > 1 << 40);
    }

    #[test]
    fn cache_key_depends_on_the_wasm_bytes() {
        let engine = engine().unwrap();
        let dir = Path::new("/cache");
        let a = cache_path(dir, &engine, b"a");
        assert_eq!(a, cache_path(dir, &engine, b"a"));
        assert_ne!(a, cache_path(dir, &engine, b"b"));
        assert!(a.starts_with("/cache/components"));
    }
}
