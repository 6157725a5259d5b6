//! Builds the first-party plugins (`plugins/`, a separate workspace) for wasm32-wasip2 in
//! release mode and embeds them: `OUT_DIR/builtin_plugins.rs` lists each one's name, kind
//! and bytes (`include_bytes!`), for `host/src/runtime/embedded.rs`.
//!
//! If the plugins fail to build, bench is still built (so one broken plugin crate does not
//! stop work on the host) with no plugins embedded: cargo prints the errors as warnings and
//! the binary says why when a built-in plugin is asked for. `BENCH_REQUIRE_PLUGINS=1` (for
//! CI and releases) makes that failure an error; `BENCH_SKIP_PLUGIN_BUILD=1` skips the
//! plugin build altogether.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Variables of the outer build that must not reach the nested one: they would retarget
/// it, change its flags or profile, or point it at the host's target directory.
const LEAKING_VARS: &[&str] = &[
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_CRATE_NAME",
    "CARGO_PKG_NAME",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "PROFILE",
    "OPT_LEVEL",
    "DEBUG",
    "NUM_JOBS",
    "RUSTC_LINKER",
];

/// Prefixes of such variables (per-profile, per-target and per-feature settings).
const LEAKING_PREFIXES: &[&str] = &[
    "CARGO_PROFILE_",
    "CARGO_TARGET_",
    "CARGO_CFG_",
    "CARGO_FEATURE_",
    "CARGO_PKG_",
    "DEP_",
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let repo = manifest_dir
        .parent()
        .expect("host/ has a parent")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let plugins = repo.join("plugins");

    for watched in [
        "plugins/Cargo.toml",
        "plugins/datasets",
        "plugins/backends",
        "sdk",
        "wit",
    ] {
        let path = repo.join(watched);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }

    let members = plugin_crates(&plugins);
    let mut entries = Vec::new();
    // Why no plugins are embedded, when none are; the binary shows it where a built-in
    // plugin is asked for.
    let note: Option<String> = if env_flag("BENCH_SKIP_PLUGIN_BUILD") {
        Some("bench was built with BENCH_SKIP_PLUGIN_BUILD set".to_owned())
    } else if members.is_empty() {
        Some("plugins/ had no plugin crates when bench was built".to_owned())
    } else if let Some(empty) = ["Dataset", "Backend"]
        .into_iter()
        .find(|kind| !members.iter().any(|(_, k)| k == kind))
    {
        // plugins/Cargo.toml lists `datasets/*` and `backends/*`; cargo refuses a
        // workspace whose glob matches nothing, so there is nothing we can build yet.
        Some(format!(
            "plugins/ had no {} crate when bench was built",
            empty.to_lowercase()
        ))
    } else {
        let target_dir = repo.join("target/wasm-plugins");
        match build_plugins(&plugins, &target_dir) {
            Ok(()) => {
                let built = target_dir.join("wasm32-wasip2/release");
                let embed_dir = out_dir.join("plugins");
                std::fs::create_dir_all(&embed_dir).expect("creating OUT_DIR/plugins");
                for (name, kind) in &members {
                    // Cargo names the artifact after the crate, dashes turned into underscores.
                    let artifact = built.join(format!("{}.wasm", name.replace('-', "_")));
                    let embedded = embed_dir.join(format!("{name}.wasm"));
                    std::fs::copy(&artifact, &embedded).unwrap_or_else(|e| {
                        panic!(
                            "plugin crate '{name}' produced no {} ({e}); is it a `cdylib`?",
                            artifact.display()
                        )
                    });
                    entries.push((name.clone(), *kind, embedded));
                }
                None
            }
            Err(errors) if env_flag("BENCH_REQUIRE_PLUGINS") => {
                panic!("building the first-party plugins failed:\n{errors}")
            }
            Err(errors) => {
                for line in errors.lines() {
                    println!("cargo:warning={line}");
                }
                println!(
                    "cargo:warning=building the first-party plugins failed: bench embeds none \
                     (set BENCH_REQUIRE_PLUGINS=1 to make this an error)"
                );
                Some("building the first-party plugins failed when bench was built".to_owned())
            }
        }
    };
    if let Some(note) = &note
        && !members.is_empty()
    {
        println!("cargo:warning=no first-party plugins are embedded: {note}");
    }

    let mut code =
        String::from("/// Generated by host/build.rs.\nstatic BUILTIN: &[BuiltinPlugin] = &[\n");
    for (name, kind, path) in &entries {
        code.push_str(&format!(
            "    BuiltinPlugin {{ name: {name:?}, kind: PluginKind::{kind}, wasm: include_bytes!({:?}) }},\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    code.push_str(&format!(
        "/// Why no plugins are embedded, when none are.\nstatic BUILD_NOTE: Option<&str> = {note:?};\n"
    ));
    std::fs::write(out_dir.join("builtin_plugins.rs"), code).expect("writing builtin_plugins.rs");
}

/// Whether the environment variable `name` is set to something other than empty or `0`.
fn env_flag(name: &str) -> bool {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// `(crate name, kind)` of every crate under `plugins/datasets` and `plugins/backends`, in
/// name order.
fn plugin_crates(plugins: &Path) -> Vec<(String, &'static str)> {
    let mut crates = Vec::new();
    for (dir, kind) in [("datasets", "Dataset"), ("backends", "Backend")] {
        let Ok(entries) = std::fs::read_dir(plugins.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let manifest = entry.path().join("Cargo.toml");
            if let Ok(text) = std::fs::read_to_string(&manifest) {
                let name = package_name(&text)
                    .unwrap_or_else(|| panic!("{} has no [package] name", manifest.display()));
                crates.push((name, kind));
            }
        }
    }
    crates.sort();
    crates
}

/// The `name` of the `[package]` table of a Cargo manifest.
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_owned());
        }
    }
    None
}

/// `cargo build --release --target wasm32-wasip2` of the plugins workspace, with the
/// same cargo as the outer build and none of the outer build's settings. On failure,
/// returns the compiler's error lines.
fn build_plugins(plugins: &Path, target_dir: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--release")
        .args(["--target", "wasm32-wasip2"])
        .arg("--manifest-path")
        .arg(plugins.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if LEAKING_VARS.contains(&key) || LEAKING_PREFIXES.iter().any(|p| key.starts_with(p)) {
            command.env_remove(key);
        }
    }
    // Captured: our stdout is read by cargo for `cargo:` directives.
    let output = command
        .output()
        .map_err(|e| format!("running cargo to build the plugins: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown by cargo when this script fails, and kept in target/ otherwise.
    eprint!("{stderr}");
    if output.status.success() {
        return Ok(());
    }
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("error") || line.trim_start().starts_with("-->"))
        .take(20)
        .collect();
    Err(format!(
        "cargo build of plugins/ failed ({}):\n{}",
        output.status,
        errors.join("\n")
    ))
}
