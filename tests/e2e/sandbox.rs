//! The plugin sandbox against plugins that misbehave on purpose
//! (`tests/fixtures/plugins`, built here for wasm32-wasip2): each fault must end in a clear
//! error that names the plugin, the call and the cause, within the time budget, and a
//! plugin must see nothing of the machine but its dataset path: no other file by any path
//! trick, no environment, no network, no host import that takes unbounded input. A
//! backend decoder that traps fails only the response it was decoding, and a run whose
//! decoder keeps trapping stops early with the results it has.
//!
//! Most checks go through the library API (`Runtime`), the rest through the real binary
//! (against the mock server, for the runs).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bench::runtime::{
    ClientConfig, EventKind, Framing, HostContext, PluginKind, PluginRef, Prompt, RequestSpec,
    ResponseHead, Runtime, RuntimeConfig, derive_seed,
};
use bench::tokenizer::Tokenizer;

use crate::common::fixtures::{fixture, repo};
use crate::common::plugins::{chat_frame, hostile_decoder, path_of};
use crate::common::{Bench, Run, gate, mock, result_json, within_bounds};

/// A runtime with a private compile cache and the given limits.
fn runtime(cache: &Path, budget: Duration, memory_mib: u64) -> Runtime {
    // Compiling components keeps the cores busy.
    gate::enter();
    Runtime::new(RuntimeConfig {
        memory_limit: memory_mib << 20,
        call_budget: budget,
        cache_dir: Some(cache.to_path_buf()),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn default_runtime(cache: &Path) -> Runtime {
    runtime(cache, Duration::from_secs(10), 256)
}

fn gpt2() -> Arc<Tokenizer> {
    static TOKENIZER: OnceLock<Arc<Tokenizer>> = OnceLock::new();
    TOKENIZER
        .get_or_init(|| {
            Arc::new(
                Tokenizer::load(repo().join("tests/data/tokenizers/gpt2").to_str().unwrap())
                    .unwrap(),
            )
        })
        .clone()
}

fn sample_error(runtime: &Runtime, plugin: &PluginRef) -> String {
    let mut dataset = runtime
        .load_dataset(plugin, HostContext::default(), None)
        .unwrap();
    format!("{:#}", dataset.sample(10, Vec::new()).unwrap_err())
}

#[test]
fn a_panic_is_reported_with_plugin_call_and_message() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let plugin = fixture("hostile-trap");
    let mut dataset = runtime
        .load_dataset(&plugin, HostContext::default(), None)
        .unwrap();
    // describe works: the plugin only breaks in next-batch.
    assert_eq!(dataset.describe().unwrap().name, "hostile-trap");
    let err = format!("{:#}", dataset.sample(10, Vec::new()).unwrap_err());
    assert!(
        err.contains(&format!("plugin '{}'", plugin.display())),
        "{err}"
    );
    assert!(err.contains("call 'next-batch' trapped"), "{err}");
    assert!(err.contains("panicked"), "{err}");
    // The panic message comes from the captured stderr.
    assert!(err.contains("fixture panic: record 10 is corrupt"), "{err}");

    // The store is dead after a trap; later calls say why instead of misbehaving.
    let again = format!("{:#}", dataset.describe().unwrap_err());
    assert!(again.contains("after an earlier fault"), "{again}");
}

#[test]
fn an_endless_loop_is_stopped_by_the_time_budget() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime(cache.path(), Duration::from_millis(300), 256);
    let plugin = fixture("hostile-spin");
    within_bounds("a plugin call stopped by its time budget", || {
        // Loading compiles the component (into the cache, the first time); only the call
        // is timed.
        let mut dataset = runtime
            .load_dataset(&plugin, HostContext::default(), None)
            .unwrap();
        let start = Instant::now();
        let err = format!("{:#}", dataset.sample(10, Vec::new()).unwrap_err());
        let elapsed = start.elapsed();
        assert!(
            err.contains(&format!(
                "plugin '{}': call 'next-batch' exceeded its 300ms time budget",
                plugin.display()
            )),
            "{err}"
        );
        assert!(
            elapsed >= Duration::from_millis(300),
            "stopped too early: {elapsed:?}"
        );
        // An unstopped loop would run forever.
        if elapsed >= Duration::from_secs(5) {
            return Err(format!("stopped too late: {elapsed:?}"));
        }
        Ok(())
    });
}

/// However long a prompt takes to make, sampling never runs into the per-call budget: the
/// host sizes its `next-batch` calls from the time the previous ones took. With a 1 s budget
/// and 8,192-token `random` prompts (several milliseconds each), a fixed batch of 256
/// requests overruns it.
#[test]
fn long_prompts_never_run_into_the_call_budget() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime(cache.path(), Duration::from_secs(1), 256);
    let host = HostContext {
        tokenizer: Some(gpt2()),
        seed: 0,
    };
    // Calls are sized to a quarter of that budget from the calls before them; a machine
    // that slows down fourfold between two calls breaks it all the same.
    within_bounds("sampling long prompts within the call budget", || {
        let mut dataset = runtime
            .load_dataset(&PluginRef::parse("random").unwrap(), host.clone(), None)
            .unwrap();
        let options = vec![("input-len".to_owned(), "8192".to_owned())];
        let requests = match dataset.sample(400, options) {
            Ok(requests) => requests,
            Err(e) if format!("{e:#}").contains("exceeded its 1s time budget") => {
                return Err(format!("{e:#}"));
            }
            Err(e) => panic!("{e:#}"),
        };
        assert_eq!(requests.len(), 400);
        assert!(requests.iter().all(|r| r.request.prompt_len == 8192));
        Ok(())
    });
}

