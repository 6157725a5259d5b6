//! End-to-end: `bench report` on the results of real runs against the mock server, the
//! page opened in a real browser (Debian's Chromium, headless): the charts laid out, the
//! screenshot's charts drawn, no console message, nothing fetched, result text escaped.
//!
//! The browser tests fail when Chromium is missing (`apt-get install chromium`), unless
//! `BENCH_SKIP_BROWSER_TESTS=1`, which skips them with a note.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Debian's Chromium.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The window the page is laid out in.
const WINDOW: (u32, u32) = (1280, 2400);
/// The length of a chart's x axis in the screenshot, at least.
const AXIS_PX: usize = 200;
/// The height of a chart's plotting area in the screenshot, about.
const CHART_PX: usize = 200;
/// The charts' first series colour (tab10 blue, bench's and vLLM's first colour).
const BLUE: [u8; 3] = [0x1f, 0x77, 0xb4];

/// Chromium, or `None` (with a note) when the browser tests are to be skipped.
fn chromium() -> Option<&'static str> {
    if std::env::var_os("BENCH_SKIP_BROWSER_TESTS").is_some_and(|v| v == "1") {
        crate::common::timing::skipped(format_args!(
            "BENCH_SKIP_BROWSER_TESTS=1: Chromium could not be installed (this test opens the \
             report in it)"
        ));
        return None;
    }
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: `apt-get install chromium` (Debian), or set \
         BENCH_SKIP_BROWSER_TESTS=1 to skip the browser tests"
    );
    Some(CHROMIUM)
}

/// What the browser made of a page: the DOM after its script ran, every console message,
/// and a screenshot of the window.
struct Rendered {
    dom: String,
    console: Vec<String>,
    screenshot: Screenshot,
}

/// An RGB screenshot.
struct Screenshot {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Screenshot {
    fn read(path: &Path) -> Screenshot {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let channels = info.color_type.samples();
        assert!(channels >= 3, "{:?}", info.color_type);
        let rgb = buf[..info.buffer_size()]
            .chunks(channels)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        Screenshot {
            width: info.width as usize,
            height: info.height as usize,
            rgb,
        }
    }

    fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// The pixels of `rows` close to `color`.
    fn count(&self, color: [u8; 3], rows: std::ops::Range<usize>) -> usize {
        let near = |p: [u8; 3]| p.iter().zip(color).all(|(&a, b)| a.abs_diff(b) <= 12);
        rows.flat_map(|y| (0..self.width).map(move |x| (x, y)))
            .filter(|&(x, y)| near(self.pixel(x, y)))
            .count()
    }

    /// The rows where a chart's x axis is drawn: a dark line at least [`AXIS_PX`] long
    /// (text and the tables' light borders never make one); one row per line.
    fn axis_rows(&self) -> Vec<usize> {
        let dark = |p: [u8; 3]| p.iter().all(|&c| c < 0x90);
        let mut rows: Vec<usize> = Vec::new();
        for y in 0..self.height {
            let mut run = 0;
            let longest = (0..self.width).fold(0, |best, x| {
                run = if dark(self.pixel(x, y)) { run + 1 } else { 0 };
                best.max(run)
            });
            if longest >= AXIS_PX && rows.last().is_none_or(|&last| last + 1 < y) {
                rows.push(y);
            } else if longest >= AXIS_PX {
                *rows.last_mut().unwrap() = y;
            }
        }
        rows
    }

    /// The variance of the pixels' brightness in rows `rows`: about 0 for a blank area.
    fn variance(&self, rows: std::ops::Range<usize>) -> f64 {
        let values: Vec<f64> = rows
            .flat_map(|y| (0..self.width).map(move |x| (x, y)))
            .map(|(x, y)| self.pixel(x, y).iter().map(|&c| f64::from(c)).sum::<f64>() / 3.0)
            .collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64
    }
}

/// Runs Chromium headless on `page` with `extra` flags and a fresh profile; its stdout
/// and stderr, after at most a minute.
fn chromium_run(browser: &str, page: &Path, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {browser}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).unwrap();
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{browser} took over a minute on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "{browser}: {status}\n{err}");
    (out, err)
}

