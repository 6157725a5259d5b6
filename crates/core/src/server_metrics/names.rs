//! Metric and family names read back from a shard's records: [`super::report::ServerReport`]
//! names them with `&'static str` (every name bench writes comes from its tables), so a
//! name read back is interned, each distinct one leaked once (a merge reads a handful).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Deserializer};

/// A name read back: an alias, because serde's derive takes a field written
/// `&'static str` as borrowed from the input (which a shard file outlives not).
pub type Name = &'static str;

fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    match names.get(name.as_str()) {
        Some(known) => known,
        None => {
            let leaked: &'static str = Box::leak(name.into_boxed_str());
            names.insert(leaked);
            leaked
        }
    }
}

pub fn one<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    String::deserialize(d).map(intern)
}

pub fn many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
    Ok(Vec::<String>::deserialize(d)?
        .into_iter()
        .map(intern)
        .collect())
}

pub fn pairs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(&'static str, f64)>, D::Error> {
    Ok(Vec::<(String, f64)>::deserialize(d)?
        .into_iter()
        .map(|(name, x)| (intern(name), x))
        .collect())
}
