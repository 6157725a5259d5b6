//! The fixture plugins of `tests/fixtures/plugins` (third-party plugins as far as the host
//! knows: built here for wasm32-wasip2, never embedded). Shared by the tests and by the
//! decode benchmark, which measures the boundary with `echo-backend`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use bench::runtime::PluginRef;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Builds the fixture workspace once per process and returns its output directory.
fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let repo = repo();
        let target_dir = repo.join("target/wasm-fixtures");
        let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cargo
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
            ])
            .arg(repo.join("tests/fixtures/plugins/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir);
        // The outer build's settings are for the host, not for these wasm builds.
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_DIR",
        ] {
            cargo.env_remove(var);
        }
        let status = cargo
            .status()
            .expect("running cargo for the fixture plugins");
        assert!(status.success(), "building tests/fixtures/plugins failed");
        target_dir.join("wasm32-wasip2/release")
    })
}

/// The fixture plugin called `name` (its crate name), built.
pub fn fixture(name: &str) -> PluginRef {
    let path = built().join(format!("{}.wasm", name.replace('-', "_")));
    assert!(path.is_file(), "{} was not built", path.display());
    PluginRef::File(path)
}

/// A plugin as a command line names it: a file's path, or a built-in's name.
pub fn path_of(plugin: &PluginRef) -> String {
    match plugin {
        PluginRef::File(path) => path.to_str().unwrap().to_owned(),
        PluginRef::Builtin(name) => name.clone(),
    }
}

/// The `hostile-decoder` fixture, loaded in `runtime` and opened (streaming) with one
/// backend option `key=value`, which chooses how it misbehaves.
pub fn hostile_decoder(
    runtime: &bench::runtime::Runtime,
    key: &str,
    value: &str,
) -> bench::runtime::BackendPlugin {
    let mut backend = runtime
        .load_backend(&fixture("hostile-decoder"), Default::default())
        .unwrap();
    backend
        .open(bench::runtime::ClientConfig {
            model: "m".into(),
            ignore_eos: false,
            stream: true,
            extra_body: None,
            options: vec![(key.into(), value.into())],
        })
        .unwrap();
    backend
}

/// One SSE-framed chat chunk carrying `text`, as the framer hands it to a decoder.
pub fn chat_frame(text: &str) -> Vec<u8> {
    format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{text}"}}}}]}}"#).into_bytes()
}
