//! The `structured-output` dataset: the workloads of vLLM's
//! `benchmarks/benchmark_serving_structured_output.py`, requests whose answer must follow
//! a JSON schema, a regular expression, a choice or a grammar (each request's
//! `output-constraint`; backends send it in their API's form and the host checks the
//! answers against it).
//!
//! Options (vLLM's flag in brackets):
//! - `kind` (`--structured-output-kind`; vLLM's `--dataset`, default `json`):
//!   - `json`: every request asks for one JSON schema, `--dataset-path` (vLLM's
//!     `--json-schema-path`) or a built-in "brief user profile" schema; the prompt is
//!     vLLM's, `Generate an example of a brief user profile given the following schema: `
//!     and the schema as Python's `json.dumps` writes it.
//!   - `json-unique`: the same, but each request's schema gets one more optional property
//!     `__optional_field_<id>`, so that no two requests share a compiled grammar.
//!   - `regex`, `choice`, `grammar`: vLLM's fixed prompt and e-mail regular expression,
//!     `Positive`/`Negative` choice or SQL grammar; `--dataset-path` is refused.
//! - `ratio` (`--structured-output-ratio`, 1.0): only `int(n * ratio)` requests carry the
//!   constraint, chosen as vLLM chooses them (`random.sample(range(n), k)` after
//!   `random.seed(seed)`: the same requests for the same `--seed`); the others carry the
//!   same prompt and no constraint. `0` is vLLM's `--no-structured-output`.
//! - `output-len` (`--structured-output-len`, also `--output-len`; vLLM's `--output-len`,
//!   128). EOS is left alone: a structured answer ends when it is complete.
//!
//! `prompt_len` is the prompt's token count with the run's tokenizer, special tokens
//! included (vLLM's `len(tokenizer(prompt).input_ids)`).
//!
//! Where it differs from vLLM:
//! - `json-unique`'s ids: vLLM takes `uuid.uuid4()`, a different request set every run;
//!   here the id has uuid4's shape but is drawn from the run seed and the request's index
//!   ([`sample::unique_id`]), so that a seed always gives the same request set.
//! - The built-in schema is our own (`src/user_profile.schema.json`), not vLLM's
//!   `structured_schemas/structured_schema_1.json`; with vLLM's file as `--dataset-path`
//!   the prompts are vLLM's. Its strings have a `maxLength`: without one, a small model
//!   under guided decoding can repeat itself inside a string until `max_tokens` cuts the
//!   JSON short (SmolLM2-135M on vLLM 0.32 did, every answer invalid at 512 tokens; with
//!   the bounds, 8 of 8 were valid in 118 tokens each).
//! - A schema file must hold a JSON object (vLLM takes any JSON value) and no lone UTF-16
//!   surrogate escape (Python keeps one; no server could read it back).
//! - vLLM's `xgrammar_bench` (a Hugging Face dataset) is not offered.
//! - The constraint is the schema as compact JSON text; vLLM sends the parsed schema in
//!   its request body (the same JSON value).

pub mod pyjson;
pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{BUILTIN_SCHEMA, Kind, Params, Sampler, Workload};

const NAME: &str = "structured-output";

fn options() -> Vec<OptionInfo> {
    vec![
        option(
            "kind",
            "What the answers must follow (vLLM's --dataset): json (one JSON schema: \
             --dataset-path or a built-in user profile schema), json-unique (the schema with \
             one extra optional property per request, so that no two share a compiled \
             grammar), regex, choice or grammar (vLLM's fixed prompts and constraints)",
            Some("json"),
        )
        .flag("structured-output-kind")
        .choices(&Kind::NAMES),
        option(
            "ratio",
            "Share of the requests that carry the constraint, in [0, 1]: int(n * ratio) of \
             them, chosen as vLLM does for the same --seed; the others are sent unconstrained",
            Some("1.0"),
        )
        .flag("structured-output-ratio")
        .number(),
        option("output-len", "Output tokens per request", Some("128"))
            .flag("structured-output-len")
            .count()
            .shared(SharedFlag::OutputLen),
    ]
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let d = Params::default();
    let kind = match reader.string("kind") {
        None => d.kind,
        Some(name) => Kind::parse(name.trim()).ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: option kind={name:?}: expected one of {}",
                Kind::NAMES.join(", ")
            ))
        })?,
    };
    let params = Params {
        kind,
        ratio: reader.parse_or("ratio", d.ratio)?,
        output_len: reader.parse_or("output-len", d.output_len)?,
    };
    reader.finish(&options())?;
    if !(0.0..=1.0).contains(&params.ratio) {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option ratio must be between 0 and 1, got {}",
            params.ratio
        )));
    }
    Ok(params)
}

/// The requests' prompt and constraint for `kind`: the JSON kinds read their schema from
/// `path` (with `read`) or take the built-in one; the others refuse a path. No host call,
/// so it runs natively in tests.
pub fn workload(
    kind: Kind,
    path: Option<&str>,
    read: impl FnOnce(&str) -> std::io::Result<Vec<u8>>,
) -> Result<Workload, PluginError> {
    let schema = match (kind.is_json(), path) {
        (false, Some(_)) => {
            return Err(PluginError::InvalidConfig(format!(
                "{NAME}: --dataset-path is a JSON schema, for option kind=json or json-unique \
                 only; kind={} makes its requests itself",
                kind.name()
            )));
        }
        (false, None) => None,
        (true, None) => Some(pyjson::parse(BUILTIN_SCHEMA).expect("the built-in schema is JSON")),
        (true, Some(path)) => {
            let bytes = read(path).map_err(|e| {
                PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}"))
            })?;
            let text = String::from_utf8(bytes).map_err(|e| {
                PluginError::InvalidConfig(format!(
                    "{NAME}: {path} is not a JSON schema: not UTF-8 text ({e})"
                ))
            })?;
            let value = pyjson::parse(&text).map_err(|e| {
                PluginError::InvalidConfig(format!("{NAME}: {path} is not JSON: {e}"))
            })?;
            if !matches!(value, pyjson::Value::Object(_)) {
                return Err(PluginError::InvalidConfig(format!(
                    "{NAME}: {path} is not a JSON schema: it holds JSON but not an object"
                )));
            }
            Some(value)
        }
    };
    Workload::new(kind, schema.as_ref()).map_err(|e| {
        let source = path.unwrap_or("the built-in schema");
        PluginError::InvalidConfig(format!("{NAME}: {source}: {e}"))
    })
}

