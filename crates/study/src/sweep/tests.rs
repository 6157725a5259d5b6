//! The orchestration against a driver that writes made-up results (no server managed).

use super::*;
use serde_json::json;

/// Writes a result for every benchmark, with a TTFT that grows with the concurrency (20 ms
/// plus 10 ms per other request), and records the calls.
#[derive(Default)]
struct Fake {
    calls: Vec<Vec<String>>,
    /// Fail the call with this index (from 0).
    fail_at: Option<usize>,
}

fn flag<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .map(String::as_str)
}

impl Driver for Fake {
    fn bench(&mut self, argv: &[String]) -> Result<()> {
        self.calls.push(argv.to_vec());
        if self.fail_at == Some(self.calls.len() - 1) {
            bail!("benchmark failed on purpose");
        }
        let dir = PathBuf::from(flag(argv, "--result-dir").unwrap());
        let file = flag(argv, "--result-filename").unwrap();
        let concurrency: f64 = flag(argv, "--max-concurrency").map_or(1.0, |c| c.parse().unwrap());
        let ttft = 20.0 + 10.0 * (concurrency.min(100.0) - 1.0);
        let result = json!({
            "p99_ttft_ms": ttft,
            // Little's law then gives back the concurrency exactly.
            "request_throughput": concurrency.min(100.0) * 4.0,
            "mean_e2el_ms": 250.0,
        });
        std::fs::write(dir.join(file), result.to_string())?;
        Ok(())
    }
    fn event(&mut self, _: Event<'_>) {}
    fn stopped(&self) -> bool {
        false
    }
}

fn config(dir: &Path, serve: Value, bench: Value) -> SweepConfig {
    SweepConfig {
        serve_cmd: None,
        bench_cmd: vec!["--model".into(), "m".into()],
        after_bench_cmd: None,
        show_stdout: false,
        server: ServerSettings {
            ready_url: None,
            ready_timeout: Duration::from_secs(1),
            ready_poll: Duration::from_millis(10),
            stop_grace: Duration::from_secs(1),
        },
        serve_params: params::from_value(serve).unwrap(),
        bench_params: params::from_value(bench).unwrap(),
        link_vars: Vec::new(),
        experiment_dir: dir.join("exp"),
        num_runs: 2,
        dry_run: false,
        warmup_num_prompts: 0,
        continue_on_error: false,
    }
}

#[test]
fn every_combination_runs_num_runs_times_in_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(
        tmp.path(),
        json!([{}]),
        json!([{"max_concurrency": 1}, {"max_concurrency": 2, "_benchmark_name": "two"}]),
    );
    let mut fake = Fake::default();
    let rows = serve(&cfg, &mut fake).unwrap();
    assert_eq!(fake.calls.len(), 4);
    assert_eq!(rows.len(), 4);
    let exp = &cfg.experiment_dir;
    for dir in ["BENCH--max_concurrency=1", "BENCH--two"] {
        for f in ["run=0.json", "run=1.json", "summary.json"] {
            assert!(exp.join(dir).join(f).is_file(), "{dir}/{f}");
        }
    }
    let run1 = read_object(&exp.join("BENCH--two/run=1.json")).unwrap();
    assert_eq!(run1["run_number"], json!(1));
    assert_eq!(run1["max_concurrency"], json!(2));
    assert_eq!(run1["p99_ttft_ms"], json!(30.0));
    let csv = std::fs::read_to_string(exp.join("summary.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        ",p99_ttft_ms,request_throughput,mean_e2el_ms,run_number,max_concurrency,_benchmark_name"
    );
    assert_eq!(lines.count(), 4);
    // The flags vLLM adds, after the combination's.
    assert_eq!(
        &fake.calls[2][..4],
        ["--model", "m", "--max-concurrency", "2"]
    );
    assert_eq!(
        flag(&fake.calls[2], "--percentile-metrics"),
        Some("ttft,tpot,itl,e2el")
    );
    assert!(fake.calls[2].contains(&"--save-result".to_owned()));
}

#[test]
fn resume_runs_only_what_is_missing_and_dry_run_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path(), json!([{}]), json!([{"a": 1}, {"a": 2}]));
    let mut failing = Fake {
        fail_at: Some(2),
        ..Fake::default()
    };
    let err = serve(&cfg, &mut failing).unwrap_err().to_string();
    assert!(err.contains("on purpose"), "{err}");
    let exp = cfg.experiment_dir.clone();
    assert!(exp.join("BENCH--a=1/summary.json").is_file());
    assert!(!exp.join("BENCH--a=2/run=0.json").exists());

    cfg.dry_run = true;
    let mut dry = Fake::default();
    assert!(serve(&cfg, &mut dry).unwrap().is_empty());
    assert!(dry.calls.is_empty());
    assert!(!exp.join("BENCH--a=2/run=0.json").exists());

    cfg.dry_run = false;
    let mut again = Fake::default();
    let rows = serve(&cfg, &mut again).unwrap();
    assert_eq!(again.calls.len(), 2, "only a=2's two runs");
    assert_eq!(rows.len(), 4);
}

