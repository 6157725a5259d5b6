//! The run's tokenizer, loaded natively with Hugging Face's `tokenizers` crate.
//!
//! Datasets measure prompt lengths with it (through the plugin `tokenizer` import) and the
//! metrics count output tokens with it when a server reports no usage, so it must agree
//! with what `transformers.AutoTokenizer` gives vLLM: same ids, same `vocab_size`, same
//! `all_special_ids`, same chat template rendering.
//!
//! Byte-level BPE tokenizers (GPT-2, Llama 3, Qwen, ...) encode and decode through
//! [`byte_level`], an exact shortcut several times faster than the `tokenizers` pipeline;
//! other tokenizers, and the rare text the shortcut does not cover, go through
//! `tokenizers`. Batches are spread over every core.
//!
//! Nothing is ever downloaded: a tokenizer is a `tokenizer.json` file, a directory holding
//! one, or a Hugging Face hub id that is already in the local Hugging Face cache.

mod byte_level;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value as Json;

/// The name under which the chat template is registered in the template environment.
const TEMPLATE_NAME: &str = "chat_template";

/// The special-token attributes of a Hugging Face tokenizer, in the order
/// `transformers` walks them for `all_special_ids`.
const SPECIAL_TOKEN_ATTRIBUTES: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// A loaded tokenizer plus what `tokenizer_config.json` adds to it (special tokens, chat
/// template). Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// The fast path, for tokenizers whose pipeline it reproduces.
    byte_level: Option<byte_level::ByteLevel>,
    /// Where `tokenizer.json` was found, for messages.
    source: PathBuf,
    /// Special-token attribute values (`bos_token`, ...), passed to chat templates.
    special_tokens: Vec<(String, String)>,
    /// `additional_special_tokens`, in file order.
    additional_special_tokens: Vec<String>,
    /// HF `all_special_ids`, computed once.
    special_ids: Vec<u32>,
    /// The chat template, compiled into its own environment; `None` when the tokenizer
    /// has none (GPT-2, for example).
    chat_template: Option<minijinja::Environment<'static>>,
    /// Further template variables for every render (`--chat-template-kwargs`, vLLM's
    /// `apply_chat_template(..., **chat_template_kwargs)`, such as `enable_thinking`).
    template_kwargs: serde_json::Map<String, Json>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("source", &self.source)
            .field("vocab_size", &self.vocab_size(true))
            .field("has_chat_template", &self.chat_template.is_some())
            .field("byte_level", &self.byte_level)
            .finish()
    }
}

/// One message for [`Tokenizer::apply_chat_template`], in the shape chat templates
/// expect: `content` is a string for text-only messages and a list of typed parts
/// (`{"type": "text", "text": ...}`, `{"type": "image_url", ...}`) otherwise.
pub type TemplateMessage = Json;

impl Tokenizer {
    /// Loads a tokenizer from `spec`: a `tokenizer.json` path, a directory containing one,
    /// or a Hugging Face hub id present in the local cache that the environment names
    /// ([`hub_cache_roots_from_env`]).
    pub fn load(spec: &str) -> Result<Tokenizer> {
        Self::load_from(spec, &hub_cache_roots_from_env())
    }

    /// [`Tokenizer::load`] with the Hugging Face cache directories to search for a hub id
    /// given, most specific first.
    pub fn load_from(spec: &str, hub_cache: &[PathBuf]) -> Result<Tokenizer> {
        let path = resolve(spec, hub_cache)?;
        Self::from_file(&path).with_context(|| format!("loading tokenizer '{spec}'"))
    }

    /// Loads `tokenizer.json` at `path`, reading `tokenizer_config.json`,
    /// `special_tokens_map.json` and `chat_template.jinja` from the same directory when
    /// they exist.
    pub fn from_file(path: &Path) -> Result<Tokenizer> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("reading {}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let config = read_json_if_exists(&dir.join("tokenizer_config.json"))?;
        let special_map = read_json_if_exists(&dir.join("special_tokens_map.json"))?;
        let template_file = dir.join("chat_template.jinja");
        let template_file = template_file.is_file().then_some(template_file);
        Self::from_parts(inner, path, config, special_map, template_file.as_deref())
    }

