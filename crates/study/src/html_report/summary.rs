//! The summary table: one row per figure of vLLM's result (settings, requests,
//! throughput, then each latency metric's mean, median, std and percentiles as the result
//! holds them), one column per result, and from the second column on the difference from
//! the first.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::html::{element, escape};

/// Whether a larger value of a row is an improvement: it colours the differences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
    /// Settings and counts that are neither good nor bad.
    Neither,
}

/// One row: the result key it shows.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    key: String,
    label: String,
    better: Better,
}

impl Row {
    fn new(key: &str, label: &str, better: Better) -> Row {
        Row {
            key: key.into(),
            label: label.into(),
            better,
        }
    }
}

/// The run settings vLLM writes before the measurements.
const SETTINGS: [(&str, &str); 7] = [
    ("backend", "Backend"),
    ("model_id", "Model"),
    ("date", "Date"),
    ("num_prompts", "Prompts"),
    ("request_rate", "Request rate (req/s)"),
    ("burstiness", "Burstiness"),
    ("max_concurrency", "Maximum concurrency"),
];

/// The request counts and throughputs, labelled as vLLM's console block labels them.
const REQUESTS: [(&str, &str, Better); 6] = [
    ("duration", "Benchmark duration (s)", Better::Neither),
    ("completed", "Successful requests", Better::Higher),
    ("failed", "Failed requests", Better::Lower),
    // Only in runs with --request-cancellation-rate: what the client chose, not the server.
    ("cancelled", "Cancelled requests", Better::Neither),
    ("total_input_tokens", "Total input tokens", Better::Neither),
    (
        "total_output_tokens",
        "Total generated tokens",
        Better::Neither,
    ),
];

const THROUGHPUT: [(&str, &str, Better); 6] = [
    (
        "request_throughput",
        "Request throughput (req/s)",
        Better::Higher,
    ),
    ("request_goodput", "Request goodput (req/s)", Better::Higher),
    (
        "output_throughput",
        "Output token throughput (tok/s)",
        Better::Higher,
    ),
    (
        "total_token_throughput",
        "Total token throughput (tok/s)",
        Better::Higher,
    ),
    (
        "max_output_tokens_per_s",
        "Peak output token throughput (tok/s)",
        Better::Higher,
    ),
    (
        "max_concurrent_requests",
        "Peak concurrent requests",
        Better::Neither,
    ),
];

/// A latency statistic key, `{stat}_{metric}_ms` (`mean_ttft_ms`, `p99.9_e2el_ms`): the
/// metric and the statistic's label.
fn latency_key(key: &str) -> Option<(&str, String)> {
    let rest = key.strip_suffix("_ms")?;
    let (stat, metric) = rest.split_once('_')?;
    if metric.is_empty() || metric.contains('_') {
        return None;
    }
    let label = match stat {
        "mean" => "Mean".to_string(),
        "median" => "Median".to_string(),
        "std" => "Std".to_string(),
        p => {
            let digits = p.strip_prefix('p')?;
            digits.parse::<f64>().ok()?;
            format!("P{digits}")
        }
    };
    Some((metric, label))
}

/// The table's sections and rows, for rows at least one result holds (not as `null`):
/// settings (with the sweep's `params`), requests, throughput, then one section per
/// latency metric in the order the results hold them.
fn sections(results: &[&Map<String, Value>], params: &[String]) -> Vec<(String, Vec<Row>)> {
    let held = |key: &str| {
        results
            .iter()
            .any(|r| r.get(key).is_some_and(|v| !v.is_null()))
    };
    let mut settings: Vec<Row> = SETTINGS
        .iter()
        .map(|(key, label)| Row::new(key, label, Better::Neither))
        .collect();
    for param in params {
        if !settings.iter().any(|row| row.key == *param) {
            settings.push(Row::new(param, param, Better::Neither));
        }
    }
    let table = |rows: &[(&str, &str, Better)]| -> Vec<Row> {
        rows.iter()
            .map(|(key, label, better)| Row::new(key, label, *better))
            .collect()
    };
    let mut sections = vec![
        ("Settings".to_string(), settings),
        ("Requests".to_string(), table(&REQUESTS)),
        ("Throughput".to_string(), table(&THROUGHPUT)),
    ];
    let mut latency: Vec<(String, Vec<Row>)> = Vec::new();
    for key in results.iter().flat_map(|r| r.keys()) {
        let Some((metric, stat)) = latency_key(key) else {
            continue;
        };
        let name = metric.to_uppercase();
        let row = Row::new(key, &format!("{stat} {name} (ms)"), Better::Lower);
        match latency.iter_mut().find(|(section, _)| *section == name) {
            Some((_, rows)) if rows.iter().any(|r| r.key == row.key) => {}
            Some((_, rows)) => rows.push(row),
            None => latency.push((name, vec![row])),
        }
    }
    sections.extend(latency);
    sections
        .into_iter()
        .map(|(title, rows)| (title, rows.into_iter().filter(|r| held(&r.key)).collect()))
        .filter(|(_, rows): &(String, Vec<Row>)| !rows.is_empty())
        .collect()
}

/// A value as the table shows it: whole numbers as they are, other numbers with two
/// decimals (vLLM's console), text escaped, absent as a dash.
fn cell_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "\u{2014}".into(),
        Some(Value::Number(n)) if n.is_f64() => format!("{:.2}", n.as_f64().unwrap_or(f64::NAN)),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The change from `base` to `value` in percent, when both are finite numbers and `base`
/// is not zero. A change that rounds to 0.0% is 0 (never shown as `-0.0%`).
fn change_pct(base: Option<&Value>, value: Option<&Value>) -> Option<f64> {
    let (base, value) = (base?.as_f64()?, value?.as_f64()?);
    let pct = (value - base) / base.abs() * 100.0;
    (base != 0.0).then_some(if pct.abs() < 0.05 { 0.0 } else { pct })
}

