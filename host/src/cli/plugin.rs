//! `bench plugin`: what plugins are built in, what a plugin accepts, and copies of the
//! built-in ones for authors to start from.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

// `bench plugin new`, in its own file beside this one.
#[path = "plugin_new.rs"]
mod plugin_new;

use crate::runtime::{
    CompileEvent, CompileNotice, OptionKind, PluginKind, PluginRef, PluginSummary, Runtime,
    RuntimeConfig, SharedFlag, builtin_plugins, builtin_plugins_note, cache_usage, clear_cache,
};

/// Sandbox limits for plugins; flatten into any subcommand that runs plugins.
#[derive(Debug, Clone, Args)]
pub struct SandboxArgs {
    /// Time budget of one plugin call, in seconds: a plugin running longer is stopped (its
    /// own time counts, not the host's tokenizer work for it).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10.0,
        env = "BENCH_PLUGIN_TIMEOUT"
    )]
    pub plugin_timeout: f64,
    /// Memory limit of one plugin instance, in MiB.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 512,
        env = "BENCH_PLUGIN_MEMORY"
    )]
    pub plugin_memory: u64,
}

impl SandboxArgs {
    /// The runtime configuration these flags ask for.
    pub fn runtime_config(&self) -> Result<RuntimeConfig> {
        if !(self.plugin_timeout.is_finite() && self.plugin_timeout > 0.0) {
            bail!(
                "--plugin-timeout must be a positive number of seconds, got {}",
                self.plugin_timeout
            );
        }
        if self.plugin_memory == 0 {
            bail!("--plugin-memory must be at least 1 MiB");
        }
        Ok(RuntimeConfig {
            memory_limit: self.plugin_memory.saturating_mul(1 << 20),
            call_budget: Duration::from_secs_f64(self.plugin_timeout),
            cache_dir: crate::runtime::cache_dir_from_env(),
            max_shards: None,
            on_compile: Some(compile_notice()),
        })
    }
}

/// Tells the user, on stderr, that a plugin is being compiled: a component the cache does
/// not hold yet takes seconds (a Python or JavaScript plugin carries its language's
/// runtime, 10-20 MB), and saying so keeps bench from seeming to hang.
pub fn compile_notice() -> CompileNotice {
    CompileNotice(Arc::new(|event: &CompileEvent<'_>| match event {
        CompileEvent::Started { plugin, bytes } => eprintln!(
            "compiling plugin {plugin}, {:.1} MB (once: later loads use the compiled copy)...",
            *bytes as f64 / 1e6
        ),
        CompileEvent::Finished {
            plugin,
            elapsed,
            cached_at,
        } => match cached_at {
            Some(path) => eprintln!(
                "compiled plugin {plugin} in {:.1}s, cached in {}",
                elapsed.as_secs_f64(),
                path.parent().map_or(path.display(), |dir| dir.display())
            ),
            None => eprintln!(
                "compiled plugin {plugin} in {:.1}s (not cached: set BENCH_CACHE_DIR to keep it)",
                elapsed.as_secs_f64()
            ),
        },
    }))
}

