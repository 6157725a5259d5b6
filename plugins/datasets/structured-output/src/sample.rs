//! The requests of vLLM's `benchmarks/benchmark_serving_structured_output.py`
//! (`sample_requests`, and the choice of constrained requests in `benchmark`), generic
//! over the SDK's [`TokenCounter`] so that it runs natively in unit tests.

use std::collections::HashSet;

use bench_sdk::rng::Random;
use bench_sdk::rng::numpy::{Pcg64, SeedSequence};
use bench_sdk::sampling::TokenCounter;
use bench_sdk::{OutputConstraint, PluginError, RequestSpec};

use crate::pyjson::{self, Value};

/// vLLM's `--dataset`: what every request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One JSON schema for every request.
    Json,
    /// The schema with a distinct extra optional property per request, so that a server
    /// cannot reuse a compiled grammar.
    JsonUnique,
    /// vLLM's e-mail address regular expression.
    Regex,
    /// vLLM's two-way sentiment choice.
    Choice,
    /// vLLM's SQL `SELECT` grammar (EBNF).
    Grammar,
}

impl Kind {
    /// The option's values, in vLLM's order (less `xgrammar_bench`, a Hugging Face
    /// dataset).
    pub const NAMES: [&'static str; 5] = ["json", "json-unique", "grammar", "regex", "choice"];

    pub fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "json" => Kind::Json,
            "json-unique" => Kind::JsonUnique,
            "regex" => Kind::Regex,
            "choice" => Kind::Choice,
            "grammar" => Kind::Grammar,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Json => "json",
            Kind::JsonUnique => "json-unique",
            Kind::Regex => "regex",
            Kind::Choice => "choice",
            Kind::Grammar => "grammar",
        }
    }

    /// Whether the requests carry a JSON schema (and `--dataset-path` may name it).
    pub fn is_json(self) -> bool {
        matches!(self, Kind::Json | Kind::JsonUnique)
    }
}

/// The options, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// vLLM's `--dataset`.
    pub kind: Kind,
    /// vLLM's `--structured-output-ratio`, in [0, 1].
    pub ratio: f64,
    /// vLLM's `--output-len`.
    pub output_len: u32,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            kind: Kind::Json,
            ratio: 1.0,
            output_len: 128,
        }
    }
}

/// The built-in JSON schema (vLLM reads `structured_schemas/structured_schema_1.json`
/// next to its script; this one is our own).
pub const BUILTIN_SCHEMA: &str = include_str!("user_profile.schema.json");

/// What precedes `json.dumps(schema)` in the JSON kinds' prompt.
pub const JSON_PROMPT: &str =
    "Generate an example of a brief user profile given the following schema: ";

// vLLM writes the next prompts with backslash line continuations inside the string
// literals, so the indentation of the following source line is part of the string: the
// runs of spaces are vLLM's.

/// The `regex` kind's prompt.
pub const REGEX_PROMPT: &str = "Generate an email address for Alan Turing,             who \
                                works in Enigma. End in .com and new line.                 \
                                Example result: alan.turing@enigma.com\n";
/// The `regex` kind's expression.
pub const REGEX: &str = r"\w+@\w+\.com\n";

/// The `choice` kind's prompt.
pub const CHOICE_PROMPT: &str = "Classify this sentiment: vLLM is wonderful!";
/// The `choice` kind's choices.
pub const CHOICES: [&str; 2] = ["Positive", "Negative"];

/// The `grammar` kind's prompt.
pub const GRAMMAR_PROMPT: &str =
    "Generate an SQL query to show the 'username'             and 'email' from the 'users' table.";
/// The `grammar` kind's grammar: vLLM's triple-quoted string, its leading newline, 8-space
/// indentation and trailing spaces included.
pub const GRAMMAR: &str = "
        root ::= select_statement

        select_statement ::= \"SELECT \" column \" from \" table \" where \" condition

        column ::= \"col_1 \" | \"col_2 \"

        table ::= \"table_1 \" | \"table_2 \"

        condition ::= column \"= \" number

        number ::= \"1 \" | \"2 \"
        ";

/// The description vLLM gives each `json-unique` extra property.
pub const UNIQUE_FIELD_DESCRIPTION: &str = "An unique optional field to avoid cached schemas";

/// What each request asks: one prompt and constraint for all, or (`json-unique`) a
/// schema made distinct per request.
#[derive(Clone, Debug)]
pub enum Workload {
    Same {
        prompt: String,
        constraint: OutputConstraint,
    },
    Unique {
        schema: Value,
    },
}

