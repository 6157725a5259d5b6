//! The parser, each family's formulas, and vLLM's speculative-decoding rules, on texts in
//! the exposition shapes each server writes (prometheus_client for vLLM and SGLang, with
//! `# HELP`/`# TYPE`, labels and `.0` values; llama.cpp's hand-written lines without
//! labels; metrics-exporter-prometheus for TGI).

use super::report::Peak;
use super::spec_decode::{SpecDecodeCounters, SpecDecodeStats};
use super::*;
use crate::client::Tls;

#[test]
fn prometheus_text_is_summed_by_name_across_label_sets() {
    let text = r#"
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 96.0
vllm:prefix_cache_hits_total{engine="1",model_name="a } b \" c"} 4.0 1700000000000
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000
llamacpp:prompt_tokens_total 12
broken{no_end="x" 5
nan_metric NaN
not_a_number abc
"#;
    let s = Snapshot::parse(text);
    assert_eq!(s.total("vllm:prefix_cache_hits_total"), Some(100.0));
    assert_eq!(s.max("vllm:prefix_cache_hits_total"), Some(96.0));
    assert_eq!(s.total("vllm:prefix_cache_queries_total"), Some(1000.0));
    assert_eq!(s.total("llamacpp:prompt_tokens_total"), Some(12.0));
    assert_eq!(
        s.label("vllm:prefix_cache_hits_total", "model_name"),
        Some("m")
    );
    assert_eq!(s.samples.len(), 4, "{s:?}");
    assert!(s.samples.iter().any(|x| {
        x.labels
            .contains(&("model_name".into(), "a } b \" c".into()))
    }));
    assert_eq!(s.total("broken"), None);
    assert!(Snapshot::parse("<html>not found</html>\n").is_empty());
}

#[test]
fn the_run_is_the_difference_of_two_scrapes() {
    let before = Snapshot::parse(
        "llamacpp:prompt_tokens_total 500\nllamacpp:prompt_tokens_cached_total 20\n",
    );
    let after = Snapshot::parse(
        "llamacpp:prompt_tokens_total 600\nllamacpp:prompt_tokens_cached_total 920\n",
    );
    let cache = ServerCache::between(&before, &after).unwrap();
    assert_eq!(cache.server, "llama.cpp");
    // 900 cached, 100 computed: 1,000 looked up.
    assert_eq!(cache.cached_prompt_tokens, 900);
    assert_eq!(cache.queried_prompt_tokens, 1000);
    assert!((cache.hit_rate() - 0.9).abs() < 1e-12);

    let vllm_before =
        Snapshot::parse("vllm:prefix_cache_hits_total 0\nvllm:prefix_cache_queries_total 10\n");
    let vllm_after =
        Snapshot::parse("vllm:prefix_cache_hits_total 64\nvllm:prefix_cache_queries_total 138\n");
    let cache = ServerCache::between(&vllm_before, &vllm_after).unwrap();
    assert_eq!((cache.server, cache.cached_prompt_tokens), ("vllm", 64));
    assert_eq!(cache.queried_prompt_tokens, 128);
}

#[test]
fn no_known_counters_or_a_reset_give_no_figure() {
    let other = Snapshot::parse("process_cpu_seconds_total 3\n");
    assert_eq!(ServerCache::between(&other, &other), None);
    assert_eq!(ServerReport::between(&other, &[], &other), None);
    let before =
        Snapshot::parse("vllm:prefix_cache_hits_total 50\nvllm:prefix_cache_queries_total 60\n");
    let restarted =
        Snapshot::parse("vllm:prefix_cache_hits_total 1\nvllm:prefix_cache_queries_total 2\n");
    assert_eq!(ServerCache::between(&before, &restarted), None);
}

/// vLLM's counters as prometheus_client writes them (two engines, three draft positions).
fn vllm_text(
    drafts: u64,
    accepted: [u64; 3],
    queue: (f64, u64),
    preempted: u64,
    kv: f64,
) -> String {
    let draft_tokens = 3 * drafts;
    let sum: u64 = accepted.iter().sum();
    let mut t = format!(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{engine=\"0\",model_name=\"m\"}} 3.0\n\
         vllm:num_requests_running{{engine=\"1\",model_name=\"m\"}} 2.0\n\
         vllm:num_requests_waiting{{engine=\"0\",model_name=\"m\"}} 1.0\n\
         # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
         # TYPE vllm:kv_cache_usage_perc gauge\n\
         vllm:kv_cache_usage_perc{{engine=\"0\",model_name=\"m\"}} {kv}\n\
         vllm:kv_cache_usage_perc{{engine=\"1\",model_name=\"m\"}} {}\n\
         # TYPE vllm:num_preemptions_total counter\n\
         vllm:num_preemptions_total{{engine=\"0\",model_name=\"m\"}} {preempted}.0\n\
         # TYPE vllm:request_queue_time_seconds histogram\n\
         vllm:request_queue_time_seconds_bucket{{engine=\"0\",le=\"0.3\",model_name=\"m\"}} {}.0\n\
         vllm:request_queue_time_seconds_count{{engine=\"0\",model_name=\"m\"}} {}.0\n\
         vllm:request_queue_time_seconds_sum{{engine=\"0\",model_name=\"m\"}} {}\n\
         # TYPE vllm:spec_decode_num_drafts_total counter\n\
         vllm:spec_decode_num_drafts_total{{engine=\"0\",model_name=\"m\"}} {drafts}.0\n\
         # TYPE vllm:spec_decode_num_drafts_created gauge\n\
         vllm:spec_decode_num_drafts_created{{engine=\"0\",model_name=\"m\"}} 1.7e9\n\
         vllm:spec_decode_num_draft_tokens_total{{engine=\"0\",model_name=\"m\"}} {draft_tokens}.0\n\
         vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\",model_name=\"m\"}} {sum}.0\n",
        kv / 2.0,
        queue.1,
        queue.1,
        queue.0
    );
    for (pos, n) in accepted.iter().enumerate() {
        t.push_str(&format!(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",model_name=\"m\",position=\"{pos}\"}} {n}.0\n"
        ));
    }
    t
}

#[test]
fn vllm_speculative_decoding_is_computed_as_vllm_computes_it() {
    let before = Snapshot::parse(&vllm_text(100, [80, 50, 20], (1.0, 10), 2, 0.0));
    let after = Snapshot::parse(&vllm_text(300, [240, 150, 60], (3.5, 20), 7, 0.0));
    let counters = before.spec_decode.clone().unwrap();
    assert_eq!(counters.num_drafts, 100);
    assert_eq!(counters.num_draft_tokens, 300);
    assert_eq!(counters.num_accepted_tokens, 150);
    assert_eq!(
        counters.accepted_per_pos.into_iter().collect::<Vec<_>>(),
        vec![(0, 80), (1, 50), (2, 20)]
    );
    let report = ServerReport::between(&before, &[], &after).unwrap();
    let spec = report.spec_decode.unwrap();
    // 200 drafts of 3 tokens, 300 accepted: 50 %, 2.5 tokens a step.
    assert_eq!(
        (spec.num_drafts, spec.draft_tokens, spec.accepted_tokens),
        (200, 600, 300)
    );
    assert!((spec.acceptance_rate - 50.0).abs() < 1e-12);
    assert!((spec.acceptance_length - 2.5).abs() < 1e-12);
    assert_eq!(spec.per_position_acceptance_rates, vec![0.8, 0.5, 0.2]);
    assert_eq!(report.server, "vllm");
    assert_eq!(report.preemptions, Some(5));
    let queue = report.queue_time.unwrap();
    assert_eq!(queue.requests, 10);
    assert!((queue.mean_ms - 250.0).abs() < 1e-9, "{queue:?}");
}

#[test]
fn vllm_spec_decode_rules_at_the_edges() {
    // A timestamped line is unreadable to vLLM's split (but still marks the counters as
    // present); names match by substring; values truncate; a position is taken from the
    // line's `position="..."`; only `_total` names count.
    let text = "vllm:spec_decode_num_drafts_total{a=\"b\"} 10.9\n\
                vllm:spec_decode_num_drafts_total{a=\"c\"} 5 1700000000\n\
                vllm:spec_decode_num_draft_tokens_total 30\n\
                vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 4\n\
                vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"x\"} 4\n\
                vllm:spec_decode_num_accepted_tokens_total 7\n\
                vllm:spec_decode_draft_acceptance_rate 0.5\n";
    let c = SpecDecodeCounters::parse(text).unwrap();
    assert_eq!(
        (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens),
        (10, 30, 7)
    );
    assert_eq!(
        c.accepted_per_pos.into_iter().collect::<Vec<_>>(),
        vec![(1, 4)]
    );
    assert_eq!(
        SpecDecodeCounters::parse("vllm:spec_decode_x_total abc\n"),
        Some(SpecDecodeCounters::default())
    );
    assert_eq!(
        SpecDecodeCounters::parse("vllm:num_requests_running 1\n"),
        None
    );

    // No drafted tokens: no statistics; drafts but a position missing after: 0 for it.
    let zero = SpecDecodeCounters::default();
    assert_eq!(SpecDecodeStats::between(Some(&zero), Some(&zero)), None);
    assert_eq!(SpecDecodeStats::between(None, Some(&zero)), None);
    let before = SpecDecodeCounters {
        num_drafts: 0,
        num_draft_tokens: 0,
        num_accepted_tokens: 0,
        accepted_per_pos: [(0, 5)].into(),
    };
    let after = SpecDecodeCounters {
        num_drafts: 4,
        num_draft_tokens: 8,
        num_accepted_tokens: 2,
        accepted_per_pos: [(1, 2)].into(),
    };
    let stats = SpecDecodeStats::between(Some(&before), Some(&after)).unwrap();
    assert_eq!(stats.per_position_acceptance_rates, vec![0.0, 0.5]);
    assert!((stats.acceptance_rate - 25.0).abs() < 1e-12);
    assert!((stats.acceptance_length - 1.5).abs() < 1e-12);
    // Draft tokens without drafts (a counter reset between): vLLM's 0.0 length.
    let odd = SpecDecodeCounters {
        num_draft_tokens: 8,
        ..SpecDecodeCounters::default()
    };
    let stats = SpecDecodeStats::between(Some(&zero), Some(&odd)).unwrap();
    assert_eq!(stats.acceptance_length, 0.0);
    assert!(stats.per_position_acceptance_rates.is_empty());
}

#[test]
fn gauge_peaks_come_from_the_scrapes_during_the_run() {
    let idle = Snapshot::parse(&vllm_text(0, [0, 0, 0], (0.0, 0), 0, 0.0));
    let busy = Snapshot::parse(&vllm_text(0, [0, 0, 0], (0.0, 0), 0, 0.75));
    let busier = Snapshot::parse(&vllm_text(0, [0, 0, 0], (0.0, 0), 0, 0.5));
    let report = ServerReport::between(&idle, &[(0.5, busy), (1.0, busier)], &idle).unwrap();
    // The ratio's largest engine; the counts summed over engines.
    assert_eq!(
        report.kv_cache_usage,
        Some(Peak {
            metric: "vllm:kv_cache_usage_perc",
            peak: 0.75
        })
    );
    assert_eq!(report.requests_running.unwrap().peak, 5.0);
    assert_eq!(report.requests_waiting.unwrap().peak, 1.0);
    assert_eq!(report.timeline.len(), 2);
    assert_eq!(report.timeline[0].t, 0.5);
    assert_eq!(
        report.timeline[0].values,
        vec![
            ("vllm:kv_cache_usage_perc", 0.75),
            ("vllm:num_requests_running", 5.0),
            ("vllm:num_requests_waiting", 1.0)
        ]
    );
    // No spec-decode counters moved: said so, and nothing else is missing.
    assert_eq!(
        report.not_found,
        vec!["prefix-cache counters", "speculative decoding"]
    );

    // Without scrapes during the run, no peak (the ends see an idle server), and a note.
    let report = ServerReport::between(&idle, &[], &idle).unwrap();
    assert_eq!(report.kv_cache_usage, None);
    assert!(
        report
            .not_found
            .iter()
            .any(|n| n.contains("--server-metrics-interval"))
    );
}

#[test]
fn sglang_counters_and_gauges() {
    let text = |cached: u64, prompt: u64, retracted: u64, queue: (f64, u64), usage: f64| {
        format!(
            "# TYPE sglang:cached_tokens_total counter\n\
             sglang:cached_tokens_total{{model_name=\"m\"}} {cached}.0\n\
             sglang:prompt_tokens_total{{model_name=\"m\"}} {prompt}.0\n\
             sglang:num_retracted_requests_total{{model_name=\"m\",tp_rank=\"0\"}} {retracted}.0\n\
             sglang:queue_time_seconds_sum{{model_name=\"m\"}} {}\n\
             sglang:queue_time_seconds_count{{model_name=\"m\"}} {}.0\n\
             sglang:token_usage{{model_name=\"m\",tp_rank=\"0\"}} {usage}\n\
             sglang:num_running_reqs{{model_name=\"m\",tp_rank=\"0\"}} {}\n\
             sglang:num_queue_reqs{{model_name=\"m\",tp_rank=\"0\"}} 0.0\n\
             sglang:spec_accept_rate{{model_name=\"m\"}} 0.6\n\
             sglang:spec_accept_length{{model_name=\"m\"}} 2.8\n",
            queue.0,
            queue.1,
            (usage * 10.0).round()
        )
    };
    let before = Snapshot::parse(&text(100, 1000, 1, (0.5, 5), 0.0));
    let during = Snapshot::parse(&text(100, 1000, 1, (0.5, 5), 0.4));
    let after = Snapshot::parse(&text(400, 2000, 4, (0.9, 9), 0.0));
    let r = ServerReport::between(&before, &[(0.1, during)], &after).unwrap();
    assert_eq!(r.server, "sglang");
    let cache = r.cache.unwrap();
    assert_eq!(
        (cache.cached_prompt_tokens, cache.queried_prompt_tokens),
        (300, 1000)
    );
    assert_eq!(r.preemptions, Some(3));
    let queue = r.queue_time.unwrap();
    assert_eq!(queue.requests, 4);
    assert!((queue.mean_ms - 100.0).abs() < 1e-9, "{queue:?}");
    assert_eq!(r.kv_cache_usage.unwrap().peak, 0.4);
    assert_eq!(r.requests_running.unwrap().peak, 4.0);
    let spec = r.spec_gauges.unwrap();
    assert!((spec.acceptance_rate - 60.0).abs() < 1e-9);
    assert_eq!(spec.acceptance_length, 2.8);
    assert_eq!(r.spec_decode, None);
    assert!(r.not_found.is_empty(), "{:?}", r.not_found);
}

#[test]
fn llama_cpp_and_tgi_report_what_they_expose() {
    // llama-server's handler writes `# HELP`, `# TYPE` and `llamacpp:<name> <value>`.
    let llama = |processing: u32, deferred: u32, prompt: u32, cached: u32| {
        format!(
            "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n\
             # TYPE llamacpp:prompt_tokens_total counter\n\
             llamacpp:prompt_tokens_total {prompt}\n\
             llamacpp:prompt_tokens_cached_total {cached}\n\
             llamacpp:n_decode_total 12\n\
             # TYPE llamacpp:requests_processing gauge\n\
             llamacpp:requests_processing {processing}\n\
             llamacpp:requests_deferred {deferred}\n"
        )
    };
    let r = ServerReport::between(
        &Snapshot::parse(&llama(0, 0, 10, 0)),
        &[(0.2, Snapshot::parse(&llama(4, 2, 50, 0)))],
        &Snapshot::parse(&llama(0, 0, 110, 100)),
    )
    .unwrap();
    assert_eq!(r.server, "llama.cpp");
    assert_eq!(r.cache.unwrap().queried_prompt_tokens, 200);
    assert_eq!(r.requests_running.unwrap().peak, 4.0);
    assert_eq!(r.requests_waiting.unwrap().peak, 2.0);
    assert_eq!(r.kv_cache_usage, None);
    assert_eq!(
        r.not_found,
        vec![
            "speculative decoding",
            "preemptions",
            "queue time",
            "KV-cache usage"
        ]
    );

    // With a draft model, its speculative-decoding counters (vLLM's names and formulas).
    let spec = |drafts: u32, drafted: u32, accepted: u32| {
        Snapshot::parse(&format!(
            "{}llamacpp:spec_decode_num_drafts_total {drafts}\n\
             llamacpp:spec_decode_num_draft_tokens_total {drafted}\n\
             llamacpp:spec_decode_num_accepted_tokens_total {accepted}\n",
            llama(0, 0, 10, 0)
        ))
    };
    let r = ServerReport::between(&spec(2, 8, 5), &[], &spec(12, 88, 65)).unwrap();
    let gauges = r.spec_gauges.unwrap();
    assert_eq!(gauges.acceptance_rate, 100.0 * 60.0 / 80.0);
    assert_eq!(gauges.acceptance_length, 1.0 + 60.0 / 10.0);
    assert!(!r.not_found.contains(&"speculative decoding"));
    // The same counters without a draft during the run (a server without a draft model
    // exports them as 0) report nothing.
    let r = ServerReport::between(&spec(0, 0, 0), &[], &spec(0, 0, 0)).unwrap();
    assert_eq!(r.spec_gauges, None);
    assert!(r.not_found.contains(&"speculative decoding"));

    let tgi = |count: u32, sum: f64, queued: u32| {
        format!(
            "# TYPE tgi_request_queue_duration summary\n\
             tgi_request_queue_duration{{quantile=\"0.5\"}} 0.01\n\
             tgi_request_queue_duration_sum {sum}\n\
             tgi_request_queue_duration_count {count}\n\
             tgi_queue_size {queued}\n\
             tgi_batch_current_size 3\n"
        )
    };
    let r = ServerReport::between(
        &Snapshot::parse(&tgi(2, 0.1, 0)),
        &[(0.2, Snapshot::parse(&tgi(2, 0.1, 6)))],
        &Snapshot::parse(&tgi(6, 0.5, 0)),
    )
    .unwrap();
    assert_eq!(r.server, "tgi");
    assert_eq!(r.cache, None);
    assert_eq!(r.queue_time.map(|q| q.requests), Some(4));
    assert!((r.queue_time.unwrap().mean_ms - 100.0).abs() < 1e-9);
    assert_eq!(r.requests_waiting.unwrap().peak, 6.0);
    assert!(r.not_found.contains(&"prefix-cache counters"));
}

#[test]
fn scraping_reads_the_servers_metrics_endpoint() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for body in [
            "llamacpp:prompt_tokens_cached_total 7\n",
            "<html>404</html>",
        ] {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let n = conn.read(&mut request).unwrap();
            write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            requests.push(String::from_utf8_lossy(&request[..n]).into_owned());
        }
        requests
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt
        .block_on(scrape(&format!("http://{addr}/"), Tls::Verify))
        .unwrap();
    assert_eq!(s.total("llamacpp:prompt_tokens_cached_total"), Some(7.0));
    // A page that is no exposition text is an error (a note), not an empty scrape.
    let err = rt
        .block_on(scrape(&format!("http://{addr}"), Tls::Verify))
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("no Prometheus metrics"),
        "{err:#}"
    );
    let requests = server.join().unwrap();
    assert!(
        requests[0].starts_with("GET /metrics HTTP/1.1\r\n"),
        "{requests:?}"
    );
}