    /// A tokenizer that is not a `tokenizer.json` on disk: the native engine's, built from
    /// a GGUF file's vocabulary, with `config` standing in for `tokenizer_config.json`
    /// (its special tokens and `chat_template`). `source` names it in messages.
    pub fn from_tokenizer(
        inner: tokenizers::Tokenizer,
        source: &Path,
        config: Option<Json>,
    ) -> Result<Tokenizer> {
        Self::from_parts(inner, source, config, None, None)
    }

    fn from_parts(
        inner: tokenizers::Tokenizer,
        path: &Path,
        config: Option<Json>,
        special_map: Option<Json>,
        template_file: Option<&Path>,
    ) -> Result<Tokenizer> {
        let dir = path.parent().unwrap_or(Path::new("."));

        // tokenizer_config.json wins over special_tokens_map.json, as in transformers.
        let lookup = |key: &str| -> Option<Json> {
            config
                .as_ref()
                .and_then(|c| c.get(key))
                .filter(|v| !v.is_null())
                .or_else(|| {
                    special_map
                        .as_ref()
                        .and_then(|m| m.get(key))
                        .filter(|v| !v.is_null())
                })
                .cloned()
        };
        let special_tokens: Vec<(String, String)> = SPECIAL_TOKEN_ATTRIBUTES
            .iter()
            .filter_map(|attr| {
                lookup(attr)
                    .and_then(|v| token_content(&v))
                    .map(|t| (attr.to_string(), t))
            })
            .collect();
        let additional_special_tokens: Vec<String> = match lookup("additional_special_tokens") {
            Some(Json::Array(items)) => items.iter().filter_map(token_content).collect(),
            _ => Vec::new(),
        };

        let mut special_ids = Vec::new();
        for token in special_tokens
            .iter()
            .map(|(_, t)| t)
            .chain(additional_special_tokens.iter())
        {
            // transformers maps a token missing from the vocabulary to the unk id (or
            // None); a token that is not in the vocabulary cannot be produced, so skip it.
            if let Some(id) = inner.token_to_id(token)
                && !special_ids.contains(&id)
            {
                special_ids.push(id);
            }
        }

        let template_source = match config.as_ref().and_then(|c| c.get("chat_template")) {
            Some(value) => Some(
                select_template(value)
                    .with_context(|| format!("chat_template in {}", dir.display()))?,
            ),
            None => match template_file {
                Some(file) => Some(
                    std::fs::read_to_string(file)
                        .with_context(|| format!("reading {}", file.display()))?,
                ),
                None => None,
            },
        };
        let chat_template = template_source
            .map(|source| {
                template_environment(source)
                    .with_context(|| format!("compiling the chat template of {}", path.display()))
            })
            .transpose()?;

        Ok(Tokenizer {
            byte_level: byte_level::ByteLevel::new(&inner),
            inner,
            source: path.to_path_buf(),
            special_tokens,
            additional_special_tokens,
            special_ids,
            chat_template,
            template_kwargs: serde_json::Map::new(),
        })
    }

    /// Gives every chat-template render the variables `kwargs` too, as vLLM's datasets
    /// pass `--chat-template-kwargs` to `apply_chat_template` when they render prompts on
    /// the client. They win over the special tokens of the same name.
    pub fn set_template_kwargs(&mut self, kwargs: serde_json::Map<String, Json>) {
        self.template_kwargs = kwargs;
    }

    /// Where `tokenizer.json` was loaded from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Token ids of `text`; `add_special_tokens` applies the post-processor (BOS for Llama).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        if let Some(ids) = self
            .byte_level
            .as_ref()
            .and_then(|b| b.encode(&self.inner, text, add_special_tokens))
        {
            return Ok(ids);
        }
        let encoding = self
            .inner
            .encode_fast(text, add_special_tokens)
            .map_err(|e| anyhow!("encoding failed: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Token ids of many texts at once, encoded in parallel on every core.
    pub fn encode_batch(
        &self,
        texts: &[String],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        use rayon::prelude::*;
        texts
            .par_iter()
            .map(|text| self.encode(text, add_special_tokens))
            .collect()
    }

    /// The text of `ids`.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        if let Some(text) = self
            .byte_level
            .as_ref()
            .and_then(|b| b.decode(ids, skip_special_tokens))
        {
            return Ok(text);
        }
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| anyhow!("decoding failed: {e}"))
    }

