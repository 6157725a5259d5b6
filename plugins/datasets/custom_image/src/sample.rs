//! vLLM's `CustomImageDataset` (vLLM 0.32): a JSONL file whose lines are either
//! `{"prompt": ..., "image_files": [...]}` or `{"content": [...]}` (text, `image` and
//! `image_url` parts interleaved), shuffled with Python's `random.seed(seed)` (the SDK's
//! [`Picker`]), one request per line, the prompt measured with special tokens and no chat
//! template, then oversampled when the lines run out.
//!
//! An image reference is sent as vLLM's `process_image` sends it: a `data:image/` or
//! `http(s)://` or `file://` URL as it is, a bare path as `file://<path>`; with
//! `--custom-ensure-client-side-data`, a local file is read and sent inline as a data URL
//! (vLLM re-encodes it as PNG; bench sends the file's own bytes with their media type,
//! which needs no decoder and loses nothing).

use bench_sdk::custom;
use bench_sdk::media::{data_url, image_mime};
use bench_sdk::sampling::{Picker, SampleFlags, TokenCounter};
use bench_sdk::{ChatMessage, ContentPart, PluginError, Prompt, RequestSpec};
use serde_json::Value;

/// One part of a line's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    /// An image reference (URL or path) as the file gives it.
    Image(String),
}

/// One line of the file.
#[derive(Clone, Debug, PartialEq)]
pub enum Row {
    /// `prompt` and `image_files`.
    Files {
        line: usize,
        prompt: String,
        images: Vec<String>,
    },
    /// `content`: interleaved parts.
    Content { line: usize, parts: Vec<Part> },
}

/// Parses the JSONL file, checking every line as vLLM checks the ones it samples; errors
/// name the file and the 1-based line.
pub fn parse(text: &str, name: &str) -> Result<Vec<Row>, PluginError> {
    let mut rows = Vec::new();
    for (at, fields) in custom::jsonl_objects(text, name)? {
        let bad = |why: String| custom::line_error(name, at, why);
        if let Some(content) = fields.get("content") {
            let parts = content
                .as_array()
                .ok_or_else(|| bad("\"content\" must be a list of content parts".into()))?;
            if parts.is_empty() {
                return Err(bad("\"content\" must hold at least one part".into()));
            }
            let parts = parts
                .iter()
                .map(|p| content_part(p).map_err(&bad))
                .collect::<Result<Vec<Part>, PluginError>>()?;
            rows.push(Row::Content { line: at, parts });
        } else if let (Some(prompt), Some(files)) =
            (fields.get("prompt"), fields.get("image_files"))
        {
            let prompt = prompt
                .as_str()
                .ok_or_else(|| bad("\"prompt\" must be a string".into()))?;
            let images = files
                .as_array()
                .filter(|f| !f.is_empty())
                .ok_or_else(|| bad("\"image_files\" must be a non-empty list".into()))?
                .iter()
                .map(|f| {
                    f.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad("each of \"image_files\" must be a string".into()))
                })
                .collect::<Result<Vec<String>, PluginError>>()?;
            rows.push(Row::Files {
                line: at,
                prompt: prompt.to_string(),
                images,
            });
        } else {
            return Err(bad(
                "a line needs \"prompt\" and \"image_files\", or \"content\"".into(),
            ));
        }
    }
    Ok(rows)
}

