//! Host-side bindings of the plugin worlds, one set per contract version the host runs.
//!
//! `current` is generated from `wit/current` (the newest `since_vX.Y.Z` folder) and its
//! types are the host's own: everything outside this module speaks them. Each older version
//! a host still loads has a module of its own (`v0_2_0`, `v0_3_0`, `v0_4_1`, `v0_5_0`,
//! `v0_6_0`) that generates bindings from its frozen folder and holds only what changed
//! since: an interface the version shares with another is not generated again but taken
//! from that version's bindings (bindgen's `with`), and what is left are the conversions
//! between the version's types and the current ones, and the host imports, which every
//! version must link under its own name. 0.3.0, 0.4.x and 0.5.0 share one `types` interface
//! (requests, prompts, descriptions, errors), generated once by `v0_5_0`, which converts it
//! for all three; 0.2.0's is its own, and 0.6.0's is the current one. A version whose
//! interfaces its successor keeps as they were (`v0_4_0`, run by `v0_4_1`'s adapter) needs
//! no adapter, only its place in [`SUPPORTED_VERSIONS`].

/// Generates a contract version's bindings from its WIT folder `$wit`, for the module
/// `$this` that expands it: `dataset` (the `dataset-plugin` world, with the shared
/// interfaces) and `backend` (the `backend-plugin` world, which takes the shared interfaces
/// from `dataset`: a `RequestSpec` sampled by a dataset is the very type a backend's
/// `build-request` takes, and one linker serves both kinds of plugin). `dataset` takes
/// `$with` as bindgen's `with` (an interface taken from elsewhere instead of generated
/// again); `$both` go to both worlds.
macro_rules! plugin_worlds {
    ($wit:tt, $this:ident, with: { $($with:tt)* }, both: { $($both:tt)* }) => {
        /// The `dataset-plugin` world and its shared interfaces.
        pub mod dataset {
            wasmtime::component::bindgen!({
                path: $wit,
                world: "dataset-plugin",
                with: { $($with)* $($both)* },
                imports: {
                    // Without a tokenizer these have no error channel: the host traps with
                    // a message saying which flag is missing.
                    "bench:plugin/tokenizer.vocab-size": trappable,
                    "bench:plugin/tokenizer.special-token-ids": trappable,
                },
            });
        }

        /// The `backend-plugin` world, sharing the dataset world's interfaces.
        pub mod backend {
            wasmtime::component::bindgen!({
                path: $wit,
                world: "backend-plugin",
                with: {
                    "bench:plugin/types": crate::bindings::$this::dataset::bench::plugin::types,
                    "bench:plugin/tokenizer":
                        crate::bindings::$this::dataset::bench::plugin::tokenizer,
                    "bench:plugin/seed": crate::bindings::$this::dataset::bench::plugin::seed,
                    "bench:plugin/log": crate::bindings::$this::dataset::bench::plugin::log,
                    $($both)*
                },
            });
        }
    };
}

