//! CPython's `hash(str)` (3.11 and later: SipHash-1-3) under a fixed `PYTHONHASHSEED`.
//!
//! vLLM's `TimedTrace` seeds each prompt block with `hash(f"{h}:{size}") & 0xFFFFFFFF`,
//! and Python randomises `hash(str)` per process unless `PYTHONHASHSEED` is set, so vLLM's
//! request set is reproducible only under a fixed `PYTHONHASHSEED`. Here the run's `--seed`
//! plays that part: `bench --seed S` gives what `PYTHONHASHSEED=S vllm bench serve --seed S`
//! gives.

/// CPython's `_Py_HashSecret` for `PYTHONHASHSEED=seed`: zeros for 0, else the bytes of
/// its `lcg_urandom(seed)`; SipHash's keys are its first two little-endian words.
fn secret(seed: u32) -> (u64, u64) {
    if seed == 0 {
        return (0, 0);
    }
    let mut bytes = [0u8; 16];
    let mut x = seed;
    for b in &mut bytes {
        x = x.wrapping_mul(214013).wrapping_add(2531011);
        *b = ((x >> 16) & 0xff) as u8;
    }
    let k0 = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let k1 = u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes"));
    (k0, k1)
}

/// SipHash-1-3 of `data` with keys `k0`, `k1` (CPython's `siphash13`).
fn siphash13(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v0 = k0 ^ 0x736f_6d65_7073_6575;
    let mut v1 = k1 ^ 0x646f_7261_6e64_6f6d;
    let mut v2 = k0 ^ 0x6c79_6765_6e65_7261;
    let mut v3 = k1 ^ 0x7465_6462_7974_6573;
    let round = |v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64| {
        *v0 = v0.wrapping_add(*v1);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v3);
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.wrapping_add(*v3);
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.wrapping_add(*v1);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v2 = v2.rotate_left(32);
    };
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let m = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        v3 ^= m;
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        v0 ^= m;
    }
    let mut b = (data.len() as u64) << 56;
    for (i, &byte) in chunks.remainder().iter().enumerate() {
        b |= u64::from(byte) << (8 * i);
    }
    v3 ^= b;
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    v0 ^= b;
    v2 ^= 0xff;
    for _ in 0..3 {
        round(&mut v0, &mut v1, &mut v2, &mut v3);
    }
    v0 ^ v1 ^ v2 ^ v3
}

/// `hash(text) & 0xFFFFFFFF` in CPython (64-bit) run with `PYTHONHASHSEED=seed`.
///
/// CPython hashes a string's code units in its compact form: one byte per character when
/// all are below U+0100, two when all are below U+10000, else four (little-endian).
pub fn str_hash_u32(text: &str, seed: u32) -> u32 {
    if text.is_empty() {
        return 0;
    }
    let max = text.chars().map(u32::from).max().unwrap_or(0);
    let data: Vec<u8> = if max < 0x100 {
        text.chars().map(|c| u32::from(c) as u8).collect()
    } else if max < 0x10000 {
        text.chars()
            .flat_map(|c| (u32::from(c) as u16).to_le_bytes())
            .collect()
    } else {
        text.chars()
            .flat_map(|c| u32::from(c).to_le_bytes())
            .collect()
    };
    let (k0, k1) = secret(seed);
    let mut h = siphash13(k0, k1, &data) as i64;
    if h == -1 {
        h = -2;
    }
    h as u64 as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_cpython() {
        // PYTHONHASHSEED=S python3.11 -c 'print([hash(k) & 0xFFFFFFFF for k in KEYS])'
        let keys = [
            "12:16",
            "0:16",
            "",
            "a",
            "46:512",
            "héllo:3",
            "日本:5",
            &"x".repeat(20),
        ];
        let cases: [(u32, [u32; 8]); 4] = [
            (
                0,
                [
                    432572991, 2558130374, 0, 3097171987, 515549297, 569018227, 3698658555,
                    1173936604,
                ],
            ),
            (
                1,
                [
                    1955194075, 1999644603, 0, 4157345395, 3762449724, 2865445996, 2334976478,
                    4144760549,
                ],
            ),
            (
                1234,
                [
                    413207026, 3191023820, 0, 2128648218, 4089951835, 2916711156, 2089643289,
                    4239211413,
                ],
            ),
            (
                4294967295,
                [
                    881823944, 4255914830, 0, 2264459399, 567903598, 4281825304, 1730622645,
                    1683231910,
                ],
            ),
        ];
        for (seed, want) in cases {
            let got: Vec<u32> = keys.iter().map(|k| str_hash_u32(k, seed)).collect();
            assert_eq!(got, want, "PYTHONHASHSEED={seed}");
        }
    }
}