/// A screenshot of the page `html` without its script (what a browser with JavaScript
/// off shows; headless Chromium takes no screenshot with scripts disabled).
fn screenshot_without_script(browser: &str, dir: &Path, html: &str) -> Screenshot {
    let start = html.find("<script>").expect("the page's script");
    let end = html.find("</script>").unwrap() + "</script>".len();
    let page = dir.join("no-script.html");
    std::fs::write(&page, format!("{}{}", &html[..start], &html[end..])).unwrap();
    let shot = dir.join("no-script.png");
    chromium_run(
        browser,
        &page,
        &[format!("--screenshot={}", shot.display())],
    );
    Screenshot::read(&shot)
}

/// Opens `page` twice: once for its DOM and console (logged to stderr), once for a
/// screenshot.
fn open(browser: &str, page: &Path) -> Rendered {
    let (dom, log) = chromium_run(
        browser,
        page,
        &[
            "--enable-logging=stderr".into(),
            "--v=0".into(),
            "--dump-dom".into(),
        ],
    );
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    let shot = page.with_extension("png");
    chromium_run(browser, page, &[format!("--screenshot={}", shot.display())]);
    Rendered {
        dom,
        console,
        screenshot: Screenshot::read(&shot),
    }
}

/// The value of attribute `name` of the first `tag` element in `dom`.
fn attribute(dom: &str, tag: &str, name: &str) -> Option<String> {
    let start = dom.find(&format!("<{tag}"))?;
    let element = &dom[start..start + dom[start..].find('>')?];
    let at = element.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(element[at..at + element[at..].find('"')?].to_string())
}

/// The `id`s of the page's charts, in order.
fn chart_ids(html: &str) -> Vec<String> {
    html.split("<figure class=\"chart")
        .skip(1)
        .filter_map(|f| {
            let at = f.find(" id=\"")? + 5;
            Some(f[at..at + f[at..].find('"')?].to_string())
        })
        .collect()
}

/// A short run against `mock` saved with `--save-detailed`: its result file.
fn detailed_run(mock: &Mock, rate: &str, label: Option<&str>) -> (Run, PathBuf) {
    let mut bench = Bench::against(&mock.url)
        .backend("openai-chat")
        .random(16, 24)
        .prompts(30)
        .args(["--request-rate", rate, "--seed", "1"])
        // The default name holds the label, which may hold a `/`.
        .args(["--result-filename", "result.json"])
        .save_detailed();
    if let Some(label) = label {
        bench = bench.args(["--label", label]);
    }
    let run = bench.run().assert_success();
    let file = run.result_dir().join("result.json");
    (run, file)
}

fn mock_with_delays() -> Mock {
    mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        ..Default::default()
    })
}

/// `bench report ARGS -o DIR/report.html`: the page.
fn report(dir: &Path, args: &[&Path]) -> (Run, PathBuf, String) {
    let page = dir.join("report.html");
    let run = Bench::new()
        .arg("report")
        .args(args)
        .arg("-o")
        .arg(&page)
        .run()
        .assert_success();
    let html = std::fs::read_to_string(&page).unwrap();
    (run, page, html)
}

/// The page loads nothing: no `src=`/`href=` attribute (to the network or anywhere:
/// the page is one file), no `url(` or `@import` in its style, and no `http://` or
/// `https://` but the SVG namespace.
fn assert_self_contained(html: &str) {
    for needle in ["src=", "href=", "url(", "@import"] {
        if let Some(at) = html.find(needle) {
            let context = &html[at.saturating_sub(40)..(at + 60).min(html.len())];
            panic!("the page refers to a resource ({needle}): ...{context}...");
        }
    }
    let namespace = "http://www.w3.org/2000/svg";
    let stripped = html.replace(&format!("\"{namespace}\""), "");
    assert!(
        !stripped.contains("http://") && !stripped.contains("https://"),
        "the page holds a URL"
    );
}

/// Above each chart's x axis in the screenshot: drawn bars, lines or points in the
/// first series colour (tab10 blue), not a blank area.
fn assert_charts_drawn(shot: &Screenshot) {
    let axes = shot.axis_rows();
    assert!(!axes.is_empty(), "the screenshot shows no chart");
    for &y in &axes {
        let area = y.saturating_sub(CHART_PX)..y;
        let variance = shot.variance(area.clone());
        assert!(
            variance > 100.0,
            "the chart above row {y} is blank: variance {variance}"
        );
    }
    let drawn: usize = axes
        .iter()
        .map(|&y| shot.count(BLUE, y.saturating_sub(CHART_PX)..y))
        .sum();
    assert!(
        drawn >= 50 * axes.len(),
        "{drawn} series pixels above {} axes",
        axes.len()
    );
}