/// Implements a frozen version's host imports (`tokenizer`, `seed` and `log`, named
/// `$tokenizer`, `$seed` and `$log` in the calling module) by passing each call on to the
/// current contract's. `seed` and `log` have not changed since 0.2.0, nor have the
/// tokenizer's text functions; the version's chat-template functions, which did change,
/// come after the names, in the tokenizer's `impl`. `chat_template_of_0_5_0` writes them
/// for a version whose chat messages are those of 0.3.0 to 0.5.0 (`v0_5_0`'s types):
/// `apply-chat-template`, and with `tools` (0.4.0 on) `apply-chat-template-with-tools`;
/// `chat_template_current` for a version whose `types` is the current one (0.6.0).
/// Every version still needs these impls: a component imports the interfaces under its own
/// version's names, which the linker keeps apart.
macro_rules! pass_on_host_imports {
    // 0.6.0 on: `types` is the current one, so chat messages pass as they are.
    ($tokenizer:ident, $seed:ident, $log:ident, chat_template_current) => {
        pass_on_host_imports!($tokenizer, $seed, $log, {
            fn apply_chat_template(
                &mut self,
                messages: Vec<crate::bindings::current::dataset::bench::plugin::types::ChatMessage>,
                add_generation_prompt: bool,
            ) -> Result<String, String> {
                cur_tokenizer::Host::apply_chat_template(self, messages, add_generation_prompt)
            }

            fn apply_chat_template_with_tools(
                &mut self,
                messages: Vec<crate::bindings::current::dataset::bench::plugin::types::ChatMessage>,
                tools: String,
                add_generation_prompt: bool,
            ) -> Result<String, String> {
                cur_tokenizer::Host::apply_chat_template_with_tools(
                    self,
                    messages,
                    tools,
                    add_generation_prompt,
                )
            }
        });
    };
    ($tokenizer:ident, $seed:ident, $log:ident, chat_template_of_0_5_0 { $($tools:ident)? }) => {
        pass_on_host_imports!($tokenizer, $seed, $log, {
            fn apply_chat_template(
                &mut self,
                messages: Vec<crate::bindings::v0_5_0::dataset::bench::plugin::types::ChatMessage>,
                add_generation_prompt: bool,
            ) -> Result<String, String> {
                let messages = crate::bindings::v0_5_0::chat_messages_up(messages);
                cur_tokenizer::Host::apply_chat_template(self, messages, add_generation_prompt)
            }

            $(pass_on_host_imports!(@$tools);)?
        });
    };
    (@tools) => {
        fn apply_chat_template_with_tools(
            &mut self,
            messages: Vec<crate::bindings::v0_5_0::dataset::bench::plugin::types::ChatMessage>,
            tools: String,
            add_generation_prompt: bool,
        ) -> Result<String, String> {
            let messages = crate::bindings::v0_5_0::chat_messages_up(messages);
            cur_tokenizer::Host::apply_chat_template_with_tools(
                self,
                messages,
                tools,
                add_generation_prompt,
            )
        }
    };
    ($tokenizer:ident, $seed:ident, $log:ident, { $($chat_template:item)* }) => {
        // In a block of its own, so that its names do not meet the calling module's.
        const _: () = {
            use crate::bindings::current::dataset::bench::plugin::{
                log as cur_log, seed as cur_seed, tokenizer as cur_tokenizer,
            };
            use crate::host::StoreState;

            impl $tokenizer::Host for StoreState {
                fn encode(
                    &mut self,
                    text: String,
                    add_special_tokens: bool,
                ) -> Result<Vec<u32>, String> {
                    cur_tokenizer::Host::encode(self, text, add_special_tokens)
                }

                fn encode_batch(
                    &mut self,
                    texts: Vec<String>,
                    add_special_tokens: bool,
                ) -> Result<Vec<Vec<u32>>, String> {
                    cur_tokenizer::Host::encode_batch(self, texts, add_special_tokens)
                }

                fn decode(
                    &mut self,
                    ids: Vec<u32>,
                    skip_special_tokens: bool,
                ) -> Result<String, String> {
                    cur_tokenizer::Host::decode(self, ids, skip_special_tokens)
                }

                fn vocab_size(&mut self, with_added_tokens: bool) -> wasmtime::Result<u32> {
                    cur_tokenizer::Host::vocab_size(self, with_added_tokens)
                }

                fn special_token_ids(&mut self) -> wasmtime::Result<Vec<u32>> {
                    cur_tokenizer::Host::special_token_ids(self)
                }

                $($chat_template)*
            }

            impl $seed::Host for StoreState {
                fn run_seed(&mut self) -> u64 {
                    cur_seed::Host::run_seed(self)
                }

                fn derive(&mut self, label: String) -> u64 {
                    cur_seed::Host::derive(self, label)
                }
            }

            impl $log::Host for StoreState {
                fn log(&mut self, level: $log::Level, message: String) {
                    let level = match level {
                        $log::Level::Debug => cur_log::Level::Debug,
                        $log::Level::Info => cur_log::Level::Info,
                        $log::Level::Warn => cur_log::Level::Warn,
                        $log::Level::Error => cur_log::Level::Error,
                    };
                    cur_log::Host::log(self, level, message)
                }
            }
        };
    };
}

