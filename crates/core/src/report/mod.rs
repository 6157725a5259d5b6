//! Reports of `bench serve`: the console block, the result JSON and the files saved with
//! `--save-result`, all in vLLM's layout and key names so its users and tools read ours;
//! `offline` holds the console lines of `bench throughput` and `bench latency`.

pub mod console;
mod doc;
pub mod json;
mod lines;
pub mod offline;
mod run_info;
pub mod save;
mod sections;
mod server_metrics;

pub use console::console;
pub use json::{PyTorchRecords, ResultDoc, pytorch_records, result_doc};
pub use run_info::{DATE_FORMAT, EndpointsInfo, RunInfo, strategy_name};
pub use save::{SaveOptions, result_path, save};

#[cfg(test)]
mod console_snapshots;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod token_tests;