    /// Hugging Face's `tokenizer.vocab_size` (`false`: the model's vocabulary only) or
    /// `len(tokenizer)` (`true`: with added tokens).
    pub fn vocab_size(&self, with_added_tokens: bool) -> u32 {
        u32::try_from(self.inner.get_vocab_size(with_added_tokens)).unwrap_or(u32::MAX)
    }

    /// Hugging Face's `all_special_ids`: the ids of bos/eos/unk/sep/pad/cls/mask and the
    /// additional special tokens, in that order, without repeats.
    pub fn special_token_ids(&self) -> &[u32] {
        &self.special_ids
    }

    /// The number of tokens in `text` without special tokens: how output tokens are
    /// counted when a server reports no usage (as vLLM does).
    pub fn count_tokens(&self, text: &str) -> Result<usize> {
        Ok(self.encode(text, false)?.len())
    }

    /// Whether the tokenizer carries a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.chat_template.is_some()
    }

    /// Renders the chat template for `messages` as `transformers`'
    /// `apply_chat_template(..., tokenize=False)` does: the special tokens are in scope,
    /// `add_generation_prompt` appends the assistant header.
    pub fn apply_chat_template(
        &self,
        messages: &[TemplateMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        self.apply_chat_template_with_tools(messages, None, add_generation_prompt)
    }

    /// [`Tokenizer::apply_chat_template`] with `tools` (OpenAI tool definitions, a JSON
    /// array) in the template's scope, as `apply_chat_template(..., tools=tools)` renders
    /// them; `None` renders without (the template sees `tools` as none).
    pub fn apply_chat_template_with_tools(
        &self,
        messages: &[TemplateMessage],
        tools: Option<&[Json]>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let Some(env) = &self.chat_template else {
            bail!(
                "the tokenizer at {} has no chat template (tokenizer_config.json has no `chat_template`)",
                self.source.display()
            );
        };
        let template = env.get_template(TEMPLATE_NAME)?;
        let mut ctx = serde_json::Map::new();
        ctx.insert("messages".into(), Json::Array(messages.to_vec()));
        ctx.insert(
            "add_generation_prompt".into(),
            Json::Bool(add_generation_prompt),
        );
        ctx.insert(
            "tools".into(),
            tools.map_or(Json::Null, |tools| Json::Array(tools.to_vec())),
        );
        ctx.insert("documents".into(), Json::Null);
        for (attr, token) in &self.special_tokens {
            ctx.insert(attr.clone(), Json::String(token.clone()));
        }
        ctx.insert(
            "additional_special_tokens".into(),
            Json::Array(
                self.additional_special_tokens
                    .iter()
                    .cloned()
                    .map(Json::String)
                    .collect(),
            ),
        );
        for (key, value) in &self.template_kwargs {
            ctx.insert(key.clone(), value.clone());
        }
        template
            .render(minijinja::Value::from_serialize(&ctx))
            .map_err(|e| anyhow!("rendering the chat template: {e:#}"))
    }
}

/// Finds `tokenizer.json` for `spec` (file, directory or cached hub id).
fn resolve(spec: &str, roots: &[PathBuf]) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if path.is_dir() {
        let file = path.join("tokenizer.json");
        if file.is_file() {
            return Ok(file);
        }
        bail!(
            "tokenizer directory {} has no tokenizer.json (only fast tokenizers in tokenizer.json form are supported)",
            path.display()
        );
    }
    let looks_like_hub_id = !spec.is_empty()
        && !spec.starts_with(['.', '/', '~'])
        && spec.split('/').count() <= 2
        && spec.split('/').all(|part| !part.is_empty());
    if !looks_like_hub_id {
        bail!(
            "tokenizer '{spec}' does not exist (expected a tokenizer.json file or a directory containing one)"
        );
    }
    for root in roots {
        if let Some(file) = find_in_hub_cache(root, spec) {
            return Ok(file);
        }
    }
    let searched = roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    bail!(
        "tokenizer '{spec}' is not a local file or directory and is not in the Hugging Face cache \
         (searched: {searched}). bench never downloads anything: fetch it first (e.g. \
         `huggingface-cli download {spec} tokenizer.json tokenizer_config.json`) or point at a \
         local copy with --tokenizer /path/to/dir"
    )
}