/// The budget stops a plugin that runs away, not the host's work for it: a dataset that
/// must make its whole request set in one call (vLLM's `prefix_repetition` shuffles the
/// finished list) spends that call in the host's tokenizer, and may take far longer than
/// the budget without ever being stopped. (`an_endless_loop_is_stopped_by_the_time_budget`
/// shows that the plugin's own time is still bounded.)
#[test]
fn the_hosts_tokenizer_work_does_not_count_against_the_budget() {
    let cache = tempfile::tempdir().unwrap();
    let budget = Duration::from_millis(500);
    let runtime = runtime(cache.path(), budget, 512);
    let host = HostContext {
        tokenizer: Some(gpt2()),
        seed: 0,
    };
    let plugin = PluginRef::parse("prefix_repetition").unwrap();
    // Enough prompts that the one call that makes them outlasts the budget several times
    // over on this machine (doubled until it does).
    let mut prompts = 2000;
    loop {
        let mut dataset = runtime.load_dataset(&plugin, host.clone(), None).unwrap();
        let start = Instant::now();
        let requests = dataset
            .sample(prompts, Vec::new())
            .unwrap_or_else(|e| panic!("{prompts} prompts: {e:#}"));
        let elapsed = start.elapsed();
        assert_eq!(requests.len(), prompts as usize);
        if elapsed > budget * 3 {
            break;
        }
        assert!(prompts < 64_000, "{prompts} prompts took only {elapsed:?}");
        prompts *= 2;
    }
}

#[test]
fn unbounded_allocation_hits_the_memory_cap() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime(cache.path(), Duration::from_secs(10), 64);
    let plugin = fixture("hostile-hog");
    let err = sample_error(&runtime, &plugin);
    assert!(
        err.contains(&format!(
            "plugin '{}': call 'next-batch' exceeded its memory limit of 64 MiB",
            plugin.display()
        )),
        "{err}"
    );
}

#[test]
fn a_plugin_for_another_api_version_is_refused_at_load() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let plugin = fixture("future-api");
    let err = format!(
        "{:#}",
        runtime
            .load_dataset(&plugin, HostContext::default(), None)
            .err()
            .unwrap()
    );
    assert!(
        err.contains(&format!("plugin '{}'", plugin.display())),
        "{err}"
    );
    assert!(err.contains("bench:plugin@9.0.0"), "{err}");
    // Every version this host loads is named.
    for version in bench::runtime::SUPPORTED_VERSIONS {
        assert!(err.contains(&format!("@{version}")), "{err}");
    }
}

