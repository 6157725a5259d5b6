//! `calculate` on a hand-made run whose every metric is worked out by hand below.

use super::*;

/// Four requests over a 10 s benchmark (times in seconds):
///
/// | idx | ok | prompt | usage | text (words)       | intended | dispatch | start | ttft | itl            | latency |
/// |-----|----|--------|-------|--------------------|----------|----------|-------|------|----------------|---------|
/// | 0   | y  | 100    | 5     | "one ... five" (5) | 0.0      | 0.0      | 0.0   | 0.1  | .02 .03 .05 .1 | 0.3     |
/// | 1   | y  | 50     | 1     | "hi there" (2)     | 0.05     | 0.1      | 0.2   | 0.2  | -              | 0.2     |
/// | 2   | n  | 80     | -     | "" (HTTP 500)      | 1.0      | 1.0      | 1.0   | 0    | -              | 0       |
/// | 3   | y  | 30     | none  | "a b c" (3)        | 1.0      | 1.25     | 1.5   | 0.4  | .2 .1          | 0.7     |
///
/// Client queue time is start - dispatch: [0, 0.1, 0, 0.25]; schedule lag is
/// dispatch - intended: [0, 0.05, 0, 0.25].
///
/// The token counter counts whitespace-separated words, so request 3 (no usage) counts 3
/// output tokens, and request 1's server count (1) disagrees with the tokenizer's (2).
pub(crate) fn fixture() -> Vec<RequestRecord> {
    let rec = |index: usize, prompt_len: u32, usage: Option<u32>, text: &str| RequestRecord {
        index,
        request_id: format!("req-{index}"),
        prompt_len,
        expected_output_len: 8,
        output_tokens: usage,
        server_output_tokens: usage,
        generated_text: text.to_string(),
        ..RequestRecord::default()
    };
    vec![
        RequestRecord {
            ttft: 0.1,
            itl: vec![0.02, 0.03, 0.05, 0.1],
            latency: 0.3,
            start_time: 0.0,
            dispatch_time: 0.0,
            intended_start_time: 0.0,
            ..rec(0, 100, Some(5), "one two three four five")
        },
        RequestRecord {
            ttft: 0.2,
            latency: 0.2,
            start_time: 0.2,
            dispatch_time: 0.1,
            intended_start_time: 0.05,
            concurrency_wait: 0.1,
            ..rec(1, 50, Some(1), "hi there")
        },
        RequestRecord {
            outcome: Err(FailureKind::Http(500).failure("Internal Server Error")),
            start_time: 1.0,
            dispatch_time: 1.0,
            intended_start_time: 1.0,
            ..rec(2, 80, None, "")
        },
        RequestRecord {
            ttft: 0.4,
            itl: vec![0.2, 0.1],
            latency: 0.7,
            start_time: 1.5,
            dispatch_time: 1.25,
            intended_start_time: 1.0,
            concurrency_wait: 0.25,
            ..rec(3, 30, None, "a b c")
        },
    ]
}

/// Counts words: a stand-in tokenizer whose counts are easy to check by eye.
pub(crate) fn words(text: &str) -> Result<usize> {
    Ok(text.split_whitespace().count())
}

pub(crate) fn config() -> MetricsConfig {
    MetricsConfig {
        percentiles: vec![50.0, 99.0],
        percentile_metrics: PercentileMetric::ALL.to_vec(),
        goodput: Goodput::default(),
        input_tokens: InputTokenSource::Usage,
        prefix_block_size: 16,
        split_itl_by_tokens: false,
        cost_per_hour_usd: None,
    }
}

pub(crate) fn fixture_metrics() -> Metrics {
    calculate(fixture(), 10.0, Some(&words), &config()).unwrap()
}

#[track_caller]
fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
}

#[track_caller]
fn summary(got: &Summary, mean: f64, median: f64, std: f64, p50: f64, p99: f64) {
    close(got.mean, mean);
    close(got.median, median);
    close(got.std, std);
    assert_eq!(got.percentiles.len(), 2);
    assert_eq!((got.percentiles[0].0, got.percentiles[1].0), (50.0, 99.0));
    close(got.percentiles[0].1, p50);
    close(got.percentiles[1].1, p99);
}

