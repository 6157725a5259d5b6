//! vLLM's multimodal item options: `--random-mm-bucket-config` (a Python dict literal
//! with `(height, width, frames)` tuple keys, read with `ast.literal_eval` in vLLM) and
//! `--random-mm-limit-mm-per-prompt` (a JSON object), and the checks of
//! `get_mm_item_sampling_params`.

use bench_sdk::PluginError;

/// The dataset's name, which begins every message it writes (first of all the
/// configuration's, read here).
pub(crate) const NAME: &str = "random-mm";

/// One `(height, width, num_frames)` key of the bucket config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub height: u32,
    pub width: u32,
    pub frames: u32,
}

impl Bucket {
    /// The bytes of one item's pixel draw (`integers(0, 256, (frames, h, w, 3), uint8)`;
    /// an image is one frame).
    pub fn pixel_bytes(&self) -> usize {
        self.height as usize * self.width as usize * 3 * self.frames.max(1) as usize
    }
}

/// vLLM's two modalities: one frame is an image, more a video.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modality {
    Image,
    Video,
}

impl Modality {
    pub fn name(self) -> &'static str {
        match self {
            Modality::Image => "image",
            Modality::Video => "video",
        }
    }
}

impl Bucket {
    /// vLLM's `map_config_to_modality`.
    pub fn modality(&self) -> Result<Modality, PluginError> {
        match self.frames {
            0 => Err(config_error(format!(
                "invalid multimodal item configuration ({}, {}, {}): num_frames must be at \
                 least 1",
                self.height, self.width, self.frames
            ))),
            1 => Ok(Modality::Image),
            _ => Ok(Modality::Video),
        }
    }
}

fn config_error(why: String) -> PluginError {
    PluginError::InvalidConfig(format!("{NAME}: {why}"))
}

/// vLLM's default bucket config: half 256x256 images, half 1280x720 images, and a
/// 16-frame video bucket of probability 0.
pub fn default_buckets() -> Vec<(Bucket, f64)> {
    let b = |height, width, frames| Bucket {
        height,
        width,
        frames,
    };
    vec![
        (b(256, 256, 1), 0.5),
        (b(720, 1280, 1), 0.5),
        (b(720, 1280, 16), 0.0),
    ]
}

/// vLLM's default `--random-mm-limit-mm-per-prompt`: `{"image": 255, "video": 1}`.
pub fn default_limits() -> Vec<(String, i64)> {
    vec![("image".into(), 255), ("video".into(), 1)]
}

/// `--random-mm-limit-mm-per-prompt`: a JSON object of whole numbers.
pub fn parse_limits(text: &str) -> Result<Vec<(String, i64)>, PluginError> {
    let bad = |why: String| config_error(format!("option mm-limit-mm-per-prompt={text:?}: {why}"));
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let object = value
        .as_object()
        .ok_or_else(|| bad("expected a JSON object such as {\"image\": 3}".into()))?;
    object
        .iter()
        .map(|(k, v)| {
            v.as_i64()
                .map(|n| (k.clone(), n))
                .ok_or_else(|| bad(format!("the limit of {k:?} is not a whole number")))
        })
        .collect()
}

