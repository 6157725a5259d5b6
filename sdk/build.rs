//! Generates the SDK's bindings of the current plugin contract (`wit/current`) into
//! `OUT_DIR/bindings.rs`, with the contract version read from the WIT's `package` line,
//! the one place it is written: wit-bindgen's `with` keys name interfaces with their
//! version, and writing them here keeps the version out of the SDK's source.

use std::path::PathBuf;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let wit_dir = manifest_dir.join("../wit/current");
    let wit = wit_dir.join("plugin.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let text =
        std::fs::read_to_string(&wit).unwrap_or_else(|e| panic!("reading {}: {e}", wit.display()));
    let version = text
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("package bench:plugin@")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            panic!(
                "{} has no `package bench:plugin@X.Y.Z;` line",
                wit.display()
            )
        });
    println!("cargo:rustc-env=BENCH_PLUGIN_API_VERSION={version}");
    println!("cargo:rerun-if-changed={}", wit_dir.join("deps").display());

    // The WASI interfaces the worlds import (`runtime-imports`): generated once, in the
    // dataset world's bindings, and shared by the backend world's.
    let wasi_with: String = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("import wasi:")?.strip_suffix(';'))
        .map(|import| {
            let (package, rest) = import.split_once('/').expect("wasi:<package>/<interface>");
            let interface = rest.split('@').next().expect("an interface name");
            format!(
                "            \"wasi:{import}\": crate::dataset_bindings::wasi::{}::{},\n",
                package.replace('-', "_"),
                interface.replace('-', "_")
            )
        })
        .collect();

    let path = wit_dir.display().to_string().replace('\\', "/");
    let bindings = format!(
        r#"/// Bindings of the `dataset-plugin` world. Plugin authors use the re-exports below.
#[doc(hidden)]
pub mod dataset_bindings {{
    wit_bindgen::generate!({{
        path: "{path}",
        world: "dataset-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_dataset_world",
        default_bindings_module: "bench_sdk::dataset_bindings",
        // The WASI interfaces of `runtime-imports`; a plugin that calls none of them
        // imports none.
        generate_all,
    }});
}}

/// Bindings of the `backend-plugin` world, sharing the types of the dataset world.
#[doc(hidden)]
pub mod backend_bindings {{
    wit_bindgen::generate!({{
        path: "{path}",
        world: "backend-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_backend_world",
        default_bindings_module: "bench_sdk::backend_bindings",
        with: {{
            "bench:plugin/types@{version}": crate::dataset_bindings::bench::plugin::types,
            "bench:plugin/tokenizer@{version}": crate::dataset_bindings::bench::plugin::tokenizer,
            "bench:plugin/seed@{version}": crate::dataset_bindings::bench::plugin::seed,
            "bench:plugin/log@{version}": crate::dataset_bindings::bench::plugin::log,
{wasi_with}        }},
    }});
}}
"#
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("bindings.rs");
    std::fs::write(&out, bindings).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
