//! The first-party plugins, built for wasm32-wasip2 by `build.rs` and embedded in the
//! binary so `--backend openai-chat` needs no file.

use super::PluginKind;

/// A plugin embedded in the binary.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinPlugin {
    /// How users name it: the crate name (`openai-chat`), or the manifest's
    /// `[package.metadata.bench] name` where a crate name cannot hold it (`llama.cpp`).
    pub name: &'static str,
    /// The kind its source directory declares (`plugins/datasets` or `plugins/backends`);
    /// loading still checks the component's exports.
    pub kind: PluginKind,
    /// The component.
    pub wasm: &'static [u8],
}

// Defines `BUILTIN: &[BuiltinPlugin]` and `BUILD_NOTE: Option<&str>`.
include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

/// The plugins embedded in this binary, in name order.
pub fn builtin_plugins() -> &'static [BuiltinPlugin] {
    BUILTIN
}

/// Why this binary embeds no plugins (e.g. their build failed), when it embeds none.
pub fn builtin_plugins_note() -> Option<&'static str> {
    BUILD_NOTE
}