/// A small reader of the Python literals vLLM's `_parse_mm_bucket_config` accepts: a dict
/// whose keys are `(H, W, T)` tuples of ints (or strings holding one) and whose values
/// are numbers (or numeric strings, as Python's `float()` takes them).
struct Literal<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Literal<'a> {
    fn skip_space(&mut self) {
        while let Some(c) = self.text[self.pos..].chars().next() {
            if !c.is_whitespace() {
                break;
            }
            self.pos += c.len_utf8();
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.text[self.pos..].chars().next()
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.peek() {
            Some(got) if got == c => {
                self.pos += c.len_utf8();
                Ok(())
            }
            Some(got) => Err(format!(
                "expected {c:?} at column {}, found {got:?}",
                self.pos + 1
            )),
            None => Err(format!(
                "expected {c:?} at column {}, found the end",
                self.pos + 1
            )),
        }
    }

    /// A number token (sign, digits, point, exponent, underscores as Python allows).
    fn number(&mut self) -> Result<&'a str, String> {
        self.skip_space();
        let start = self.pos;
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len()
            && (bytes[self.pos].is_ascii_alphanumeric() || b"+-._".contains(&bytes[self.pos]))
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(format!("expected a number at column {}", start + 1));
        }
        Ok(&self.text[start..self.pos])
    }

    fn string(&mut self) -> Result<&'a str, String> {
        let quote = self.peek().ok_or("expected a string")?;
        self.pos += 1;
        let start = self.pos;
        let end = self.text[start..]
            .find(quote)
            .ok_or_else(|| format!("unterminated string at column {start}"))?;
        self.pos = start + end + 1;
        Ok(&self.text[start..start + end])
    }

    fn int(&mut self) -> Result<i64, String> {
        let token = self.number()?;
        token
            .replace('_', "")
            .parse::<i64>()
            .map_err(|_| format!("{token:?} is not an int"))
    }

    /// `(H, W, T)`, a trailing comma allowed.
    fn tuple(&mut self) -> Result<[i64; 3], String> {
        self.expect('(')?;
        let mut out = [0; 3];
        for (i, slot) in out.iter_mut().enumerate() {
            if i > 0 {
                self.expect(',')?;
            }
            *slot = self.int()?;
        }
        if self.peek() == Some(',') {
            self.pos += 1;
        }
        self.expect(')')
            .map_err(|_| "a bucket key is a tuple of three ints (H, W, T)".to_string())?;
        Ok(out)
    }

    fn key(&mut self) -> Result<[i64; 3], String> {
        match self.peek() {
            Some('(') => self.tuple(),
            Some('"' | '\'') => {
                let inner = self.string()?;
                let mut nested = Literal {
                    text: inner,
                    pos: 0,
                };
                let key = nested
                    .tuple()
                    .map_err(|e| format!("invalid bucket key {inner:?}: {e}"))?;
                if nested.peek().is_some() {
                    return Err(format!("invalid bucket key {inner:?}: expected (H, W, T)"));
                }
                Ok(key)
            }
            _ => Err(format!(
                "invalid bucket key at column {}: expected a tuple (H, W, T)",
                self.pos + 1
            )),
        }
    }

    fn value(&mut self) -> Result<f64, String> {
        let token = match self.peek() {
            Some('"' | '\'') => self.string()?.trim(),
            _ => self.number()?,
        };
        let clean = token.replace('_', "");
        match clean.to_ascii_lowercase().as_str() {
            "inf" | "+inf" | "infinity" | "-inf" | "nan" => {
                Err(format!("{token:?} is not a finite probability"))
            }
            _ => clean
                .parse::<f64>()
                .map_err(|_| format!("{token:?} is not a number")),
        }
    }
}

/// `--random-mm-bucket-config`, e.g. `{(256, 256, 1): 0.5, (720, 1280, 1): 0.5}`, in the
/// dict's order (which the draws follow). A key given twice keeps its first place and
/// its last value, as a Python dict does.
pub fn parse_buckets(text: &str) -> Result<Vec<(Bucket, f64)>, PluginError> {
    let bad = |why: String| config_error(format!("option mm-bucket-config={text:?}: {why}"));
    let mut lit = Literal { text, pos: 0 };
    let mut out: Vec<(Bucket, f64)> = Vec::new();
    lit.expect('{')
        .map_err(|e| bad(format!("the bucket config must be a dict ({e})")))?;
    loop {
        if lit.peek() == Some('}') {
            lit.pos += 1;
            break;
        }
        let key = lit.key().map_err(&bad)?;
        lit.expect(':').map_err(&bad)?;
        let value = lit.value().map_err(&bad)?;
        let [height, width, frames] = key;
        let dim = |v: i64, what: &str| {
            u32::try_from(v)
                .ok()
                .filter(|&v| v > 0 || what == "num_frames")
                .ok_or_else(|| bad(format!("{what} {v} in {key:?} must be a positive int")))
        };
        let bucket = Bucket {
            height: dim(height, "height")?,
            width: dim(width, "width")?,
            frames: dim(frames, "num_frames")?,
        };
        match out.iter_mut().find(|(b, _)| *b == bucket) {
            Some(entry) => entry.1 = value,
            None => out.push((bucket, value)),
        }
        match lit.peek() {
            Some(',') => lit.pos += 1,
            Some('}') => {}
            _ => {
                return Err(bad(format!(
                    "expected ',' or '}}' at column {}",
                    lit.pos + 1
                )));
            }
        }
    }
    if lit.peek().is_some() {
        return Err(bad(format!("unexpected text at column {}", lit.pos + 1)));
    }
    Ok(out)
}

