//! Plugins own their flags: the options a dataset or backend plugin declares with a
//! command-line flag (`cli-flag` in the contract, vLLM's `--sonnet-input-len` style) become
//! flags of the subcommand that loads it, at run time.
//!
//! The command line is read twice. [`PluginChoice::scan`] first picks the plugins out of
//! the raw arguments (`--dataset-name`/`--plugin`, `--backend`); the caller describes them
//! and [`PluginFlags::add`] adds their flags to clap's command, so clap itself parses,
//! validates, suggests and prints `--help` with them (under a heading per plugin). After
//! parsing, [`PluginFlags::options`] turns what was given into the plugin's `KEY=VALUE`
//! options. The flags of the other first-party plugins are added hidden: vLLM accepts
//! every dataset's flags whatever the dataset, so a vLLM command line keeps working, and
//! bench says which ones the chosen plugin ignores instead of ignoring them silently.
//!
//! The general flags (`--input-len`, `--output-len`) are bench's own and set every dataset
//! option that answers to them: one that lists them in its `shared-flags`, or one whose own
//! `cli-flag` is the general flag's name (an author's natural way to say the same thing).
//!
//! Nothing here knows a plugin by name: everything comes from the descriptions.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::builder::PossibleValuesParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

use crate::runtime::{OptionInfo, OptionKind, PluginInfo, SharedFlag};

/// The `--backend` value that runs the native engine instead of a backend plugin.
pub const NATIVE_BACKEND: &str = "native";

/// Which kind of plugin a flag configures (its options go to `--dataset-option` or
/// `--backend-option`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Dataset,
    Backend,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Dataset => "dataset",
            Role::Backend => "backend",
        }
    }
}

/// The plugins named on a command line, read before clap parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginChoice {
    /// `--dataset-name` (alias `--plugin`), when given.
    pub dataset: Option<String>,
    /// `--backend`, when given.
    pub backend: Option<String>,
}

impl PluginChoice {
    /// Finds `--dataset-name`/`--plugin` and `--backend` (as `--flag value` or
    /// `--flag=value`; the last one wins, as clap's) in `args`, stopping at `--`.
    pub fn scan<S: AsRef<str>>(args: &[S]) -> PluginChoice {
        let mut choice = PluginChoice {
            dataset: None,
            backend: None,
        };
        let mut iter = args.iter().map(AsRef::as_ref);
        while let Some(arg) = iter.next() {
            if arg == "--" {
                break;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value)),
                None => (arg, None),
            };
            let slot = match flag {
                "--dataset-name" | "--plugin" => &mut choice.dataset,
                "--backend" => &mut choice.backend,
                _ => continue,
            };
            let value = match inline {
                Some(value) => Some(value),
                None => iter.next(),
            };
            if let Some(value) = value {
                *slot = Some(value.to_owned());
            }
        }
        choice
    }
}

/// The flags added for the plugins of one command line.
#[derive(Debug, Default)]
pub struct PluginFlags {
    flags: Vec<Flag>,
}

/// An option that the command line can set: with a flag of its own, with general flags,
/// or both.
#[derive(Debug)]
struct Flag {
    /// clap's id of the argument; none when the option has no flag of its own.
    id: Option<String>,
    /// The flag as typed, with its dashes; none when the option has no flag of its own.
    long: Option<String>,
    role: Role,
    plugin: String,
    option: String,
    switch: bool,
    shared: Vec<SharedFlag>,
    /// A flag of another first-party plugin, accepted and reported as ignored.
    foreign: bool,
}

/// The general flags (`--input-len`, `--output-len`) as given; they set every option that
/// declares them and win over the option's own flag, as in vLLM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharedValues {
    pub input_len: Option<u32>,
    pub output_len: Option<u32>,
}

impl SharedValues {
    fn get(&self, flag: SharedFlag) -> Option<u32> {
        match flag {
            SharedFlag::InputLen => self.input_len,
            SharedFlag::OutputLen => self.output_len,
        }
    }
}

