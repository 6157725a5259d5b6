//! The plugin runtime: dataset and backend plugins are WebAssembly components run in a
//! wasmtime sandbox.
//!
//! One engine serves the process (epoch interruption ticked by a plain thread). Each plugin
//! is compiled once (and cached on disk, keyed by the wasm's hash and the engine's
//! compatibility hash), pre-linked once (`InstancePre`), and instantiated into its own
//! store per use. A store gets a memory cap (growing past it traps), every call a time
//! budget, and WASI with no environment, arguments, network or files except the dataset
//! path, read-only. A trap, timeout or memory overrun becomes an error naming the plugin,
//! the call and the cause, with the tail of the plugin's stderr.

mod backend;
mod bindings;
mod dataset;
mod embedded;
mod engine;
mod error;
mod host;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

pub use backend::BackendPlugin;
pub use bindings::current::backend::exports::bench::plugin::backend::{
    BackendDescription, Chunks, ClientConfig, Decoded, ErrorEvent, ErrorKind, Event, EventKind,
    Framing, HttpRequest, Pooled, PooledKind, ResponseHead, ServerTiming, Usage,
};
pub use bindings::current::dataset::bench::plugin::types::{
    BinaryData, ChatMessage, ContentPart, OptionInfo, OptionKind, OutputConstraint, PluginError,
    PluginInfo, Prompt, RequestSpec, RerankInput, Session, SharedFlag,
};
pub use bindings::current::dataset::exports::bench::plugin::dataset::{
    DatasetConfig, DatasetDescription, PathUse, Sample, TurnResult, Verdict,
};
pub use bindings::{CURRENT_VERSION as API_VERSION, SUPPORTED_VERSIONS};
pub use dataset::DatasetPlugin;
pub use embedded::{BuiltinPlugin, builtin_plugins, builtin_plugins_note};
pub use engine::{CompileEvent, CompileNotice, cache_dir_from_env, cache_usage, clear_cache};
use error::wasm_error;
pub use error::{CallFailure, Fault, PluginCallError, plugin_error_message};
pub use host::{HostContext, PLUGIN_LOG_TARGET, chat_message_json, derive_seed};

use host::StoreState;

/// The WIT package name plugins are built against.
const PACKAGE: &str = "bench:plugin";

/// Which contract a plugin implements, read from the component's exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginKind {
    Dataset,
    Backend,
}

impl PluginKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Dataset => "dataset",
            PluginKind::Backend => "backend",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plugin as the user names it: a first-party plugin embedded in the binary, or a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginRef {
    Builtin(String),
    File(PathBuf),
}

impl PluginRef {
    /// A path when `spec` ends with `.wasm` or contains a `/`, else the name of a built-in
    /// plugin (an unknown name is an error that lists the built-in ones).
    pub fn parse(spec: &str) -> Result<PluginRef> {
        if spec.ends_with(".wasm") || spec.contains('/') {
            return Ok(PluginRef::File(PathBuf::from(spec)));
        }
        if builtin_plugins().iter().any(|p| p.name == spec) {
            return Ok(PluginRef::Builtin(spec.to_owned()));
        }
        let known: Vec<String> = builtin_plugins()
            .iter()
            .map(|p| format!("{} ({})", p.name, p.kind))
            .collect();
        let known = if known.is_empty() {
            format!(
                "none are built into this binary: {}",
                builtin_plugins_note().unwrap_or("it was built without them")
            )
        } else {
            format!("built-in plugins: {}", known.join(", "))
        };
        bail!("unknown plugin '{spec}' ({known}); to load a file, give a path ending in .wasm")
    }

    /// The name used in messages: the built-in name or the path as given.
    pub fn display(&self) -> String {
        match self {
            PluginRef::Builtin(name) => name.clone(),
            PluginRef::File(path) => path.display().to_string(),
        }
    }

