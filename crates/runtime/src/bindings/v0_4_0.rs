//! Contract `bench:plugin@0.4.0` (frozen in `wit/since_v0.4.0`).
//!
//! 0.4.1 only added the WASI imports a plugin may use (`runtime-imports`) to the worlds;
//! every `bench:plugin` interface is the same. A 0.4.0 plugin therefore runs on the 0.4.1
//! adapter ([`super::v0_4_1`]), with no adapter of its own: wasmtime resolves its `@0.4.0`
//! imports and exports against the `@0.4.1` ones as semver-compatible versions.

/// The version this module stands for.
pub const VERSION: &str = "0.4.0";

/// SHA-256 of `wit/since_v0.4.0/plugin.wit`, pinned when 0.4.1 started: released contracts
/// never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "35395dd6e0881846c76f7f9589ed26460fb29e7e4867e5914a6c0b72ae8eeb3f";
