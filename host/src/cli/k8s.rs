//! `bench k8s render`: the manifests of a sharded run as a Kubernetes Indexed Job
//! (`bench_study::k8s` builds them), and the `kubectl` steps that run it and merge its
//! shards. docs/kubernetes.md is the guide.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use bench_study::k8s::{self, DataFile, RenderConfig, Resources, Results};

#[derive(Args, Debug)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub command: K8sCommand,
}

#[derive(Subcommand, Debug)]
pub enum K8sCommand {
    /// Write the manifests of a run sharded over N pods (an Indexed Job, with a ConfigMap
    /// of --file files), ready for `kubectl apply -f`; docs/kubernetes.md has the whole
    /// sequence.
    Render(RenderArgs),
}

#[derive(Args, Debug)]
#[command(after_help = "\
Example:
  bench k8s render --shards 4 --image registry.example.com/bench:0.1.0 \\
    --start-at \"$(date -u -d '+3 min' +%FT%TZ)\" --file ./prompts.jsonl --data-pvc bench-data \\
    -o bench.yaml -- --base-url http://vllm.llm.svc:8000 --model my-model \\
    --tokenizer /data/tokenizer.json --dataset-name custom --dataset-path ./prompts.jsonl \\
    --num-prompts 20000 --request-rate 400

Each pod runs `bench serve --shard $(JOB_COMPLETION_INDEX)/N --start-at TIME --shard-output
OUT` and the arguments after --. An argument equal to a --file path becomes the path where
that file is mounted (/files/NAME).")]
pub struct RenderArgs {
    /// How many shards (pods) share the run: shard I sends the requests whose index in the
    /// whole workload is I modulo N.
    #[arg(long, value_name = "N")]
    pub shards: usize,

    /// The container image holding bench (built from the repository's Dockerfile) as the
    /// cluster pulls it.
    #[arg(long, value_name = "IMAGE")]
    pub image: String,

    /// When every shard starts its schedule: RFC 3339 in UTC (2026-11-27T17:00:00Z) or
    /// @UNIX_SECONDS. Leave time for scheduling and image pulls, e.g. "$(date -u -d '+3 min'
    /// +%FT%TZ)"; a shard ready later starts at once and reports its lag.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    pub start_at: SystemTime,

    /// The Job's name, and the prefix of the other objects' names (NAME-files,
    /// NAME-results).
    #[arg(long, value_name = "NAME", default_value = "bench")]
    pub name: String,

    /// The namespace of every object (by default kubectl's current one).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// A file to mount at /files/<its file name>, from a ConfigMap written with the Job: a
    /// dataset, a .wasm plugin, a tokenizer.json. Repeat for more; 1 MiB in all (more goes
    /// on a volume: --data-pvc).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,

    /// An existing PersistentVolumeClaim to mount read-only at /data (large datasets,
    /// tokenizers, plugins).
    #[arg(long, value_name = "CLAIM")]
    pub data_pvc: Option<String>,

    /// An existing PersistentVolumeClaim (ReadWriteMany when the pods run on several nodes)
    /// mounted at /results, where each shard writes NAME-shard-I-of-N.json; also writes a
    /// pod NAME-results that mounts it for `kubectl cp`. Without it, each shard prints its
    /// results to its log, read with `kubectl logs`.
    #[arg(long, value_name = "CLAIM")]
    pub results_pvc: Option<String>,

    /// CPU request of each pod (a Kubernetes quantity: 2, 500m).
    #[arg(long, value_name = "QUANTITY")]
    pub cpu: Option<String>,

    /// Memory request of each pod (a Kubernetes quantity: 512Mi, 2Gi).
    #[arg(long, value_name = "QUANTITY")]
    pub memory: Option<String>,

    /// CPU limit of each pod.
    #[arg(long, value_name = "QUANTITY")]
    pub cpu_limit: Option<String>,

    /// Memory limit of each pod.
    #[arg(long, value_name = "QUANTITY")]
    pub memory_limit: Option<String>,

    /// Limits equal to --cpu and --memory (the Guaranteed QoS class): with a whole number of
    /// CPUs and the kubelet's static CPU manager policy, each shard gets cores of its own.
    #[arg(long)]
    pub guaranteed: bool,

