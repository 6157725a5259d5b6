//! `examples/sweep/run.sh`, the README's tour of the sweep, startup, plot, report and
//! compare commands against the mock server, runs as written and finds what it says.

use crate::common::{gate, repo};

#[test]
fn the_readme_sweep_example_runs_and_finds_the_known_capacities() {
    // It loads the machine for half a minute: alone, so that the latencies it searches on
    // are the mock's.
    let _alone = gate::exclusive();
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new("bash")
        .arg(repo().join("examples/sweep/run.sh"))
        .arg(out.path())
        .env("BENCH", env!("CARGO_BIN_EXE_bench"))
        .env("PORT", free_port().to_string())
        .output()
        .unwrap();
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{log}");
    let read = |rel: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(out.path().join(rel)).unwrap()).unwrap()
    };
    // The SLA answers: the heavy server's capacity, and unbounded for the light one (found
    // in one run).
    let sla = read("sla/sla_results.json");
    let answer = |name: &str| {
        let r = sla
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["serve_params"]["_benchmark_name"] == name)
            .unwrap_or_else(|| panic!("{name}: {sla:#}"));
        (
            r["value"].as_u64().unwrap(),
            r["measured"].as_array().unwrap().len(),
        )
    };
    assert_eq!(answer("light"), (65536, 1), "{sla:#}");
    assert_eq!(answer("heavy").0, 5, "{sla:#}");
    // 2 servers x 3 concurrencies x 2 runs, the figures, the startup times, the series of
    // 3 runs with its summary and figures, the comparison and the page.
    let csv = std::fs::read_to_string(out.path().join("grid/summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 12, "{csv}");
    for file in [
        "grid/pareto/PARETO.png",
        "startup.json",
        "runs/base-summary.json",
        "runs/base-run3.json",
        "runs/base-run1.timeline.svg",
        "runs/base-run1.dataset_stats.png",
        "report.html",
    ] {
        assert!(out.path().join(file).is_file(), "{file} missing\n{log}");
    }
    let figures = std::fs::read_dir(out.path().join("figures"))
        .unwrap()
        .count();
    assert!(figures >= 2, "{figures} figures\n{log}");
    assert!(
        read("startup.json")["avg_cold_startup_time"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(
        log.contains("mean_ttft_ms"),
        "the comparison's table\n{log}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