/// vLLM's `normalize_bucket_config`: no negative probability, zero ones dropped, the
/// rest divided by their (sequential, as Python's `sum`) total.
pub fn normalize(buckets: &[(Bucket, f64)]) -> Result<Vec<(Bucket, f64)>, PluginError> {
    if buckets.iter().any(|(_, p)| *p < 0.0) {
        return Err(config_error(
            "bucket config probabilities must be non-negative".into(),
        ));
    }
    let kept: Vec<(Bucket, f64)> = buckets.iter().copied().filter(|(_, p)| *p > 0.0).collect();
    if kept.is_empty() {
        return Err(config_error(
            "the bucket config has no bucket with a probability above 0".into(),
        ));
    }
    let total: f64 = kept.iter().map(|(_, p)| p).fold(0.0, |a, b| a + b);
    Ok(kept.into_iter().map(|(b, p)| (b, p / total)).collect())
}

/// What `get_mm_item_sampling_params` settles: the item count range, the limits of the
/// modalities in play and the normalized buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemPlan {
    pub min_items: i64,
    pub max_items: i64,
    /// Per modality present in the buckets, its cap per request.
    pub limits: Vec<(Modality, i64)>,
    pub buckets: Vec<(Bucket, f64)>,
}

impl ItemPlan {
    /// vLLM's `get_mm_item_sampling_params`, its checks in its order.
    pub fn new(
        base_items: i64,
        range_ratio: f64,
        limits: &[(String, i64)],
        buckets: &[(Bucket, f64)],
    ) -> Result<Self, PluginError> {
        if !(0.0..=1.0).contains(&range_ratio) {
            return Err(config_error(format!(
                "mm-num-mm-items-range-ratio must be in [0, 1], got {range_ratio}"
            )));
        }
        for (bucket, _) in buckets {
            let modality = bucket.modality()?.name();
            if !limits.iter().any(|(k, _)| k == modality) {
                let known: Vec<&str> = limits.iter().map(|(k, _)| k.as_str()).collect();
                return Err(config_error(format!(
                    "modality {modality} of bucket ({}, {}, {}) is not in \
                     mm-limit-mm-per-prompt (which has: {})",
                    bucket.height,
                    bucket.width,
                    bucket.frames,
                    known.join(", ")
                )));
            }
        }
        let buckets = normalize(buckets)?;
        let mut modalities: Vec<Modality> = Vec::new();
        for (bucket, _) in &buckets {
            let m = bucket.modality()?;
            if !modalities.contains(&m) {
                modalities.push(m);
            }
        }
        let limits: Vec<(Modality, i64)> = modalities
            .iter()
            .filter_map(|&m| {
                limits
                    .iter()
                    .rev()
                    .find(|(k, _)| k == m.name())
                    .map(|&(_, n)| (m, n))
            })
            .collect();
        let cap: i64 = limits.iter().map(|(_, n)| n).sum();
        let base = base_items as f64;
        let max_items = cap.min((base * (1.0 + range_ratio)).ceil() as i64);
        let min_items = ((base * (1.0 - range_ratio)).floor() as i64).max(0);
        if min_items > max_items {
            return Err(config_error(format!(
                "the fewest items per request ({min_items}) exceed the most \
                 ({max_items}, capped by mm-limit-mm-per-prompt)"
            )));
        }
        Ok(ItemPlan {
            min_items,
            max_items,
            limits,
            buckets,
        })
    }