#[test]
fn files_that_are_not_components_are_refused() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let dir = tempfile::tempdir().unwrap();

    // The smallest valid core module: what a wasm32-wasip1 build looks like to the loader.
    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let err = format!(
        "{:#}",
        runtime
            .load_dataset(
                &PluginRef::File(module.clone()),
                HostContext::default(),
                None
            )
            .err()
            .unwrap()
    );
    assert!(
        err.contains(&format!("plugin '{}'", module.display())),
        "{err}"
    );
    assert!(
        err.contains("core WebAssembly module, not a component"),
        "{err}"
    );
    assert!(err.contains("wasm32-wasip2"), "{err}");

    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "just text").unwrap();
    let err = format!(
        "{:#}",
        runtime
            .load_dataset(&PluginRef::File(text), HostContext::default(), None)
            .err()
            .unwrap()
    );
    assert!(err.contains("not a WebAssembly file"), "{err}");

    // A component header with garbage after it fails in compilation, still naming the plugin.
    let broken = dir.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm\x0d\0\x01\0\xff\xff\xff").unwrap();
    let err = format!(
        "{:#}",
        runtime
            .load_dataset(
                &PluginRef::File(broken.clone()),
                HostContext::default(),
                None
            )
            .err()
            .unwrap()
    );
    assert!(
        err.contains(&format!("plugin '{}': compiling", broken.display())),
        "{err}"
    );

    let missing = dir.path().join("missing.wasm");
    let err = format!(
        "{:#}",
        runtime
            .load_dataset(&PluginRef::File(missing), HostContext::default(), None)
            .err()
            .unwrap()
    );
    assert!(err.contains("reading plugin"), "{err}");
}

/// The probe's observations as `key -> value`.
fn probe(
    runtime: &Runtime,
    host: HostContext,
    path: Option<&Path>,
    options: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let mut dataset = runtime
        .load_dataset(&fixture("sandbox-probe"), host, path)
        .unwrap();
    let samples = dataset.sample(100, options).unwrap();
    samples
        .into_iter()
        .map(|s| match s.request.prompt {
            Prompt::Text(line) => {
                let (k, v) = line.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            }
            other => panic!("unexpected prompt {other:?}"),
        })
        .collect()
}

fn observation<'a>(report: &'a [(String, String)], key: &str) -> &'a str {
    report
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key} in {report:?}"))
}

#[test]
fn a_plugin_sees_its_dataset_read_only_and_the_host_imports() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let root = tempfile::tempdir().unwrap();
    let granted = root.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    let data = granted.join("data.txt");
    std::fs::write(&data, "first line\nsecond line\n").unwrap();
    std::fs::write(root.path().join("secret.txt"), "secret").unwrap();

    let host = HostContext {
        tokenizer: Some(gpt2()),
        seed: 7,
    };
    let report = probe(&runtime, host, Some(&data), Vec::new());
    // The file is visible under its own (canonical) path, and readable.
    assert_eq!(
        observation(&report, "path"),
        data.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(observation(&report, "dataset"), "first line");
    // ... but not writable.
    assert!(denied(&report, "write"), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(&data).unwrap(),
        "first line\nsecond line\n"
    );
    // Nothing outside the granted directory is reachable (every way of trying is in
    // `no_path_trick_reaches_outside_the_granted_directory`; environment and network in
    // `no_environment_and_no_network_of_any_kind`).
    assert!(denied(&report, "outside"), "{report:?}");
    assert!(denied(&report, "passwd"), "{report:?}");
    // Host imports: the run's tokenizer and seeds.
    let ids = gpt2().encode("Hello world", false).unwrap();
    assert_eq!(observation(&report, "tokens"), format!("{ids:?}"));
    assert_eq!(
        observation(&report, "seed"),
        format!("7/{}", derive_seed(7, "probe"))
    );
}

/// Whether an observation is a refusal (the plugin reports the error it got).
fn denied(report: &[(String, String)], key: &str) -> bool {
    observation(report, key).starts_with("denied")
}