/// The request source: the whole set is decided at open (which requests carry the
/// constraint), the prompts are made and counted batch by batch.
pub struct StructuredOutputDataset {
    sampler: Sampler,
}

impl Dataset for StructuredOutputDataset {
    fn describe() -> DatasetDescription {
        // No EOS rule: a structured answer ends on its own, as in vLLM's script (which
        // sends ignore_eos only when asked).
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Structured-output requests (JSON schema, regex, choice or grammar), \
                          the workloads of vLLM's benchmark_serving_structured_output.py \
                          (--dataset-path: a JSON schema for kind json or json-unique)"
                .into(),
            options: options(),
        })
        .path(PathUse::Optional)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let workload = workload(params.kind, config.path.as_deref(), |p| std::fs::read(p))?;
        let sampler = Sampler::new(
            workload,
            host::run_seed(),
            config.num_requests as usize,
            &params,
        );
        Ok(StructuredOutputDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(StructuredOutputDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    fn config_error<T: std::fmt::Debug>(r: Result<T, PluginError>) -> String {
        match r {
            Err(PluginError::InvalidConfig(m)) => m,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_vllms() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p, Params::default());
        assert_eq!((p.kind, p.ratio, p.output_len), (Kind::Json, 1.0, 128));
    }

    #[test]
    fn options_are_read() {
        for name in Kind::NAMES {
            let p = parse_options(opts(&[("kind", name)])).unwrap();
            assert_eq!(p.kind.name(), name);
        }
        let p = parse_options(opts(&[
            ("kind", "regex"),
            ("ratio", "0.25"),
            ("output-len", "16"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                kind: Kind::Regex,
                ratio: 0.25,
                output_len: 16
            }
        );
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        for (pairs, needle) in [
            (opts(&[("dataset", "json")]), "unknown option \"dataset\""),
            (opts(&[("kind", "xgrammar_bench")]), "kind"),
            (opts(&[("kind", "JSON")]), "kind"),
            (opts(&[("ratio", "1.5")]), "ratio"),
            (opts(&[("ratio", "-0.1")]), "ratio"),
            (opts(&[("ratio", "NaN")]), "ratio"),
            (opts(&[("ratio", "half")]), "ratio"),
            (opts(&[("output-len", "-1")]), "output-len"),
            (opts(&[("output-len", "many")]), "output-len"),
        ] {
            let m = config_error(parse_options(pairs));
            assert!(m.contains(needle), "{m:?} lacks {needle:?}");
            assert!(m.starts_with("structured-output: "), "{m:?}");
        }
    }

    fn no_read(path: &str) -> std::io::Result<Vec<u8>> {
        panic!("{path} was read")
    }

    #[test]
    fn path_is_refused_for_the_fixed_kinds() {
        for kind in [Kind::Regex, Kind::Choice, Kind::Grammar] {
            let m = config_error(workload(kind, Some("s.json"), no_read));
            assert!(
                m.contains("--dataset-path") && m.contains(kind.name()),
                "{m}"
            );
            assert!(workload(kind, None, no_read).is_ok());
        }
        for kind in [Kind::Json, Kind::JsonUnique] {
            assert!(workload(kind, None, no_read).is_ok());
        }
    }

    #[test]
    fn a_schema_file_is_read_and_checked() {
        let read = |text: &'static str| move |_: &str| Ok(text.as_bytes().to_vec());
        let w = workload(Kind::Json, Some("s.json"), read("{\"type\": \"string\"}")).unwrap();
        let Workload::Same { prompt, constraint } = w else {
            panic!("json makes one request");
        };
        assert_eq!(
            prompt,
            "Generate an example of a brief user profile given the following schema: \
             {\"type\": \"string\"}"
        );
        let bench_sdk::OutputConstraint::JsonSchema(schema) = constraint else {
            panic!("not a JSON schema: {constraint:?}");
        };
        assert_eq!(schema, "{\"type\":\"string\"}");
        for (text, needle) in [
            ("{\"type\": ", "s.json is not JSON"),
            ("[1, 2]", "s.json is not a JSON schema"),
            ("true", "s.json is not a JSON schema"),
        ] {
            let m = config_error(workload(Kind::Json, Some("s.json"), read(text)));
            assert!(m.contains(needle), "{m:?} lacks {needle:?}");
        }
        let m = config_error(workload(
            Kind::JsonUnique,
            Some("s.json"),
            read("{\"properties\": 3}"),
        ));
        assert!(m.contains("s.json") && m.contains("properties"), "{m}");
        let m = config_error(workload(Kind::Json, Some("gone.json"), |_| {
            Err(std::io::Error::from(std::io::ErrorKind::NotFound))
        }));
        assert!(m.contains("cannot read gone.json"), "{m}");
        let m = config_error(workload(Kind::Json, Some("s.json"), |_| Ok(vec![0xff])));
        assert!(m.contains("s.json") && m.contains("UTF-8"), "{m}");
    }
}