    /// The component's bytes.
    fn bytes(&self) -> Result<std::borrow::Cow<'static, [u8]>> {
        match self {
            PluginRef::Builtin(name) => builtin_plugins()
                .iter()
                .find(|p| p.name == name)
                .map(|p| std::borrow::Cow::Borrowed(p.wasm))
                .ok_or_else(|| anyhow!("no built-in plugin named '{name}'")),
            PluginRef::File(path) => std::fs::read(path)
                .map(std::borrow::Cow::Owned)
                .with_context(|| format!("reading plugin {}", path.display())),
        }
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// Sandbox limits and the compile cache.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// The most linear memory one plugin store may hold, in bytes.
    pub memory_limit: u64,
    /// How long one plugin call may run before it is interrupted, counting the plugin's
    /// own time (the host's tokenizer work for it is not counted: see `host::CallClock`).
    pub call_budget: Duration,
    /// Where compiled components are cached; `None`: nowhere (each load compiles). The
    /// CLI uses [`cache_dir_from_env`].
    pub cache_dir: Option<PathBuf>,
    /// The most instances a shardable dataset is prepared with at once (one shard each);
    /// `None`: one per core.
    pub max_shards: Option<u32>,
    /// Told when a component is compiled because the cache has no copy of it: compiling a
    /// large one (a Python or JavaScript runtime, 10-20 MB) takes seconds, which the CLI
    /// shows rather than seeming to hang.
    pub on_compile: Option<CompileNotice>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            memory_limit: 512 << 20,
            call_budget: Duration::from_secs(10),
            cache_dir: None,
            max_shards: None,
            on_compile: None,
        }
    }
}

/// Loads plugins. Cheap to share (and to clone): holds the engine and the linker.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<StoreState>>,
    config: RuntimeConfig,
    cache_dir: Option<PathBuf>,
}

/// A compiled, version-checked and pre-linked plugin; instantiating it is cheap.
pub(crate) struct Loaded {
    pub(crate) name: Arc<str>,
    pub(crate) kind: PluginKind,
    /// The contract version the plugin was built for (one of [`SUPPORTED_VERSIONS`]).
    pub(crate) version: &'static str,
    pub(crate) pre: TypedPre,
    pub(crate) memory_limit: u64,
    pub(crate) call_budget: Duration,
    pub(crate) max_shards: u32,
}

/// The pre-linked component with the export indices of its world, per contract version.
pub(crate) enum TypedPre {
    Dataset(bindings::current::dataset::DatasetPluginPre<StoreState>),
    Backend(bindings::current::backend::BackendPluginPre<StoreState>),
    DatasetV0_2_0(bindings::v0_2_0::dataset::DatasetPluginPre<StoreState>),
    BackendV0_2_0(bindings::v0_2_0::backend::BackendPluginPre<StoreState>),
    DatasetV0_3_0(bindings::v0_3_0::dataset::DatasetPluginPre<StoreState>),
    BackendV0_3_0(bindings::v0_3_0::backend::BackendPluginPre<StoreState>),
    /// 0.4.1's worlds, which 0.4.0 plugins load through too.
    DatasetV0_4_1(bindings::v0_4_1::dataset::DatasetPluginPre<StoreState>),
    BackendV0_4_1(bindings::v0_4_1::backend::BackendPluginPre<StoreState>),
    DatasetV0_5_0(bindings::v0_5_0::dataset::DatasetPluginPre<StoreState>),
    BackendV0_5_0(bindings::v0_5_0::backend::BackendPluginPre<StoreState>),
    DatasetV0_6_0(bindings::v0_6_0::dataset::DatasetPluginPre<StoreState>),
    BackendV0_6_0(bindings::v0_6_0::backend::BackendPluginPre<StoreState>),
}

impl TypedPre {
    fn engine(&self) -> &Engine {
        match self {
            TypedPre::Dataset(pre) => pre.engine(),
            TypedPre::Backend(pre) => pre.engine(),
            TypedPre::DatasetV0_2_0(pre) => pre.engine(),
            TypedPre::BackendV0_2_0(pre) => pre.engine(),
            TypedPre::DatasetV0_3_0(pre) => pre.engine(),
            TypedPre::BackendV0_3_0(pre) => pre.engine(),
            TypedPre::DatasetV0_4_1(pre) => pre.engine(),
            TypedPre::BackendV0_4_1(pre) => pre.engine(),
            TypedPre::DatasetV0_5_0(pre) => pre.engine(),
            TypedPre::BackendV0_5_0(pre) => pre.engine(),
            TypedPre::DatasetV0_6_0(pre) => pre.engine(),
            TypedPre::BackendV0_6_0(pre) => pre.engine(),
        }
    }
}

