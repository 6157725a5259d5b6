//! A lean, exact encoder and decoder for byte-level BPE tokenizers (GPT-2, Llama 3 and
//! Qwen checked): the same ids and texts as the `tokenizers` crate, several times faster
//! (GPT-2, 1,024-token `random` prompts, one core: encoding 3.4 ms -> 0.4 ms a prompt,
//! decoding 0.28 ms -> 0.03 ms; `scripts/perf.sh`'s `prepare-*` rows measure the whole
//! preparation).
//!
//! Why hand-written: preparing vLLM's default workload (`random`, 1,024-token prompts)
//! is two decode/encode round trips per prompt, and `tokenizers`' `encode_fast` spends
//! most of its time not tokenizing but keeping track of alignments (`NormalizedString`
//! transforms, offsets, per-token strings: measured, 60% of the time in `malloc`, `free`,
//! `memmove` and `transform_range` on GPT-2). Here a text takes the same steps with none of
//! that bookkeeping:
//!
//! 1. the pre-tokenizer's regex (the same pattern, the same engine: Oniguruma, as the
//!    `tokenizers` build we use) splits the text into pieces, matches and the gaps between
//!    them kept apart (`Isolated`);
//! 2. each piece's ids come from a cache keyed by the piece's bytes; a piece not seen yet
//!    is mapped to byte-level characters and tokenized by the tokenizer's own BPE model.
//!
//! Exactness is by construction where it is cheap to be sure and by refusal elsewhere:
//! [`ByteLevel::new`] accepts only tokenizers whose pipeline is exactly that (no
//! normalizer or NFC, a `ByteLevel` pre-tokenizer without a prefix space, alone or after
//! one `Split` regex, a BPE model without dropout, no truncation or padding), and
//! [`ByteLevel::encode`] returns `None`, for the caller to use `tokenizers`, on any text
//! the shortcut does not cover: one containing an added token whose options change how it
//! is split out before pre-tokenization (`lstrip`, `rstrip`, `single_word`, or a mix of
//! normalized and raw-text tokens); plain added tokens (the special tokens of chat
//! templates) are split out here as `tokenizers` does. A text that may not be in NFC
//! already is normalized by the tokenizer's own normalizer first.
//! Decoding keeps a table of each id's bytes, as the `ByteLevel` decoder computes them.
//! The tests compare both directions against `tokenizers` on random and adversarial texts
//! for every tokenizer in `tests/data/tokenizers`.

use std::collections::HashMap;
use std::sync::RwLock;

use aho_corasick::AhoCorasick;
use serde_json::{Value as Json, json};
use tokenizers::{Model, Normalizer};

/// Pieces longer than this (in bytes) are not cached (`tokenizers` caches words up to 256
/// characters); their ids are computed every time.
const MAX_CACHED_PIECE: usize = 256;

/// The cache stops growing at this many pieces (about 50 MB at most). The words of a
/// vocabulary number in the tens of thousands, so real workloads stay well below.
const MAX_CACHED_PIECES: usize = 1 << 19;

/// `tokenizers`' `ByteLevel` regex, used when the pre-tokenizer splits on its own.
const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

type Cache = HashMap<Box<[u8]>, Box<[u32]>, foldhash::fast::RandomState>;

/// The shortcut for one tokenizer (built by [`ByteLevel::new`]).
pub(crate) struct ByteLevel {
    /// Splits a text into pieces; `None` when the pre-tokenizer does not split.
    split: Option<onig::Regex>,
    /// The normalizer is NFC: texts that may not be in NFC already are normalized first.
    nfc: bool,
    /// Every added token's content: a text containing one goes the long way, unless
    /// `split_added` can split it out.
    added: Option<AhoCorasick>,
    /// Added tokens split out of a text as `tokenizers` does, for tokenizers whose added
    /// tokens take no options that change the split (see [`SplitAdded::new`]).
    split_added: Option<SplitAdded>,
    /// The byte-level character of each byte.
    byte_char: [char; 256],
    /// What `add_special_tokens` puts before and after a text's ids; `None` when the
    /// post-processor is not known to add the same tokens whatever the text.
    specials: Option<(Vec<u32>, Vec<u32>)>,
    /// Piece bytes to ids.
    cache: RwLock<Cache>,
    /// Per id (`None` for an id without a token); `None` when the decoder is something
    /// else than `ByteLevel`.
    decode: Option<Vec<Option<Decoded>>>,
}

