//! Every first-party dataset gives the same request set, byte for byte, for the same seed
//! and inputs, on any machine and in any run; and a different seed gives a different one.
//!
//! Each dataset is sampled with two seeds through `bench dataset sample`; the JSONL it
//! writes is hashed (SHA-256) and compared with the hash pinned below, taken when the
//! dataset was added (a dataset that takes no seed, such as `gsm8k`, whose questions come
//! in file order as in vLLM's evaluation, must give the same set for both). A pinned hash
//! that differs means the request set changed:
//! either a bug (threads, hash-map order, float formatting leaking into the output) or an
//! intended change of the sampling, in which case the new hash goes here in the same
//! commit (run with `BENCH_PRINT_HASHES=1` and `--nocapture` to see them). The test also
//! fails when a dataset built into `bench` has no entry here, so a new dataset cannot
//! skip it.

use sha2::{Digest, Sha256};

use crate::common::{Bench, data, gpt2};

/// A dataset's sampling command line (without the seed) and the SHA-256 of its output
/// for each of [`SEEDS`], filled in by [`pinned`].
struct Case {
    dataset: &'static str,
    args: &'static [&'static str],
    /// Whether the seed chooses the requests (else they must not depend on it).
    seeded: bool,
}

const fn case(dataset: &'static str, args: &'static [&'static str]) -> Case {
    Case {
        dataset,
        args,
        seeded: true,
    }
}

/// A dataset whose requests the seed does not choose (file order, as its reference
/// tool's).
const fn unseeded(dataset: &'static str, args: &'static [&'static str]) -> Case {
    Case {
        dataset,
        args,
        seeded: false,
    }
}

const SEEDS: [&str; 2] = ["0", "1"];

/// The command line of a case: `@rel` is a path under `tests/data/datasets`, and the
/// tokenizer is GPT-2's unless the case names another (`--tokenizer qwen3`).
fn command_line(case: &Case) -> Vec<String> {
    let mut out = Vec::new();
    let mut tokenizer = gpt2();
    let mut args = case.args.iter();
    while let Some(arg) = args.next() {
        if *arg == "--tokenizer" {
            let name = args.next().expect("a tokenizer name");
            tokenizer = data(&format!("tokenizers/{name}")).display().to_string();
        } else if let Some(rel) = arg.strip_prefix('@') {
            out.push(data(&format!("datasets/{rel}")).display().to_string());
        } else {
            out.push(arg.to_string());
        }
    }
    out.extend(["--tokenizer".to_string(), tokenizer]);
    out
}

const CASES: &[Case] = &[
    case(
        "burstgpt",
        &[
            "--dataset-path",
            "@burstgpt/burstgpt_synthetic.csv",
            "--num-prompts",
            "20",
        ],
    ),
    case(
        "custom",
        &[
            "--dataset-path",
            "@custom/prompts.jsonl",
            "--num-prompts",
            "16",
            "--skip-chat-template",
        ],
    ),
    case(
        "custom_audio",
        &[
            "--dataset-path",
            "@audio/clips.jsonl",
            "--num-prompts",
            "8",
            "--enable-multimodal-chat",
        ],
    ),
    case(
        "custom_image",
        &[
            "--dataset-path",
            "@custom_image/images.jsonl",
            "--num-prompts",
            "8",
            "--enable-multimodal-chat",
            "--custom-ensure-client-side-data",
        ],
    ),
    case(
        "file",
        &[
            "--dataset-path",
            "@file/prompts.parquet",
            "--file-prompt-column",
            "question",
            "--num-prompts",
            "10",
        ],
    ),
    case(
        "hf",
        &[
            "--dataset-path",
            "@hf/likaixin/InstructCoder",
            "--skip-chat-template",
            "--num-prompts",
            "20",
        ],
    ),
    case(
        "mooncake",
        &[
            "--dataset-path",
            "@mooncake/trace.jsonl",
            "--num-prompts",
            "10",
        ],
    ),
    case(
        "prefix_repetition",
        &[
            "--num-prompts",
            "20",
            "--prefix-repetition-prefix-len",
            "64",
            "--prefix-repetition-suffix-len",
            "32",
            "--prefix-repetition-num-prefixes",
            "4",
        ],
    ),
    case(
        "random",
        &[
            "--num-prompts",
            "16",
            "--random-input-len",
            "64",
            "--random-output-len",
            "16",
            "--random-range-ratio",
            "0.5",
            "--random-prefix-len",
            "8",
        ],
    ),
    case(
        "random-mm",
        &[
            "--num-prompts",
            "8",
            "--random-input-len",
            "32",
            "--random-mm-base-items-per-request",
            "2",
            "--random-mm-num-mm-items-range-ratio",
            "0.5",
            "--random-mm-bucket-config",
            "{(32, 48, 1): 0.5, (12, 10, 4): 0.5}",
        ],
    ),
    case(
        "random-rerank",
        &[
            "--num-prompts",
            "12",
            "--random-input-len",
            "64",
            "--random-range-ratio",
            "0.5",
            "--random-batch-size",
            "4",
        ],
    ),
    case(
        "sharegpt",
        &[
            "--dataset-path",
            "@sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json",
            "--num-prompts",
            "16",
        ],
    ),
    case(
        "sonnet",
        &[
            "--tokenizer",
            "qwen3",
            "--dataset-path",
            "@sonnet/sonnet.txt",
            "--num-prompts",
            "20",
            "--sonnet-input-len",
            "300",
            "--sonnet-prefix-len",
            "100",
        ],
    ),
    case(
        "spec_bench",
        &[
            "--tokenizer",
            "qwen3",
            "--dataset-path",
            "@spec_bench/question.jsonl",
            "--num-prompts",
            "20",
        ],
    ),
    case(
        "speed_bench",
        &[
            "--tokenizer",
            "qwen3",
            "--dataset-path",
            "@speed_bench",
            "--num-prompts",
            "10",
        ],
    ),
    unseeded(
        "gsm8k",
        &[
            "--dataset-path",
            "@gsm8k/test.jsonl",
            "--num-prompts",
            "8",
            "--gsm8k-num-shots",
            "2",
        ],
    ),
    unseeded(
        "mcq",
        &[
            "--dataset-path",
            "@mcq/arithmetic.jsonl",
            "--num-prompts",
            "45",
        ],
    ),
    case(
        "structured-output",
        &[
            "--num-prompts",
            "20",
            "--structured-output-kind",
            "json-unique",
            "--structured-output-ratio",
            "0.5",
        ],
    ),
    case(
        "timed_trace",
        &[
            "--dataset-path",
            "@mooncake/trace.jsonl",
            "--num-prompts",
            "10",
        ],
    ),
];

fn sample(case: &Case, seed: &str) -> String {
    let out = Bench::new()
        .args(["dataset", "sample", "--dataset-name", case.dataset])
        .args(["--seed", seed])
        .args(command_line(case))
        .run()
        .assert_success();
    assert!(
        out.stdout.lines().count() > 0,
        "{}: no requests sampled with seed {seed}",
        case.dataset
    );
    format!("{:x}", Sha256::digest(out.stdout.as_bytes()))
}

#[test]
fn every_dataset_gives_the_same_requests_for_a_seed_and_other_requests_for_another() {
    let print = std::env::var_os("BENCH_PRINT_HASHES").is_some();
    let mut wrong = Vec::new();
    for case in CASES {
        let hashes: Vec<String> = SEEDS.iter().map(|seed| sample(case, seed)).collect();
        assert_eq!(
            hashes[0] != hashes[1],
            case.seeded,
            "{}: seeds {} and {} gave {} requests",
            case.dataset,
            SEEDS[0],
            SEEDS[1],
            if case.seeded { "the same" } else { "different" }
        );
        // A second run in this process: the same bytes again.
        assert_eq!(
            sample(case, SEEDS[0]),
            hashes[0],
            "{}: two runs with one seed differ",
            case.dataset
        );
        if print {
            println!("{}: {:?}", case.dataset, hashes);
        }
        for (i, got) in hashes.iter().enumerate() {
            let want = pinned(case.dataset, SEEDS[i]);
            if got != want {
                wrong.push(format!(
                    "{} seed {}: sha256 {got}, pinned {want}",
                    case.dataset, SEEDS[i]
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "request sets differ from the pinned ones:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_builtin_dataset_is_checked_for_reproducibility() {
    let out = Bench::new().args(["plugin", "list"]).run().assert_success();
    let datasets: Vec<&str> = out
        .stdout
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cols = line.split_whitespace();
            let name = cols.next()?;
            (cols.next()? == "dataset").then_some(name)
        })
        .collect();
    assert!(datasets.len() >= 3, "no datasets listed:\n{out}");
    let missing: Vec<&&str> = datasets
        .iter()
        .filter(|name| !CASES.iter().any(|c| c.dataset == **name))
        .collect();
    assert!(
        missing.is_empty(),
        "built-in datasets without a reproducibility case in tests/e2e/reproducible.rs: {missing:?}"
    );
}

/// The SHA-256 of each dataset's requests for each seed, taken when the case was added;
/// every later run, on any machine, must give the same.
fn pinned(dataset: &str, seed: &str) -> &'static str {
    PINNED
        .iter()
        .find(|(d, s, _)| *d == dataset && *s == seed)
        .map_or("(none pinned)", |(_, _, hash)| hash)
}

const PINNED: &[(&str, &str, &str)] = &[
    (
        "burstgpt",
        "0",
        "1808d179e20ba21fab83ca8f45081a375d616fcba73f24ffb6f1d6c4814a660e",
    ),
    (
        "burstgpt",
        "1",
        "fe2d5e03f7811372caf7dd3b2a453bdd114f9624dde411cd1d3cb7c7d3f7f037",
    ),
    (
        "custom",
        "0",
        "67bf71cc4b4f71f144ab61d0ab0a5cf24317e6fafe870dfe095990ab99fd3ce5",
    ),
    (
        "custom",
        "1",
        "861bb552d9c1d72470c6f6ba046cd494dcea71f455508b2dd118e56f5136c332",
    ),
    (
        "custom_audio",
        "0",
        "6608f3fac33e98f5db01d2d46a80496700d70e924d5d6a291af3a94ad1af1bf0",
    ),
    (
        "custom_audio",
        "1",
        "c896063d5f460b0b9f52a3dcaea4a52ccf290da152228303b29dad4eaecbaf35",
    ),
    (
        "custom_image",
        "0",
        "aa5a65f5dccf8c8fefe281d9d3b2376a25ed69a2e2a42f71b07c17bb662f2002",
    ),
    (
        "custom_image",
        "1",
        "4cb1e22b881b40473d74c17730d2928edd4d0d563b8d57f55adb52f992b99392",
    ),
    (
        "file",
        "0",
        "291164486bd8b743f9e6693604138e967a477609dfd57b6cdd94212a5e4ab2bc",
    ),
    (
        "file",
        "1",
        "3c5aaf34d040fb99e10e0022a17250f1d9df1fa38df6f88307d9b5f08e3a7832",
    ),
    (
        "hf",
        "0",
        "53f4b82b0a1b952e4c01fa1e1898ae8f4c08b40ce4825b89c960400f1ac5e8aa",
    ),
    (
        "hf",
        "1",
        "98c67ce9107261f5c265e0271f7da9a58043fddae0f1695ce0056071088e04eb",
    ),
    (
        "mooncake",
        "0",
        "e3a5272aed70583940dffd48577fc96f9c105b9f705dac74064db978d1b7de5f",
    ),
    (
        "mooncake",
        "1",
        "1c923657f51b1ec09febf8dd8ab49d9de423547c3bf66246b0e652a1bc5eda36",
    ),
    (
        "prefix_repetition",
        "0",
        "9c49f793fd8e705e96fff8a431f6a948dfe9b43769c7e1248a5500929dda85fe",
    ),
    (
        "prefix_repetition",
        "1",
        "5edb83e0d379644a6c860350f73f10b2058e053507901f3afff095c8c3ffd444",
    ),
    (
        "random",
        "0",
        "7687e721c7139adc018421aedc3207d7a2ed30028b160d72c61211ead1268e2d",
    ),
    (
        "random",
        "1",
        "dd00cb819581eff9b04b83334d14a31c0bfa55a65018e7f773a95544e9746d10",
    ),
    (
        "random-mm",
        "0",
        "97509096a7f97df6edf5c6a3f979e475c6fef85e8c08f34af7c05a48756996f8",
    ),
    (
        "random-mm",
        "1",
        "e980f11754b5999aaa46f520864c4447ed53300449d783c675178b7c3b9e9ac6",
    ),
    (
        "random-rerank",
        "0",
        "54a0f666d898aa23bfb66d43f68fef3eb0f0975019fe88ffc534df31d1429c14",
    ),
    (
        "random-rerank",
        "1",
        "5f7a07c7a39251e975bb537e5e5dac0bec1d477b84b4c9250b6de12198f8d4ef",
    ),
    (
        "sharegpt",
        "0",
        "3616b8918afb1947f214a0eb1890f16da7844c3191b61e91680aaf836d45cb49",
    ),
    (
        "sharegpt",
        "1",
        "4ec4d457bfe366be6e4c507d80daab1e85c449ad78aec4e0a959d6be6a95a50e",
    ),
    (
        "sonnet",
        "0",
        "0cd93a4fc9017b9565b54934e0097753f2aa455cb288a42a8222d66d63b11a90",
    ),
    (
        "sonnet",
        "1",
        "d09319f67217e571262c9cb4bec02c1b7c63bf83a6d4770f5d5a23120e610f45",
    ),
    (
        "spec_bench",
        "0",
        "40adebbf8ece7e7ca5e865cae042c349c616bbac5b8173eb13144405b75a6456",
    ),
    (
        "spec_bench",
        "1",
        "f49d745f5f685d196e2ffe73e09b17d6bc2e301f555fc421b6d14e267401caea",
    ),
    (
        "speed_bench",
        "0",
        "cebbbf77151fe890bafb3ae4e9ac2c905cbf5b70bde626a0ef861eda0ba4ef5a",
    ),
    (
        "speed_bench",
        "1",
        "2159e431a0c57f42717d726a8c00bac8c6a9084909cf74eb677164b5afe6553b",
    ),
    (
        "gsm8k",
        "0",
        "fe04282529735980af2aaf8af034b98ebd3656ad1f224971dc88ffe7ee197159",
    ),
    (
        "gsm8k",
        "1",
        "fe04282529735980af2aaf8af034b98ebd3656ad1f224971dc88ffe7ee197159",
    ),
    (
        "mcq",
        "0",
        "88cf84d1332e65ed5b2cb88d8ac2bcecbb664ed3fe78cca550c7f6c487850d49",
    ),
    (
        "mcq",
        "1",
        "88cf84d1332e65ed5b2cb88d8ac2bcecbb664ed3fe78cca550c7f6c487850d49",
    ),
    (
        "structured-output",
        "0",
        "172333c277c830e33f7b9ca44a30c1173453bc51e36ef537eeaf993edfca78ea",
    ),
    (
        "structured-output",
        "1",
        "0c7646c75b809cfa0d55ed1ba5fcecbca9de87730d4ec37f5c4202ec53cc503d",
    ),
    (
        "timed_trace",
        "0",
        "d98c31bcc45daf54395358fe50cc77fc2dfcad67ff76c3e1fc4ca59295e3a838",
    ),
    (
        "timed_trace",
        "1",
        "f1eda5314392f81946468c67a01cc0c6e3f0fccdb476c8a6a0ddf933b7a35058",
    ),
];