#[cfg(unix)]
#[test]
fn no_path_trick_reaches_outside_the_granted_directory() {
    use std::os::unix::fs::symlink;

    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let granted = root_path.join("granted");
    std::fs::create_dir_all(granted.join("sub")).unwrap();
    let data = granted.join("data.txt");
    std::fs::write(&data, "first line\n").unwrap();
    std::fs::write(granted.join("inside.txt"), "inside\n").unwrap();
    let secret = root_path.join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    // Planted in the granted directory: links that stay inside it, and links out of it
    // by absolute and by relative target, to a file and to a directory.
    symlink("inside.txt", granted.join("link-inside")).unwrap();
    symlink("../inside.txt", granted.join("sub/link-up-inside")).unwrap();
    symlink(&secret, granted.join("link-abs")).unwrap();
    symlink("../secret.txt", granted.join("link-rel")).unwrap();
    symlink(&root_path, granted.join("link-dir")).unwrap();
    symlink("/etc/passwd", granted.join("link-passwd")).unwrap();

    let reads = [
        "link-inside",
        "sub/link-up-inside",
        "sub/../inside.txt",
        "link-abs",
        "link-rel",
        "link-dir/secret.txt",
        "link-passwd",
        "sub/../../secret.txt",
        "../secret.txt",
        secret.to_str().unwrap(),
        "/proc/self/environ",
    ]
    .join(",");
    let report = probe(
        &runtime,
        HostContext::default(),
        Some(&data),
        vec![("read".into(), reads)],
    );
    // The plugin does follow links and `..` that stay inside: the refusals below are the
    // sandbox's, not a plugin that cannot read links at all.
    for inside in ["link-inside", "sub/link-up-inside", "sub/../inside.txt"] {
        assert_eq!(observation(&report, &format!("read:{inside}")), "inside");
    }
    let outside = [
        "link-abs",
        "link-rel",
        "link-dir/secret.txt",
        "link-passwd",
        "sub/../../secret.txt",
        "../secret.txt",
        secret.to_str().unwrap(),
        "/proc/self/environ",
    ];
    for target in outside {
        let key = format!("read:{target}");
        assert!(denied(&report, &key), "{key}: {report:?}");
    }
    assert!(denied(&report, "outside"), "{report:?}");
    assert!(denied(&report, "passwd"), "{report:?}");
    assert!(denied(&report, "listing"), "{report:?}");
    // The granted file is still there, unchanged, and readable.
    assert_eq!(observation(&report, "dataset"), "first line");
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "first line\n");
}

#[test]
fn no_environment_and_no_network_of_any_kind() {
    use std::net::{TcpListener, UdpSocket};

    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    // Real listeners on loopback: if the sandbox let anything out, they would see it.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let report = probe(
        &runtime,
        HostContext::default(),
        None,
        vec![
            (
                "tcp-port".into(),
                tcp.local_addr().unwrap().port().to_string(),
            ),
            (
                "udp-port".into(),
                udp.local_addr().unwrap().port().to_string(),
            ),
        ],
    );
    assert!(std::env::var_os("PATH").is_some());
    assert_eq!(observation(&report, "env"), "0");
    assert_eq!(observation(&report, "home"), "false");
    assert_eq!(observation(&report, "path-var"), "false");
    assert_eq!(observation(&report, "args"), "0");
    for key in ["tcp", "tcp-listen", "udp", "dns"] {
        assert!(denied(&report, key), "{key}: {report:?}");
    }
    assert_eq!(
        tcp.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a TCP connection got through"
    );
    let mut buf = [0u8; 64];
    assert_eq!(
        udp.recv_from(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a datagram got through"
    );
}

