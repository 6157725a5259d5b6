//! `bench throughput` and `bench latency`: vLLM's offline benchmarks
//! (`vllm/benchmarks/throughput.py` and `latency.py`), on two kinds of target.
//!
//! vLLM runs them on its in-process engine. Here the target is either a server reached
//! through a backend plugin (the same [`HttpTarget`] as `bench serve`) or the native
//! engine in this process ([`EngineTarget`], candle on the CPU or a GPU), so one command
//! line compares a model on this machine with a server, and the two report the same keys.
//!
//! - **throughput**: the whole workload is released at once (no rate or concurrency cap
//!   unless asked), and the run's elapsed time gives vLLM's `requests_per_second` and
//!   `tokens_per_second` (prompt plus output tokens, per second).
//! - **latency**: one batch of `--batch-size` requests (vLLM's dummy prompts are the
//!   `random` dataset at `--input-len`, with `--output-len` tokens each), run to completion
//!   `--num-iters-warmup` times unmeasured, then `--num-iters` times; each iteration's
//!   time from release to the last token is one latency.
//!
//! Both follow vLLM's sampling (temperature 1.0, top-p 1.0, EOS ignored, so every request
//! generates its full length) and count tokens as vLLM does: the prompt tokens the model
//! processed (the server's usage, else the dataset's count) and every generated token.
//! The library prints nothing; results reach the [`Observer`] and, with `--output-json`,
//! a file with vLLM's keys (and bench's extra keys after them) plus the PyTorch-benchmark
//! records beside it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::benchmark::{Drive, Executed, LoadConfig, execute, runtime};
use crate::client::load::Releases;
use crate::gpu_observer::GpuObserver;
use crate::observer::{Event, Observer};
use crate::record::RequestRecord;
use crate::report::offline::{Concurrency, EngineSummary, LatencyResult, ThroughputResult};
use crate::runtime::RequestSpec;
use crate::targets::engine::{EngineTarget, NativeConfig, NativeOpened, open_native};
use crate::targets::http::{self, HttpConfig, HttpTarget};
use crate::targets::{RunOptions, Target, WarmUp};
use crate::tokenizer::Tokenizer;
use crate::workload::{self, Workload, WorkloadConfig};

/// What the offline benchmarks run on.
#[derive(Debug, Clone)]
pub enum OfflineTarget {
    /// A server, through a backend plugin.
    Http(HttpConfig),
    /// The native engine in this process.
    Native(NativeConfig),
}

/// What both offline benchmarks share.
#[derive(Debug, Clone)]
pub struct OfflineConfig {
    /// The model: for a server its name (`None`: the first the server lists); for the
    /// native engine a Hugging Face directory, a `.gguf` file, or a hub id whose copy is
    /// in the local hub cache (nothing is downloaded).
    pub model: Option<String>,
    /// The name the server's API knows the model by; `None`: the model's.
    pub served_model_name: Option<String>,
    /// The tokenizer (see [`Tokenizer::load_from`]); `None`: the model's own (for the
    /// native engine, the model directory's `tokenizer.json` or the GGUF's vocabulary).
    pub tokenizer: Option<String>,
    pub workload: WorkloadConfig,
    pub target: OfflineTarget,
    /// vLLM's `--n`: sequences generated per prompt. Each prompt is run `n` times (a
    /// server's completions API has no `n` in vLLM's request functions); its prompt
    /// tokens count once, as in vLLM's engine, its output tokens `n` times.
    pub n: u32,
    /// Rate, concurrency cap, ready check, warm-ups and GPU telemetry: throughput's
    /// defaults send everything at once, as vLLM's `llm.generate` takes the whole list.
    pub load: LoadConfig,
    /// The command line as vLLM's `vars(args)`, for the PyTorch-benchmark records.
    pub command_line: Map<String, Value>,
}

/// `bench throughput`'s configuration.
#[derive(Debug, Clone)]
pub struct ThroughputConfig {
    pub offline: OfflineConfig,
    /// vLLM's `--output-json`.
    pub output_json: Option<PathBuf>,
}

