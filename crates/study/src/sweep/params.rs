//! vLLM's parameter files (`--serve-params`, `--bench-params`): a JSON list of objects, or
//! an object whose keys name its objects (each then gets `_benchmark_name`), each object
//! one combination of flags laid over a base command line.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// One combination: flag names (`max_num_seqs` or `max-num-seqs`) to values.
pub type Params = serde_json::Map<String, Value>;

/// The key that names a combination rather than set a flag.
pub const NAME_KEY: &str = "_benchmark_name";

/// Reads a parameter file (see the module's doc). The error names the file.
pub fn read(path: &Path) -> Result<Vec<Params>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    from_value(value).with_context(|| format!("{}", path.display()))
}

/// The combinations of a parameter file's JSON.
pub fn from_value(value: Value) -> Result<Vec<Params>> {
    let combs: Vec<Params> = match value {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Object(map) => Ok(map),
                other => bail!(
                    "item {} of the parameter sweep should be an object, found {}",
                    i + 1,
                    json_type(&other)
                ),
            })
            .collect::<Result<_>>()?,
        Value::Object(named) => named
            .into_iter()
            .map(|(name, item)| match item {
                Value::Object(map) => {
                    let mut comb = Params::new();
                    comb.insert(NAME_KEY.into(), Value::String(name));
                    comb.extend(map);
                    Ok(comb)
                }
                other => bail!(
                    "{name:?} of the parameter sweep should be an object, found {}",
                    json_type(&other)
                ),
            })
            .collect::<Result<_>>()?,
        other => bail!(
            "the parameter sweep should be a list of objects, found {}",
            json_type(&other)
        ),
    };
    let mut names: Vec<&str> = combs
        .iter()
        .filter_map(|c| c.get(NAME_KEY).and_then(Value::as_str))
        .collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!(
            "duplicate {NAME_KEY} {:?}: every {NAME_KEY} must be unique",
            w[0]
        );
    }
    Ok(combs)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A value as Python's `str()` writes it (what vLLM puts on the command line and in
/// names): strings as they are, floats in `repr`, booleans `True`/`False`, JSON else.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .map_or_else(|| n.to_string(), bench_core::pyjson::float_repr),
        other => other.to_string(),
    }
}

/// `k=v` pairs joined by `sep`, without the name key.
pub fn as_text(comb: &Params, sep: &str) -> String {
    comb.iter()
        .filter(|(k, _)| *k != NAME_KEY)
        .map(|(k, v)| format!("{k}={}", value_text(v)))
        .collect::<Vec<_>>()
        .join(sep)
}

/// The combination's name: its `_benchmark_name`, else its pairs joined by `-`.
pub fn name(comb: &Params) -> String {
    match comb.get(NAME_KEY) {
        Some(v) => value_text(v),
        None => as_text(comb, "-"),
    }
}

/// vLLM's `sanitize_filename`: no `/` and no `..` in a name made from values.
pub fn sanitize_filename(s: &str) -> String {
    s.replace('/', "_").replace("..", "__")
}

/// The spellings a key may have: as written, with `_`, with `-` (only the part before a
/// `.` changes: inner config keys are not converted by the CLI).
fn key_candidates(key: &str) -> Vec<String> {
    if let Some((prefix, rest)) = key.split_once('.') {
        return key_candidates(prefix)
            .into_iter()
            .map(|p| format!("{p}.{rest}"))
            .collect();
    }
    vec![key.to_owned(), key.replace('-', "_"), key.replace('_', "-")]
}

/// The flags a key may be on the command line, the preferred (`-`) first.
fn flag_candidates(key: &str) -> Vec<String> {
    key_candidates(key)
        .into_iter()
        .rev()
        .map(|k| format!("--{k}"))
        .collect()
}

/// Whether `comb` sets `key` under any spelling.
pub fn has_param(comb: &Params, key: &str) -> bool {
    key_candidates(key).iter().any(|k| comb.contains_key(k))
}

/// The argument(s) that set `key` to `value`: `--flag VALUE`; a boolean is `--flag` or
/// `--no-flag` (`--a.b=true` for an inner key); an object is its JSON.
fn flag_args(key: &str, value: &Value) -> Vec<String> {
    let flag = |k: &str| flag_candidates(k).swap_remove(0);
    match value {
        Value::Bool(b) if key.contains('.') => vec![format!("{}={b}", flag(key))],
        Value::Bool(true) => vec![flag(key)],
        Value::Bool(false) => vec![flag(&format!("no-{key}"))],
        Value::Object(_) => vec![flag(key), value.to_string()],
        other => vec![flag(key), value_text(other)],
    }
}