/// What `bench plugin inspect` shows.
#[derive(Clone, Debug)]
pub struct PluginSummary {
    pub name: String,
    pub kind: PluginKind,
    /// The `bench:plugin` WIT version the plugin was built for.
    pub api_version: String,
    /// The plugin's own description (name, version, options).
    pub info: PluginInfo,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Result<Runtime> {
        let engine = engine::engine()?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(wasm_error)
            .context("linking WASI")?;
        // The host interfaces of every supported version, side by side: a component
        // imports those of the version it was built for.
        host::add_to_linker(&mut linker)
            .map_err(wasm_error)
            .context("linking the plugin host interfaces")?;
        bindings::v0_2_0::dataset::DatasetPlugin::add_to_linker::<
            StoreState,
            wasmtime::component::HasSelf<StoreState>,
        >(&mut linker, |state| state)
        .map_err(wasm_error)
        .context("linking the plugin host interfaces of bench:plugin@0.2.0")?;
        bindings::v0_3_0::add_to_linker(&mut linker)
            .map_err(wasm_error)
            .context("linking the plugin host interfaces of bench:plugin@0.3.0")?;
        bindings::v0_4_1::add_to_linker(&mut linker)
            .map_err(wasm_error)
            .context("linking the plugin host interfaces of bench:plugin@0.4.1")?;
        bindings::v0_5_0::add_to_linker(&mut linker)
            .map_err(wasm_error)
            .context("linking the plugin host interfaces of bench:plugin@0.5.0")?;
        bindings::v0_6_0::add_to_linker(&mut linker)
            .map_err(wasm_error)
            .context("linking the plugin host interfaces of bench:plugin@0.6.0")?;
        let cache_dir = config.cache_dir.clone();
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
            config,
            cache_dir,
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Loads a dataset plugin; `dataset_path`, when given, is the only path it may read.
    pub fn load_dataset(
        &self,
        plugin: &PluginRef,
        host: HostContext,
        dataset_path: Option<&Path>,
    ) -> Result<DatasetPlugin> {
        let loaded = self.load(plugin, Some(PluginKind::Dataset))?;
        DatasetPlugin::new(loaded, host, dataset_path)
    }

    /// Loads a backend plugin.
    pub fn load_backend(&self, plugin: &PluginRef, host: HostContext) -> Result<BackendPlugin> {
        let loaded = self.load(plugin, Some(PluginKind::Backend))?;
        BackendPlugin::new(loaded, host)
    }

    /// Loads any plugin and describes it (for `bench plugin list` and `inspect`).
    pub fn inspect(&self, plugin: &PluginRef) -> Result<PluginSummary> {
        let loaded = self.load(plugin, None)?;
        let (kind, name, version) = (loaded.kind, loaded.name.to_string(), loaded.version);
        let info = match kind {
            PluginKind::Dataset => {
                DatasetPlugin::new(loaded, HostContext::default(), None)?.describe()?
            }
            PluginKind::Backend => {
                BackendPlugin::new(loaded, HostContext::default())?.describe()?
            }
        };
        Ok(PluginSummary {
            name,
            kind,
            api_version: version.to_owned(),
            info,
        })
    }

    /// Compiles (or fetches from the cache), checks the API version and kind, and pre-links.
    fn load(&self, plugin: &PluginRef, want: Option<PluginKind>) -> Result<Arc<Loaded>> {
        let name = plugin.display();
        let bytes = plugin.bytes()?;
        check_component_header(&bytes, &name)?;
        // Before compiling: refusing a 15 MB component for its imports takes no time.
        check_imports(&bytes, &name)?;
        let component = engine::compile(
            &self.engine,
            &bytes,
            self.cache_dir.as_deref(),
            &name,
            self.config.on_compile.as_ref(),
        )?;
        let (kind, version) = plugin_kind(&self.engine, &component, &name)?;
        if let Some(want) = want
            && want != kind
        {
            bail!("plugin '{name}' is a {kind} plugin, but a {want} plugin is needed here");
        }
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(wasm_error)
            .with_context(|| {
                format!("plugin '{name}' imports something the sandbox does not provide (only WASI and {PACKAGE}@{version} are available)")
            })?;
        let pre = match (kind, version) {
            (PluginKind::Dataset, bindings::v0_2_0::VERSION) => {
                bindings::v0_2_0::dataset::DatasetPluginPre::new(pre).map(TypedPre::DatasetV0_2_0)
            }
            (PluginKind::Backend, bindings::v0_2_0::VERSION) => {
                bindings::v0_2_0::backend::BackendPluginPre::new(pre).map(TypedPre::BackendV0_2_0)
            }
            (PluginKind::Dataset, bindings::v0_3_0::VERSION) => {
                bindings::v0_3_0::dataset::DatasetPluginPre::new(pre).map(TypedPre::DatasetV0_3_0)
            }
            (PluginKind::Backend, bindings::v0_3_0::VERSION) => {
                bindings::v0_3_0::backend::BackendPluginPre::new(pre).map(TypedPre::BackendV0_3_0)
            }
            (PluginKind::Dataset, bindings::v0_4_1::VERSION | bindings::v0_4_0::VERSION) => {
                bindings::v0_4_1::dataset::DatasetPluginPre::new(pre).map(TypedPre::DatasetV0_4_1)
            }
            (PluginKind::Backend, bindings::v0_4_1::VERSION | bindings::v0_4_0::VERSION) => {
                bindings::v0_4_1::backend::BackendPluginPre::new(pre).map(TypedPre::BackendV0_4_1)
            }
            (PluginKind::Dataset, bindings::v0_5_0::VERSION) => {
                bindings::v0_5_0::dataset::DatasetPluginPre::new(pre).map(TypedPre::DatasetV0_5_0)
            }
            (PluginKind::Backend, bindings::v0_5_0::VERSION) => {
                bindings::v0_5_0::backend::BackendPluginPre::new(pre).map(TypedPre::BackendV0_5_0)
            }
            (PluginKind::Dataset, bindings::v0_6_0::VERSION) => {
                bindings::v0_6_0::dataset::DatasetPluginPre::new(pre).map(TypedPre::DatasetV0_6_0)
            }
            (PluginKind::Backend, bindings::v0_6_0::VERSION) => {
                bindings::v0_6_0::backend::BackendPluginPre::new(pre).map(TypedPre::BackendV0_6_0)
            }
            (PluginKind::Dataset, _) => {
                bindings::current::dataset::DatasetPluginPre::new(pre).map(TypedPre::Dataset)
            }
            (PluginKind::Backend, _) => {
                bindings::current::backend::BackendPluginPre::new(pre).map(TypedPre::Backend)
            }
        }
        .map_err(wasm_error)
        .with_context(|| {
            format!("plugin '{name}' does not match the {kind} world of {PACKAGE}@{version}")
        })?;
        Ok(Arc::new(Loaded {
            name: name.into(),
            kind,
            version,
            pre,
            memory_limit: self.config.memory_limit,
            call_budget: self.config.call_budget,
            max_shards: self.config.max_shards.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
            }),
        }))
    }
}