/// The added tokens of a tokenizer, to split them out of a text as `tokenizers`' added
/// vocabulary does: leftmost-longest matches, each replaced by its id, and the text
/// between them normalized and pre-tokenized piece by piece.
struct SplitAdded {
    matcher: AhoCorasick,
    /// The id of each pattern of `matcher`.
    ids: Vec<u32>,
}

impl SplitAdded {
    /// Only when that one pass is exactly what `tokenizers` does: no token strips the
    /// spaces around it or must stand alone as a word (`lstrip`, `rstrip`,
    /// `single_word`), and the tokens are either all matched in the raw text
    /// (`normalized: false`) or all in the normalized text of a tokenizer that has no
    /// normalizer (the same text then). Mixed sets take two passes in `tokenizers`; they
    /// keep going the long way.
    fn new(tokens: &[(u32, &tokenizers::AddedToken)], has_normalizer: bool) -> Option<SplitAdded> {
        let first = tokens.first()?.1;
        let plain = |t: &tokenizers::AddedToken| {
            !t.single_word
                && !t.lstrip
                && !t.rstrip
                && t.normalized == first.normalized
                && !t.content.is_empty()
        };
        if !tokens.iter().all(|(_, t)| plain(t)) || (first.normalized && has_normalizer) {
            return None;
        }
        let matcher = AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(tokens.iter().map(|(_, t)| t.content.as_str()))
            .ok()?;
        Some(SplitAdded {
            matcher,
            ids: tokens.iter().map(|(id, _)| *id).collect(),
        })
    }
}

/// What decoding makes of one id.
struct Decoded {
    /// The bytes the `ByteLevel` decoder makes of the id's token.
    bytes: Box<[u8]>,
    /// Whether the token is a special one (left out by `skip_special_tokens`).
    special: bool,
}

impl std::fmt::Debug for ByteLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteLevel")
            .field("splits", &self.split.is_some())
            .field("nfc", &self.nfc)
            .field("specials", &self.specials)
            .field("decodes", &self.decode.is_some())
            .finish_non_exhaustive()
    }
}

/// The serialized form of a tokenizer component, to recognise its shape.
fn shape<T: serde::Serialize>(component: Option<&T>) -> Json {
    component
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Json::Null)
}

/// The split regex of a pre-tokenizer the shortcut reproduces: `Some(None)` for a
/// `ByteLevel` that does not split, `Some(Some(pattern))` for one that does (its own
/// pattern, or a `Split` before it), `None` for anything else.
fn split_pattern(pre: &Json) -> Option<Option<String>> {
    let byte_level = |p: &Json| -> Option<bool> {
        (p["type"] == "ByteLevel" && p["add_prefix_space"] == false)
            .then(|| p["use_regex"] != false)
    };
    if let Some(use_regex) = byte_level(pre) {
        return Some(use_regex.then(|| GPT2_PATTERN.to_owned()));
    }
    let steps = pre
        .get("pretokenizers")
        .filter(|_| pre["type"] == "Sequence")?
        .as_array()?;
    match steps.as_slice() {
        [split, last]
            if split["type"] == "Split"
                && split["behavior"] == "Isolated"
                && split["invert"] == false
                && byte_level(last) == Some(false) =>
        {
            Some(Some(split["pattern"]["Regex"].as_str()?.to_owned()))
        }
        _ => None,
    }
}

