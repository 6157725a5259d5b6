//! vLLM's less common `serve` flags, exercised together in real runs against the mock
//! server, and checked in the result file they produce.

use crate::common::*;

#[test]
fn host_port_endpoint_names_labels_metadata_percentiles_goodput_and_sampling() {
    let m = mock(Default::default());
    let port = m.server.as_ref().unwrap().addr().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--backend",
        "openai",
        "--endpoint",
        "/v1/completions",
        "--model",
        "org/some-model",
        "--served-model-name",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--random-input-len",
        "20",
        "--random-output-len",
        "6",
        "--random-range-ratio",
        "0.5",
        "--random-prefix-len",
        "4",
        "--num-prompts",
        "12",
        "--request-rate",
        "400",
        "--burstiness",
        "2",
        "--seed",
        "7",
        "--ignore-eos",
        "--temperature",
        "0",
        "--top-p",
        "0.9",
        "--top-k",
        "-1",
        "--min-p",
        "0.05",
        "--header",
        "x-bench-test=1",
        "--request-id-prefix",
        "flags-",
        "--ready-check-timeout-sec",
        "5",
        "--num-warmups",
        "2",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--goodput",
        "ttft:1000",
        "tpot:1000",
        "--label",
        "flagrun",
        "--metadata",
        "version=1.2",
        "tp=1",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "run.json",
        // Accepted as vLLM accepts it (bench runs no repository code either way).
        "--trust-remote-code",
        "--disable-tqdm",
    ];
    let out = bench(&args).assert_success();
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(r["completed"], 12, "{out}");
    assert_eq!(r["label"], "flagrun");
    assert_eq!(r["model_id"], "org/some-model");
    assert_eq!(r["version"], "1.2");
    assert_eq!(r["tp"], "1");
    assert_eq!(r["request_rate"], 400.0);
    assert_eq!(r["burstiness"], 2.0);
    for key in [
        "p50_ttft_ms",
        "p90_itl_ms",
        "p99_tpot_ms",
        "mean_e2el_ms",
        "p90_e2el_ms",
    ] {
        assert!(r[key].is_number(), "{key} missing: {r}");
    }
    // Every request meets generous SLOs against a zero-delay server.
    assert!(r["request_goodput"].as_f64().unwrap() > 0.0, "{r}");
    // --random-range-ratio 0.5 draws output lengths in [floor(6 * 0.5), ceil(6 * 1.5)].
    let lens: Vec<u64> = r["output_lens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(lens.iter().all(|l| (3..=9).contains(l)), "{lens:?}");
    assert!(
        lens.iter().any(|&l| l != lens[0]),
        "lengths should vary: {lens:?}"
    );
    assert_eq!(r["total_output_tokens"], lens.iter().sum::<u64>());
    // The PyTorch-benchmark records beside the result.
    assert!(dir.path().join("run.pytorch.json").exists());
    // Console: vLLM's configured-rate line.
    assert!(
        out.stdout
            .contains("Request rate configured (RPS):           400.00"),
        "{out}"
    );

    // --append-result adds a second run to the same file.
    let mut again: Vec<&str> = args.to_vec();
    again.push("--append-result");
    bench(&again).assert_success();
    let body = std::fs::read_to_string(dir.path().join("run.json")).unwrap();
    let runs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&body)
        .into_iter::<serde_json::Value>()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(runs.len(), 2, "{body}");
    assert!(runs.iter().all(|r| r["completed"] == 12));
}

#[test]
fn linear_ramp_up_records_rate_changes() {
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(8, 2)
        .prompts(30)
        .args(["--ramp-up-strategy", "linear"])
        .args(["--ramp-up-start-rps", "50", "--ramp-up-end-rps", "60"])
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 30);
    assert_eq!(r["ramp_up_strategy"], "linear");
    assert_eq!(r["ramp_up_start_rps"], 50);
    assert_eq!(r["ramp_up_end_rps"], 60);
    let events = r["rps_change_events"]
        .as_array()
        .expect("rps_change_events");
    let rps: Vec<u64> = events.iter().map(|e| e["rps"].as_u64().unwrap()).collect();
    // vLLM records the start rate, then every whole rate the ramp passes.
    assert_eq!(rps, (50..=60).collect::<Vec<_>>(), "{r}");
    assert!(
        out.stdout.contains("Traffic ramp-up strategy: linear."),
        "{out}"
    );
}