/// A component starts with `\0asm` and layer 1; a core module (layer 0) is the usual
/// mistake (built for wasm32-wasip1 or wasm32-unknown-unknown).
fn check_component_header(bytes: &[u8], name: &str) -> Result<()> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        bail!("plugin '{name}' is not a WebAssembly file (no \\0asm header)");
    }
    // Bytes 4..8: version (u16 LE) and layer (u16 LE); components have layer 1.
    if bytes[6..8] == [0, 0] {
        bail!(
            "plugin '{name}' is a core WebAssembly module, not a component: build it with \
             `cargo build --target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
        );
    }
    Ok(())
}

/// The kind of plugin `component` is, from its `bench:plugin/...` exports, and the
/// contract version it was built for, after checking that every `bench:plugin` interface
/// it uses has one version this host supports.
fn plugin_kind(
    engine: &Engine,
    component: &Component,
    name: &str,
) -> Result<(PluginKind, &'static str)> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_owned()).collect();
    let mut version: Option<&'static str> = None;
    for item in exports.iter().chain(&imports) {
        let Some((_, used)) = bench_interface(item) else {
            continue;
        };
        let Some(supported) = SUPPORTED_VERSIONS.iter().copied().find(|v| *v == used) else {
            bail!(
                "plugin '{name}' was built for plugin API {PACKAGE}@{used}, but this bench \
                 supports {PACKAGE}@{}; rebuild the plugin against bench-sdk {API_VERSION} \
                 (or use a bench release that supports {used})",
                SUPPORTED_VERSIONS.join(" and @")
            );
        };
        match version {
            Some(v) if v != supported => bail!(
                "plugin '{name}' mixes plugin API versions {PACKAGE}@{v} and @{supported}; \
                 build it against one"
            ),
            _ => version = Some(supported),
        }
    }
    let exported: Vec<&str> = exports
        .iter()
        .filter_map(|e| bench_interface(e).map(|(i, _)| i))
        .collect();
    let version = version.unwrap_or(API_VERSION);
    match (exported.contains(&"dataset"), exported.contains(&"backend")) {
        (true, false) => Ok((PluginKind::Dataset, version)),
        (false, true) => Ok((PluginKind::Backend, version)),
        (true, true) => bail!(
            "plugin '{name}' exports both the dataset and the backend interface; a plugin must be one kind"
        ),
        (false, false) => bail!(
            "plugin '{name}' is not a bench plugin: it exports neither {PACKAGE}/dataset nor \
             {PACKAGE}/backend (its exports: {})",
            if exports.is_empty() {
                "none".to_owned()
            } else {
                exports.join(", ")
            }
        ),
    }
}

