//! Host-side bindings of the plugin worlds, one set per contract version the host runs.
//!
//! `current` is generated from `wit/current` (the newest `since_vX.Y.Z` folder) and its
//! types are the host's own: everything outside this module speaks them. Each older
//! version a host still loads has a module of its own (`v0_2_0`, `v0_3_0`, `v0_4_1`) that
//! generates bindings from its frozen folder and converts its types to and from the current
//! ones, so a plugin built for that version runs unchanged; a version whose interfaces its
//! successor keeps as they were (`v0_4_0`, run by `v0_4_1`'s adapter) needs no adapter, only
//! its place in [`SUPPORTED_VERSIONS`].

pub mod current;
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
