//! `bench k8s render`: the rendered manifests pass Kubernetes' own schemas (the PyPI
//! package kubernetes-validate, strict, installed by `scripts/k8s-tools.sh`), and a sharded
//! run is simulated on loopback as a cluster would run it: each pod's arguments taken from
//! the rendered Job, `$(JOB_COMPLETION_INDEX)` expanded by Kubernetes' rules, the volumes
//! stood in for by local folders, the pods as concurrent processes against a mock server,
//! their results collected as docs/kubernetes.md says and merged with `bench merge`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::Value;

use crate::common::*;

/// The Kubernetes versions whose schemas the manifests are checked against: the API
/// `k8s-openapi` builds them for (1.33) and an older one still widely run.
const KUBERNETES_VERSIONS: &[&str] = &["1.30.0", "1.33.0"];

/// kubernetes-validate in `${BENCH_K8S_TOOLS:-~/.cache/bench-k8s-tools}`. When it is
/// missing the test fails saying how to install it, unless `BENCH_SKIP_K8S_TOOLS=1` (which
/// `.ci/run` sets when PyPI cannot be reached): then `None`, after a line saying why `test`
/// skips.
fn validator(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("BENCH_K8S_TOOLS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/bench-k8s-tools"),
    };
    let path = dir.join("venv/bin/kubernetes-validate");
    if path.exists() {
        return Some(path);
    }
    if std::env::var("BENCH_SKIP_K8S_TOOLS").as_deref() == Ok("1") {
        crate::common::timing::skipped(format_args!(
            "{test}: {} is not installed and BENCH_SKIP_K8S_TOOLS=1 (PyPI could not be \
             reached)",
            path.display()
        ));
        return None;
    }
    panic!(
        "{} is not installed: run scripts/k8s-tools.sh (it installs the pinned \
         kubernetes-validate), or set BENCH_SKIP_K8S_TOOLS=1 to skip the tests that need it",
        path.display()
    );
}