/// `total_input_tokens` follows vLLM by default (the server's `usage.prompt_tokens`, which
/// the mock counts as whitespace-separated words) and the dataset with `--input-tokens
/// dataset` (random prompts of exactly 64 tokens); both totals are reported either way.
/// `start_times` are on vLLM's clock.
#[test]
fn input_tokens_and_start_times_are_computed_as_vllm_computes_them() {
    let m = mock(Default::default());
    let run = |source: &str| {
        let out = Bench::against(&m.url)
            .backend("openai-chat")
            .random(64, 4)
            .prompts(10)
            .args(["--input-tokens", source])
            .save_detailed()
            .run()
            .assert_success();
        (out.json(), out.to_string())
    };
    let before = bench::client::cpu::monotonic().as_secs_f64();
    let (usage, console) = run("usage");
    let after = bench::client::cpu::monotonic().as_secs_f64();
    let (dataset, _) = run("dataset");
    // vLLM's start_times are time.perf_counter() values: the monotonic clock at each send.
    let starts = usage["start_times"].as_array().unwrap();
    assert!(
        starts
            .iter()
            .all(|t| (before..after).contains(&t.as_f64().unwrap())),
        "{starts:?} not within [{before}, {after})"
    );
    let server = usage["input_tokens_server_usage"].as_u64().unwrap();
    assert_eq!(usage["completed"], 10, "{usage}");
    assert_eq!(usage["input_tokens_source"], "usage");
    assert_eq!(usage["total_input_tokens"].as_u64().unwrap(), server);
    assert_eq!(usage["input_tokens_dataset_count"], 640);
    // Decoded and re-encoded text: the mock's word count is not the tokenizer's.
    assert_ne!(server, 640, "{usage}");
    assert!(
        console.contains("Input tokens (server usage):"),
        "{console}"
    );
    assert!(
        console.contains("Input tokens (dataset count):"),
        "{console}"
    );

    assert_eq!(dataset["input_tokens_source"], "dataset");
    assert_eq!(dataset["total_input_tokens"], 640, "{dataset}");
    assert!(
        dataset["input_lens"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v == 64)
    );
    assert_eq!(
        dataset["input_tokens_server_usage"].as_u64().unwrap(),
        server
    );
}

/// Every flag of vLLM's `bench serve` parser (`tests/data/vllm-serve-flags.txt`) is one
/// `bench serve` takes, with one of the built-in plugins loaded for the dataset and backend
/// flags, except the few still to build, listed here; a flag that starts working must
/// leave this list (the test fails until it does), so the list is always the truth.
#[test]
fn every_vllm_serve_flag_is_accepted_except_those_still_to_build() {
    const NOT_YET: &[&str] = &[];
    let flags = std::fs::read_to_string(data("vllm-serve-flags.txt")).unwrap();
    let flags: Vec<&str> = flags.lines().filter(|l| l.starts_with("--")).collect();
    assert!(flags.len() > 100, "{} flags", flags.len());
    // The help of `serve` with each built-in plugin loaded: plugins add their own flags.
    let list = bench(&["plugin", "list"]).assert_success().stdout;
    let mut help = String::new();
    for line in list.lines().skip(1) {
        let mut cols = line.split_whitespace();
        let (Some(name), Some(kind)) = (cols.next(), cols.next()) else {
            continue;
        };
        let role = match kind {
            "dataset" => "--dataset-name",
            "backend" => "--backend",
            _ => continue,
        };
        help.push_str(
            &bench(&["serve", role, name, "--help"])
                .assert_success()
                .stdout,
        );
    }
    let accepted = |flag: &str| {
        help.lines().any(|l| {
            l.split([' ', ',', '=', '['])
                .any(|word| word == flag || word.strip_prefix(flag) == Some("<"))
        })
    };
    let missing: Vec<&str> = flags.iter().copied().filter(|f| !accepted(f)).collect();
    assert_eq!(
        missing, NOT_YET,
        "flags of vLLM's parser that bench serve does not take"
    );
}