/// `bench latency`'s configuration: the batch is the workload (`num_prompts` requests).
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    pub offline: OfflineConfig,
    pub num_iters_warmup: u32,
    pub num_iters: u32,
    /// vLLM's `--output-json`.
    pub output_json: Option<PathBuf>,
}

/// What a finished offline benchmark returns to its caller.
#[derive(Debug)]
pub struct OfflineOutcome<R> {
    pub result: R,
    /// Where `--output-json` was written.
    pub saved: Option<PathBuf>,
    /// Set when the run was stopped early (Ctrl-C): then nothing is saved.
    pub stopped: Option<crate::client::stop::StopReason>,
}

/// The model and workload opened for a target, before any request.
// One per run: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Opened {
    Native(NativeOpened),
    Http {
        config: HttpConfig,
        workload: Workload,
        model: String,
        served_model: String,
    },
}

impl Opened {
    fn model(&self) -> &str {
        match self {
            Opened::Native(n) => &n.model,
            Opened::Http { model, .. } => model,
        }
    }

    fn engine_summary(&self) -> Option<EngineSummary> {
        match self {
            Opened::Native(n) => Some(EngineSummary::from(n.engine.info())),
            Opened::Http { .. } => None,
        }
    }

    fn workload_mut(&mut self) -> &mut Workload {
        match self {
            Opened::Native(n) => &mut n.workload,
            Opened::Http { workload, .. } => workload,
        }
    }
}

fn open(config: &OfflineConfig, observer: &mut dyn Observer) -> Result<Opened> {
    match &config.target {
        OfflineTarget::Native(native) => Ok(Opened::Native(open_native(
            config.model.as_deref(),
            config.tokenizer.as_deref(),
            &config.workload,
            native,
            observer,
        )?)),
        OfflineTarget::Http(http_config) => {
            let model = match &config.model {
                Some(m) => m.clone(),
                None => {
                    observer.event(Event::FetchingModel);
                    let id = runtime()?.block_on(http::first_model(
                        http_config.base_url(),
                        &http_config.headers,
                        http_config.tls,
                    ))?;
                    observer.event(Event::ModelFound { id: &id });
                    id
                }
            };
            let tokenizer_id = config.tokenizer.as_deref().unwrap_or(&model);
            let workload = workload::load(&config.workload, tokenizer_id, observer)?;
            Ok(Opened::Http {
                config: http_config.clone(),
                served_model: config
                    .served_model_name
                    .clone()
                    .unwrap_or_else(|| model.clone()),
                workload,
                model,
            })
        }
    }
}

/// Each prompt `n` times in a row, the copies' ids suffixed `-1`, `-2`, ...; returns the
/// copy number of each request.
fn replicate(specs: Vec<RequestSpec>, n: u32) -> (Vec<RequestSpec>, Vec<u32>) {
    if n <= 1 {
        let copies = vec![0; specs.len()];
        return (specs, copies);
    }
    let mut out = Vec::with_capacity(specs.len() * n as usize);
    let mut copies = Vec::with_capacity(out.capacity());
    for spec in specs {
        for k in 0..n {
            let mut copy = spec.clone();
            if k > 0 {
                copy.request_id = spec.request_id.as_ref().map(|id| format!("{id}-{k}"));
            }
            out.push(copy);
            copies.push(k);
        }
    }
    (out, copies)
}

/// Prompt and output tokens of successful records: a prompt's tokens once (its first
/// copy that succeeded, by `copies`), every output.
fn count_tokens(
    records: &[RequestRecord],
    copies: &[u32],
    tokenizer: Option<&Tokenizer>,
) -> Result<(u64, u64)> {
    let mut prompt = 0u64;
    let mut output = 0u64;
    let mut counted_prompt = false;
    for r in records {
        if copies.get(r.index) == Some(&0) {
            counted_prompt = false;
        }
        if !r.succeeded() {
            continue;
        }
        if !counted_prompt {
            prompt += u64::from(r.usage_prompt_len.unwrap_or(r.prompt_len));
            counted_prompt = true;
        }
        output += match (r.output_tokens, tokenizer) {
            (Some(n), _) => u64::from(n),
            (None, Some(t)) => t
                .count_tokens(&r.generated_text)
                .with_context(|| format!("counting the output of request {}", r.request_id))?
                as u64,
            (None, None) => 1,
        };
    }
    Ok((prompt, output))
}