#[test]
fn counts_and_throughputs() {
    let m = fixture_metrics();
    assert_eq!(m.completed, 3);
    assert_eq!(m.failed, 1);
    // Successful prompts only: 100 + 50 + 30.
    assert_eq!(m.total_input, 180);
    // output_lens [5, 1, 0, 3]: usage, usage, failed, tokenizer.
    assert_eq!(m.per_request.output_lens, vec![5, 1, 0, 3]);
    assert_eq!(m.total_output, 9);
    assert_eq!(m.duration_s, 10.0);
    close(m.request_throughput, 0.3); // 3 / 10
    close(m.output_throughput, 0.9); // 9 / 10
    close(m.total_token_throughput, 18.9); // (180 + 9) / 10
    assert_eq!(m.request_goodput, 0.0); // no SLO given
    assert!(m.has_tokenizer);
}

#[test]
fn latency_statistics() {
    let m = fixture_metrics();
    // TTFT [0.1, 0.2, 0.4]: mean 0.7/3; median 0.2; deviations -0.1333, -0.0333, 0.1667
    // -> variance 0.046667/3, std 0.124722; p99 index 2*0.99 = 1.98 -> 0.2 + 0.2*0.98.
    summary(
        &m.ttft,
        700.0 / 3.0,
        200.0,
        124.72191289246473,
        200.0,
        396.0,
    );
    // TPOT: request 0 (0.3-0.1)/(5-1) = 0.05, request 3 (0.7-0.4)/(3-1) = 0.15; request 1
    // has one token and is left out. Mean 0.1, std 0.05, p99 0.05 + 0.1*0.99.
    summary(&m.tpot, 100.0, 100.0, 50.0, 100.0, 149.0);
    // ITL pooled [.02 .03 .05 .1 .2 .1]: sum 0.5 -> mean 0.083333; sorted
    // [.02 .03 .05 .1 .1 .2] -> median (0.05+0.1)/2; squared deviations sum 0.0221333
    // -> std sqrt(0.0221333/6) = 0.0607362; p99 index 5*0.99 = 4.95 -> 0.1 + 0.1*0.95.
    summary(&m.itl, 500.0 / 6.0, 75.0, 60.73622386096199, 75.0, 195.0);
    // E2EL [0.3, 0.2, 0.7]: mean 0.4; median 0.3; deviations -.1 -.2 .3 -> variance
    // 0.14/3, std 0.216025; p99 index 1.98 over [.2 .3 .7] -> 0.3 + 0.4*0.98.
    summary(&m.e2el, 400.0, 300.0, 216.02468994692865, 300.0, 692.0);
    // Client queue (start - dispatch) of successes [0, 0.1, 0.25]: mean 0.116667; median
    // 0.1; variance 0.0316667/3, std 0.102740; p99 0.1 + 0.15*0.98 = 0.247.
    summary(
        &m.client_queue_time,
        350.0 / 3.0,
        100.0,
        102.74023338281629,
        100.0,
        247.0,
    );
    // E2EL + queue [0.3, 0.3, 0.95]: mean 1.55/3; p99 0.3 + 0.65*0.98 = 0.937.
    summary(
        &m.e2el_including_client_queue,
        1550.0 / 3.0,
        300.0,
        306.41293851417055,
        300.0,
        937.0,
    );
}

#[test]
fn peaks() {
    let m = fixture_metrics();
    // Successes span [0.0, 2.2]: ceil(2.2) + 1 = 4 buckets. Chunks: request 0 at 0.1,
    // 0.12, 0.15, 0.2, 0.3 and request 1 at 0.4 -> bucket 0 holds 6; request 3 at 1.9
    // (bucket 1), 2.1 and 2.2 (bucket 2). The failed request is ignored.
    assert_eq!(m.max_output_tokens_per_s, 6.0);
    // Per whole second (vLLM): requests 0 and 1 are active in second 0, request 3 in
    // seconds 1 and 2 -> [2, 1, 1, 0].
    assert_eq!(m.max_concurrent_requests, 2);
    // Exactly: [0, 0.3) and [0.2, 0.4) overlap; [1.5, 2.2) is alone.
    assert_eq!(m.peak_concurrent_requests, 2);
}