/// The general flags: the contract's name of each, which is also its flag (without the
/// dashes) and the id of its argument with `_` for `-`.
const GENERAL_FLAGS: [(SharedFlag, &str); 2] = [
    (SharedFlag::InputLen, "input-len"),
    (SharedFlag::OutputLen, "output-len"),
];

/// The general flag called `long` (without dashes), if it is one.
fn general_flag(long: &str) -> Option<SharedFlag> {
    GENERAL_FLAGS
        .iter()
        .find(|(_, name)| *name == long)
        .map(|(flag, _)| *flag)
}

impl PluginFlags {
    /// Adds the flags of the plugin `name` (described by `info`) to `cmd`, under a heading
    /// of its own, and notes which options the general flags set. A dataset option whose
    /// flag is a general flag's name answers to that general flag. Any other flag that the
    /// command already has is an error naming the plugin.
    pub fn add(
        &mut self,
        cmd: Command,
        role: Role,
        name: &str,
        info: &PluginInfo,
    ) -> Result<Command> {
        let mut cmd = cmd;
        for option in &info.options {
            let mut shared = option.shared_flags.clone();
            let mut own = option.cli_flag.as_deref();
            if let Some(long) = own {
                check_flag_name(long, name)?;
            }
            if let Some(general) = own.filter(|_| role == Role::Dataset).and_then(general_flag) {
                own = None;
                if !shared.contains(&general) {
                    shared.push(general);
                }
            }
            let Some(long) = own else {
                if !shared.is_empty() {
                    self.flags.push(Flag {
                        id: None,
                        long: None,
                        role,
                        plugin: name.to_owned(),
                        option: option.name.clone(),
                        switch: false,
                        shared,
                        foreign: false,
                    });
                }
                continue;
            };
            let dashed = format!("--{long}");
            if let Some(taken) = self.flags.iter().find(|f| f.long.as_ref() == Some(&dashed)) {
                bail!(
                    "{} plugin '{name}' declares the flag --{long}, which {} plugin '{}' \
                     declares too",
                    role.as_str(),
                    taken.role.as_str(),
                    taken.plugin
                );
            }
            if cmd.get_arguments().any(|a| a.get_long() == Some(long)) {
                bail!(
                    "{} plugin '{name}' declares the flag --{long}, which bench itself has; \
                     the plugin must name its option's flag differently (its option can still \
                     be set with --{}-option {}=VALUE)",
                    role.as_str(),
                    role.as_str(),
                    option.name
                );
            }
            let id = format!("{}-option:{}", role.as_str(), option.name);
            cmd = cmd.arg(arg(
                &id,
                long,
                option,
                &format!("{} options ({name})", title(role)),
            ));
            self.flags.push(Flag {
                id: Some(id),
                long: Some(dashed),
                role,
                plugin: name.to_owned(),
                option: option.name.clone(),
                switch: option.kind == OptionKind::Switch,
                shared,
                foreign: false,
            });
        }
        Ok(cmd)
    }

    /// Adds, hidden, the flags of another plugin (`name`) that the command does not have
    /// yet: accepted, and reported by [`PluginFlags::ignored`].
    pub fn add_foreign(
        &mut self,
        cmd: Command,
        role: Role,
        name: &str,
        info: &PluginInfo,
    ) -> Command {
        let mut cmd = cmd;
        for option in info.options.iter() {
            let Some(long) = option.cli_flag.as_deref() else {
                continue;
            };
            let dashed = format!("--{long}");
            if check_flag_name(long, name).is_err()
                || self.flags.iter().any(|f| f.long.as_ref() == Some(&dashed))
                || cmd.get_arguments().any(|a| a.get_long() == Some(long))
            {
                continue;
            }
            let id = format!("foreign-{}-option:{name}:{}", role.as_str(), option.name);
            cmd = cmd.arg(arg(&id, long, option, "").hide(true));
            self.flags.push(Flag {
                id: Some(id),
                long: Some(dashed),
                role,
                plugin: name.to_owned(),
                option: option.name.clone(),
                switch: option.kind == OptionKind::Switch,
                shared: Vec::new(),
                foreign: true,
            });
        }
        cmd
    }

