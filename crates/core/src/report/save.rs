//! `--save-result`, `--append-result`, `--save-detailed`, `--result-dir` and
//! `--result-filename`, as vLLM's `main` handles them: the same default file name, the
//! same bytes (Python `json.dump` formatting), appends separated by a newline, and the
//! PyTorch benchmark records written beside the result when asked
//! ([`SaveOptions::pytorch_format`]; vLLM asks its environment for
//! `SAVE_TO_PYTORCH_BENCHMARK_FORMAT`, bench always writes them).
//!
//! Unlike vLLM, which writes in place, every file is replaced atomically (temporary file,
//! fsync, rename), so a benchmark interrupted while saving never corrupts a result file
//! that holds earlier runs.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use serde_json::Value;

use super::json::{ResultDoc, pytorch_records, result_doc};
use super::run_info::{RunInfo, strategy_name};
use crate::metrics::Metrics;
use crate::pyjson::{self, float_repr};
use crate::side_reports::SideReports;

/// Where and how to save the result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaveOptions {
    pub save_result: bool,
    /// Keep the per-request lists (`input_lens`, `ttfts`, `itls`, ...).
    pub save_detailed: bool,
    /// Append to the file instead of replacing it (also saves without `save_result`).
    pub append_result: bool,
    /// Created when missing.
    pub result_dir: Option<PathBuf>,
    /// Replaces the default name (still placed under `result_dir`).
    pub result_filename: Option<String>,
    /// Also write `<name>.pytorch.json` (vLLM's PyTorch-benchmark records).
    pub pytorch_format: bool,
    /// Set when the run was stopped early: the result says so.
    pub interrupted: Option<Interruption>,
    /// Added to the file name before its `.json` (or at its end without one): `-run2` for
    /// the second of `--num-runs`, so that each run keeps its own file.
    pub run_suffix: Option<String>,
}

/// The result file's path (vLLM's `compute_result_filename`), or `None` when nothing is
/// to be saved. The default name is
/// `{label}-{request_rate}qps[-concurrency{N}]-{model basename}-{date}.json`, or with a
/// ramp-up `{label}-ramp-up-{strategy}-{start}qps-{end}qps[-concurrency{N}]-...`; the
/// label defaults to the backend and the rate is written as Python writes floats
/// (`10.0`, `inf`).
pub fn result_path(run: &RunInfo, options: &SaveOptions) -> Option<PathBuf> {
    if !(options.save_result || options.append_result) {
        return None;
    }
    let file_name = match &options.result_filename {
        Some(name) => name.clone(),
        None => {
            let base_model_id = run.model_id.rsplit('/').next().unwrap_or_default();
            let concurrency = run
                .max_concurrency
                .map(|n| format!("-concurrency{n}"))
                .unwrap_or_default();
            let label = run
                .label
                .as_deref()
                .filter(|l| !l.is_empty())
                .unwrap_or(&run.backend);
            let traffic = match &run.ramp_up {
                Some(ramp) => format!(
                    "ramp-up-{}-{}qps-{}qps",
                    strategy_name(ramp.strategy),
                    ramp.start_rps as u64,
                    ramp.end_rps as u64
                ),
                None => format!("{}qps", float_repr(run.request_rate)),
            };
            let date = run.date_string();
            format!("{label}-{traffic}{concurrency}-{base_model_id}-{date}.json")
        }
    };
    let file_name = match &options.run_suffix {
        Some(suffix) => with_suffix(&file_name, suffix),
        None => file_name,
    };
    Some(match &options.result_dir {
        Some(dir) => dir.join(file_name),
        None => PathBuf::from(file_name),
    })
}

/// `name` with `suffix` before its `.json` extension, or at its end without one.
pub fn with_suffix(name: &str, suffix: &str) -> String {
    match name.strip_suffix(".json") {
        Some(stem) => format!("{stem}{suffix}.json"),
        None => format!("{name}{suffix}"),
    }
}

/// Saves the result as requested and returns the result file's path (`None` when
/// nothing was requested). With `append_result` the JSON is appended to an existing file,
/// preceded by a newline when the file is not empty, as vLLM does.
///
/// Every file is replaced atomically ([`write_atomically`]): a crash or a kill while
/// saving leaves the previous file (for an append, every earlier result) intact. The JSON
/// is serialised straight into the file, never held whole in memory.
pub fn save(
    metrics: &Metrics,
    side: &SideReports,
    run: &RunInfo,
    options: &SaveOptions,
) -> Result<Option<PathBuf>> {
    let Some(path) = result_path(run, options) else {
        return Ok(None);
    };
    if let Some(dir) = &options.result_dir {
        fs::create_dir_all(dir)
            .with_context(|| format!("creating the result directory {}", dir.display()))?;
    }
    let mut result = result_doc(metrics, side, run, options.save_detailed);
    if let Some(interruption) = &options.interrupted {
        interruption.mark(&mut result);
    }
    let write_result = |out: &mut BufWriter<File>| {
        pyjson::to_writer(out, &result).context("serialising the result JSON")
    };
    if options.append_result {
        append_atomically_with(&path, write_result)
    } else {
        write_atomically_with(&path, write_result)
    }
    .with_context(|| format!("writing the result to {}", path.display()))?;

    if options.pytorch_format {
        let records = pytorch_records(&result, run);
        if !records.is_empty() {
            let pt_path = pytorch_path(&path);
            write_atomically_with(&pt_path, |out| {
                pyjson::to_writer(out, &records).context("serialising the PyTorch records")
            })
            .with_context(|| format!("writing {}", pt_path.display()))?;
        }
    }
    Ok(Some(path))
}

