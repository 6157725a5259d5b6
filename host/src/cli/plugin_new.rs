//! `bench plugin new`: a plugin project that builds and passes its test as written, so that
//! an author starts from something that works (in Rust, Python or JavaScript) and changes
//! it, rather than from the contract's text.
//!
//! The projects are files under `host/templates/` and the contract under `wit/current`,
//! embedded in the binary at build time; `{{...}}` placeholders take the plugin's name and
//! the parts that differ between languages and kinds.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

/// A file embedded from the repository: its path in the project, and its text.
struct File {
    path: &'static str,
    text: &'static str,
}

/// Embeds files under `$root` (relative to the repository root) as [`File`]s whose paths
/// are relative to `$root`.
macro_rules! embed {
    ($root:literal: $($path:literal),+ $(,)?) => {
        &[$(File {
            path: $path,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $root, "/", $path)),
        }),+]
    };
}

/// The current contract, with the WASI interfaces its worlds include: what componentize-py
/// and componentize-js build against (a Rust plugin gets it through bench-sdk).
const WIT: &[File] = embed!("wit/current":
    "plugin.wit",
    "deps/README.md",
    "deps/cli/cli.wit",
    "deps/clocks/clocks.wit",
    "deps/filesystem/filesystem.wit",
    "deps/io/io.wit",
    "deps/random/random.wit",
    "deps/sockets/sockets.wit",
);

/// The templates, by their path under `host/templates`.
const TEMPLATES: &[File] = embed!("host/templates":
    "common/README.md",
    "common/test.sh",
    "common/prompts.txt",
    "common/Cargo.toml",
    "common/build-python.sh",
    "common/build-js.sh",
    "rust-dataset/src/lib.rs",
    "rust-backend/src/lib.rs",
    "python-dataset/dataset.py",
    "python-backend/backend.py",
    "js-dataset/dataset.js",
    "js-backend/backend.js",
);

/// The language helpers, copied next to a Python or JavaScript plugin.
const PYTHON_HELPER: File = File {
    path: "bench_plugin.py",
    text: include_str!("../../../sdk/python/bench_plugin.py"),
};
const JS_HELPER: File = File {
    path: "bench-plugin.js",
    text: include_str!("../../../sdk/js/bench-plugin.js"),
};

/// The SDK of the checkout this binary was built from: a Rust plugin's default `bench-sdk`.
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk");

/// GPT-2's tokenizer, written into every project for `test.sh`: bench downloads nothing,
/// and an author may have no tokenizer on disk yet. Copied verbatim (not a template).
const TEST_TOKENIZER: [(&str, &str); 3] = [
    (
        "tokenizer/tokenizer.json",
        include_str!("../../../tests/data/tokenizers/gpt2/tokenizer.json"),
    ),
    (
        "tokenizer/LICENSE.openai-gpt-2",
        include_str!("../../../tests/data/tokenizers/gpt2/LICENSE.openai-gpt-2"),
    ),
    (
        "tokenizer/README.md",
        "GPT-2's tokenizer (`openai-community/gpt2`, vocabulary of 50 257), for `test.sh`.\n\
         Licence: OpenAI's GPT-2 licence, a modified MIT licence (`LICENSE.openai-gpt-2`).\n",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Makes the requests: one per line of --dataset-path.
    Dataset,
    /// Speaks a server's API: OpenAI-compatible /v1/completions, streamed.
    Backend,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Built with cargo against bench-sdk.
    Rust,
    /// Built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js.
    Js,
}

/// `bench plugin new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name: lowercase letters, digits and dashes, from a letter (the
    /// dataset's own flag is named after it: `--NAME-output-len`).
    pub name: String,
    /// What the plugin is.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// The language to write it in.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// The directory to write (default: ./NAME); it must be new or empty.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The bench-sdk a Rust plugin depends on: a bench checkout's `sdk/` folder (default: the
    /// one bench was built from, when it is still there).
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

/// Writes the project `args` asks for and says how to build and test it.
pub fn run(args: &NewArgs) -> Result<()> {
    check_name(&args.name)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if let Ok(mut entries) = std::fs::read_dir(&dir)
        && entries.next().is_some()
    {
        bail!(
            "{} is not empty: `bench plugin new` writes a new project; name a new or empty \
             directory with --dir",
            dir.display()
        );
    }
    let sdk = match args.lang {
        Lang::Rust => Some(sdk_path(args.sdk.as_deref())?),
        _ => None,
    };
    let files = project(args, sdk.as_deref());
    for (path, text) in &files {
        write(&dir.join(path), text)?;
    }
    println!(
        "wrote a {} {} plugin in {}:",
        lang_name(args.lang),
        kind_name(args.kind),
        dir.display()
    );
    for (path, _) in files.iter().filter(|(p, _)| !p.starts_with("wit/deps/")) {
        println!("  {path}");
    }
    println!(
        "test it: cd {} && ./test.sh   (README.md says more)",
        dir.display()
    );
    Ok(())
}

/// The name becomes a crate name, a file name and part of a flag: keep it to what all
/// three accept.
fn check_name(name: &str) -> Result<()> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        bail!(
            "plugin name '{name}': use lowercase letters, digits and dashes, starting with a \
             letter (it names the crate or module, the .wasm file and the plugin's flags)"
        );
    }
    Ok(())
}

