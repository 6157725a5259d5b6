//! `bench report`: result files in, one self-contained HTML page out. The page loads
//! nothing: its style sheet and script are inline, its charts inline SVG, and its
//! Content-Security-Policy forbids every fetch, so it opens the same offline, from a mail
//! attachment or a CI artifact. Every text a result file carries is escaped (a result file
//! is untrusted input). The page is complete without JavaScript; the script only adds
//! one checkbox per result to hide or show its column and charts.

mod charts;
mod html;
mod load;
mod run;
mod summary;

use std::fmt::Write;

use anyhow::Result;
use serde_json::{Map, Value};

use html::escape;
pub use load::load;
use run::{LOAD_SETTINGS, PALETTE_SIZE};
pub use run::{ReportRun, parameters};

use crate::results::RequestTimes;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The page may load nothing and run only its own inline script: a result file cannot
/// make it fetch anything, even if escaping were ever to miss a place.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// What the report shows: one or more results, side by side in that order (the first
/// is the baseline the others' differences are taken from).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub runs: Vec<ReportRun>,
    /// The timeline's ITL bands, ascending milliseconds (vLLM's
    /// `--timeline-itl-thresholds`, 25 and 50 by default).
    pub itl_thresholds_ms: Vec<f64>,
}

/// The report's HTML page.
pub fn render(report: &Report) -> Result<String> {
    let runs = &report.runs;
    let params = parameters(runs);
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let sources: Vec<&str> = runs.iter().map(|r| r.source.as_str()).collect();
    let results: Vec<&Map<String, Value>> = runs.iter().map(|r| &r.result).collect();
    let detailed: Vec<(usize, &ReportRun, &[RequestTimes])> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r, r.times.as_deref()?)))
        .collect();

    let title = match runs.as_slice() {
        [one] => format!("bench report: {}", one.name),
        _ => format!("bench report: {} results", runs.len()),
    };
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}",
        escape(&title)
    );
    for i in 0..PALETTE_SIZE {
        let _ = writeln!(page, ".c{i} {{ background: {}; }}", charts::color(i).hex());
    }
    page.push_str("</style></head><body><main>");
    let _ = write!(page, "<header><h1>{}</h1><p>", escape(&title));
    match runs.as_slice() {
        [one] => page.push_str(&escape(&one.source)),
        _ if params.is_empty() => page.push_str("Side by side; differences are from the first."),
        _ => {
            let _ = write!(
                page,
                "A sweep over {}; differences are from the first.",
                escape(&params.join(", "))
            );
        }
    }
    page.push_str("</p><div id=\"run-toggles\"></div></header>");

    page.push_str("<section id=\"summary\"><h2>Summary</h2>");
    page.push_str(&summary::table(&names, &sources, &results, &params));
    page.push_str("</section>");

    let summary_only: Vec<&str> = runs
        .iter()
        .filter(|r| r.times.is_none())
        .map(|r| r.name.as_str())
        .collect();
    if !summary_only.is_empty() {
        let _ = write!(
            page,
            "<p class=\"note\" id=\"not-detailed\">Saved without per-request times: {}. \
             The latency distributions, the timeline and throughput over time need them: \
             run <code>bench serve</code> with <code>--save-result --save-detailed</code>.</p>",
            escape(&summary_only.join(", "))
        );
    }
    if !detailed.is_empty() {
        let figures = charts::distributions(&detailed)?;
        section(
            &mut page,
            "distributions",
            "Latency distributions",
            &figures,
        );
        let figures = charts::throughput(&detailed)?;
        section(
            &mut page,
            "throughput-over-time",
            "Throughput over time",
            &figures,
        );
    }
    if runs.len() > 1 && !params.is_empty() {
        // The load settings vary along a curve; the other parameters make the curves
        // (not the sweep's own `_`-names of its parameter sets, which vary with them).
        let curve_by: Vec<String> = params
            .iter()
            .filter(|p| !LOAD_SETTINGS.contains(&p.as_str()) && !p.starts_with('_'))
            .cloned()
            .collect();
        let mut figures = charts::curves(runs, &curve_by)?;
        figures.extend(charts::pareto(runs)?);
        section(&mut page, "sweep", "Sweep", &figures);
    }
    if !detailed.is_empty() {
        let figures = charts::timelines(&detailed, &report.itl_thresholds_ms)?;
        section(&mut page, "timeline", "Timeline", &figures);
    }

    let _ = writeln!(
        page,
        "<footer>Made by bench {} from {} result file{}.</footer></main>\
         <script>{SCRIPT}</script></body></html>",
        env!("CARGO_PKG_VERSION"),
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    Ok(page)
}

/// A section of charts.
fn section(page: &mut String, id: &str, title: &str, figures: &[charts::Figure]) {
    if figures.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<section id=\"{id}\"><h2>{}</h2><div class=\"charts\">",
        escape(title)
    );
    for figure in figures {
        figure.html(page);
    }
    page.push_str("</div></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(name: &str, result: Value) -> ReportRun {
        ReportRun {
            name: name.into(),
            source: format!("{name}.json"),
            result: result.as_object().unwrap().clone(),
            times: None,
        }
    }

    #[test]
    fn parameters_are_the_sweeps_keys_then_the_load_settings_that_differ() {
        let runs = [
            run(
                "a",
                json!({"request_rate": 1.0, "max_concurrency": 8, "run_number": 0, "max_num_seqs": 4, "x": 1}),
            ),
            run(
                "b",
                json!({"request_rate": 2.0, "max_concurrency": 8, "run_number": 0, "max_num_seqs": 8, "x": 1}),
            ),
        ];
        assert_eq!(parameters(&runs), ["max_num_seqs", "request_rate"]);
        assert!(parameters(&runs[..1]).is_empty());
        let plain = [
            run(
                "a",
                json!({"request_rate": 1.0, "max_concurrency": null, "completed": 3}),
            ),
            run(
                "b",
                json!({"request_rate": 1.0, "max_concurrency": 4, "completed": 4}),
            ),
        ];
        assert_eq!(parameters(&plain), ["max_concurrency"]);
    }

    #[test]
    fn the_page_is_self_contained_and_escapes_result_text() {
        let page = render(&Report {
            itl_thresholds_ms: vec![25.0, 50.0],
            runs: vec![
                run(
                    "<script>alert(1)</script>",
                    json!({"model_id": "m\"><img src=x>", "completed": 2}),
                ),
                run("b", json!({"model_id": "m", "completed": 3})),
            ],
        })
        .unwrap();
        assert_eq!(
            page.matches("<script>").count(),
            1,
            "only the page's own script"
        );
        assert!(!page.contains("<img"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        for attr in [
            "src=\"http",
            "href=\"http",
            "src='http",
            "href='http",
            "url(",
        ] {
            assert!(!page.contains(attr), "{attr}");
        }
        assert!(page.contains("default-src 'none'"));
    }
}
