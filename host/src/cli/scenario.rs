//! Scenario files: `bench serve --config scenario.toml` reads the run's flags from a TOML
//! file, plugin flags included, so that a benchmark can be kept, reviewed and rerun as a
//! file instead of a shell line.
//!
//! A key is a flag's long name without its dashes (`random-input-len`, or
//! `random_input_len`); its value is a string, number or boolean, or an array for a flag
//! that takes several values (`metadata = ["a=1", "b=2"]`). A boolean sets a switch
//! (`true` gives it, `false` leaves it out). The file becomes command-line tokens inserted
//! right after the subcommand, so that clap, the plugin-flag machinery
//! (`plugin_flags::parse`) and every check after them see one command line, whatever wrote
//! it. A key whose flag the command line gives too is dropped (the command line wins, a
//! list as a whole), and so is one that conflicts with a flag the command line gives
//! (`workers` in the file, `--shard` from `--workers`' own client processes).
//!
//! Every key is checked before clap sees it, against the flags of the command and of the
//! plugins the file and the command line choose, so that a mistake is reported with the
//! file and the line it is on, not as a flag nobody typed.
//!
//! `--dry-run` prints the resolved configuration (each flag given, and where from) as
//! TOML, itself a scenario file, and sends nothing; a run records the scenario in its
//! result (`scenario`: the file, its SHA-256 and the resolved flags).

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Arg, ArgAction, Args, Command};
use sha2::{Digest, Sha256};
use toml_edit::Item;

use super::plugin_flags::{NATIVE_BACKEND, PluginChoice, PluginFlags, Role};
use crate::runtime::PluginInfo;

/// `--config` and `--dry-run`, and what they resolved to (filled in by [`expand`]'s
/// caller after parsing, so that every path to `serve::run` carries it with the flags).
#[derive(Args, Debug, Clone, Default)]
pub struct ScenarioArgs {
    /// A scenario file (TOML) holding flags of this command, plugin flags included; flags
    /// on the command line win over it.
    ///
    /// Each key is a flag's long name without the dashes; a switch takes true or false, a
    /// repeatable flag an array. Unknown keys are errors naming the file and line. The
    /// result records the file, its SHA-256 and the resolved flags (`scenario`). Example,
    /// run as `bench serve --config short.toml --base-url http://gpu1:8000`:
    ///
    ///   dataset-name = "random"
    ///   random-input-len = 128
    ///   num-prompts = 200
    ///   max-concurrency = 8
    ///   metadata = ["team=infra"]
    ///
    /// See docs/scenarios.md and examples/scenarios/.
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    pub config: Option<PathBuf>,

    /// Print the resolved configuration (every flag given by --config or the command line,
    /// and where from) as TOML and exit, sending nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// What the file and the command line resolved to; set after parsing.
    #[arg(skip)]
    pub resolution: Option<Resolution>,
}

impl ScenarioArgs {
    /// The result's `scenario` key, when the run has a scenario file.
    pub fn record(&self) -> Option<(String, serde_json::Value)> {
        let resolution = self.resolution.as_ref()?;
        let file = resolution.file.as_ref()?;
        let resolved: serde_json::Map<String, serde_json::Value> = resolution
            .settings
            .iter()
            .map(|s| {
                // Secrets travel in headers: the result is shared, as `args` keeps them out.
                let value = match s.flag.as_str() {
                    "header" | "otlp_header" => serde_json::json!("<redacted>"),
                    _ => s.value.to_json(),
                };
                (s.flag.clone(), value)
            })
            .collect();
        Some((
            "scenario".to_owned(),
            serde_json::json!({
                "file": file.path.display().to_string(),
                "sha256": file.sha256,
                "resolved": resolved,
            }),
        ))
    }
}

/// One value as the file or the command line gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Integer(i64),
    Float(f64),
    Text(String),
}

/// A flag's value: one, or a repeatable flag's several, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    One(Scalar),
    List(Vec<Scalar>),
}

