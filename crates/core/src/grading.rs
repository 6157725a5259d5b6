//! Accuracy under load: after the run, the dataset's own grader (its plugin's `grade`)
//! judges each completed answer against the reference its sample carried.
//!
//! Grading waits for the end of the run on purpose: a plugin call per response would sit
//! on the receive path, and a verdict changes nothing while the load runs. It reads only
//! what the records kept (the generated text, without reasoning), so the verdicts are the
//! same whatever the load, and a slow server is told apart from a wrong one.

use anyhow::{Context, Result};

use crate::record::{Graded, RequestRecord};
use crate::runtime::DatasetPlugin;
use crate::workload::{Workload, WorkloadConfig};

/// A graded workload's references and an instance of its dataset plugin to judge with.
pub struct Grader {
    dataset: DatasetPlugin,
    /// One per request of the run, by the records' index.
    references: Vec<Option<String>>,
}

/// The most grader failures a warning names one by one.
const NAMED_FAILURES: usize = 3;

impl Grader {
    /// The grader of `workload` (made with `config`), or `None` when no sample carried a
    /// reference. Takes the workload's references, which then stay behind: call it once the
    /// requests of the run are what they will be (a shard's own ones), and before the
    /// requests go to the target. The instance is a fresh one: the sampling one may still
    /// hold a multi-turn source.
    pub fn of(workload: &mut Workload, config: &WorkloadConfig) -> Result<Option<Grader>> {
        if workload.references.is_empty() {
            return Ok(None);
        }
        let dataset = workload
            .runtime
            .load_dataset(
                &config.dataset,
                workload.host(),
                config.dataset_path.as_deref(),
            )
            .with_context(|| {
                format!(
                    "loading the dataset {} again to grade its answers",
                    config.dataset.display()
                )
            })?;
        Ok(Some(Grader {
            dataset,
            references: std::mem::take(&mut workload.references),
        }))
    }

    /// Grades every completed record whose request has a reference, setting its
    /// [`RequestRecord::grade`]. A grader that fails on an answer leaves that record
    /// ungraded (it is not counted in the accuracy) and says so in the returned warnings:
    /// one bad answer does not cost the run's other measurements.
    ///
    /// A timed run's (`--duration`) record `k` sent the workload's request `k mod repeats`.
    pub fn grade(mut self, records: &mut [RequestRecord], repeats: Option<usize>) -> Vec<String> {
        let mut failures = Vec::new();
        let mut failed = 0usize;
        for record in records.iter_mut().filter(|r| r.succeeded()) {
            let slot = repeats.map_or(record.index, |n| record.index % n);
            let Some(Some(reference)) = self.references.get(slot) else {
                continue;
            };
            let verdict = self
                .dataset
                .grade(reference, &record.generated_text)
                .map_err(|e| e.to_string())
                .and_then(|grade| match (0.0..=1.0).contains(&grade.score) {
                    true => Ok(grade),
                    false => Err(format!(
                        "dataset plugin '{}': grade: a score of {} is outside 0 to 1",
                        self.dataset.name(),
                        grade.score
                    )),
                });
            match verdict {
                Ok(grade) => {
                    record.grade = Some(Graded {
                        reference: reference.clone(),
                        correct: grade.correct,
                        score: grade.score,
                        extracted: grade.extracted,
                    });
                }
                Err(e) => {
                    failed += 1;
                    if failures.len() < NAMED_FAILURES {
                        failures.push(format!("request {}: {e}", record.index));
                    }
                }
            }
        }
        if failed == 0 {
            return Vec::new();
        }
        vec![format!(
            "the dataset's grader failed on {failed} answer(s), left out of the accuracy: {}",
            failures.join("; ")
        )]
    }
}
