//! `bench throughput` and `bench latency` end to end: against the mock server through a
//! backend plugin, and on the native engine with the tiny test models (GPT-2 from a
//! Hugging Face directory, Llama from a GGUF file with its own vocabulary). Checked: vLLM's
//! result keys and their arithmetic, the token counts against what was asked and served,
//! that throughput releases the whole workload at once, that latency runs the batch once
//! per iteration, and the errors a user meets first.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fake_gpt2() -> String {
    data("models/fake-gpt2").display().to_string()
}

fn tiny_llama_gguf() -> String {
    data("models/llama-2-tiny-random-gguf/llama-2-tiny-random.gguf")
        .display()
        .to_string()
}

const TTFT_MS: u64 = 100;
const ITL_MS: u64 = 10;

#[test]
fn throughput_on_a_server_sends_the_whole_workload_at_once() {
    const PROMPTS: u64 = 24;
    const OUTPUT: u64 = 8;
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(TTFT_MS),
        itl: Duration::from_millis(ITL_MS),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("throughput.json");
    let out = Bench::new()
        .arg("throughput")
        .with_server(&m.url)
        .args(["--backend", "openai", "--dataset-name", "random"])
        .args(["--input-len", "32", "--output-len", &OUTPUT.to_string()])
        .prompts(PROMPTS)
        .arg("--output-json")
        .arg(&out_json)
        .run()
        .assert_success();
    let r = read_json(&out_json);
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys[..5],
        [
            "elapsed_time",
            "num_requests",
            "total_num_tokens",
            "requests_per_second",
            "tokens_per_second"
        ],
        "{r:#}"
    );
    assert_eq!(r["num_requests"], PROMPTS);
    assert_eq!(r["failed_requests"], 0);
    // The mock's usage: every request generated the length asked for.
    assert_eq!(r["total_output_tokens"], PROMPTS * OUTPUT, "{r:#}");
    let prompt = r["total_prompt_tokens"].as_u64().unwrap();
    assert_eq!(
        r["total_num_tokens"].as_u64().unwrap(),
        prompt + PROMPTS * OUTPUT
    );
    let elapsed = r["elapsed_time"].as_f64().unwrap();
    let rps = r["requests_per_second"].as_f64().unwrap();
    assert!((rps - PROMPTS as f64 / elapsed).abs() < 1e-9, "{r:#}");
    // All at once: the whole run takes about one request's time (TTFT + 7 gaps), far
    // from the 24 requests' one after another.
    let one = (TTFT_MS + (OUTPUT - 1) * ITL_MS) as f64 / 1000.0;
    assert!(
        elapsed >= one && elapsed < one * 4.0,
        "elapsed {elapsed} s for requests of {one} s each: {out}"
    );
    assert_eq!(
        m.server.as_ref().unwrap().requests().len(),
        PROMPTS as usize
    );
    assert!(
        out.stdout.contains("Throughput: ") && out.stdout.contains("Total num output tokens:  192"),
        "{out}"
    );
    // vLLM's PyTorch-benchmark records beside the result.
    let pt = read_json(&dir.path().join("throughput.pytorch.json"));
    let names: Vec<&str> = pt
        .as_array()
        .unwrap()
        .iter()
        .map(|rec| rec["metric"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["requests_per_second", "tokens_per_second"]);
    assert_eq!(
        pt[0]["metric"]["benchmark_values"][0],
        r["requests_per_second"]
    );
    assert_eq!(pt[0]["model"]["name"], "mock");
}