/// The WASI packages the sandbox links (wasmtime-wasi's, semver-compatible with any
/// `0.2.x`): what `runtime-imports` in `wit/current` names, and sockets, which language
/// runtimes (componentize-py's) import whether or not they are used; the sandbox refuses
/// every socket address and name lookup.
const GRANTED_WASI: &[&str] = &[
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// Refuses a component that imports something the sandbox does not provide, naming the
/// import and, where a component tool adds it by default, the flag that removes it. (The
/// linker's own error only says that "a matching implementation was not found".)
fn check_imports(bytes: &[u8], name: &str) -> Result<()> {
    // A component that cannot be read is left to the compiler, whose error says where.
    let Ok(imports) = component_imports(bytes) else {
        return Ok(());
    };
    for import in imports {
        if let Some(why) = unsupported_import(import) {
            bail!("plugin '{name}' imports `{import}`, which bench does not provide: {why}");
        }
    }
    Ok(())
}

/// The names a component imports from its host (its top level: the modules and components
/// nested inside it import from each other).
fn component_imports(bytes: &[u8]) -> Result<Vec<&str>> {
    use wasmparser::Payload;
    let mut imports = Vec::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    imports.push(import?.name.name);
                }
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => match depth.checked_sub(1) {
                Some(outer) => depth = outer,
                None => break,
            },
            _ => {}
        }
    }
    Ok(imports)
}

/// Why `import` cannot be linked, or `None` when the sandbox provides it.
fn unsupported_import(import: &str) -> Option<String> {
    if bench_interface(import).is_some() || GRANTED_WASI.iter().any(|p| import.starts_with(p)) {
        return None;
    }
    if import.starts_with("wasi:http/") {
        return Some(
            "plugins have no network (bench sends every request itself). componentize-js \
             and `jco componentize` add wasi:http by default: build with `--disable http \
             fetch-event` (`-d http fetch-event`); in Rust, drop the crate that uses it"
                .to_owned(),
        );
    }
    Some(format!(
        "a plugin may import the {PACKAGE} interfaces and the WASI interfaces the worlds in \
         wit/ name (`runtime-imports`: io, clocks, random, cli, read-only filesystem); build \
         it against `wit/` as published, and leave out the feature that imports this"
    ))
}