    /// The options of the `role` plugin that its flags and the general flags set, in the
    /// order they apply (the general flags after the plugin's own, so they win).
    pub fn options(
        &self,
        matches: &ArgMatches,
        role: Role,
        shared: SharedValues,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mine = || self.flags.iter().filter(|f| f.role == role && !f.foreign);
        for flag in mine() {
            if let Some(value) = given(matches, flag) {
                out.push((flag.option.clone(), value));
            }
        }
        for flag in mine() {
            for shared_flag in &flag.shared {
                if let Some(v) = shared.get(*shared_flag) {
                    out.push((flag.option.clone(), v.to_string()));
                }
            }
        }
        out
    }

    /// Warnings for the flags of other plugins that were given: `--sharegpt-output-len is
    /// a flag of dataset plugin 'sharegpt'; ignored with dataset plugin 'random'`.
    pub fn ignored(
        &self,
        matches: &ArgMatches,
        chosen: &BTreeMap<&'static str, String>,
    ) -> Vec<String> {
        self.flags
            .iter()
            .filter(|f| f.foreign && given(matches, f).is_some())
            .map(|f| {
                let role = f.role.as_str();
                format!(
                    "{} is a flag of {role} plugin '{}'; ignored with {role} plugin '{}'",
                    f.long.as_deref().unwrap_or_default(),
                    f.plugin,
                    chosen.get(role).map(String::as_str).unwrap_or("?")
                )
            })
            .collect()
    }

    /// Whether any of the `role` plugin's own flags or the general flags it answers to
    /// were given (so that `--input-len` does not go unused silently).
    pub fn answers_to(&self, role: Role, flag: SharedFlag) -> bool {
        self.flags
            .iter()
            .any(|f| f.role == role && !f.foreign && f.shared.contains(&flag))
    }
}

/// The value a flag was given on the command line, if any.
fn given(matches: &ArgMatches, flag: &Flag) -> Option<String> {
    let id = flag.id.as_deref()?;
    if flag.switch {
        matches.get_flag(id).then(|| "true".to_owned())
    } else {
        matches.get_one::<String>(id).cloned()
    }
}

fn title(role: Role) -> &'static str {
    match role {
        Role::Dataset => "Dataset",
        Role::Backend => "Backend",
    }
}

/// A flag name is lowercase ASCII letters, digits and dashes, without the leading dashes.
fn check_flag_name(long: &str, plugin: &str) -> Result<()> {
    let ok = !long.is_empty()
        && !long.starts_with('-')
        && long
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        bail!(
            "plugin '{plugin}' declares the flag {long:?}: a flag is lowercase letters, digits \
             and dashes, given without the leading dashes"
        );
    }
    Ok(())
}

/// The clap argument of one option.
fn arg(id: &str, long: &str, option: &OptionInfo, heading: &str) -> Arg {
    let mut help = option.description.clone();
    if let Some(default) = &option.default_value {
        help.push_str(&format!(" [default: {default}]"));
    }
    let arg = Arg::new(id.to_owned())
        .long(long.to_owned())
        .help(help)
        .help_heading(heading.to_owned());
    if option.kind == OptionKind::Switch {
        return arg.action(ArgAction::SetTrue);
    }
    // A leading minus sign reaches the value's parser, which then names the flag.
    let valued = arg
        .action(ArgAction::Set)
        .value_name("VALUE")
        .allow_negative_numbers(true);
    if !option.choices.is_empty() {
        return valued.value_parser(PossibleValuesParser::new(option.choices.clone()));
    }
    // Values are checked here but kept as written: the plugin parses them itself.
    match option.kind {
        OptionKind::Text | OptionKind::Switch => valued,
        OptionKind::Count => valued.value_parser(checked::<u64>),
        OptionKind::Integer => valued.value_parser(checked::<i64>),
        OptionKind::Number => valued.value_parser(checked::<f64>),
    }
}

