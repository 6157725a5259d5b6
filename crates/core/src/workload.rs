//! The workload: sampled from a dataset plugin (the one place that samples, for every
//! subcommand), then turned into requests ready to send ([`crate::prepare`]): every body
//! is built by the backend plugin before the clock starts, so no plugin code runs on the
//! send path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, bail};

use crate::observer::{Event, Observer};
use crate::runtime::{
    DatasetDescription, DatasetPlugin, HostContext, PathUse, PluginRef, RequestSpec, Runtime,
    RuntimeConfig,
};
use crate::tokenizer::Tokenizer;

/// What to sample, resolved from the command line.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// The dataset plugin.
    pub dataset: PluginRef,
    /// The dataset file or directory, the one path the plugin may read.
    pub dataset_path: Option<PathBuf>,
    pub num_prompts: u32,
    /// Seeds the plugin's sampling (and, for `serve`, the arrival times).
    pub seed: u64,
    /// The dataset plugin's options (`KEY=VALUE`), later ones replacing earlier ones of
    /// the same key.
    pub options: Vec<(String, String)>,
    /// Ids `<prefix><index>` for requests the plugin left without one; `None` leaves them.
    pub request_id_prefix: Option<String>,
    /// Where the tokenizer may be found besides a path: the Hugging Face cache roots
    /// ([`crate::tokenizer::hub_cache_roots_from_env`]).
    pub hub_cache: Vec<PathBuf>,
    /// Further chat-template variables for every client-side render
    /// (`--chat-template-kwargs`).
    pub chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// The LoRA adapters requests are spread over (`--lora-modules`); none: the dataset's.
    pub lora: Option<LoraModules>,
    /// The plugin sandbox.
    pub runtime: RuntimeConfig,
    /// Report the preparation's progress to the observer ([`Event::Preparing`] and
    /// [`Event::Prepared`]).
    pub progress: bool,
}

/// vLLM's `--lora-modules` and `--lora-assignment`: each request is sent to one of these
/// adapters (the request's model is the adapter's name), whatever the dataset chose.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraModules {
    /// At least one.
    pub names: Vec<String>,
    pub assignment: LoraAssignment,
}

/// How requests are spread over the adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoraAssignment {
    /// A seeded uniform choice per request (vLLM's default; vLLM draws from Python's global
    /// `random` after the dataset's own draws, so the sequence is not vLLM's: the same
    /// `--seed` gives the same assignment here).
    Random,
    /// Request `i` gets adapter `i % n`.
    RoundRobin,
}

impl LoraModules {
    /// Sets every request's adapter; `seed` drives [`LoraAssignment::Random`].
    pub fn assign(&self, specs: &mut [RequestSpec], seed: u64) {
        use rand::{Rng, SeedableRng};
        let n = self.names.len();
        if n == 0 {
            return;
        }
        // Its own stream, so that the assignment does not change the arrival times.
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x6c6f_7261_5f61_7373);
        for (i, spec) in specs.iter_mut().enumerate() {
            let pick = match self.assignment {
                LoraAssignment::RoundRobin => i % n,
                LoraAssignment::Random => rng.random_range(0..n),
            };
            spec.lora_name = Some(self.names[pick].clone());
        }
    }
}

/// Applies the dataset's rule for `--dataset-path` (its description's `path`), with
/// vLLM's message for a synthetic dataset given a file. `plugin` is the dataset as the
/// user named it (a built-in name, or the path of a `.wasm` file), for the hint.
pub fn check_dataset_path(
    description: &DatasetDescription,
    plugin: &str,
    path: Option<&Path>,
) -> Result<()> {
    let name = &description.info.name;
    match (description.path, path) {
        (PathUse::Refused, Some(path)) => bail!(
            "Cannot use the '{name}' dataset with --dataset-path. Please specify the \
             appropriate --dataset-name (e.g., 'sharegpt', 'custom') for your dataset file: {}",
            path.display()
        ),
        (PathUse::Required, None) => bail!(
            "the '{name}' dataset reads a file: give it with --dataset-path (`bench plugin \
             inspect {plugin}` describes what it reads)"
        ),
        _ => Ok(()),
    }
}