impl ByteLevel {
    /// The shortcut for `tok`, or `None` when its pipeline is not one the shortcut
    /// reproduces exactly.
    pub(crate) fn new(tok: &tokenizers::Tokenizer) -> Option<ByteLevel> {
        if tok.get_truncation().is_some() || tok.get_padding().is_some() {
            return None;
        }
        let nfc = match shape(tok.get_normalizer()) {
            Json::Null => false,
            n if n == json!({"type": "NFC"}) => true,
            _ => return None,
        };
        let pattern = split_pattern(&shape(tok.get_pre_tokenizer()))?;
        let split = match pattern {
            Some(p) => Some(onig::Regex::new(&p).ok()?),
            None => None,
        };
        let model = serde_json::to_value(tok.get_model()).ok()?;
        if model["type"] != "BPE" || !model["dropout"].is_null() {
            return None;
        }

        let added_tokens = tok.get_added_tokens_decoder();
        let contents: Vec<&str> = added_tokens
            .values()
            .map(|t| t.content.as_str())
            .filter(|c| !c.is_empty())
            .collect();
        let added = if contents.is_empty() {
            None
        } else {
            Some(AhoCorasick::new(&contents).ok()?)
        };
        let mut tokens: Vec<(u32, &tokenizers::AddedToken)> =
            added_tokens.iter().map(|(id, t)| (*id, t)).collect();
        tokens.sort_by_key(|(id, _)| *id);
        let split_added = SplitAdded::new(&tokens, nfc);

        let mut byte_char = ['\0'; 256];
        let mut char_byte = HashMap::new();
        for (i, c) in byte_level_chars().into_iter().enumerate() {
            byte_char[i] = c;
            char_byte.insert(c, i as u8);
        }

        let mut shortcut = ByteLevel {
            split,
            nfc,
            added,
            split_added,
            byte_char,
            specials: None,
            cache: RwLock::new(Cache::default()),
            decode: None,
        };
        if shape(tok.get_decoder())["type"] == "ByteLevel" {
            let special: std::collections::HashSet<&str> = added_tokens
                .values()
                .filter(|t| t.special)
                .map(|t| t.content.as_str())
                .collect();
            let size = tok
                .get_vocab_size(true)
                .max(added_tokens.keys().max().map_or(0, |&id| id as usize + 1));
            let table = (0..size as u32)
                .map(|id| {
                    tok.id_to_token(id).map(|token| {
                        // The decoder maps a token's characters back to bytes, or keeps the
                        // token's own bytes when one of its characters is not byte-level.
                        let bytes: Option<Vec<u8>> =
                            token.chars().map(|c| char_byte.get(&c).copied()).collect();
                        let bytes = bytes.unwrap_or_else(|| token.as_bytes().to_vec());
                        Decoded {
                            bytes: bytes.into_boxed_slice(),
                            special: special.contains(token.as_str()),
                        }
                    })
                })
                .collect();
            shortcut.decode = Some(table);
        }
        shortcut.specials = shortcut.learn_specials(tok);
        Some(shortcut)
    }

    /// What `add_special_tokens` adds around a text, when the post-processor is one that
    /// adds fixed tokens (and checked on a few texts).
    fn learn_specials(&self, tok: &tokenizers::Tokenizer) -> Option<(Vec<u32>, Vec<u32>)> {
        let processor = shape(tok.get_post_processor());
        let fixed = |p: &Json| {
            matches!(
                p["type"].as_str(),
                Some("ByteLevel" | "TemplateProcessing" | "BertProcessing" | "RobertaProcessing")
            )
        };
        let known = processor.is_null()
            || fixed(&processor)
            || (processor["type"] == "Sequence"
                && processor["processors"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().all(fixed)));
        if !known {
            return None;
        }
        let with = |text: &str, special: bool| -> Option<Vec<u32>> {
            Some(tok.encode_fast(text, special).ok()?.get_ids().to_vec())
        };
        let probe = with("a", true)?;
        let inner = with("a", false)?;
        let at = probe.windows(inner.len()).position(|w| w == inner)?;
        let (prefix, suffix) = (probe[..at].to_vec(), probe[at + inner.len()..].to_vec());
        for text in ["", "Hello world", " two  spaces\n", "123 ünïcode"] {
            let mut expected = prefix.clone();
            expected.extend(self.encode_pieces(tok.get_model(), text)?);
            expected.extend(&suffix);
            if with(text, true)? != expected {
                return None;
            }
        }
        Some((prefix, suffix))
    }