impl Workload {
    /// The workload of `kind`; `schema` is the JSON kinds' schema (a JSON object), unused
    /// by the others.
    pub fn new(kind: Kind, schema: Option<&Value>) -> Result<Workload, String> {
        let json_schema = || match schema {
            Some(v @ Value::Object(_)) => Ok(v.clone()),
            _ => Err("the JSON schema must be a JSON object".to_string()),
        };
        Ok(match kind {
            Kind::Json => {
                let schema = json_schema()?;
                Workload::Same {
                    prompt: format!("{JSON_PROMPT}{}", pyjson::dumps(&schema)),
                    constraint: OutputConstraint::JsonSchema(pyjson::dumps_compact(&schema)),
                }
            }
            Kind::JsonUnique => {
                let schema = json_schema()?;
                // Refuse now what would fail at the first request.
                with_unique_field(&schema, "")?;
                Workload::Unique { schema }
            }
            Kind::Regex => Workload::Same {
                prompt: REGEX_PROMPT.into(),
                constraint: OutputConstraint::Regex(REGEX.into()),
            },
            Kind::Choice => Workload::Same {
                prompt: CHOICE_PROMPT.into(),
                constraint: OutputConstraint::Choice(CHOICES.map(String::from).to_vec()),
            },
            Kind::Grammar => Workload::Same {
                prompt: GRAMMAR_PROMPT.into(),
                constraint: OutputConstraint::Grammar(GRAMMAR.into()),
            },
        })
    }

    /// The prompt and constraint of the request at `index` of a run seeded with `seed`.
    pub fn request(&self, seed: u64, index: usize) -> (String, OutputConstraint) {
        match self {
            Workload::Same { prompt, constraint } => (prompt.clone(), constraint.clone()),
            Workload::Unique { schema } => {
                let schema = with_unique_field(schema, &unique_id(seed, index))
                    .expect("checked by Workload::new");
                (
                    format!("{JSON_PROMPT}{}", pyjson::dumps(&schema)),
                    OutputConstraint::JsonSchema(pyjson::dumps_compact(&schema)),
                )
            }
        }
    }
}

/// `schema` with vLLM's extra optional property `__optional_field_<id>` appended to its
/// `properties` (created last when missing, as Python's dict does).
pub fn with_unique_field(schema: &Value, id: &str) -> Result<Value, String> {
    let mut schema = schema.clone();
    let Value::Object(members) = &mut schema else {
        return Err("the JSON schema must be a JSON object".into());
    };
    if !members.iter().any(|(k, _)| k == "properties") {
        members.push(("properties".into(), Value::Object(Vec::new())));
    }
    let (_, properties) = members
        .iter_mut()
        .find(|(k, _)| k == "properties")
        .expect("added above");
    let Value::Object(properties) = properties else {
        return Err(
            "json-unique adds a property to the schema's \"properties\", which is not a JSON \
             object"
                .into(),
        );
    };
    let field = Value::Object(vec![
        ("type".into(), Value::Str("string".into())),
        (
            "description".into(),
            Value::Str(UNIQUE_FIELD_DESCRIPTION.into()),
        ),
    ]);
    let name = format!("__optional_field_{id}");
    match properties.iter_mut().find(|(k, _)| *k == name) {
        Some((_, v)) => *v = field,
        None => properties.push((name, field)),
    }
    Ok(schema)
}

/// Mixed into the seed of [`unique_id`]'s generator, so that its stream is none of the
/// other streams drawn from the run seed.
const UNIQUE_ID_TAG: u32 = 0x534f_5549; // "SOUI"

