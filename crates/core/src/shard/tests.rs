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
