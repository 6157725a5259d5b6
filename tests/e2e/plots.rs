//! Figures end to end: `bench serve --plot-timeline --plot-dataset-stats` against the
//! mock server (PNG and SVG beside the result file, one timeline row per request, each
//! chunk coloured by its ITL band as the run's own `itls` say), and `bench sweep plot` /
//! `plot_pareto` over sweep directories written here in vLLM's layout (every
//! `summary.json` a list of runs with their parameters merged in).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

/// vLLM's timeline colours: TTFT, then the three ITL bands.
const TTFT: &str = "#636EFA";
const BANDS: [&str; 3] = ["#109618", "#FF7F0E", "#D62728"];
/// The dataset figure's colours: prompt, output, total (matplotlib's first three).
const PROMPT: &str = "#1F77B4";
const OUTPUT: &str = "#FF7F0E";
const TOTAL: &str = "#2CA02C";

/// The `<rect>`s of an SVG document filled with `color`.
fn rects(svg: &str, color: &str) -> usize {
    elements(svg, "rect", color)
}

/// The `<tag>` elements of an SVG document filled or stroked with `color`; the document
/// must parse as XML.
fn elements(svg: &str, tag: &str, color: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name(tag))
        .filter(|n| {
            [n.attribute("fill"), n.attribute("stroke")]
                .into_iter()
                .flatten()
                .any(|c| c.eq_ignore_ascii_case(color))
        })
        .count()
}

/// Decodes a PNG whole: its size, and how many of its pixels are `color` (`#rrggbb`).
fn png(path: &Path, color: &str) -> ((u32, u32), usize) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a whole PNG frame");
    assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
    let want: Vec<u8> = (0..3)
        .map(|i| u8::from_str_radix(&color[1 + 2 * i..3 + 2 * i], 16).unwrap())
        .collect();
    let matching = buf[..info.buffer_size()]
        .chunks(3)
        .filter(|px| *px == want.as_slice())
        .count();
    ((info.width, info.height), matching)
}

/// The result file in `dir` (not its `.pytorch.json` records).
fn result_file(dir: &Path) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".json") && !name.ends_with(".pytorch.json")
        })
        .collect();
    assert_eq!(found.len(), 1, "one result in {}: {found:?}", dir.display());
    found.into_iter().next().unwrap()
}

#[test]
fn serve_draws_the_timeline_and_dataset_stats_beside_the_result() {
    const PROMPTS: usize = 12;
    const OUTPUT_LEN: usize = 6;
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(40),
        itl: Duration::from_millis(12),
        ..Default::default()
    });
    // Thresholds around the mock's 12 ms gaps, so that the bands are all in use.
    let run = Bench::against(&m.url)
        .random(16, OUTPUT_LEN as u32)
        .prompts(PROMPTS as u64)
        .args(["--max-concurrency", "4"])
        .args(["--plot-timeline", "--plot-dataset-stats"])
        .args(["--timeline-itl-thresholds", "11.5,12.5"])
        .save_detailed()
        .run()
        .assert_success();
    let dir = run.result_dir().to_path_buf();
    let result = run.json();
    let json_path = result_file(&dir);
    let stem = json_path
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for (name, ext) in [
        ("timeline", "png"),
        ("timeline", "svg"),
        ("dataset_stats", "png"),
        ("dataset_stats", "svg"),
    ] {
        let path = dir.join(format!("{stem}.{name}.{ext}"));
        assert!(path.is_file(), "{} missing:\n{run}", path.display());
        assert!(run.stdout.contains(&path.display().to_string()), "{run}");
    }

    // The console shows the run's concurrency over time as text.
    assert!(
        run.stdout
            .contains("Requests in flight vs Seconds since the first request"),
        "{run}"
    );

    // The timeline: one TTFT bar per request, and one segment per run of consecutive
    // gaps in the same band, in the colour of that band, as the result's own `itls` put
    // them (plus one legend swatch per colour in use).
    let svg = std::fs::read_to_string(dir.join(format!("{stem}.timeline.svg"))).unwrap();
    assert_eq!(rects(&svg, TTFT), PROMPTS + 1);
    let mut gap_count = 0;
    let mut bands = [0usize; 3];
    for gaps in result["itls"].as_array().unwrap() {
        let mut previous = None;
        for gap in gaps.as_array().unwrap() {
            let ms = gap.as_f64().unwrap() * 1000.0;
            let band = usize::from(ms >= 11.5) + usize::from(ms >= 12.5);
            if previous != Some(band) {
                bands[band] += 1;
            }
            previous = Some(band);
            gap_count += 1;
        }
    }
    assert_eq!(gap_count, PROMPTS * (OUTPUT_LEN - 1), "{result:#}");
    for (color, n) in BANDS.iter().zip(bands) {
        assert_eq!(
            rects(&svg, color),
            n + usize::from(n > 0),
            "{color}: {bands:?}"
        );
    }
    assert!(
        svg.contains("11.5ms ≤ ITL &lt; 12.5ms"),
        "the legend names the bands"
    );
    let ((w, h), ttft_pixels) = png(&dir.join(format!("{stem}.timeline.png")), TTFT);
    assert!(w >= 800 && h >= 400, "{w}x{h}");
    assert!(
        ttft_pixels > 100,
        "the PNG shows the TTFT bars: {ttft_pixels} pixels"
    );

    // The dataset figure: every output is OUTPUT_LEN tokens (one output bin); a stacked
    // bar per request in the prompt's and the output's colours, each with a swatch.
    let svg = std::fs::read_to_string(dir.join(format!("{stem}.dataset_stats.svg"))).unwrap();
    assert_eq!(rects(&svg, OUTPUT), 1 + PROMPTS + 1);
    let prompt_bins = rects(&svg, PROMPT) - PROMPTS - 1;
    let total_bins = rects(&svg, TOTAL);
    assert!((1..=30).contains(&prompt_bins) && (1..=30).contains(&total_bins));
    assert_eq!(
        prompt_bins, total_bins,
        "totals are the prompts shifted by OUTPUT_LEN"
    );
    let ((w, h), _) = png(&dir.join(format!("{stem}.dataset_stats.png")), OUTPUT);
    assert!(w > h && h >= 600, "{w}x{h}");
}

