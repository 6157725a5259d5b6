//! The result document as it is written: [`ResultDoc`], keys in insertion order, floats as
//! vLLM's JSON holds them ([`float`]), and the per-request lists read from the records only
//! when the file is written. The reports fill it ([`super::json`], the server's keys).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::metrics::per_request::PerRequest;

/// A float as vLLM's JSON holds it. JSON has no infinity: an infinite value is written as
/// the string `"inf"`, as vLLM does for `request_rate` and its `InfEncoder` does for
/// every float; NaN (never produced by the metrics) becomes `null`.
pub fn float(x: f64) -> Value {
    if x.is_infinite() {
        Value::from("inf")
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// [`float`] for the per-request lists, written without building a [`Value`].
struct Float(f64);

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_infinite() {
            s.serialize_str("inf")
        } else if self.0.is_nan() {
            s.serialize_unit()
        } else {
            s.serialize_f64(self.0)
        }
    }
}

/// One request's ITLs.
struct Floats<'a>(&'a [f64]);

impl Serialize for Floats<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|&x| Float(x)))
    }
}

/// A per-request list of the result, by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    InputLens,
    OutputLens,
    Ttfts,
    Ttfcs,
    ServerTtfts,
    ServerQueueTimes,
    Itls,
    Latencies,
    StartTimes,
    QueueTimes,
    GeneratedTexts,
    Errors,
    Endpoints,
    ValidOutput,
    InvalidOutputReasons,
    Correct,
    ExtractedAnswers,
    ReferenceAnswers,
}

/// A value of the result: a small JSON value, or a per-request list read from the
/// records when it is written.
#[derive(Debug, Clone)]
pub(super) enum Field<'m> {
    Value(Value),
    List(&'m PerRequest, List),
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (p, list) = match self {
            Field::Value(value) => return value.serialize(s),
            Field::List(p, list) => (p, list),
        };
        match list {
            List::InputLens => s.collect_seq(p.input_lens()),
            List::OutputLens => s.collect_seq(&p.output_lens),
            List::Ttfts => s.collect_seq(p.ttfts().map(Float)),
            List::Ttfcs => s.collect_seq(p.ttfcs().map(|t| t.map(Float))),
            List::ServerTtfts => s.collect_seq(p.server_ttfts().map(|t| t.map(Float))),
            List::ServerQueueTimes => s.collect_seq(p.server_queue_times().map(|t| t.map(Float))),
            List::Itls => s.collect_seq(p.itls().map(Floats)),
            List::Latencies => s.collect_seq(p.latencies().map(Float)),
            List::StartTimes => s.collect_seq(p.start_times().map(Float)),
            List::QueueTimes => s.collect_seq(p.queue_times().map(Float)),
            List::GeneratedTexts => s.collect_seq(p.generated_texts()),
            List::Errors => s.collect_seq(p.errors()),
            List::Endpoints => s.collect_seq(p.records.iter().map(|r| r.endpoint)),
            List::ValidOutput => s.collect_seq(p.valid_outputs()),
            List::InvalidOutputReasons => s.collect_seq(p.invalid_output_reasons()),
            List::Correct => s.collect_seq(
                p.records
                    .iter()
                    .map(|r| r.grade.as_ref().map(|g| g.correct)),
            ),
            List::ExtractedAnswers => s.collect_seq(
                p.records
                    .iter()
                    .map(|r| r.grade.as_ref().and_then(|g| g.extracted.as_deref())),
            ),
            List::ReferenceAnswers => s.collect_seq(
                p.records
                    .iter()
                    .map(|r| r.grade.as_ref().map(|g| g.reference.as_str())),
            ),
        }
    }
}

/// The result object: its keys in order with their values, the per-request lists
/// borrowed from the metrics. Keys behave as in the Python dict vLLM builds: inserting an
/// existing key replaces its value where it stands, removing one keeps the others' order.
/// Serialises as a JSON object.
#[derive(Debug, Clone, Default)]
pub struct ResultDoc<'m> {
    fields: Vec<(String, Field<'m>)>,
}

impl<'m> ResultDoc<'m> {
    /// Sets `key` to `value` (in place when the key exists, else at the end).
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        self.insert_field(key.into(), Field::Value(value));
    }

    pub(super) fn insert_field(&mut self, key: String, field: Field<'m>) {
        match self.fields.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = field,
            None => self.fields.push((key, field)),
        }
    }

    /// Removes `key`, keeping the order of the others (Python's `del`).
    pub(super) fn remove(&mut self, key: &str) {
        self.fields.retain(|(k, _)| k != key);
    }

    /// The value of `key`, unless absent or a per-request list.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find_map(|(k, field)| match field {
            Field::Value(value) if k == key => Some(value),
            _ => None,
        })
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(k, _)| k.as_str())
    }

    /// Writes the object without the keys `skip` accepts.
    pub(super) fn serialize_without<S: Serializer>(
        &self,
        s: S,
        skip: impl Fn(&str) -> bool,
    ) -> Result<S::Ok, S::Error> {
        let kept = self.fields.iter().filter(|(k, _)| !skip(k));
        let mut map = s.serialize_map(Some(kept.clone().count()))?;
        for (key, field) in kept {
            map.serialize_entry(key, field)?;
        }
        map.end()
    }
}

impl Serialize for ResultDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_without(s, |_| false)
    }
}
