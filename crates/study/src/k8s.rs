//! `bench k8s render`: the manifests of a sharded run on Kubernetes (see
//! `docs/kubernetes.md`), as typed values of `k8s-openapi`. Nothing here prints or talks to a
//! cluster.
//!
//! Why an Indexed Job: Kubernetes gives each of its `N` pods a completion index `0..N` and
//! never two running pods the same one, which is exactly what `bench serve --shard I/N`
//! needs; the index reaches the arguments through `$(JOB_COMPLETION_INDEX)`, which the
//! kubelet expands from the container's declared environment before the process starts, so
//! the image needs no shell. Every shard waits for the same `--start-at` time, so pods
//! scheduled and pulled at different moments still start their schedules together.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource,
    ObjectFieldSelector, PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec,
    PodTemplateSpec, ResourceRequirements, SeccompProfile, SecurityContext,
    TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use thiserror::Error;

use bench_core::shard::format_wall_clock;

/// Where the `--file` files are mounted (from the ConfigMap the render writes).
pub const FILES_DIR: &str = "/files";
/// Where the `--data-pvc` volume is mounted, read-only.
pub const DATA_DIR: &str = "/data";
/// Where the `--results-pvc` volume is mounted; the shards write their documents there.
pub const RESULTS_DIR: &str = "/results";
/// The variable holding the pod's completion index, declared on the container so that
/// `$(JOB_COMPLETION_INDEX)` in its arguments is expanded by Kubernetes.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// The pod annotation (and label) the Job controller sets to the completion index.
pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// The label the Job controller puts on each of its pods, with the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// What the API server accepts in one ConfigMap: its keys and values together.
pub const CONFIG_MAP_LIMIT: usize = 1024 * 1024;
/// The group that may write the results volume (the image's user is in no other, so the
/// volume is handed to this one through `fsGroup`).
pub const RESULTS_GROUP: i64 = 10001;

/// The `serve` flags the render sets itself, refused among the user's.
const RESERVED_SERVE_FLAGS: &[&str] = &["--shard", "--start-at", "--shard-output"];

/// A file put in the ConfigMap and mounted at `FILES_DIR/<its file name>`.
#[derive(Debug, Clone)]
pub struct DataFile {
    /// The path as the user gave it: a serve argument equal to it is replaced by the path
    /// the file is mounted at.
    pub given: String,
    pub contents: Vec<u8>,
}

/// Where the shards' documents go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Results {
    /// Printed on stdout as one `bench-shard-result: ` line, read back with `kubectl logs`.
    Logs,
    /// Written to this PersistentVolumeClaim, mounted at [`RESULTS_DIR`].
    Volume { claim: String },
}

/// The container's resources, as Kubernetes quantities (`2`, `500m`, `4Gi`).
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub cpu: Option<String>,
    pub memory: Option<String>,
    pub cpu_limit: Option<String>,
    pub memory_limit: Option<String>,
    /// Limits equal to the requests: the Guaranteed QoS class, under which a kubelet with
    /// the static CPU manager policy gives a whole number of CPUs to the pod alone.
    pub guaranteed: bool,
}

/// Everything `bench k8s render` was told.
#[derive(Debug, Clone)]
pub struct RenderConfig {
    /// The Job's name, and the prefix of every other object's.
    pub name: String,
    pub namespace: Option<String>,
    pub image: String,
    pub shards: usize,
    pub start_at: SystemTime,
    /// Retries of a failed pod; 0 by default, since a retried shard starts after the
    /// others and sends its whole share late.
    pub backoff_limit: u32,
    pub files: Vec<DataFile>,
    /// A PersistentVolumeClaim mounted read-only at [`DATA_DIR`].
    pub data_claim: Option<String>,
    pub results: Results,
    pub resources: Resources,
    /// Spread the pods evenly over the nodes (at most one more on any node than another).
    pub spread: bool,
    /// `bench serve`'s arguments, after the shard flags.
    pub serve_args: Vec<String>,
}