/// What every rendered report must show: no console message, every chart of the page
/// laid out by the browser, and drawn in the screenshot (the rows holding the charts'
/// blue are not blank).
fn assert_rendered(r: &Rendered, html: &str) -> usize {
    assert!(r.console.is_empty(), "console messages: {:#?}", r.console);
    let charts = chart_ids(html).len();
    let rendered: usize = attribute(&r.dom, "body", "data-rendered")
        .expect("the page's script ran and set data-rendered")
        .parse()
        .unwrap();
    assert_eq!(rendered, charts, "charts the browser laid out");
    assert_charts_drawn(&r.screenshot);
    charts
}

#[test]
fn a_detailed_run_is_reported_with_every_chart_drawn_in_a_browser() {
    let m = mock_with_delays();
    let (_run, result) = detailed_run(&m, "50", None);
    drop(m);
    let dir = tempfile::tempdir().unwrap();
    let (out, page, html) = report(dir.path(), &[&result]);
    assert!(out.stdout.contains("report.html"), "{out}");
    assert_self_contained(&html);
    assert_eq!(
        chart_ids(&html),
        [
            "dist-ttft",
            "dist-tpot",
            "dist-itl",
            "dist-e2el",
            "throughput",
            "timeline-0"
        ]
    );
    // The summary holds the result's own figures, as the table prints them.
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    for key in ["mean_ttft_ms", "p99_itl_ms", "output_throughput"] {
        let shown = format!("{:.2}", r[key].as_f64().unwrap());
        assert!(html.contains(&format!(">{shown}</td>")), "{key} {shown}");
    }
    assert!(html.contains(">Successful requests</th><td class=\"run-0\">30</td>"));
    assert!(!html.contains("id=\"not-detailed\""));
    let Some(browser) = chromium() else { return };
    let rendered = open(browser, &page);
    assert_eq!(assert_rendered(&rendered, &html), 6);
    // The charts are there without the script too.
    assert_charts_drawn(&screenshot_without_script(browser, dir.path(), &html));
}