/// The Hugging Face hub cache directories the environment names, most specific first:
/// `$HF_HUB_CACHE`, `$HUGGINGFACE_HUB_CACHE`, `$HF_HOME/hub`, `~/.cache/huggingface/hub`.
pub fn hub_cache_roots_from_env() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("HUGGINGFACE_HUB_CACHE").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("HF_HOME").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(dir).join("hub"));
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(home).join(".cache/huggingface/hub"));
    }
    roots.dedup();
    roots
}

/// `models--org--name/snapshots/<rev>/tokenizer.json` under `root`, preferring the
/// revision that `refs/main` names, then any snapshot that has the file (in name order,
/// so the choice is stable).
fn find_in_hub_cache(root: &Path, repo_id: &str) -> Option<PathBuf> {
    let repo_dir = root.join(format!("models--{}", repo_id.replace('/', "--")));
    let snapshots = repo_dir.join("snapshots");
    if let Ok(rev) = std::fs::read_to_string(repo_dir.join("refs/main")) {
        let file = snapshots.join(rev.trim()).join("tokenizer.json");
        if file.is_file() {
            return Some(file);
        }
    }
    let mut revisions: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    revisions.sort();
    revisions
        .into_iter()
        .map(|rev| rev.join("tokenizer.json"))
        .find(|file| file.is_file())
}

fn read_json_if_exists(path: &Path) -> Result<Option<Json>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes)
                .with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The text of a special token given as a string or as a serialized `AddedToken`.
fn token_content(value: &Json) -> Option<String> {
    match value {
        Json::String(s) => Some(s.clone()),
        Json::Object(map) => map.get("content").and_then(Json::as_str).map(str::to_owned),
        _ => None,
    }
}

/// `chat_template` is a string or a list of `{name, template}`; transformers uses the one
/// named `default`.
fn select_template(value: &Json) -> Result<String> {
    match value {
        Json::String(s) => Ok(s.clone()),
        Json::Array(items) => items
            .iter()
            .find(|item| item.get("name").and_then(Json::as_str) == Some("default"))
            .and_then(|item| item.get("template").and_then(Json::as_str))
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("a list of templates without one named 'default'")),
        other => bail!("expected a string or a list, found {other}"),
    }
}

/// A template environment configured like transformers' (jinja2 sandbox with
/// `trim_blocks`, `lstrip_blocks`, `raise_exception`, `strftime_now` and its `tojson`),
/// with Python string/dict/list methods (`.strip()`, `.items()`, ...) from pycompat.
fn template_environment(source: String) -> Result<minijinja::Environment<'static>> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<minijinja::Value, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                message,
            ))
        },
    );
    env.add_function("strftime_now", |format: String| -> String {
        chrono::Local::now().format(&format).to_string()
    });
    env.add_filter("tojson", python_tojson);
    env.add_template_owned(TEMPLATE_NAME, source)?;
    Ok(env)
}

/// transformers' `tojson`: `json.dumps(x, ensure_ascii=False, indent=indent)`, which
/// separates with `", "` and `": "` when not indenting (minijinja's own filter is
/// compact and HTML-escapes, which would change prompts).
fn python_tojson(
    value: minijinja::Value,
    kwargs: minijinja::value::Kwargs,
) -> Result<String, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value).map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("tojson: {e}"),
        )
    })?;
    let mut out = String::new();
    write_python_json(&mut out, &json, indent, sort_keys.unwrap_or(false), 0);
    Ok(out)
}