/// The objects of one sharded run, in the order they are applied.
#[derive(Debug, Clone)]
pub struct Manifests {
    /// The `--file` files, when there are any.
    pub config_map: Option<ConfigMap>,
    pub job: Job,
    /// With a results volume: a pod mounting it, for `kubectl cp` to read the documents.
    pub results_reader: Option<Pod>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RenderError {
    #[error("--shards must be 1 or more")]
    NoShards,
    #[error("{flag} {value:?}: {why}")]
    BadName {
        flag: &'static str,
        value: String,
        why: String,
    },
    #[error("--image {0:?}: give an image reference such as registry.example.com/bench:0.1.0")]
    BadImage(String),
    #[error(
        "--file {given}: its file name {name:?} cannot be a ConfigMap key (letters, digits, \
         '-', '_' and '.' only); copy it under another name"
    )]
    BadFileName { given: String, name: String },
    #[error(
        "--file {first} and --file {second} would both be mounted as {FILES_DIR}/{name}: \
         give files of different names"
    )]
    SameFileName {
        first: String,
        second: String,
        name: String,
    },
    #[error(
        "the --file files come to {total} bytes, over the {CONFIG_MAP_LIMIT} bytes (1 MiB) a \
         ConfigMap holds: put them on a volume and mount it with --data-pvc (at {DATA_DIR})"
    )]
    TooLarge { total: usize },
    #[error("{flag} {value:?} is not a Kubernetes quantity (such as 2, 500m, 512Mi, 4Gi)")]
    BadQuantity { flag: &'static str, value: String },
    #[error("--guaranteed sets the limits to the requests: it needs --cpu and --memory")]
    GuaranteedNeedsRequests,
    #[error(
        "--guaranteed sets the limits to the requests: leave out --cpu-limit and --memory-limit"
    )]
    GuaranteedWithLimits,
    #[error("{0} after -- is set by bench k8s render itself: leave it out")]
    ReservedFlag(String),
    #[error(
        "the arguments after -- are bench serve's flags: leave out `serve` (the render \
         adds it)"
    )]
    ServeWord,
}

