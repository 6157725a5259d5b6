//! vLLM's `RandomMultiModalDataset.sample` (vLLM 0.32), draw for draw, on the SDK's
//! [`bench_sdk::synthetic`] text sampler and [`bench_sdk::media`] images:
//! 1. input lengths, output lengths and vocabulary offsets, then the shared prefix, as
//!    `random` draws them;
//! 2. per request, in order: its text prompt (fitting may draw padding), then its item
//!    count (`integers(min, max + 1)`), then per item a bucket (`choice(p=...)`) and the
//!    item's pixels (`integers(0, 256, (h, w, 3), uint8)`); a modality at its cap has its
//!    buckets dropped and the rest renormalized, as vLLM does.
//!
//! Images go as JPEG data URLs (vLLM's `process_image`). Videos (buckets with more than
//! one frame) have vLLM's pixels (one `integers(0, 256, (frames, h, w, 3), uint8)` draw)
//! but go as Motion JPEG in AVI ([`bench_sdk::video`]), not vLLM's OpenCV MPEG-4 in MP4,
//! which has no pure-Rust encoder for wasm32-wasip2; the draws, and so the rest of the
//! request set, stay vLLM's.
//!
//! The source is shardable: a shard walks every request, drawing its text and item
//! choices and skipping its pixels' draws, and encodes only the images of its own
//! positions (the encoding is nearly all the cost).

use bench_sdk::dataset::Positions;
use bench_sdk::media::{jpeg_data_url, random_rgb};
use bench_sdk::rng::Generator;
use bench_sdk::sampling::Codec;
use bench_sdk::synthetic::{TextParams, TextSampler, prompt_len};
use bench_sdk::video::random_video_data_url;
use bench_sdk::{ChatMessage, ContentPart, PluginError, Prompt, RequestSpec};

use crate::buckets::{Bucket, ItemPlan, Modality, NAME, normalize};

/// The options of `vllm bench serve --dataset-name random-mm`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub text: TextParams,
    pub plan: ItemPlan,
    /// `--enable-multimodal-chat`: the prompt and its items as one chat message.
    pub chat: bool,
}

/// The sampler: the text sampler's up-front draws in [`Sampler::new`], then each
/// request's text and items in order.
pub struct Sampler {
    text: TextSampler,
    plan: ItemPlan,
    chat: bool,
    /// The positions this source makes, and the next position to walk.
    positions: Positions,
    position: usize,
    /// Requests whose items ran out of buckets before their drawn count (vLLM warns).
    pub exhausted: usize,
}

impl Sampler {
    pub fn new(
        tok: &impl Codec,
        rng: Generator,
        num_requests: usize,
        p: &Params,
        positions: Positions,
    ) -> Result<Self, PluginError> {
        Ok(Sampler {
            text: TextSampler::new(NAME, tok, rng, num_requests, &p.text)?,
            plan: p.plan.clone(),
            chat: p.chat,
            positions,
            position: 0,
            exhausted: 0,
        })
    }

    /// How many requests of the whole set are left to walk.
    pub fn remaining(&self) -> usize {
        self.text.remaining()
    }

    /// Tokens more or fewer than `prefix_len` in the shared prefix.
    pub fn prefix_mismatch(&self) -> i64 {
        self.text.prefix_mismatch
    }

    /// Tokens more or fewer than asked for, over the prompts built so far.
    pub fn token_mismatch(&self) -> i64 {
        self.text.token_mismatch
    }

    /// The next (up to) `max` requests of this source's positions. The texts' draw-free
    /// fitting steps go to the host in one batch; each request then finishes its text and
    /// draws its items (making them only at this source's positions).
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        // `max` positions of ours lie within the next `max * count` of the whole set. When
        // none lies past them, walk to the end, so that the last batch leaves the whole
        // set walked (its warnings concern all of it).
        let remaining = self.text.remaining();
        let mut walk = max.saturating_mul(self.positions.count());
        if self.positions.next_from(self.position + walk) >= self.position + remaining {
            walk = remaining;
        }
        let pending = self.text.next_pending(tok, walk)?;
        let mut out = Vec::with_capacity(max.min(pending.len()));
        for prompt in pending {
            let prompt = self.text.finish(tok, prompt)?;
            let keep = self.positions.keeps(self.position);
            self.position += 1;
            let items = self.items(keep)?;
            if !keep {
                continue;
            }
            let len = prompt_len(NAME, &prompt.fitted)?;
            let mut spec = RequestSpec::text(String::new(), len, prompt.output_len);
            if self.chat {
                let mut content = Vec::with_capacity(items.len() + 1);
                content.push(ContentPart::Text(prompt.fitted.text));
                content.extend(items);
                spec.prompt = Prompt::Chat(vec![ChatMessage {
                    role: "user".into(),
                    content,
                }]);
            } else {
                spec.prompt = Prompt::Text(prompt.fitted.text);
                spec.multimodal = items;
            }
            out.push(spec);
        }
        Ok(out)
    }

    /// vLLM's `get_mm_item_iterator` with each item generated as it is drawn (`make`), or
    /// only drawn (another shard's request: the items are not made).
    fn items(&mut self, make: bool) -> Result<Vec<ContentPart>, PluginError> {
        let plan = &self.plan;
        let rng = &mut self.text.rng;
        let count = rng.integer(plan.min_items, plan.max_items + 1);
        let mut items = Vec::new();
        if count == 0 {
            return Ok(items);
        }
        let mut buckets: Vec<(Bucket, f64)> = plan.buckets.clone();
        let mut images = 0i64;
        let mut videos = 0i64;
        while images + videos < count {
            let probs: Vec<f64> = buckets.iter().map(|(_, p)| *p).collect();
            let bucket = buckets[rng.choice_weighted(&probs)].0;
            let modality = bucket.modality()?;
            let taken = match modality {
                Modality::Image => &mut images,
                Modality::Video => &mut videos,
            };
            if *taken < plan.limit(modality) {
                *taken += 1;
                if make {
                    items.push(item(rng, bucket, modality)?);
                } else {
                    rng.skip_bytes(bucket.pixel_bytes());
                }
                continue;
            }
            // The modality is at its cap: its buckets leave the draw.
            for (b, p) in &mut buckets {
                if b.modality()? == modality {
                    *p = 0.0;
                }
            }
            if buckets.iter().all(|(_, p)| *p == 0.0) {
                self.exhausted += 1;
                break;
            }
            buckets = normalize(&buckets)?;
        }
        Ok(items)
    }
}