    /// The ids of `text`, exactly as `tok` (the tokenizer this shortcut was made for)
    /// encodes it, or `None` when the text is one the shortcut leaves to `tokenizers`
    /// (see the module doc).
    pub(crate) fn encode(
        &self,
        tok: &tokenizers::Tokenizer,
        text: &str,
        add_special_tokens: bool,
    ) -> Option<Vec<u32>> {
        let (prefix, suffix) = match (add_special_tokens, &self.specials) {
            (false, _) => (&[][..], &[][..]),
            (true, Some((p, s))) => (&p[..], &s[..]),
            (true, None) => return None,
        };
        let has_added = |text: &str| self.added.as_ref().is_some_and(|a| a.is_match(text));
        if has_added(text) {
            let split = self.split_added.as_ref()?;
            let mut ids = prefix.to_vec();
            let mut at = 0;
            for m in split.matcher.find_iter(text) {
                self.encode_segment(tok, &text[at..m.start()], &mut ids)?;
                ids.push(split.ids[m.pattern().as_usize()]);
                at = m.end();
            }
            self.encode_segment(tok, &text[at..], &mut ids)?;
            ids.extend_from_slice(suffix);
            return Some(ids);
        }
        // Not surely NFC already: normalize the way `tokenizers` does (its own tables),
        // then look for added tokens again, as it does after normalizing.
        let normalized;
        let text = if self.nfc && !is_nfc_quick(text) {
            let mut n = tokenizers::NormalizedString::from(text);
            tok.get_normalizer()?.normalize(&mut n).ok()?;
            normalized = n.get().to_owned();
            if has_added(&normalized) {
                return None;
            }
            normalized.as_str()
        } else {
            text
        };
        let mut ids = Vec::with_capacity(prefix.len() + text.len() / 3 + suffix.len());
        ids.extend_from_slice(prefix);
        ids.extend(self.encode_pieces(tok.get_model(), text)?);
        ids.extend_from_slice(suffix);
        Some(ids)
    }

    /// Appends the ids of a text between two added tokens: normalized on its own (as
    /// `tokenizers` normalizes each part of a split), then its pieces. No added token is
    /// looked for after normalizing: [`SplitAdded`] holds only raw-text tokens, or
    /// normalized ones of a tokenizer without a normalizer.
    fn encode_segment(
        &self,
        tok: &tokenizers::Tokenizer,
        text: &str,
        ids: &mut Vec<u32>,
    ) -> Option<()> {
        if text.is_empty() {
            return Some(());
        }
        let normalized;
        let text = if self.nfc && !is_nfc_quick(text) {
            let mut n = tokenizers::NormalizedString::from(text);
            tok.get_normalizer()?.normalize(&mut n).ok()?;
            normalized = n.get().to_owned();
            normalized.as_str()
        } else {
            text
        };
        ids.extend(self.encode_pieces(tok.get_model(), text)?);
        Some(())
    }

    /// The ids of the pieces of `text` (no added token in it, already normalized); `None`
    /// when the model cannot tokenize a piece.
    fn encode_pieces(&self, model: &impl Model, text: &str) -> Option<Vec<u32>> {
        // The regex runs before the cache is locked: the read lock is held for the
        // lookups alone, so that threads adding pieces wait as little as possible
        // (holding it through the regex scan made parallel encoding of fresh texts
        // barely faster than one thread).
        let mut pieces: Vec<&str> = Vec::with_capacity(text.len() / 3);
        self.for_each_piece(text, |piece| pieces.push(piece));
        let mut ids = Vec::with_capacity(pieces.len() + pieces.len() / 4);
        let mut missing: Vec<(usize, &str)> = Vec::new();
        {
            let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
            pieces
                .into_iter()
                .for_each(|piece| match cache.get(piece.as_bytes()) {
                    // Most pieces are one token; pushing it spares a `memcpy` call per piece
                    // (measured: 20% of encoding time went to `memmove`).
                    Some(hit) if hit.len() == 1 => ids.push(hit[0]),
                    Some(hit) => ids.extend_from_slice(hit),
                    None => {
                        missing.push((ids.len(), piece));
                        // A placeholder, filled in below (in order, so positions shift).
                        ids.push(u32::MAX);
                    }
                });
        }
        if missing.is_empty() {
            return Some(ids);
        }
        let mut learned: Vec<(&str, Vec<u32>)> = Vec::with_capacity(missing.len());
        let mut out = Vec::with_capacity(ids.len() + missing.len());
        let mut from = 0;
        for (at, piece) in missing {
            out.extend_from_slice(&ids[from..at]);
            from = at + 1;
            let piece_ids = self.tokenize_piece(model, piece)?;
            out.extend_from_slice(&piece_ids);
            if piece.len() <= MAX_CACHED_PIECE {
                learned.push((piece, piece_ids));
            }
        }
        out.extend_from_slice(&ids[from..]);
        if !learned.is_empty() {
            let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
            for (piece, piece_ids) in learned {
                if cache.len() >= MAX_CACHED_PIECES {
                    break;
                }
                cache
                    .entry(piece.as_bytes().into())
                    .or_insert_with(|| piece_ids.into_boxed_slice());
            }
        }
        Some(out)
    }