#[test]
fn continue_on_error_records_a_failed_run_and_warmups_stay_out_of_the_summaries() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path(), json!([{}]), json!([{"a": 1}, {"a": 2}]));
    cfg.continue_on_error = true;
    cfg.warmup_num_prompts = 2;
    // Calls: a=1 warm-up, run 0, run 1; a=2 warm-up, run 0 (fails), run 1.
    let mut fake = Fake {
        fail_at: Some(4),
        ..Fake::default()
    };
    let rows = serve(&cfg, &mut fake).unwrap();
    assert_eq!(fake.calls.len(), 6);
    assert_eq!(flag(&fake.calls[3], "--num-prompts"), Some("2"));
    assert_eq!(
        flag(&fake.calls[3], "--result-filename"),
        Some("warmup.json")
    );
    assert_eq!(rows.len(), 3, "warm-ups and the failed run are not rows");
    let exp = &cfg.experiment_dir;
    let failure = read_object(&exp.join("BENCH--a=2/run=0.failure.json")).unwrap();
    assert_eq!(failure["run_number"], json!(0));
    assert!(failure["error"].as_str().unwrap().contains("on purpose"));
    assert!(!exp.join("BENCH--a=2/run=0.json").exists());
    let summary = std::fs::read_to_string(exp.join("BENCH--a=2/summary.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&summary)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(exp.join("BENCH--a=1/warmup.json").is_file());
}

#[test]
fn the_sla_search_shares_measured_values_between_slas() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path(), json!([{}]), json!([{}]));
    cfg.num_runs = 1;
    let slas =
        sla::slas_from_value(&json!([{"p99_ttft_ms": "<=75"}, {"p99_ttft_ms": "<=55"}])).unwrap();
    let mut fake = Fake::default();
    let answers = serve_sla(&cfg, SlaVariable::MaxConcurrency, &slas, &mut fake).unwrap();
    // 20 + 10 (c - 1) <= 75 up to c = 6; <= 55 up to c = 4.
    assert_eq!(answers[0].value, 6);
    assert_eq!(answers[1].value, 4);
    let distinct: std::collections::BTreeSet<u64> = answers
        .iter()
        .flat_map(|a| a.history.iter().map(|(v, _)| *v))
        .collect();
    assert_eq!(fake.calls.len(), distinct.len(), "no value ran twice");
    let exp = &cfg.experiment_dir;
    assert!(exp.join("SLA--p99_ttft_ms<=75.00.json").is_file());
    assert!(exp.join("max_concurrency=6/run=0.json").is_file());
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("sla_results.json")).unwrap())
            .unwrap();
    assert_eq!(results[0]["value"], json!(6));
}

#[test]
fn the_workload_scan_spaces_values_between_serial_and_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path(), json!([{}]), json!([{}]));
    cfg.num_runs = 1;
    cfg.bench_cmd.extend(["--num-prompts".into(), "10".into()]);
    let mut fake = Fake::default();
    let rows = serve_workload(&cfg, SlaVariable::MaxConcurrency, 4, 1000, &mut fake).unwrap();
    let values: Vec<u64> = rows
        .iter()
        .map(|r| r["max_concurrency"].as_u64().unwrap())
        .collect();
    // Serial: 1; batch: 10 at once; between: 4 and 7.
    assert_eq!(values, [1, 4, 7, 10]);
    assert!(
        cfg.experiment_dir
            .join("BENCH--max_concurrency=1-WL--max_concurrency=1/run=0.json")
            .is_file()
    );
}

#[test]
fn the_server_address_comes_from_the_command_as_vllm_finds_it() {
    let argv = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        server_base_url(&argv("vllm serve m")),
        "http://localhost:8000"
    );
    assert_eq!(
        server_base_url(&argv("x --host 127.0.0.1 -p 9000")),
        "http://127.0.0.1:9000"
    );
    assert_eq!(
        dataset_size(&Params::new(), &argv("--num-prompts=7"), 1000).unwrap(),
        7
    );
    assert_eq!(
        dataset_size(&Params::new(), &argv("--x 1"), 1000).unwrap(),
        1000
    );
}