/// Runs the validator, strict, on `files` against each of [`KUBERNETES_VERSIONS`]; the
/// output of every version's run, and whether all passed.
fn validate(validator: &Path, files: &[PathBuf]) -> (bool, String) {
    let mut all_passed = true;
    let mut output = String::new();
    for version in KUBERNETES_VERSIONS {
        let out = Command::new(validator)
            .args(["--strict", "--kubernetes-version", version])
            .args(files)
            .output()
            .expect("running kubernetes-validate");
        all_passed &= out.status.success();
        output.push_str(&String::from_utf8_lossy(&out.stdout));
        output.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    (all_passed, output)
}

/// `bench k8s render` with `args` (before `--`) and `serve` (after it), into `out`.
fn render(args: &[&str], serve: &[&str], out: &Path) -> Run {
    Bench::new()
        .args(["k8s", "render"])
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(serve)
        .run()
}

/// The documents of a rendered file (JSON documents separated by `---` lines).
fn documents(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .split("\n---\n")
        .map(|doc| serde_json::from_str(doc).unwrap_or_else(|e| panic!("{e}: {doc}")))
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {docs:?}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Serve arguments that a YAML 1.1 reader (kubectl's, and the validator's) would take for
/// a boolean, a date, a number or a null if they were written unquoted, and a `$(...)`
/// that Kubernetes must leave alone.
const TRICKY_ARGS: &[&str] = &[
    "--label",
    "yes",
    "on",
    "No",
    "2026-11-27T17:00:00Z",
    "12:30:00",
    "1_000",
    "0755",
    "~",
    "null",
    "$(HOME)",
];

/// Every combination of the render's options gives manifests Kubernetes' schemas accept,
/// strictly (no unknown field), and the user's arguments reach the pod as they were given.
#[test]
fn rendered_manifests_pass_the_kubernetes_schemas() {
    let Some(validator) = validator("rendered_manifests_pass_the_kubernetes_schemas") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let custom = data("datasets/custom/prompts.jsonl");
    let parquet = data("datasets/file/prompts.parquet");
    let base = [
        "--image",
        "registry.example.com/bench:0.1.0",
        "--start-at",
        "2026-11-27T17:00:00Z",
    ];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("logs", vec!["--shards", "2"]),
        (
            "volumes",
            vec![
                "--shards",
                "8",
                "--name",
                "run-7",
                "--namespace",
                "load",
                "--file",
                custom.to_str().unwrap(),
                "--file",
                parquet.to_str().unwrap(),
                "--data-pvc",
                "models",
                "--results-pvc",
                "bench-results",
                "--cpu",
                "2",
                "--memory",
                "2Gi",
                "--guaranteed",
                "--spread",
                "--backoff-limit",
                "1",
            ],
        ),
        (
            "limits",
            vec![
                "--shards",
                "1",
                "--cpu",
                "500m",
                "--cpu-limit",
                "1.5",
                "--memory-limit",
                "1e9",
            ],
        ),
    ];
    let mut files = Vec::new();
    for (name, args) in &cases {
        let out = dir.path().join(format!("{name}.yaml"));
        let args: Vec<&str> = base.iter().chain(args).copied().collect();
        render(&args, TRICKY_ARGS, &out).assert_success();
        let docs = documents(&out);
        let job = of_kind(&docs, "Job");
        let container_args = strings(&job["spec"]["template"]["spec"]["containers"][0]["args"]);
        let escaped: Vec<String> = TRICKY_ARGS.iter().map(|a| a.replace('$', "$$")).collect();
        assert_eq!(&container_args[9..], escaped, "{name}");
        files.push(out);
    }
    let (passed, output) = validate(&validator, &files);
    assert!(
        passed,
        "kubernetes-validate refused a rendered manifest:\n{output}"
    );
    // Each version passed every object: 1 + 3 (ConfigMap, Job, results pod) + 1.
    let passes = output.matches(" passed for resource ").count();
    assert_eq!(passes, 5 * KUBERNETES_VERSIONS.len(), "{output}");
}

/// The least render: two shards of a fixed image at a fixed start.
const TWO_SHARDS: &[&str] = &[
    "--shards",
    "2",
    "--image",
    "bench:1",
    "--start-at",
    "@1795000000",
];

/// The validation bites: a rendered manifest with a misspelt field, or a field of the
/// wrong type, is refused, naming it.
#[test]
fn the_validator_refuses_a_broken_manifest() {
    let Some(validator) = validator("the_validator_refuses_a_broken_manifest") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    render(TWO_SHARDS, &["--num-prompts", "10"], &good).assert_success();
    let text = std::fs::read_to_string(&good).unwrap();
    for (what, from, to, named) in [
        (
            "a misspelt field",
            "\"parallelism\"",
            "\"paralelism\"",
            "paralelism",
        ),
        (
            "a number as a string",
            "\"completions\": 2",
            "\"completions\": \"2\"",
            "completions",
        ),
        ("a boolean argument", "\"--num-prompts\"", "true", "args"),
    ] {
        assert!(text.contains(from), "{from} in {text}");
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, text.replacen(from, to, 1)).unwrap();
        let (passed, output) = validate(&validator, &[bad]);
        assert!(!passed, "{what} passed:\n{output}");
        assert!(output.contains(named), "{what}: {output}");
    }
    let (passed, output) = validate(&validator, &[good]);
    assert!(passed, "{output}");
}