/// `cmd` with `comb` laid over it, as vLLM's `apply_to_cmd`: a flag already there (under
/// any spelling) has its value replaced in place, others are appended.
pub fn apply_to_cmd(comb: &Params, cmd: &[String]) -> Vec<String> {
    let mut cmd = cmd.to_vec();
    for (key, value) in comb.iter().filter(|(k, _)| *k != NAME_KEY) {
        let args = flag_args(key, value);
        let at = flag_candidates(key)
            .iter()
            .find_map(|f| cmd.iter().position(|a| a == f));
        match at {
            Some(i) => {
                cmd[i].clone_from(&args[0]);
                if let Some(v) = args.get(1) {
                    match cmd.get_mut(i + 1) {
                        Some(slot) => slot.clone_from(v),
                        None => cmd.push(v.clone()),
                    }
                }
            }
            None => cmd.extend(args),
        }
    }
    cmd
}

/// `--link-vars`: `serve_key=bench_key,...`.
pub fn parse_link_vars(s: &str) -> Result<Vec<(String, String)>> {
    s.split(',')
        .filter(|item| !item.trim().is_empty())
        .map(|item| match item.split_once('=') {
            Some((a, b)) => Ok((a.trim().to_owned(), b.trim().to_owned())),
            None => bail!("{item:?} is not SERVE_KEY=BENCH_KEY"),
        })
        .collect()
}

/// Whether a serve and a bench combination agree on every linked pair (vLLM skips those
/// that do not).
pub fn linked(serve: &Params, bench: &Params, links: &[(String, String)]) -> bool {
    links
        .iter()
        .all(|(s, b)| match (serve.get(s), bench.get(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn comb(v: Value) -> Params {
        v.as_object().unwrap().clone()
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn lists_and_named_objects_are_read() {
        let list = from_value(json!([{"a": 1}, {"b": "x"}])).unwrap();
        assert_eq!(list.len(), 2);
        let named = from_value(json!({"small": {"a": 1}, "big": {"a": 2}})).unwrap();
        assert_eq!(name(&named[0]), "small");
        assert_eq!(named[1]["a"], json!(2));
        let err = from_value(json!([{"_benchmark_name": "x"}, {"_benchmark_name": "x"}]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate _benchmark_name \"x\""), "{err}");
        let err = from_value(json!([1])).unwrap_err().to_string();
        assert!(err.contains("item 1"), "{err}");
    }

    #[test]
    fn names_follow_python_str() {
        let c = comb(json!({"max_num_seqs": 32, "rate": 1.0, "flag": true, "m": "a/b"}));
        assert_eq!(name(&c), "max_num_seqs=32-rate=1.0-flag=True-m=a/b");
        assert_eq!(
            sanitize_filename(&format!("SERVE--{}", name(&c))),
            "SERVE--max_num_seqs=32-rate=1.0-flag=True-m=a_b"
        );
        assert_eq!(
            as_text(&comb(json!({"_benchmark_name": "n", "a": 1})), ", "),
            "a=1"
        );
    }

    #[test]
    fn apply_replaces_existing_flags_and_appends_new_ones() {
        let cmd = argv("serve --max-num-seqs 8 --enforce-eager --model m");
        let c = comb(json!({
            "max_num_seqs": 32,
            "enforce_eager": false,
            "max-model-len": 1024,
            "prefix_caching": true,
            "compilation_config": {"level": 3},
            "kv.enable": true,
            "_benchmark_name": "ignored",
        }));
        assert_eq!(
            apply_to_cmd(&c, &cmd),
            [
                "serve",
                "--max-num-seqs",
                "32",
                "--no-enforce-eager",
                "--model",
                "m",
                "--max-model-len",
                "1024",
                "--prefix-caching",
                "--compilation-config",
                r#"{"level":3}"#,
                "--kv.enable=true",
            ]
        );
        assert!(has_param(
            &comb(json!({"max-concurrency": 2})),
            "max_concurrency"
        ));
        assert!(!has_param(
            &comb(json!({"request_rate": 2})),
            "max_concurrency"
        ));
    }

    #[test]
    fn link_vars_pair_serve_and_bench_keys() {
        let links = parse_link_vars("max_num_seqs=max_concurrency, a = b").unwrap();
        assert_eq!(links[1], ("a".into(), "b".into()));
        let serve = comb(json!({"max_num_seqs": 8, "a": 1}));
        assert!(linked(
            &serve,
            &comb(json!({"max_concurrency": 8, "b": 1})),
            &links
        ));
        assert!(!linked(
            &serve,
            &comb(json!({"max_concurrency": 4, "b": 1})),
            &links
        ));
        assert!(parse_link_vars("nope").is_err());
        assert!(parse_link_vars("").unwrap().is_empty());
    }
}
