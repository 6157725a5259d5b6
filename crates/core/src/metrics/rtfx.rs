//! vLLM's `rtfx` (inverse real-time factor) of audio benchmarks: `calculate_metrics` sums
//! `input_audio_duration` over the successful requests and divides by the benchmark
//! duration. The seconds come from the workload, measured before the clock
//! ([`crate::audio_duration`]), not from the records.

use super::Metrics;

impl Metrics {
    /// Sets [`Metrics::rtfx`] from the seconds of audio each request uploaded, by request
    /// index (a request beyond `seconds`, such as a conversation's later turn, uploaded
    /// none); a timed run's (`--duration`) record `k` sent the workload's request
    /// `k mod repeats`. A pooling run keeps 0: vLLM's `calculate_metrics_for_embeddings`
    /// has no rtfx.
    pub fn set_rtfx(&mut self, seconds: &[f64], repeats: Option<usize>) {
        if seconds.is_empty() || self.embedding.is_some() {
            return;
        }
        let audio: f64 = self
            .per_request
            .records
            .iter()
            .filter(|r| r.succeeded())
            .filter_map(|r| seconds.get(repeats.map_or(r.index, |n| r.index % n)))
            .sum();
        self.rtfx = audio / self.duration_s;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::fixture_metrics;

    #[test]
    fn successful_requests_audio_over_the_duration() {
        // The fixture: 10 s, requests 0, 1 and 3 succeeded, 2 failed.
        let mut m = fixture_metrics();
        assert_eq!(m.rtfx, 0.0);
        m.set_rtfx(&[1.5, 2.0, 100.0, 0.5], None);
        assert!(
            (m.rtfx - (1.5 + 2.0 + 0.5) / 10.0).abs() < 1e-12,
            "{}",
            m.rtfx
        );
        // Fewer entries than requests: the others uploaded nothing.
        m.set_rtfx(&[3.0], None);
        assert!((m.rtfx - 0.3).abs() < 1e-12, "{}", m.rtfx);
    }

    #[test]
    fn no_audio_keeps_zero() {
        let mut m = fixture_metrics();
        m.set_rtfx(&[], None);
        assert_eq!(m.rtfx, 0.0);
    }
}