#[test]
fn a_gigabyte_text_for_the_tokenizer_is_refused_and_the_host_stays_healthy() {
    let cache = tempfile::tempdir().unwrap();
    // Room for the plugin to build a 1 GiB string: the host's own size cap must refuse
    // it, not the memory limit.
    let runtime = runtime(cache.path(), Duration::from_secs(30), 1536);
    let host = HostContext {
        tokenizer: Some(gpt2()),
        seed: 0,
    };
    let report = probe(
        &runtime,
        host.clone(),
        None,
        vec![("huge-text-mib".into(), "1024".into())],
    );
    let huge = observation(&report, "huge");
    assert!(
        huge.starts_with("error")
            && huge.contains("text is too large (1073741824 > 16777216 bytes)"),
        "{huge}"
    );
    // That message comes from the host's size check, which runs before any tokenizing; a
    // wall-clock bound here would only make the test depend on the machine's load.
    // The same instance's next host call works...
    let ids = gpt2().encode("Hello world", false).unwrap();
    assert_eq!(observation(&report, "tokens"), format!("{ids:?}"));
    // ... and so do other plugins in this process.
    let again = probe(&runtime, host, None, Vec::new());
    assert_eq!(observation(&again, "tokens"), format!("{ids:?}"));
    let mut backend = runtime
        .load_backend(&fixture("echo-backend"), HostContext::default())
        .unwrap();
    backend.open(echo_config(Vec::new())).unwrap();
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let decoded = backend.decode(&head, b"abc", &[3]).unwrap();
    assert_eq!((decoded.chunks.frames.len(), decoded.events.len()), (1, 1));
}

#[test]
fn without_a_dataset_path_no_file_is_visible() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let report = probe(&runtime, HostContext::default(), None, Vec::new());
    assert_eq!(observation(&report, "path"), "");
    assert!(
        observation(&report, "dataset").starts_with("denied"),
        "{report:?}"
    );
    assert!(
        observation(&report, "passwd").starts_with("denied"),
        "{report:?}"
    );
    // Tokenizer calls with a result type get an error they can report...
    let tokens = observation(&report, "tokens");
    assert!(
        tokens.starts_with("error") && tokens.contains("--tokenizer"),
        "{tokens}"
    );
}

#[test]
fn tokenizer_calls_without_an_error_channel_trap_with_a_clear_message() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let plugin = fixture("sandbox-probe");
    let mut dataset = runtime
        .load_dataset(&plugin, HostContext::default(), None)
        .unwrap();
    let err = format!(
        "{:#}",
        dataset
            .sample(5, vec![("vocab".into(), "true".into())])
            .unwrap_err()
    );
    assert!(
        err.contains(&format!("plugin '{}': call 'open'", plugin.display())),
        "{err}"
    );
    assert!(err.contains("needs a tokenizer"), "{err}");
    assert!(err.contains("--tokenizer"), "{err}");

    // With a tokenizer the same call answers gpt2's vocabulary size.
    let host = HostContext {
        tokenizer: Some(gpt2()),
        seed: 0,
    };
    let report = probe(&runtime, host, None, vec![("vocab".into(), "true".into())]);
    assert_eq!(observation(&report, "vocab"), "50257");
}

#[test]
fn plugin_errors_name_the_plugin_and_the_call() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let plugin = fixture("sandbox-probe");
    let mut dataset = runtime
        .load_dataset(&plugin, HostContext::default(), None)
        .unwrap();
    let err = format!(
        "{:#}",
        dataset
            .sample(5, vec![("colour".into(), "blue".into())])
            .unwrap_err()
    );
    assert!(
        err.contains(&format!(
            "plugin '{}': open: invalid configuration:",
            plugin.display()
        )),
        "{err}"
    );
    assert!(err.contains("unknown option \"colour\""), "{err}");
    // A plugin error is not a fault: the instance stays usable.
    assert_eq!(dataset.sample(3, Vec::new()).unwrap().len(), 3);
}

#[test]
fn plugins_of_the_wrong_kind_are_refused() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let err = format!(
        "{:#}",
        runtime
            .load_backend(&fixture("sandbox-probe"), HostContext::default())
            .err()
            .unwrap()
    );
    assert!(
        err.contains("is a dataset plugin, but a backend plugin is needed"),
        "{err}"
    );
    let err = format!(
        "{:#}",
        runtime
            .load_dataset(&fixture("echo-backend"), HostContext::default(), None)
            .err()
            .unwrap()
    );
    assert!(
        err.contains("is a backend plugin, but a dataset plugin is needed"),
        "{err}"
    );
    assert_eq!(
        runtime.inspect(&fixture("echo-backend")).unwrap().kind,
        PluginKind::Backend
    );
}