    /// The cap of `modality` per request.
    pub fn limit(&self, modality: Modality) -> i64 {
        self.limits
            .iter()
            .find(|(m, _)| *m == modality)
            .map_or(0, |&(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(height: u32, width: u32, frames: u32) -> Bucket {
        Bucket {
            height,
            width,
            frames,
        }
    }

    #[test]
    fn bucket_configs_parse_as_python_literals() {
        assert_eq!(
            parse_buckets("{(256, 256, 1): 0.5, (720, 1280, 1): 0.4, (720, 1280, 16): 0.10}")
                .unwrap(),
            [
                (b(256, 256, 1), 0.5),
                (b(720, 1280, 1), 0.4),
                (b(720, 1280, 16), 0.1)
            ]
        );
        // String keys (JSON style), int values, a trailing comma, a repeated key.
        assert_eq!(
            parse_buckets(r#"{"(64, 32, 1)": 1, '(8,8,1)': "2.5", (64,32,1): 3,}"#).unwrap(),
            [(b(64, 32, 1), 3.0), (b(8, 8, 1), 2.5)]
        );
        assert_eq!(parse_buckets("{}").unwrap(), []);
        for (text, needle) in [
            ("[(1, 1, 1)]", "must be a dict"),
            ("{(1, 1): 0.5}", "expected ',' at column 7"),
            ("{(1, 1, 1, 1): 0.5}", "tuple of three ints"),
            ("{(1, 1, 1) 0.5}", "expected ':'"),
            ("{(0, 1, 1): 0.5}", "height 0"),
            ("{(1, 1, 1): zero}", "is not a number"),
            ("{(1, 1, 1): 0.5} x", "unexpected text"),
            ("{'1, 1, 1': 0.5}", "invalid bucket key"),
        ] {
            match parse_buckets(text) {
                Err(PluginError::InvalidConfig(m)) => {
                    assert!(m.contains(needle), "{text}: {m:?} lacks {needle:?}")
                }
                other => panic!("{text}: expected an error with {needle:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn limits_parse_as_json_objects() {
        assert_eq!(
            parse_limits(r#"{"image": 3, "video": 0}"#).unwrap(),
            [("image".to_string(), 3), ("video".to_string(), 0)]
        );
        assert!(parse_limits("[3]").is_err());
        assert!(parse_limits(r#"{"image": 1.5}"#).is_err());
    }

    #[test]
    fn the_plan_follows_vllms_checks() {
        let limits = default_limits();
        let plan = ItemPlan::new(2, 0.5, &limits, &default_buckets()).unwrap();
        // floor(2 * 0.5) = 1 to ceil(2 * 1.5) = 3; the zero-probability video bucket is
        // dropped, and with it the video limit.
        assert_eq!((plan.min_items, plan.max_items), (1, 3));
        assert_eq!(plan.limits, [(Modality::Image, 255)]);
        assert_eq!(
            plan.buckets,
            [(b(256, 256, 1), 0.5), (b(720, 1280, 1), 0.5)]
        );
        // Capped by the limits.
        let plan = ItemPlan::new(9, 1.0, &[("image".into(), 4)], &default_buckets()[..2]);
        assert_eq!(plan.unwrap().max_items, 4);
        // Normalized: 1 and 3 become 0.25 and 0.75.
        let plan = ItemPlan::new(1, 0.0, &limits, &[(b(1, 1, 1), 1.0), (b(2, 2, 1), 3.0)]).unwrap();
        assert_eq!(plan.buckets, [(b(1, 1, 1), 0.25), (b(2, 2, 1), 0.75)]);
        for (base, ratio, limits, buckets, needle) in [
            (1, 1.5, limits.clone(), default_buckets(), "in [0, 1]"),
            (
                1,
                0.0,
                vec![("image".into(), 1)],
                default_buckets(),
                "modality video",
            ),
            (
                1,
                0.0,
                limits.clone(),
                vec![(b(1, 1, 1), -1.0)],
                "non-negative",
            ),
            (1, 0.0, limits.clone(), vec![(b(1, 1, 1), 0.0)], "above 0"),
            (
                1,
                0.0,
                limits.clone(),
                vec![(b(1, 1, 0), 1.0)],
                "num_frames",
            ),
            (
                5,
                0.0,
                vec![("image".into(), 2)],
                vec![(b(1, 1, 1), 1.0)],
                "exceed",
            ),
        ] {
            match ItemPlan::new(base, ratio, &limits, &buckets) {
                Err(PluginError::InvalidConfig(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}")
                }
                other => panic!("expected an error with {needle:?}, got {other:?}"),
            }
        }
    }
}