#[test]
fn serve_plots_go_where_the_result_would_without_save_result() {
    let m = mock(bench::mock::MockConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let run = Bench::against(&m.url)
        .random(8, 4)
        .prompts(3)
        .arg("--result-dir")
        .arg(dir.path())
        .args(["--result-filename", "r.json", "--plot-timeline"])
        .run()
        .assert_success();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["r.timeline.png", "r.timeline.svg"], "{run}");
    let bad = Bench::against(&m.url)
        .args(["--timeline-itl-thresholds", "50,25"])
        .run()
        .assert_failure();
    assert!(bad.stderr.contains("--timeline-itl-thresholds"), "{bad}");
}

/// A run of a sweep as `bench sweep serve` and vLLM's sweep record it: the result's keys
/// with the serve and bench parameters and `run_number` merged in.
fn sweep_run(model: &str, seqs: u32, concurrency: u32, run_number: u32) -> Value {
    // Latency grows with concurrency, less with more sequences; throughput saturates.
    let c = f64::from(concurrency);
    json!({
        "date": "20260101-000000",
        "backend": "openai",
        "model_id": model,
        "max_concurrency": concurrency,
        "request_rate": "inf",
        "completed": 100,
        "request_throughput": c.min(f64::from(seqs)) * 0.9 + f64::from(run_number) * 0.01,
        "output_throughput": c.min(f64::from(seqs)) * 100.0,
        "p99_e2el_ms": 100.0 * c / f64::from(seqs) + f64::from(run_number),
        "mean_ttft_ms": 10.0 * c,
        "run_number": run_number,
        "max_num_seqs": seqs,
        "tensor_parallel_size": 2,
    })
}

/// A sweep directory in vLLM's layout: `exp/SERVE-...-BENCH-.../summary.json`.
fn sweep_dir(models: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for model in models {
        for seqs in [8, 16] {
            for concurrency in [1, 4, 16] {
                let comb = dir.path().join("exp").join(format!(
                    "SERVE-{}-max_num_seqs={seqs}-BENCH-max_concurrency={concurrency}",
                    model.replace('/', "_")
                ));
                std::fs::create_dir_all(&comb).unwrap();
                let runs: Vec<Value> = (0..3)
                    .map(|r| sweep_run(model, seqs, concurrency, r))
                    .collect();
                std::fs::write(
                    comb.join("summary.json"),
                    serde_json::to_string_pretty(&runs).unwrap(),
                )
                .unwrap();
            }
        }
    }
    dir
}