/// Defines, for a frozen version whose host imports are `$tokenizer`, `$seed` and `$log`,
/// `add_to_linker`: links them, and an empty `bench:plugin/types@$version` instance (the
/// interface holds only types, so there is nothing to link but the name its components
/// import).
macro_rules! link_host_imports {
    ($version:expr, $tokenizer:ident, $seed:ident, $log:ident) => {
        /// Links this version's `bench:plugin` host interfaces (not the worlds' WASI
        /// imports, which `wasmtime_wasi::p2::add_to_linker_sync` links for every version).
        pub fn add_to_linker(
            linker: &mut wasmtime::component::Linker<crate::host::StoreState>,
        ) -> wasmtime::Result<()> {
            use crate::host::StoreState;
            use wasmtime::component::HasSelf;
            linker.instance(&format!("bench:plugin/types@{}", $version))?;
            $tokenizer::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
            $seed::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
            $log::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)
        }
    };
}

/// The conversions of the `dataset` interface's own types, up to the current ones and
/// down, over a version's own bindings (named `$old` in the calling module, the current
/// ones `$cur`): 0.3.0's (`without_shards`) or, from 0.4.0 on, with a `shardable`
/// description and a `shard` in the config (`with_shards`). `types:` names the module that
/// converts the version's `types` (`plugin_info_up`, `session_down`): [`v0_5_0`] for 0.3.0
/// to 0.5.0, [`v0_6_0`] (whose `types` is the current one) for 0.6.0. Expanded by
/// [`v0_3_0`] (without shards) and [`v0_4_1`], [`v0_5_0`] and [`v0_6_0`] (with shards).
/// 0.7.0 changed what `next-batch` returns (samples, with references), which
/// `crate::dataset` wraps for every older version.
macro_rules! dataset_conversions {
    ($old:ident, $cur:ident, types: $types:ident, without_shards) => {
        // 0.3.0's datasets are never shardable.
        dataset_conversions!(@description $old, $cur, $types, |_| false);

        pub(crate) fn dataset_config_down(c: &$cur::DatasetConfig) -> $old::DatasetConfig {
            $old::DatasetConfig {
                num_requests: c.num_requests,
                path: c.path.clone(),
                options: c.options.clone(),
            }
        }
    };
    ($old:ident, $cur:ident, types: $types:ident, with_shards) => {
        dataset_conversions!(@description $old, $cur, $types, |d| d.shardable);

        pub(crate) fn dataset_config_down(c: &$cur::DatasetConfig) -> $old::DatasetConfig {
            $old::DatasetConfig {
                num_requests: c.num_requests,
                path: c.path.clone(),
                options: c.options.clone(),
                shard: c.shard.as_ref().map(|s| $old::Shard {
                    index: s.index,
                    count: s.count,
                }),
            }
        }
    };
    // What both have: `$shardable` says, from the old description, whether the dataset is.
    (@description $old:ident, $cur:ident, $types:ident, $shardable:expr) => {
        pub(crate) fn dataset_description_up(
            d: $old::DatasetDescription,
        ) -> $cur::DatasetDescription {
            let shardable: fn(&$old::DatasetDescription) -> bool = $shardable;
            $cur::DatasetDescription {
                shardable: shardable(&d),
                info: crate::bindings::$types::plugin_info_up(d.info),
                path: match d.path {
                    $old::PathUse::Refused => $cur::PathUse::Refused,
                    $old::PathUse::Optional => $cur::PathUse::Optional,
                    $old::PathUse::Required => $cur::PathUse::Required,
                },
                ignore_eos_by_default: d.ignore_eos_by_default,
                align_to_server_tokenizer: d.align_to_server_tokenizer,
                multi_turn: d.multi_turn,
            }
        }

        pub(crate) fn turn_result_down(t: &$cur::TurnResult) -> $old::TurnResult {
            $old::TurnResult {
                session: crate::bindings::$types::session_down(&t.session),
                success: t.success,
                generated_text: t.generated_text.clone(),
                ttft: t.ttft,
                latency: t.latency,
                finished_at: t.finished_at,
            }
        }
    };
}