/// The summary: two tables side by side (settings, requests and throughput; then the
/// latency metrics), one column per result (`names` are their column titles, `sources`
/// the files under them).
pub fn table(
    names: &[&str],
    sources: &[&str],
    results: &[&Map<String, Value>],
    params: &[String],
) -> String {
    let (general, latency): (Vec<_>, Vec<_>) = sections(results, params)
        .into_iter()
        .partition(|(title, _)| ["Settings", "Requests", "Throughput"].contains(&title.as_str()));
    let mut out = String::from("<div class=\"tables\">");
    for (part, sections) in [general, latency].into_iter().enumerate() {
        if sections.is_empty() {
            continue;
        }
        out.push_str(
            "<div class=\"table-wrap\"><table class=\"summary\"><thead><tr><th>Metric</th>",
        );
        for (i, (name, source)) in names.iter().zip(sources).enumerate() {
            // The first table's headers carry the names the script labels its checkboxes with.
            let data = match part {
                0 => format!(" data-name=\"{}\"", escape(name)),
                _ => String::new(),
            };
            let _ = write!(
                out,
                "<th class=\"run run-{i}\"{data}><span class=\"swatch c{}\"></span>{}<small>{}</small></th>",
                i % super::run::PALETTE_SIZE,
                escape(name),
                escape(source),
            );
        }
        out.push_str("</tr></thead><tbody>");
        for (title, rows) in sections {
            let _ = write!(
                out,
                "<tr class=\"section\"><th colspan=\"{}\">{}</th></tr>",
                results.len() + 1,
                escape(&title)
            );
            for row in rows {
                out.push_str("<tr>");
                element(&mut out, "th", "", &row.label);
                let base = results.first().and_then(|r| r.get(&row.key));
                for (i, result) in results.iter().enumerate() {
                    let value = result.get(&row.key);
                    let _ = write!(out, "<td class=\"run-{i}\">{}", escape(&cell_text(value)));
                    let change = (i > 0 && row.better != Better::Neither)
                        .then(|| change_pct(base, value))
                        .flatten();
                    if let Some(pct) = change {
                        let class = match (row.better, pct) {
                            (_, p) if p.abs() < 1.0 => "same",
                            (Better::Higher, p) if p > 0.0 => "better",
                            (Better::Lower, p) if p < 0.0 => "better",
                            _ => "worse",
                        };
                        let _ = write!(out, " <span class=\"delta {class}\">{pct:+.1}%</span>");
                    }
                    out.push_str("</td>");
                }
                out.push_str("</tr>");
            }
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn latency_keys_are_recognised_with_any_percentile() {
        assert_eq!(latency_key("mean_ttft_ms"), Some(("ttft", "Mean".into())));
        assert_eq!(latency_key("p99.9_e2el_ms"), Some(("e2el", "P99.9".into())));
        assert_eq!(latency_key("std_itl_ms"), Some(("itl", "Std".into())));
        assert_eq!(latency_key("schedule_lag_ms_mean"), None);
        assert_eq!(latency_key("probe_median_e2el_ms"), None);
        assert_eq!(latency_key("px_ttft_ms"), None);
    }

    #[test]
    fn rows_follow_the_results_keys_and_skip_what_none_holds() {
        let a = map(
            json!({"backend": "openai", "request_goodput": null, "completed": 10,
            "mean_ttft_ms": 1.0, "p99_ttft_ms": 2.0, "mean_e2el_ms": 3.0}),
        );
        let b =
            map(json!({"backend": "vllm", "completed": 9, "p50_ttft_ms": 1.5, "max_num_seqs": 8}));
        let s = sections(&[&a, &b], &["max_num_seqs".into()]);
        let keys: Vec<(String, Vec<String>)> = s
            .iter()
            .map(|(t, rows)| (t.clone(), rows.iter().map(|r| r.key.clone()).collect()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (
                    "Settings".into(),
                    vec!["backend".into(), "max_num_seqs".into()]
                ),
                ("Requests".into(), vec!["completed".into()]),
                (
                    "TTFT".into(),
                    vec![
                        "mean_ttft_ms".into(),
                        "p99_ttft_ms".into(),
                        "p50_ttft_ms".into()
                    ]
                ),
                ("E2EL".into(), vec!["mean_e2el_ms".into()]),
            ]
        );
    }

    #[test]
    fn later_columns_show_their_change_coloured_by_what_is_better() {
        let a = map(json!({"request_throughput": 10.0, "mean_ttft_ms": 100.0, "completed": 10}));
        let b = map(json!({"request_throughput": 12.0, "mean_ttft_ms": 150.0, "completed": 10}));
        assert_eq!(
            change_pct(Some(&json!(100.0)), Some(&json!(99.99))),
            Some(0.0)
        );
        let html = table(&["a", "b"], &["a.json", "b.json"], &[&a, &b], &[]);
        assert!(
            html.contains("12.00 <span class=\"delta better\">+20.0%</span>"),
            "{html}"
        );
        assert!(
            html.contains("150.00 <span class=\"delta worse\">+50.0%</span>"),
            "{html}"
        );
        assert!(
            html.contains("10 <span class=\"delta same\">+0.0%</span>"),
            "{html}"
        );
        assert_eq!(html.matches("delta").count(), 3, "{html}");
    }

    #[test]
    fn result_text_is_escaped() {
        let a = map(json!({"model_id": "<script>alert(1)</script>"}));
        let html = table(&["<b>x</b>"], &["<i>.json"], &[&a], &[]);
        assert!(!html.contains("<script>") && !html.contains("<b>") && !html.contains("<i>"));
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
    }
}