fn echo_config(options: Vec<(String, String)>) -> ClientConfig {
    ClientConfig {
        model: "m1".into(),
        ignore_eos: false,
        stream: true,
        extra_body: None,
        options,
    }
}

#[test]
fn backend_builds_requests_and_decodes_on_another_thread() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let mut backend = runtime
        .load_backend(&fixture("echo-backend"), HostContext::default())
        .unwrap();
    assert!(
        backend
            .framing()
            .unwrap_err()
            .to_string()
            .contains("before its resource was opened")
    );
    backend.open(echo_config(Vec::new())).unwrap();
    assert_eq!(backend.framing().unwrap(), Framing::Ndjson);
    assert_eq!(backend.default_path().unwrap(), "/echo");
    let request = backend
        .build_request(&RequestSpec {
            prompt: Prompt::Text("hi there".into()),
            prompt_len: 2,
            expected_output_len: 3,
            multimodal: Vec::new(),
            request_id: None,
            lora_name: None,
            extra_body: None,
            send_at: None,
            session: None,
            output_constraint: None,
        })
        .unwrap();
    assert_eq!(request.method, "POST");
    assert_eq!(request.body, b"hi there");
    assert_eq!(
        request.headers,
        vec![("x-model".to_owned(), "m1".to_owned())]
    );

    // A fork is opened with the same configuration and can live on another thread.
    let mut fork = backend.fork().unwrap();
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let decoded = std::thread::spawn(move || fork.decode(&head, b"abcdefgh", &[3, 8]).unwrap())
        .join()
        .unwrap();
    assert_eq!(decoded.chunks.frames, [0, 1]);
    assert_eq!(decoded.chunks.spans, [0, 3, 0, 0, 3, 5, 0, 0]);
    assert_eq!(decoded.chunks.escaped, [0, 0]);
    assert_eq!(decoded.events.len(), 1);
    assert!(
        matches!(&decoded.events[0].kind, EventKind::Usage(u) if u.completion_tokens == Some(2))
    );

    // Decoders are per response: a second decode starts from zero again.
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let decoded = backend.decode(&head, b"xy", &[2]).unwrap();
    assert!(
        matches!(&decoded.events[0].kind, EventKind::Usage(u) if u.completion_tokens == Some(1))
    );

    // A plugin error from the decoder names the call.
    let bad = ResponseHead {
        status: 500,
        headers: Vec::new(),
    };
    let err = format!("{:#}", backend.decode(&bad, b"", &[]).unwrap_err());
    assert!(
        err.contains("decode: invalid input: HTTP status 500"),
        "{err}"
    );
}

#[test]
fn spans_outside_the_buffer_are_refused() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let mut backend = runtime
        .load_backend(&fixture("echo-backend"), HostContext::default())
        .unwrap();
    backend
        .open(echo_config(vec![("bad-span".into(), "true".into())]))
        .unwrap();
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let err = format!("{:#}", backend.decode(&head, b"abc", &[3]).unwrap_err());
    assert!(err.contains("text span outside the 3-byte buffer"), "{err}");
}