/// A sampled workload, with what sampling loaded: the plugin runtime and the tokenizer,
/// which the backend plugin and the metrics need too.
pub struct Workload {
    pub runtime: Runtime,
    /// `None` when the run loads no tokenizer (`--skip-tokenizer-init`).
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// The seed plugins were given.
    pub seed: u64,
    /// What the dataset plugin said of itself (its name, and the rules the run applies
    /// for it).
    pub description: DatasetDescription,
    pub specs: Vec<RequestSpec>,
    /// What a right answer to each request is, one per spec, where the dataset grades its
    /// answers (accuracy under load, see [`crate::grading`]); empty where no sample
    /// carried a reference.
    pub references: Vec<Option<String>>,
    /// A multi-turn dataset, its conversations still open: it makes their next turns
    /// during the run.
    pub conversations: Option<Conversations>,
}

/// A multi-turn dataset plugin whose conversations go on during the run.
pub struct Conversations {
    pub dataset: DatasetPlugin,
    /// The prefix of the ids of turns the plugin leaves without one.
    pub request_id_prefix: Option<String>,
    /// Each conversation's LoRA adapter (`--lora-modules`), given to its first turn: its
    /// later turns go to the same one.
    pub lora_by_session: HashMap<String, String>,
}

impl Workload {
    /// A workload of the same runtime, tokenizer and dataset description with other
    /// requests (single-turn): `bench latency` runs the same batch once per iteration,
    /// each through a target of its own.
    pub fn with_specs(&self, specs: Vec<RequestSpec>) -> Workload {
        Workload {
            runtime: self.runtime.clone(),
            tokenizer: self.tokenizer.clone(),
            seed: self.seed,
            description: self.description.clone(),
            specs,
            references: Vec::new(),
            conversations: None,
        }
    }

    /// What the host lends a plugin of this workload: its tokenizer and seed.
    pub fn host(&self) -> HostContext {
        HostContext {
            tokenizer: self.tokenizer.clone(),
            seed: self.seed,
        }
    }
}

/// The tokenizer could not be loaded. A distinct type so that callers can say where the
/// id came from (the CLI names the flag); shown alone it reads `loading tokenizer "id"`.
#[derive(Debug)]
pub struct TokenizerError {
    pub id: String,
    pub source: anyhow::Error,
}

impl std::fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "loading tokenizer {:?}", self.id)
    }
}

impl std::error::Error for TokenizerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// Loads the tokenizer `tokenizer` and the dataset plugin, and samples
/// `config.num_prompts` requests: the one place that samples a workload, for every
/// subcommand. The tokenizer is loaded first, so a missing one fails before any plugin is
/// compiled; a [`TokenizerError`] says it was the tokenizer.
pub fn load(
    config: &WorkloadConfig,
    tokenizer: &str,
    observer: &mut dyn Observer,
) -> Result<Workload> {
    load_with(config, Some(tokenizer), observer)
}

/// [`load`], or with no tokenizer at all (`None`, vLLM's `--skip-tokenizer-init`): then
/// a dataset plugin that asks for one fails, and the error says which flag took it away.
pub fn load_with(
    config: &WorkloadConfig,
    tokenizer: Option<&str>,
    observer: &mut dyn Observer,
) -> Result<Workload> {
    let tokenizer = match tokenizer {
        Some(id) => Some(
            Tokenizer::load_from(id, &config.hub_cache).map_err(|source| TokenizerError {
                id: id.to_owned(),
                source,
            })?,
        ),
        None => None,
    };
    load_with_tokenizer(config, tokenizer, observer)
}

