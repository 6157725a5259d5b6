//! One sequence's KV cache.
//!
//! Per layer, keys and values live in a (kv_heads, capacity, head_dim) tensor that new
//! positions are written into in place (`slice_set`), and attention reads the first `len`
//! positions as a strided view, so a decode step copies one position per layer, not the
//! whole history. The capacity grows by doubling (a copy each time, so O(1) amortised) up to
//! what the request can ever need (prompt + max_tokens), so a request that stops early, or
//! a long queue of admitted requests, does not hold memory for tokens never generated.

use candle_core::{DType, Device, Result, Tensor};

/// Smallest capacity allocated, and the granularity of growth.
const CHUNK: usize = 64;

pub(crate) struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    /// Most positions this sequence can hold.
    max: usize,
    device: Device,
}

impl KvCache {
    /// A cache for `n_layers` layers, sized at first for `initial` positions, never holding
    /// more than `max`.
    pub(crate) fn new(
        n_layers: usize,
        kv_heads: usize,
        head_dim: usize,
        initial: usize,
        max: usize,
        device: &Device,
    ) -> Result<Self> {
        let capacity = initial
            .div_ceil(CHUNK)
            .saturating_mul(CHUNK)
            .clamp(1, max.max(1));
        let layers = (0..n_layers)
            .map(|_| {
                // Two allocations: keys and values are written in place, so they must not
                // share storage.
                let k = Tensor::zeros((kv_heads, capacity, head_dim), DType::F32, device)?;
                let v = Tensor::zeros((kv_heads, capacity, head_dim), DType::F32, device)?;
                Ok((k, v))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache {
            layers,
            kv_heads,
            head_dim,
            capacity,
            max,
            device: device.clone(),
        })
    }

    /// Bytes held (keys and values of every layer, at the current capacity).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.layers.len() * 2 * self.kv_heads * self.capacity * self.head_dim * 4
    }

    /// Writes `k`, `v` (kv_heads, len, head_dim) at positions `start..start + len` of
    /// `layer`, and returns views of positions `0..start + len`.
    pub(crate) fn append(
        &mut self,
        layer: usize,
        start: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let len = k.dim(1)?;
        let end = start + len;
        if end > self.capacity {
            self.grow(end)?;
        }
        let (ck, cv) = &self.layers[layer];
        ck.slice_set(k, 1, start)?;
        cv.slice_set(v, 1, start)?;
        Ok((ck.narrow(1, 0, end)?, cv.narrow(1, 0, end)?))
    }

    fn grow(&mut self, needed: usize) -> Result<()> {
        if needed > self.max {
            candle_core::bail!(
                "KV cache overflow: {needed} positions, at most {}",
                self.max
            );
        }
        let capacity = (self.capacity * 2)
            .max(needed.div_ceil(CHUNK) * CHUNK)
            .min(self.max);
        let extra = capacity - self.capacity;
        let pad = Tensor::zeros(
            (self.kv_heads, extra, self.head_dim),
            DType::F32,
            &self.device,
        )?;
        for (k, v) in &mut self.layers {
            *k = Tensor::cat(&[&*k, &pad], 1)?;
            *v = Tensor::cat(&[&*v, &pad], 1)?;
        }
        self.capacity = capacity;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_doubling_and_keeps_what_was_written() -> Result<()> {
        let dev = Device::Cpu;
        let mut c = KvCache::new(1, 2, 3, 5, 300, &dev)?;
        assert_eq!(c.capacity, 64);
        let mut written = Vec::new();
        for pos in 0..200usize {
            let k = Tensor::full(pos as f32, (2, 1, 3), &dev)?;
            let v = Tensor::full(-(pos as f32), (2, 1, 3), &dev)?;
            let (keys, values) = c.append(0, pos, &k, &v)?;
            written.push(pos as f32);
            assert_eq!(keys.dim(1)?, pos + 1);
            let got: Vec<f32> = keys.get(1)?.get_on_dim(1, 2)?.to_vec1()?;
            assert_eq!(got, written);
            assert_eq!(
                values.get(0)?.get_on_dim(1, 0)?.to_vec1::<f32>()?[pos],
                -(pos as f32)
            );
        }
        assert_eq!(c.capacity, 256);
        assert_eq!(c.bytes(), 2 * 2 * 256 * 3 * 4);
        let k = Tensor::zeros((2, 101, 3), DType::F32, &dev)?;
        assert!(c.append(0, 200, &k, &k).is_err(), "past max");
        Ok(())
    }
}