#[test]
fn two_results_side_by_side_with_the_sweeps_curves_and_pareto_front_and_labels_escaped() {
    let m = mock_with_delays();
    let (_a, slow) = detailed_run(&m, "20", None);
    let label = "<script>alert('label')</script>";
    let (_b, fast) = detailed_run(&m, "80", Some(label));
    drop(m);
    let dir = tempfile::tempdir().unwrap();
    let (_, page, html) = report(dir.path(), &[&slow, &fast]);
    assert_self_contained(&html);
    // The label is text: escaped in the table, the toggles' data, the charts' legends.
    assert_eq!(
        html.matches("<script").count(),
        1,
        "only the page's own script"
    );
    assert!(html.contains("&lt;script&gt;alert(&#39;label&#39;)&lt;/script&gt;"));
    assert!(
        html.contains("A sweep over request_rate"),
        "the rates differ"
    );
    let ids = chart_ids(&html);
    for id in [
        "curve-p99_ttft_ms",
        "pareto",
        "dist-ttft",
        "dist-e2el",
        "throughput",
        "concurrency",
        "timeline-0",
        "timeline-1",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    // One column per result, the second with its change from the first.
    assert_eq!(html.matches(" data-name=").count(), 2);
    assert!(html.contains("<span class=\"delta"));
    let Some(browser) = chromium() else { return };
    let rendered = open(browser, &page);
    assert_eq!(assert_rendered(&rendered, &html), ids.len());
    // The script made one checkbox per result, named by its (escaped) label.
    assert_eq!(rendered.dom.matches("type=\"checkbox\"").count(), 2);
    assert!(!rendered.dom.contains("<script>alert"));
}

#[test]
fn a_result_without_per_request_lists_gets_its_summary_and_a_note() {
    let m = mock_with_delays();
    let run = Bench::against(&m.url)
        .backend("openai-chat")
        .random(16, 8)
        .prompts(10)
        .save_result()
        .run()
        .assert_success();
    drop(m);
    let result = std::fs::read_dir(run.result_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.to_string_lossy().ends_with(".pytorch.json"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_, _, html) = report(dir.path(), &[&result]);
    assert!(chart_ids(&html).is_empty());
    assert!(html.contains("id=\"not-detailed\""));
    assert!(html.contains("--save-detailed"));
    assert!(html.contains(">Mean TTFT (ms)</th>"));
}

#[test]
fn a_sweep_of_the_mock_server_is_reported_with_its_curves_per_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let params = |name: &str, value: serde_json::Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let serve = params(
        "serve.json",
        serde_json::json!([{"ttft_ms": 5}, {"ttft_ms": 60}]),
    );
    let bench_params = params(
        "bench.json",
        serde_json::json!([{"max_concurrency": 1}, {"max_concurrency": 4}]),
    );
    let out = dir.path().join("out");
    Bench::new()
        .args(["sweep", "serve", "-e", "exp", "-o"])
        .arg(&out)
        .arg("--serve-cmd")
        .arg(format!(
            "{} mock-server --host 127.0.0.1 --port {port} --itl-ms 2",
            env!("CARGO_BIN_EXE_bench")
        ))
        .arg("--bench-cmd")
        .arg(format!(
            "bench serve --model mock --tokenizer {} --base-url http://127.0.0.1:{port} \
             --dataset-name random --random-input-len 8 --random-output-len 8 \
             --num-prompts 8 --disable-tqdm --save-detailed",
            gpt2()
        ))
        .arg("--serve-params")
        .arg(&serve)
        .arg("--bench-params")
        .arg(&bench_params)
        .args(["--num-runs", "1", "--server-stop-grace", "5"])
        .run()
        .assert_success();

    let (_, page, html) = report(dir.path(), &[&out]);
    assert_self_contained(&html);
    // Every run=N.json once (not again from the combinations' summary.json), named by
    // its combination's parameters.
    assert_eq!(html.matches(" data-name=").count(), 4);
    assert!(html.contains("data-name=\"ttft_ms=60, max_concurrency=4\""));
    assert!(html.contains("SERVE--ttft_ms=60-BENCH--max_concurrency=4/run=0.json</small>"));
    assert!(
        html.contains("A sweep over ttft_ms, max_concurrency"),
        "the serve then the bench parameters"
    );
    // One curve per server setting through its concurrencies.
    let curve = html.split("id=\"curve-p99_ttft_ms\"").nth(1).unwrap();
    let curve = &curve[..curve.find("</figure>").unwrap()];
    // (The legend's text: plotters writes each on a line of its own.)
    let legend = |name: &str| curve.lines().any(|l| l.trim() == name);
    assert!(legend("ttft_ms=5") && legend("ttft_ms=60"), "{curve}");
    let ids = chart_ids(&html);
    for id in ["pareto", "dist-ttft", "timeline-0", "timeline-3"] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    let Some(browser) = chromium() else { return };
    let rendered = open(browser, &page);
    assert_eq!(assert_rendered(&rendered, &html), ids.len());
    assert_eq!(rendered.dom.matches("type=\"checkbox\"").count(), 4);
}

#[test]
fn missing_or_malformed_result_files_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let cases = [
        ("missing.json", None, "missing.json"),
        ("broken.json", Some("{\"completed\": "), "not valid JSON"),
        ("list.json", Some("[1, 2]"), "not a JSON object"),
        (
            "other.json",
            Some("{\"a\": 1}"),
            "not a serving benchmark result",
        ),
        (
            "uneven.json",
            Some(r#"{"completed": 1, "ttfts": [0.1], "itls": [[]], "start_times": []}"#),
            "start_times has 0 entries",
        ),
    ];
    for (name, content, why) in cases {
        let path = dir.path().join(name);
        if let Some(content) = content {
            std::fs::write(&path, content).unwrap();
        }
        let out = Bench::new()
            .arg("report")
            .arg(&path)
            .arg("-o")
            .arg(&page)
            .run()
            .assert_failure();
        assert!(
            out.stderr.contains(&path.display().to_string()),
            "{name}: {out}"
        );
        assert!(out.stderr.contains(why), "{name}: {out}");
        assert!(!page.exists(), "{name}: no page is written");
    }
    let out = Bench::new()
        .args(["report", "-o"])
        .arg(&page)
        .arg(dir.path())
        .run()
        .assert_failure();
    assert!(out.stderr.contains("no sweep results"), "{out}");
}