#[test]
fn per_request_lists_are_in_workload_order_even_when_records_are_not() {
    let mut shuffled = fixture();
    shuffled.reverse();
    let m = calculate(shuffled, 10.0, Some(&words), &config()).unwrap();
    assert_eq!(m, fixture_metrics());
    let p = &m.per_request;
    let indices: Vec<usize> = p.records.iter().map(|r| r.index).collect();
    assert_eq!(indices, vec![0, 1, 2, 3]);
    assert_eq!(p.input_lens().collect::<Vec<_>>(), vec![100, 50, 80, 30]);
    assert_eq!(p.ttfts().collect::<Vec<_>>(), vec![0.1, 0.2, 0.0, 0.4]);
    let itls: Vec<&[f64]> = p.itls().collect();
    assert_eq!(itls, [&[0.02, 0.03, 0.05, 0.1][..], &[], &[], &[0.2, 0.1]]);
    assert_eq!(p.latencies().collect::<Vec<_>>(), vec![0.3, 0.2, 0.0, 0.7]);
    assert_eq!(
        p.start_times().collect::<Vec<_>>(),
        vec![0.0, 0.2, 1.0, 1.5]
    );
    // On the monotonic clock once the run's origin is set (vLLM's perf_counter values).
    let mut on_clock = p.clone();
    on_clock.clock_origin_s = 1000.0;
    assert_eq!(
        on_clock.start_times().collect::<Vec<_>>(),
        vec![1000.0, 1000.2, 1001.0, 1001.5]
    );
    // start - dispatch for every request, failed ones included.
    let queue_times: Vec<f64> = p.queue_times().collect();
    close(queue_times[1], 0.1);
    close(queue_times[3], 0.25);
    assert_eq!((queue_times[0], queue_times[2]), (0.0, 0.0));
    let texts: Vec<&str> = p.generated_texts().collect();
    assert_eq!(texts, ["one two three four five", "hi there", "", "a b c"]);
    assert_eq!(
        p.errors().collect::<Vec<_>>(),
        vec!["", "", "http-500: Internal Server Error", ""]
    );
    // Looked up by workload index: request 3 was sent at 1.5 s; request 9 never was.
    assert_eq!(p.by_index(3).map(|r| r.start_time), Some(1.5));
    assert!(p.by_index(9).is_none());
    assert_eq!(m.failure_messages, vec!["http-500: Internal Server Error"]);
    assert_eq!(m.failures_by_kind, vec![(FailureKind::Http(500), 1)]);
}

#[test]
fn failures_are_counted_by_kind_most_frequent_first() {
    let failed = |index: usize, kind: FailureKind| RequestRecord {
        index,
        outcome: Err(kind.failure("why")),
        ..RequestRecord::default()
    };
    let mut records = fixture();
    for (i, kind) in [
        FailureKind::Timeout,
        FailureKind::Reset,
        FailureKind::Timeout,
        FailureKind::Http(500),
        FailureKind::NoOutput,
        FailureKind::Interrupted,
        FailureKind::Http(503),
        FailureKind::Interrupted,
    ]
    .into_iter()
    .enumerate()
    {
        records.push(failed(10 + i, kind));
    }
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    assert_eq!(m.failed, 9);
    let by_kind: Vec<(String, usize)> = m
        .failures_by_kind
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
    let expected = [
        ("http-500", 2),
        ("interrupted", 2),
        ("timeout", 2),
        ("http-503", 1),
        ("no-output", 1),
        ("reset", 1),
    ];
    assert_eq!(by_kind, expected.map(|(k, n)| (k.to_string(), n)).to_vec());
}