/// Runs `bench throughput`: see the module documentation.
pub fn throughput(
    config: &ThroughputConfig,
    observer: &mut dyn Observer,
) -> Result<OfflineOutcome<ThroughputResult>> {
    let offline = &config.offline;
    let mut opened = open(offline, observer)?;
    let rt = runtime()?;
    let engine = opened.engine_summary();
    let model = opened.model().to_owned();
    let mut observer = GpuObserver::new(observer, offline.load.gpu_telemetry);
    let drive = Drive {
        load: &offline.load,
        seed: offline.workload.seed,
        send_at: None,
        // vLLM's --profile, on a server: its profiler around the run (the native engine
        // has none; the CLI says so).
        profiler: match (&offline.target, offline.load.profile) {
            (OfflineTarget::Http(http_config), true) => {
                Some(crate::benchmark::profiler(http_config)?)
            }
            _ => None,
        },
        shard: None,
    };
    let num_requests;
    let (executed, copies, tokenizer): (Executed, Vec<u32>, Option<Arc<Tokenizer>>) =
        match &mut opened {
            Opened::Native(n) => {
                num_requests = n.workload.specs.len();
                let (specs, copies) = replicate(std::mem::take(&mut n.workload.specs), offline.n);
                let target =
                    EngineTarget::prepare(&mut n.engine, &specs, &n.tokenizer, n.run.clone())?;
                let executed = execute(&rt, target, &drive, None, &mut observer)?;
                (executed, copies, Some(n.tokenizer.clone()))
            }
            Opened::Http {
                config: http_config,
                workload,
                model,
                served_model,
            } => {
                if workload.conversations.is_some() {
                    bail!(
                        "throughput sends single requests; this dataset is multi-turn (use bench \
                     serve for conversations)"
                    );
                }
                num_requests = workload.specs.len();
                let (specs, copies) = replicate(std::mem::take(&mut workload.specs), offline.n);
                let tokenizer = workload.tokenizer.clone();
                let target = HttpTarget::prepare(
                    http_config,
                    model,
                    served_model,
                    workload.with_specs(specs),
                    &rt,
                    &mut observer,
                )?;
                let executed = execute(&rt, target, &drive, None, &mut observer)?;
                (executed, copies, tokenizer)
            }
        };
    let gpu = observer.finish();
    let observer = observer.inner;
    crate::benchmark::stop_profiler(drive.profiler.as_ref(), &rt, observer);
    let records = &executed.output.records;
    let failed = records.iter().filter(|r| !r.succeeded()).count();
    if failed > 0 {
        let first = records
            .iter()
            .find_map(RequestRecord::failure)
            .map(ToString::to_string)
            .unwrap_or_default();
        observer.event(Event::Warning(&format!(
            "{failed} of {} requests failed and are not counted (first error: {first})",
            records.len()
        )));
    }
    if failed == records.len() {
        bail!("every request failed");
    }
    let (total_prompt_tokens, total_output_tokens) =
        count_tokens(records, &copies, tokenizer.as_deref())?;
    let result = ThroughputResult {
        backend: executed.backend.clone(),
        model,
        elapsed_time: executed.output.duration,
        num_requests,
        failed_requests: failed,
        total_prompt_tokens,
        total_output_tokens,
        concurrency: Concurrency::of(
            &executed.output.records,
            executed.output.engine_peak_sequences,
        ),
        engine,
        gpu,
    };
    observer.event(Event::ThroughputResults(&result));
    let stopped = executed.output.stopped.clone();
    // A run stopped early is not saved: its elapsed time is not the workload's.
    let saved = save(
        config.output_json.as_deref().filter(|_| stopped.is_none()),
        &result.to_json(),
        result.pytorch_metrics(),
        &offline.command_line,
        observer,
    )?;
    Ok(OfflineOutcome {
        result,
        saved,
        stopped,
    })
}