/// A value parser that checks the text parses as `T` and keeps the text.
fn checked<T: std::str::FromStr>(text: &str) -> Result<String, String>
where
    T::Err: std::fmt::Display,
{
    text.trim()
        .parse::<T>()
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

/// Which subcommand a command line (without the program name) runs, as far as plugin
/// flags go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// `serve`, or the bare form (`bench --backend ...`).
    Serve { bare: bool },
    /// `throughput` or `latency`: `serve`'s flags, and the native engine's.
    Offline(&'static str),
    /// `dataset sample`.
    Sample,
    /// Anything else: no plugin flags.
    Other,
}

impl Runs {
    fn of(args: &[String]) -> Runs {
        match args.first().map(String::as_str) {
            None => Runs::Serve { bare: true },
            Some(a) if a.starts_with('-') => Runs::Serve { bare: true },
            Some("serve") => Runs::Serve { bare: false },
            Some("throughput") => Runs::Offline("throughput"),
            Some("latency") => Runs::Offline("latency"),
            Some("dataset") if args.get(1).map(String::as_str) == Some("sample") => Runs::Sample,
            _ => Runs::Other,
        }
    }

    fn roles(self) -> &'static [Role] {
        match self {
            Runs::Serve { .. } | Runs::Offline(_) => &[Role::Dataset, Role::Backend],
            Runs::Sample => &[Role::Dataset],
            Runs::Other => &[],
        }
    }

    /// The command whose flags these are, inside the top-level command.
    fn edit(self, cmd: Command, f: impl FnOnce(Command) -> Result<Command>) -> Result<Command> {
        match self {
            Runs::Serve { bare: true } => f(cmd),
            Runs::Serve { bare: false } | Runs::Offline(_) => {
                let name = match self {
                    Runs::Offline(name) => name,
                    _ => "serve",
                };
                let mut result = Ok(());
                let cmd = cmd.mut_subcommand(name, |sub| {
                    f(sub.clone()).unwrap_or_else(|e| {
                        result = Err(e);
                        sub
                    })
                });
                result.map(|()| cmd)
            }
            Runs::Sample => {
                let mut result = Ok(());
                let cmd = cmd.mut_subcommand("dataset", |dataset| {
                    dataset.mut_subcommand("sample", |sub| {
                        f(sub.clone()).unwrap_or_else(|e| {
                            result = Err(e);
                            sub
                        })
                    })
                });
                result.map(|()| cmd)
            }
            Runs::Other => Ok(cmd),
        }
    }

    /// The matches of this subcommand.
    fn matches(self, m: &ArgMatches) -> &ArgMatches {
        match self {
            Runs::Serve { bare: false } => m.subcommand_matches("serve").unwrap_or(m),
            Runs::Offline(name) => m.subcommand_matches(name).unwrap_or(m),
            Runs::Sample => m
                .subcommand_matches("dataset")
                .and_then(|d| d.subcommand_matches("sample"))
                .unwrap_or(m),
            _ => m,
        }
    }
}

/// A parsed command line with the plugins it chose and their flags.
pub struct Parsed {
    pub matches: ArgMatches,
    runs: Runs,
    flags: PluginFlags,
    /// The chosen plugin per role, as the user named it (or the default).
    chosen: BTreeMap<&'static str, String>,
}

impl Parsed {
    /// The options the `role` plugin's flags and the general flags set, in the order they
    /// apply (`--dataset-option`/`--backend-option` go after them, and win).
    pub fn options(&self, role: Role, shared: SharedValues) -> Vec<(String, String)> {
        self.flags
            .options(self.runs.matches(&self.matches), role, shared)
    }