/// The manifests of `config`'s sharded run.
pub fn render(config: &RenderConfig) -> Result<Manifests, RenderError> {
    check(config)?;
    let name = &config.name;
    let labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "bench".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), name.clone()),
    ]);
    let meta = |object_name: String| ObjectMeta {
        name: Some(object_name),
        namespace: config.namespace.clone(),
        labels: Some(labels.clone()),
        ..ObjectMeta::default()
    };

    let config_map = files_config_map(config, meta(files_config_map_name(name)))?;
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    if let Some(map) = &config_map {
        volumes.push(Volume {
            name: "files".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: map.metadata.name.clone().unwrap_or_default(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(mount("files", FILES_DIR, true));
    }
    if let Some(claim) = &config.data_claim {
        volumes.push(claim_volume("data", claim, true));
        mounts.push(mount("data", DATA_DIR, true));
    }
    if let Results::Volume { claim } = &config.results {
        volumes.push(claim_volume("results", claim, false));
        mounts.push(mount("results", RESULTS_DIR, false));
    }

    let container = Container {
        name: "bench".into(),
        image: Some(config.image.clone()),
        args: Some(container_args(config)),
        env: Some(vec![EnvVar {
            name: INDEX_ENV.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.annotations['{INDEX_ANNOTATION}']"),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }]),
        resources: resources(&config.resources)?,
        security_context: Some(restricted_container()),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        ..Container::default()
    };
    let spread = config.spread.then(|| {
        vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "kubernetes.io/hostname".into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(JOB_NAME_LABEL.to_owned(), name.clone())])),
                ..LabelSelector::default()
            }),
            ..TopologySpreadConstraint::default()
        }]
    });
    let shards = i32::try_from(config.shards).map_err(|_| RenderError::BadName {
        flag: "--shards",
        value: config.shards.to_string(),
        why: "too many".into(),
    })?;
    let job = Job {
        metadata: meta(name.clone()),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(shards),
            parallelism: Some(shards),
            backoff_limit: Some(i32::try_from(config.backoff_limit).unwrap_or(i32::MAX)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![container],
                    security_context: Some(restricted_pod(&config.results)),
                    topology_spread_constraints: spread,
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    let results_reader = match &config.results {
        Results::Logs => None,
        Results::Volume { claim } => Some(Pod {
            metadata: meta(results_reader_name(name)),
            spec: Some(PodSpec {
                restart_policy: Some("Never".into()),
                containers: vec![Container {
                    name: "results".into(),
                    image: Some(config.image.clone()),
                    // The image's sleep holds the pod open for `kubectl cp`; it does not
                    // run bench.
                    command: Some(vec!["sleep".into(), "infinity".into()]),
                    security_context: Some(restricted_container()),
                    volume_mounts: Some(vec![mount("results", RESULTS_DIR, true)]),
                    ..Container::default()
                }],
                security_context: Some(restricted_pod(&Results::Logs)),
                volumes: Some(vec![claim_volume("results", claim, true)]),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }),
    };
    Ok(Manifests {
        config_map,
        job,
        results_reader,
    })
}

/// The ConfigMap holding the `--file` files.
pub fn files_config_map_name(name: &str) -> String {
    format!("{name}-files")
}

/// The pod that mounts the results volume for `kubectl cp`.
pub fn results_reader_name(name: &str) -> String {
    format!("{name}-results")
}

/// Where shard `index` writes its document on the results volume, as seen from a pod
/// mounting it at [`RESULTS_DIR`].
pub fn results_file(name: &str, index: &str, shards: usize) -> String {
    format!("{RESULTS_DIR}/{name}-shard-{index}-of-{shards}.json")
}

impl Manifests {
    /// The manifests as one YAML stream for `kubectl apply -f`: each object a JSON document
    /// (JSON is YAML), separated by `---`. Not plain YAML: a YAML serializer writes a
    /// string such as `yes`, `on` or `2026-11-27T17:00:00Z` unquoted, as YAML 1.2 allows,
    /// and kubectl's YAML 1.1 reader then takes it for a boolean or a time and refuses an
    /// argument list holding it; JSON quotes every string.
    pub fn to_yaml(&self) -> Result<String, serde_json::Error> {
        let mut documents = Vec::new();
        if let Some(map) = &self.config_map {
            documents.push(serde_json::to_string_pretty(map)?);
        }
        documents.push(serde_json::to_string_pretty(&self.job)?);
        if let Some(pod) = &self.results_reader {
            documents.push(serde_json::to_string_pretty(pod)?);
        }
        Ok(documents.join("\n---\n") + "\n")
    }
}

/// The refusals that do not depend on building anything.
fn check(config: &RenderConfig) -> Result<(), RenderError> {
    if config.shards == 0 {
        return Err(RenderError::NoShards);
    }
    // Each pod's hostname is `<name>-<index>`, a DNS label of at most 63 characters.
    let index_width = (config.shards - 1).to_string().len() + 1;
    check_label("--name", &config.name, 63 - index_width)?;
    if let Some(namespace) = &config.namespace {
        check_label("--namespace", namespace, 63)?;
    }
    for (flag, claim) in [
        ("--data-pvc", config.data_claim.as_ref()),
        (
            "--results-pvc",
            match &config.results {
                Results::Volume { claim } => Some(claim),
                Results::Logs => None,
            },
        ),
    ] {
        if let Some(claim) = claim {
            check_subdomain(flag, claim)?;
        }
    }
    if config.image.is_empty() || config.image.chars().any(char::is_whitespace) {
        return Err(RenderError::BadImage(config.image.clone()));
    }
    if config.serve_args.first().is_some_and(|a| a == "serve") {
        return Err(RenderError::ServeWord);
    }
    for arg in &config.serve_args {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(flag, _)| flag);
        if RESERVED_SERVE_FLAGS.contains(&flag) {
            return Err(RenderError::ReservedFlag(flag.to_owned()));
        }
    }
    Ok(())
}

/// A DNS-1123 label (what names of Jobs, namespaces and pods' hostnames must be).
fn check_label(flag: &'static str, value: &str, max: usize) -> Result<(), RenderError> {
    let bad = |why: String| RenderError::BadName {
        flag,
        value: value.to_owned(),
        why,
    };
    if value.is_empty() || value.len() > max {
        return Err(bad(format!("give 1 to {max} characters")));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !value.chars().all(allowed) || value.starts_with('-') || value.ends_with('-') {
        return Err(bad(
            "lower-case letters, digits and '-' only, starting and ending with a letter or \
             digit"
                .into(),
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain (what names of claims must be): labels joined by dots.
fn check_subdomain(flag: &'static str, value: &str) -> Result<(), RenderError> {
    if value.len() > 253 {
        return Err(RenderError::BadName {
            flag,
            value: value.to_owned(),
            why: "give at most 253 characters".into(),
        });
    }
    value
        .split('.')
        .try_for_each(|label| check_label(flag, label, 63))
        .map_err(|e| match e {
            RenderError::BadName { flag, why, .. } => RenderError::BadName {
                flag,
                value: value.to_owned(),
                why,
            },
            other => other,
        })
}

/// `serve`, the shard flags, `--request-id-prefix NAME-` unless the user's arguments set
/// it, and the user's arguments: each argument equal to a `--file`
/// path (alone or as `--flag=PATH`) becomes the path the file is mounted at, and every `$`
/// is doubled, so that Kubernetes expands `$(JOB_COMPLETION_INDEX)` and nothing of the
/// user's.
fn container_args(config: &RenderConfig) -> Vec<String> {
    let n = config.shards;
    let shard_output = match &config.results {
        Results::Logs => "-".to_owned(),
        Results::Volume { .. } => results_file(&config.name, &format!("$({INDEX_ENV})"), n),
    };
    let mut args = vec![
        "serve".to_owned(),
        "--shard".to_owned(),
        format!("$({INDEX_ENV})/{n}"),
        "--start-at".to_owned(),
        format_wall_clock(config.start_at),
        "--shard-output".to_owned(),
        shard_output,
    ];
    // Request ids are part of the workload every shard must share: serve's default prefix
    // is random per process, so the run's name stands in unless the user gave one.
    let prefix_given = config
        .serve_args
        .iter()
        .any(|a| a == "--request-id-prefix" || a.starts_with("--request-id-prefix="));
    if !prefix_given {
        args.extend([
            "--request-id-prefix".to_owned(),
            format!("{}-", config.name),
        ]);
    }
    let mounted = |path: &str| {
        config
            .files
            .iter()
            .find(|f| f.given == path)
            .map(|f| format!("{FILES_DIR}/{}", file_name(&f.given)))
    };
    args.extend(config.serve_args.iter().map(|arg| {
        let arg = match (mounted(arg), arg.split_once('=')) {
            (Some(path), _) => path,
            (None, Some((flag, value))) if flag.starts_with("--") => match mounted(value) {
                Some(path) => format!("{flag}={path}"),
                None => arg.clone(),
            },
            _ => arg.clone(),
        };
        arg.replace('$', "$$")
    }));
    args
}

fn file_name(given: &str) -> String {
    Path::new(given)
        .file_name()
        .map_or_else(|| given.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// The `--file` files as a ConfigMap: UTF-8 text under `data`, anything else (a `.wasm`
/// plugin, Parquet) under `binaryData`; refused past the API server's 1 MiB.
fn files_config_map(
    config: &RenderConfig,
    metadata: ObjectMeta,
) -> Result<Option<ConfigMap>, RenderError> {
    if config.files.is_empty() {
        return Ok(None);
    }
    let mut data = BTreeMap::new();
    let mut binary = BTreeMap::new();
    let mut given_as: BTreeMap<String, &str> = BTreeMap::new();
    let mut total = 0;
    for file in &config.files {
        let key = file_name(&file.given);
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if !key.chars().all(valid) || key.len() > 253 || key == "." || key == ".." {
            return Err(RenderError::BadFileName {
                given: file.given.clone(),
                name: key,
            });
        }
        if let Some(first) = given_as.insert(key.clone(), &file.given) {
            return Err(RenderError::SameFileName {
                first: first.to_owned(),
                second: file.given.clone(),
                name: key,
            });
        }
        // As the API server counts a ConfigMap's size: keys and values.
        total += key.len() + file.contents.len();
        match String::from_utf8(file.contents.clone()) {
            Ok(text) => {
                data.insert(key, text);
            }
            Err(e) => {
                binary.insert(key, ByteString(e.into_bytes()));
            }
        }
    }
    if total > CONFIG_MAP_LIMIT {
        return Err(RenderError::TooLarge { total });
    }
    Ok(Some(ConfigMap {
        metadata,
        data: (!data.is_empty()).then_some(data),
        binary_data: (!binary.is_empty()).then_some(binary),
        ..ConfigMap::default()
    }))
}

fn claim_volume(name: &str, claim: &str, read_only: bool) -> Volume {
    Volume {
        name: name.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: read_only.then_some(true),
        }),
        ..Volume::default()
    }
}

fn mount(volume: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// What the "restricted" Pod Security Standard asks of a container, so that the run is
/// admitted in namespaces that enforce it.
fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}

/// The pod's part of the restricted standard; with a results volume, the group the
/// volume is handed to so that the image's unprivileged user can write it.
fn restricted_pod(results: &Results) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        fs_group: matches!(results, Results::Volume { .. }).then_some(RESULTS_GROUP),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

fn resources(r: &Resources) -> Result<Option<ResourceRequirements>, RenderError> {
    if r.guaranteed {
        if r.cpu.is_none() || r.memory.is_none() {
            return Err(RenderError::GuaranteedNeedsRequests);
        }
        if r.cpu_limit.is_some() || r.memory_limit.is_some() {
            return Err(RenderError::GuaranteedWithLimits);
        }
    }
    let pair = |cpu: (&'static str, &Option<String>), memory: (&'static str, &Option<String>)| {
        let mut map = BTreeMap::new();
        for (key, (flag, value)) in [("cpu", cpu), ("memory", memory)] {
            if let Some(value) = value {
                if !is_quantity(value) {
                    return Err(RenderError::BadQuantity {
                        flag,
                        value: value.clone(),
                    });
                }
                map.insert(key.to_owned(), Quantity(value.clone()));
            }
        }
        Ok((!map.is_empty()).then_some(map))
    };
    let requests = pair(("--cpu", &r.cpu), ("--memory", &r.memory))?;
    let limits = if r.guaranteed {
        requests.clone()
    } else {
        pair(
            ("--cpu-limit", &r.cpu_limit),
            ("--memory-limit", &r.memory_limit),
        )?
    };
    Ok(
        (requests.is_some() || limits.is_some()).then(|| ResourceRequirements {
            requests,
            limits,
            ..ResourceRequirements::default()
        }),
    )
}

/// Kubernetes' quantity syntax: a non-negative decimal number, then a binary suffix
/// (`Ki` .. `Ei`), a decimal one (`m`, `k`, `M` .. `E`) or an exponent (`e3`, `E-2`).
fn is_quantity(s: &str) -> bool {
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let number = number.strip_prefix('+').unwrap_or(number);
    let digits = number.replace('.', "");
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    if number.matches('.').count() > 1 {
        return false;
    }
    const SUFFIXES: &[&str] = &[
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E",
    ];
    if SUFFIXES.contains(&suffix) {
        return true;
    }
    let Some(exponent) = suffix.strip_prefix(['e', 'E']) else {
        return false;
    };
    let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    !exponent.is_empty() && exponent.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn config() -> RenderConfig {
        RenderConfig {
            name: "bench".into(),
            namespace: None,
            image: "registry.example/bench:1".into(),
            shards: 3,
            start_at: UNIX_EPOCH + Duration::from_secs(1_795_000_000),
            backoff_limit: 0,
            files: Vec::new(),
            data_claim: None,
            results: Results::Logs,
            resources: Resources::default(),
            spread: false,
            serve_args: vec!["--num-prompts".into(), "100".into()],
        }
    }

    fn pod_spec(m: &Manifests) -> &PodSpec {
        m.job.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
    }

    fn args(m: &Manifests) -> &[String] {
        pod_spec(m).containers[0].args.as_deref().unwrap()
    }

    #[test]
    fn an_indexed_job_of_n_pods_whose_index_reaches_the_arguments() {
        let m = render(&config()).unwrap();
        let spec = m.job.spec.as_ref().unwrap();
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!((spec.completions, spec.parallelism), (Some(3), Some(3)));
        assert_eq!(spec.backoff_limit, Some(0));
        let env = &pod_spec(&m).containers[0].env.as_ref().unwrap()[0];
        assert_eq!(env.name, INDEX_ENV);
        assert_eq!(
            env.value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path,
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        assert_eq!(
            args(&m),
            [
                "serve",
                "--shard",
                "$(JOB_COMPLETION_INDEX)/3",
                "--start-at",
                &format_wall_clock(config().start_at),
                "--shard-output",
                "-",
                "--request-id-prefix",
                "bench-",
                "--num-prompts",
                "100"
            ]
        );
        assert!(m.config_map.is_none() && m.results_reader.is_none());
        assert!(pod_spec(&m).volumes.is_none());
    }

    #[test]
    fn the_users_dollars_are_escaped_and_file_paths_become_mount_paths() {
        let mut c = config();
        c.files = vec![DataFile {
            given: "./data/rows.jsonl".into(),
            contents: b"{}".to_vec(),
        }];
        c.serve_args = vec![
            "--dataset-path".into(),
            "./data/rows.jsonl".into(),
            "--extra-body=./data/rows.jsonl".into(),
            "--label=$(HOME)".into(),
        ];
        let m = render(&c).unwrap();
        assert_eq!(
            &args(&m)[9..],
            [
                "--dataset-path",
                "/files/rows.jsonl",
                "--extra-body=/files/rows.jsonl",
                "--label=$$(HOME)"
            ]
        );
    }

    #[test]
    fn a_request_id_prefix_of_the_users_is_kept() {
        let mut c = config();
        c.serve_args = vec!["--request-id-prefix=run-1-".into()];
        let m = render(&c).unwrap();
        assert_eq!(&args(&m)[7..], ["--request-id-prefix=run-1-"]);
    }

    #[test]
    fn text_files_go_in_data_and_others_in_binary_data() {
        let mut c = config();
        c.files = vec![
            DataFile {
                given: "a/prompts.txt".into(),
                contents: "héllo".as_bytes().to_vec(),
            },
            DataFile {
                given: "b/plugin.wasm".into(),
                contents: vec![0, 0x61, 0x73, 0x6d, 0xff],
            },
        ];
        let m = render(&c).unwrap();
        let map = m.config_map.as_ref().unwrap();
        assert_eq!(map.metadata.name.as_deref(), Some("bench-files"));
        assert_eq!(map.data.as_ref().unwrap()["prompts.txt"], "héllo");
        assert_eq!(
            map.binary_data.as_ref().unwrap()["plugin.wasm"].0,
            [0, 0x61, 0x73, 0x6d, 0xff]
        );
        let spec = pod_spec(&m);
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(volume.config_map.as_ref().unwrap().name, "bench-files");
        let mount = &spec.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            (FILES_DIR, Some(true))
        );
    }

    #[test]
    fn files_past_a_config_maps_limit_point_to_a_volume() {
        let mut c = config();
        let key = "big.bin";
        c.files = vec![DataFile {
            given: key.into(),
            contents: vec![b'x'; CONFIG_MAP_LIMIT - key.len()],
        }];
        assert!(render(&c).is_ok(), "exactly the limit fits");
        c.files[0].contents.push(b'x');
        let e = render(&c).unwrap_err();
        assert_eq!(
            e,
            RenderError::TooLarge {
                total: CONFIG_MAP_LIMIT + 1
            }
        );
        assert!(e.to_string().contains("--data-pvc"), "{e}");
    }

    #[test]
    fn two_files_of_one_name_and_unusable_names_are_refused() {
        let mut c = config();
        let file = |given: &str| DataFile {
            given: given.into(),
            contents: Vec::new(),
        };
        c.files = vec![file("a/x.json"), file("b/x.json")];
        let e = render(&c).unwrap_err().to_string();
        assert!(e.contains("--file a/x.json and --file b/x.json"), "{e}");
        c.files = vec![file("a/my file.json")];
        assert!(matches!(render(&c), Err(RenderError::BadFileName { .. })));
    }

    #[test]
    fn volumes_for_data_and_results_and_a_pod_to_read_the_results() {
        let mut c = config();
        c.data_claim = Some("models".into());
        c.results = Results::Volume {
            claim: "bench-results".into(),
        };
        let m = render(&c).unwrap();
        let spec = pod_spec(&m);
        let mounts: Vec<_> = spec.containers[0]
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| (v.mount_path.as_str(), v.read_only))
            .collect();
        assert_eq!(mounts, [(DATA_DIR, Some(true)), (RESULTS_DIR, None)]);
        assert_eq!(
            args(&m)[6],
            "/results/bench-shard-$(JOB_COMPLETION_INDEX)-of-3.json"
        );
        assert_eq!(
            spec.security_context.as_ref().unwrap().fs_group,
            Some(RESULTS_GROUP)
        );
        let reader = m.results_reader.as_ref().unwrap();
        assert_eq!(reader.metadata.name.as_deref(), Some("bench-results"));
        let volume = &reader.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        let claim = volume.persistent_volume_claim.as_ref().unwrap();
        assert_eq!(
            (claim.claim_name.as_str(), claim.read_only),
            ("bench-results", Some(true))
        );
    }

    #[test]
    fn guaranteed_sets_limits_to_requests() {
        let mut c = config();
        c.resources = Resources {
            cpu: Some("2".into()),
            memory: Some("1Gi".into()),
            guaranteed: true,
            ..Resources::default()
        };
        let m = render(&c).unwrap();
        let r = pod_spec(&m).containers[0].resources.clone().unwrap();
        assert_eq!(r.requests, r.limits);
        assert_eq!(r.limits.unwrap()["cpu"], Quantity("2".into()));
        c.resources.memory = None;
        assert_eq!(
            render(&c).unwrap_err(),
            RenderError::GuaranteedNeedsRequests
        );
        c.resources.memory = Some("1Gi".into());
        c.resources.cpu_limit = Some("3".into());
        assert_eq!(render(&c).unwrap_err(), RenderError::GuaranteedWithLimits);
    }

    #[test]
    fn quantities_follow_kubernetes_syntax() {
        for good in [
            "2", "500m", "1.5", "4Gi", "512Mi", "1e3", "2E-2", "+1k", ".5",
        ] {
            assert!(is_quantity(good), "{good}");
        }
        for bad in ["", "two", "4GB", "1..2", "-1", "1e", "m", "4 Gi", "1gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
        let mut c = config();
        c.resources.memory_limit = Some("4GB".into());
        assert_eq!(
            render(&c).unwrap_err().to_string(),
            "--memory-limit \"4GB\" is not a Kubernetes quantity (such as 2, 500m, 512Mi, 4Gi)"
        );
    }

    #[test]
    fn names_and_flags_kubernetes_or_the_render_would_refuse() {
        let refused = |edit: &dyn Fn(&mut RenderConfig)| {
            let mut c = config();
            edit(&mut c);
            render(&c).unwrap_err().to_string()
        };
        assert!(refused(&|c| c.name = "Bench".into()).starts_with("--name \"Bench\""));
        // With 100 shards the hostname adds "-99": 60 characters are left for the name.
        let long = "a".repeat(61);
        assert!(
            refused(&|c| {
                c.name = long.clone();
                c.shards = 100
            })
            .contains("1 to 60 characters")
        );
        assert!(refused(&|c| c.namespace = Some("-ns".into())).starts_with("--namespace"));
        assert!(refused(&|c| c.data_claim = Some("a..b".into())).starts_with("--data-pvc"));
        assert_eq!(refused(&|c| c.shards = 0), "--shards must be 1 or more");
        assert!(refused(&|c| c.image = "a b".into()).starts_with("--image"));
        for flag in ["--shard", "--start-at=@1", "--shard-output"] {
            let e = refused(&|c| c.serve_args = vec![flag.into(), "x".into()]);
            assert!(e.contains("is set by bench k8s render itself"), "{e}");
        }
        assert!(refused(&|c| c.serve_args = vec!["serve".into()]).contains("leave out `serve`"));
    }

    #[test]
    fn spread_keeps_the_pods_of_the_job_on_different_nodes_where_it_can() {
        let mut c = config();
        c.spread = true;
        let m = render(&c).unwrap();
        let spread = &pod_spec(&m).topology_spread_constraints.as_ref().unwrap()[0];
        assert_eq!(spread.max_skew, 1);
        assert_eq!(spread.topology_key, "kubernetes.io/hostname");
        let selector = spread.label_selector.as_ref().unwrap();
        assert_eq!(
            selector.match_labels.as_ref().unwrap()[JOB_NAME_LABEL],
            "bench"
        );
    }

    #[test]
    fn json_documents_in_the_order_they_are_applied() {
        let mut c = config();
        c.files = vec![DataFile {
            given: "p.txt".into(),
            contents: b"hi".to_vec(),
        }];
        c.results = Results::Volume { claim: "r".into() };
        let yaml = render(&c).unwrap().to_yaml().unwrap();
        let kinds: Vec<String> = yaml
            .split("\n---\n")
            .map(|doc| {
                let doc: serde_json::Value = serde_json::from_str(doc).unwrap();
                doc["kind"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Job", "Pod"]);
    }
}