/// `("dataset", "0.2.0")` for `"bench:plugin/dataset@0.2.0"`; `None` for other packages.
fn bench_interface(item: &str) -> Option<(&str, &str)> {
    let rest = item.strip_prefix(PACKAGE)?.strip_prefix('/')?;
    Some(rest.split_once('@').unwrap_or((rest, "unversioned")))
}

/// A plugin store, with everything needed to run calls under the budget and to explain a
/// fault.
pub(crate) struct Sandbox {
    pub(crate) loaded: Arc<Loaded>,
    pub(crate) store: Store<StoreState>,
    /// Set after a fault: the store's instance is unusable, later calls repeat the cause.
    poisoned: Option<Fault>,
}

impl Sandbox {
    /// A fresh store for `loaded`; returns it with the guest path of `dataset`.
    pub(crate) fn new(
        loaded: Arc<Loaded>,
        host: HostContext,
        dataset: Option<&Path>,
    ) -> Result<(Sandbox, Option<String>)> {
        let (state, guest_path) =
            StoreState::new(loaded.name.clone(), host, loaded.memory_limit, dataset)
                .with_context(|| format!("plugin '{}': preparing the sandbox", loaded.name))?;
        let mut store = Store::new(loaded.pre.engine(), state);
        store.limiter(|state| &mut state.limiter);
        // What one call may move out of the guest (import arguments, export results) is
        // bounded by wasmtime's hostcall fuel, 128 MiB by default: less than a dataset's
        // batch of multimodal requests may hold, and a limit the user cannot see. Tie it
        // to the memory limit instead: a plugin makes the host copy at most as much as it
        // may hold itself, and an oversized argument reaches the import, whose own size
        // caps refuse it with an error the plugin can handle.
        store.set_hostcall_fuel(usize::try_from(loaded.memory_limit).unwrap_or(usize::MAX));
        // At each deadline, the plugin's own time decides (the host's work in imports is
        // not counted, see `host::CallClock`): past the budget the call is interrupted,
        // else the deadline moves to where the rest of the budget would end.
        let budget = loaded.call_budget;
        store.epoch_deadline_callback(move |store| {
            let used = store.data().clock.guest_time();
            Ok(match budget.checked_sub(used) {
                Some(left) if !left.is_zero() => {
                    wasmtime::UpdateDeadline::Continue(engine::budget_ticks(left))
                }
                _ => wasmtime::UpdateDeadline::Interrupt,
            })
        });
        Ok((
            Sandbox {
                loaded,
                store,
                poisoned: None,
            },
            guest_path,
        ))
    }

    /// Whether a call has faulted (trap, timeout, memory overrun): the instance is dead and
    /// every later call fails; only a fresh instance can go on.
    pub(crate) fn faulted(&self) -> bool {
        self.poisoned.is_some()
    }

    /// Runs one guest call under the time budget, turning traps into errors that name the
    /// plugin, the call and the cause, and plugin errors into errors that name the plugin.
    /// A plugin error of an older contract version comes up as the current one (`From`).
    pub(crate) fn call<T, E: Into<PluginError>>(
        &mut self,
        call: &str,
        f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<std::result::Result<T, E>>,
    ) -> std::result::Result<T, PluginCallError> {
        match self.call_infallible(call, f)? {
            Ok(value) => Ok(value),
            Err(e) => Err(self.error(call, CallFailure::Plugin(e.into()))),
        }
    }