/// Runs `bench latency`: see the module documentation.
pub fn latency(
    config: &LatencyConfig,
    observer: &mut dyn Observer,
) -> Result<OfflineOutcome<LatencyResult>> {
    if config.num_iters == 0 {
        bail!("--num-iters must be at least 1");
    }
    let offline = &config.offline;
    let mut opened = open(offline, observer)?;
    let rt = runtime()?;
    if opened.workload_mut().conversations.is_some() {
        bail!("latency runs one batch of single requests; this dataset is multi-turn");
    }
    let engine_summary = opened.engine_summary();
    let model = opened.model().to_owned();
    let (specs, copies) = replicate(std::mem::take(&mut opened.workload_mut().specs), offline.n);
    let batch_size = specs.len();
    let stop = Arc::new(crate::client::stop::StopSignal::new());
    {
        let _runtime = rt.enter();
        observer.arm_stop(&stop)?;
    }
    let mut observer = GpuObserver::new(observer, offline.load.gpu_telemetry);
    let profiler = match (&offline.target, offline.load.profile) {
        (OfflineTarget::Http(http_config), true) => Some(crate::benchmark::profiler(http_config)?),
        _ => None,
    };
    let total = config.num_iters_warmup + config.num_iters;
    let mut latencies = Vec::with_capacity(config.num_iters as usize);
    let mut concurrency = Concurrency::default();
    let mut tokens_per_iter = (0, 0);
    let mut backend = String::new();
    for iteration in 0..total {
        let warm_up = iteration < config.num_iters_warmup;
        if iteration == config.num_iters_warmup {
            // The measured iterations start: sample the GPU, and profile the server, from here.
            observer.start();
            if let Some(profiler) = &profiler {
                crate::benchmark::start_profiler(profiler, &rt, observer.inner);
            }
        }
        let options = RunOptions {
            max_concurrency: offline.load.max_concurrency,
            stop: stop.clone(),
            shutdown_grace: offline.load.shutdown_grace,
            progress: indicatif::ProgressBar::hidden(),
            time_scale: 1.0,
            start: None,
            cancellation: None,
            workload_index: None,
            live: None,
            record_copies: None,
        };
        let offsets = vec![0.0; batch_size];
        let check = WarmUp {
            ready_check: (iteration == 0)
                .then_some(offline.load.ready_check)
                .flatten(),
            requests: 0,
            max_concurrency: offline.load.max_concurrency,
        };
        let (output, tokenizer) = match &mut opened {
            Opened::Native(n) => {
                let mut target =
                    EngineTarget::prepare(&mut n.engine, &specs, &n.tokenizer, n.run.clone())?;
                backend = target.name().to_owned();
                rt.block_on(target.warm_up(&check, observer.inner))?;
                let output = rt.block_on(target.run(
                    Releases::Workload(offsets.clone()),
                    options,
                    observer.inner,
                ))?;
                (output, Some(n.tokenizer.clone()))
            }
            Opened::Http {
                config: http_config,
                workload,
                model,
                served_model,
            } => {
                let mut target = HttpTarget::prepare(
                    http_config,
                    model,
                    served_model,
                    workload.with_specs(specs.clone()),
                    &rt,
                    observer.inner,
                )?;
                backend = target.name().to_owned();
                rt.block_on(target.warm_up(&check, observer.inner))?;
                let output = rt.block_on(target.run(
                    Releases::Workload(offsets.clone()),
                    options,
                    observer.inner,
                ))?;
                (output, workload.tokenizer.clone())
            }
        };
        if let Some(reason) = &output.stopped {
            observer.inner.event(Event::Note(&format!(
                "latency stopped after {} measured iterations: {reason}",
                latencies.len()
            )));
            let gpu = observer.finish();
            return Ok(OfflineOutcome {
                result: LatencyResult {
                    backend,
                    model,
                    latencies,
                    batch_size,
                    prompt_tokens_per_iter: tokens_per_iter.0,
                    output_tokens_per_iter: tokens_per_iter.1,
                    concurrency,
                    engine: engine_summary,
                    gpu,
                },
                saved: None,
                stopped: Some(reason.clone()),
            });
        }
        if let Some(failure) = output.records.iter().find_map(RequestRecord::failure) {
            bail!(
                "latency iteration {}: a request failed, so the batch's time means nothing: \
                 {failure}",
                iteration + 1
            );
        }
        tokens_per_iter = count_tokens(&output.records, &copies, tokenizer.as_deref())?;
        observer.inner.event(Event::LatencyIteration {
            warm_up,
            index: if warm_up {
                iteration
            } else {
                iteration - config.num_iters_warmup
            } as usize,
            of: if warm_up {
                config.num_iters_warmup
            } else {
                config.num_iters
            } as usize,
            seconds: output.duration,
        });
        if !warm_up {
            latencies.push(output.duration);
            concurrency = concurrency.max(Concurrency::of(
                &output.records,
                output.engine_peak_sequences,
            ));
        }
    }
    let gpu = observer.finish();
    let observer = observer.inner;
    crate::benchmark::stop_profiler(profiler.as_ref(), &rt, observer);
    let result = LatencyResult {
        backend,
        model,
        latencies,
        batch_size,
        prompt_tokens_per_iter: tokens_per_iter.0,
        output_tokens_per_iter: tokens_per_iter.1,
        concurrency,
        engine: engine_summary,
        gpu,
    };
    observer.event(Event::LatencyResults(&result));
    let saved = save(
        config.output_json.as_deref(),
        &result.to_json(),
        result.pytorch_metrics(),
        &offline.command_line,
        observer,
    )?;
    Ok(OfflineOutcome {
        result,
        saved,
        stopped: None,
    })
}