impl Scalar {
    /// A command-line value, a number where it is one written as a number is written, so
    /// that the file's values and the command line's read alike (`"007"` stays text).
    fn typed(text: String) -> Scalar {
        if let Ok(i) = text.parse::<i64>()
            && i.to_string() == text
        {
            return Scalar::Integer(i);
        }
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() && x.to_string() == text => Scalar::Float(x),
            _ => Scalar::Text(text),
        }
    }

    /// The value as a command-line argument.
    fn text(&self) -> String {
        match self {
            Scalar::Bool(b) => b.to_string(),
            Scalar::Integer(i) => i.to_string(),
            Scalar::Float(x) => x.to_string(),
            Scalar::Text(s) => s.clone(),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self {
            Scalar::Bool(b) => serde_json::json!(b),
            Scalar::Integer(i) => serde_json::json!(i),
            // JSON has no infinity: `inf` is written as the flag takes it.
            Scalar::Float(x) if !x.is_finite() => serde_json::json!(x.to_string()),
            Scalar::Float(x) => serde_json::json!(x),
            Scalar::Text(s) => serde_json::json!(s),
        }
    }

    fn to_toml(&self) -> toml_edit::Value {
        match self {
            Scalar::Bool(b) => (*b).into(),
            Scalar::Integer(i) => (*i).into(),
            Scalar::Float(x) => (*x).into(),
            Scalar::Text(s) => s.as_str().into(),
        }
    }

    /// One TOML value that a flag can take, or what is wrong with it.
    fn from_toml(value: &toml_edit::Value) -> Result<Scalar, Problem> {
        Ok(match value {
            toml_edit::Value::String(s) => Scalar::Text(s.value().clone()),
            toml_edit::Value::Integer(i) => Scalar::Integer(*i.value()),
            toml_edit::Value::Float(x) => Scalar::Float(*x.value()),
            toml_edit::Value::Boolean(b) => Scalar::Bool(*b.value()),
            toml_edit::Value::Array(_) => {
                return Err(Problem::NotAFlagValue("an array in an array"));
            }
            toml_edit::Value::Datetime(_) => return Err(Problem::NotAFlagValue("a date")),
            toml_edit::Value::InlineTable(_) => return Err(Problem::NotAFlagValue("a table")),
        })
    }
}

impl Value {
    const TRUE: Value = Value::One(Scalar::Bool(true));

    fn to_json(&self) -> serde_json::Value {
        match self {
            Value::One(one) => one.to_json(),
            Value::List(items) => items.iter().map(Scalar::to_json).collect(),
        }
    }

    fn to_toml(&self) -> toml_edit::Value {
        match self {
            Value::One(one) => one.to_toml(),
            Value::List(items) => items
                .iter()
                .map(Scalar::to_toml)
                .collect::<toml_edit::Array>()
                .into(),
        }
    }

    /// A TOML key's value, or what is wrong with it.
    fn from_toml(value: &toml_edit::Value) -> Result<Value, Problem> {
        match value {
            toml_edit::Value::Array(items) => items
                .iter()
                .map(Scalar::from_toml)
                .collect::<Result<_, _>>()
                .map(Value::List),
            one => Scalar::from_toml(one).map(Value::One),
        }
    }
}

/// Where a resolved flag came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The scenario file, at this line (from 1).
    File {
        line: usize,
    },
    CommandLine,
}

/// One flag as resolved: its long name without dashes, its value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub flag: String,
    pub value: Value,
    pub source: Source,
}

/// The scenario file as read.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioFile {
    pub path: PathBuf,
    /// Hex SHA-256 of the file's bytes: which version of the file a result came from.
    pub sha256: String,
}

/// The configuration a command line and its scenario file resolve to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolution {
    /// None when `--dry-run` was given without `--config`.
    pub file: Option<ScenarioFile>,
    /// The flags given, the file's first (in its order), then the command line's.
    pub settings: Vec<Setting>,
    /// The plugins chosen, by role (`dataset`, `backend`), as named or by default.
    pub plugins: Vec<(&'static str, String)>,
}

impl Resolution {
    /// The resolved configuration as a scenario file: every flag given, with where it came
    /// from as a comment, and the plugins chosen.
    pub fn to_toml(&self) -> String {
        let mut out = String::from("# bench serve --dry-run: the resolved configuration\n");
        if let Some(file) = &self.file {
            out.push_str(&format!(
                "# scenario: {} (sha256 {})\n",
                file.path.display(),
                file.sha256
            ));
        }
        let plugins: Vec<String> = self
            .plugins
            .iter()
            .map(|(role, name)| format!("{role} {name}"))
            .collect();
        out.push_str(&format!("# plugins: {}\n", plugins.join(", ")));
        for s in &self.settings {
            let from = match s.source {
                Source::File { line } => format!("file, line {line}"),
                Source::CommandLine => "command line".to_owned(),
            };
            // Flags are bare TOML keys (letters, digits and dashes).
            out.push_str(&format!("{} = {}  # {from}\n", s.flag, s.value.to_toml()));
        }
        out
    }
}

