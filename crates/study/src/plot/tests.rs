use super::*;

fn request(start: f64, ttft: f64, itl: &[f64], output_len: u32) -> RequestTimes {
    RequestTimes {
        start,
        ttft: Some(ttft),
        itl: itl.to_vec(),
        latency: ttft + itl.iter().sum::<f64>(),
        ok: true,
        input_len: 10,
        output_len,
    }
}

fn failed(start: f64, latency: f64) -> RequestTimes {
    RequestTimes {
        start,
        ttft: None,
        itl: vec![],
        latency,
        ok: false,
        input_len: 10,
        output_len: 0,
    }
}

/// The `<rect>` elements of an SVG filled with `color`.
fn rects_filled(svg: &str, color: Rgb) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let hex = color.hex();
    doc.descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter(|n| {
            n.attribute("fill")
                .is_some_and(|f| f.eq_ignore_ascii_case(&hex))
        })
        .count()
}

#[test]
fn bins_cover_the_range_with_the_last_bin_closed() {
    let b = bin(&[0.0, 1.0, 2.0, 3.0, 4.0, f64::NAN], 4);
    assert_eq!((b.lo, b.hi), (0.0, 4.0));
    assert_eq!(b.counts, vec![1, 1, 1, 2]);
    assert_eq!(b.width(), 1.0);
    // All equal: one unit around the value (numpy's rule); none: 0 to 1.
    let b = bin(&[7.0; 5], 3);
    assert_eq!((b.lo, b.hi, b.counts.clone()), (6.5, 7.5, vec![0, 5, 0]));
    let b = bin(&[], 2);
    assert_eq!((b.lo, b.hi, b.counts), (0.0, 1.0, vec![0, 0]));
}

#[test]
fn itl_bands_follow_vllm_thresholds() {
    let t = [25.0, 50.0];
    assert_eq!(itl_band(0.0249, &t), 0);
    assert_eq!(itl_band(0.025, &t), 1);
    assert_eq!(itl_band(0.0499, &t), 1);
    assert_eq!(itl_band(0.050, &t), 2);
    assert_eq!(itl_band(3.0, &t), 2);
    assert_eq!(
        itl_band_labels(&t),
        ["ITL < 25ms", "25ms ≤ ITL < 50ms", "ITL ≥ 50ms"]
    );
    assert_eq!(itl_band_labels(&[2.5]), ["ITL < 2.5ms", "ITL ≥ 2.5ms"]);
    let colors = itl_band_colors(&t);
    assert_eq!(
        colors.iter().map(|c| c.hex()).collect::<Vec<_>>(),
        ["#109618", "#FF7F0E", "#D62728"]
    );
}

#[test]
fn timeline_draws_one_ttft_bar_per_request_and_one_segment_per_run_of_a_band() {
    // Gaps: 10 ms and 30 ms and 60 ms (three bands), then 5 ms twice; one failure.
    let requests = [
        request(0.0, 0.2, &[0.010, 0.030, 0.060], 4),
        request(0.1, 0.3, &[0.005, 0.005], 3),
        failed(0.2, 0.4),
    ];
    let chart = timeline(&requests, &[25.0, 50.0]);
    let svg = chart.to_svg(800, 400).unwrap();
    let colors = itl_band_colors(&[25.0, 50.0]);
    // Each count is the segments plus one legend swatch; the two adjacent 5 ms gaps of
    // the second request are one bar.
    assert_eq!(rects_filled(&svg, TTFT_COLOR), 2 + 1);
    assert_eq!(rects_filled(&svg, colors[0]), 2 + 1);
    assert_eq!(rects_filled(&svg, colors[1]), 1 + 1);
    assert_eq!(rects_filled(&svg, colors[2]), 1 + 1);
    assert_eq!(rects_filled(&svg, Rgb(0x9e, 0x9e, 0x9e)), 1 + 1);
    assert!(
        svg.contains("25ms ≤ ITL &lt; 50ms"),
        "the band's legend is escaped"
    );
}

#[test]
fn a_huge_timeline_merges_same_band_runs() {
    // 600 requests of 100 gaps of 1 ms: 60,600 segments, over the budget.
    let requests: Vec<_> = (0..600)
        .map(|i| request(f64::from(i) * 0.01, 0.05, &[0.001; 100], 101))
        .collect();
    let t = timeline::Timeline::build(&requests, &[25.0, 50.0]);
    assert!(
        t.rows.iter().all(|r| r.len() == 2),
        "TTFT, then one merged band run"
    );
    let row = &t.rows[3];
    assert!((row[1].end - (0.03 + 0.05 + 0.1)).abs() < 1e-9);

    // Gaps alternating between bands do not merge: cells of time do, each drawn in its
    // slowest band, within the budget.
    let gaps: Vec<f64> = (0..200)
        .map(|k| if k % 2 == 0 { 0.001 } else { 0.060 })
        .collect();
    let requests: Vec<_> = (0..1000)
        .map(|i| request(f64::from(i) * 0.01, 0.05, &gaps, 201))
        .collect();
    let t = timeline::Timeline::build(&requests, &[25.0, 50.0]);
    let total: usize = t.rows.iter().map(Vec::len).sum();
    assert!(total <= 50_000 + 1000, "{total} segments");
    let row = &t.rows[7];
    assert_eq!(row[0].kind, timeline::Kind::Ttft);
    assert!(row[1..].iter().all(|s| s.kind == timeline::Kind::Band(2)));
    assert!((row.last().unwrap().end - (0.07 + 0.05 + 100.0 * 0.061)).abs() < 1e-9);
}