/// Requests cancelled on purpose are neither completed nor failed: counted on their own,
/// out of every latency, token and throughput figure, and out of the error lists.
#[test]
fn cancelled_requests_are_counted_apart_and_measure_nothing() {
    let whole = calculate(fixture(), 10.0, Some(&words), &config()).unwrap();
    let mut records = fixture();
    records.push(RequestRecord {
        index: 4,
        outcome: Err(FailureKind::Cancelled.failure("after 0.1 s")),
        generated_text: "partial text".into(),
        ttft: 0.05,
        itl: vec![0.01],
        latency: 0.1,
        start_time: 2.0,
        ..RequestRecord::default()
    });
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    assert_eq!((m.completed, m.failed, m.cancelled), (3, 1, 1));
    assert_eq!((whole.completed, whole.failed, whole.cancelled), (3, 1, 0));
    assert_eq!(m.ttft, whole.ttft);
    assert_eq!(m.itl, whole.itl);
    assert_eq!(m.e2el, whole.e2el);
    assert_eq!(m.total_output, whole.total_output);
    assert_eq!(m.output_throughput, whole.output_throughput);
    assert_eq!(m.failure_messages, whole.failure_messages);
    assert_eq!(m.failures_by_kind, whole.failures_by_kind);
    // Its place in vLLM's per-request `errors` list says no failure.
    assert_eq!(m.per_request.errors().last().as_deref(), Some(""));
}

#[test]
fn client_diagnostics() {
    let m = fixture_metrics();
    let c = &m.client;
    assert_eq!(c.sent, 4);
    // Lags (start - intended - concurrency wait) of all four requests [0, 0.05, 0, 0.25]: mean 0.075;
    // median (0 + 0.05)/2; p99 index 3*0.99 = 2.97 over [0 0 .05 .25] -> 0.05 + 0.2*0.97
    // = 0.244; max 0.25.
    close(c.schedule_lag_ms.mean, 75.0);
    close(c.schedule_lag_ms.median, 25.0);
    close(c.schedule_lag_ms.p99, 244.0);
    close(c.schedule_lag_ms.max, 250.0);
    close(c.achieved_request_rate, 0.3); // 3 completed / 10 s
    close(c.achieved_send_rate, 4.0 / 1.5); // 4 sent, last at 1.5 s
    // Requests 0 and 1 reported usage: server 5 + 1 = 6, tokenizer 5 + 2 = 7.
    let check = c.token_counts.unwrap();
    assert_eq!(check.requests_with_usage, 2);
    assert_eq!((check.server_tokens, check.tokenizer_tokens), (6, 7));
    assert_eq!(check.mismatched_requests, 1);
    assert!(
        m.warnings
            .iter()
            .any(|w| w.starts_with("1 of 2 requests reported a usage"))
    );
    assert!(
        m.warnings
            .iter()
            .any(|w| w.starts_with("1 of 3 successful requests reported no"))
    );
}

#[test]
fn input_tokens_follow_vllm_or_the_dataset_and_both_counts_are_reported() {
    let mut records = fixture();
    // Request 0's server counted 104 prompt tokens for the dataset's 100, request 3's
    // agreed (30), failed request 2 reported one too, request 1 none.
    for (i, n) in [(0, 104), (2, 80), (3, 30)] {
        records[i].server_prompt_tokens = Some(n);
        records[i].usage_prompt_len = Some(n);
    }
    records[1].retried = true;
    records[2].retried = true;

    // vLLM 0.32: a request's prompt_len becomes the server's usage.prompt_tokens when it
    // sent one; total_input_tokens sums the successful requests' prompt_len and
    // input_lens lists every request's.
    let m = calculate(records.clone(), 10.0, Some(&words), &config()).unwrap();
    assert_eq!(m.total_input, 104 + 50 + 30);
    assert_eq!(
        m.per_request.input_lens().collect::<Vec<_>>(),
        vec![104, 50, 80, 30]
    );
    close(m.total_token_throughput, (184.0 + 9.0) / 10.0);

    // --input-tokens dataset: the dataset's counts whatever the server said.
    let dataset = MetricsConfig {
        input_tokens: InputTokenSource::Dataset,
        ..config()
    };
    let d = calculate(records, 10.0, Some(&words), &dataset).unwrap();
    assert_eq!(d.total_input, 100 + 50 + 30);
    assert_eq!(
        d.per_request.input_lens().collect::<Vec<_>>(),
        vec![100, 50, 80, 30]
    );

    // Either way both counts are reported, over successful requests with usage.
    for m in [&m, &d] {
        let check = m.client.prompt_tokens.unwrap();
        assert_eq!(check.requests_with_usage, 2);
        assert_eq!((check.server_tokens, check.dataset_tokens), (134, 130));
        assert_eq!(check.mismatched_requests, 1);
        assert_eq!(m.client.connection_retries, 2);
    }
    // Without any server count there is nothing to report.
    let plain = fixture_metrics();
    assert_eq!(plain.client.prompt_tokens, None);
    assert_eq!(plain.client.connection_retries, 0);
}

