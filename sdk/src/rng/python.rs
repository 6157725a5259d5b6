//! Python's `random` module (CPython's `random.Random`, MT19937).

use super::mt19937::Mt19937;

/// `random.Random` after `random.seed(seed)` with an integer seed.
#[derive(Clone)]
pub struct Random {
    mt: Mt19937,
}

impl Random {
    /// `random.seed(seed)`: the absolute value's little-endian 32-bit words feed
    /// `init_by_array` (the integer 0 is the single word `[0]`).
    pub fn new(seed: i128) -> Self {
        let mut n = seed.unsigned_abs();
        let mut key = vec![(n & 0xffff_ffff) as u32];
        n >>= 32;
        while n != 0 {
            key.push((n & 0xffff_ffff) as u32);
            n >>= 32;
        }
        Random {
            mt: Mt19937::from_key(&key),
        }
    }

    /// `random.random()`: 53 random bits from two words, as a double in [0, 1).
    pub fn random(&mut self) -> f64 {
        let a = self.mt.next_u32() >> 5;
        let b = self.mt.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `random.getrandbits(k)` for `k <= 64`: one word per 32 bits, low word first, the
    /// last word shifted down to what is left.
    ///
    /// # Panics
    /// When `k > 64`.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        assert!(k <= 64, "getrandbits: at most 64 bits here, got {k}");
        match k {
            0 => 0,
            1..=32 => u64::from(self.mt.next_u32() >> (32 - k)),
            _ => {
                let low = u64::from(self.mt.next_u32());
                let high = u64::from(self.mt.next_u32() >> (64 - k));
                low | (high << 32)
            }
        }
    }

    /// `random._randbelow(n)`: draws `n.bit_length()` bits until the value is below `n`.
    ///
    /// # Panics
    /// When `n == 0` (Python's callers raise before getting here).
    pub fn randbelow(&mut self, n: u64) -> u64 {
        assert!(n > 0, "randbelow: n must be positive");
        let k = u64::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random.randrange(start, stop)`.
    ///
    /// # Panics
    /// When the range is empty (Python raises `ValueError`).
    pub fn randrange(&mut self, start: i64, stop: i64) -> i64 {
        assert!(start < stop, "randrange: empty range ({start}, {stop})");
        let width = (i128::from(stop) - i128::from(start)) as u64;
        (i128::from(start) + i128::from(self.randbelow(width))) as i64
    }

    /// `random.randint(a, b)`, both ends included.
    ///
    /// # Panics
    /// When `b < a` (Python raises `ValueError`).
    pub fn randint(&mut self, a: i64, b: i64) -> i64 {
        assert!(a <= b, "randint: empty range ({a}, {b})");
        let width = (i128::from(b) - i128::from(a) + 1) as u64;
        (i128::from(a) + i128::from(self.randbelow(width))) as i64
    }

    /// `random.shuffle(x)` in place (Fisher–Yates from the end).
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }

    /// `random.choice(seq)`; `None` where Python raises `IndexError` on an empty sequence.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> Option<&'a T> {
        if seq.is_empty() {
            return None;
        }
        Some(&seq[self.randbelow(seq.len() as u64) as usize])
    }

    /// `random.choices(population, k=k)` without weights: `floor(random() * n)` per pick.
    /// Empty when `population` is empty and `k == 0`.
    ///
    /// # Panics
    /// When `population` is empty and `k > 0` (Python raises `IndexError`).
    pub fn choices<T: Clone>(&mut self, population: &[T], k: usize) -> Vec<T> {
        let n = population.len() as f64;
        (0..k)
            .map(|_| population[(self.random() * n).floor() as usize].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values printed by CPython 3.11.7's `random` module; the snippet is
    // quoted above each assertion.

    #[test]
    fn seeding_matches_cpython() {
        // random.seed(s); [random.getrandbits(32) for _ in range(3)], random.random()
        let cases: [(i128, [u64; 3], f64); 4] = [
            (0, [3626764237, 1654615998, 3255389356], 0.890243920837131),
            (42, [2746317213, 478163327, 107420369], 0.7415504997598329),
            (
                1 << 32,
                [485306839, 1508871100, 1794561286],
                0.9347212762883035,
            ),
            (
                u64::MAX as i128,
                [93740670, 1068495656, 1452108352],
                0.6187512294349632,
            ),
        ];
        for (seed, words, real) in cases {
            let mut r = Random::new(seed);
            let got: Vec<u64> = (0..3).map(|_| r.getrandbits(32)).collect();
            assert_eq!(got, words, "seed {seed}");
            assert_eq!(r.random(), real, "seed {seed}");
        }
        // random.seed(-42) is random.seed(42).
        assert_eq!(Random::new(-42).getrandbits(32), 2746317213);
    }

    #[test]
    fn getrandbits_widths_match_cpython() {
        // random.seed(0); [random.getrandbits(k) for k in (1,7,31,33,64)]
        let mut r = Random::new(0);
        let got: Vec<u64> = [1, 7, 31, 33, 64]
            .iter()
            .map(|&k| r.getrandbits(k))
            .collect();
        assert_eq!(got, [1, 49, 1627694678, 3823568514, 4776171008201404212]);
    }

    #[test]
    fn methods_match_cpython() {
        // random.seed(42); l = list(range(20)); random.shuffle(l)
        // [random.randrange(1000) for _ in range(5)]; [random.randint(1,6) for _ in range(8)]
        // [random.choice("abcdefg") for _ in range(8)]; random.choices(range(100), k=6)
        // [random.randrange(-5,5) for _ in range(5)]; [random.randrange(2**40) for _ in range(2)]
        let mut r = Random::new(42);
        let mut l: Vec<u32> = (0..20).collect();
        r.shuffle(&mut l);
        assert_eq!(
            l,
            [
                19, 5, 14, 4, 9, 13, 15, 18, 6, 12, 17, 10, 1, 11, 2, 16, 7, 8, 0, 3
            ]
        );
        let got: Vec<i64> = (0..5).map(|_| r.randrange(0, 1000)).collect();
        assert_eq!(got, [574, 203, 733, 665, 718]);
        let got: Vec<i64> = (0..8).map(|_| r.randint(1, 6)).collect();
        assert_eq!(got, [5, 4, 2, 4, 5, 3, 1, 2]);
        let letters: Vec<char> = "abcdefg".chars().collect();
        let got: String = (0..8).map(|_| *r.choice(&letters).unwrap()).collect();
        assert_eq!(got, "fdccbbgc");
        let population: Vec<u32> = (0..100).collect();
        assert_eq!(r.choices(&population, 6), [10, 37, 35, 34, 26, 4]);
        let got: Vec<i64> = (0..5).map(|_| r.randrange(-5, 5)).collect();
        assert_eq!(got, [2, 3, -4, 1, -4]);
        let got: Vec<i64> = (0..2).map(|_| r.randrange(0, 1 << 40)).collect();
        assert_eq!(got, [646616090865, 798269952705]);
    }

    #[test]
    fn long_shuffle_matches_cpython() {
        // random.seed(7); l = list(range(1963)); random.shuffle(l); l[:10], l[-5:]
        let mut r = Random::new(7);
        let mut l: Vec<u32> = (0..1963).collect();
        r.shuffle(&mut l);
        assert_eq!(
            l[..10],
            [146, 498, 1328, 318, 60, 159, 1179, 423, 1222, 880]
        );
        assert_eq!(l[1958..], [1333, 808, 308, 1941, 663]);
    }

    #[test]
    fn choice_of_nothing_is_none() {
        assert_eq!(Random::new(0).choice::<u8>(&[]), None);
    }
}
