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
        // The outer build's settings are for the host, not for these wasm builds (.ci/run
        // builds the host with clippy's driver as its compiler and warnings denied).
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_DIR",
            "RUSTC_WORKSPACE_WRAPPER",
            "CLIPPY_ARGS",
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