/// What a user can get wrong is refused before anything reaches a cluster, naming the
/// flag and what to do instead.
#[test]
fn render_refuses_what_a_cluster_would_refuse_later() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.yaml");
    let base = TWO_SHARDS;
    let refused = |args: &[&str], serve: &[&str]| {
        let args: Vec<&str> = base.iter().chain(args).copied().collect();
        let run = render(&args, serve, &out).assert_failure();
        assert!(!out.exists(), "nothing is written when refused: {run}");
        run.stderr
    };
    // GPT-2's tokenizer.json is 2 MiB: a ConfigMap cannot hold it.
    let tokenizer = data("tokenizers/gpt2/tokenizer.json");
    let e = refused(&["--file", tokenizer.to_str().unwrap()], &[]);
    assert!(e.contains("1 MiB") && e.contains("--data-pvc"), "{e}");
    let e = refused(&["--file", "/no/such/file.jsonl"], &[]);
    assert!(e.contains("--file /no/such/file.jsonl"), "{e}");
    let e = refused(&[], &["--shard", "0/2"]);
    assert!(
        e.contains("--shard after -- is set by bench k8s render"),
        "{e}"
    );
    let e = refused(&["--name", "Bench_Run"], &[]);
    assert!(e.contains("--name \"Bench_Run\""), "{e}");
    let e = refused(&["--cpu", "two"], &[]);
    assert!(
        e.contains("--cpu \"two\" is not a Kubernetes quantity"),
        "{e}"
    );
    let run = Bench::new()
        .args([
            "k8s",
            "render",
            "--shards",
            "2",
            "--image",
            "b",
            "--start-at",
            "5pm",
        ])
        .run()
        .assert_failure();
    assert!(run.stderr.contains("--start-at"), "{run}");
}

/// What a pod of the rendered Job runs: the container's arguments with every `$(VAR)` of
/// its declared environment expanded as Kubernetes expands them (`$$` is a literal `$`, an
/// unknown variable stays as written), the completion index taken from the annotation the
/// Job controller sets, and each mounted volume's path replaced by the local folder that
/// stands in for it.
fn pod_args(job: &Value, index: usize, mounts: &BTreeMap<String, PathBuf>) -> Vec<String> {
    let pod = &job["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let annotations = BTreeMap::from([(
        "batch.kubernetes.io/job-completion-index".to_owned(),
        index.to_string(),
    )]);
    let mut env = BTreeMap::new();
    for var in container["env"].as_array().unwrap() {
        let field = var["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap();
        let key = field
            .strip_prefix("metadata.annotations['")
            .and_then(|k| k.strip_suffix("']"))
            .unwrap_or_else(|| panic!("an unexpected field reference {field}"));
        env.insert(
            var["name"].as_str().unwrap().to_owned(),
            annotations[key].clone(),
        );
    }
    // The volumes each mount path shows, by the stand-in the test made for each volume.
    let mut paths = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let path = mount["mountPath"].as_str().unwrap();
        let volume = mount["name"].as_str().unwrap();
        paths.push((format!("{path}/"), mounts[volume].clone()));
    }
    let args = strings(&container["args"]);
    // The image's entrypoint is `bench`: the arguments are bench's.
    assert_eq!(args[0], "serve");
    args.iter()
        .map(|arg| {
            let mut arg = expand(arg, &env);
            for (path, local) in &paths {
                arg = arg.replace(path.as_str(), &format!("{}/", local.display()));
            }
            arg
        })
        .collect()
}