/// What is wrong with a scenario file, and where.
#[derive(Debug)]
pub struct ScenarioError {
    pub file: PathBuf,
    /// The line (from 1), when the problem is on one.
    pub line: Option<usize>,
    pub problem: Problem,
}

/// The kinds of mistake a scenario file can hold.
#[derive(Debug)]
pub enum Problem {
    Unreadable(std::io::Error),
    /// Not TOML: the parser's message.
    Toml(String),
    /// No flag of the command or its plugins has this name; the nearest one, if close.
    UnknownKey {
        key: String,
        suggestion: Option<String>,
    },
    /// A key naming `--config`, `--help` or `--version`, which are not settings of a run.
    NotASetting(String),
    /// A switch given something other than true or false.
    SwitchNeedsBool(String),
    /// A flag that takes a value given a boolean.
    NeedsValue(String),
    /// A flag that takes one value given an array.
    TakesOneValue(String),
    /// A value no flag takes (a table, a date, ...).
    NotAFlagValue(&'static str),
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        write!(f, ": ")?;
        match &self.problem {
            // The cause follows as the error's source.
            Problem::Unreadable(_) => write!(f, "cannot read the scenario file"),
            Problem::Toml(message) => write!(f, "not valid TOML: {message}"),
            Problem::UnknownKey { key, suggestion } => {
                write!(f, "unknown key `{key}`")?;
                match suggestion {
                    Some(s) => write!(f, " (did you mean `{s}`?)"),
                    None => write!(f, " (keys are the command's flags without the dashes)"),
                }
            }
            Problem::NotASetting(key) => {
                write!(
                    f,
                    "`{key}` is not a setting of a run and cannot be in a scenario file"
                )
            }
            Problem::SwitchNeedsBool(key) => write!(f, "`{key}` is a switch: true or false"),
            Problem::NeedsValue(key) => {
                write!(f, "`{key}` takes a value, not true or false")
            }
            Problem::TakesOneValue(key) => write!(f, "`{key}` takes one value, not an array"),
            Problem::NotAFlagValue(what) => {
                write!(
                    f,
                    "a flag's value is a string, number, boolean or array, not {what}"
                )
            }
        }
    }
}

impl std::error::Error for ScenarioError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            Problem::Unreadable(e) => Some(e),
            _ => None,
        }
    }
}

/// One key of the file: the flag it names (canonical long name), its value, its line.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    flag: String,
    value: Value,
    line: usize,
}

/// A command line with its scenario file's flags in it, and what they resolve to.
#[derive(Debug)]
pub struct Expanded {
    pub argv: Vec<String>,
    /// None when the command line has neither `--config` nor `--dry-run`, or runs a
    /// subcommand other than `serve`: the command line is then left as it was.
    pub resolution: Option<Resolution>,
}