    /// Spread the pods evenly over the nodes (at most one more pod on any node than on
    /// another; pods stay pending rather than break it).
    #[arg(long)]
    pub spread: bool,

    /// Retries of a failed pod. A retried shard starts after the shared start and sends its
    /// whole share late, so the default fails the Job instead.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub backoff_limit: u32,

    /// Write the manifests to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// bench serve's flags for every shard: the server (--base-url), the model, the
    /// workload and its seed, the rate. Paths are as the pods see them (/files, /data).
    #[arg(last = true, value_name = "ARGS")]
    pub serve_args: Vec<String>,
}

fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    bench_core::shard::parse_wall_clock(s)
}

pub fn run(args: K8sArgs) -> Result<ExitCode> {
    match args.command {
        K8sCommand::Render(args) => render(args),
    }
}

fn render(args: RenderArgs) -> Result<ExitCode> {
    let files = args
        .files
        .iter()
        .map(|path| {
            let contents =
                std::fs::read(path).with_context(|| format!("--file {}", path.display()))?;
            Ok(DataFile {
                given: path.to_string_lossy().into_owned(),
                contents,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let config = RenderConfig {
        name: args.name,
        namespace: args.namespace,
        image: args.image,
        shards: args.shards,
        start_at: args.start_at,
        backoff_limit: args.backoff_limit,
        files,
        data_claim: args.data_pvc,
        results: match args.results_pvc {
            Some(claim) => Results::Volume { claim },
            None => Results::Logs,
        },
        resources: Resources {
            cpu: args.cpu,
            memory: args.memory,
            cpu_limit: args.cpu_limit,
            memory_limit: args.memory_limit,
            guaranteed: args.guaranteed,
        },
        spread: args.spread,
        serve_args: args.serve_args,
    };
    let yaml = k8s::render(&config)?
        .to_yaml()
        .context("writing the manifests as YAML")?;
    match &args.output {
        Some(path) => std::fs::write(path, yaml)
            .with_context(|| format!("--output {}: writing the manifests", path.display()))?,
        None => print!("{yaml}"),
    }
    if let Ok(ago) = SystemTime::now().duration_since(config.start_at) {
        eprintln!(
            "warning: --start-at is {:.0} s in the past: each shard will start as soon as it \
             is ready, not together",
            ago.as_secs_f64()
        );
    }
    eprint!("{}", next_steps(&config, args.output.as_deref()));
    Ok(ExitCode::SUCCESS)
}

/// The `kubectl` sequence that runs the rendered manifests and merges the shards, for
/// this render's names (docs/kubernetes.md explains each step).
fn next_steps(config: &RenderConfig, output: Option<&std::path::Path>) -> String {
    let name = &config.name;
    let last = config.shards - 1;
    let ns = config
        .namespace
        .as_ref()
        .map_or_else(String::new, |ns| format!(" -n {ns}"));
    let manifests = output.map_or_else(|| "MANIFESTS.yaml".to_owned(), |p| p.display().to_string());
    let collect = match &config.results {
        Results::Logs => format!(
            "  for i in $(seq 0 {last}); do kubectl logs{ns} --tail=-1 \
             -l {job}={name},{index}=$i > {name}-shard-$i.log; done\n  \
             bench merge {name}-shard-*.log -o result.json\n",
            job = k8s::JOB_NAME_LABEL,
            index = k8s::INDEX_ANNOTATION,
        ),
        Results::Volume { .. } => format!(
            "  kubectl wait{ns} --for=condition=Ready pod/{reader}\n  \
             for i in $(seq 0 {last}); do kubectl cp{ns} {reader}:{file} \
             {name}-shard-$i.json; done\n  \
             bench merge {name}-shard-*.json -o result.json\n",
            reader = k8s::results_reader_name(name),
            file = k8s::results_file(name, "$i", config.shards),
        ),
    };
    format!(
        "next (docs/kubernetes.md):\n  kubectl apply{ns} -f {manifests}\n  \
         kubectl wait{ns} --for=condition=complete --timeout=-1s job/{name}\n{collect}"
    )
}