/// The id of request `index`'s extra property: vLLM's `uuid.uuid4()` (random, a new set
/// every run), here as random but from the run seed and the index, in the same shape
/// (`8-4-4-4-12` lowercase hex digits, version 4, RFC 4122 variant), so that a seed gives
/// the same request set every time.
pub fn unique_id(seed: u64, index: usize) -> String {
    let index = index as u64;
    let words = [
        seed as u32,
        (seed >> 32) as u32,
        index as u32,
        (index >> 32) as u32,
        UNIQUE_ID_TAG,
    ];
    let mut rng = Pcg64::from_seed_sequence(&SeedSequence::from_words(&words));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Python's `random.sample(range(n), k)` (CPython 3.11+), draw for draw: a pool that
/// shrinks when a list of `n` is smaller than a set of `k`, else draws into a set,
/// drawing again on repeats.
///
/// # Panics
/// When `k > n` (Python raises `ValueError`).
pub fn python_sample(rng: &mut Random, n: usize, k: usize) -> Vec<usize> {
    assert!(k <= n, "sample larger than population");
    let mut setsize: u64 = 21;
    if k > 5 {
        // 4 ** ceil(log(k * 3, 4)), with Python's float logarithm.
        let exp = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil() as u32;
        setsize = setsize.saturating_add(4u64.saturating_pow(exp));
    }
    let mut result = Vec::with_capacity(k);
    if n as u64 <= setsize {
        let mut pool: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = rng.randbelow((n - i) as u64) as usize;
            result.push(pool[j]);
            pool[j] = pool[n - i - 1];
        }
    } else {
        let mut selected = HashSet::with_capacity(k);
        for _ in 0..k {
            let mut j = rng.randbelow(n as u64) as usize;
            while !selected.insert(j) {
                j = rng.randbelow(n as u64) as usize;
            }
            result.push(j);
        }
    }
    result
}

/// Which of `n` requests carry their constraint: vLLM's
/// `random.sample(range(n), int(n * ratio))` right after `random.seed(seed)` (the
/// script's first draw from Python's generator).
pub fn constrained(seed: u64, n: usize, ratio: f64) -> Vec<bool> {
    let k = ((n as f64 * ratio) as usize).min(n);
    let mut rng = Random::new(i128::from(seed));
    let mut chosen = vec![false; n];
    for i in python_sample(&mut rng, n, k) {
        chosen[i] = true;
    }
    chosen
}

/// The request set, made batch by batch in vLLM's order.
pub struct Sampler {
    workload: Workload,
    seed: u64,
    output_len: u32,
    /// Per request: whether it carries the constraint.
    constrained: Vec<bool>,
    next: usize,
    /// The token count of [`Workload::Same`]'s prompt, once counted.
    same_len: Option<u32>,
}

impl Sampler {
    pub fn new(workload: Workload, seed: u64, num_requests: usize, params: &Params) -> Self {
        Sampler {
            workload,
            seed,
            output_len: params.output_len,
            constrained: constrained(seed, num_requests, params.ratio),
            next: 0,
            same_len: None,
        }
    }

    /// How many requests there are.
    pub fn total(&self) -> usize {
        self.constrained.len()
    }

    /// How many of them carry the constraint.
    pub fn constrained_count(&self) -> usize {
        self.constrained.iter().filter(|c| **c).count()
    }

    /// The next (up to) `max` requests; empty once all are made.
    pub fn next_batch(
        &mut self,
        tok: &impl TokenCounter,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let end = self.total().min(self.next + max);
        let made: Vec<(String, OutputConstraint)> = (self.next..end)
            .map(|i| self.workload.request(self.seed, i))
            .collect();
        let lens: Vec<usize> = match (&self.workload, self.same_len) {
            (_, _) if made.is_empty() => Vec::new(),
            (Workload::Same { .. }, Some(len)) => vec![len as usize; made.len()],
            (Workload::Same { prompt, .. }, None) => {
                let len = count(tok, std::slice::from_ref(prompt))?[0];
                self.same_len = Some(prompt_len(len)?);
                vec![len; made.len()]
            }
            (Workload::Unique { .. }, _) => {
                let prompts: Vec<String> = made.iter().map(|(p, _)| p.clone()).collect();
                count(tok, &prompts)?
            }
        };
        let mut batch = Vec::with_capacity(made.len());
        for (offset, ((prompt, constraint), len)) in made.into_iter().zip(lens).enumerate() {
            let mut spec = RequestSpec::text(prompt, prompt_len(len)?, self.output_len);
            if self.constrained[self.next + offset] {
                spec.output_constraint = Some(constraint);
            }
            batch.push(spec);
        }
        self.next = end;
        Ok(batch)
    }
}

fn count(tok: &impl TokenCounter, texts: &[String]) -> Result<Vec<usize>, PluginError> {
    let lens = tok.token_counts(texts)?;
    if lens.len() != texts.len() {
        return Err(PluginError::Internal(format!(
            "structured-output: {} token counts for {} prompts",
            lens.len(),
            texts.len()
        )));
    }
    Ok(lens)
}

