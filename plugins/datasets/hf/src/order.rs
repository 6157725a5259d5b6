//! The order in which vLLM's Hugging Face datasets see their rows.
//!
//! vLLM loads them with `datasets.load_dataset(..., streaming=True)` (unless `--no-stream`)
//! and calls `.shuffle(seed=seed)` (unless `--disable-shuffle`). Both shuffles draw from
//! `np.random.default_rng(seed)`, so the order is reproduced here from the SDK's bit-exact
//! numpy generator (checked against `datasets` 5.2 and numpy 2.4 in the tests):
//!
//! - streaming (`IterableDataset.shuffle`, buffer of 1000): the data files are shuffled
//!   and read as up to ten interleaved shards in batches of 100 rows, which fill a
//!   buffer; each time it holds 1000 rows or more it is permuted, all but 500 are yielded
//!   and 500 kept; at the end the rest is permuted and yielded;
//! - not streaming (`Dataset.shuffle`): one permutation of all the rows.

use bench_sdk::rng::Generator;

/// `datasets`' default shuffle buffer size for streamed datasets.
pub const BUFFER_SIZE: usize = 1000;

/// numpy's `random_interval(bitgen, max)`: a value in `[0, max]` by masking and rejection,
/// which `Generator.shuffle` and `Generator.permutation` draw from.
fn random_interval(g: &mut Generator, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let mask = u64::MAX >> max.leading_zeros();
    let bits = g.bit_generator();
    loop {
        let value = if max <= u64::from(u32::MAX) {
            u64::from(bits.next_u32()) & mask
        } else {
            bits.next_u64() & mask
        };
        if value <= max {
            return value;
        }
    }
}

/// `rng.shuffle(x)` (Fisher-Yates from the end, as numpy's Generator does).
pub fn shuffle<T>(g: &mut Generator, x: &mut [T]) {
    for i in (1..x.len()).rev() {
        let j = random_interval(g, i as u64) as usize;
        x.swap(i, j);
    }
}

/// `rng.permutation(n)`.
pub fn permutation(g: &mut Generator, n: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..n).collect();
    shuffle(g, &mut out);
    out
}

/// How the rows are ordered before sampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shuffle {
    /// `--disable-shuffle`: the files' order.
    None,
    /// vLLM's default: a streamed dataset's buffer shuffle.
    Stream,
    /// `--no-stream`: a full permutation.
    Full,
}

/// The order of `files` (each given by its row count) and of their rows: the indices of
/// the rows, counted through the files in the order given, in the order vLLM sees them.
pub fn row_order(file_rows: &[usize], seed: u64, shuffle_kind: Shuffle) -> Vec<usize> {
    let starts: Vec<usize> = file_rows
        .iter()
        .scan(0, |sum, &n| {
            let start = *sum;
            *sum += n;
            Some(start)
        })
        .collect();
    let total: usize = file_rows.iter().sum();
    match shuffle_kind {
        Shuffle::None => (0..total).collect(),
        Shuffle::Full => permutation(&mut Generator::new(u128::from(seed)), total),
        Shuffle::Stream => {
            // The file order and the buffer each start from a copy of the same generator.
            let mut files: Vec<usize> = (0..file_rows.len()).collect();
            shuffle(&mut Generator::new(u128::from(seed)), &mut files);
            let batches = interleaved_batches(&files, &starts, file_rows);
            buffer_shuffle(batches, seed)
        }
    }
}

/// How many shards feed the shuffle buffer at a time (`max_buffer_input_shards`).
const MAX_INPUT_SHARDS: usize = 10;

/// The rows as the buffer receives them: the (shuffled) files split into at most ten
/// shards of consecutive files, each read in batches of `BUFFER_SIZE / 10` rows (the last
/// one of a shard shorter), the shards' batches taken in turn until all are exhausted.
fn interleaved_batches(files: &[usize], starts: &[usize], file_rows: &[usize]) -> Vec<Vec<usize>> {
    let batch = (BUFFER_SIZE / MAX_INPUT_SHARDS).max(1);
    let k = files.len().min(MAX_INPUT_SHARDS);
    if k == 0 {
        return Vec::new();
    }
    // `datasets` gives the first `n % k` shards one file more.
    let mut shards: Vec<std::vec::IntoIter<Vec<usize>>> = Vec::with_capacity(k);
    let mut next = 0;
    for i in 0..k {
        let count = files.len() / k + usize::from(i < files.len() % k);
        let rows: Vec<usize> = files[next..next + count]
            .iter()
            .flat_map(|&f| starts[f]..starts[f] + file_rows[f])
            .collect();
        next += count;
        let batches: Vec<Vec<usize>> = rows.chunks(batch).map(<[usize]>::to_vec).collect();
        shards.push(batches.into_iter());
    }
    let mut out = Vec::new();
    loop {
        let mut any = false;
        for shard in &mut shards {
            if let Some(b) = shard.next() {
                out.push(b);
                any = true;
            }
        }
        if !any {
            return out;
        }
    }
}