#[test]
fn throughput_n_runs_each_prompt_n_times_and_counts_its_prompt_once() {
    let m = mock(bench::mock::MockConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("n.json");
    let run = |n: &str| {
        Bench::new()
            .arg("throughput")
            .with_server(&m.url)
            .args([
                "--backend",
                "openai",
                "--input-len",
                "16",
                "--output-len",
                "4",
            ])
            .args(["--n", n])
            .prompts(5)
            .arg("--output-json")
            .arg(&out_json)
            .run()
            .assert_success();
        read_json(&out_json)
    };
    let one = run("1");
    let three = run("3");
    assert_eq!(three["num_requests"], 5);
    assert_eq!(three["total_output_tokens"], 5 * 3 * 4);
    assert_eq!(three["total_prompt_tokens"], one["total_prompt_tokens"]);
    assert_eq!(m.server.as_ref().unwrap().requests().len(), 5 + 15);
}

#[test]
fn latency_on_a_server_runs_the_batch_once_per_iteration() {
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(TTFT_MS),
        itl: Duration::from_millis(ITL_MS),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("latency.json");
    let out = Bench::new()
        .arg("latency")
        .with_server(&m.url)
        .args([
            "--backend",
            "openai",
            "--output-len",
            "8",
            "--batch-size",
            "4",
        ])
        .args(["--num-iters-warmup", "1", "--num-iters", "3"])
        .arg("--output-json")
        .arg(&out_json)
        .run()
        .assert_success();
    let r = read_json(&out_json);
    let latencies: Vec<f64> = r["latencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(latencies.len(), 3, "{r:#}");
    let one = (TTFT_MS + 7 * ITL_MS) as f64 / 1000.0;
    for l in &latencies {
        assert!(*l >= one && *l < one * 4.0, "{latencies:?} vs {one}: {out}");
    }
    let avg = latencies.iter().sum::<f64>() / 3.0;
    assert!((r["avg_latency"].as_f64().unwrap() - avg).abs() < 1e-12);
    let percentiles: Vec<&str> = r["percentiles"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(percentiles, ["10", "25", "50", "75", "90", "99"]);
    assert_eq!(r["batch_size"], 4);
    // vLLM's default input length, 32 tokens per prompt, and the output asked for.
    assert_eq!(r["output_tokens_per_iteration"], 4 * 8);
    // Warm-up and measured iterations each sent the whole batch.
    assert_eq!(m.server.as_ref().unwrap().requests().len(), 4 * (1 + 3));
    assert!(out.stdout.contains("Avg latency: "), "{out}");
    assert!(out.stdout.contains("99% percentile latency: "), "{out}");
    let pt = read_json(&dir.path().join("latency.pytorch.json"));
    assert_eq!(pt[0]["metric"]["name"], "latency");
    assert_eq!(pt[0]["metric"]["benchmark_values"], r["latencies"]);
}

#[test]
fn throughput_on_the_native_engine_generates_every_token_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("native.json");
    let throughput = || {
        Bench::new()
            .args(["throughput", "--model", &fake_gpt2(), "--disable-tqdm"])
            .args([
                "--input-len",
                "16",
                "--output-len",
                "8",
                "--num-prompts",
                "6",
            ])
            .arg("--output-json")
            .arg(&out_json)
    };
    // No NVIDIA library here: by default not a word of it (every run on a machine without
    // an NVIDIA GPU would say it), and the run goes on; at `info`, one line.
    let logged = throughput().env("BENCH_LOG", "info").run().assert_success();
    assert_eq!(
        logged.stderr.matches("GPU telemetry").count(),
        1,
        "{logged}"
    );
    let out = throughput().default_log().run().assert_success();
    assert!(!out.stderr.contains("GPU telemetry"), "{out}");
    let r = read_json(&out_json);
    assert_eq!(r["backend"], "native", "{r:#}");
    assert_eq!(r["num_requests"], 6);
    // EOS is ignored, as in vLLM: every request generates its full length.
    assert_eq!(r["total_output_tokens"], 6 * 8, "{r:#}");
    // The prompt tokens the engine processed: about 16 each (the random dataset's prompts
    // re-encode to within a token or two of the length asked for).
    let prompt = r["total_prompt_tokens"].as_u64().unwrap();
    assert!((6 * 14..=6 * 18).contains(&prompt), "{r:#}");
    assert_eq!(r["engine_device"], "cpu");
    assert_eq!(r["engine_weights"], "f32");
    assert!(out.stdout.contains("Loaded "), "{out}");
    assert!(out.stdout.contains("Total num output tokens:  48"), "{out}");
    assert!(r.get("gpu_energy_j").is_none());
}

#[test]
fn latency_on_the_native_engine_reads_a_gguf_model_and_its_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("gguf.json");
    let out = Bench::new()
        .args(["latency", "--model", &tiny_llama_gguf()])
        .args([
            "--input-len",
            "12",
            "--output-len",
            "6",
            "--batch-size",
            "3",
        ])
        .args(["--num-iters-warmup", "1", "--num-iters", "2"])
        .arg("--output-json")
        .arg(&out_json)
        .run()
        .assert_success();
    let r = read_json(&out_json);
    assert_eq!(r["latencies"].as_array().unwrap().len(), 2, "{r:#}");
    assert_eq!(r["output_tokens_per_iteration"], 3 * 6);
    assert_eq!(r["batch_size"], 3);
    assert!(out.stdout.contains("Avg latency: "), "{out}");
}

/// `--max-concurrency` caps the native engine's requests in flight in all three commands:
/// 6 requests due at once and 8 batch slots, so without the cap the engine runs all 6 in
/// one batch (its own count, `engine_peak_running_sequences`), and with a cap of 2 it never
/// holds more than 2, which the records' exact peak (`peak_concurrent_requests`, from each
/// request's send to its last token) shows too.
#[test]
fn max_concurrency_caps_the_native_engines_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let peaks = |command: &str, cap: Option<&str>| {
        let out_json = dir
            .path()
            .join(format!("{command}-{}.json", cap.unwrap_or("none")));
        let mut b = Bench::new().args([
            command,
            "--model",
            &fake_gpt2(),
            "--disable-tqdm",
            "--max-num-seqs",
            "8",
        ]);
        b = match command {
            "serve" => b
                .args(["--backend", "native"])
                .random(8, 4)
                .prompts(6)
                .save_detailed(),
            "latency" => b
                .args(["--input-len", "8", "--output-len", "4", "--batch-size", "6"])
                .args([
                    "--num-iters-warmup",
                    "0",
                    "--num-iters",
                    "2",
                    "--output-json",
                ])
                .arg(&out_json),
            _ => b
                .args([
                    "--input-len",
                    "8",
                    "--output-len",
                    "4",
                    "--num-prompts",
                    "6",
                ])
                .arg("--output-json")
                .arg(&out_json),
        };
        if let Some(cap) = cap {
            b = b.args(["--max-concurrency", cap]);
        }
        let out = b.run().assert_success();
        let r = if command == "serve" {
            out.json()
        } else {
            read_json(&out_json)
        };
        if command == "serve" {
            assert_eq!(r["completed"], 6, "{r:#}");
            // All due at once: sent at once without a cap (a request's wait for the
            // engine's current step is the engine's queue, part of its TTFT, not a send
            // delay); with a cap of 2, the first two at once and each later one when the
            // request whose slot it took finished.
            let starts: Vec<f64> = r["start_times"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_f64().unwrap())
                .collect();
            let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
            let at_once = starts.iter().filter(|&&t| t == first).count();
            assert_eq!(at_once, cap.map_or(6, |_| 2), "start_times {starts:?}");
        } else if command == "throughput" {
            assert_eq!(r["total_output_tokens"], 6 * 4, "{r:#}");
        }
        let peak = |key: &str| {
            r[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{key}: {r:#}\n{out}"))
        };
        (
            peak("peak_concurrent_requests"),
            peak("engine_peak_running_sequences"),
        )
    };
    for command in ["serve", "throughput", "latency"] {
        assert_eq!(peaks(command, None), (6, 6), "{command} without a cap");
        assert_eq!(
            peaks(command, Some("2")),
            (2, 2),
            "{command} --max-concurrency 2"
        );
    }
}

/// `bench serve`'s flags on the native engine: `--ignore-eos` is honoured (serve stops at
/// EOS unless asked, as vLLM's server does; the offline commands always ignore it, as
/// vLLM's), every flag only a server reads is a warning naming it, sharding is refused, and
/// the engine's own flags given with a server's backend are a warning too.
#[test]
fn serve_flags_on_the_native_engine_are_honoured_or_said_to_be_ignored() {
    // fake-gpt2 greedily produces token 47143 after most prompts: make that its EOS.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("eos-model");
    std::fs::create_dir(&model).unwrap();
    for e in std::fs::read_dir(fake_gpt2()).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "generation_config.json" {
            std::fs::copy(e.path(), model.join(e.file_name())).unwrap();
        }
    }
    let config = std::fs::read_to_string(model.join("config.json")).unwrap();
    let config = config.replace("\"eos_token_id\": 50256", "\"eos_token_id\": 47143");
    std::fs::write(model.join("config.json"), config).unwrap();
    let model = model.to_str().unwrap();
    let serve = |extra: &[&str]| {
        Bench::new()
            .args([
                "serve",
                "--backend",
                "native",
                "--model",
                model,
                "--disable-tqdm",
            ])
            .args(["--temperature", "0"])
            .random(8, 6)
            .prompts(4)
            .args(extra)
            .save_result()
            .run()
    };
    let stops = serve(&[]).assert_success().json();
    let tokens = stops["total_output_tokens"].as_u64().unwrap();
    assert!(tokens < 4 * 6, "serve stops at EOS: {stops:#}");
    let full = serve(&["--ignore-eos"]).assert_success().json();
    assert_eq!(full["total_output_tokens"], 4 * 6, "{full:#}");
    let out_json = dir.path().join("throughput.json");
    Bench::new()
        .args([
            "throughput",
            "--model",
            model,
            "--disable-tqdm",
            "--temperature",
            "0",
        ])
        .args([
            "--input-len",
            "8",
            "--output-len",
            "6",
            "--num-prompts",
            "4",
        ])
        .arg("--output-json")
        .arg(&out_json)
        .run()
        .assert_success();
    assert_eq!(read_json(&out_json)["total_output_tokens"], 4 * 6);

    let flags: &[&[&str]] = &[
        &["--host", "10.0.0.1"],
        &["--port", "9000"],
        &["--base-url", "http://127.0.0.1:9"],
        &["--endpoint", "/v1/chat/completions"],
        &["--header", "x-a=b"],
        &["--backend-option", "stream=false"],
        &["--profile"],
        &["--lora-modules", "a"],
        &["--lora-assignment", "round-robin"],
        &["--probe-request-rate", "1"],
        &["--request-timeout", "9"],
        &["--ready-check-timeout-sec", "3"],
        &["--http-client", "reqwest"],
        &["--insecure"],
        &["--preconnect", "2"],
        &["--server-metrics-interval", "1"],
        &["--skip-tokenizer-init"],
        &["--shutdown-grace-sec", "1"],
        &["--prefix-cache-block-size", "32"],
    ];
    let all: Vec<&str> = flags.iter().flat_map(|f| f.iter().copied()).collect();
    let out = serve(&all).assert_success();
    for flag in flags {
        assert!(
            out.stderr
                .contains(&format!("WARNING: {} is ignored", flag[0])),
            "{}: {out}",
            flag[0]
        );
    }
    assert_eq!(
        out.stderr.matches(" is ignored").count(),
        flags.len(),
        "{out}"
    );
    // (It cannot go with --server-metrics-interval.)
    let no_metrics = serve(&["--no-server-metrics"]).assert_success();
    assert!(
        no_metrics
            .stderr
            .contains("WARNING: --no-server-metrics is ignored"),
        "{no_metrics}"
    );
    let shard = serve(&["--shard", "0/2"]);
    assert!(!shard.success(), "{shard}");
    assert!(
        shard
            .stderr
            .contains("--backend native runs the model in this one process"),
        "{shard}"
    );
    // The engine's flags with a server's backend: the refused connection fails the run
    // after the flags were read.
    let engine_flags = bench(&[
        "serve",
        "--backend",
        "openai",
        "--base-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--tokenizer",
        &gpt2(),
        "--num-prompts",
        "1",
        "--max-num-seqs",
        "4",
        "--device",
        "cpu",
        "--threads",
        "1",
    ]);
    assert!(
        engine_flags
            .stderr
            .contains("WARNING: --max-num-seqs is ignored"),
        "{engine_flags}"
    );
    assert!(
        engine_flags
            .stderr
            .contains("WARNING: --threads is ignored"),
        "{engine_flags}"
    );
    // --device cpu is the default: nothing was changed, nothing to warn of.
    assert!(
        !engine_flags.stderr.contains("--device is ignored"),
        "{engine_flags}"
    );

    // serve's flags that throughput and latency take but have no place for.
    let offline = |command: &str, extra: &[&str]| {
        let mut b = Bench::new()
            .args([command, "--model", model, "--disable-tqdm"])
            .args(["--input-len", "8", "--output-len", "4"]);
        b = match command {
            "latency" => b.args([
                "--batch-size",
                "2",
                "--num-iters-warmup",
                "0",
                "--num-iters",
                "1",
            ]),
            _ => b.args(["--num-prompts", "2"]),
        };
        b.args(extra).run().assert_success()
    };
    let goodput = [
        "--goodput",
        "ttft:100",
        "--label",
        "x",
        "--metric-percentiles",
        "50",
    ];
    for command in ["throughput", "latency"] {
        let out = offline(command, &goodput);
        for flag in ["--goodput", "--label", "--metric-percentiles"] {
            assert!(
                out.stderr.contains(&format!(
                    "WARNING: {flag} is ignored: it is bench serve's, and bench {command} does not use it"
                )),
                "{command} {flag}: {out}"
            );
        }
    }
    // Throughput honours a rate (its whole workload need not be released at once); latency
    // releases its batch at once.
    let rate = ["--request-rate", "50"];
    assert!(!offline("throughput", &rate).stderr.contains("is ignored"));
    assert!(
        offline("latency", &rate)
            .stderr
            .contains("WARNING: --request-rate is ignored")
    );
}

#[test]
fn the_errors_a_newcomer_meets_first_name_what_to_do() {
    let missing = bench(&["throughput", "--model", "no/such-model", "--input-len", "8"]);
    assert!(!missing.success());
    assert!(
        missing.stderr.contains("not found on disk")
            && missing.stderr.contains("bench downloads nothing"),
        "{missing}"
    );
    let no_len = bench(&["throughput", "--model", &fake_gpt2()]);
    assert!(!no_len.success());
    assert!(
        no_len
            .stderr
            .contains("input_len must be provided for a random dataset"),
        "{no_len}"
    );
    let cuda = bench(&[
        "latency",
        "--model",
        &fake_gpt2(),
        "--device",
        "cuda",
        "--num-iters",
        "1",
    ]);
    assert!(!cuda.success());
    assert!(cuda.stderr.contains("--features cuda"), "{cuda}");
    // serve's --num-runs is not the offline commands' (latency has --num-iters).
    let runs = bench(&["latency", "--model", &fake_gpt2(), "--num-runs", "3"]);
    assert!(!runs.success());
    assert!(runs.stderr.contains("--num-iters"), "{runs}");
}

#[test]
fn serve_on_the_native_engine_reports_every_serving_metric() {
    let out = Bench::new()
        .args(["serve", "--backend", "native", "--model", &fake_gpt2()])
        .args([
            "--disable-tqdm",
            "--request-rate",
            "50",
            "--max-concurrency",
            "2",
            "--ignore-eos",
        ])
        .random(8, 5)
        .prompts(6)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["backend"], "native", "{r:#}");
    assert_eq!(r["completed"], 6, "{r:#}");
    // EOS ignored: every request generated what it asked for, one token per ITL entry after
    // the first.
    assert_eq!(r["total_output_tokens"], 6 * 5, "{r:#}");
    for itls in r["itls"].as_array().unwrap() {
        assert_eq!(itls.as_array().unwrap().len(), 4, "{r:#}");
    }
    for ttft in r["ttfts"].as_array().unwrap() {
        assert!(ttft.as_f64().unwrap() > 0.0, "{r:#}");
    }
    assert!(r["mean_tpot_ms"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(out.stdout.contains("Serving Benchmark Result"), "{out}");
}

#[test]
fn profile_wraps_the_measured_work_on_a_server() {
    let m = mock(bench::mock::MockConfig::default());
    let calls = |args: &[&str]| {
        let before = m.server.as_ref().unwrap().profile_calls().len();
        Bench::new()
            .args(args)
            .with_server(&m.url)
            .args(["--backend", "openai", "--output-len", "4", "--profile"])
            .run()
            .assert_success();
        let all = m.server.as_ref().unwrap().profile_calls();
        all[before..]
            .iter()
            .map(|c| (c.path, c.finished_requests))
            .collect::<Vec<_>>()
    };
    // Throughput: started before any request was answered, stopped after all 5.
    assert_eq!(
        calls(&["throughput", "--input-len", "8", "--num-prompts", "5"]),
        [("/start_profile", 0), ("/stop_profile", 5)]
    );
    // Latency: the warm-up iteration (2 requests) before the start, the 3 measured
    // iterations inside.
    assert_eq!(
        calls(&[
            "latency",
            "--batch-size",
            "2",
            "--num-iters-warmup",
            "1",
            "--num-iters",
            "3"
        ]),
        [("/start_profile", 5 + 2), ("/stop_profile", 5 + 2 + 6)]
    );
}

/// Each `bench serve` flag the README lists as honoured on `--backend native`, checked by
/// its effect on the run (the cap and `--ignore-eos` have tests of their own above).
#[test]
fn native_serve_honours_each_serve_flag() {
    let model = fake_gpt2();
    let dir = tempfile::tempdir().unwrap();
    let serve = |name: &str, extra: &[&str]| -> (Value, Run) {
        let run = Bench::new()
            .args(["serve", "--backend", "native", "--model", &model])
            .args(["--disable-tqdm", "--random-input-len", "8"])
            .args([
                "--random-output-len",
                "6",
                "--save-result",
                "--save-detailed",
            ])
            .arg("--result-dir")
            .arg(dir.path())
            .args(["--result-filename", name])
            .args(extra)
            .run()
            .assert_success();
        // The file's last entry (--append-result adds one); none under --num-runs, which
        // names a file per run.
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
        let last = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .last()
            .map_or(Value::Null, Result::unwrap);
        (last, run)
    };
    let floats = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };

    // --seed, --num-prompts, --request-rate, --burstiness and the ramp-up: every request
    // is sent at vLLM 0.32's own arrival time for the same flags
    // (tests/data/schedule/vllm-arrivals.json, from vLLM's `get_request`).
    let reference: Value = serde_json::from_slice(
        &std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/data/schedule/vllm-arrivals.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut schedules = 0;
    for case in reference["cases"].as_array().unwrap() {
        let n = case["num_requests"].as_u64().unwrap();
        if n > 12 {
            continue; // seconds of requests; the schedule's unit tests have it
        }
        let mut flags = vec![
            "--seed".to_string(),
            case["seed"].to_string(),
            "--num-prompts".into(),
            n.to_string(),
            "--burstiness".into(),
            case["burstiness"].to_string(),
        ];
        match case.get("ramp_up") {
            Some(ramp) => flags.extend([
                "--ramp-up-strategy".into(),
                ramp["strategy"].as_str().unwrap().into(),
                "--ramp-up-start-rps".into(),
                ramp["start_rps"].to_string(),
                "--ramp-up-end-rps".into(),
                ramp["end_rps"].to_string(),
            ]),
            None => flags.extend(["--request-rate".into(), case["request_rate"].to_string()]),
        }
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let (r, run) = serve(&format!("schedule-{schedules}.json"), &flags);
        schedules += 1;
        assert_eq!(r["completed"], n, "{run}");
        assert_eq!(r["num_prompts"], n, "{run}");
        let sent = floats(&r["start_times"]);
        let want = floats(&case["offsets"]);
        assert_eq!(sent.len(), want.len(), "{run}");
        for (i, (s, w)) in sent.iter().zip(&want).enumerate() {
            let (s, w) = (s - sent[0], w - want[0]);
            assert!(
                (s - w).abs() < 1e-6,
                "{flags:?}: request {i} sent at {s}, vLLM's {w}"
            );
        }
    }
    assert_eq!(schedules, 5);

    // --temperature, --top-k, --top-p: greedy, seeded sampling, and sampling that the
    // filter leaves one token to.
    let texts = |name: &str, extra: &[&str]| {
        let mut flags = vec!["--num-prompts", "4", "--seed", "5"];
        flags.extend(extra);
        serve(name, &flags).0["generated_texts"].clone()
    };
    let greedy = texts("greedy.json", &["--temperature", "0"]);
    let sampled = texts("t1.json", &["--temperature", "1"]);
    assert_ne!(
        greedy, sampled,
        "sampling at temperature 1 gave greedy's texts"
    );
    assert_eq!(texts("t1-again.json", &["--temperature", "1"]), sampled);
    let top_k = texts("top-k.json", &["--temperature", "1", "--top-k", "1"]);
    assert_eq!(top_k, greedy, "--top-k 1 keeps only the likeliest token");
    let top_p = texts("top-p.json", &["--temperature", "1", "--top-p", "0.000001"]);
    assert_eq!(
        top_p, greedy,
        "a tiny --top-p keeps only the likeliest token"
    );

    // --goodput: an SLO no request meets, and one every request meets.
    let (none, run) = serve(
        "goodput-0.json",
        &["--num-prompts", "4", "--goodput", "ttft:0.000001"],
    );
    assert_eq!(none["request_goodput"], 0.0, "{run}");
    let (all, run) = serve(
        "goodput-all.json",
        &["--num-prompts", "4", "--goodput", "e2el:100000"],
    );
    assert_eq!(all["request_goodput"], all["request_throughput"], "{run}");

    // --percentile-metrics and --metric-percentiles: those keys, no others.
    let (p, run) = serve(
        "percentiles.json",
        &["--num-prompts", "4", "--percentile-metrics", "ttft,e2el"],
    );
    let (p2, _) = serve(
        "percentiles-2.json",
        &[
            "--num-prompts",
            "4",
            "--percentile-metrics",
            "ttft",
            "--metric-percentiles",
            "50,90",
        ],
    );
    assert!(
        p.get("p99_ttft_ms").is_some() && p.get("p99_e2el_ms").is_some(),
        "{run}"
    );
    assert!(
        p.get("p99_tpot_ms").is_none() && p.get("p99_itl_ms").is_none(),
        "{run}"
    );
    assert!(p2.get("p50_ttft_ms").is_some() && p2.get("p90_ttft_ms").is_some());
    assert!(p2.get("p99_ttft_ms").is_none() && p2.get("p90_e2el_ms").is_none());

    // --input-tokens dataset: the dataset's counts (the engine reports its prompt usage).
    let (d, run) = serve(
        "input-dataset.json",
        &["--num-prompts", "4", "--input-tokens", "dataset"],
    );
    assert_eq!(d["input_tokens_source"], "dataset", "{run}");
    assert_eq!(
        d["total_input_tokens"], d["input_tokens_dataset_count"],
        "{run}"
    );

    // --num-warmups: the warm-up requests run on the engine before the measured ones.
    let (_, run) = serve(
        "warmups.json",
        &["--num-prompts", "2", "--num-warmups", "2"],
    );
    assert!(run.stdout.contains("Warming up with 2 requests"), "{run}");
    assert!(run.stdout.contains("Warmup run completed"), "{run}");

    // The result flags: --append-result adds an entry, --label and --metadata are kept.
    serve("appended.json", &["--num-prompts", "2"]);
    let (_, run) = serve(
        "appended.json",
        &[
            "--num-prompts",
            "3",
            "--append-result",
            "--label",
            "mine",
            "--metadata",
            "k=v",
        ],
    );
    let text = std::fs::read_to_string(dir.path().join("appended.json")).unwrap();
    let entries: Vec<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries.len(), 2, "{run}");
    assert_eq!(entries[1]["completed"], 3);
    assert_eq!(entries[1]["label"], "mine");
    assert_eq!(entries[1]["k"], "v");

    // --plot-timeline: the figures beside the result.
    serve("plotted.json", &["--num-prompts", "2", "--plot-timeline"]);
    assert!(dir.path().join("plotted.timeline.svg").exists());

    // --num-runs: a result per run and a summary.
    serve("runs.json", &["--num-prompts", "2", "--num-runs", "2"]);
    for name in ["runs-run1.json", "runs-run2.json", "runs-summary.json"] {
        assert!(dir.path().join(name).exists(), "{name}");
    }
}