fn prompt_len(len: usize) -> Result<u32, PluginError> {
    u32::try_from(len).map_err(|_| {
        PluginError::InvalidConfig(format!("structured-output: a prompt of {len} tokens"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;

    /// Counts characters as tokens.
    struct Chars;

    impl TokenCounter for Chars {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.chars().count()).collect())
        }
    }

    fn builtin() -> Value {
        pyjson::parse(BUILTIN_SCHEMA).unwrap()
    }

    fn drain(kind: Kind, seed: u64, n: usize, ratio: f64, batch: usize) -> Vec<RequestSpec> {
        let params = Params {
            kind,
            ratio,
            output_len: 7,
        };
        let workload = Workload::new(kind, Some(&builtin())).unwrap();
        let mut sampler = Sampler::new(workload, seed, n, &params);
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&Chars, batch).unwrap();
            assert!(got.len() <= batch);
            if got.is_empty() {
                assert_eq!(all.len(), n);
                return all;
            }
            all.extend(got);
        }
    }

    fn text(spec: &RequestSpec) -> &str {
        match &spec.prompt {
            Prompt::Text(t) => t,
            other => panic!("not a text prompt: {other:?}"),
        }
    }

    /// `random.seed(seed); random.sample(range(n), k)`, printed by CPython 3.11.7; the
    /// long ones as (first 12, sum, sum of index * value).
    #[test]
    fn sample_is_pythons() {
        let short: [(u64, usize, usize, &[usize]); 7] = [
            (0, 10, 4, &[6, 9, 0, 2]),
            (
                42,
                100,
                50,
                &[
                    81, 14, 3, 94, 35, 31, 28, 17, 13, 86, 69, 11, 75, 54, 4, 97, 88, 27, 29, 64,
                    77, 84, 71, 25, 89, 53, 93, 57, 95, 0, 20, 90, 43, 79, 19, 82, 67, 6, 5, 24,
                    62, 22, 68, 58, 38, 16, 51, 2, 46, 99,
                ],
            ),
            (7, 1000, 5, &[331, 970, 154, 404, 666]),
            (3, 50, 3, &[15, 37, 34]),
            (
                u64::MAX,
                30,
                30,
                &[
                    0, 7, 10, 19, 6, 14, 26, 3, 11, 1, 25, 17, 15, 2, 27, 28, 4, 13, 9, 29, 5, 12,
                    8, 23, 24, 16, 22, 20, 18, 21,
                ],
            ),
            (0, 1, 1, &[0]),
            (5, 1000, 0, &[]),
        ];
        for (seed, n, k, want) in short {
            let got = python_sample(&mut Random::new(i128::from(seed)), n, k);
            assert_eq!(got, want, "seed {seed}, n {n}, k {k}");
        }
        let long: [(u64, usize, usize, [usize; 12], usize, usize); 2] = [
            (
                (1 << 40) + 5,
                2000,
                100,
                [
                    1032, 1058, 550, 1359, 1896, 56, 1087, 1553, 1675, 1708, 1611, 1958,
                ],
                98101,
                4558572,
            ),
            (
                1,
                10000,
                1000,
                [
                    2201, 9325, 1033, 4179, 1931, 8117, 7364, 7737, 6219, 3439, 1537, 7993,
                ],
                5065358,
                2535382608,
            ),
        ];
        for (seed, n, k, first, sum, weighted) in long {
            let got = python_sample(&mut Random::new(i128::from(seed)), n, k);
            assert_eq!(got.len(), k);
            assert_eq!(got[..12], first, "seed {seed}, n {n}, k {k}");
            assert_eq!(got.iter().sum::<usize>(), sum);
            assert_eq!(
                got.iter().enumerate().map(|(i, x)| i * x).sum::<usize>(),
                weighted
            );
        }
    }

    #[test]
    fn ratio_picks_pythons_sample() {
        // random.seed(42); random.sample(range(100), int(100 * 0.5))
        let chosen = constrained(42, 100, 0.5);
        let mut want = python_sample(&mut Random::new(42), 100, 50);
        want.sort_unstable();
        let got: Vec<usize> = (0..100).filter(|&i| chosen[i]).collect();
        assert_eq!(got, want);
        // int(10 * 0.35) == 3: [6, 9, 0] with seed 0 (the first three of sample(.., 4)).
        let chosen = constrained(0, 10, 0.35);
        let got: Vec<usize> = (0..10).filter(|&i| chosen[i]).collect();
        assert_eq!(got, [0, 6, 9]);
        assert!(constrained(3, 20, 1.0).iter().all(|c| *c));
        assert!(constrained(3, 20, 0.0).iter().all(|c| !*c));
        assert!(constrained(3, 0, 1.0).is_empty());
    }

    #[test]
    fn requests_carry_the_constraint_where_chosen_and_the_prompt_everywhere() {
        for kind in [
            Kind::Json,
            Kind::JsonUnique,
            Kind::Regex,
            Kind::Choice,
            Kind::Grammar,
        ] {
            let all = drain(kind, 42, 100, 0.5, 7);
            let chosen = constrained(42, 100, 0.5);
            for (i, spec) in all.iter().enumerate() {
                assert_eq!(spec.output_constraint.is_some(), chosen[i], "{kind:?} {i}");
                assert_eq!(spec.prompt_len as usize, text(spec).chars().count());
                assert_eq!(spec.expected_output_len, 7);
                assert!(spec.request_id.is_none() && spec.extra_body.is_none());
            }
            // The batch size changes nothing.
            let again = drain(kind, 42, 100, 0.5, 1000);
            assert_eq!(format!("{all:?}"), format!("{again:?}"), "{kind:?}");
            let (prompt, constraint) = match kind {
                Kind::Regex => (REGEX_PROMPT, OutputConstraint::Regex(REGEX.into())),
                Kind::Choice => (
                    CHOICE_PROMPT,
                    OutputConstraint::Choice(vec!["Positive".into(), "Negative".into()]),
                ),
                Kind::Grammar => (GRAMMAR_PROMPT, OutputConstraint::Grammar(GRAMMAR.into())),
                _ => continue,
            };
            assert!(all.iter().all(|s| text(s) == prompt));
            let first = all.iter().find_map(|s| s.output_constraint.clone());
            assert_eq!(format!("{first:?}"), format!("{:?}", Some(constraint)));
        }
    }

    /// The prompts and grammar are vLLM's string values: the runs of spaces counted in
    /// CPython 3.11.7's `repr` of them, evaluated from vLLM's source.
    #[test]
    fn vllm_strings() {
        let sp = |n: usize| " ".repeat(n);
        assert_eq!(
            REGEX_PROMPT,
            format!(
                "Generate an email address for Alan Turing,{}who works in Enigma. End in .com \
                 and new line.{}Example result: alan.turing@enigma.com\n",
                sp(13),
                sp(17)
            )
        );
        assert_eq!(REGEX, "\\w+@\\w+\\.com\\n");
        assert_eq!(
            GRAMMAR_PROMPT,
            format!(
                "Generate an SQL query to show the 'username'{}and 'email' from the 'users' \
                 table.",
                sp(13)
            )
        );
        let i = sp(8);
        assert_eq!(
            GRAMMAR,
            format!(
                "\n{i}root ::= select_statement\n\n{i}select_statement ::= \"SELECT \" column \
                 \" from \" table \" where \" condition\n\n{i}column ::= \"col_1 \" | \
                 \"col_2 \"\n\n{i}table ::= \"table_1 \" | \"table_2 \"\n\n{i}condition \
                 ::= column \"= \" number\n\n{i}number ::= \"1 \" | \"2 \"\n{i}"
            )
        );
    }

    #[test]
    fn json_prompt_is_pythons_json_dumps() {
        // python3 -c 'import json; s = json.load(open("user_profile.schema.json"));
        //   print("Generate ... schema: " + json.dumps(s))'
        let want = "Generate an example of a brief user profile given the following schema: \
                    {\"title\": \"Brief user profile\", \"type\": \"object\", \
                    \"properties\": {\"name\": {\"type\": \"string\", \
                    \"description\": \"Full name\", \"maxLength\": 40}, \
                    \"age\": {\"type\": \"integer\", \"minimum\": 13, \"maximum\": 120}, \
                    \"email\": {\"type\": \"string\", \"maxLength\": 40}, \
                    \"interests\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \
                    \"maxLength\": 20}, \"minItems\": 1, \"maxItems\": 5}, \
                    \"address\": {\"type\": \"object\", \
                    \"properties\": {\"street\": {\"type\": \"string\", \"maxLength\": 40}, \
                    \"city\": {\"type\": \"string\", \"maxLength\": 30}, \
                    \"country\": {\"type\": \"string\", \"maxLength\": 30}}, \
                    \"required\": [\"street\", \"city\", \"country\"], \
                    \"additionalProperties\": false}}, \"required\": [\"name\", \"age\", \
                    \"email\", \"interests\", \"address\"], \"additionalProperties\": false}";
        // json.dumps(s, separators=(",", ":"))
        let compact = "{\"title\":\"Brief user profile\",\"type\":\"object\",\
                       \"properties\":{\"name\":{\"type\":\"string\",\"description\":\"Full name\",\
                       \"maxLength\":40},\"age\":{\"type\":\"integer\",\"minimum\":13,\
                       \"maximum\":120},\"email\":{\"type\":\"string\",\"maxLength\":40},\
                       \"interests\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\
                       \"maxLength\":20},\"minItems\":1,\"maxItems\":5},\
                       \"address\":{\"type\":\"object\",\
                       \"properties\":{\"street\":{\"type\":\"string\",\"maxLength\":40},\
                       \"city\":{\"type\":\"string\",\"maxLength\":30},\
                       \"country\":{\"type\":\"string\",\"maxLength\":30}},\
                       \"required\":[\"street\",\"city\",\"country\"],\
                       \"additionalProperties\":false}},\"required\":[\"name\",\"age\",\"email\",\
                       \"interests\",\"address\"],\"additionalProperties\":false}";
        let all = drain(Kind::Json, 0, 3, 1.0, 2);
        for spec in &all {
            assert_eq!(text(spec), want);
            let Some(OutputConstraint::JsonSchema(schema)) = &spec.output_constraint else {
                panic!("no schema");
            };
            assert_eq!(schema, compact);
        }
    }

    #[test]
    fn unique_ids_are_stable_for_a_seed_and_distinct_per_request() {
        let a: Vec<String> = (0..500).map(|i| unique_id(7, i)).collect();
        let b: Vec<String> = (0..500).map(|i| unique_id(7, i)).collect();
        assert_eq!(a, b);
        let distinct: HashSet<&String> = a.iter().collect();
        assert_eq!(distinct.len(), a.len());
        assert!((0..500).all(|i| unique_id(8, i) != a[i]));
        for id in &a {
            // uuid4's shape: 8-4-4-4-12 lowercase hex, version 4, variant 10xx.
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(
                parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12]
            );
            assert!(
                id.chars()
                    .all(|c| c == '-' || matches!(c, '0'..='9' | 'a'..='f'))
            );
            assert!(parts[2].starts_with('4'));
            assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        }
    }

    #[test]
    fn json_unique_adds_one_property_per_request() {
        let all = drain(Kind::JsonUnique, 3, 20, 1.0, 6);
        let again = drain(Kind::JsonUnique, 3, 20, 1.0, 6);
        assert_eq!(format!("{all:?}"), format!("{again:?}"));
        let other = drain(Kind::JsonUnique, 4, 20, 1.0, 6);
        let prompts: HashSet<&str> = all.iter().map(text).collect();
        assert_eq!(prompts.len(), 20);
        for (i, spec) in all.iter().enumerate() {
            assert_ne!(text(spec), text(&other[i]));
            let id = unique_id(3, i);
            // The property comes last in the top-level properties, after address.
            let field = format!(
                "}}, \"__optional_field_{id}\": {{\"type\": \"string\", \"description\": \
                 \"An unique optional field to avoid cached schemas\"}}}}, \"required\""
            );
            assert!(text(spec).contains(&field), "{}", text(spec));
            let Some(OutputConstraint::JsonSchema(schema)) = &spec.output_constraint else {
                panic!("no schema");
            };
            let parsed = pyjson::parse(schema).unwrap();
            assert_eq!(
                pyjson::dumps(&parsed),
                text(spec).strip_prefix(JSON_PROMPT).unwrap()
            );
        }
    }

    #[test]
    fn json_unique_creates_properties_when_missing() {
        let schema = pyjson::parse(r#"{"type": "object"}"#).unwrap();
        let with = with_unique_field(&schema, "x").unwrap();
        assert_eq!(
            pyjson::dumps(&with),
            "{\"type\": \"object\", \"properties\": {\"__optional_field_x\": {\"type\": \
             \"string\", \"description\": \"An unique optional field to avoid cached \
             schemas\"}}}"
        );
        let bad = pyjson::parse(r#"{"properties": []}"#).unwrap();
        assert!(Workload::new(Kind::JsonUnique, Some(&bad)).is_err());
        assert!(Workload::new(Kind::Json, Some(&Value::Bool(true))).is_err());
    }
}