fn write_python_json(
    out: &mut String,
    value: &Json,
    indent: Option<usize>,
    sort_keys: bool,
    depth: usize,
) {
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', width * depth));
        }
    };
    let item_separator = if indent.is_some() { "," } else { ", " };
    match value {
        Json::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_separator);
                }
                newline(out, depth + 1);
                write_python_json(out, item, indent, sort_keys, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Json::Object(map) if !map.is_empty() => {
            let mut entries: Vec<(&String, &Json)> = map.iter().collect();
            if sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item_separator);
                }
                newline(out, depth + 1);
                let _ = write!(out, "{}: ", Json::String(key.clone()));
                write_python_json(out, item, indent, sort_keys, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENTENCE: &str = "Hello world! The quick brown fox jumps over the lazy dog.";

    fn data_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/tokenizers")
    }

    fn load(name: &str) -> Tokenizer {
        Tokenizer::load(data_dir().join(name).to_str().unwrap()).unwrap()
    }

    #[test]
    fn gpt2_matches_reference_ids_and_sizes() {
        let tok = load("gpt2");
        assert_eq!(
            tok.encode(SENTENCE, true).unwrap(),
            [
                15496, 995, 0, 383, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13
            ]
        );
        assert_eq!(tok.vocab_size(false), 50257);
        assert_eq!(tok.vocab_size(true), 50257);
        assert_eq!(tok.special_token_ids(), [50256]);
        assert!(!tok.has_chat_template());
        assert_eq!(
            tok.decode(&tok.encode(SENTENCE, false).unwrap(), true)
                .unwrap(),
            SENTENCE
        );
        assert_eq!(tok.count_tokens(SENTENCE).unwrap(), 13);
    }

    #[test]
    fn qwen3_matches_reference_ids_and_sizes() {
        let tok = load("qwen3/tokenizer.json");
        assert_eq!(
            tok.encode(SENTENCE, true).unwrap(),
            [
                9707, 1879, 0, 576, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13
            ]
        );
        // `vocab_size` excludes the 26 added specials; `len(tokenizer)` includes them.
        assert_eq!(tok.vocab_size(false), 151643);
        assert_eq!(tok.vocab_size(true), 151669);
        // eos <|im_end|>, pad <|endoftext|>, then the additional specials without repeats.
        let mut expected = vec![151645, 151643, 151644];
        expected.extend(151646..=151656);
        assert_eq!(tok.special_token_ids(), expected);
        let with_special = tok.encode("<|im_start|>user", false).unwrap();
        assert_eq!(with_special[0], 151644);
        assert_eq!(tok.decode(&with_special, true).unwrap(), "user");
    }

    #[test]
    fn batch_encoding_equals_single_encoding() {
        let tok = load("qwen3");
        let texts = vec![
            SENTENCE.to_string(),
            String::new(),
            "  spaces\tand\nlines ".to_string(),
        ];
        let batch = tok.encode_batch(&texts, false).unwrap();
        for (text, ids) in texts.iter().zip(&batch) {
            assert_eq!(&tok.encode(text, false).unwrap(), ids);
        }
    }

    /// The llama.cpp reference tokenizations (47 strings each, without special tokens).
    fn check_llama_cpp_vectors(tokenizer: &str, vocab: &str) {
        let tok = load(tokenizer);
        let dir = data_dir().join("llama.cpp-vocab-tests");
        let inputs =
            std::fs::read_to_string(dir.join(format!("ggml-vocab-{vocab}.gguf.inp"))).unwrap();
        let outputs =
            std::fs::read_to_string(dir.join(format!("ggml-vocab-{vocab}.gguf.out"))).unwrap();
        let mut inputs: Vec<&str> = inputs.split("\n__ggml_vocab_test__\n").collect();
        if inputs.last() == Some(&"") {
            inputs.pop();
        }
        let outputs: Vec<&str> = outputs
            .strip_suffix('\n')
            .unwrap_or(&outputs)
            .split('\n')
            .collect();
        assert_eq!(inputs.len(), outputs.len());
        assert!(inputs.len() >= 40, "only {} vectors", inputs.len());
        for (input, expected) in inputs.iter().zip(outputs) {
            let expected: Vec<u32> = expected
                .split_whitespace()
                .map(|id| id.parse().unwrap())
                .collect();
            assert_eq!(
                tok.encode(input, false).unwrap(),
                expected,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn gpt2_reproduces_llama_cpp_vectors() {
        check_llama_cpp_vectors("gpt2", "gpt-2");
    }

    #[test]
    fn qwen3_reproduces_llama_cpp_qwen2_vectors() {
        check_llama_cpp_vectors("qwen3", "qwen2");
    }

    #[test]
    fn qwen3_chat_template_renders_like_transformers() {
        let tok = load("qwen3");
        let messages = vec![
            serde_json::json!({"role": "system", "content": "You are terse."}),
            serde_json::json!({"role": "user", "content": "Hi there"}),
        ];
        assert_eq!(
            tok.apply_chat_template(&messages, true).unwrap(),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            tok.apply_chat_template(&messages[1..], false).unwrap(),
            "<|im_start|>user\nHi there<|im_end|>\n"
        );
    }

    /// Qwen3's template reads `enable_thinking`: `--chat-template-kwargs
    /// '{"enable_thinking": false}'` gives the empty think block transformers renders.
    #[test]
    fn template_kwargs_reach_the_template() {
        let mut tok = load("qwen3");
        let messages = vec![serde_json::json!({"role": "user", "content": "Hi"})];
        let plain = tok.apply_chat_template(&messages, true).unwrap();
        assert!(plain.ends_with("<|im_start|>assistant\n"), "{plain:?}");
        let serde_json::Value::Object(kwargs) = serde_json::json!({"enable_thinking": false})
        else {
            unreachable!()
        };
        tok.set_template_kwargs(kwargs);
        assert_eq!(
            tok.apply_chat_template(&messages, true).unwrap(),
            format!("{plain}<think>\n\n</think>\n\n")
        );
    }

    #[test]
    fn chat_template_errors_are_reported() {
        let tok = load("gpt2");
        let err = tok.apply_chat_template(&[], true).unwrap_err().to_string();
        assert!(err.contains("no chat template"), "{err}");

        let env = template_environment("{{ raise_exception('bad role') }}".into()).unwrap();
        let err = env
            .get_template(TEMPLATE_NAME)
            .unwrap()
            .render(())
            .unwrap_err();
        assert!(err.to_string().contains("bad role"), "{err}");
    }

    #[test]
    fn tojson_follows_python_json_dumps() {
        let env =
            template_environment(r#"{{ x | tojson }}|{{ x | tojson(indent=2) }}"#.into()).unwrap();
        let out = env
            .get_template(TEMPLATE_NAME)
            .unwrap()
            .render(minijinja::context! { x => serde_json::json!({"a": [1, "<b>"], "c": {}}) })
            .unwrap();
        assert_eq!(
            out,
            "{\"a\": [1, \"<b>\"], \"c\": {}}|{\n  \"a\": [\n    1,\n    \"<b>\"\n  ],\n  \"c\": {}\n}"
        );
    }

    #[test]
    fn hub_ids_resolve_from_the_local_cache_only() {
        let cache = tempfile::tempdir().unwrap();
        let repo = cache.path().join("models--acme--tiny");
        let old = repo.join("snapshots/aaa");
        let main = repo.join("snapshots/bbb");
        for dir in [&old, &main] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
        }
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "bbb\n").unwrap();
        assert_eq!(
            find_in_hub_cache(cache.path(), "acme/tiny"),
            Some(main.join("tokenizer.json"))
        );
        std::fs::remove_file(repo.join("refs/main")).unwrap();
        assert_eq!(
            find_in_hub_cache(cache.path(), "acme/tiny"),
            Some(old.join("tokenizer.json"))
        );
        assert_eq!(find_in_hub_cache(cache.path(), "acme/other"), None);

        let err = format!(
            "{:#}",
            Tokenizer::load("no-such-org/no-such-model-xyz").unwrap_err()
        );
        assert!(err.contains("never downloads"), "{err}");
        assert!(err.contains("--tokenizer /path/to/dir"), "{err}");
        let err = format!(
            "{:#}",
            Tokenizer::load("./missing/tokenizer.json").unwrap_err()
        );
        assert!(err.contains("does not exist"), "{err}");
    }
}
