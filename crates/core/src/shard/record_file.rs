//! `--record-file PATH`: every finished request written to disk as it finishes, so that a
//! run killed midway (`kill -9`, the OOM killer, a reboot) keeps what it measured:
//! `bench merge PATH` makes the result of what the file holds.
//!
//! The file is a shard document ([`ShardDoc`]) in JSON lines, written as the run goes:
//! - line 1, `{"bench_record_file": 1, "head": {...}}`: what the run is (its workload, run
//!   settings and metric settings), known before it starts;
//! - one line per finished request, `{"record": {...}}`: a [`ShardRecord`], with the run
//!   tokenizer's counts of its texts, so that the merge needs no tokenizer;
//! - last, when the run ends (also when Ctrl-C stops it), `{"end": {...}}`: its clock, how
//!   it ended, and what was measured beside the records (the server's `/metrics`, probes).
//!
//! A file without its end line is a run that did not end: [`read`] makes it a shard
//! document marked interrupted, lasting to its last finished request, with the requests it
//! holds no record of counted as not sent.
//!
//! A writer thread takes the records from the decode thread over a channel, so a request
//! costs the run one record copy and one channel send, off the path of any request. It
//! flushes whenever it has written everything it was given, and at least once a second
//! under load: a killed process loses only the records still in the channel (the OS keeps
//! what was flushed; a power cut can lose what the OS had not yet written to the disk). A
//! write that fails (a full disk) stops the run with a reason that names the file; what
//! was written stays.

use std::collections::BTreeMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::{Shard, ShardDiagnostics, ShardDoc, ShardRecord, WorkloadId};
use crate::client::stop::StopSignal;
use crate::metrics::MetricsConfig;
use crate::probe::ProbeStats;
use crate::record::RequestRecord;
use crate::report::RunInfo;
use crate::report::save::Interruption;
use crate::server_metrics::report::ServerReport;
use crate::tokenizer::Tokenizer;

/// The version of the file's layout; `bench merge` reads only its own.
pub const FORMAT: u32 = 1;

/// The longest the writer holds written records before flushing them.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The first line: what the run is, before it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub workload: WorkloadId,
    /// The run's settings as the result reports them (its `date` is the start's).
    pub run: RunInfo,
    pub metrics_config: MetricsConfig,
    pub has_tokenizer: bool,
    pub shutdown_grace_s: f64,
    pub host: String,
    pub cores: usize,
}

/// The last line: how the run ended, and what was measured beside the records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    /// The run's settings as the result reports them, at the end.
    pub run: RunInfo,
    pub clock_origin_s: f64,
    pub diagnostics: ShardDiagnostics,
    pub interrupted: Option<Interruption>,
    pub server_metrics: Option<ServerReport>,
    #[serde(default)]
    pub endpoint_server_metrics: Vec<Option<ServerReport>>,
    pub probe: Option<ProbeStats>,
    /// Each counted prompt's block keys by request index, for the theoretical prefix-cache
    /// figures, which are computed when the run ends (a file without its end line has
    /// none, and its merge no such figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_keys: Option<BTreeMap<usize, Vec<u64>>>,
    /// Each request's seconds of audio by request index (audio datasets), for `rtfx`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub audio_seconds: BTreeMap<usize, f64>,
}

#[derive(Serialize, Deserialize)]
struct FirstLine {
    bench_record_file: u32,
    head: Head,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Record(Box<ShardRecord>),
    End(Box<End>),
}

/// The run's record file while it is written.
pub struct RecordFile {
    path: PathBuf,
    tx: Option<mpsc::Sender<RequestRecord>>,
    writer: JoinHandle<Result<BufWriter<std::fs::File>>>,
}

