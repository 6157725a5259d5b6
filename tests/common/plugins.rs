//! Helpers around the fixture plugins for the end-to-end tests (not the benchmarks, which
//! include `fixtures.rs` alone).

use bench::runtime::PluginRef;

use super::fixtures::fixture;

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