#[derive(Debug, Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// List the built-in plugins with their kind, version and plugin API version.
    List,
    /// Show a plugin's description and options.
    Inspect {
        /// A built-in plugin name or a path to a .wasm component.
        plugin: String,
    },
    /// Write built-in plugins as .wasm files into a directory.
    Export {
        /// A built-in plugin name, or `all`.
        name: String,
        /// The directory to write into (created if missing).
        dir: PathBuf,
    },
    /// Write a new plugin project (Rust, Python or JavaScript) that builds and passes its
    /// test against `bench mock-server` as written.
    New(plugin_new::NewArgs),
    /// The cache of compiled plugins: `$BENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/bench`, else
    /// `~/.cache/bench`. A plugin is compiled for this machine on its first load and
    /// loaded from there afterwards.
    Cache {
        #[command(subcommand)]
        action: CacheAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum CacheAction {
    /// Print the cache directory, and how many compiled plugins it holds.
    Dir,
    /// Delete every compiled plugin in the cache (each compiles again on its next load).
    Clear,
}

/// Runs a `bench plugin` subcommand.
pub fn run(args: PluginArgs) -> Result<()> {
    match args.command {
        PluginCommand::List => list(&args.sandbox),
        PluginCommand::Inspect { plugin } => inspect(&args.sandbox, &plugin),
        PluginCommand::Export { name, dir } => export(&name, &dir),
        PluginCommand::Cache { action } => cache(action),
        PluginCommand::New(new) => plugin_new::run(&new),
    }
}

fn cache(action: CacheAction) -> Result<()> {
    let Some(dir) = crate::runtime::cache_dir_from_env() else {
        bail!("no cache directory: set BENCH_CACHE_DIR (or XDG_CACHE_HOME or HOME) to choose one");
    };
    let mb = |bytes: u64| bytes as f64 / 1e6;
    match action {
        CacheAction::Dir => {
            let (count, bytes) = cache_usage(&dir)?;
            println!("{}", dir.display());
            eprintln!("{count} compiled plugins, {:.1} MB", mb(bytes));
        }
        CacheAction::Clear => {
            let (count, bytes) = clear_cache(&dir)?;
            println!(
                "deleted {count} compiled plugins ({:.1} MB) from {}",
                mb(bytes),
                dir.display()
            );
        }
    }
    Ok(())
}

fn list(sandbox: &SandboxArgs) -> Result<()> {
    let runtime = Runtime::new(sandbox.runtime_config()?)?;
    let mut out = std::io::stdout().lock();
    if builtin_plugins().is_empty() {
        writeln!(
            out,
            "no plugins are built into this binary: {}",
            builtin_plugins_note().unwrap_or("it was built without them")
        )?;
        return Ok(());
    }
    writeln!(out, "{:<16} {:<8} {:<10} API", "NAME", "KIND", "VERSION")?;
    for plugin in builtin_plugins() {
        let summary = runtime.inspect(&PluginRef::Builtin(plugin.name.to_owned()))?;
        writeln!(
            out,
            "{:<16} {:<8} {:<10} {}",
            plugin.name, summary.kind, summary.info.version, summary.api_version
        )?;
    }
    Ok(())
}

fn inspect(sandbox: &SandboxArgs, plugin: &str) -> Result<()> {
    let runtime = Runtime::new(sandbox.runtime_config()?)?;
    let summary = runtime.inspect(&PluginRef::parse(plugin)?)?;
    print!("{}", render_summary(&summary));
    Ok(())
}

/// The text `bench plugin inspect` prints.
fn render_summary(summary: &PluginSummary) -> String {
    let info = &summary.info;
    let mut text = format!(
        "{} {} ({} plugin, API bench:plugin@{})\n",
        info.name, info.version, summary.kind, summary.api_version
    );
    if summary.name != info.name {
        text.push_str(&format!("loaded from: {}\n", summary.name));
    }
    text.push_str(&format!("\n{}\n", info.description.trim_end()));
    if info.options.is_empty() {
        text.push_str("\nno options\n");
    } else {
        let flag = match summary.kind {
            PluginKind::Dataset => "--dataset-option",
            PluginKind::Backend => "--backend-option",
        };
        text.push_str(&format!("\noptions ({flag} KEY=VALUE):\n"));
        for option in &info.options {
            let mut notes = Vec::new();
            if option.required {
                notes.push("required".to_owned());
            }
            if let Some(default) = &option.default_value {
                notes.push(format!("default: {default}"));
            }
            if !option.choices.is_empty() {
                notes.push(format!("one of: {}", option.choices.join(", ")));
            }
            let notes = if notes.is_empty() {
                String::new()
            } else {
                format!(" [{}]", notes.join(", "))
            };
            // The option's own flag, and the general flags that set it too.
            let mut flags: Vec<String> = option
                .cli_flag
                .iter()
                .map(|f| match option.kind {
                    OptionKind::Switch => format!("--{f}"),
                    _ => format!("--{f} VALUE"),
                })
                .collect();
            flags.extend(option.shared_flags.iter().map(|f| match f {
                SharedFlag::InputLen => "--input-len".to_owned(),
                SharedFlag::OutputLen => "--output-len".to_owned(),
            }));
            let flags = if flags.is_empty() {
                String::new()
            } else {
                format!(" ({})", flags.join(", "))
            };
            text.push_str(&format!(
                "  {}{flags}{notes}\n      {}\n",
                option.name, option.description
            ));
        }
    }
    text
}

fn export(name: &str, dir: &std::path::Path) -> Result<()> {
    let selected: Vec<_> = if name == "all" {
        builtin_plugins().iter().collect()
    } else {
        match PluginRef::parse(name)? {
            PluginRef::Builtin(name) => builtin_plugins()
                .iter()
                .filter(|p| p.name == name)
                .collect(),
            PluginRef::File(path) => bail!(
                "'{}' is a path; export takes a built-in plugin name or `all`",
                path.display()
            ),
        }
    };
    if selected.is_empty() {
        bail!("no plugins are built into this binary");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for plugin in selected {
        let path = dir.join(format!("{}.wasm", plugin.name));
        std::fs::write(&path, plugin.wasm)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{OptionInfo, PluginInfo};

    #[test]
    fn sandbox_flags_become_limits() {
        let args = SandboxArgs {
            plugin_timeout: 0.5,
            plugin_memory: 64,
        };
        let config = args.runtime_config().unwrap();
        assert_eq!(config.call_budget, Duration::from_millis(500));
        assert_eq!(config.memory_limit, 64 << 20);
        let bad = SandboxArgs {
            plugin_timeout: 0.0,
            plugin_memory: 64,
        };
        assert!(
            bad.runtime_config()
                .unwrap_err()
                .to_string()
                .contains("--plugin-timeout")
        );
    }

    #[test]
    fn summaries_show_options_with_defaults() {
        let summary = PluginSummary {
            name: "./x.wasm".into(),
            kind: PluginKind::Dataset,
            api_version: "0.2.0".into(),
            info: PluginInfo {
                name: "x".into(),
                version: "1.2.3".into(),
                description: "Makes requests.".into(),
                options: vec![OptionInfo {
                    name: "input-len".into(),
                    description: "Prompt length in tokens.".into(),
                    default_value: Some("1024".into()),
                    required: false,
                    cli_flag: None,
                    kind: OptionKind::Text,
                    choices: vec![],
                    shared_flags: vec![],
                }],
            },
        };
        let text = render_summary(&summary);
        assert!(
            text.starts_with(
                "x 1.2.3 (dataset plugin, API bench:plugin@0.2.0)\nloaded from: ./x.wasm\n"
            ),
            "{text}"
        );
        assert!(text.contains("--dataset-option KEY=VALUE"), "{text}");
        assert!(
            text.contains("  input-len [default: 1024]\n      Prompt length in tokens.\n"),
            "{text}"
        );
    }
}