impl RecordFile {
    /// Creates (or truncates) the file at `path` and writes its first line; records sent
    /// to [`RecordFile::sink`] are written from then on. `tokenizer` counts each record's
    /// texts; `stop` is raised if a write fails.
    pub fn create(
        path: &Path,
        head: &Head,
        tokenizer: Option<Arc<Tokenizer>>,
        stop: Arc<StopSignal>,
    ) -> Result<RecordFile> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("--record-file {}: creating it", path.display()))?;
        let mut out = BufWriter::new(file);
        let first = FirstLine {
            bench_record_file: FORMAT,
            head: head.clone(),
        };
        serde_json::to_writer(&mut out, &first)?;
        out.write_all(b"\n")
            .and_then(|()| out.flush())
            .with_context(|| format!("--record-file {}: writing its first line", path.display()))?;
        let (tx, rx) = mpsc::channel::<RequestRecord>();
        let shown = path.display().to_string();
        let writer = std::thread::Builder::new()
            .name("bench-records".into())
            .spawn(move || write_records(out, rx, tokenizer.as_deref(), &stop, &shown))
            .context("starting the record file's writer")?;
        Ok(RecordFile {
            path: path.to_owned(),
            tx: Some(tx),
            writer,
        })
    }

    /// Where the run's finished records go.
    pub fn sink(&self) -> Option<mpsc::Sender<RequestRecord>> {
        self.tx.clone()
    }

    /// Waits for every record sent to be written, then writes the end line and syncs the
    /// file to the disk. Every other sender must be gone (the run has ended).
    pub fn finish(mut self, end: &End) -> Result<PathBuf> {
        drop(self.tx.take());
        let mut out = self
            .writer
            .join()
            .map_err(|_| anyhow::anyhow!("the record file's writer panicked"))??;
        let shown = self.path.display();
        serde_json::to_writer(&mut out, &Line::End(Box::new(end.clone())))?;
        out.write_all(b"\n")
            .and_then(|()| out.flush())
            .and_then(|()| out.get_ref().sync_all())
            .with_context(|| format!("--record-file {shown}: writing its end"))?;
        Ok(self.path)
    }
}

/// The writer thread: each record as a line, flushed once nothing more is waiting or a
/// second has passed. A failed write stops the run and ends the thread with the error.
fn write_records<W: Write>(
    mut out: BufWriter<W>,
    rx: mpsc::Receiver<RequestRecord>,
    tokenizer: Option<&Tokenizer>,
    stop: &StopSignal,
    shown: &str,
) -> Result<BufWriter<W>> {
    loop {
        let first = match rx.recv_timeout(FLUSH_EVERY) {
            Ok(record) => record,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // Everything already waiting (up to a second's worth), then one flush.
        let batch = Instant::now();
        let mut written = write_record(&mut out, first, tokenizer);
        while written.is_ok() && batch.elapsed() < FLUSH_EVERY {
            match rx.try_recv() {
                Ok(record) => written = write_record(&mut out, record, tokenizer),
                Err(_) => break,
            }
        }
        if let Err(e) = written.and_then(|()| out.flush().map_err(anyhow::Error::from)) {
            let why = format!("--record-file {shown}: {e:#}; the records written so far are kept");
            stop.stop(why.clone());
            bail!(why);
        }
    }
    out.flush()
        .with_context(|| format!("--record-file {shown}: flushing it"))?;
    Ok(out)
}

fn write_record(
    out: &mut impl Write,
    record: RequestRecord,
    tokenizer: Option<&Tokenizer>,
) -> Result<()> {
    let count = |text: &str| -> Result<Option<u32>> {
        match tokenizer {
            Some(t) => Ok(Some(t.count_tokens(text)? as u32)),
            None => Ok(None),
        }
    };
    let line = Line::Record(Box::new(ShardRecord {
        text_tokens: count(&record.generated_text)?,
        reasoning_tokens: match record.reasoning_text.is_empty() {
            true => None,
            false => count(&record.reasoning_text)?,
        },
        audio_seconds: None,
        prefix_keys: None,
        record,
    }));
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// The shard document in the record file at `path`; `None` when the file is not a record
/// file (its first line is not one's).
pub fn read(path: &Path) -> Result<Option<ShardDoc>> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = std::io::BufReader::new(file).lines();
    let Some(first) = lines.next().transpose()? else {
        return Ok(None);
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&first) else {
        return Ok(None);
    };
    match value.get("bench_record_file").and_then(|v| v.as_u64()) {
        None => return Ok(None),
        Some(f) if f == u64::from(FORMAT) => {}
        Some(f) => bail!(
            "{}: a record file of format {f}; this bench reads format {FORMAT}",
            path.display()
        ),
    }
    let first: FirstLine = serde_json::from_value(value)
        .with_context(|| format!("{} line 1: a malformed record file head", path.display()))?;
    let head = first.head;
    let (mut records, mut end) = (Vec::new(), None);
    let mut lines = lines.enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Record(record)) => records.push(*record),
            Ok(Line::End(e)) => end = Some(*e),
            // A kill can cut the last line short: what came before it stands.
            Err(_) if end.is_none() && lines.peek().is_none() => break,
            Err(e) => bail!(
                "{} line {}: not a line of a record file: {e}",
                path.display(),
                n + 2
            ),
        }
    }
    records.sort_by_key(|r| r.record.index);
    if let Some(end) = &mut end {
        for r in &mut records {
            let index = r.record.index;
            r.prefix_keys = end
                .prefix_keys
                .as_mut()
                .and_then(|keys| keys.remove(&index));
            r.audio_seconds = end.audio_seconds.get(&index).copied();
        }
    }
    Ok(Some(match end {
        Some(end) => ShardDoc {
            bench_shard_format: super::FORMAT,
            shard: end.diagnostics.shard,
            workload: head.workload,
            run: end.run,
            metrics_config: head.metrics_config,
            has_tokenizer: head.has_tokenizer,
            prefix_keys: end.prefix_keys.is_some(),
            clock_origin_s: end.clock_origin_s,
            diagnostics: end.diagnostics,
            interrupted: end.interrupted,
            shutdown_grace_s: head.shutdown_grace_s,
            server_metrics: end.server_metrics,
            endpoint_server_metrics: end.endpoint_server_metrics,
            probe: end.probe,
            records,
        },
        None => unfinished(path, head, records),
    }))
}