    /// Calls `f` with each piece of `text`, in order: the regex's matches and the
    /// non-empty gaps between them (`tokenizers`' `Isolated` split), or the whole text.
    fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) {
        let Some(regex) = &self.split else {
            if !text.is_empty() {
                f(text);
            }
            return;
        };
        let mut prev = 0;
        for (start, end) in regex.find_iter(text) {
            if prev != start {
                f(&text[prev..start]);
            }
            if start != end {
                f(&text[start..end]);
            }
            prev = end;
        }
        if prev != text.len() {
            f(&text[prev..]);
        }
    }

    /// The model's ids for one piece, through its byte-level characters; `None` when the
    /// model fails (a character missing from its vocabulary without an `unk` token), for
    /// the caller to let `tokenizers` report it.
    fn tokenize_piece(&self, model: &impl Model, piece: &str) -> Option<Vec<u32>> {
        let chars: String = piece.bytes().map(|b| self.byte_char[b as usize]).collect();
        let tokens = model.tokenize(&chars).ok()?;
        Some(tokens.into_iter().map(|t| t.id).collect())
    }

    /// The text of `ids` as `tokenizers` decodes them, or `None` when the decoder is not
    /// the `ByteLevel` one.
    pub(crate) fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Option<String> {
        let table = self.decode.as_ref()?;
        let mut bytes = Vec::with_capacity(ids.len() * 5);
        for &id in ids {
            if let Some(Some(token)) = table.get(id as usize)
                && !(skip_special_tokens && token.special)
            {
                bytes.extend_from_slice(&token.bytes);
            }
        }
        Some(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// GPT-2's byte-to-character table (`bytes_to_unicode`), as `tokenizers` builds it:
/// printable bytes map to themselves, the others to 256 and up.
fn byte_level_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[b as usize] = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(next).expect("256..512 are characters");
            next += 1;
            c
        };
    }
    table
}

