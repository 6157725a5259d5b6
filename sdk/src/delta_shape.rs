//! Reading a stream of typed delta events without scanning each one in full.
//!
//! APIs whose streams are typed events (OpenAI's Responses API, Anthropic's Messages API)
//! send one event per token, and an event differs from the one before it only in its
//! delta text and, in some APIs, a sequence number written after it:
//!
//! ```text
//! {"content_index":0,"delta":" Paris","item_id":"msg_1",...,"sequence_number":8,"type":"response.output_text.delta"}
//! {"type":"content_block_delta","delta":{"type":"text_delta","text":" Paris"},"index":0}
//! ```
//!
//! A decoder keeps the last delta event it read in full ([`DeltaShape::keep`]) and asks
//! [`DeltaShape::read`] for the delta of the next frame. Why a frame whose bytes equal the
//! kept one's except for a valid string literal in place of the delta (and a valid whole
//! number in place of the sequence number) reads as the kept one does with that delta: the
//! scanner decides on the bytes it reaches, a valid literal is read as one string whatever
//! it holds, a whole number as one number, and the rest is the same bytes read in the same
//! state. So such a frame needs no full scan, and any other frame gets `None` and is read
//! in full. The decoders' tests check this against full reads of every frame alone.

use crate::json::{Cursor, Str};

/// A delta event read in full, kept to read later delta events of the same shape; see the
/// module documentation. `K` is what the decoder needs to know of the kept event besides
/// its text (which kind of delta it was).
#[derive(Debug)]
pub struct DeltaShape<K> {
    bytes: Vec<u8>,
    /// The delta literal's inside, in `bytes`.
    text: Str,
    /// The sequence number's digits in `bytes`, when they come after the delta.
    number: Option<(usize, usize)>,
    kind: K,
}

impl<K: Copy> DeltaShape<K> {
    /// Keeps `bytes`, a delta event read in full whose delta literal is `text` and whose
    /// whole-number sequence number, if any, is at `number`, in `slot` (reusing its
    /// buffer). A number before the delta is part of the bytes that must stay the same.
    pub fn keep(
        slot: &mut Option<Self>,
        bytes: &[u8],
        text: Str,
        number: Option<(usize, usize)>,
        kind: K,
    ) {
        let shape = slot.get_or_insert_with(|| DeltaShape {
            bytes: Vec::new(),
            text,
            number: None,
            kind,
        });
        shape.bytes.clear();
        shape.bytes.extend_from_slice(bytes);
        shape.text = text;
        shape.number = number.filter(|&(from, _)| from > text.end);
        shape.kind = kind;
    }

    /// What the kept event was besides its text.
    pub fn kind(&self) -> K {
        self.kind
    }

    /// The delta of `bytes` when they have the kept event's shape, else `None`.
    pub fn read(&self, bytes: &[u8]) -> Option<Str> {
        let head = &self.bytes[..self.text.start];
        if !bytes.starts_with(head) {
            return None;
        }
        // The literal from its opening quote.
        let open = self.text.start - 1;
        let text = Cursor::new(&bytes[open..]).string().ok()??;
        let (start, end) = (open + text.start, open + text.end);
        let (old, new) = (&self.bytes[self.text.end..], &bytes[end..]);
        let same = match self.number {
            None => old == new,
            Some((from, to)) => {
                let (from, to) = (from - self.text.end, to - self.text.end);
                let digits = new
                    .get(from..)?
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                new[..from] == old[..from]
                    && digits > 0
                    && (digits == 1 || new[from] != b'0')
                    && new[from + digits..] == old[to..]
            }
        };
        same.then_some(Str {
            start,
            end,
            escaped: text.escaped,
        })
    }
}