/// A run whose file has no end line: interrupted at its last finished request.
fn unfinished(path: &Path, head: Head, records: Vec<ShardRecord>) -> ShardDoc {
    let plain: Vec<RequestRecord> = records.iter().map(|r| r.record.clone()).collect();
    let duration_s = plain.iter().map(finished_at).fold(0.0, f64::max);
    let shard = Shard { index: 0, count: 1 };
    // A timed run (`--duration`) has no count to fall short of: what it did not send, it
    // was never going to.
    let not_sent = match head.run.duration_limit_s {
        Some(_) => 0,
        None => head.workload.requests.saturating_sub(plain.len()),
    };
    ShardDoc {
        bench_shard_format: super::FORMAT,
        shard,
        workload: head.workload.clone(),
        run: head.run,
        metrics_config: head.metrics_config,
        has_tokenizer: head.has_tokenizer,
        prefix_keys: false,
        // Not known without the end line: the start times count from the run's start.
        clock_origin_s: 0.0,
        diagnostics: ShardDiagnostics {
            shard,
            host: head.host,
            cores: head.cores,
            requests: head.workload.requests,
            sent: plain.len(),
            duration_s,
            schedule_lag_ms: crate::metrics::lag_summary(&plain),
            cpu: None,
            http_client: None,
            start_at: None,
            started_late_s: 0.0,
            clock_offset: None,
            clock_offset_note: None,
        },
        interrupted: Some(Interruption {
            reason: format!(
                "the run ended without finishing {} (killed?){}: its result is what the file \
                 holds, to the last request finished {duration_s:.3} s into the run",
                path.display(),
                last_written(path)
                    .map(|at| format!(", last written at {at}"))
                    .unwrap_or_default()
            ),
            not_sent,
            cancelled: 0,
        }),
        shutdown_grace_s: head.shutdown_grace_s,
        server_metrics: None,
        endpoint_server_metrics: Vec::new(),
        probe: None,
        records,
    }
}

/// When the file was last written (its modification time, local), which is within the
/// writer's flush interval of when the run ended.
fn last_written(path: &Path) -> Option<String> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let at: chrono::DateTime<chrono::Local> = modified.into();
    Some(at.format("%Y-%m-%d %H:%M:%S%.3f%:z").to_string())
}

