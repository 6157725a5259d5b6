//! The dataset side: implement [`Dataset`] and call [`export_dataset!`](crate::export_dataset).

use std::cell::RefCell;

use crate::dataset_bindings::exports::bench::plugin::dataset::{GuestRequestSource, RequestSource};
use crate::{
    DatasetConfig, DatasetDescription, PluginError, RequestSpec, Sample, TurnResult, Verdict,
};

/// A workload: opened once per run, then drained in batches by the host before the
/// clock starts.
pub trait Dataset: Sized + 'static {
    /// Name, version, description and options (for `bench plugin inspect` and the help of
    /// `bench serve`), and the host's rules for this dataset
    /// ([`DatasetDescription::new`] and its builder methods).
    fn describe() -> DatasetDescription;
    /// Validates the options (unknown keys are an error) and prepares the source.
    fn open(config: DatasetConfig) -> Result<Self, PluginError>;
    /// How many requests the source will produce, when known.
    fn size_hint(&self) -> Option<u32> {
        None
    }
    /// Up to `max` more requests; an empty vector means the source is exhausted. A
    /// multi-turn dataset returns the first turns of its conversations here.
    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError>;
    /// What the host drains: up to `max` more samples, each a request and what a right
    /// answer to it is. The default takes [`Dataset::next_batch`]'s requests, ungraded; a
    /// dataset that knows its answers returns them here with their references (and
    /// implements [`Dataset::grade`]).
    fn next_samples(&mut self, max: u32) -> Result<Vec<Sample>, PluginError> {
        Ok(self
            .next_batch(max)?
            .into_iter()
            .map(Sample::ungraded)
            .collect())
    }
    /// Judges `output` (a completed response's generated text) against the `reference` its
    /// sample carried: called by the host after the run, on any instance and in any order,
    /// so it depends on its arguments alone. [`crate::grading`] has the usual graders.
    fn grade(reference: &str, output: &str) -> Result<Verdict, PluginError> {
        let _ = (reference, output);
        Err(PluginError::Unsupported(
            "this dataset does not grade answers (its samples carry no reference)".into(),
        ))
    }
    /// A multi-turn dataset's next turn of the conversation `turn` belongs to, built from
    /// the server's real answer (`turn.generated_text`); `None` ends the conversation.
    /// Only called for datasets described as multi-turn.
    fn next_turn(&mut self, turn: TurnResult) -> Result<Option<RequestSpec>, PluginError> {
        let _ = turn;
        Err(PluginError::Unsupported(
            "this dataset is not multi-turn (next-turn was called)".into(),
        ))
    }
}

/// The positions of the whole request set a source makes: all of them, or those of the
/// shard `DatasetConfig::shard` asks a [`shardable`](crate::DatasetDescription::shardable)
/// source for. A sharded source still walks every position in order, drawing each one's
/// random numbers so that its own requests are byte for byte the unsharded ones, and skips
/// only the costly work (encoding) of the positions it does not keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Positions {
    index: u32,
    count: u32,
}

impl Positions {
    /// Every position: no shard.
    pub const ALL: Positions = Positions { index: 0, count: 1 };

    /// The positions `config` asks for (an invalid shard, which the host never sends, is
    /// an error).
    pub fn of(config: &DatasetConfig) -> Result<Positions, PluginError> {
        match config.shard {
            None => Ok(Positions::ALL),
            Some(crate::Shard { index, count }) => Positions::shard(index, count),
        }
    }

    /// Shard `index` of `count`.
    pub fn shard(index: u32, count: u32) -> Result<Positions, PluginError> {
        if count >= 1 && index < count {
            Ok(Positions { index, count })
        } else {
            Err(PluginError::InvalidConfig(format!(
                "shard {index} of {count} does not exist"
            )))
        }
    }

    /// Whether this source makes the request at `position` (from 0) of the whole set.
    pub fn keeps(&self, position: usize) -> bool {
        position % self.count as usize == self.index as usize
    }

    /// The first position from `position` on that this source makes.
    pub fn next_from(&self, position: usize) -> usize {
        let (index, count) = (self.index as usize, self.count as usize);
        position + (index + count - position % count) % count
    }

    /// How many sources share the set (1: no shard).
    pub fn count(&self) -> usize {
        self.count as usize
    }

    /// Whether this source reports what concerns the whole set (warnings, filtered-out
    /// counts): every shard walks all of it, and only the first says so.
    pub fn reports(&self) -> bool {
        self.index == 0
    }
}

impl Sample {
    /// A request without a reference: nothing to grade.
    pub fn ungraded(request: RequestSpec) -> Sample {
        Sample {
            request,
            reference: None,
        }
    }

    /// A request and what a right answer to it is, handed back to [`Dataset::grade`].
    pub fn graded(request: RequestSpec, reference: impl Into<String>) -> Sample {
        Sample {
            request,
            reference: Some(reference.into()),
        }
    }
}

/// Adapts a [`Dataset`] to the generated resource trait (resources take `&self`).
#[doc(hidden)]
pub struct Source<T>(RefCell<T>);

impl<T: Dataset> GuestRequestSource for Source<T> {
    fn open(config: DatasetConfig) -> Result<RequestSource, PluginError> {
        Ok(RequestSource::new(Source(RefCell::new(T::open(config)?))))
    }

    fn size_hint(&self) -> Option<u32> {
        self.0.borrow().size_hint()
    }

    fn next_batch(&self, max: u32) -> Result<Vec<Sample>, PluginError> {
        self.0.borrow_mut().next_samples(max)
    }

    fn next_turn(&self, turn: TurnResult) -> Result<Option<RequestSpec>, PluginError> {
        self.0.borrow_mut().next_turn(turn)
    }
}

/// Exports a type implementing [`Dataset`] as the plugin's `dataset` interface.
#[macro_export]
macro_rules! export_dataset {
    ($t:ty) => {
        #[doc(hidden)]
        struct __BenchDatasetExport;

        impl $crate::dataset_bindings::exports::bench::plugin::dataset::Guest for __BenchDatasetExport {
            type RequestSource = $crate::dataset::Source<$t>;

            fn describe() -> $crate::DatasetDescription {
                <$t as $crate::Dataset>::describe()
            }

            fn grade(
                reference: String,
                output: String,
            ) -> Result<$crate::Verdict, $crate::PluginError> {
                <$t as $crate::Dataset>::grade(&reference, &output)
            }
        }

        // Component exports exist only on wasm; natively (unit tests of a plugin crate)
        // the names are not valid linker symbols.
        #[cfg(target_arch = "wasm32")]
        $crate::dataset_bindings::__export_dataset_world!(__BenchDatasetExport with_types_in $crate::dataset_bindings);
    };
}