/// Writes the result to `path` (`--output-json`), when given, as vLLM does
/// (`json.dump(results, f, indent=4)`), with its PyTorch-benchmark records beside it
/// (`<stem>.pytorch.json`, `json.dump(records, f)`): the records' metrics and extra info
/// are `pytorch`. Says where it went.
fn save(
    path: Option<&Path>,
    doc: &Map<String, Value>,
    pytorch: (Vec<(&'static str, Value)>, Map<String, Value>),
    args: &Map<String, Value>,
    observer: &mut dyn Observer,
) -> Result<Option<PathBuf>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let (metrics, extra_info) = pytorch;
    let mut text = Vec::new();
    crate::pyjson::to_writer_indented(&mut text, doc, 4)?;
    crate::report::save::write_atomically(path, &[&text])
        .with_context(|| format!("--output-json {}", path.display()))?;
    let records: Vec<Value> = metrics
        .iter()
        .map(|(name, values)| {
            json!({
                "benchmark": {"name": "vLLM benchmark", "extra_info": {"args": args}},
                "model": {"name": args.get("model").cloned().unwrap_or(Value::Null)},
                "metric": {"name": name, "benchmark_values": values, "extra_info": extra_info},
            })
        })
        .collect();
    let mut text = Vec::new();
    crate::pyjson::to_writer(&mut text, &records)?;
    let pt_path = path.with_extension("pytorch.json");
    crate::report::save::write_atomically(&pt_path, &[&text])
        .with_context(|| format!("writing {}", pt_path.display()))?;
    observer.event(Event::Saved {
        path,
        interrupted: false,
    });
    Ok(Some(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::engine::resolve_model;

    #[test]
    fn percentiles_are_numpys_linear_ones() {
        // numpy: np.percentile([4, 1, 3, 2, 10], [10, 25, 50, 75, 90, 99])
        //   -> [1.4, 2.0, 3.0, 4.0, 7.6, 9.76]
        let r = LatencyResult {
            backend: "native".into(),
            model: "m".into(),
            latencies: vec![4.0, 1.0, 3.0, 2.0, 10.0],
            batch_size: 8,
            prompt_tokens_per_iter: 0,
            output_tokens_per_iter: 80,
            concurrency: Concurrency::default(),
            engine: None,
            gpu: None,
        };
        let got: Vec<f64> = r.percentiles().iter().map(|p| p.1).collect();
        let want = [1.4, 2.0, 3.0, 4.0, 7.6, 9.76];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
        assert_eq!(r.avg_latency(), 4.0);
        assert_eq!(r.output_tokens_per_second(), 20.0);
        let doc = r.to_json();
        let keys: Vec<&str> = doc.keys().map(String::as_str).take(3).collect();
        assert_eq!(keys, ["avg_latency", "latencies", "percentiles"]);
        assert_eq!(doc["percentiles"]["99"], json!(9.76));
    }

    #[test]
    fn throughput_keys_are_vllms_first() {
        let r = ThroughputResult {
            backend: "openai".into(),
            model: "m".into(),
            elapsed_time: 2.0,
            num_requests: 10,
            failed_requests: 0,
            total_prompt_tokens: 300,
            total_output_tokens: 100,
            concurrency: Concurrency::default(),
            engine: None,
            gpu: None,
        };
        let doc = r.to_json();
        let keys: Vec<&str> = doc.keys().map(String::as_str).take(5).collect();
        assert_eq!(
            keys,
            [
                "elapsed_time",
                "num_requests",
                "total_num_tokens",
                "requests_per_second",
                "tokens_per_second"
            ]
        );
        assert_eq!(doc["total_num_tokens"], json!(400));
        assert_eq!(doc["requests_per_second"], json!(5.0));
        assert_eq!(doc["tokens_per_second"], json!(200.0));
        assert_eq!(doc["output_tokens_per_second"], json!(50.0));
    }

    #[test]
    fn n_copies_count_the_prompt_once_and_every_output() {
        let spec = |id: &str| RequestSpec {
            prompt: crate::runtime::Prompt::Text("x".into()),
            prompt_len: 7,
            expected_output_len: 3,
            multimodal: vec![],
            request_id: Some(id.into()),
            lora_name: None,
            extra_body: None,
            send_at: None,
            session: None,
            output_constraint: None,
        };
        let (specs, copies) = replicate(vec![spec("a"), spec("b")], 3);
        let ids: Vec<_> = specs
            .iter()
            .map(|s| s.request_id.clone().unwrap())
            .collect();
        assert_eq!(ids, ["a", "a-1", "a-2", "b", "b-1", "b-2"]);
        assert_eq!(copies, [0, 1, 2, 0, 1, 2]);
        let record = |index: usize, ok: bool| RequestRecord {
            index,
            request_id: ids[index].clone(),
            outcome: if ok {
                Ok(())
            } else {
                Err(crate::record::FailureKind::Http(500).failure("500"))
            },
            prompt_len: 7,
            usage_prompt_len: None,
            server_prompt_tokens: None,
            expected_output_len: 3,
            output_tokens: Some(3),
            server_output_tokens: None,
            generated_text: String::new(),
            reasoning_text: String::new(),
            ttft: 0.0,
            ttfc: None,
            itl: vec![],
            chunk_tokens: vec![],
            latency: 0.0,
            start_time: 0.0,
            dispatch_time: 0.0,
            intended_start_time: 0.0,
            concurrency_wait: 0.0,
            retried: false,
            turn: None,
            cached_prompt_tokens: None,
            pooled_results: None,
            server_timing: None,
            endpoint: 0,
            output_validity: None,
            grade: None,
        };
        // Prompt "a"'s first copy failed: its second counts the prompt; "b" counts once.
        let records: Vec<_> = (0..6).map(|i| record(i, i != 0)).collect();
        assert_eq!(count_tokens(&records, &copies, None).unwrap(), (14, 15));
    }

    #[test]
    fn a_model_not_on_disk_says_how_to_point_at_a_copy() {
        let cache = tempfile::tempdir().unwrap();
        let err = resolve_model("org/model", &[cache.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not found on disk"), "{err}");
        assert!(err.contains("models--org--model"), "{err}");
        assert!(err.contains("bench downloads nothing"), "{err}");
        let snapshot = cache.path().join("models--org--model/snapshots/abc");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::write(snapshot.join("config.json"), "{}").unwrap();
        assert_eq!(
            resolve_model("org/model", &[cache.path().to_path_buf()]).unwrap(),
            snapshot
        );
    }
}