#[test]
fn a_decoder_trap_kills_only_its_instance_and_a_fork_goes_on() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = default_runtime(cache.path());
    let plugin = fixture("hostile-decoder");
    let mut backend = hostile_decoder(&runtime, "trap-marker", "BOOM");
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let good = chat_frame(" fine");
    let bad = chat_frame(" BOOM");
    let decode_ok = |backend: &mut bench::runtime::BackendPlugin| {
        let decoded = backend.decode(&head, &good, &[good.len() as u32]).unwrap();
        let spans = &decoded.chunks.spans;
        assert_eq!(spans.len(), 4, "{decoded:?}");
        assert_eq!(&good[spans[0] as usize..][..spans[1] as usize], b" fine");
    };
    decode_ok(&mut backend);
    assert!(!backend.faulted());

    let typed = backend
        .decode(&head, &bad, &[bad.len() as u32])
        .unwrap_err();
    // Typed: the plugin, the call and a fault that callers can tell from a plugin error.
    assert_eq!(typed.call, "decode");
    assert!(typed.is_fault());
    assert!(
        matches!(
            typed.failure,
            bench::runtime::CallFailure::Fault {
                fault: bench::runtime::Fault::Abort,
                ..
            }
        ),
        "{typed:?}"
    );
    let err = format!("{typed:#}");
    assert!(
        err.contains(&format!(
            "plugin '{}': call 'decode' trapped",
            plugin.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("trapping on a response containing \"BOOM\""),
        "{err}"
    );
    assert!(backend.faulted());
    // The dead instance refuses even a good response...
    let again = format!(
        "{:#}",
        backend
            .decode(&head, &good, &[good.len() as u32])
            .unwrap_err()
    );
    assert!(again.contains("after an earlier fault"), "{again}");

    // ... but a fork is a fresh instance with the same configuration (the marker too).
    let mut fresh = backend.fork().unwrap();
    assert!(!fresh.faulted());
    decode_ok(&mut fresh);
    assert!(fresh.decode(&head, &bad, &[bad.len() as u32]).is_err());
    assert!(fresh.faulted());
}

/// `bench serve` against the mock with the `hostile-decoder` fixture as the backend.
fn serve_hostile(url: &str, trap_every: u32, num_prompts: u64) -> Run {
    Bench::against(url)
        .arg("--backend")
        .arg(path_of(&fixture("hostile-decoder")))
        .arg("--backend-option")
        .arg(format!("trap-every={trap_every}"))
        .args(["--random-input-len", "8", "--random-output-len", "4"])
        .prompts(num_prompts)
        // Slow enough that a stop raised after a few dozen responses is early.
        .args(["--request-rate", "25"])
        .save_detailed()
        .run()
}

/// The non-empty per-request errors of a detailed result file.
fn errors_of(result: &serde_json::Value) -> Vec<String> {
    result["errors"]
        .as_array()
        .expect("a detailed result has errors")
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .filter(|e| !e.is_empty())
        .collect()
}

#[test]
fn cli_a_decoder_trap_fails_that_request_only_and_the_run_goes_on() {
    let mock = mock(Default::default());
    // The sixth response traps; the replacement instance counts from zero and decodes the
    // remaining four without trapping.
    let out = serve_hostile(&mock.url, 6, 10).assert_success();
    let log = out.to_string();
    let result = out.json();
    assert_eq!(result["completed"], 9, "{log}");
    assert_eq!(result["failed"], 1, "{log}");
    assert_eq!(result["total_output_tokens"], 9 * 4, "{log}");
    let errors = errors_of(&result);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let plugin = path_of(&fixture("hostile-decoder"));
    assert!(
        errors[0].starts_with(&format!("decode: plugin '{plugin}': call 'decode' trapped")),
        "{errors:?}"
    );
    assert!(
        errors[0].contains("trapping on response 6 of this instance"),
        "{errors:?}"
    );
}

#[test]
fn cli_a_decoder_that_keeps_trapping_stops_the_run_and_keeps_its_results() {
    let plugin = path_of(&fixture("hostile-decoder"));
    let mock = mock(Default::default());

    // Every response traps: the fifth fault in a row stops the run.
    let out = serve_hostile(&mock.url, 1, 100).assert_failure();
    let log = out.to_string();
    assert!(
        out.stderr.contains(&format!(
            "backend plugin '{plugin}' faulted on 5 responses in a row (last: call 'decode' trapped"
        )),
        "{log}"
    );

    // Every other response traps: never five in a row, but the eleventh fault stops the
    // run; the responses decoded before it are kept in the result file.
    let out = serve_hostile(&mock.url, 2, 100).assert_failure();
    let log = out.to_string();
    assert!(
        out.stderr.contains(&format!(
            "backend plugin '{plugin}' faulted on 11 responses in this run (more than 10)"
        )),
        "{log}"
    );
    let result = result_json(out.result_dir());
    // Decoded: ok, trap, ok, trap, ... until the eleventh trap.
    assert_eq!(result["completed"], 11, "{log}");
    assert_eq!(result["total_output_tokens"], 11 * 4, "{log}");
    let failed = result["failed"].as_u64().unwrap();
    assert!(failed >= 11, "{log}");
    // Stopped early: at 25 requests/s the whole workload would take four seconds.
    assert!(11 + failed < 100, "{log}");
    let errors = errors_of(&result);
    let traps = errors
        .iter()
        .filter(|e| e.starts_with(&format!("decode: plugin '{plugin}': call 'decode' trapped")))
        .count();
    assert_eq!(traps, 11, "{errors:?}");
}

#[test]
fn compiled_components_are_cached_and_a_bad_cache_entry_is_only_a_warning() {
    let cache = tempfile::tempdir().unwrap();
    let plugin = fixture("sandbox-probe");
    let entries = || -> Vec<PathBuf> {
        std::fs::read_dir(cache.path().join("components"))
            .map(|dir| dir.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default()
    };
    assert!(entries().is_empty());
    let first = default_runtime(cache.path()).inspect(&plugin).unwrap();
    let cached = entries();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(cached[0].extension().is_some_and(|e| e == "cwasm"));

    // A second runtime loads the cached code (the entry is not rewritten).
    let written = std::fs::metadata(&cached[0]).unwrap().modified().unwrap();
    let second = default_runtime(cache.path()).inspect(&plugin).unwrap();
    assert_eq!(first.info.name, second.info.name);
    assert_eq!(
        std::fs::metadata(&cached[0]).unwrap().modified().unwrap(),
        written
    );

    // A corrupt entry is ignored and replaced.
    std::fs::write(&cached[0], b"garbage").unwrap();
    let third = default_runtime(cache.path()).inspect(&plugin).unwrap();
    assert_eq!(third.info.name, "sandbox-probe");
    assert!(std::fs::metadata(&cached[0]).unwrap().len() > 1000);
}

/// Runs the real binary with a private compiled-plugin cache.
fn bench(args: &[&str]) -> Run {
    Bench::new().private_cache().args(args).run()
}

#[test]
fn cli_inspect_describes_a_plugin_file() {
    let plugin = path_of(&fixture("sandbox-probe"));
    let out = bench(&["plugin", "inspect", &plugin]).assert_success();
    assert!(
        out.stdout.starts_with(&format!(
            "sandbox-probe 0.1.0 (dataset plugin, API bench:plugin@{})",
            bench::runtime::API_VERSION
        )),
        "{out}"
    );
    assert!(out.stdout.contains("  vocab [default: false]"), "{out}");
}

#[test]
fn cli_refuses_bad_plugin_files_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let future = path_of(&fixture("future-api"));
    for (plugin, cause) in [
        (future.as_str(), "bench:plugin@9.0.0"),
        (module.to_str().unwrap(), "not a component"),
    ] {
        let out = bench(&["plugin", "inspect", plugin]);
        assert!(!out.success(), "{plugin} was accepted:\n{out}");
        assert!(out.stderr.contains(&format!("plugin '{plugin}'")), "{out}");
        assert!(out.stderr.contains(cause), "{out}");
        assert!(out.took < Duration::from_secs(60), "{out}");
    }
}

#[test]
fn cli_stops_misbehaving_dataset_plugins() {
    let tokenizer = repo().join("tests/data/tokenizers/gpt2");
    let tokenizer = tokenizer.to_str().unwrap();
    for (name, cause) in [
        ("hostile-trap", "trapped"),
        ("hostile-spin", "time budget"),
        ("hostile-hog", "memory limit"),
    ] {
        let plugin = path_of(&fixture(name));
        let out = Bench::new()
            .private_cache()
            .args(["dataset", "sample", "--dataset-name", &plugin])
            .args(["--tokenizer", tokenizer, "--num-prompts", "3"])
            .env("BENCH_PLUGIN_TIMEOUT", "1")
            .env("BENCH_PLUGIN_MEMORY", "64")
            .run();
        assert!(!out.success(), "{name} was accepted:\n{out}");
        assert!(
            out.stderr
                .contains(&format!("plugin '{plugin}': call 'next-batch'")),
            "{out}"
        );
        assert!(out.stderr.contains(cause), "{out}");
        // Within the 1 s budget plus start-up, never a hang.
        assert!(out.took < Duration::from_secs(60), "{name}: {out}");
    }
}