/// Every file under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn sweep_plot_writes_one_figure_per_group_with_a_curve_per_value() {
    let dir = sweep_dir(&["org/a", "b"]);
    let before = files_under(dir.path());
    let run = bench(&[
        "sweep".as_ref(),
        "plot".as_ref(),
        dir.path().as_os_str(),
        "--var-x".as_ref(),
        "max_concurrency".as_ref(),
        "--curve-by".as_ref(),
        "max_num_seqs".as_ref(),
        "--fig-by".as_ref(),
        "model_id".as_ref(),
        "--fig-dir".as_ref(),
        "figs".as_ref(),
    ])
    .assert_success();
    let mut new: Vec<String> = files_under(dir.path())
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    new.sort();
    assert_eq!(
        new,
        [
            "figs/FIGURE-model_id=b.png",
            "figs/FIGURE-model_id=b.svg",
            "figs/FIGURE-model_id=org_a.png",
            "figs/FIGURE-model_id=org_a.svg",
        ],
        "{run}"
    );
    assert_eq!(run.stdout.matches("[BEGIN FIGURE]").count(), 2, "{run}");
    assert!(run.stdout.contains("Group: {'model_id': 'org/a'}"), "{run}");
    assert!(run.stdout.contains("Grid: 1 rows x 1 cols"), "{run}");
    // Two curves (max_num_seqs 8 and 16), a marker at each of the three concurrencies:
    // the three runs at each point drawn as one, their mean.
    let svg = std::fs::read_to_string(dir.path().join("figs/FIGURE-model_id=b.svg")).unwrap();
    for color in ["#1F77B4", "#FF7F0E"] {
        assert_eq!(elements(&svg, "circle", color), 3, "{color}");
        assert!(elements(&svg, "polyline", color) >= 1, "{color}: a line");
    }
    assert!(
        svg.contains("max_num_seqs=16"),
        "the legend names the curves"
    );
    let ((w, h), _) = png(&dir.path().join("figs/FIGURE-model_id=b.png"), "#1F77B4");
    assert!(w >= 600 && h >= 400, "{w}x{h}");
    // The console shows the curves as text too.
    assert!(
        run.stdout.contains("p99_e2el_ms vs max_concurrency"),
        "{run}"
    );
}

#[test]
fn sweep_plot_grids_rows_and_columns_and_filters() {
    let dir = sweep_dir(&["a"]);
    let run = bench(&[
        "sweep".as_ref(),
        "plot".as_ref(),
        dir.path().as_os_str(),
        "--row-by".as_ref(),
        "max_num_seqs".as_ref(),
        "--col-by".as_ref(),
        "run_number".as_ref(),
        "--filter-by".as_ref(),
        "run_number<2".as_ref(),
        "--fig-format".as_ref(),
        "svg".as_ref(),
        "--fig-name".as_ref(),
        "grid".as_ref(),
    ])
    .assert_success();
    assert!(run.stdout.contains("Grid: 2 rows x 2 cols"), "{run}");
    let svg = std::fs::read_to_string(dir.path().join("grid.svg")).unwrap();
    // Four panels of one curve, three points each.
    assert_eq!(elements(&svg, "circle", "#1F77B4"), 4 * 3);
    assert!(!dir.path().join("grid.png").exists());
}

#[test]
fn sweep_plot_dry_run_lists_the_figures_and_writes_nothing() {
    let dir = sweep_dir(&["a", "b"]);
    let before = files_under(dir.path());
    let run = bench(&[
        "sweep".as_ref(),
        "plot".as_ref(),
        dir.path().as_os_str(),
        "--fig-by".as_ref(),
        "model_id".as_ref(),
        "--dry-run".as_ref(),
    ])
    .assert_success();
    assert_eq!(files_under(dir.path()), before);
    for model in ["a", "b"] {
        for ext in ["png", "svg"] {
            let path = dir.path().join(format!("FIGURE-model_id={model}.{ext}"));
            assert!(
                run.stdout
                    .contains(&format!("Output file: {}", path.display())),
                "{run}"
            );
        }
    }
    let run = bench(&[
        "sweep".as_ref(),
        "plot_pareto".as_ref(),
        dir.path().as_os_str(),
        "--dry-run".as_ref(),
    ])
    .assert_success();
    assert_eq!(files_under(dir.path()), before);
    assert!(run.stdout.contains("PARETO.png"), "{run}");
}

#[test]
fn sweep_plot_names_a_missing_key_and_its_file() {
    let dir = sweep_dir(&["a"]);
    let run = bench(&[
        "sweep".as_ref(),
        "plot".as_ref(),
        dir.path().as_os_str(),
        "--var-y".as_ref(),
        "p99_no_such_ms".as_ref(),
    ])
    .assert_failure();
    assert!(run.stderr.contains("\"p99_no_such_ms\""), "{run}");
    assert!(run.stderr.contains("--var-y"), "{run}");
    assert!(run.stderr.contains("summary.json"), "{run}");
    let empty = tempfile::tempdir().unwrap();
    let run =
        bench(&["sweep".as_ref(), "plot".as_ref(), empty.path().as_os_str()]).assert_failure();
    assert!(run.stderr.contains("summary.json"), "{run}");
}