/// Kubernetes' expansion of `$(VAR)` references in a container's arguments.
fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(after) = after.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(name_end) = after.strip_prefix('(').and_then(|a| a.find(')')) {
            let name = &after[1..=name_end];
            match env.get(name) {
                Some(value) => out.push_str(value),
                None => out.push_str(&rest[at..at + name_end + 3]),
            }
            rest = &after[name_end + 2..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn expansion_follows_kubernetes() {
    let env = BTreeMap::from([("I".to_owned(), "3".to_owned())]);
    assert_eq!(expand("$(I)/4", &env), "3/4");
    assert_eq!(expand("$$(I)", &env), "$(I)");
    assert_eq!(expand("$(J)-$(I)", &env), "$(J)-3");
    assert_eq!(expand("a$b$", &env), "a$b$");
}

/// A ConfigMap volume as the kubelet writes it: one file per key, `binaryData` decoded.
fn materialize(config_map: &Value, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (key, text) in config_map["data"].as_object().into_iter().flatten() {
        std::fs::write(dir.join(key), text.as_str().unwrap()).unwrap();
    }
    for (key, b64) in config_map["binaryData"].as_object().into_iter().flatten() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap();
        std::fs::write(dir.join(key), bytes).unwrap();
    }
}

/// `@UNIX_SECONDS`, `ahead` from now.
fn start_in(ahead: Duration) -> String {
    let at = SystemTime::now() + ahead;
    format!(
        "@{:.3}",
        at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
    )
}

/// Runs every pod of the rendered Job at once; each pod's log (stdout, then stderr, as
/// `kubectl logs` shows both) is written to `logs/<name>-shard-<i>.log`.
fn run_pods(job: &Value, mounts: &BTreeMap<String, PathBuf>, logs: &Path) -> Vec<PathBuf> {
    let shards = job["spec"]["completions"].as_u64().unwrap() as usize;
    assert_eq!(job["spec"]["parallelism"].as_u64(), Some(shards as u64));
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let name = job["metadata"]["name"].as_str().unwrap();
    let running: Vec<_> = (0..shards)
        .map(|i| Bench::new().args(pod_args(job, i, mounts)).spawn())
        .collect();
    std::fs::create_dir_all(logs).unwrap();
    running
        .into_iter()
        .enumerate()
        .map(|(i, pod)| {
            let run = pod.wait(Duration::from_secs(120)).assert_success();
            let log = logs.join(format!("{name}-shard-{i}.log"));
            std::fs::write(&log, format!("{}{}", run.stdout, run.stderr)).unwrap();
            log
        })
        .collect()
}

fn merge(inputs: &[PathBuf], output: &Path) -> Value {
    Bench::new()
        .arg("merge")
        .args(inputs)
        .arg("-o")
        .arg(output)
        .run()
        .assert_success();
    serde_json::from_slice(&std::fs::read(output).unwrap()).unwrap()
}

/// The server saw every request of the workload once: ids `{prefix}0` .. `{prefix}{n-1}`.
fn assert_each_request_once(mock: &Mock, prefix: &str, n: usize) {
    let ids: Vec<String> = mock
        .server
        .as_ref()
        .unwrap()
        .requests()
        .into_iter()
        .map(|r| r.id)
        .collect();
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(ids.len(), n, "{ids:?}");
    let want: BTreeSet<String> = (0..n).map(|k| format!("{prefix}{k}")).collect();
    assert_eq!(unique, want.iter().collect());
}

fn quick_server() -> Mock {
    mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..Default::default()
    })
}