#[test]
fn goodput_with_each_slo() {
    let with = |pairs: &[&str]| {
        let goodput = parse_goodput(&pairs.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let config = MetricsConfig {
            goodput: goodput.unwrap(),
            ..config()
        };
        calculate(fixture(), 10.0, Some(&words), &config)
            .unwrap()
            .request_goodput
    };
    // TTFTs 0.1, 0.2, 0.4 against 0.25 s: two good -> 2 / 10 s.
    close(with(&["ttft:250"]), 0.2);
    // TPOTs for goodput 0.05, 0 (one token counts as 0), 0.15 against 0.06 s: two good.
    close(with(&["tpot:60"]), 0.2);
    // 0.15 s is met by (0.7 - 0.4) / 2 because the bound is inclusive: all three.
    close(with(&["tpot:150"]), 0.3);
    // E2ELs 0.3, 0.2, 0.7 against 0.5 s: two good.
    close(with(&["e2el:500"]), 0.2);
    // Both TTFT <= 0.25 and E2EL <= 0.25: only request 1 (0.2, 0.2).
    close(with(&["ttft:250", "e2el:250"]), 0.1);
    // Nothing meets 1 ms.
    close(with(&["ttft:1"]), 0.0);
}

#[test]
fn without_tokenizer_missing_usage_counts_one_token() {
    let m = calculate(fixture(), 10.0, None, &config()).unwrap();
    assert!(!m.has_tokenizer);
    // Request 3 now counts 1 token: [5, 1, 0, 1].
    assert_eq!(m.per_request.output_lens, vec![5, 1, 0, 1]);
    assert_eq!(m.total_output, 7);
    // Only request 0 has more than one token: TPOT 0.05 s.
    close(m.tpot.mean, 50.0);
    assert_eq!(m.client.token_counts, None);
    assert!(
        m.warnings
            .iter()
            .any(|w| w.contains("counted as 1 token each"))
    );
}

#[test]
fn zero_usage_falls_back_to_the_tokenizer_like_vllm() {
    let mut records = fixture();
    records[0].output_tokens = Some(0);
    records[0].server_output_tokens = Some(0);
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    // "one two three four five" is 5 words, so the count is unchanged, but the request
    // no longer takes part in the server/tokenizer comparison.
    assert_eq!(m.per_request.output_lens[0], 5);
    assert_eq!(m.client.token_counts.unwrap().requests_with_usage, 1);
}

#[test]
fn usage_vllm_does_not_read_is_compared_but_not_counted() {
    // Request 1's usage (1) came next to `choices` in a stream: vLLM's client skips it and
    // counts the text ("hi there", 2 words); the diagnostics still compare the two.
    let mut records = fixture();
    records[1].output_tokens = None;
    records[1].server_prompt_tokens = Some(60);
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    assert_eq!(m.per_request.output_lens[1], 2);
    // Its prompt count likewise: vLLM keeps the dataset's 50, the diagnostics show 60.
    assert_eq!(m.per_request.input_lens().nth(1), Some(50));
    let prompts = m.client.prompt_tokens.unwrap();
    assert_eq!((prompts.server_tokens, prompts.dataset_tokens), (60, 50));
    let check = m.client.token_counts.unwrap();
    assert_eq!(check.requests_with_usage, 2);
    assert_eq!((check.server_tokens, check.tokenizer_tokens), (6, 7));
    assert_eq!(check.mismatched_requests, 1);
    assert!(
        m.warnings.iter().any(|w| w.starts_with(
            "2 of 3 successful requests reported no usage.completion_tokens (1 sent it only \
             next to `choices`"
        )),
        "{:?}",
        m.warnings
    );
}

#[test]
fn all_failed_warns_and_reports_zeros() {
    let mut records = fixture();
    for r in &mut records {
        r.outcome = Err(FailureKind::Transport.failure("x"));
    }
    let m = calculate(records, 2.0, Some(&words), &config()).unwrap();
    assert_eq!((m.completed, m.failed), (0, 4));
    assert_eq!(m.total_output, 0);
    assert_eq!(m.ttft.mean, 0.0);
    assert_eq!(m.itl.percentiles, vec![(50.0, 0.0), (99.0, 0.0)]);
    assert_eq!(
        (
            m.max_output_tokens_per_s,
            m.max_concurrent_requests,
            m.peak_concurrent_requests
        ),
        (0.0, 0, 0)
    );
    assert_eq!(
        m.warnings,
        vec![
            "All requests failed. This is likely due to a misconfiguration on the benchmark \
             arguments."
        ]
    );
}

#[test]
fn tokenizer_errors_name_the_request() {
    let failing = |_: &str| -> Result<usize> { anyhow::bail!("boom") };
    let err = calculate(fixture(), 10.0, Some(&failing), &config()).unwrap_err();
    assert_eq!(err.to_string(), "counting the output tokens of request 0");
}

#[test]
fn rejects_a_non_positive_duration() {
    assert!(calculate(fixture(), 0.0, None, &config()).is_err());
    assert!(calculate(fixture(), f64::NAN, None, &config()).is_err());
}

#[test]
fn percentile_flags_parse() {
    use PercentileMetric::*;
    assert_eq!(
        parse_percentile_metrics(DEFAULT_PERCENTILE_METRICS).unwrap(),
        vec![Ttft, Tpot, Itl]
    );
    assert_eq!(
        parse_percentile_metrics("e2el, ttft,e2el").unwrap(),
        vec![E2el, Ttft]
    );
    let err = parse_percentile_metrics("ttft,latency")
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"latency\""), "{err}");
    assert_eq!(
        parse_percentiles(DEFAULT_METRIC_PERCENTILES).unwrap(),
        vec![99.0]
    );
    assert_eq!(
        parse_percentiles("25, 50,99.9").unwrap(),
        vec![25.0, 50.0, 99.9]
    );
    assert!(parse_percentiles("101").is_err());
    assert!(parse_percentiles("p99").is_err());
}