/// Appends a document to the file at `path` the way vLLM does (a newline first when the
/// file is not empty), but never in place: the old content is copied, and the document
/// that `write` writes after it, into a new file that then replaces the old one. An
/// append that dies half-way therefore cannot leave a truncated document after the
/// earlier results.
///
/// Concurrent appends from several `bench` processes are serialised with an advisory
/// lock on the directory, so that neither loses the other's result.
pub fn append_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let dir = parent_dir(path);
    let _lock = DirLock::exclusive(dir);
    let mut existing = match File::open(path) {
        Ok(file) => Some(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(e).with_context(|| format!("opening {} to append to it", path.display()));
        }
    };
    write_atomically_with(path, |out| {
        if let Some(old) = &mut existing {
            let copied = std::io::copy(old, out)
                .with_context(|| format!("copying {} to append to it", path.display()))?;
            if copied > 0 {
                out.write_all(b"\n")?;
            }
        }
        write(out)
    })
}

/// Replaces the file at `path` with `parts` laid end to end (see
/// [`write_atomically_with`]).
pub fn write_atomically(path: &Path, parts: &[&[u8]]) -> Result<()> {
    write_atomically_with(path, |out| {
        for part in parts {
            out.write_all(part)?;
        }
        Ok(())
    })
}

/// Replaces the file at `path` with what `write` writes, so that any reader, and the
/// disk after a crash or a SIGKILL, sees either the old file or the whole new one.
///
/// The bytes go to a temporary file in the same directory (a rename is only atomic
/// within one file system), are flushed to disk, and the temporary file is renamed over
/// `path`; the directory is then flushed so the rename itself survives a power loss. The
/// replaced file's permissions are kept, and a symbolic link is followed so the file it
/// points to is replaced, not the link. A failed write removes its temporary file; a
/// killed one can leave it behind (named `.NAME.PID-N.tmp`), never a damaged `path`.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let path = match fs::canonicalize(path) {
        Ok(real) if path.is_symlink() => real,
        _ => path.to_path_buf(),
    };
    let dir = parent_dir(&path);
    let name = path
        .file_name()
        .with_context(|| format!("{} does not name a file", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        if let Ok(old) = fs::metadata(&path) {
            file.set_permissions(old.permissions())
                .with_context(|| format!("copying the permissions of {}", path.display()))?;
        }
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&mut out).with_context(|| format!("writing {}", tmp.display()))?;
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.sync_all()
            .with_context(|| format!("flushing {} to disk", tmp.display()))?;
        fs::rename(&tmp, &path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    // Without this the rename may be lost in a power failure; the data is safe either way.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Distinguishes the temporary files of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An advisory `flock` on a directory, released on drop. Best effort: where the file
/// system has no locks the append goes ahead unlocked.
struct DirLock(Option<File>);

impl DirLock {
    fn exclusive(dir: &Path) -> DirLock {
        let Ok(file) = File::open(dir) else {
            return DirLock(None);
        };
        // SAFETY: flock on a descriptor we own; it blocks until the lock is ours.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0;
        DirLock(locked.then_some(file))
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if let Some(file) = &self.0 {
            // SAFETY: unlocking the descriptor locked above, still open.
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

/// Why a run ended before its workload did. Written into the result so that its numbers
/// are never mistaken for those of a full run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Interruption {
    /// What stopped it (`SIGINT`, `SIGTERM`, a plugin that kept failing).
    pub reason: String,
    /// Requests never sent; not counted as failed.
    pub not_sent: usize,
    /// Requests still running at the end of the shutdown grace period, cancelled and
    /// counted as failed (error kind `interrupted`).
    pub cancelled: usize,
}

impl Interruption {
    /// Adds `interrupted`, `interrupt_reason`, `requests_not_sent` and
    /// `requests_cancelled` after vLLM's keys (a full run has none of them).
    pub fn mark(&self, result: &mut ResultDoc) {
        result.insert("interrupted", Value::Bool(true));
        result.insert("interrupt_reason", Value::from(self.reason.clone()));
        result.insert("requests_not_sent", Value::from(self.not_sent));
        result.insert("requests_cancelled", Value::from(self.cancelled));
    }
}

/// `{os.path.splitext(file_name)[0]}.pytorch.json`.
fn pytorch_path(result: &Path) -> PathBuf {
    result.with_extension("pytorch.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends a document given as bytes.
    fn append_atomically(path: &Path, doc: &[u8]) -> Result<()> {
        append_atomically_with(path, |out| Ok(out.write_all(doc)?))
    }

    /// Files in `dir` other than `keep`: leftovers of a write.
    fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !keep.contains(&n.as_str()))
            .collect()
    }

    #[test]
    fn a_run_suffix_goes_before_the_extension() {
        assert_eq!(with_suffix("res.json", "-run2"), "res-run2.json");
        assert_eq!(with_suffix("res", "-run2"), "res-run2");
        let run = crate::report::tests::run();
        let options = SaveOptions {
            save_result: true,
            run_suffix: Some("-run3".into()),
            ..SaveOptions::default()
        };
        let default = result_path(&run, &options).unwrap();
        assert!(
            default.to_string_lossy().ends_with("-run3.json"),
            "{default:?}"
        );
        let named = SaveOptions {
            result_filename: Some("x.json".into()),
            result_dir: Some("out".into()),
            ..options
        };
        assert_eq!(
            result_path(&run, &named).unwrap(),
            Path::new("out/x-run3.json")
        );
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        write_atomically(&path, &[b"{\"a\": ", b"1}"]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\": 1}");
        write_atomically(&path, &[b"{}"]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        assert!(others(dir.path(), &["r.json"]).is_empty());
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty directory: the rename fails after the data is written.
        let path = dir.path().join("r.json");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), b"old").unwrap();
        let err = write_atomically(&path, &[b"new"]).unwrap_err();
        assert!(format!("{err:#}").contains("renaming"), "{err:#}");
        assert_eq!(fs::read(path.join("inside")).unwrap(), b"old");
        assert!(others(dir.path(), &["r.json"]).is_empty());
    }

    #[test]
    fn append_keeps_the_old_bytes_and_adds_a_newline_and_the_new_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        append_atomically(&path, b"{\"run\": 1}").unwrap();
        // The first document goes into a new file without a newline, as vLLM's "a+".
        assert_eq!(fs::read(&path).unwrap(), b"{\"run\": 1}");
        append_atomically(&path, b"{\"run\": 2}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"run\": 1}\n{\"run\": 2}");
        assert!(others(dir.path(), &["r.json"]).is_empty());
    }

    #[test]
    fn permissions_and_symbolic_links_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, b"old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        append_atomically(&link, b"new").unwrap();
        assert!(link.is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"old\nnew");
        assert_eq!(
            fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    /// A reader polling the file while it is rewritten with large documents only ever
    /// sees one of the complete documents. (An in-place write would expose a truncated
    /// or half-written file to it.) What a SIGKILL leaves is tested end to end in
    /// `tests/e2e/interrupts.rs`.
    #[test]
    fn readers_never_see_a_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let a = vec![b'a'; 4 << 20];
        let b = vec![b'b'; 3 << 20];
        write_atomically(&path, &[&a]).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = std::thread::spawn({
            let (path, done, a, b) = (path.clone(), done.clone(), a.clone(), b.clone());
            move || {
                let mut reads = 0;
                while !done.load(Ordering::Relaxed) {
                    let got = fs::read(&path).unwrap();
                    assert!(got == a || got == b, "partial file of {} bytes", got.len());
                    reads += 1;
                }
                reads
            }
        });
        for i in 0..20 {
            write_atomically(&path, &[if i % 2 == 0 { &b } else { &a }]).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    }

    #[test]
    fn concurrent_appends_lose_no_result() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        append_atomically(&path, format!("{{\"w\": {w}, \"i\": {i}}}").as_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let text = fs::read_to_string(&path).unwrap();
        let mut docs: Vec<&str> = text.split('\n').collect();
        assert_eq!(docs.len(), 100);
        docs.sort();
        docs.dedup();
        assert_eq!(docs.len(), 100);
    }

    #[test]
    fn an_interrupted_result_says_so() {
        let mut result = ResultDoc::default();
        result.insert("completed", Value::from(3));
        Interruption {
            reason: "SIGINT received".into(),
            not_sent: 7,
            cancelled: 2,
        }
        .mark(&mut result);
        let keys: Vec<&str> = result.keys().collect();
        assert_eq!(
            keys,
            [
                "completed",
                "interrupted",
                "interrupt_reason",
                "requests_not_sent",
                "requests_cancelled"
            ]
        );
        assert_eq!(result.get("interrupted"), Some(&Value::Bool(true)));
        assert_eq!(result.get("requests_not_sent"), Some(&Value::from(7)));
    }
}