#[test]
fn plot_pareto_marks_the_frontier() {
    let dir = tempfile::tempdir().unwrap();
    let comb = dir.path().join("SERVE-tp");
    std::fs::create_dir_all(&comb).unwrap();
    // (tokens/s per user, per GPU): A (100, 1000), B (40, 1600), C (80, 400) beaten by
    // A, D (20, 2000), E (10, 500) beaten by D, F (60, 1200) with its users from the
    // observed peak, G without any user count (skipped).
    let runs = json!([
        {"output_throughput": 1000.0, "max_concurrency": 10, "tensor_parallel_size": 1},
        {"output_throughput": 1600.0, "max_concurrency": 40},
        {"output_throughput": 800.0, "max_concurrency": 10, "tensor_parallel_size": 2},
        {"output_throughput": 2000.0, "max_concurrency": 100, "tp": 1},
        {"output_throughput": 500.0, "max_concurrency": 50},
        {"output_throughput": 1200.0, "max_concurrency": null, "max_concurrent_requests": 20},
        {"output_throughput": 900.0, "max_concurrency": 0},
    ]);
    std::fs::write(comb.join("summary.json"), runs.to_string()).unwrap();
    let run = bench(&[
        "sweep".as_ref(),
        "plot_pareto".as_ref(),
        dir.path().as_os_str(),
    ])
    .assert_success();
    assert!(
        run.stdout.contains("Skipped 1 runs without a user count"),
        "{run}"
    );
    assert!(
        run.stdout
            .contains("Plotted 6 points; Pareto frontier size: 4."),
        "{run}"
    );
    let svg = std::fs::read_to_string(dir.path().join("pareto/PARETO.svg")).unwrap();
    assert_eq!(
        elements(&svg, "circle", "#808080"),
        6 + 1,
        "every run, grey, and its swatch"
    );
    assert_eq!(
        elements(&svg, "circle", "#1F77B4"),
        4,
        "the frontier's points"
    );
    assert!(dir.path().join("pareto/PARETO.png").is_file());
}

/// The `cy` of every `<circle>` of `color` (SVG y grows downwards).
fn marker_heights(svg: &str, color: &str) -> Vec<f64> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("circle"))
        .filter(|n| {
            n.attribute("fill")
                .is_some_and(|f| f.eq_ignore_ascii_case(color))
        })
        .map(|n| n.attribute("cy").unwrap().parse().unwrap())
        .collect()
}

#[test]
fn sweep_serve_against_the_mock_then_plot_and_plot_pareto() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let params = |name: &str, value: Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let serve = params("serve.json", json!([{"ttft_ms": 5}, {"ttft_ms": 60}]));
    let bench_params = params(
        "bench.json",
        json!([{"max_concurrency": 1}, {"max_concurrency": 4}]),
    );
    let out = dir.path().join("out");
    Bench::new()
        .args(["sweep", "serve", "-e", "exp", "-o"])
        .arg(&out)
        .arg("--serve-cmd")
        .arg(format!(
            "{} mock-server --host 127.0.0.1 --port {port}",
            env!("CARGO_BIN_EXE_bench")
        ))
        .arg("--bench-cmd")
        .arg(format!(
            "bench serve --model mock --tokenizer {} --base-url http://127.0.0.1:{port} \
             --dataset-name random --random-input-len 8 --random-output-len 4 \
             --num-prompts 4 --disable-tqdm",
            gpt2()
        ))
        .arg("--serve-params")
        .arg(&serve)
        .arg("--bench-params")
        .arg(&bench_params)
        .args(["--num-runs", "1", "--server-stop-grace", "5"])
        .run()
        .assert_success();

    let run = bench(&[
        "sweep".as_ref(),
        "plot".as_ref(),
        out.as_os_str(),
        "--var-x".as_ref(),
        "max_concurrency".as_ref(),
        "--var-y".as_ref(),
        "mean_ttft_ms".as_ref(),
        "--curve-by".as_ref(),
        "ttft_ms".as_ref(),
    ])
    .assert_success();
    assert!(run.stdout.contains("Grid: 1 rows x 1 cols"), "{run}");
    // The curve of the server with the 60 ms TTFT lies above the 5 ms one's at both
    // concurrencies: its markers are higher in the figure (smaller SVG y).
    let svg = std::fs::read_to_string(out.join("FIGURE.svg")).unwrap();
    let fast = marker_heights(&svg, "#1F77B4");
    let slow = marker_heights(&svg, "#FF7F0E");
    assert_eq!((fast.len(), slow.len()), (2, 2), "{svg}");
    let highest_fast = fast.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(slow.iter().all(|&y| y < highest_fast), "{fast:?} {slow:?}");
    assert!(out.join("FIGURE.png").is_file());

    let run = bench(&["sweep".as_ref(), "plot_pareto".as_ref(), out.as_os_str()]).assert_success();
    assert!(run.stdout.contains("Plotted 4 points"), "{run}");
    assert!(out.join("pareto/PARETO.svg").is_file() && out.join("pareto/PARETO.png").is_file());
}
