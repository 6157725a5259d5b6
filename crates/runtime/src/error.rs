//! Why a plugin call failed, as a typed value: callers branch on it (a fault kills the
//! instance, a plugin's own error does not) and users read it (plugin, call and cause are
//! always named).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::PluginError;

/// Turns a `wasmtime::Error` (its own type in wasmtime 48) into an `anyhow::Error`,
/// keeping its message chain.
pub(crate) fn wasm_error(e: wasmtime::Error) -> anyhow::Error {
    anyhow::Error::from_boxed(e.into_boxed_dyn_error())
}

/// A failed call into a plugin.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct PluginCallError {
    /// The plugin as the user named it.
    pub plugin: Arc<str>,
    /// The contract function (`next-batch`, `decode`, ...).
    pub call: String,
    pub failure: CallFailure,
}

/// What went wrong in a plugin call.
#[derive(Debug)]
pub enum CallFailure {
    /// The plugin returned an error (its `plugin-error`); the instance can go on.
    Plugin(PluginError),
    /// The call faulted; the instance is dead. `output` is the tail of the plugin's
    /// stdout and stderr, ready to print (empty when it wrote nothing).
    Fault { fault: Fault, output: String },
    /// The instance had faulted in an earlier call, which this repeats.
    AfterFault(Fault),
    /// What the plugin returned breaks the contract (a text span outside the response, more
    /// requests than asked for); the instance can go on.
    Contract(String),
    /// The call was made before the resource it needs was opened (a host bug).
    NotOpen,
}

/// How a call faulted.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// It ran past its time budget and was interrupted.
    TimeBudget(Duration),
    /// It tried to grow its memory past the limit (both in MiB).
    Memory { limit_mib: u64, wanted_mib: u64 },
    /// It aborted (wasm `unreachable`: a Rust panic, an exception componentize-py or
    /// componentize-js could not return as a `plugin-error`, an `abort()`).
    Abort,
    /// Another trap.
    Trap(String),
    /// A host import it called failed without an error channel.
    Host(String),
}

impl PluginCallError {
    /// Whether the instance died in this call or an earlier one.
    pub fn is_fault(&self) -> bool {
        matches!(
            self.failure,
            CallFailure::Fault { .. } | CallFailure::AfterFault(_)
        )
    }

    fn render(&self) -> String {
        let (plugin, call) = (&self.plugin, &self.call);
        match &self.failure {
            CallFailure::Plugin(e) => {
                format!("plugin '{plugin}': {call}: {}", plugin_error_message(e))
            }
            CallFailure::Fault { fault, output } => {
                format!("plugin '{plugin}': call '{call}' {fault}{output}")
            }
            CallFailure::AfterFault(fault) => format!(
                "plugin '{plugin}' cannot be called ('{call}') after an earlier fault: {fault}"
            ),
            CallFailure::Contract(why) => format!("plugin '{plugin}': {call}: {why}"),
            CallFailure::NotOpen => {
                format!("plugin '{plugin}': {call}: called before its resource was opened")
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::TimeBudget(budget) => {
                write!(f, "exceeded its {} time budget", format_duration(*budget))
            }
            Fault::Memory {
                limit_mib,
                wanted_mib,
            } => write!(
                f,
                "exceeded its memory limit of {limit_mib} MiB (it tried to grow its memory to \
                 {wanted_mib} MiB)"
            ),
            Fault::Abort => f.write_str(
                "trapped: the plugin aborted (wasm `unreachable`: a panic, an uncaught exception or \
                 an abort in the plugin's code)",
            ),
            Fault::Trap(trap) => write!(f, "trapped: {trap}"),
            Fault::Host(cause) => write!(f, "failed: {cause}"),
        }
    }
}

/// A plugin's error as users read it.
pub fn plugin_error_message(e: &PluginError) -> String {
    match e {
        PluginError::InvalidConfig(m) => format!("invalid configuration: {m}"),
        PluginError::InvalidInput(m) => format!("invalid input: {m}"),
        PluginError::Unsupported(m) => format!("unsupported: {m}"),
        PluginError::Internal(m) => format!("internal error: {m}"),
    }
}

/// `10s`, `1.5s`, `250ms`.
fn format_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn messages_name_plugin_call_and_cause() {
        let e = PluginCallError {
            plugin: "p.wasm".into(),
            call: "next-batch".into(),
            failure: CallFailure::Plugin(PluginError::InvalidInput("line 3".into())),
        };
        assert_eq!(
            e.to_string(),
            "plugin 'p.wasm': next-batch: invalid input: line 3"
        );
        assert!(!e.is_fault());
        let e = PluginCallError {
            failure: CallFailure::Fault {
                fault: Fault::TimeBudget(Duration::from_secs(10)),
                output: String::new(),
            },
            ..e
        };
        assert_eq!(
            e.to_string(),
            "plugin 'p.wasm': call 'next-batch' exceeded its 10s time budget"
        );
        assert!(e.is_fault());
        let e = PluginCallError {
            failure: CallFailure::AfterFault(Fault::Abort),
            ..e
        };
        assert!(e.to_string().starts_with(
            "plugin 'p.wasm' cannot be called ('next-batch') after an earlier fault: trapped"
        ));
    }
}
