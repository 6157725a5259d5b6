use super::*;

#[test]
fn shards_are_parsed_and_checked() {
    assert_eq!("1/4".parse::<Shard>(), Ok(Shard { index: 1, count: 4 }));
    assert!("4/4".parse::<Shard>().unwrap_err().contains("below 4"));
    assert!("0/0".parse::<Shard>().is_err());
    assert!("1".parse::<Shard>().is_err());
    assert!("a/2".parse::<Shard>().is_err());
    assert_eq!(Shard { index: 2, count: 3 }.to_string(), "2/3");
}

#[test]
fn the_shards_of_a_workload_are_a_partition_of_it() {
    for count in 1..6 {
        let mut seen: Vec<usize> = (0..count)
            .flat_map(|index| Shard { index, count }.indices(23))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..23).collect::<Vec<_>>(), "{count} shards");
    }
    let shard = Shard { index: 1, count: 3 };
    assert_eq!(shard.indices(8), [1, 4, 7]);
    assert_eq!(
        shard.select(&[10, 11, 12, 13, 14, 15, 16, 17]),
        [11, 14, 17]
    );
}

#[test]
fn a_concurrency_cap_is_split_into_parts_that_add_up_to_it() {
    for count in 1..5 {
        for cap in count..20 {
            let parts: Vec<usize> = (0..count)
                .map(|index| Shard { index, count }.max_concurrency(cap).unwrap())
                .collect();
            assert_eq!(parts.iter().sum::<usize>(), cap);
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
    }
    let err = Shard { index: 0, count: 4 }.max_concurrency(3).unwrap_err();
    assert!(err.to_string().contains("--max-concurrency 3"), "{err}");
}

#[test]
fn start_times_are_rfc_3339_or_unix_seconds() {
    let at = parse_wall_clock("2026-11-27T17:00:00Z").unwrap();
    assert_eq!(at, UNIX_EPOCH + Duration::from_secs(1_795_798_800));
    assert_eq!(
        parse_wall_clock("2026-11-27T18:00:00+01:00").unwrap(),
        at,
        "an offset is honoured"
    );
    assert_eq!(
        parse_wall_clock("@1795798800.25").unwrap(),
        at + Duration::from_millis(250)
    );
    assert_eq!(format_wall_clock(at), "2026-11-27T17:00:00.000000Z");
    assert!(
        parse_wall_clock("tomorrow")
            .unwrap_err()
            .contains("RFC 3339")
    );
    assert!(parse_wall_clock("@-5").is_err());
    assert_eq!("gate".parse::<StartAt>(), Ok(StartAt::Gate));
}

#[test]
fn an_instant_is_found_for_a_wall_clock_time_either_side_of_now() {
    let now = Instant::now();
    let ahead = instant_at(SystemTime::now() + Duration::from_secs(2));
    let behind = instant_at(SystemTime::now() - Duration::from_secs(2));
    let tolerance = Duration::from_millis(50);
    assert!(ahead.duration_since(now).abs_diff(Duration::from_secs(2)) < tolerance);
    assert!(now.duration_since(behind).abs_diff(Duration::from_secs(2)) < tolerance);
}

/// A run's settings for the tests of shard documents.
pub(super) fn run_info() -> crate::report::RunInfo {
    use crate::report::RunInfo;
    let now = chrono::Local::now();
    RunInfo {
        date: now,
        started_at: now,
        backend: "openai".into(),
        label: None,
        model_id: "m".into(),
        tokenizer_id: Some("t".into()),
        num_prompts: 4,
        request_rate: f64::INFINITY,
        burstiness: 1.0,
        max_concurrency: None,
        ramp_up: None,
        rps_change_events: Vec::new(),
        metadata: Vec::new(),
        args: serde_json::Map::new(),
        cancellation: None,
        endpoints: None,
        duration_limit_s: None,
    }
}

mod merging {
    use super::super::*;
    use super::run_info;
    use crate::metrics::tests::{config, fixture, fixture_metrics, words};
    use crate::record::FailureKind;

    /// Shard `index` of `count` of the metrics fixture (4 requests over 10 s), as a shard
    /// would write it, read back from JSON.
    fn shard_of_fixture(index: usize, count: usize) -> ShardDoc {
        let shard = Shard { index, count };
        let records: Vec<ShardRecord> = shard
            .select(&fixture())
            .into_iter()
            .map(|record| ShardRecord {
                text_tokens: Some(words(&record.generated_text).unwrap() as u32),
                reasoning_tokens: None,
                audio_seconds: None,
                prefix_keys: None,
                record,
            })
            .collect();
        let doc = ShardDoc {
            bench_shard_format: FORMAT,
            shard,
            workload: WorkloadId {
                requests: 4,
                seed: 0,
                fingerprint: "f".into(),
            },
            run: run_info(),
            metrics_config: config(),
            has_tokenizer: true,
            prefix_keys: false,
            clock_origin_s: 0.0,
            diagnostics: ShardDiagnostics {
                shard,
                host: format!("pod-{index}"),
                cores: 1,
                requests: records.len(),
                sent: records.len(),
                // The fixture's benchmark lasted 10 s; one shard of it as long.
                duration_s: if index == 0 { 10.0 } else { 4.0 },
                schedule_lag_ms: crate::metrics::LagSummary::default(),
                cpu: None,
                http_client: Some("h1".into()),
                start_at: None,
                started_late_s: 0.0,
                clock_offset: None,
                clock_offset_note: None,
            },
            interrupted: None,
            shutdown_grace_s: 5.0,
            server_metrics: None,
            endpoint_server_metrics: Vec::new(),
            probe: None,
            records,
        };
        serde_json::from_str(&doc.to_json().unwrap()).unwrap()
    }

    fn sourced(docs: Vec<ShardDoc>) -> Vec<(String, ShardDoc)> {
        docs.into_iter()
            .map(|d| (format!("shard-{}.json", d.shard.index), d))
            .collect()
    }

    #[test]
    fn merged_shards_give_the_metrics_of_the_whole_run() {
        let single = fixture_metrics();
        for count in [1, 2, 3, 4] {
            let docs = (0..count)
                .rev()
                .map(|i| shard_of_fixture(i, count))
                .collect();
            let merge::Merged {
                metrics: merged,
                side,
                ..
            } = merge::merge(sourced(docs)).unwrap();
            assert_eq!(
                merged.per_request.records, single.per_request.records,
                "{count}"
            );
            assert_eq!(
                merged.per_request.output_lens,
                single.per_request.output_lens
            );
            assert_eq!(
                (
                    merged.completed,
                    merged.failed,
                    merged.total_input,
                    merged.total_output
                ),
                (
                    single.completed,
                    single.failed,
                    single.total_input,
                    single.total_output
                )
            );
            assert_eq!(merged.duration_s, single.duration_s);
            for metric in crate::metrics::PercentileMetric::ALL {
                assert_eq!(merged.summary(metric), single.summary(metric), "{metric:?}");
            }
            assert_eq!(merged.client.token_counts, single.client.token_counts);
            assert_eq!(side.http_client, Some("h1"));
            assert_eq!(side.shards.len(), count);
        }
    }

    #[test]
    fn a_request_outside_its_shards_share_is_refused() {
        let mut wrong = shard_of_fixture(1, 2);
        wrong.records[0].record.index = 2;
        let err = merge::merge(sourced(vec![shard_of_fixture(0, 2), wrong])).unwrap_err();
        assert!(
            err.to_string()
                .contains("request 2 is not in shard 1/2's share"),
            "{err}"
        );
        let err = merge::merge(sourced(vec![
            shard_of_fixture(0, 2),
            shard_of_fixture(0, 3),
        ]));
        assert!(err.unwrap_err().to_string().contains("of 3 shards"));
    }

    #[test]
    fn interruptions_and_clock_spread_are_reported() {
        let mut a = shard_of_fixture(0, 2);
        let mut b = shard_of_fixture(1, 2);
        a.interrupted = Some(Interruption {
            reason: "SIGTERM".into(),
            not_sent: 3,
            cancelled: 1,
        });
        a.records[1].record.outcome = Err(FailureKind::Interrupted.failure("cancelled"));
        b.interrupted = Some(Interruption {
            reason: "SIGTERM".into(),
            not_sent: 2,
            cancelled: 0,
        });
        a.diagnostics.clock_offset = Some(ClockOffset {
            offset_ms: 0.5,
            uncertainty_ms: 0.5,
            samples: 100,
        });
        b.diagnostics.clock_offset = Some(ClockOffset {
            offset_ms: 20.5,
            uncertainty_ms: 0.5,
            samples: 100,
        });
        b.diagnostics.started_late_s = 0.25;
        let merged = merge::merge(sourced(vec![a, b])).unwrap();
        let i = merged.interrupted.unwrap();
        assert_eq!(i.reason, "shard 0/2: SIGTERM; shard 1/2: SIGTERM");
        assert_eq!((i.not_sent, i.cancelled), (5, 1));
        let warnings = merged.metrics.warnings.join("\n");
        assert!(warnings.contains("differ by about 20.0 ms"), "{warnings}");
        assert!(
            warnings.contains("shard 1/2 (pod-1) was ready 0.250 s after"),
            "{warnings}"
        );
    }
}
