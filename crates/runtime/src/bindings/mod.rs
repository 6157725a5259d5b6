//! Host-side bindings of the plugin worlds, one set per contract version the host runs.
//!
//! `current` is generated from `wit/current` (the newest `since_vX.Y.Z` folder) and its
//! types are the host's own: everything outside this module speaks them. Each older
//! version a host still loads has a module of its own (`v0_2_0`, `v0_3_0`, `v0_4_1`) that
//! generates bindings from its frozen folder and converts its types to and from the current
//! ones, so a plugin built for that version runs unchanged; a version whose interfaces its
//! successor keeps as they were (`v0_4_0`, run by `v0_4_1`'s adapter) needs no adapter, only
//! its place in [`SUPPORTED_VERSIONS`].

pub mod v0_2_0;
pub mod v0_3_0;
pub mod v0_4_0;
pub mod v0_4_1;

/// The contract version of `current` (the `package` line of `wit/current/plugin.wit`, read
/// by `build.rs`: the one place it is written).
pub const CURRENT_VERSION: &str = env!("BENCH_PLUGIN_API_VERSION");

/// The versions this host loads, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &[
    CURRENT_VERSION,
    v0_4_1::VERSION,
    v0_4_0::VERSION,
    v0_3_0::VERSION,
    v0_2_0::VERSION,
];

/// Bindings of the current contract.
pub mod current {
    use wasmtime::component::{HasSelf, Linker};

    use crate::host::StoreState;

    /// Links the host's side of the contract: the `bench:plugin` interfaces. The worlds'
    /// WASI imports are linked apart, by `wasmtime_wasi::p2::add_to_linker_sync` (the
    /// worlds' own `add_to_linker` would link them twice).
    pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
        use dataset::bench::plugin::{log, seed, tokenizer, types};
        types::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
        tokenizer::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
        seed::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
        log::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)
    }

    /// The `dataset-plugin` world (and with it the shared `types`, `tokenizer`, `seed` and
    /// `log` interfaces).
    pub mod dataset {
        wasmtime::component::bindgen!({
            path: "../../wit/current",
            world: "dataset-plugin",
            // The worlds' WASI imports (`runtime-imports`) are wasmtime-wasi's own,
            // linked by `wasmtime_wasi::p2::add_to_linker_sync`.
            with: {
                "wasi": wasmtime_wasi::p2::bindings::sync,
            },
            imports: {
                // Without a tokenizer these have no error channel: the host traps with a
                // message saying which flag is missing.
                "bench:plugin/tokenizer.vocab-size": trappable,
                "bench:plugin/tokenizer.special-token-ids": trappable,
            },
        });
    }

    /// The `backend-plugin` world, sharing the dataset world's interfaces: a
    /// `RequestSpec` sampled by a dataset is the very type a backend's `build-request`
    /// takes, and one linker serves both kinds of plugin.
    pub mod backend {
        wasmtime::component::bindgen!({
            path: "../../wit/current",
            world: "backend-plugin",
            with: {
                "bench:plugin/types": crate::bindings::current::dataset::bench::plugin::types,
                "bench:plugin/tokenizer": crate::bindings::current::dataset::bench::plugin::tokenizer,
                "bench:plugin/seed": crate::bindings::current::dataset::bench::plugin::seed,
                "bench:plugin/log": crate::bindings::current::dataset::bench::plugin::log,
                "wasi": wasmtime_wasi::p2::bindings::sync,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn wit(rel: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../wit")
            .join(rel)
    }

    #[test]
    fn the_current_folder_is_named_for_the_version_its_package_line_declares() {
        let current = std::fs::canonicalize(wit("current")).unwrap();
        let folder = current.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(folder, format!("since_v{CURRENT_VERSION}"));
        let text = std::fs::read_to_string(current.join("plugin.wit")).unwrap();
        assert!(text.contains(&format!("package bench:plugin@{CURRENT_VERSION};")));
        // The newest folder is the current one.
        let mut versions: Vec<Vec<u32>> = std::fs::read_dir(wit(""))
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                let v = name.strip_prefix("since_v")?.to_owned();
                Some(v.split('.').map(|p| p.parse().unwrap()).collect())
            })
            .collect();
        versions.sort();
        let newest: Vec<String> = versions
            .last()
            .unwrap()
            .iter()
            .map(u32::to_string)
            .collect();
        assert_eq!(newest.join("."), CURRENT_VERSION);
    }

    /// Released contracts never change: a plugin built against one must keep loading.
    /// (Each frozen folder's hash is pinned when its successor starts.)
    #[test]
    fn frozen_contracts_are_unchanged() {
        let frozen = [
            ("since_v0.2.0/plugin.wit", v0_2_0::FROZEN_SHA256),
            ("since_v0.3.0/plugin.wit", v0_3_0::FROZEN_SHA256),
            ("since_v0.4.0/plugin.wit", v0_4_0::FROZEN_SHA256),
            ("since_v0.4.1/plugin.wit", v0_4_1::FROZEN_SHA256),
        ];
        for (file, want) in frozen {
            let bytes = std::fs::read(wit(file)).unwrap();
            let got: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                got, want,
                "wit/{file} changed: released contracts are frozen"
            );
        }
    }
}