/// vLLM's `_process_content_part`, the checks only (images are resolved when sampled).
fn content_part(part: &Value) -> Result<Part, String> {
    let kind = part.get("type").and_then(Value::as_str);
    match kind {
        Some("text") => part
            .get("text")
            .and_then(Value::as_str)
            .map(|t| Part::Text(t.to_string()))
            .ok_or_else(|| "a text part needs a string \"text\"".to_string()),
        Some("image") => match part.get("image") {
            Some(Value::String(s)) => Ok(Part::Image(s.clone())),
            Some(_) => Err("an image part's \"image\" must be a path or URL string".into()),
            None => Err("an image part needs an \"image\" field".into()),
        },
        Some("image_url") => match part.get("image_url") {
            Some(Value::String(s)) => Ok(Part::Image(s.clone())),
            Some(Value::Object(o)) => match o.get("url") {
                Some(Value::String(s)) => Ok(Part::Image(s.clone())),
                _ => Err("an image_url part needs a string \"image_url.url\"".into()),
            },
            _ => Err("an image_url part needs an \"image_url\" string or object".into()),
        },
        other => Err(format!(
            "content parts have type \"text\", \"image\" or \"image_url\", found {other:?}"
        )),
    }
}

/// How the dataset is sampled.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--custom-output-len` (256).
    pub output_len: u32,
    /// `--enable-multimodal-chat`.
    pub chat: bool,
    /// `--custom-ensure-client-side-data`.
    pub inline: bool,
    pub flags: SampleFlags,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            output_len: 256,
            chat: false,
            inline: false,
            flags: SampleFlags::default(),
        }
    }
}

/// Reads a local image for `--custom-ensure-client-side-data` (a closure in tests).
pub trait Files {
    fn read(&self, path: &str) -> Result<Vec<u8>, String>;
}

/// vLLM's `process_image` for a string: the URL to send.
pub fn image_url(reference: &str, inline: bool, files: &impl Files) -> Result<String, String> {
    if reference.starts_with("data:image/") {
        return Ok(reference.to_string());
    }
    let remote = reference.starts_with("http://") || reference.starts_with("https://");
    let url = if remote || reference.starts_with("file://") {
        reference.to_string()
    } else {
        format!("file://{reference}")
    };
    if !inline {
        return Ok(url);
    }
    if remote {
        return Err(format!(
            "cannot fetch {url} to send it inline: a plugin has no network (download it next \
             to the dataset file and refer to the local copy)"
        ));
    }
    let path = &url["file://".len()..];
    let bytes = files.read(path)?;
    let mime = image_mime(&bytes).ok_or_else(|| {
        format!("{path} is not an image bench can send (JPEG, PNG, GIF, WebP, BMP or TIFF)")
    })?;
    Ok(data_url(mime, &bytes))
}

/// The sampler: the SDK's [`Picker`] over the rows.
pub struct Sampler {
    picker: Picker<Row>,
    params: Params,
    name: String,
    total: usize,
}

impl Sampler {
    pub fn new(rows: Vec<Row>, seed: u64, num_requests: usize, params: Params, name: &str) -> Self {
        let total = if params.flags.no_oversample {
            rows.len().min(num_requests)
        } else if rows.is_empty() {
            0
        } else {
            num_requests
        };
        Sampler {
            picker: Picker::new(rows, seed, num_requests, params.flags),
            params,
            name: name.to_string(),
            total,
        }
    }