/// The bench-sdk folder a Rust plugin's Cargo.toml names, absolute.
fn sdk_path(given: Option<&Path>) -> Result<PathBuf> {
    let (path, from) = match given {
        Some(path) => (path.to_path_buf(), "--sdk"),
        None => (
            PathBuf::from(BUILT_FROM_SDK),
            "the checkout bench was built from",
        ),
    };
    if !path.join("Cargo.toml").is_file() {
        bail!(
            "a Rust plugin depends on bench-sdk by path, and {} ({from}) has no Cargo.toml: \
             pass --sdk PATH, the sdk/ folder of a bench checkout",
            path.display()
        );
    }
    std::fs::canonicalize(&path).with_context(|| format!("resolving {}", path.display()))
}

fn template(path: &str) -> &'static str {
    TEMPLATES
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("template {path} is not embedded"))
        .text
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Dataset => "dataset",
        Kind::Backend => "backend",
    }
}

fn lang_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
    }
}

/// The project's files (path in the project, text), placeholders filled in.
fn project(args: &NewArgs, sdk: Option<&Path>) -> Vec<(String, String)> {
    let kind = kind_name(args.kind);
    let dataset = args.kind == Kind::Dataset;
    let mut files: Vec<(String, &str)> = Vec::new();
    let (build, wasm, tool, unit);
    match args.lang {
        Lang::Rust => {
            files.push(("Cargo.toml".into(), template("common/Cargo.toml")));
            files.push((
                "src/lib.rs".into(),
                template(&format!("rust-{kind}/src/lib.rs")),
            ));
            files.push((".gitignore".into(), "/target\n"));
            build = "cargo build --release --target wasm32-wasip2";
            wasm = "\"${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm\"";
            tool = "It needs Rust's `wasm32-wasip2` target (`rustup target add wasm32-wasip2`).";
            unit = " `cargo test` runs the unit tests natively.";
        }
        Lang::Python | Lang::Js => {
            let (ext, build_sh, helper) = match args.lang {
                Lang::Python => ("py", "common/build-python.sh", &PYTHON_HELPER),
                _ => ("js", "common/build-js.sh", &JS_HELPER),
            };
            files.push((
                format!("{kind}.{ext}"),
                template(&format!("{}-{kind}/{kind}.{ext}", lang_dir(args.lang))),
            ));
            files.push((helper.path.into(), helper.text));
            files.push(("build.sh".into(), template(build_sh)));
            files.extend(WIT.iter().map(|f| (format!("wit/{}", f.path), f.text)));
            let ignored = match args.lang {
                // Also what `componentize-py ... bindings .` writes for an editor.
                Lang::Python => {
                    "/*.wasm\n/wit_world/\n/componentize_py_*\n/poll_loop.py\n__pycache__/\n"
                }
                _ => "/*.wasm\n",
            };
            files.push((".gitignore".into(), ignored));
            build = "./build.sh";
            wasm = "{{name}}.wasm";
            tool = match args.lang {
                Lang::Python => {
                    "`build.sh` runs componentize-py (`pip install componentize-py==0.25.1`) \
                     against `wit/`, the plugin contract; `bench_plugin.py` holds the helpers \
                     every Python plugin needs (errors with tracebacks, options, files). \
                     `componentize-py -d wit -w {{kind}}-plugin bindings .` writes the \
                     bindings (`wit_world/`) for an editor to read."
                }
                _ => {
                    "`build.sh` runs componentize-js (`npm install \
                     @bytecodealliance/componentize-js@0.23.0`) against `wit/`, the plugin \
                     contract; `bench-plugin.js` holds the helpers every JavaScript plugin \
                     needs (errors with stacks, options, files)."
                }
            };
            unit = "";
        }
    }
    files.push(("test.sh".into(), template("common/test.sh")));
    if dataset {
        files.push(("prompts.txt".into(), template("common/prompts.txt")));
    }
    let shown_wasm = wasm
        .replace("\"${CARGO_TARGET_DIR:-target}", "target")
        .replace('"', "");
    let (run, usage, what) = if dataset {
        (
            "--plugin \"$wasm\" --dataset-path prompts.txt",
            format!(
                "bench --plugin {shown_wasm} --dataset-path prompts.txt --{{{{name}}}}-output-len 64 \\\n    \
                 --model M --base-url http://127.0.0.1:8000 --num-prompts 100"
            ),
            "one request per non-empty line of the file `--dataset-path` names",
        )
    } else {
        (
            "--backend \"$wasm\" --dataset-name random --random-input-len 16 \
             --random-output-len 8",
            format!(
                "bench --backend {shown_wasm} --model M --base-url http://127.0.0.1:8000 \\\n    \
                 --dataset-name random --num-prompts 100"
            ),
            "it sends OpenAI-compatible `/v1/completions` requests and reads their streamed \
             (server-sent events) answers",
        )
    };
    let mut listing = String::new();
    let listed = files.iter().map(|(path, _)| path.as_str());
    for path in listed.chain(TEST_TOKENIZER.iter().map(|(path, _)| *path)) {
        if let Some(what) = describe_file(path, args.lang) {
            let _ = writeln!(listing, "- `{path}`: {what}");
        }
    }
    files.push(("README.md".into(), template("common/README.md")));

    // Structural placeholders first: their values hold {{name}} and {{crate}}.
    let sdk = sdk.map(|p| p.display().to_string()).unwrap_or_default();
    let vars: [(&str, &str); 15] = [
        ("{{build}}", build),
        ("{{wasm}}", wasm),
        ("{{wasm_file}}", &shown_wasm),
        ("{{run}}", run),
        ("{{usage}}", &usage),
        ("{{what}}", what),
        ("{{tool}}", tool),
        ("{{unit}}", unit),
        ("{{files}}", listing.trim_end()),
        ("{{language}}", lang_name(args.lang)),
        (
            "{{dependencies}}",
            if dataset { "" } else { "serde_json = \"1\"\n" },
        ),
        ("{{sdk}}", &toml_escape(&sdk)),
        ("{{kind}}", kind),
        ("{{crate}}", &args.name.replace('-', "_")),
        ("{{name}}", &args.name),
    ];
    files
        .into_iter()
        .map(|(path, text)| {
            let text = vars.iter().fold(text.to_string(), |text, (key, value)| {
                text.replace(key, value)
            });
            (path, text)
        })
        .chain(
            TEST_TOKENIZER
                .iter()
                .map(|(path, text)| (path.to_string(), text.to_string())),
        )
        .collect()
}