/// vLLM's `generate_mm_item`: an item's pixels drawn, then sent as a data URL (a JPEG
/// image, or a Motion JPEG AVI video).
fn item(
    rng: &mut Generator,
    bucket: Bucket,
    modality: Modality,
) -> Result<ContentPart, PluginError> {
    match modality {
        Modality::Image => {
            let pixels = random_rgb(rng, bucket.width, bucket.height);
            Ok(ContentPart::ImageUrl(jpeg_data_url(
                bucket.width,
                bucket.height,
                &pixels,
            )?))
        }
        Modality::Video => Ok(ContentPart::VideoUrl(random_video_data_url(
            rng,
            bucket.width,
            bucket.height,
            bucket.frames,
        )?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::Bucket;
    use bench_sdk::media::{data_url_bytes, decoded_size};
    use bench_sdk::synthetic::toy::Toy;

    fn params(chat: bool, limits: &[(&str, i64)], buckets: &[((u32, u32, u32), f64)]) -> Params {
        let limits: Vec<(String, i64)> = limits.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        let buckets: Vec<(Bucket, f64)> = buckets
            .iter()
            .map(|&((height, width, frames), p)| {
                (
                    Bucket {
                        height,
                        width,
                        frames,
                    },
                    p,
                )
            })
            .collect();
        Params {
            text: TextParams {
                input_len: 12,
                output_len: 4,
                input_range_ratio: 0.5,
                output_range_ratio: 0.0,
                prefix_len: 2,
            },
            plan: ItemPlan::new(3, 1.0, &limits, &buckets).unwrap(),
            chat,
        }
    }

    fn drain(seed: u128, n: usize, p: &Params, max: usize) -> Vec<RequestSpec> {
        drain_shard(seed, n, p, max, Positions::ALL).0
    }

    /// The requests of one shard, and its sampler's whole-set counters at the end.
    fn drain_shard(
        seed: u128,
        n: usize,
        p: &Params,
        max: usize,
        positions: Positions,
    ) -> (Vec<RequestSpec>, i64, usize) {
        let tok = Toy { bos: false };
        let mut sampler = Sampler::new(&tok, Generator::new(seed), n, p, positions).unwrap();
        let mut all = Vec::new();
        while sampler.remaining() > 0 {
            let batch = sampler.next_batch(&tok, max).unwrap();
            assert!(batch.len() <= max);
            all.extend(batch);
        }
        (all, sampler.token_mismatch(), sampler.exhausted)
    }

    #[test]
    fn shards_interleave_into_the_whole_set() {
        let p = params(
            true,
            &[("image", 2)],
            &[((8, 16, 1), 1.0), ((24, 8, 1), 1.0)],
        );
        let (whole, mismatch, exhausted) = drain_shard(5, 23, &p, 4, Positions::ALL);
        assert_eq!(whole.len(), 23);
        for count in [2u32, 3, 5] {
            let shards: Vec<_> = (0..count)
                .map(|i| drain_shard(5, 23, &p, 3, Positions::shard(i, count).unwrap()))
                .collect();
            for (i, (part, m, e)) in shards.iter().enumerate() {
                let want: Vec<String> = whole
                    .iter()
                    .skip(i)
                    .step_by(count as usize)
                    .map(|r| format!("{r:?}"))
                    .collect();
                let got: Vec<String> = part.iter().map(|r| format!("{r:?}")).collect();
                assert_eq!(got, want, "shard {i} of {count}");
                // Each shard walked the whole set.
                assert_eq!((*m, *e), (mismatch, exhausted), "shard {i} of {count}");
            }
        }
    }

    fn images(spec: &RequestSpec) -> Vec<(u32, u32)> {
        let parts = match &spec.prompt {
            Prompt::Chat(m) => m[0].content[1..].to_vec(),
            _ => spec.multimodal.clone(),
        };
        parts
            .iter()
            .map(|p| match p {
                ContentPart::ImageUrl(url) => {
                    let (mime, bytes) = data_url_bytes(url).unwrap();
                    assert_eq!(mime, "image/jpeg");
                    decoded_size(&bytes).unwrap()
                }
                other => panic!("expected an image, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn images_decode_at_bucket_sizes_within_the_limits() {
        // Counts from [0, 6] capped at 4 images; two sizes (width x height).
        let p = params(
            false,
            &[("image", 4)],
            &[((8, 16, 1), 1.0), ((24, 8, 1), 1.0)],
        );
        let all = drain(1, 40, &p, 7);
        let mut seen = Vec::new();
        for spec in &all {
            assert!(matches!(spec.prompt, Prompt::Text(_)));
            let sizes = images(spec);
            assert!(sizes.len() <= 4, "{} items over the limit", sizes.len());
            for size in &sizes {
                assert!([(16, 8), (8, 24)].contains(size), "{size:?}");
            }
            seen.push(sizes.len());
        }
        assert!(
            seen.contains(&0) && seen.contains(&4),
            "counts drawn: {seen:?}"
        );
        // The same seed, the same bytes, whatever the host's batch size; another seed
        // differs.
        let again = drain(1, 40, &p, 40);
        assert_eq!(format!("{all:?}"), format!("{again:?}"));
        assert_ne!(format!("{all:?}"), format!("{:?}", drain(2, 40, &p, 40)));
    }

    #[test]
    fn chat_prompts_carry_the_text_then_the_images() {
        let p = params(
            true,
            &[("image", 2), ("video", 0)],
            &[((4, 4, 1), 1.0), ((4, 4, 8), 1.0)],
        );
        let plain = drain(
            3,
            12,
            &params(
                false,
                &[("image", 2), ("video", 0)],
                &[((4, 4, 1), 1.0), ((4, 4, 8), 1.0)],
            ),
            5,
        );
        for (chat, plain) in drain(3, 12, &p, 5).iter().zip(&plain) {
            let Prompt::Chat(messages) = &chat.prompt else {
                panic!("expected a chat prompt, got {:?}", chat.prompt);
            };
            assert!(chat.multimodal.is_empty());
            assert_eq!(messages.len(), 1);
            assert_eq!(messages[0].role, "user");
            let Prompt::Text(text) = &plain.prompt else {
                panic!("expected text");
            };
            assert!(matches!(&messages[0].content[0], ContentPart::Text(t) if t == text));
            // The video bucket is drawn but capped at 0, so only images come.
            assert_eq!(images(chat), images(plain));
            assert!(images(chat).len() <= 2);
        }
    }

    /// Each video item as (frame count, width, height of every frame).
    fn videos(spec: &RequestSpec) -> Vec<(usize, u32, u32)> {
        spec.multimodal
            .iter()
            .map(|p| match p {
                ContentPart::VideoUrl(url) => {
                    let (mime, bytes) = data_url_bytes(url).unwrap();
                    assert_eq!(mime, bench_sdk::video::AVI_MIME);
                    let avi = bench_sdk::video::avi_frames(&bytes).unwrap();
                    let sizes: Vec<(u32, u32)> = avi
                        .frames
                        .iter()
                        .map(|f| decoded_size(f).unwrap())
                        .collect();
                    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{sizes:?}");
                    (sizes.len(), sizes[0].0, sizes[0].1)
                }
                other => panic!("expected a video, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn videos_draw_their_frames_as_one_image_of_the_same_bytes_would() {
        // A 4-frame 2x3 video is 72 bytes of pixels, as a 6x4 image is: vLLM draws both
        // with one `integers(0, 256, shape, uint8)`, so the texts and the item counts
        // that follow are the same either way.
        let video = params(false, &[("video", 3)], &[((2, 3, 4), 1.0)]);
        let image = params(false, &[("image", 3)], &[((6, 4, 1), 1.0)]);
        let with_videos = drain(5, 20, &video, 6);
        let with_images = drain(5, 20, &image, 6);
        let mut total = 0;
        for (v, i) in with_videos.iter().zip(&with_images) {
            assert_eq!(format!("{:?}", v.prompt), format!("{:?}", i.prompt));
            let vids = videos(v);
            assert_eq!(vids.len(), images(i).len());
            assert!(vids.iter().all(|&x| x == (4, 3, 2)), "{vids:?}");
            total += vids.len();
        }
        assert!(total > 0);
        assert_eq!(
            format!("{with_videos:?}"),
            format!("{:?}", drain(5, 20, &video, 20))
        );
    }
}