    /// How many requests the source makes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The next (up to) `max` requests: one per row, in the picker's order.
    pub fn next_batch(
        &mut self,
        tok: &impl TokenCounter,
        files: &impl Files,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let Sampler {
            picker,
            params,
            name,
            ..
        } = self;
        picker.next_batch(
            max,
            |rows, want, out| {
                let rows = &rows[..want.min(rows.len())];
                let mut texts = Vec::with_capacity(rows.len());
                let mut contents = Vec::with_capacity(rows.len());
                for row in rows {
                    let (line, parts) = match row {
                        Row::Files {
                            line,
                            prompt,
                            images,
                        } => {
                            let mut parts = vec![Part::Text(prompt.clone())];
                            parts.extend(images.iter().cloned().map(Part::Image));
                            (*line, parts)
                        }
                        Row::Content { line, parts } => (*line, parts.clone()),
                    };
                    let mut text = String::new();
                    let mut content = Vec::with_capacity(parts.len());
                    for part in parts {
                        match part {
                            Part::Text(t) => {
                                text.push_str(&t);
                                content.push(ContentPart::Text(t));
                            }
                            Part::Image(reference) => {
                                let url =
                                    image_url(&reference, params.inline, files).map_err(|why| {
                                        PluginError::InvalidInput(format!("{name}:{line}: {why}"))
                                    })?;
                                content.push(ContentPart::ImageUrl(url));
                            }
                        }
                    }
                    texts.push(text);
                    contents.push((row, content));
                }
                let lens = tok.token_counts(&texts)?;
                for ((row, mut content), len) in contents.into_iter().zip(lens) {
                    let prompt_len = u32::try_from(len).unwrap_or(u32::MAX);
                    let mut spec = RequestSpec::text(String::new(), prompt_len, params.output_len);
                    match row {
                        // vLLM's legacy lines: the text as the prompt, the images beside
                        // it, or all in one chat message.
                        Row::Files { .. } if !params.chat => {
                            let text = match content.remove(0) {
                                ContentPart::Text(t) => t,
                                _ => unreachable!("the prompt comes first"),
                            };
                            spec.prompt = Prompt::Text(text);
                            spec.multimodal = content;
                        }
                        // Content lines are a user message's content either way.
                        _ => {
                            spec.prompt = Prompt::Chat(vec![ChatMessage {
                                role: "user".into(),
                                content,
                            }]);
                        }
                    }
                    out.push(spec);
                }
                Ok(rows.len())
            },
            || PluginError::InvalidInput(format!("{name}: no lines to sample from")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::media::{data_url_bytes, jpeg};
    use bench_sdk::rng::Random;

    /// Characters as tokens.
    struct Chars;

    impl TokenCounter for Chars {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.chars().count()).collect())
        }
    }

    /// One JPEG at "cat.jpg".
    struct OneFile;

    impl Files for OneFile {
        fn read(&self, path: &str) -> Result<Vec<u8>, String> {
            match path {
                "cat.jpg" => Ok(jpeg(2, 3, &[7; 18]).unwrap()),
                _ => Err(format!("no file {path}")),
            }
        }
    }

    const FILE: &str = r#"{"prompt": "one", "image_files": ["cat.jpg"]}
{"prompt": "two", "image_files": ["http://x/a.png", "data:image/png;base64,AAAA"]}

{"content": [{"type": "text", "text": "Compare "}, {"type": "image", "image": "cat.jpg"}, {"type": "text", "text": " and "}, {"type": "image_url", "image_url": {"url": "file:///abs/b.png", "detail": "low"}}]}
"#;