/// Whether `text` is surely in NFC: ASCII, or Unicode's quick check says yes.
fn is_nfc_quick(text: &str) -> bool {
    text.is_ascii()
        || unicode_normalization::is_nfc_quick(text.chars())
            == unicode_normalization::IsNormalized::Yes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::LazyLock;

    fn load(name: &str) -> tokenizers::Tokenizer {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/tokenizers");
        tokenizers::Tokenizer::from_file(dir.join(name).join("tokenizer.json")).unwrap()
    }

    /// The tokenizers under test with their shortcuts, loaded once.
    static TOKENIZERS: LazyLock<Vec<(&str, tokenizers::Tokenizer, ByteLevel)>> =
        LazyLock::new(|| {
            ["gpt2", "qwen3"]
                .into_iter()
                .map(|name| {
                    let tok = load(name);
                    let shortcut = ByteLevel::new(&tok).expect("a byte-level BPE tokenizer");
                    (name, tok, shortcut)
                })
                .collect()
        });

    /// Pieces that exercise the pre-tokenizer regexes, NFC, added tokens and UTF-8.
    const PIECES: &[&str] = &[
        "a",
        "Hello",
        " world",
        "'s",
        "'ll",
        "'T",
        " ",
        "  ",
        "   ",
        "\n",
        "\n\n",
        "\t",
        "\r\n",
        "\u{a0}",
        "1",
        "23",
        "4567",
        "!",
        "?!",
        " ...",
        "é",
        "e\u{301}",
        "A\u{30a}",
        "\u{212b}",
        "ß",
        "İ",
        "Ａ",
        "中文",
        "🙂",
        "\u{200d}",
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        LONG_WORD,
    ];

    /// A word past the cache's length limit.
    const LONG_WORD: &str = concat!(
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
    );

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|p| p.concat())
    }

    /// Checks one text against `tokenizers`, with and without special tokens; returns
    /// whether the shortcut took it.
    fn check_encode(name: &str, tok: &tokenizers::Tokenizer, b: &ByteLevel, text: &str) -> bool {
        let mut took = false;
        for special in [false, true] {
            let expected = tok.encode_fast(text, special).unwrap().get_ids().to_vec();
            if let Some(ids) = b.encode(tok, text, special) {
                took = true;
                assert_eq!(
                    ids, expected,
                    "{name}: {text:?} (add_special_tokens {special})"
                );
            }
        }
        took
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn texts_encode_as_tokenizers_encodes_them(text in text()) {
            for (name, tok, b) in TOKENIZERS.iter() {
                check_encode(name, tok, b, &text);
            }
        }

        #[test]
        fn ids_decode_and_reencode_as_tokenizers_does(
            ids in prop::collection::vec(any::<u32>(), 0..300),
            consecutive in any::<bool>(),
        ) {
            for (name, tok, b) in TOKENIZERS.iter() {
                let size = tok.get_vocab_size(true) as u32;
                // Random ids over the whole vocabulary (added and special ones included,
                // and a few past its end), or a run of consecutive ones as in the
                // `random` dataset.
                let ids: Vec<u32> = if consecutive {
                    let start = ids.first().copied().unwrap_or(0);
                    (0..ids.len() as u32).map(|i| (start.wrapping_add(i)) % size).collect()
                } else {
                    ids.iter().map(|id| id % (size + 10)).collect()
                };
                for skip in [false, true] {
                    let expected = tok.decode(&ids, skip).unwrap();
                    prop_assert_eq!(b.decode(&ids, skip).unwrap(), expected.clone(), "{} {:?}", name, ids);
                    check_encode(name, tok, b, &expected);
                }
            }
        }
    }

    #[test]
    fn the_shortcut_takes_ordinary_text_and_splits_out_added_tokens() {
        for (name, tok, b) in TOKENIZERS.iter() {
            assert!(check_encode(name, tok, b, "Hello world, it's 2026!\n"));
            assert!(
                check_encode(name, tok, b, "e\u{301}te\u{301}"),
                "{name}: not NFC"
            );
            // Added tokens are split out as `tokenizers` splits them, special or not.
            for text in [
                "a<|endoftext|>b",
                "<|endoftext|><|endoftext|> x <|endoftext|>",
                "<|im_start|>user\nShall I compare thee?<|im_end|>\n<|im_start|>assistant\n",
                "<think>\n\n</think>\n\ne\u{301}<|im_end|>",
            ] {
                let took = check_encode(name, tok, b, text);
                assert!(
                    took || *name == "gpt2" && text.contains("<|im"),
                    "{name}: {text:?}"
                );
            }
        }
    }

    #[test]
    fn other_pipelines_are_refused() {
        let tok = load("gpt2");
        let mut json: Json = serde_json::from_str(&tok.to_string(false).unwrap()).unwrap();
        json["pre_tokenizer"]["add_prefix_space"] = true.into();
        let prefixed: tokenizers::Tokenizer = json.to_string().parse().unwrap();
        assert!(ByteLevel::new(&prefixed).is_none(), "add_prefix_space");

        let mut json: Json = serde_json::from_str(&tok.to_string(false).unwrap()).unwrap();
        json["model"]["dropout"] = 0.1.into();
        let dropout: tokenizers::Tokenizer = json.to_string().parse().unwrap();
        assert!(ByteLevel::new(&dropout).is_none(), "dropout");

        let mut json: Json = serde_json::from_str(&tok.to_string(false).unwrap()).unwrap();
        json["normalizer"] = json!({"type": "Lowercase"});
        let lowercase: tokenizers::Tokenizer = json.to_string().parse().unwrap();
        assert!(ByteLevel::new(&lowercase).is_none(), "normalizer");
    }
}