/// Two shards streaming their results to their logs (`--shard-output -`), the tokenizer
/// from a data volume, the request ids the render's: the logs, merged as the documented `kubectl logs` loop collects
/// them, are the whole run.
#[test]
fn a_job_streaming_to_logs_merges_into_the_whole_run() {
    let server = quick_server();
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("bench.yaml");
    let prompts = 40;
    let rendered = render(
        &[
            "--shards",
            "2",
            "--image",
            "bench:test",
            "--start-at",
            &start_in(Duration::from_secs(3)),
            "--data-pvc",
            "tokenizers",
        ],
        &[
            "--base-url",
            &server.url,
            "--model",
            "mock",
            "--tokenizer",
            "/data/tokenizer.json",
            "--random-input-len",
            "16",
            "--random-output-len",
            "8",
            "--num-prompts",
            &prompts.to_string(),
            "--request-rate",
            "200",
            "--seed",
            "5",
            "--disable-tqdm",
        ],
        &manifests,
    )
    .assert_success();
    // The steps it prints collect the logs under the names this test gives them.
    for step in [
        "kubectl wait --for=condition=complete --timeout=-1s job/bench",
        "-l batch.kubernetes.io/job-name=bench,batch.kubernetes.io/job-completion-index=$i \
         > bench-shard-$i.log",
        "bench merge bench-shard-*.log -o result.json",
    ] {
        assert!(rendered.stderr.contains(step), "{step:?} in {rendered}");
    }
    let docs = documents(&manifests);
    assert_eq!(
        docs.len(),
        1,
        "no ConfigMap without --file, no reader without a volume"
    );
    let job = of_kind(&docs, "Job");
    let mounts = BTreeMap::from([("data".to_owned(), data("tokenizers/gpt2"))]);
    let logs = run_pods(job, &mounts, &dir.path().join("logs"));
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        let lines = text
            .lines()
            .filter(|l| l.starts_with("bench-shard-result: "));
        assert_eq!(lines.count(), 1, "one result line in {}", log.display());
    }
    let merged = merge(&logs, &dir.path().join("result.json"));
    assert_eq!(merged["completed"], prompts, "{merged}");
    assert_eq!(merged["failed"], 0);
    assert_eq!(merged["num_prompts"], prompts);
    assert_eq!(
        merged["shards"].as_array().map(Vec::len),
        Some(2),
        "{merged}"
    );
    // The render named the requests after the Job (serve's own prefix is random per process).
    assert_each_request_once(&server, "bench-", prompts);
}

/// Two shards writing to a results volume, the workload (a Parquet file, so binaryData)
/// from the rendered ConfigMap, the tokenizer from a data volume: the documents on the
/// results volume, merged, are the whole run.
#[test]
fn a_job_with_a_results_volume_and_files_merges_into_the_whole_run() {
    let server = quick_server();
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("bench.yaml");
    let parquet = data("datasets/file/prompts.parquet");
    let parquet = parquet.to_str().unwrap();
    render(
        &[
            "--shards",
            "2",
            "--name",
            "parquet-run",
            "--image",
            "bench:test",
            "--start-at",
            &start_in(Duration::from_secs(3)),
            "--file",
            parquet,
            "--data-pvc",
            "tokenizers",
            "--results-pvc",
            "results",
        ],
        &[
            "--base-url",
            &server.url,
            "--model",
            "mock",
            "--tokenizer",
            "/data/tokenizer.json",
            "--dataset-name",
            "file",
            "--dataset-path",
            parquet,
            "--file-prompt-column",
            "question",
            "--num-prompts",
            "6",
            "--seed",
            "5",
            "--request-id-prefix",
            "k8s-",
            "--disable-tqdm",
        ],
        &manifests,
    )
    .assert_success();
    let docs = documents(&manifests);
    let job = of_kind(&docs, "Job");
    let config_map = of_kind(&docs, "ConfigMap");
    assert!(
        config_map["binaryData"]["prompts.parquet"].is_string(),
        "{config_map}"
    );
    let files = dir.path().join("files");
    materialize(config_map, &files);
    assert_eq!(
        std::fs::read(files.join("prompts.parquet")).unwrap(),
        std::fs::read(parquet).unwrap()
    );
    let results = dir.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let mounts = BTreeMap::from([
        ("files".to_owned(), files),
        ("data".to_owned(), data("tokenizers/gpt2")),
        ("results".to_owned(), results.clone()),
    ]);
    run_pods(job, &mounts, &dir.path().join("logs"));
    // What the documented `kubectl cp` loop copies from the reader pod's /results.
    let reader = of_kind(&docs, "Pod");
    assert_eq!(
        reader["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "results"
    );
    let shard_files: Vec<PathBuf> = (0..2)
        .map(|i| results.join(format!("parquet-run-shard-{i}-of-2.json")))
        .collect();
    let merged = merge(&shard_files, &dir.path().join("result.json"));
    assert_eq!(merged["completed"], 6, "{merged}");
    assert_eq!(merged["failed"], 0);
    assert_each_request_once(&server, "k8s-", 6);
}