#[test]
fn throughput_series_spread_tokens_over_chunks_and_count_requests_in_flight() {
    // Request A: sent at 0, chunks at 0.5, 1.5, 2.5 s, 6 tokens (2 per chunk), ends 2.5 s.
    // Request B: sent at 1.0, one chunk at 1.2 s carrying 4 tokens, ends at 1.2 s.
    let requests = [request(0.0, 0.5, &[1.0, 1.0], 6), request(1.0, 0.2, &[], 4)];
    let (tokens, in_flight) = throughput_series(&requests, 1.0);
    assert_eq!(tokens, vec![(0.0, 2.0), (1.0, 6.0), (2.0, 2.0)]);
    let expect = [(0.0, 1.0), (1.0, 1.2), (2.0, 0.5)];
    for ((t, v), (et, ev)) in in_flight.iter().zip(expect) {
        assert_eq!(*t, et);
        assert!((v - ev).abs() < 1e-9, "{v} != {ev} at {t}");
    }
}

#[test]
fn pareto_frontier_keeps_the_runs_no_other_beats_on_both() {
    let points = [
        (10.0, 100.0), // 0: front (best per-user)
        (5.0, 300.0),  // 1: front
        (8.0, 150.0),  // 2: front
        (6.0, 140.0),  // 3: beaten by 2
        (2.0, 300.0),  // 4: level with 1 on y, lower x: kept as vLLM keeps ties
        (1.0, 200.0),  // 5: beaten by 1
        (f64::NAN, 1e9),
    ];
    assert_eq!(pareto::frontier(&points), vec![4, 1, 2, 0]);
    assert!(pareto::frontier(&[]).is_empty());
    let svg = pareto::chart(&points).to_svg(600, 400).unwrap();
    roxmltree::Document::parse(&svg).unwrap();
}

#[test]
fn dataset_stats_has_three_histograms_and_a_stacked_bar_per_request() {
    let requests: Vec<_> = (0..5).map(|i| request(0.0, 0.1, &[], 1 + i)).collect();
    let svg = dataset_stats(&requests).to_svg(1000, 800).unwrap();
    // The non-empty bins of each histogram (every prompt has 10 tokens: one bin; outputs
    // 1..=5 and totals 11..=15: five bins each), then the parts of the stacked bars and
    // their legend swatches in the prompt's and the output's colours.
    assert_eq!(rects_filled(&svg, PALETTE[0]), 1 + 5 + 1);
    assert_eq!(rects_filled(&svg, PALETTE[1]), 5 + 5 + 1);
    assert_eq!(rects_filled(&svg, PALETTE[2]), 5);
}

#[test]
fn charts_save_as_png_and_svg_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let chart = histogram("Latency", "ms", &[1.0, 2.0, 2.5, 9.0], 4);
    let png = dir.path().join("h.png");
    chart.save(&png, 320, 200).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, after the chunk's length and type.
    assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 320);
    assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 200);
    let svg = dir.path().join("h.svg");
    chart.save(&svg, 320, 200).unwrap();
    roxmltree::Document::parse(&std::fs::read_to_string(&svg).unwrap()).unwrap();
    let e = chart.save(&dir.path().join("h.gif"), 10, 10).unwrap_err();
    assert!(e.to_string().contains("h.gif"), "{e}");
}

#[test]
fn log_scale_curves_leave_out_points_at_or_below_zero() {
    let chart = curves(XyChart {
        title: "p99".into(),
        x_label: "rate".into(),
        y_label: "ms".into(),
        series: vec![Series {
            name: "a".into(),
            points: vec![(0.0, 1.0), (1.0, 10.0), (10.0, 100.0)],
            style: SeriesStyle::Markers,
            color: Some(PALETTE[3]),
        }],
        x_scale: Scale::Log,
        y_scale: Scale::Log,
    });
    let svg = chart.to_svg(500, 300).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let markers = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .filter(|n| {
            n.attribute("fill")
                .is_some_and(|f| f.eq_ignore_ascii_case(&PALETTE[3].hex()))
        })
        .count();
    assert_eq!(markers, 2);
}

#[test]
fn tick_labels_have_the_digits_their_spacing_needs() {
    use super::xy::{Labels, Scale};
    // A narrow range of large numbers: ticks 50 apart must not all read "13.1k".
    let narrow = Labels::for_axis(&(13_000.0..13_500.0), Scale::Linear);
    let ticks: Vec<String> = (0..10)
        .map(|i| narrow.format(13_000.0 + 50.0 * f64::from(i)))
        .collect();
    let mut distinct = ticks.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), ticks.len(), "{ticks:?}");
    // A wide range in thousands, and a small one in fractions.
    let wide = Labels::for_axis(&(0.0..200_000.0), Scale::Linear);
    assert_eq!(wide.format(120_000.0), "120k");
    let small = Labels::for_axis(&(10.0..10.2), Scale::Linear);
    assert_eq!(small.format(10.06), "10.06");
    assert_ne!(small.format(10.08), small.format(10.1));
}