    fn drain(p: Params, n: usize, seed: u64) -> Vec<RequestSpec> {
        let rows = parse(FILE, "d.jsonl").unwrap();
        let mut sampler = Sampler::new(rows, seed, n, p, "d.jsonl");
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&Chars, &OneFile, 2).unwrap();
            if got.is_empty() {
                break;
            }
            all.extend(got);
        }
        assert_eq!(all.len(), sampler.total());
        all
    }

    #[test]
    fn lines_become_prompts_with_image_references_as_vllm_sends_them() {
        let p = Params {
            flags: SampleFlags {
                disable_shuffle: true,
                no_oversample: false,
            },
            ..Params::default()
        };
        let all = drain(p, 5, 0);
        assert_eq!(all.len(), 5);
        let Prompt::Text(t) = &all[0].prompt else {
            panic!("{:?}", all[0].prompt)
        };
        assert_eq!((t.as_str(), all[0].prompt_len), ("one", 3));
        assert!(
            matches!(&all[0].multimodal[..], [ContentPart::ImageUrl(u)] if u == "file://cat.jpg")
        );
        assert!(
            matches!(&all[1].multimodal[..], [ContentPart::ImageUrl(a), ContentPart::ImageUrl(b)]
            if a == "http://x/a.png" && b == "data:image/png;base64,AAAA")
        );
        // Content lines: a chat message; the prompt length counts the texts only.
        let Prompt::Chat(m) = &all[2].prompt else {
            panic!("{:?}", all[2].prompt)
        };
        assert_eq!(all[2].prompt_len, "Compare  and ".len() as u32);
        assert_eq!(m[0].content.len(), 4);
        assert!(matches!(&m[0].content[3], ContentPart::ImageUrl(u) if u == "file:///abs/b.png"));
        assert_eq!(all[2].expected_output_len, 256);
        // Oversampled past the three lines with a fresh random.seed(0).
        let mut rng = Random::new(0);
        let picks: Vec<u32> = (0..2)
            .map(|_| *rng.choice(&[3u32, 3, 13]).unwrap())
            .collect();
        let got: Vec<u32> = all[3..].iter().map(|s| s.prompt_len).collect();
        assert_eq!(got, picks);
    }

    #[test]
    fn client_side_data_inlines_local_files_and_refuses_remote_ones() {
        let url = image_url("cat.jpg", true, &OneFile).unwrap();
        let (mime, bytes) = data_url_bytes(&url).unwrap();
        assert_eq!(
            (mime.as_str(), bytes),
            ("image/jpeg", OneFile.read("cat.jpg").unwrap())
        );
        assert_eq!(image_url("file://cat.jpg", true, &OneFile).unwrap(), url);
        assert!(
            image_url("http://x/a.png", true, &OneFile)
                .unwrap_err()
                .contains("no network")
        );
        assert!(
            image_url("dog.png", true, &OneFile)
                .unwrap_err()
                .contains("no file dog.png")
        );
        let p = Params {
            inline: true,
            chat: true,
            flags: SampleFlags {
                disable_shuffle: true,
                no_oversample: true,
            },
            ..Params::default()
        };
        let rows = parse(FILE, "d.jsonl").unwrap();
        let mut sampler = Sampler::new(rows, 0, 1, p, "d.jsonl");
        let got = sampler.next_batch(&Chars, &OneFile, 5).unwrap();
        let Prompt::Chat(m) = &got[0].prompt else {
            panic!("{:?}", got[0].prompt)
        };
        assert!(got[0].multimodal.is_empty());
        assert!(
            matches!(&m[0].content[1], ContentPart::ImageUrl(u) if u.starts_with("data:image/jpeg;base64,"))
        );
        // A remote image on the second line fails, naming file and line.
        let rows = parse(FILE, "d.jsonl").unwrap();
        let mut sampler = Sampler::new(rows, 0, 2, p_inline(), "d.jsonl");
        let err = sampler.next_batch(&Chars, &OneFile, 5).unwrap_err();
        assert!(
            matches!(&err, PluginError::InvalidInput(m) if m.starts_with("d.jsonl:2: cannot fetch")),
            "{err}"
        );
    }

    fn p_inline() -> Params {
        Params {
            inline: true,
            flags: SampleFlags {
                disable_shuffle: true,
                no_oversample: true,
            },
            ..Params::default()
        }
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        for (text, needle) in [
            ("{\"prompt\": \"a\"}", "d.jsonl:1: a line needs"),
            (
                "\n{\"prompt\": 1, \"image_files\": [\"x\"]}",
                "d.jsonl:2: \"prompt\" must be",
            ),
            ("{\"prompt\": \"a\", \"image_files\": []}", "non-empty list"),
            ("{\"content\": []}", "at least one part"),
            (
                "{\"content\": [{\"type\": \"audio\"}]}",
                "found Some(\"audio\")",
            ),
            (
                "{\"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}",
                "image_url.url",
            ),
            ("[1]", "expected a JSON object"),
            ("{\"prompt\": ", "d.jsonl:1: EOF"),
        ] {
            match parse(text, "d.jsonl") {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}")
                }
                other => panic!("expected an error with {needle:?}, got {other:?}"),
            }
        }
    }
}
