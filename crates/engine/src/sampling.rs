//! Choosing the next token from a row of logits.
//!
//! Greedy, or temperature sampling with top-k and top-p applied in vLLM's order (temperature,
//! then top-k, then top-p). Each request carries its own random stream seeded from its
//! [`Sampling::seed`], so a seeded request gives the same tokens whatever else shares its
//! batches. The stream is SplitMix64: small, fast, and fully specified, so the same seed
//! gives the same tokens on every platform and candle version (no dependency on a `rand`
//! release's algorithm).
//!
//! The work is on the host, on one row at a time: for a 50k vocabulary it is a few tens of
//! microseconds, and nucleus sampling sorts only the head of the distribution (the top 64
//! candidates, widened until they hold `top_p` of the mass) rather than the whole row.

use crate::Sampling;

pub(crate) struct Sampler {
    temperature: f32,
    top_p: f32,
    top_k: usize,
    state: u64,
    /// Scratch, reused between calls: (probability or logit, token id).
    scratch: Vec<(f32, u32)>,
}

impl Sampler {
    pub(crate) fn new(s: &Sampling) -> Self {
        Sampler {
            temperature: s.temperature,
            top_p: s.top_p,
            top_k: s.top_k,
            state: s.seed,
            scratch: Vec::new(),
        }
    }

    fn next_u64(&mut self) -> u64 {
        // SplitMix64 (Steele, Lea, Flood 2014).
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) * (1.0 / (1u64 << 24) as f32)
    }

    pub(crate) fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.temperature <= 0.0 || self.top_k == 1 {
            return argmax(logits);
        }
        let inv_t = 1.0 / self.temperature;
        let mut c = std::mem::take(&mut self.scratch);
        c.clear();
        c.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite())
                .map(|(i, &l)| (l * inv_t, i as u32)),
        );
        if c.is_empty() {
            self.scratch = c;
            return argmax(logits);
        }
        let by_logit_desc =
            |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if self.top_k > 0 && self.top_k < c.len() {
            c.select_nth_unstable_by(self.top_k - 1, by_logit_desc);
            c.truncate(self.top_k);
        }
        // Softmax over the candidates, in place.
        let max = c.iter().map(|x| x.0).fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for x in c.iter_mut() {
            x.0 = (x.0 - max).exp();
            sum += x.0;
        }
        let mut total = sum;
        let mut end = c.len();
        if self.top_p < 1.0 {
            // Sort just enough of the head to cover top_p of the mass.
            let want = self.top_p.max(0.0) * sum;
            let mut head = 64.min(c.len());
            loop {
                if head < c.len() {
                    c.select_nth_unstable_by(head - 1, by_logit_desc);
                }
                c[..head].sort_unstable_by(by_logit_desc);
                let mut acc = 0f32;
                let mut cut = None;
                for (i, x) in c[..head].iter().enumerate() {
                    acc += x.0;
                    if acc >= want {
                        cut = Some(i + 1);
                        break;
                    }
                }
                match cut {
                    Some(n) => {
                        end = n;
                        total = c[..n].iter().map(|x| x.0).sum();
                        break;
                    }
                    None if head == c.len() => break,
                    None => head = (head * 4).min(c.len()),
                }
            }
        }
        let mut u = self.next_f32() * total;
        let mut pick = c[end - 1].1;
        for x in &c[..end] {
            if u < x.0 {
                pick = x.1;
                break;
            }
            u -= x.0;
        }
        self.scratch = c;
        pick
    }
}

/// Index of the largest logit, the lowest index among equals (as torch.argmax); NaNs lose.
pub(crate) fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(temperature: f32, top_p: f32, top_k: usize, seed: u64) -> Sampler {
        Sampler::new(&Sampling {
            temperature,
            top_p,
            top_k,
            seed,
        })
    }

    #[test]
    fn greedy_is_argmax_lowest_index_first() {
        let mut s = sampler(0.0, 1.0, 0, 1);
        assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
    }

    #[test]
    fn same_seed_same_stream_and_frequencies_follow_softmax() {
        let logits = [0.0f32, (2.0f32).ln(), (3.0f32).ln(), f32::NEG_INFINITY];
        let draw = |seed| {
            let mut s = sampler(1.0, 1.0, 0, seed);
            (0..6000).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        assert_ne!(a, draw(8));
        let mut counts = [0usize; 4];
        for t in &a {
            counts[*t as usize] += 1;
        }
        assert_eq!(counts[3], 0, "-inf is never sampled");
        // Expected 1/6, 2/6, 3/6 of 6000.
        for (i, want) in [1000.0, 2000.0, 3000.0].iter().enumerate() {
            assert!((counts[i] as f64 - want).abs() < 150.0, "{counts:?}");
        }
    }

    #[test]
    fn top_k_and_top_p_cut_the_tail() {
        let logits: Vec<f32> = (0..1000).map(|i| -(i as f32) * 0.01).collect();
        let mut s = sampler(1.0, 1.0, 5, 3);
        assert!((0..500).all(|_| s.sample(&logits) < 5));
        // Probabilities 0.5, 0.25, 0.125, ...: top_p 0.7 keeps the first two.
        let logits: Vec<f32> = (0..300)
            .map(|i| -(i as f32) * std::f32::consts::LN_2)
            .collect();
        let mut s = sampler(1.0, 0.7, 0, 3);
        let picks: Vec<u32> = (0..2000).map(|_| s.sample(&logits)).collect();
        assert!(picks.iter().all(|&t| t < 2));
        let ones = picks.iter().filter(|&&t| t == 1).count();
        assert!((ones as f64 - 2000.0 / 3.0).abs() < 100.0, "{ones}");
        // A flat distribution needs the whole row for top_p 0.99.
        let mut s = sampler(1.0, 0.99, 0, 3);
        let flat = vec![0.0f32; 1000];
        let picks: Vec<u32> = (0..2000).map(|_| s.sample(&flat)).collect();
        assert!(picks.iter().any(|&t| t >= 900));
    }
}