    /// Like [`Sandbox::call`] for calls without a plugin error.
    pub(crate) fn call_infallible<T>(
        &mut self,
        call: &str,
        f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<T>,
    ) -> std::result::Result<T, PluginCallError> {
        if let Some(fault) = &self.poisoned {
            return Err(self.error(call, CallFailure::AfterFault(fault.clone())));
        }
        self.store.data_mut().clock.restart();
        self.store
            .set_epoch_deadline(engine::budget_ticks(self.loaded.call_budget));
        match f(&mut self.store) {
            Ok(value) => Ok(value),
            Err(e) => {
                tracing::debug!(plugin = %self.loaded.name, "call '{call}' faulted: {e:?}");
                let fault = self.describe_fault(&e);
                self.poisoned = Some(fault.clone());
                let output = self.store.data().output_report();
                Err(self.error(call, CallFailure::Fault { fault, output }))
            }
        }
    }

    pub(crate) fn error(&self, call: &str, failure: CallFailure) -> PluginCallError {
        PluginCallError {
            plugin: self.loaded.name.clone(),
            call: call.to_owned(),
            failure,
        }
    }

    fn describe_fault(&self, e: &wasmtime::Error) -> Fault {
        if let Some(trap) = e.downcast_ref::<wasmtime::Trap>()
            && *trap == wasmtime::Trap::Interrupt
        {
            return Fault::TimeBudget(self.loaded.call_budget);
        }
        let limiter = &self.store.data().limiter;
        if let Some(wanted) = limiter.refused {
            return Fault::Memory {
                limit_mib: limiter.limit() >> 20,
                wanted_mib: wanted >> 20,
            };
        }
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::UnreachableCodeReached) => Fault::Abort,
            Some(trap) => Fault::Trap(trap.to_string()),
            // A host import's error: the top of the chain is only the wasm backtrace.
            None => Fault::Host(e.root_cause().to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_refs_parse_paths_and_names() {
        assert_eq!(
            PluginRef::parse("x.wasm").unwrap(),
            PluginRef::File("x.wasm".into())
        );
        assert_eq!(
            PluginRef::parse("dir/x").unwrap(),
            PluginRef::File("dir/x".into())
        );
        let err = PluginRef::parse("no-such-plugin").unwrap_err().to_string();
        assert!(err.contains("unknown plugin 'no-such-plugin'"), "{err}");
        for builtin in builtin_plugins() {
            assert_eq!(
                PluginRef::parse(builtin.name).unwrap(),
                PluginRef::Builtin(builtin.name.to_owned())
            );
            assert!(err.contains(builtin.name), "{err}");
        }
    }

    #[test]
    fn headers_tell_modules_from_components() {
        let err = check_component_header(b"\0asm\x01\0\0\0", "m.wasm")
            .unwrap_err()
            .to_string();
        assert!(err.contains("core WebAssembly module"), "{err}");
        let err = check_component_header(b"hello world", "t.wasm")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a WebAssembly file"), "{err}");
        check_component_header(b"\0asm\x0d\0\x01\0", "c.wasm").unwrap();
    }

    #[test]
    fn bench_interfaces_are_recognised_with_their_version() {
        assert_eq!(
            bench_interface("bench:plugin/dataset@0.2.0"),
            Some(("dataset", "0.2.0"))
        );
        assert_eq!(
            bench_interface("bench:plugin/backend@9.0.0"),
            Some(("backend", "9.0.0"))
        );
        assert_eq!(bench_interface("wasi:cli/stdout@0.2.0"), None);
        assert_eq!(bench_interface("bench:plugins/x@1.0.0"), None);
    }

    /// A plugin kept in `tests/fixtures/api-<version>/`, built for that contract version.
    fn fixture(version: &str, name: &str) -> PluginRef {
        PluginRef::File(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../../tests/fixtures/api-{version}/{name}.wasm")),
        )
    }

    /// Every older version's plugins link, match their adapter's worlds and describe
    /// themselves through it (`tests/e2e/contract_versions.rs` runs them).
    #[test]
    fn plugins_of_every_older_version_load_through_their_adapter() {
        let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
        for version in ["0.2.0", "0.3.0", "0.4.0", "0.4.1", "0.5.0", "0.6.0"] {
            for (name, kind) in [
                ("random", PluginKind::Dataset),
                ("openai-chat", PluginKind::Backend),
            ] {
                let summary = runtime.inspect(&fixture(version, name)).unwrap();
                assert_eq!(
                    (summary.kind, summary.api_version.as_str()),
                    (kind, version)
                );
                assert_eq!(summary.info.name, name);
            }
        }
    }

    /// A dataset built before 0.7.0 has no `grade`: it attaches no references, so the host
    /// never asks, and asking anyway is a contract error naming its version, not a trap.
    #[test]
    fn a_dataset_built_for_0_6_0_is_never_a_grader() {
        let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
        let mut dataset = runtime
            .load_dataset(&fixture("0.6.0", "random"), HostContext::default(), None)
            .unwrap();
        let err = dataset.grade("18", "#### 18").unwrap_err().to_string();
        assert!(
            err.contains("bench:plugin@0.6.0 cannot grade answers"),
            "{err}"
        );
    }

    /// A backend built before 0.6.0 cannot send an output constraint: such a request is
    /// refused with a plugin error naming the backend's version and the one it needs, never
    /// sent without its constraint, and the instance goes on.
    #[test]
    fn a_backend_built_for_0_5_0_refuses_a_request_with_an_output_constraint() {
        let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
        let mut backend = runtime
            .load_backend(&fixture("0.5.0", "openai-chat"), HostContext::default())
            .unwrap();
        backend
            .open(ClientConfig {
                model: "m".into(),
                ignore_eos: false,
                stream: true,
                extra_body: None,
                options: Vec::new(),
            })
            .unwrap();
        let free = RequestSpec {
            prompt: Prompt::Text("hello".into()),
            prompt_len: 1,
            expected_output_len: 4,
            multimodal: Vec::new(),
            request_id: None,
            lora_name: None,
            extra_body: None,
            send_at: None,
            session: None,
            output_constraint: None,
        };
        let request = backend.build_request(&free).unwrap();
        assert!(String::from_utf8_lossy(&request.body).contains("hello"));
        let constrained = RequestSpec {
            output_constraint: Some(OutputConstraint::JsonSchema(r#"{"type":"object"}"#.into())),
            ..free.clone()
        };
        let err = backend.build_request(&constrained).unwrap_err();
        let CallFailure::Plugin(PluginError::Unsupported(why)) = &err.failure else {
            panic!("{err}");
        };
        assert!(
            why.contains("(json-schema)") && why.contains("bench:plugin@0.5.0"),
            "{why}"
        );
        assert!(!backend.faulted());
        backend.build_request(&free).unwrap();
    }

    #[test]
    fn a_components_own_imports_are_read_without_compiling_it() {
        let wasm = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/api-0.4.0/random.wasm"),
        )
        .unwrap();
        let imports = component_imports(&wasm).unwrap();
        assert!(
            imports.contains(&"bench:plugin/tokenizer@0.4.0"),
            "{imports:?}"
        );
        assert!(
            imports.iter().any(|i| i.starts_with("wasi:cli/")),
            "{imports:?}"
        );
        // Only the top level: the nested core modules' imports (`env`, the adapter's
        // `wasi_snapshot_preview1`) are the component's own business.
        assert!(imports.iter().all(|i| i.contains(':')), "{imports:?}");
        assert!(
            imports.iter().all(|i| unsupported_import(i).is_none()),
            "{imports:?}"
        );
        assert!(component_imports(b"\0asm\x0d\0\x01\0garbage").is_err());
    }

    #[test]
    fn an_unsupported_import_is_named_with_the_flag_that_removes_it() {
        for granted in [
            "bench:plugin/tokenizer@0.4.1",
            "wasi:filesystem/preopens@0.2.12",
            "wasi:cli/stderr@0.2.9",
            "wasi:sockets/tcp@0.2.10",
        ] {
            assert_eq!(unsupported_import(granted), None, "{granted}");
        }
        let http = unsupported_import("wasi:http/outgoing-handler@0.2.10").unwrap();
        assert!(http.contains("-d http fetch-event"), "{http}");
        let other = unsupported_import("acme:gpu/compute@1.0.0").unwrap();
        assert!(other.contains("runtime-imports"), "{other}");
    }
}