/// Expands `argv` (program name first) with the scenario file of its `--config`, when it
/// runs `serve` (or the bare form). `serve` is the subcommand's command as clap builds it;
/// `describe` gives a plugin's options (for its flags), `builtins` are the first-party
/// plugins (whose flags a vLLM command line may give whatever the dataset: accepted, and
/// warned about later, as on the command line).
pub fn expand(
    argv: &[String],
    serve: &Command,
    describe: &mut dyn FnMut(Role, &str) -> Result<PluginInfo>,
    builtins: &[(Role, &'static str)],
) -> Result<Expanded> {
    let unchanged = || Expanded {
        argv: argv.to_vec(),
        resolution: None,
    };
    // Where the subcommand's flags start: after `serve`, or at once in the bare form.
    let start = match argv.get(1).map(String::as_str) {
        Some("serve") => 2,
        Some(a) if a.starts_with('-') => 1,
        _ => return Ok(unchanged()),
    };
    let typed = &argv[start..];
    let groups = command_line_groups(typed);
    let named = |flag: &str| groups.iter().any(|(f, _)| f == flag);
    if !named("config") && !named("dry-run") {
        return Ok(unchanged());
    }
    let config = groups
        .iter()
        .rev()
        .find(|(f, _)| f == "config")
        .and_then(|(_, v)| v.first().cloned());
    let (file, entries) = match &config {
        Some(path) => {
            let (file, entries) = read(Path::new(path))?;
            (Some(file), entries)
        }
        None => (None, Vec::new()),
    };
    let file_path = file.as_ref().map(|f| f.path.clone()).unwrap_or_default();
    let mut known = Known::new(serve, &entries, typed, describe)?;
    let mut entries = entries;
    for entry in &mut entries {
        let flag = known
            .check(entry, describe, builtins)?
            .map_err(|problem| ScenarioError {
                file: file_path.clone(),
                line: Some(entry.line),
                problem,
            })?;
        entry.flag = flag;
    }
    let given: Vec<String> = groups.iter().map(|(f, _)| known.canonical(f)).collect();
    let kept: Vec<Entry> = entries
        .into_iter()
        .filter(|e| !given.iter().any(|g| known.beats(g, &e.flag)))
        .collect();
    let mut settings: Vec<Setting> = kept
        .iter()
        .filter(|e| e.value != Value::One(Scalar::Bool(false)))
        .map(|e| Setting {
            flag: e.flag.clone(),
            value: e.value.clone(),
            source: Source::File { line: e.line },
        })
        .collect();
    settings.extend(typed_settings(&groups, |f| known.canonical(f)));
    let mut out = argv[..start].to_vec();
    out.extend(kept.iter().flat_map(tokens));
    out.extend(typed.iter().cloned());
    Ok(Expanded {
        argv: out,
        resolution: Some(Resolution {
            file,
            settings,
            plugins: known.plugins,
        }),
    })
}

/// The flags a scenario's keys are checked against: the subcommand's, the chosen
/// plugins', and (looked up only when a key needs them) the other first-party plugins'.
struct Known {
    cmd: Command,
    flags: PluginFlags,
    /// The chosen plugin per role (`dataset`, `backend`).
    plugins: Vec<(&'static str, String)>,
    foreign_added: bool,
}

impl Known {
    /// `serve` with the flags of the plugins that the file and the command line choose
    /// (the command line's last, so it wins).
    fn new(
        serve: &Command,
        entries: &[Entry],
        typed: &[String],
        describe: &mut dyn FnMut(Role, &str) -> Result<PluginInfo>,
    ) -> Result<Known> {
        let file_tokens: Vec<String> = entries.iter().flat_map(tokens).collect();
        let all: Vec<&String> = file_tokens.iter().chain(typed).collect();
        let choice = PluginChoice::scan(&all);
        let mut known = Known {
            cmd: serve.clone(),
            flags: PluginFlags::default(),
            plugins: Vec::new(),
            foreign_added: false,
        };
        for (role, key, named, id) in [
            (Role::Dataset, "dataset", choice.dataset, "dataset_name"),
            (Role::Backend, "backend", choice.backend, "backend"),
        ] {
            let name = named.unwrap_or_else(|| default_of(&known.cmd, id));
            known.plugins.push((key, name.clone()));
            if role == Role::Backend && name == NATIVE_BACKEND {
                continue;
            }
            let info = describe(role, &name)?;
            known.cmd = known.flags.add(known.cmd, role, &name, &info)?;
        }
        Ok(known)
    }

    /// The canonical flag of a key (its long name, an alias resolved), or what is wrong
    /// with the key; the outer error is a plugin that could not be described.
    fn check(
        &mut self,
        entry: &Entry,
        describe: &mut dyn FnMut(Role, &str) -> Result<PluginInfo>,
        builtins: &[(Role, &'static str)],
    ) -> Result<Result<String, Problem>> {
        if find_arg(&self.cmd, &entry.flag).is_none() && !self.foreign_added {
            self.foreign_added = true;
            for &(role, name) in builtins {
                if self.plugins.iter().any(|(_, chosen)| chosen == name) {
                    continue;
                }
                let info = describe(role, name)?;
                let cmd = std::mem::take(&mut self.cmd);
                self.cmd = self.flags.add_foreign(cmd, role, name, &info);
            }
        }
        Ok(check(&self.cmd, entry).map(|arg| arg.get_long().unwrap_or(&entry.flag).to_owned()))
    }

    /// A flag as typed, by its canonical name (an alias as its flag).
    fn canonical(&self, flag: &str) -> String {
        find_arg(&self.cmd, flag)
            .and_then(Arg::get_long)
            .unwrap_or(flag)
            .to_owned()
    }

    /// Whether the command line's flag `given` drops the file's `key`: the same flag, or
    /// one of two flags that conflict.
    fn beats(&self, given: &str, key: &str) -> bool {
        given == key
            || match (find_arg(&self.cmd, given), find_arg(&self.cmd, key)) {
                (Some(a), Some(b)) => conflict(&self.cmd, a, b) || conflict(&self.cmd, b, a),
                _ => false,
            }
    }
}

/// The command line's settings (but `--config` and `--dry-run`, which are not settings
/// of the run): a flag given several times, or several values at once, is one list.
fn typed_settings(
    groups: &[(String, Vec<String>)],
    canonical: impl Fn(&str) -> String,
) -> Vec<Setting> {
    let mut typed: Vec<(String, Vec<String>)> = Vec::new();
    for (flag, values) in groups {
        let flag = canonical(flag);
        if flag == "config" || flag == "dry-run" {
            continue;
        }
        match typed.iter_mut().find(|(f, _)| *f == flag) {
            Some((_, all)) => all.extend(values.iter().cloned()),
            None => typed.push((flag, values.clone())),
        }
    }
    typed
        .into_iter()
        .map(|(flag, values)| {
            let mut values: Vec<Scalar> = values.into_iter().map(Scalar::typed).collect();
            Setting {
                flag,
                value: match values.len() {
                    0 => Value::TRUE,
                    1 => Value::One(values.remove(0)),
                    _ => Value::List(values),
                },
                source: Source::CommandLine,
            }
        })
        .collect()
}

/// Reads and parses a scenario file into its keys, each with its line.
fn read(path: &Path) -> Result<(ScenarioFile, Vec<Entry>), ScenarioError> {
    let error = |line, problem| ScenarioError {
        file: path.to_owned(),
        line,
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| error(None, Problem::Unreadable(e)))?;
    let text = String::from_utf8_lossy(&bytes);
    let entries = parse(&text).map_err(|(line, problem)| error(line, problem))?;
    let file = ScenarioFile {
        path: path.to_owned(),
        sha256: Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    };
    Ok((file, entries))
}

/// The keys of a scenario file's text, in order, each with its line (from 1); an error
/// gives the line it is on.
fn parse(text: &str) -> Result<Vec<Entry>, (Option<usize>, Problem)> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        (
            e.span().map(|s| line_of(s.start)),
            Problem::Toml(e.message().trim().to_owned()),
        )
    })?;
    let table = doc.as_table();
    let mut entries = Vec::new();
    for (key, item) in table.iter() {
        let span = table
            .key(key)
            .and_then(toml_edit::Key::span)
            .or_else(|| item.span());
        let line = span.map_or(0, |s| line_of(s.start));
        let value = match item {
            Item::Value(v) => Value::from_toml(v),
            _ => Err(Problem::NotAFlagValue("a table")),
        }
        .map_err(|problem| (Some(line), problem))?;
        entries.push(Entry {
            flag: key.replace('_', "-"),
            value,
            line,
        });
    }
    Ok(entries)
}

/// The command-line tokens of one key: `--flag=value` per value (so that a value starting
/// with a dash stays a value), the bare flag for `true`, nothing for `false`.
fn tokens(entry: &Entry) -> Vec<String> {
    let flag = &entry.flag;
    match &entry.value {
        Value::One(Scalar::Bool(true)) => vec![format!("--{flag}")],
        Value::One(Scalar::Bool(false)) => Vec::new(),
        Value::One(one) => vec![format!("--{flag}={}", one.text())],
        Value::List(items) => items
            .iter()
            .map(|v| format!("--{flag}={}", v.text()))
            .collect(),
    }
}

/// The argument a key names, when its value fits it.
fn check<'c>(cmd: &'c Command, entry: &Entry) -> Result<&'c Arg, Problem> {
    let Some(arg) = find_arg(cmd, &entry.flag) else {
        let suggestion = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(Arg::get_long)
            .map(|long| (strsim::jaro_winkler(&entry.flag, long), long))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, long)| long.to_owned());
        return Err(Problem::UnknownKey {
            key: entry.flag.clone(),
            suggestion,
        });
    };
    let name = || entry.flag.clone();
    if entry.flag == "config"
        || matches!(
            arg.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
    {
        return Err(Problem::NotASetting(name()));
    }
    let takes_values = arg.get_action().takes_values();
    let many = matches!(arg.get_action(), ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    match &entry.value {
        Value::One(Scalar::Bool(_)) if takes_values => Err(Problem::NeedsValue(name())),
        Value::One(Scalar::Bool(_)) => Ok(arg),
        _ if !takes_values => Err(Problem::SwitchNeedsBool(name())),
        Value::List(_) if !many => Err(Problem::TakesOneValue(name())),
        _ => Ok(arg),
    }
}

/// The argument with this long name or alias (without dashes).
fn find_arg<'c>(cmd: &'c Command, flag: &str) -> Option<&'c Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long() == Some(flag) || a.get_all_aliases().is_some_and(|all| all.contains(&flag))
    })
}

