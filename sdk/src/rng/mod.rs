//! numpy's and Python's random generators, bit for bit.
//!
//! vLLM's dataset code draws with `np.random.default_rng(seed)` (PCG64 seeded through
//! SeedSequence), with the legacy global `np.random.seed` / `np.random.randint`
//! (MT19937) and with Python's `random` module (MT19937 seeded through
//! `init_by_array`). A plugin that wants vLLM's very request set for a given `--seed`
//! must reproduce those streams exactly, including the algorithms that turn raw bits
//! into bounded integers, so the SDK carries faithful ports rather than "equivalent"
//! generators. Each type names the Python call it mirrors; the unit tests hold values
//! printed by numpy 2.4 (2.3.5 for the legacy continuous draws) and CPython 3.11.
//!
//! - [`numpy::Generator`]: `np.random.default_rng(seed)` (`integers`, `random`).
//! - [`numpy::RandomState`]: `np.random.seed(seed)` then `np.random.randint`,
//!   `random_sample`, `standard_exponential`, `standard_normal`, `standard_gamma` and
//!   `gamma` (the host draws vLLM's arrival gaps with it).
//! - [`python::Random`]: `random.seed(seed)` then `random()`, `getrandbits`,
//!   `randrange`, `randint`, `shuffle`, `choice`, `choices`.

mod mt19937;
pub mod numpy;
pub mod python;

pub use numpy::{Generator, RandomState, SeedSequence};
pub use python::Random;