/// `--lora-modules` with `--lora-assignment`: each request's body names its adapter as the
/// model (the workload assigns them, the backend sends them), round-robin in order or a
/// seeded choice that the same `--seed` repeats.
#[test]
fn lora_modules_name_each_requests_model() {
    use bench::observer::{Event, Observer};
    use bench::prepare::HostHeaders;
    use bench::runtime::{ClientConfig, PluginRef, RuntimeConfig};
    use bench::workload::{LoraAssignment, LoraModules, WorkloadConfig};

    struct Quiet;
    impl Observer for Quiet {
        fn event(&mut self, _: Event<'_>) {}
    }
    gate::enter();
    let models = |assignment, seed| -> Vec<String> {
        let config = WorkloadConfig {
            dataset: PluginRef::parse("random").unwrap(),
            dataset_path: None,
            num_prompts: 12,
            seed,
            options: vec![
                ("input-len".into(), "8".into()),
                ("output-len".into(), "4".into()),
            ],
            request_id_prefix: Some("r-".into()),
            hub_cache: Vec::new(),
            chat_template_kwargs: None,
            lora: Some(LoraModules {
                names: vec!["sql".into(), "math".into(), "chat".into()],
                assignment,
            }),
            runtime: RuntimeConfig::default(),
            progress: false,
        };
        let workload = bench::workload::load(&config, &gpt2(), &mut Quiet).unwrap();
        let mut backend = workload
            .runtime
            .load_backend(&PluginRef::parse("openai").unwrap(), workload.host())
            .unwrap();
        backend
            .open(ClientConfig {
                model: "base".into(),
                ignore_eos: false,
                stream: true,
                extra_body: None,
                options: Vec::new(),
            })
            .unwrap();
        let prepared =
            bench::prepare::prepare(&mut backend, &workload.specs, &HostHeaders::default())
                .unwrap();
        prepared
            .iter()
            .map(|r| {
                let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                body["model"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let rr = models(LoraAssignment::RoundRobin, 0);
    let want: Vec<&str> = ["sql", "math", "chat"]
        .into_iter()
        .cycle()
        .take(12)
        .collect();
    assert_eq!(rr, want);
    let random = models(LoraAssignment::Random, 5);
    assert_eq!(random, models(LoraAssignment::Random, 5));
    assert!(
        random
            .iter()
            .all(|m| ["sql", "math", "chat"].contains(&m.as_str()))
    );
    assert!(
        random
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    );
}

/// `--tokenizer-mode`: `auto` and `hf` are the fast tokenizer bench loads; other modes are
/// refused before anything is loaded, naming the flag.
#[test]
fn tokenizer_modes_bench_cannot_honour_are_refused() {
    let sample = |mode: &str| {
        bench(&[
            "dataset",
            "sample",
            "--tokenizer",
            &gpt2(),
            "--num-prompts",
            "2",
            "--tokenizer-mode",
            mode,
        ])
    };
    assert_eq!(
        sample("hf").assert_success().stdout,
        sample("auto").assert_success().stdout
    );
    let out = sample("mistral").assert_failure();
    assert!(out.stderr.contains("--tokenizer-mode mistral"), "{out}");
}

/// `--insecure`: against an https server with a self-signed certificate (the mock behind
/// `bench mock-server --tls-cert`), a run without the flag stops at the ready check saying
/// the certificate was refused; with it, every request completes, and so does asking the
/// server for its model (`/v1/models`, no `--model`).
#[test]
fn insecure_accepts_a_self_signed_certificate_and_nothing_else_does() {
    use std::io::BufRead as _;
    let tls = data("tls");
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["mock-server", "--port", "0", "--tls-cert"])
        .arg(tls.join("cert.pem"))
        .arg("--tls-key")
        .arg(tls.join("key.pem"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("https://"))
        .unwrap_or_else(|| panic!("no https URL in {line:?}"))
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = gpt2();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--base-url",
            &url,
            "--tokenizer",
            &tokenizer,
            "--dataset-name",
            "random",
            "--num-prompts",
            "5",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--ready-check-timeout-sec",
            "1",
            "--save-result",
            "--result-dir",
            dir.path().to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        bench(&args)
    };
    let refused = run(&["--model", "mock"]).assert_failure();
    assert!(
        refused.stderr.contains("Initial test run failed")
            && refused.stderr.to_lowercase().contains("certificate"),
        "{refused}"
    );
    run(&["--insecure"]).assert_success();
    let r = result_json(dir.path());
    assert_eq!(r["completed"], 5, "{r:#}");
    assert_eq!(r["failed"], 0, "{r:#}");
    assert_eq!(r["model_id"], "mock", "{r:#}");
    let _ = server.kill();
    let _ = server.wait();
}