/// Whether `a` declares a conflict with `b`.
fn conflict(cmd: &Command, a: &Arg, b: &Arg) -> bool {
    cmd.get_arg_conflicts_with(a)
        .iter()
        .any(|c| c.get_id() == b.get_id())
}

/// The default value of the argument `id` (the default plugins).
fn default_of(cmd: &Command, id: &str) -> String {
    cmd.get_arguments()
        .find(|a| a.get_id() == id)
        .and_then(|a| a.get_default_values().first())
        .and_then(|v| v.to_str())
        .unwrap_or_default()
        .to_owned()
}

/// The command line's flags (long names without dashes, as typed) with the values that
/// follow each, up to `--`. Short flags (`-h`) are left to clap.
fn command_line_groups(typed: &[String]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for token in typed {
        if token == "--" {
            break;
        }
        if let Some(long) = token.strip_prefix("--") {
            match long.split_once('=') {
                Some((flag, value)) => groups.push((flag.to_owned(), vec![value.to_owned()])),
                None => groups.push((long.to_owned(), Vec::new())),
            }
        } else if let Some((_, values)) = groups.last_mut()
            && !is_short_flag(token)
        {
            values.push(token.clone());
        }
    }
    groups
}

/// `-h`, not a negative number.
fn is_short_flag(token: &str) -> bool {
    token
        .strip_prefix('-')
        .and_then(|t| t.chars().next())
        .is_some_and(char::is_alphabetic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{OptionInfo, OptionKind};

    /// A stand-in for `serve`: a few of its flags, with the same kinds of argument.
    fn serve() -> Command {
        Command::new("serve")
            .arg(Arg::new("num_prompts").long("num-prompts"))
            .arg(Arg::new("max_concurrency").long("max-concurrency"))
            .arg(Arg::new("request_rate").long("request-rate"))
            .arg(
                Arg::new("dataset_name")
                    .long("dataset-name")
                    .alias("plugin")
                    .default_value("lines"),
            )
            .arg(
                Arg::new("backend")
                    .long("backend")
                    .default_value(NATIVE_BACKEND),
            )
            .arg(
                Arg::new("metadata")
                    .long("metadata")
                    .action(ArgAction::Append),
            )
            .arg(
                Arg::new("header")
                    .long("header")
                    .num_args(1..)
                    .action(ArgAction::Append),
            )
            .arg(
                Arg::new("save_result")
                    .long("save-result")
                    .action(ArgAction::SetTrue),
            )
            .arg(Arg::new("shard").long("shard"))
            .arg(Arg::new("workers").long("workers").conflicts_with("shard"))
            .arg(Arg::new("config").long("config"))
            .arg(
                Arg::new("dry_run")
                    .long("dry-run")
                    .action(ArgAction::SetTrue),
            )
    }

    /// A dataset plugin `name` with one option whose flag is `--<name>-len`.
    fn plugin(name: &str) -> PluginInfo {
        PluginInfo {
            name: name.into(),
            version: "0.1.0".into(),
            description: String::new(),
            options: vec![OptionInfo {
                name: "len".into(),
                description: "a length".into(),
                default_value: None,
                required: false,
                cli_flag: Some(format!("{name}-len")),
                kind: OptionKind::Count,
                choices: vec![],
                shared_flags: vec![],
            }],
        }
    }

    /// A scenario file holding `text`, in a folder removed with the returned guard.
    fn file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scenario.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path.display().to_string())
    }

    /// `expand` of `bench serve ARGS`, with the plugins it described.
    fn run(args: &[&str]) -> (Result<Expanded>, Vec<String>) {
        let mut described = Vec::new();
        let mut describe = |_: Role, name: &str| -> Result<PluginInfo> {
            described.push(name.to_owned());
            Ok(plugin(name))
        };
        let argv: Vec<String> = ["bench", "serve"]
            .iter()
            .chain(args)
            .map(|s| s.to_string())
            .collect();
        let builtins = [(Role::Dataset, "other")];
        let out = expand(&argv, &serve(), &mut describe, &builtins);
        (out, described)
    }

    /// The arguments after `bench serve` that a scenario expands to.
    fn expanded(text: &str, args: &[&str]) -> (Vec<String>, Resolution) {
        let (_dir, path) = file(text);
        let mut all = vec!["--config", &path];
        all.extend(args);
        let out = run(&all).0.unwrap();
        let mut argv = out.argv[2..].to_vec();
        argv.retain(|a| *a != path && a != "--config");
        (argv, out.resolution.unwrap())
    }

    /// The scenario error of a file, with its line.
    fn error(text: &str) -> ScenarioError {
        let (_dir, path) = file(text);
        let e = run(&["--config", &path]).0.unwrap_err();
        let message = format!("{e:#}");
        let e = e.downcast::<ScenarioError>().unwrap();
        assert!(message.starts_with(&path), "{message}");
        e
    }

    #[test]
    fn keys_become_flags_after_the_subcommand() {
        let (argv, _) = expanded(
            "num_prompts = 5\nrequest-rate = 2.5\nplugin = \"lines\"\nmetadata = [\"a=1\", \"b=-2\"]\n\
             save-result = true\nlines-len = 7\n",
            &[],
        );
        assert_eq!(
            argv,
            [
                "--num-prompts=5",
                "--request-rate=2.5",
                "--dataset-name=lines",
                "--metadata=a=1",
                "--metadata=b=-2",
                "--save-result",
                "--lines-len=7",
            ]
        );
    }

    #[test]
    fn switches_take_true_or_false_and_false_leaves_them_out() {
        let (argv, resolution) = expanded("save-result = false\nnum-prompts = 3\n", &[]);
        assert_eq!(argv, ["--num-prompts=3"]);
        assert!(resolution.settings.iter().all(|s| s.flag != "save-result"));
        let e = error("num-prompts = 3\nsave-result = \"yes\"\n");
        assert_eq!(e.line, Some(2));
        assert!(matches!(e.problem, Problem::SwitchNeedsBool(ref k) if k == "save-result"));
        let e = error("num-prompts = true\n");
        assert!(matches!(e.problem, Problem::NeedsValue(ref k) if k == "num-prompts"));
    }

    #[test]
    fn the_command_line_wins_for_one_value_and_for_a_list() {
        let text = "num-prompts = 5\nmax-concurrency = 2\nmetadata = [\"a=1\", \"b=2\"]\n";
        let (argv, resolution) = expanded(text, &["--num-prompts", "9", "--metadata=c=3"]);
        assert_eq!(
            argv,
            [
                "--max-concurrency=2",
                "--num-prompts",
                "9",
                "--metadata=c=3"
            ]
        );
        let setting = |flag: &str| {
            resolution
                .settings
                .iter()
                .find(|s| s.flag == flag)
                .cloned()
                .unwrap()
        };
        assert_eq!(setting("num-prompts").source, Source::CommandLine);
        assert_eq!(setting("num-prompts").value, Value::One(Scalar::Integer(9)));
        assert_eq!(
            setting("metadata").value,
            Value::One(Scalar::Text("c=3".into()))
        );
        assert_eq!(setting("max-concurrency").source, Source::File { line: 2 });
        // An alias on the command line beats the flag's own name in the file.
        let (argv, _) = expanded("dataset-name = \"lines\"\n", &["--plugin", "other"]);
        assert_eq!(argv, ["--plugin", "other"]);
    }

    #[test]
    fn a_key_conflicting_with_a_command_line_flag_is_dropped() {
        // `--workers` runs its client processes with the same file and `--shard` added.
        let (argv, _) = expanded("workers = 2\nnum-prompts = 4\n", &["--shard=0/2"]);
        assert_eq!(argv, ["--num-prompts=4", "--shard=0/2"]);
    }

    #[test]
    fn an_unknown_key_names_its_line_and_the_nearest_flag() {
        let e = error("num-prompts = 5\n\n# lengths\nlines-lenn = 3\n");
        assert_eq!(e.line, Some(4));
        match &e.problem {
            Problem::UnknownKey { key, suggestion } => {
                assert_eq!(key, "lines-lenn");
                assert_eq!(suggestion.as_deref(), Some("lines-len"));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            e.to_string()
                .ends_with("line 4: unknown key `lines-lenn` (did you mean `lines-len`?)")
        );
        let e = error("zzz = 1\n");
        assert!(matches!(
            e.problem,
            Problem::UnknownKey {
                suggestion: None,
                ..
            }
        ));
    }

    #[test]
    fn the_plugin_the_file_names_gives_its_flags_and_others_are_looked_up_when_needed() {
        let (_dir, path) = file("dataset-name = \"mine\"\nmine-len = 4\n");
        let (out, described) = run(&["--config", &path]);
        assert!(out.is_ok());
        assert_eq!(described, ["mine"]);
        // A first-party plugin's flag is accepted whatever the dataset, as on the command
        // line (where it is then warned about).
        let (_dir, path) = file("other-len = 4\n");
        let (out, described) = run(&["--config", &path]);
        assert_eq!(out.unwrap().argv[2], "--other-len=4");
        assert_eq!(described, ["lines", "other"]);
    }

    #[test]
    fn bad_toml_and_values_no_flag_takes_name_their_line() {
        let e = error("num-prompts = 5\nmax-concurrency = \n");
        assert_eq!(e.line, Some(2));
        assert!(matches!(e.problem, Problem::Toml(_)));
        let e = error("num-prompts = 5\n[server]\nport = 1\n");
        assert_eq!(e.line, Some(2));
        assert!(matches!(e.problem, Problem::NotAFlagValue(_)));
        let e = error("num-prompts = [1, 2]\n");
        assert!(matches!(e.problem, Problem::TakesOneValue(_)));
        let e = error("\nconfig = \"other.toml\"\n");
        assert_eq!(e.line, Some(2));
        assert!(matches!(e.problem, Problem::NotASetting(_)));
    }

    #[test]
    fn without_config_or_dry_run_nothing_is_read_or_described() {
        let (out, described) = run(&["--num-prompts", "3"]);
        let out = out.unwrap();
        assert!(out.resolution.is_none());
        assert_eq!(out.argv, ["bench", "serve", "--num-prompts", "3"]);
        assert!(described.is_empty());
    }

    #[test]
    fn the_dry_run_output_is_a_scenario_file_that_resolves_the_same() {
        let text =
            "num-prompts = 5\nrequest-rate = 2.5\nmetadata = [\"a=1\"]\nsave-result = true\n";
        let (_, resolution) = expanded(text, &["--header", "k=v", "l=w", "--max-concurrency", "3"]);
        let printed = resolution.to_toml();
        assert!(
            printed.contains("num-prompts = 5  # file, line 1\n"),
            "{printed}"
        );
        assert!(
            printed.contains("max-concurrency = 3  # command line\n"),
            "{printed}"
        );
        assert!(
            printed.contains("header = [\"k=v\", \"l=w\"]  # command line\n"),
            "{printed}"
        );
        assert!(
            printed.contains("# plugins: dataset lines, backend native\n"),
            "{printed}"
        );
        let (_, again) = expanded(&printed, &[]);
        let values = |r: &Resolution| -> Vec<(String, Value)> {
            r.settings
                .iter()
                .map(|s| (s.flag.clone(), s.value.clone()))
                .collect()
        };
        assert_eq!(values(&again), values(&resolution));
    }

    #[test]
    fn the_result_records_the_file_its_digest_and_the_flags_without_headers() {
        let text = "num-prompts = 5\nheader = [\"authorization=secret\"]\n";
        let (_dir, path) = file(text);
        let resolution = run(&["--config", &path, "--max-concurrency", "2"])
            .0
            .unwrap()
            .resolution;
        let args = ScenarioArgs {
            resolution,
            ..ScenarioArgs::default()
        };
        let (key, record) = args.record().unwrap();
        assert_eq!(key, "scenario");
        let digest: String = Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            record,
            serde_json::json!({
                "file": path,
                "sha256": digest,
                "resolved": {
                    "num-prompts": 5,
                    "header": "<redacted>",
                    "max-concurrency": 2,
                },
            })
        );
        // A dry run without a file has nothing to record.
        let resolution = run(&["--dry-run"]).0.unwrap().resolution;
        assert!(resolution.is_some());
        let args = ScenarioArgs {
            resolution,
            ..ScenarioArgs::default()
        };
        assert!(args.record().is_none());
    }
}