/// The fixture with reasoning: request 0 thought "let me see" (3 words) before its answer,
/// which began 0.25 s after the start (TTFT 0.1 s was the first reasoning delta); request
/// 3 thought "hmm" and its content came with its first chunk; request 1 had no reasoning.
fn reasoning_fixture() -> Vec<RequestRecord> {
    let mut records = fixture();
    records[0].reasoning_text = "let me see".into();
    records[0].ttfc = Some(0.25);
    records[1].ttfc = Some(0.2);
    records[3].reasoning_text = "hmm".into();
    records[3].ttfc = Some(0.4);
    records
}

#[test]
fn reasoning_runs_report_the_first_content_token_and_reasoning_tokens() {
    let m = calculate(reasoning_fixture(), 10.0, Some(&words), &config()).unwrap();
    let r = m.reasoning.as_ref().expect("a reasoning run");
    assert_eq!(
        (r.requests_with_reasoning, r.requests_without_content),
        (2, 0)
    );
    assert_eq!(r.reasoning_tokens, Some(3 + 1));
    // TTFCs 0.25, 0.2, 0.4 s: mean 283.33 ms, median 250, population std, p50, p99.
    let ttfcs = [250.0f64, 200.0, 400.0];
    let mean = ttfcs.iter().sum::<f64>() / 3.0;
    let std = (ttfcs.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
    summary(&r.ttfc, mean, 250.0, std, 250.0, 250.0 + 150.0 * 0.98);
    // vLLM's keys do not move: TTFT is still the first chunk's, output lengths are the
    // server's usage where read, else the tokenizer's count of the content text only.
    let plain = fixture_metrics();
    assert_eq!(m.ttft, plain.ttft);
    assert_eq!(m.per_request.output_lens, plain.per_request.output_lens);
    assert_eq!(m.total_output, plain.total_output);
    // The check against the server's usage counts the reasoning text too (the server's
    // completion_tokens include it): request 0's 5 + 3 words against its usage of 5.
    let check = m.client.token_counts.unwrap();
    assert_eq!((check.server_tokens, check.tokenizer_tokens), (6, 7 + 3));
    // A request that only reasoned has no TTFC and is counted apart.
    let mut records = reasoning_fixture();
    records[3].ttfc = None;
    let m = calculate(records, 10.0, None, &config()).unwrap();
    let r = m.reasoning.unwrap();
    assert_eq!((r.requests_without_content, r.reasoning_tokens), (1, None));
    close(r.ttfc.mean, 225.0);
    // Without reasoning text anywhere there is nothing to report, whatever the TTFCs.
    let mut records = reasoning_fixture();
    records[0].reasoning_text.clear();
    records[3].reasoning_text.clear();
    assert_eq!(
        calculate(records, 10.0, Some(&words), &config())
            .unwrap()
            .reasoning,
        None
    );
    // A failed request's reasoning does not make a reasoning run.
    let mut records = fixture();
    records[2].reasoning_text = "x".into();
    assert_eq!(
        calculate(records, 10.0, Some(&words), &config())
            .unwrap()
            .reasoning,
        None
    );
}

#[test]
fn split_itl_gives_one_gap_per_token_only_when_asked() {
    // Request 0 streamed 5 tokens in chunks of 1, 2, 1, 0, 1 (the fourth chunk said it
    // carried none); request 3 had no counts.
    let mut records = fixture();
    records[0].chunk_tokens = vec![1, 2, 1, 0, 1];
    let split = MetricsConfig {
        split_itl_by_tokens: true,
        ..config()
    };
    let off = calculate(records.clone(), 10.0, Some(&words), &config()).unwrap();
    assert_eq!(off.per_request.records[0].itl, vec![0.02, 0.03, 0.05, 0.1]);
    assert_eq!(off.itl_split_requests, None);
    let on = calculate(records, 10.0, Some(&words), &split).unwrap();
    assert_eq!(on.itl_split_requests, Some(1));
    assert_eq!(
        on.per_request.records[0].itl,
        vec![0.01, 0.01, 0.03, 0.05, 0.1]
    );
    // The pooled ITL follows, vLLM's other metrics do not move.
    assert_eq!(on.per_request.records[3].itl, vec![0.2, 0.1]);
    assert_eq!((on.ttft.clone(), on.tpot.clone()), (off.ttft, off.tpot));
    // ITLs: 0.01 0.01 0.03 0.05 0.1 0.2 0.1 -> mean 0.5 / 7 s.
    close(on.itl.mean, 500.0 / 7.0);
    assert!(
        on.warnings
            .iter()
            .all(|w| !w.contains("--split-itl-by-tokens"))
    );
    // Asked for, but no response said: a note, and vLLM's ITL.
    let none = calculate(fixture(), 10.0, Some(&words), &split).unwrap();
    assert_eq!(none.itl, fixture_metrics().itl);
    assert!(
        none.warnings
            .iter()
            .any(|w| w.starts_with("--split-itl-by-tokens: no response said")),
        "{:?}",
        none.warnings
    );
}

#[test]
fn totals_that_differ_by_more_than_one_percent_are_noted() {
    // The fixture's server says 6 output tokens where the tokenizer counts 7 (16.7%), and
    // no prompt counts.
    let m = fixture_metrics();
    let check = m.client.token_counts.unwrap();
    let (server, tokenizer, pct) = check.totals_mismatch().unwrap();
    assert_eq!((server, tokenizer), (6, 7));
    close(pct, 100.0 / 6.0);
    // No prompt counts to tell a foreign tokenizer from the server's counting: a warning
    // that says both.
    let notes: Vec<&String> = m
        .warnings
        .iter()
        .filter(|w| w.contains("differs from the tokenizer's count"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", m.warnings);
    assert!(notes[0].starts_with("1 of 2 requests reported a usage.completion_tokens"));
    assert!(notes[0].contains("6 tokens by the server, 7 by the tokenizer, 16.67% apart"));
    assert!(notes[0].contains("either --tokenizer is not the server's"));
    // Agreeing output counts and prompt counts 1% apart: no note; 1.5% apart: a note.
    let mut records = fixture();
    records[1].output_tokens = Some(2);
    records[1].server_output_tokens = Some(2);
    for (i, n) in [(0, 100), (1, 50), (3, 30)] {
        records[i].prompt_len = n;
    }
    records[0].server_prompt_tokens = Some(200);
    records[0].prompt_len = 198;
    let m = calculate(records.clone(), 10.0, Some(&words), &config()).unwrap();
    assert_eq!(m.client.token_counts.unwrap().totals_mismatch(), None);
    assert_eq!(m.client.prompt_tokens.unwrap().totals_mismatch(), None);
    assert!(
        m.warnings
            .iter()
            .all(|w| !w.contains("token totals differ") && !w.contains("tokenizer's count")),
        "{:?}",
        m.warnings
    );
    records[0].prompt_len = 197;
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    assert_eq!(
        m.client.prompt_tokens.unwrap().totals_mismatch(),
        Some((200, 197, 1.5))
    );
    assert!(
        m.warnings
            .iter()
            .any(|w| w.starts_with("input token totals differ by 1.50% (more than 1%)")),
        "{:?}",
        m.warnings
    );
}

#[test]
fn an_output_count_the_text_does_not_give_back_is_a_note_when_the_prompts_agree() {
    // The fixture's server says 6 output tokens where re-tokenising counts 7. With every
    // prompt counted 3 tokens more by the server (a template's constant), the tokenizer
    // counts as the server does: both differences are notes, not warnings.
    let mut records = fixture();
    for i in [0, 1, 3] {
        records[i].server_prompt_tokens = Some(records[i].prompt_len + 3);
    }
    let m = calculate(records.clone(), 10.0, Some(&words), &config()).unwrap();
    let prompts = m.client.prompt_tokens.unwrap();
    assert_eq!(prompts.constant_offset, Some(3));
    assert!(
        m.warnings
            .iter()
            .all(|w| !w.contains("token totals differ") && !w.contains("tokenizer's count")),
        "{:?}",
        m.warnings
    );
    assert_eq!(m.notes.len(), 2, "{:?}", m.notes);
    assert!(m.notes[0].starts_with("1 of 2 requests reported a usage.completion_tokens"));
    assert!(m.notes[0].contains("16.67% apart"));
    assert!(m.notes[0].contains("--tokenizer counts as the server does"));
    assert!(m.notes[1].starts_with("input token totals differ by 4.76%"));
    assert!(m.notes[1].contains("+3 tokens on every request"));

    // Differences that vary from prompt to prompt: a tokenizer that is not the server's,
    // and both are warnings.
    records[3].server_prompt_tokens = Some(30 + 7);
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    assert_eq!(m.client.prompt_tokens.unwrap().constant_offset, None);
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    let differ: Vec<&String> = m
        .warnings
        .iter()
        .filter(|w| w.contains("token totals differ") || w.contains("tokenizer's count"))
        .collect();
    assert_eq!(differ.len(), 2, "{:?}", m.warnings);
    assert!(differ[0].contains("the server does not count as --tokenizer does"));
    assert!(differ[1].contains("check that --tokenizer is the server's"));

    // A request or two apart, within 1% in all: a note, whatever the prompts say.
    let mut records = fixture();
    records[0].output_tokens = Some(200);
    records[0].server_output_tokens = Some(200);
    records[0].generated_text = vec!["w"; 199].join(" ");
    let m = calculate(records, 10.0, Some(&words), &config()).unwrap();
    assert!(
        m.warnings.iter().all(|w| !w.contains("tokenizer's count")),
        "{:?}",
        m.warnings
    );
    assert_eq!(m.notes.len(), 1, "{:?}", m.notes);
    assert!(m.notes[0].starts_with("2 of 2 requests reported a usage.completion_tokens"));
    assert!(m.notes[0].ends_with("the server's counts are used (within 1% in all)"));
}