/// The conversions of the `backend` interface as 0.3.0 defined it, up to the current one
/// and down; 0.4.0 and 0.4.1 kept it unchanged, and 0.5.0 only added the `server-timing`
/// event (its arm of `event_kind_up` given as `more_events`), which 0.6.0 and 0.7.0 kept, so
/// [`v0_3_0`], [`v0_4_1`], [`v0_5_0`] and [`v0_6_0`] expand them, over their own bindings
/// (named `$old` in the calling module, the current ones `$cur`; `types:` as for
/// `dataset_conversions!`). Each version's bindgen makes types of its own for an
/// interface its plugins export, even one the same as another version's, so the
/// conversions are written once and made for each.
macro_rules! backend_conversions {
    ($old:ident, $cur:ident, types: $types:ident $(, more_events: { $($more_events:tt)* })?) => {
        pub(crate) fn backend_description_up(
            d: $old::BackendDescription,
        ) -> $cur::BackendDescription {
            $cur::BackendDescription {
                info: crate::bindings::$types::plugin_info_up(d.info),
                openai_compatible: d.openai_compatible,
            }
        }

        pub(crate) fn client_config_down(c: &$cur::ClientConfig) -> $old::ClientConfig {
            $old::ClientConfig {
                model: c.model.clone(),
                ignore_eos: c.ignore_eos,
                stream: c.stream,
                extra_body: c.extra_body.clone(),
                options: c.options.clone(),
            }
        }

        pub(crate) fn framing_up(f: $old::Framing) -> $cur::Framing {
            match f {
                $old::Framing::Sse => $cur::Framing::Sse,
                $old::Framing::Ndjson => $cur::Framing::Ndjson,
                $old::Framing::Raw => $cur::Framing::Raw,
            }
        }

        pub(crate) fn http_request_up(r: $old::HttpRequest) -> $cur::HttpRequest {
            $cur::HttpRequest {
                method: r.method,
                headers: r.headers,
                body: r.body,
            }
        }

        pub(crate) fn response_head_down(h: &$cur::ResponseHead) -> $old::ResponseHead {
            $old::ResponseHead {
                status: h.status,
                headers: h.headers.clone(),
            }
        }

        fn event_kind_up(k: $old::EventKind) -> $cur::EventKind {
            match k {
                $old::EventKind::Usage(u) => $cur::EventKind::Usage($cur::Usage {
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens,
                    cached_prompt_tokens: u.cached_prompt_tokens,
                }),
                $old::EventKind::Finish(reason) => $cur::EventKind::Finish(reason),
                $old::EventKind::Error(e) => $cur::EventKind::Error($cur::ErrorEvent {
                    kind: match e.kind {
                        $old::ErrorKind::Server => $cur::ErrorKind::Server,
                        $old::ErrorKind::MalformedFrame => $cur::ErrorKind::MalformedFrame,
                    },
                    message: e.message,
                }),
                $old::EventKind::Pooled(p) => $cur::EventKind::Pooled($cur::Pooled {
                    kind: match p.kind {
                        $old::PooledKind::Embedding => $cur::PooledKind::Embedding,
                        $old::PooledKind::Score => $cur::PooledKind::Score,
                        $old::PooledKind::Classification => $cur::PooledKind::Classification,
                        $old::PooledKind::Other => $cur::PooledKind::Other,
                    },
                    count: p.count,
                    dimension: p.dimension,
                }),
                $($($more_events)*)?
            }
        }

        pub(crate) fn decoded_up(d: $old::Decoded) -> $cur::Decoded {
            let $old::Chunks {
                frames,
                spans,
                escaped,
                tokens,
            } = d.chunks;
            $cur::Decoded {
                chunks: $cur::Chunks {
                    frames,
                    spans,
                    escaped,
                    tokens,
                },
                events: d
                    .events
                    .into_iter()
                    .map(|e| $cur::Event {
                        frame: e.frame,
                        kind: event_kind_up(e.kind),
                    })
                    .collect(),
            }
        }
    };
}

// The macros come before the modules that expand them.
pub mod current;
pub mod v0_2_0;
pub mod v0_3_0;
pub mod v0_4_0;
pub mod v0_4_1;
pub mod v0_5_0;
pub mod v0_6_0;

/// The contract version of `current` (the `package` line of `wit/current/plugin.wit`, read
/// by `build.rs`: the one place it is written).
pub const CURRENT_VERSION: &str = env!("BENCH_PLUGIN_API_VERSION");

/// The versions this host loads, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &[
    CURRENT_VERSION,
    v0_6_0::VERSION,
    v0_5_0::VERSION,
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
            ("since_v0.5.0/plugin.wit", v0_5_0::FROZEN_SHA256),
            ("since_v0.6.0/plugin.wit", v0_6_0::FROZEN_SHA256),
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