/// What a project file is, for the README; `None` for those it need not list one by one.
fn describe_file(path: &str, lang: Lang) -> Option<&'static str> {
    Some(match path {
        "Cargo.toml" => "the crate, with bench-sdk by path",
        "src/lib.rs" => "the plugin, with its unit tests",
        "dataset.py" | "backend.py" => {
            "the plugin (componentize-py takes the classes of the interface it exports from the \
             module named after it: keep the file's name)"
        }
        "dataset.js" | "backend.js" => "the plugin",
        "bench_plugin.py" | "bench-plugin.js" => {
            "helpers every plugin in this language needs (a copy of bench's `sdk/`)"
        }
        "build.sh" => "the build command",
        "test.sh" => "builds the plugin and runs it against `bench mock-server`",
        "prompts.txt" => "sample data, one prompt per line",
        "tokenizer/tokenizer.json" => {
            "GPT-2's tokenizer, which `test.sh` runs with (its licence is beside it)"
        }
        "wit/plugin.wit" => match lang {
            Lang::Rust => return None,
            _ => "the plugin contract, with the WASI interfaces it includes in `wit/deps/`",
        },
        _ => return None,
    })
}

fn lang_dir(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "rust",
        Lang::Python => "python",
        Lang::Js => "js",
    }
}

/// A path inside a TOML basic string.
fn toml_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    if path.extension().is_some_and(|e| e == "sh") {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `dir` (recursively), relative to it.
    fn files_under(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(dir).unwrap();
                    found.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        found.sort();
        found
    }

    /// The lists above are the embedded copies of two folders: a file added to either
    /// must be listed, or new projects would lack it.
    #[test]
    fn every_template_and_contract_file_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for (dir, embedded) in [("templates", TEMPLATES), ("../wit/current", WIT)] {
            let mut listed: Vec<String> = embedded.iter().map(|f| f.path.to_string()).collect();
            listed.sort();
            assert_eq!(files_under(&root.join(dir)), listed, "{dir}");
        }
    }

    #[test]
    fn names_are_checked() {
        for good in ["lines", "my-data2"] {
            check_name(good).unwrap();
        }
        for bad in ["", "Lines", "2lines", "my_data", "lines-", "a b"] {
            let message = check_name(bad).unwrap_err().to_string();
            assert!(message.contains(&format!("'{bad}'")), "{message}");
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for kind in [Kind::Dataset, Kind::Backend] {
                let args = NewArgs {
                    name: "my-plugin".into(),
                    kind,
                    lang,
                    dir: None,
                    sdk: None,
                };
                let files = project(&args, Some(Path::new("/sdk")));
                // The tokenizer is copied verbatim: GPT-2's vocabulary has a `{{` token.
                for (path, text) in files.iter().filter(|(p, _)| !p.starts_with("tokenizer/")) {
                    assert!(!text.contains("{{"), "{lang:?} {kind:?} {path}:\n{text}");
                }
                let tokenizer = files.iter().find(|(p, _)| p == "tokenizer/tokenizer.json");
                assert!(tokenizer.is_some_and(|(_, text)| text.contains("\"{{\"")));
            }
        }
    }
}
