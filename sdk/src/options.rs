//! Typed access to a plugin's key/value options, refusing keys the plugin does not know.

use std::str::FromStr;

use crate::{OptionInfo, OptionKind, PluginError, SharedFlag};

/// Reads options by name; [`OptionReader::finish`] fails on any key that was not read,
/// so a misspelt option is an error instead of being silently ignored.
pub struct OptionReader {
    plugin: &'static str,
    pairs: Vec<(String, String)>,
    used: Vec<bool>,
}

impl OptionReader {
    pub fn new(plugin: &'static str, pairs: Vec<(String, String)>) -> Self {
        let used = vec![false; pairs.len()];
        OptionReader {
            plugin,
            pairs,
            used,
        }
    }

    /// The raw value of `name` (the last one when given twice).
    pub fn string(&mut self, name: &str) -> Option<String> {
        let mut found = None;
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            if k == name {
                self.used[i] = true;
                found = Some(v.clone());
            }
        }
        found
    }

    /// `name` parsed as `T`, or `None` when absent.
    pub fn parse<T: FromStr>(&mut self, name: &str) -> Result<Option<T>, PluginError>
    where
        T::Err: std::fmt::Display,
    {
        match self.string(name) {
            None => Ok(None),
            Some(v) => v.trim().parse::<T>().map(Some).map_err(|e| {
                PluginError::InvalidConfig(format!("{}: option {name}={v:?}: {e}", self.plugin))
            }),
        }
    }

    /// `name` parsed as `T`, or `default` when absent.
    pub fn parse_or<T: FromStr>(&mut self, name: &str, default: T) -> Result<T, PluginError>
    where
        T::Err: std::fmt::Display,
    {
        Ok(self.parse(name)?.unwrap_or(default))
    }

    /// A boolean: `true/false`, `1/0`, `yes/no`.
    pub fn flag(&mut self, name: &str, default: bool) -> Result<bool, PluginError> {
        match self.string(name) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(PluginError::InvalidConfig(format!(
                    "{}: option {name}={v:?}: expected true or false",
                    self.plugin
                ))),
            },
        }
    }

    /// Fails on the first key that no accessor asked for, listing the known options.
    pub fn finish(self, known: &[OptionInfo]) -> Result<(), PluginError> {
        for (i, (k, _)) in self.pairs.iter().enumerate() {
            if !self.used[i] {
                let names: Vec<&str> = known.iter().map(|o| o.name.as_str()).collect();
                return Err(PluginError::InvalidConfig(format!(
                    "{}: unknown option {k:?} (known: {})",
                    self.plugin,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        }
        Ok(())
    }
}

/// Options from string pairs, e.g. `pairs(&[("output-len", "5")])` (handy in tests and
/// when a plugin builds options for another).
pub fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Shorthand for describing an option, set with `--dataset-option`/`--backend-option`;
/// the builder methods on [`OptionInfo`] give it a flag of its own and more.
pub fn option(name: &str, description: &str, default_value: Option<&str>) -> OptionInfo {
    OptionInfo {
        name: name.to_string(),
        description: description.to_string(),
        default_value: default_value.map(str::to_string),
        required: false,
        cli_flag: None,
        kind: OptionKind::Text,
        choices: Vec::new(),
        shared_flags: Vec::new(),
    }
}

impl OptionInfo {
    /// The option's own command-line flag, without the dashes (`"sonnet-input-len"`).
    pub fn flag(mut self, flag: &str) -> Self {
        self.cli_flag = Some(flag.to_string());
        self
    }

    /// The flag takes no value: present means `true`.
    pub fn switch(mut self) -> Self {
        self.kind = OptionKind::Switch;
        self
    }

    /// The value is a whole number >= 0.
    pub fn count(mut self) -> Self {
        self.kind = OptionKind::Count;
        self
    }

    /// The value is a whole number, possibly negative.
    pub fn integer(mut self) -> Self {
        self.kind = OptionKind::Integer;
        self
    }

    /// The value is a decimal number.
    pub fn number(mut self) -> Self {
        self.kind = OptionKind::Number;
        self
    }

    /// The values the option accepts.
    pub fn choices(mut self, choices: &[&str]) -> Self {
        self.choices = choices.iter().map(|c| c.to_string()).collect();
        self
    }

    /// A general flag (vLLM's `--input-len`, `--output-len`) that sets this option too.
    pub fn shared(mut self, flag: SharedFlag) -> Self {
        self.shared_flags.push(flag);
        self
    }

    /// The option must be given.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
}