/// [`load_with`] with the tokenizer already loaded (the native engine's, which may come
/// from a GGUF file rather than a `tokenizer.json`); `--chat-template-kwargs` is applied
/// to it here.
pub fn load_with_tokenizer(
    config: &WorkloadConfig,
    tokenizer: Option<Tokenizer>,
    observer: &mut dyn Observer,
) -> Result<Workload> {
    let tokenizer = tokenizer.map(|mut loaded| {
        if let Some(kwargs) = &config.chat_template_kwargs {
            loaded.set_template_kwargs(kwargs.clone());
        }
        Arc::new(loaded)
    });
    let skipped = tokenizer.is_none();
    let runtime = Runtime::new(config.runtime.clone())?;
    let host = HostContext {
        tokenizer: tokenizer.clone(),
        seed: config.seed,
    };
    let mut dataset =
        runtime.load_dataset(&config.dataset, host, config.dataset_path.as_deref())?;
    let description = dataset.description()?;
    check_dataset_path(
        &description,
        &config.dataset.display(),
        config.dataset_path.as_deref(),
    )?;
    let started = std::time::Instant::now();
    let total = u64::from(config.num_prompts);
    let specs = dataset.sample_with_progress(
        config.num_prompts,
        config.options.clone(),
        &mut |made, elapsed| {
            if config.progress {
                observer.event(Event::Preparing {
                    made,
                    total,
                    elapsed,
                });
            }
        },
    );
    let samples = match specs {
        Err(e) if skipped => {
            return Err(anyhow::Error::from(e).context(format!(
                "sampling the '{}' dataset with no tokenizer loaded (--skip-tokenizer-init; \
                 vLLM samples only its custom datasets without one)",
                description.info.name
            )));
        }
        samples => samples?,
    };
    // References only where some sample carries one: a dataset that grades nothing
    // costs nothing.
    let graded = samples.iter().any(|s| s.reference.is_some());
    let (mut specs, references): (Vec<RequestSpec>, Vec<Option<String>>) = if graded {
        samples
            .into_iter()
            .map(|s| (s.request, s.reference))
            .unzip()
    } else {
        (samples.into_iter().map(|s| s.request).collect(), Vec::new())
    };
    if config.progress {
        observer.event(Event::Prepared {
            requests: specs.len(),
            took: started.elapsed(),
        });
    }
    if let Some(prefix) = &config.request_id_prefix {
        assign_request_ids(&mut specs, prefix);
    }
    if let Some(lora) = &config.lora {
        lora.assign(&mut specs, config.seed);
    }
    let lora_by_session = specs
        .iter()
        .filter_map(|s| Some((s.session.as_ref()?.id.clone(), s.lora_name.clone()?)))
        .collect();
    Ok(Workload {
        runtime,
        tokenizer,
        seed: config.seed,
        // A dataset that can be multi-turn may be run single-turn (an option of its own):
        // then no first turn has a session, and the run is an ordinary one.
        conversations: (description.multi_turn && specs.iter().any(|s| s.session.is_some())).then(
            || Conversations {
                dataset,
                request_id_prefix: config.request_id_prefix.clone(),
                lora_by_session,
            },
        ),
        description,
        specs,
        references,
    })
}

/// Gives every request without an id vLLM's `<prefix><index>`.
fn assign_request_ids(specs: &mut [RequestSpec], prefix: &str) {
    for (i, spec) in specs.iter_mut().enumerate() {
        if spec.request_id.is_none() {
            spec.request_id = Some(format!("{prefix}{i}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(n: usize) -> Vec<RequestSpec> {
        (0..n)
            .map(|i| RequestSpec {
                prompt: crate::runtime::Prompt::Text(format!("p{i}")),
                prompt_len: 1,
                expected_output_len: 1,
                multimodal: Vec::new(),
                request_id: None,
                lora_name: Some("from-the-dataset".into()),
                extra_body: None,
                send_at: None,
                session: None,
                output_constraint: None,
            })
            .collect()
    }

    fn names(specs: &[RequestSpec]) -> Vec<&str> {
        specs
            .iter()
            .map(|s| s.lora_name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn lora_modules_are_assigned_round_robin_or_by_a_seeded_choice() {
        let lora = |assignment| LoraModules {
            names: vec!["a".into(), "b".into(), "c".into()],
            assignment,
        };
        let mut rr = specs(7);
        lora(LoraAssignment::RoundRobin).assign(&mut rr, 0);
        assert_eq!(names(&rr), ["a", "b", "c", "a", "b", "c", "a"]);

        let random = |seed| {
            let mut s = specs(300);
            lora(LoraAssignment::Random).assign(&mut s, seed);
            s
        };
        let (first, again, other) = (random(1), random(1), random(2));
        assert_eq!(names(&first), names(&again));
        assert_ne!(names(&first), names(&other));
        // Every adapter is used, about a third of the time each.
        for name in ["a", "b", "c"] {
            let n = names(&first).iter().filter(|&&x| x == name).count();
            assert!((70..=130).contains(&n), "{name}: {n} of 300");
        }
    }
}