/// `datasets`' `BufferShuffledExamplesIterable` fed `batches` of rows: the buffer is
/// permuted whenever a batch brings it to `BUFFER_SIZE` rows or more, the rows past the
/// last half buffer yielded.
fn buffer_shuffle(batches: Vec<Vec<usize>>, seed: u64) -> Vec<usize> {
    let mut rng = Generator::new(u128::from(seed));
    let mut out = Vec::new();
    let mut buffer: Vec<usize> = Vec::with_capacity(BUFFER_SIZE + BUFFER_SIZE / 10);
    for batch in batches {
        buffer.extend(batch);
        if buffer.len() >= BUFFER_SIZE {
            let indices = permutation(&mut rng, buffer.len());
            let keep = BUFFER_SIZE / 2;
            let yielded = buffer.len() - keep;
            out.extend(indices[..yielded].iter().map(|&i| buffer[i]));
            buffer = indices[yielded..].iter().map(|&i| buffer[i]).collect();
        }
    }
    if !buffer.is_empty() {
        let indices = permutation(&mut rng, buffer.len());
        out.extend(indices.iter().map(|&i| buffer[i]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `np.random.default_rng(0).permutation(10)` with numpy 2.4.
    #[test]
    fn permutation_is_numpys() {
        let got = permutation(&mut Generator::new(0), 10);
        assert_eq!(got, [4, 6, 2, 7, 3, 5, 9, 0, 8, 1]);
    }

    /// `load_dataset(..., streaming=True).shuffle(seed=0)` over 2 500 rows `{"i": k}`
    /// (datasets 5.2, one JSONL or Parquet file), and `streaming=False`.
    #[test]
    fn stream_and_full_orders_are_datasets() {
        let got = row_order(&[2500], 0, Shuffle::Stream);
        assert_eq!(
            got[..10],
            [459, 206, 222, 162, 711, 814, 350, 890, 518, 264]
        );
        assert_eq!(
            got[495..505],
            [327, 355, 997, 569, 692, 1239, 491, 669, 11, 713]
        );
        assert_eq!(got[2495..], [2387, 1209, 627, 2426, 2199]);
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, (0..2500).collect::<Vec<_>>());

        let got = row_order(&[2500], 0, Shuffle::Full);
        assert_eq!(
            got[..10],
            [1861, 799, 68, 458, 1476, 1631, 2118, 2303, 655, 1776]
        );
        assert_eq!(row_order(&[2, 3], 7, Shuffle::None), [0, 1, 2, 3, 4]);
    }

    /// Two files of 700 and 800 rows (`data/train-0000{0,1}-of-00002`, Parquet or JSONL):
    /// the files' order is shuffled too.
    #[test]
    fn several_files_are_shuffled_as_datasets_does() {
        for (seed, first, last) in [
            (0, [259, 106, 122, 762, 1011, 414], [1473, 1201, 968]),
            (1, [1005, 349, 943, 1127, 977, 271], [525, 151, 819]),
            (5, [978, 1116, 54, 707, 379, 466], [627, 1447, 1]),
        ] {
            let got = row_order(&[700, 800], seed, Shuffle::Stream);
            assert_eq!(got[..6], first, "seed {seed}");
            assert_eq!(got[1497..], last, "seed {seed}");
        }
    }

    /// The same model in Python matched `datasets` 5.2 for files of [700, 800],
    /// [650, 720], [333, 1000, 17], twelve of 90 and [1319] rows, seeds 0 and 3; these are
    /// its first rows for [333, 1000, 17] (short batches overfill the buffer).
    const FIRST_333_1000_17_SEED3: [usize; 8] = [927, 289, 253, 617, 487, 155, 251, 765];

    #[test]
    fn short_batches_overfill_the_buffer_as_datasets_does() {
        let got = row_order(&[333, 1000, 17], 3, Shuffle::Stream);
        assert_eq!(got.len(), 1350);
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1350).collect::<Vec<_>>());
        assert_eq!(got[..8], FIRST_333_1000_17_SEED3);
    }

    #[test]
    fn wide_intervals_use_64_bit_draws() {
        let mut a = Generator::new(3);
        let mut b = Generator::new(3);
        let max = 1u64 << 40;
        let v = random_interval(&mut a, max);
        assert!(v <= max);
        // The same draw by hand: a 64-bit word masked to 41 bits, rejected while > max.
        let mask = (1u64 << 41) - 1;
        let want = loop {
            let w = b.bit_generator().next_u64() & mask;
            if w <= max {
                break w;
            }
        };
        assert_eq!(v, want);
    }
}