/// Seconds from the run's start to a record's last output (its send when none came).
fn finished_at(record: &RequestRecord) -> f64 {
    let output = if record.succeeded() {
        record.latency
    } else {
        record.ttft + record.itl.iter().sum::<f64>()
    };
    record.start_time + output
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::FailureKind;

    fn head(requests: usize) -> Head {
        Head {
            workload: WorkloadId {
                requests,
                seed: 0,
                fingerprint: "f".into(),
            },
            run: crate::shard::tests::run_info(),
            metrics_config: MetricsConfig::default(),
            has_tokenizer: false,
            shutdown_grace_s: 5.0,
            host: "h".into(),
            cores: 2,
        }
    }

    fn record(index: usize, start: f64, latency: f64) -> RequestRecord {
        RequestRecord {
            index,
            start_time: start,
            ttft: latency / 2.0,
            latency,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn a_file_without_its_end_is_the_run_up_to_its_last_record_marked_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let stop = Arc::new(StopSignal::new());
        let file = RecordFile::create(&path, &head(10), None, stop.clone()).unwrap();
        let sink = file.sink().unwrap();
        for (i, start) in [(2, 0.5), (0, 0.0), (1, 0.25)] {
            sink.send(record(i, start, 1.0)).unwrap();
        }
        let failed = RequestRecord {
            outcome: Err(FailureKind::Reset.failure("reset")),
            ..record(3, 0.75, 0.0)
        };
        sink.send(failed).unwrap();
        drop(sink);
        // The run dies here: no end line, and a last line cut short by the kill.
        drop(file);
        std::thread::sleep(Duration::from_millis(100));
        let mut text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        text.push_str("{\"record\": {\"index\": 4, \"requ");
        std::fs::write(&path, text).unwrap();

        let doc = read(&path).unwrap().expect("a record file");
        let indices: Vec<usize> = doc.records.iter().map(|r| r.record.index).collect();
        assert_eq!(indices, [0, 1, 2, 3]);
        let interrupted = doc.interrupted.expect("marked interrupted");
        assert_eq!(interrupted.not_sent, 6);
        assert!(
            interrupted.reason.contains("killed?"),
            "{}",
            interrupted.reason
        );
        // The last to finish: request 2, sent at 0.5 s, for 1 s.
        assert_eq!(doc.diagnostics.duration_s, 1.5);
        assert_eq!(doc.diagnostics.sent, 4);
        assert!(!stop.is_stopped());
    }

    #[test]
    fn a_finished_file_is_the_runs_shard_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let file = RecordFile::create(&path, &head(2), None, Arc::new(StopSignal::new())).unwrap();
        let sink = file.sink().unwrap();
        sink.send(record(1, 0.1, 0.5)).unwrap();
        sink.send(record(0, 0.0, 0.5)).unwrap();
        drop(sink);
        let shard = Shard { index: 0, count: 1 };
        let end = End {
            run: crate::shard::tests::run_info(),
            clock_origin_s: 1234.5,
            diagnostics: ShardDiagnostics {
                shard,
                host: "h".into(),
                cores: 2,
                requests: 2,
                sent: 2,
                duration_s: 0.6,
                schedule_lag_ms: crate::metrics::LagSummary::default(),
                cpu: None,
                http_client: Some("h1".into()),
                start_at: None,
                started_late_s: 0.0,
                clock_offset: None,
                clock_offset_note: None,
            },
            interrupted: None,
            server_metrics: None,
            endpoint_server_metrics: Vec::new(),
            probe: None,
            prefix_keys: Some(BTreeMap::from([(0, vec![7, 8]), (1, vec![7])])),
            audio_seconds: BTreeMap::from([(1, 2.5)]),
        };
        file.finish(&end).unwrap();
        let doc = read(&path).unwrap().expect("a record file");
        assert_eq!(doc.records.len(), 2);
        assert_eq!(doc.interrupted, None);
        assert_eq!(doc.clock_origin_s, 1234.5);
        assert_eq!(doc.diagnostics, end.diagnostics);
        assert_eq!(doc.shard, shard);
        assert!(doc.prefix_keys);
        let keys: Vec<_> = doc.records.iter().map(|r| r.prefix_keys.clone()).collect();
        assert_eq!(keys, [Some(vec![7, 8]), Some(vec![7])]);
        let audio: Vec<_> = doc.records.iter().map(|r| r.audio_seconds).collect();
        assert_eq!(audio, [None, Some(2.5)]);
    }

    /// A writer whose disk fills after `room` bytes.
    #[derive(Debug)]
    struct Full {
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if buf.len() > self.room {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.room -= buf.len();
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_disk_stops_the_run_naming_the_file() {
        let stop = StopSignal::new();
        let (tx, rx) = mpsc::channel();
        for i in 0..50 {
            tx.send(record(i, 0.0, 1.0)).unwrap();
        }
        drop(tx);
        let out = BufWriter::with_capacity(64, Full { room: 2_000 });
        let error = write_records(out, rx, None, &stop, "/data/run.jsonl").unwrap_err();
        let reason = stop.reason().expect("the run is stopped").to_string();
        for text in [reason, error.to_string()] {
            assert!(text.contains("--record-file /data/run.jsonl"), "{text}");
            assert!(text.contains("No space left on device"), "{text}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_record_file_is_left_to_the_other_readers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard.json");
        std::fs::write(&path, "{\"bench_shard_format\": 1}").unwrap();
        assert!(read(&path).unwrap().is_none());
    }
}