    /// Flags the user typed that no option of the chosen plugins takes: other plugins'
    /// flags, and general lengths the dataset has no option for. A general length that a
    /// subcommand filled in itself (`latency`'s defaults, in `shared`) was not typed and
    /// is not warned about.
    pub fn warnings(&self, shared: SharedValues) -> Vec<String> {
        let matches = self.runs.matches(&self.matches);
        let mut out = self.flags.ignored(matches, &self.chosen);
        if let Some(dataset) = self.chosen.get("dataset") {
            for (flag, name) in GENERAL_FLAGS {
                let id = name.replace('-', "_");
                let typed = matches.try_contains_id(&id).unwrap_or(false)
                    && matches.value_source(&id) == Some(ValueSource::CommandLine);
                if typed
                    && shared.get(flag).is_some()
                    && !self.flags.answers_to(Role::Dataset, flag)
                {
                    out.push(format!(
                        "--{name} is ignored: dataset plugin '{dataset}' has no option it sets \
                         (an option takes it by listing {name} in its shared-flags; \
                         --dataset-option KEY=VALUE sets any option)"
                    ));
                }
            }
        }
        out
    }
}

/// Parses `argv` (program name first) with `cmd` and the flags of the plugins it chooses:
/// the dataset and backend plugins are described (default ones when none is named) and
/// their flags added; when clap finds an unknown flag, the other first-party plugins'
/// flags are added too, hidden, and the line parsed again. `describe` gives the options of
/// a plugin as the user named it. Clap's own errors and `--help` exit the process, as
/// `Command::get_matches` does.
pub fn parse(
    cmd: Command,
    argv: &[String],
    describe: &mut dyn FnMut(Role, &str) -> Result<PluginInfo>,
    builtins: &[(Role, &'static str)],
) -> Result<Parsed> {
    // `--version` needs no plugin: it is answered before any is loaded (on a cold cache,
    // compiled), as clap answers it, unless an argument before it is an error.
    if let Err(e) = cmd.clone().try_get_matches_from(argv)
        && e.kind() == ErrorKind::DisplayVersion
    {
        e.exit();
    }
    let runs = Runs::of(argv.get(1..).unwrap_or_default());
    let choice = PluginChoice::scan(argv.get(1..).unwrap_or_default());
    let mut flags = PluginFlags::default();
    let mut chosen = BTreeMap::new();
    let mut cmd = cmd;
    for &role in runs.roles() {
        let (named, id) = match role {
            Role::Dataset => (&choice.dataset, "dataset_name"),
            Role::Backend => (&choice.backend, "backend"),
        };
        let name = match named {
            Some(name) => name.clone(),
            None => default_of(&cmd, runs, id)?,
        };
        if role == Role::Backend && name == NATIVE_BACKEND {
            // The native engine is no plugin: its flags are the command's own.
            continue;
        }
        let info = describe(role, &name)?;
        cmd = runs.edit(cmd, |c| flags.add(c, role, &name, &info))?;
        chosen.insert(role.as_str(), name);
    }
    // The other first-party plugins, described only when a flag is unknown: maybe it is
    // one of theirs (vLLM accepts every dataset's).
    let mut others: Vec<(Role, &str)> = builtins
        .iter()
        .copied()
        .filter(|&(role, name)| {
            runs.roles().contains(&role) && chosen.get(role.as_str()).is_none_or(|c| c != name)
        })
        .collect();
    let matches = loop {
        let e = match cmd.clone().try_get_matches_from(argv) {
            Ok(m) => break m,
            Err(e) if e.kind() == ErrorKind::UnknownArgument && !others.is_empty() => e,
            Err(e) => e.exit(),
        };
        // The plugins the flag is named after first (`--random-input-len`: random), so
        // that a cold start compiles one plugin, not all of them; all the others when
        // none of those has it.
        let (named, rest): (Vec<_>, Vec<_>) = others
            .iter()
            .partition(|(_, name)| unknown_flag(&e).is_some_and(|f| named_after(f, name)));
        let batch = if named.is_empty() { rest } else { named };
        for &(role, name) in &batch {
            let info = describe(role, name)?;
            cmd = runs.edit(cmd, |c| Ok(flags.add_foreign(c, role, name, &info)))?;
        }
        others.retain(|other| !batch.contains(other));
    };
    Ok(Parsed {
        matches,
        runs,
        flags,
        chosen,
    })
}

/// The flag clap did not know, as typed (`--random-input-len`).
fn unknown_flag(e: &clap::Error) -> Option<&str> {
    match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(flag) => Some(flag),
        _ => None,
    }
}

/// Whether `flag` is one of plugin `name`'s by its name (vLLM's datasets prefix their
/// flags with their name, `_` written `-`).
fn named_after(flag: &str, name: &str) -> bool {
    let flag = flag.trim_start_matches('-');
    let prefix = format!("{}-", name.replace('_', "-"));
    flag.starts_with(&prefix)
}

/// The default value of the argument `id` of the subcommand `runs` names.
fn default_of(cmd: &Command, runs: Runs, id: &str) -> Result<String> {
    let sub = match runs {
        Runs::Serve { bare: false } => cmd.find_subcommand("serve"),
        Runs::Offline(name) => cmd.find_subcommand(name),
        Runs::Sample => cmd
            .find_subcommand("dataset")
            .and_then(|d| d.find_subcommand("sample")),
        _ => Some(cmd),
    };
    sub.and_then(|c| c.get_arguments().find(|a| a.get_id() == id))
        .and_then(|a| a.get_default_values().first())
        .and_then(|v| v.to_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no default for --{id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(name: &str, flag: Option<&str>) -> OptionInfo {
        OptionInfo {
            name: name.into(),
            description: format!("the {name}"),
            default_value: Some("1".into()),
            required: false,
            cli_flag: flag.map(str::to_owned),
            kind: OptionKind::Text,
            choices: vec![],
            shared_flags: vec![],
        }
    }

    fn info(name: &str, options: Vec<OptionInfo>) -> PluginInfo {
        PluginInfo {
            name: name.into(),
            version: "0.1.0".into(),
            description: String::new(),
            options,
        }
    }

    fn base() -> Command {
        Command::new("bench")
            .no_binary_name(true)
            .arg(Arg::new("model").long("model"))
    }

    #[test]
    fn plugins_are_picked_out_of_the_raw_arguments() {
        let c = PluginChoice::scan(&[
            "--model",
            "m",
            "--plugin",
            "a.wasm",
            "--backend=openai-chat",
            "--dataset-name",
            "sharegpt",
            "--",
            "--backend",
            "x",
        ]);
        assert_eq!(c.dataset.as_deref(), Some("sharegpt"));
        assert_eq!(c.backend.as_deref(), Some("openai-chat"));
        assert_eq!(PluginChoice::scan(&["--backend"]).backend, None);
    }

    #[test]
    fn declared_flags_parse_into_options_and_general_flags_win() {
        let mut len = option("input-len", Some("lines-input-len"));
        len.shared_flags.push(SharedFlag::InputLen);
        let mut shuffle = option("shuffle", Some("lines-shuffle"));
        shuffle.kind = OptionKind::Switch;
        let mut mode = option("mode", Some("lines-mode"));
        mode.choices = vec!["a".into(), "b".into()];
        let plugin = info("lines", vec![len, shuffle, mode, option("quiet", None)]);
        let mut flags = PluginFlags::default();
        let cmd = flags.add(base(), Role::Dataset, "lines", &plugin).unwrap();
        let m = cmd
            .clone()
            .try_get_matches_from([
                "--lines-input-len",
                "7",
                "--lines-shuffle",
                "--lines-mode",
                "b",
            ])
            .unwrap();
        assert_eq!(
            flags.options(&m, Role::Dataset, SharedValues::default()),
            [
                ("input-len".to_string(), "7".to_string()),
                ("shuffle".to_string(), "true".to_string()),
                ("mode".to_string(), "b".to_string()),
            ]
        );
        let shared = SharedValues {
            input_len: Some(9),
            output_len: Some(3),
        };
        let opts = flags.options(&m, Role::Dataset, shared);
        assert_eq!(
            opts.last().unwrap(),
            &("input-len".to_string(), "9".to_string())
        );
        assert!(flags.answers_to(Role::Dataset, SharedFlag::InputLen));
        assert!(!flags.answers_to(Role::Dataset, SharedFlag::OutputLen));
        // clap checks choices and suggests flags.
        let err = cmd
            .clone()
            .try_get_matches_from(["--lines-mode", "c"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("possible values: a, b"), "{err}");
        let err = cmd
            .try_get_matches_from(["--lines-shufle"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--lines-shuffle"), "{err}");
    }

    #[test]
    fn clashing_flags_are_refused_with_the_plugin_named() {
        let mut flags = PluginFlags::default();
        let err = flags
            .add(
                base(),
                Role::Dataset,
                "x.wasm",
                &info("x", vec![option("m", Some("model"))]),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("'x.wasm'") && err.contains("--model"), "{err}");
        let cmd = flags
            .add(
                base(),
                Role::Dataset,
                "d",
                &info("d", vec![option("a", Some("shared"))]),
            )
            .unwrap();
        let err = flags
            .add(
                cmd,
                Role::Backend,
                "b",
                &info("b", vec![option("a", Some("shared"))]),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("dataset plugin 'd'"), "{err}");
        let err = flags
            .add(
                base(),
                Role::Dataset,
                "y",
                &info("y", vec![option("a", Some("Bad_Flag"))]),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("lowercase"), "{err}");
    }

    #[test]
    fn a_dataset_option_answers_to_a_general_flag_by_shared_flags_or_by_its_flag_name() {
        let mut input = option("input-len", None);
        input.shared_flags.push(SharedFlag::InputLen);
        // The author's natural guess: the option's own flag is the general one.
        let output = option("output-len", Some("output-len"));
        let plugin = info("lengths", vec![input, output]);
        let mut flags = PluginFlags::default();
        let cmd = base().arg(Arg::new("output_len").long("output-len"));
        let cmd = flags.add(cmd, Role::Dataset, "x.wasm", &plugin).unwrap();
        // No second --output-len: bench's own sets the option.
        assert_eq!(
            cmd.get_arguments()
                .filter(|a| a.get_long() == Some("output-len"))
                .count(),
            1
        );
        assert!(flags.answers_to(Role::Dataset, SharedFlag::InputLen));
        assert!(flags.answers_to(Role::Dataset, SharedFlag::OutputLen));
        let m = cmd.try_get_matches_from(["--output-len", "7"]).unwrap();
        let shared = SharedValues {
            input_len: Some(5),
            output_len: Some(7),
        };
        assert_eq!(
            flags.options(&m, Role::Dataset, shared),
            [
                ("input-len".to_string(), "5".to_string()),
                ("output-len".to_string(), "7".to_string()),
            ]
        );
        // A backend gets no general lengths: its flag named like bench's stays an error.
        let backend = info("b", vec![option("output-len", Some("output-len"))]);
        let cmd = base().arg(Arg::new("output_len").long("output-len"));
        let err = flags
            .add(cmd, Role::Backend, "b.wasm", &backend)
            .unwrap_err()
            .to_string();
        assert!(err.contains("which bench itself has"), "{err}");
    }

    /// `parse` over a command with bench's dataset flags, a dataset described as `options`
    /// and a backend without options.
    fn parse_with(options: Vec<OptionInfo>, args: &[&str]) -> Parsed {
        let cmd = Command::new("bench")
            .arg(Arg::new("backend").long("backend").default_value("b"))
            .arg(
                Arg::new("dataset_name")
                    .long("dataset-name")
                    .default_value("mine"),
            )
            .arg(
                Arg::new("input_len")
                    .long("input-len")
                    .value_parser(clap::value_parser!(u32)),
            )
            .arg(
                Arg::new("output_len")
                    .long("output-len")
                    .value_parser(clap::value_parser!(u32)),
            );
        let argv: Vec<String> = std::iter::once("bench")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect();
        let mut describe = |role: Role, name: &str| match role {
            Role::Dataset => Ok(info(name, options.clone())),
            Role::Backend => Ok(info(name, vec![])),
        };
        parse(cmd, &argv, &mut describe, &[]).unwrap()
    }

    #[test]
    fn only_general_flags_the_user_typed_are_warned_about() {
        let lens = |p: &Parsed| SharedValues {
            input_len: p.matches.get_one::<u32>("input_len").copied(),
            output_len: p.matches.get_one::<u32>("output_len").copied(),
        };
        let mut output = option("output-len", Some("mine-output-len"));
        output.shared_flags.push(SharedFlag::OutputLen);
        let p = parse_with(vec![output], &["--input-len", "3", "--output-len", "4"]);
        assert_eq!(
            p.warnings(lens(&p)),
            [
                "--input-len is ignored: dataset plugin 'mine' has no option it sets (an option \
              takes it by listing input-len in its shared-flags; --dataset-option KEY=VALUE \
              sets any option)"
            ]
        );
        // A length the subcommand filled in itself (`latency` does) was not typed.
        let p = parse_with(vec![], &[]);
        let filled = SharedValues {
            input_len: Some(32),
            output_len: Some(128),
        };
        assert!(p.warnings(filled).is_empty());
    }

    #[test]
    fn an_unknown_flag_describes_the_plugin_named_in_it_first() {
        let cmd = Command::new("bench")
            .arg(Arg::new("dataset_name").long("dataset-name"))
            .arg(Arg::new("backend").long("backend").default_value("b"));
        let described = std::cell::RefCell::new(Vec::new());
        let mut describe = |_: Role, name: &str| {
            described.borrow_mut().push(name.to_owned());
            // sonnet's flag is not named after it.
            let flag = match name {
                "sonnet" => "poem-len".to_owned(),
                _ => format!("{}-len", name.replace('_', "-")),
            };
            Ok(info(name, vec![option("len", Some(&flag))]))
        };
        let builtins = [
            (Role::Dataset, "random"),
            (Role::Dataset, "random_mm"),
            (Role::Dataset, "sonnet"),
            (Role::Backend, "openai"),
        ];
        let argv = |flag: &str| -> Vec<String> {
            ["bench", "--dataset-name", "x", flag, "1"]
                .map(str::to_owned)
                .to_vec()
        };
        let p = parse(
            cmd.clone(),
            &argv("--random-mm-len"),
            &mut describe,
            &builtins,
        )
        .unwrap();
        assert_eq!(*described.borrow(), ["x", "b", "random", "random_mm"]);
        assert_eq!(p.warnings(SharedValues::default()).len(), 1);
        described.borrow_mut().clear();
        // A flag named after no plugin: all the others.
        parse(cmd, &argv("--poem-len"), &mut describe, &builtins).unwrap();
        assert_eq!(
            *described.borrow(),
            ["x", "b", "random", "random_mm", "sonnet", "openai"]
        );
    }

    #[test]
    fn other_plugins_flags_are_accepted_and_reported() {
        let mut flags = PluginFlags::default();
        let cmd = flags
            .add(
                base(),
                Role::Dataset,
                "random",
                &info(
                    "random",
                    vec![option("output-len", Some("random-output-len"))],
                ),
            )
            .unwrap();
        let cmd = flags.add_foreign(
            cmd,
            Role::Dataset,
            "sharegpt",
            &info(
                "sharegpt",
                vec![option("output-len", Some("sharegpt-output-len"))],
            ),
        );
        let m = cmd
            .try_get_matches_from(["--sharegpt-output-len", "5"])
            .unwrap();
        assert!(
            flags
                .options(&m, Role::Dataset, SharedValues::default())
                .is_empty()
        );
        let chosen = BTreeMap::from([("dataset", "random".to_string())]);
        assert_eq!(
            flags.ignored(&m, &chosen),
            [
                "--sharegpt-output-len is a flag of dataset plugin 'sharegpt'; ignored with dataset plugin 'random'"
            ]
        );
    }
}
