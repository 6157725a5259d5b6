//! Which local files hold the rows of a Hugging Face dataset's subset and split.
//!
//! `--dataset-path` is a data file (JSON, JSONL, CSV or Parquet) or a directory: a
//! snapshot as `huggingface_hub` leaves it in its cache
//! (`datasets--ORG--NAME/snapshots/<rev>/`), a `git clone` of the dataset's repository,
//! or any folder of data files. In a directory the subset (`--hf-subset`) is a folder of
//! that name, and the split (`--hf-split`) is found by the `datasets` library's naming
//! rules: a folder or a file name that is the split's name or one of its synonyms
//! (`data/train-00000-of-00001.parquet`, `test.jsonl`, `validation/0000.parquet`,
//! `dev.json`), followed by `-`, `.`, `_`, a space or a digit.

use bench_sdk::PluginError;

/// Extensions of the files read as data, lower-case.
const DATA_EXTENSIONS: [&str; 6] = ["parquet", "json", "jsonl", "ndjson", "csv", "tsv"];

/// The names `datasets` recognises for each split.
fn split_keywords(split: &str) -> Vec<String> {
    match split {
        "train" => vec!["train".into(), "training".into()],
        "validation" => ["validation", "valid", "dev", "val"]
            .map(String::from)
            .to_vec(),
        "test" => ["test", "testing", "eval", "evaluation"]
            .map(String::from)
            .to_vec(),
        other => vec![other.to_string()],
    }
}

/// The split names a file's relative path points at (`train`, `validation`, `test`, or
/// none), by `datasets`' rules.
fn splits_named(relative: &str) -> Vec<&'static str> {
    ["train", "validation", "test"]
        .into_iter()
        .filter(|split| names_split(relative, &split_keywords(split)))
        .collect()
}

fn is_separator(c: char) -> bool {
    matches!(c, '-' | '.' | '_' | ' ') || c.is_ascii_digit()
}

/// Whether `word` occurs in `name` on its own: at the start or after a separator, and
/// at the end or before a separator.
fn has_word(name: &str, word: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(word) {
        let start = from + at;
        let end = start + word.len();
        let before = lower[..start].chars().next_back();
        let after = lower[end..].chars().next();
        if before.is_none_or(is_separator) && after.is_none_or(is_separator) {
            return true;
        }
        from = start + 1;
    }
    false
}

fn names_split(relative: &str, keywords: &[String]) -> bool {
    relative
        .split('/')
        .any(|part| keywords.iter().any(|k| has_word(part, k)))
}

/// Every data file under `dir`, as paths relative to it, sorted (hidden files and
/// folders, such as `.git` and `.cache`, are left out).
fn list(dir: &str) -> Result<Vec<String>, PluginError> {
    let mut out = Vec::new();
    let mut pending = vec![String::new()];
    while let Some(relative) = pending.pop() {
        let full = if relative.is_empty() {
            dir.to_string()
        } else {
            format!("{dir}/{relative}")
        };
        let entries = std::fs::read_dir(&full)
            .map_err(|e| PluginError::InvalidConfig(format!("hf: cannot list {full}: {e}")))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| PluginError::InvalidConfig(format!("hf: cannot list {full}: {e}")))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let child = if relative.is_empty() {
                name.clone()
            } else {
                format!("{relative}/{name}")
            };
            // Snapshot files are symlinks into the cache's blobs: follow them.
            let full_child = format!("{dir}/{child}");
            let meta = std::fs::metadata(&full_child).map_err(|e| {
                let link = std::fs::symlink_metadata(&full_child)
                    .is_ok_and(|m| m.file_type().is_symlink());
                PluginError::InvalidConfig(if link {
                    format!(
                        "hf: cannot follow the link {full_child} ({e}): bench reads only inside \
                         --dataset-path, and a Hugging Face cache snapshot links into the \
                         repository's blobs/ folder. Give the repository folder instead: \
                         --dataset-path .../hub/datasets--ORG--NAME"
                    )
                } else {
                    format!("hf: cannot read {full_child}: {e}")
                })
            })?;
            if meta.is_dir() {
                pending.push(child);
            } else if is_data_file(&name) {
                out.push(child);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn is_data_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower
        .rsplit_once('.')
        .is_some_and(|(_, ext)| DATA_EXTENSIONS.contains(&ext))
}

/// What [`data_files`] chose, and why, for the log.
#[derive(Debug, PartialEq)]
pub struct Chosen {
    /// Full paths, in `datasets`' (sorted) order.
    pub files: Vec<String>,
    /// Set when no file names any split, so all of them were taken for the split asked.
    pub unsplit: bool,
}

/// The data files of `subset` and `split` under `path` (a file is itself). `subset` is
/// `(name, given)`: a subset the user named must exist; a dataset kind's default subset
/// (GSM8K's `main`) is used only when there is a folder of that name.
pub fn data_files(
    path: &str,
    subset: Option<(&str, bool)>,
    split: &str,
) -> Result<Chosen, PluginError> {
    let is_dir = std::fs::metadata(path)
        .map_err(|e| PluginError::InvalidConfig(format!("hf: cannot read {path}: {e}")))?
        .is_dir();
    if !is_dir {
        return Ok(Chosen {
            files: vec![path.to_string()],
            unsplit: false,
        });
    }
    let root = path.trim_end_matches('/');
    let files = list(root)?;
    if files.is_empty() {
        return Err(PluginError::InvalidConfig(format!(
            "hf: {root} holds no data file (.parquet, .json, .jsonl, .csv); point \
             --dataset-path at the dataset's snapshot folder or at a data file"
        )));
    }
    if let Some((subset, given)) = subset {
        let prefix = format!("{subset}/");
        let inside: Vec<String> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&prefix).map(str::to_string))
            .collect();
        if !inside.is_empty() {
            return pick_split(&format!("{root}/{subset}"), inside, split);
        }
        if given {
            let mut folders: Vec<&str> = files
                .iter()
                .filter_map(|f| f.split_once('/').map(|(d, _)| d))
                .collect();
            folders.dedup();
            return Err(PluginError::InvalidConfig(format!(
                "hf: --hf-subset {subset}: {root} has no folder {subset}/ with data files \
                 (folders with data: {})",
                if folders.is_empty() {
                    "none".to_string()
                } else {
                    folders.join(", ")
                }
            )));
        }
    }
    pick_split(root, files, split)
}

fn pick_split(root: &str, files: Vec<String>, split: &str) -> Result<Chosen, PluginError> {
    let keywords = split_keywords(split);
    let named: Vec<&String> = files.iter().filter(|f| names_split(f, &keywords)).collect();
    if !named.is_empty() {
        return Ok(Chosen {
            files: named.iter().map(|f| format!("{root}/{f}")).collect(),
            unsplit: false,
        });
    }
    let mut found: Vec<&str> = files.iter().flat_map(|f| splits_named(f)).collect();
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Ok(Chosen {
            files: files.iter().map(|f| format!("{root}/{f}")).collect(),
            unsplit: true,
        });
    }
    Err(PluginError::InvalidConfig(format!(
        "hf: --hf-split {split}: {root} has no file for that split (splits found: {}); \
         choose one with --hf-split",
        found.join(", ")
    )))
}

/// A cache repository folder (`datasets--ORG--NAME`, which holds `snapshots/`) stands for
/// the snapshot its `refs/main` names, else its last snapshot by name; any other path is
/// itself.
pub fn snapshot_of(path: &str) -> String {
    let root = path.trim_end_matches('/');
    let snapshots = format!("{root}/snapshots");
    let is_repo = root
        .rsplit('/')
        .next()
        .is_some_and(|name| name.starts_with("datasets--"));
    if !is_repo || !std::fs::metadata(&snapshots).is_ok_and(|m| m.is_dir()) {
        return path.to_string();
    }
    if let Ok(rev) = std::fs::read_to_string(format!("{root}/refs/main")) {
        let dir = format!("{snapshots}/{}", rev.trim());
        if std::fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
            return dir;
        }
    }
    let mut revisions: Vec<String> = std::fs::read_dir(&snapshots)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    revisions.sort();
    revisions
        .pop()
        .map_or_else(|| path.to_string(), |rev| format!("{snapshots}/{rev}"))
}

/// The hub id (`ORG/NAME`) a path names: a `datasets--ORG--NAME` folder of the Hugging
/// Face cache, or a path ending in `ORG/NAME` (a clone) when that id is one of `known`.
pub fn hub_id_from_path(path: &str, known: &[&str]) -> Option<String> {
    for part in path.split('/') {
        if let Some(rest) = part.strip_prefix("datasets--")
            && let Some((org, name)) = rest.split_once("--")
        {
            return Some(format!("{org}/{name}"));
        }
    }
    let trimmed = path.trim_end_matches('/');
    known
        .iter()
        .find(|id| trimmed == **id || trimmed.ends_with(&format!("/{id}")))
        .map(|id| id.to_string())
}

/// The snapshot (or clone) folder a path is in: the folder itself, or a data file's
/// folder up to the `snapshots/<rev>` level when there is one (MMVU's videos and BFCL's
/// category files are named relative to it).
pub fn repo_root(path: &str) -> String {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    if let Some(at) = parts.iter().position(|p| *p == "snapshots")
        && at + 1 < parts.len()
        && at > 0
        && parts[at - 1].starts_with("datasets--")
    {
        return parts[..at + 2].join("/");
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => path.trim_end_matches('/').to_string(),
        _ => path
            .rsplit_once('/')
            .map_or_else(|| ".".to_string(), |(dir, _)| dir.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &std::path::Path, relative: &str) {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "{}\n").unwrap();
    }

    fn names(chosen: &Chosen, root: &std::path::Path) -> Vec<String> {
        let prefix = format!("{}/", root.display());
        chosen
            .files
            .iter()
            .map(|f| f.strip_prefix(&prefix).unwrap().to_string())
            .collect()
    }

    #[test]
    fn splits_are_found_by_datasets_rules() {
        let dir = tempdir();
        for f in [
            "data/train-00000-of-00002.parquet",
            "data/train-00001-of-00002.parquet",
            "data/test-00000-of-00001.parquet",
            "data/validation-00000-of-00001.parquet",
            "README.md",
            ".cache/train.json",
        ] {
            touch(&dir, f);
        }
        let root = dir.to_str().unwrap();
        let got = data_files(root, None, "train").unwrap();
        assert_eq!(
            names(&got, &dir),
            [
                "data/train-00000-of-00002.parquet",
                "data/train-00001-of-00002.parquet"
            ]
        );
        assert!(!got.unsplit);
        assert_eq!(
            names(&data_files(root, None, "test").unwrap(), &dir),
            ["data/test-00000-of-00001.parquet"]
        );
        match data_files(root, None, "dev2") {
            Err(PluginError::InvalidConfig(m)) => {
                assert!(m.contains("splits found: test, train, validation"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn subsets_are_folders_and_unsplit_files_serve_any_split() {
        let dir = tempdir();
        for f in [
            "main/test-0.parquet",
            "main/train-0.parquet",
            "socratic/test-0.parquet",
        ] {
            touch(&dir, f);
        }
        let root = dir.to_str().unwrap();
        let got = data_files(root, Some(("main", false)), "test").unwrap();
        assert_eq!(names(&got, &dir), ["main/test-0.parquet"]);
        let got = data_files(root, Some(("socratic", true)), "test").unwrap();
        assert_eq!(names(&got, &dir), ["socratic/test-0.parquet"]);
        match data_files(root, Some(("nope", true)), "test") {
            Err(PluginError::InvalidConfig(m)) => assert!(m.contains("main, socratic"), "{m}"),
            other => panic!("{other:?}"),
        }

        let dir = tempdir();
        touch(&dir, "HumanEval.jsonl");
        let root = dir.to_str().unwrap();
        // A default subset that is not there is no error; nothing names a split.
        let got = data_files(root, Some(("main", false)), "test").unwrap();
        assert_eq!(names(&got, &dir), ["HumanEval.jsonl"]);
        assert!(got.unsplit);
        // Synonyms and words inside names.
        assert!(names_split("dev.json", &split_keywords("validation")));
        assert!(!names_split("interval.json", &split_keywords("validation")));
        assert!(names_split("x_test2.jsonl", &split_keywords("test")));
    }

    #[test]
    fn hub_ids_come_from_cache_folders_or_clone_paths() {
        let known = ["likaixin/InstructCoder"];
        assert_eq!(
            hub_id_from_path(
                "/h/hub/datasets--openai--gsm8k/snapshots/abc/main/test-0.parquet",
                &known
            )
            .as_deref(),
            Some("openai/gsm8k")
        );
        assert_eq!(
            hub_id_from_path("/src/likaixin/InstructCoder/", &known).as_deref(),
            Some("likaixin/InstructCoder")
        );
        assert_eq!(hub_id_from_path("/src/other/x.jsonl", &known), None);
        assert_eq!(
            repo_root("/h/hub/datasets--a--b/snapshots/rev/main/test.parquet"),
            "/h/hub/datasets--a--b/snapshots/rev"
        );
    }

    #[test]
    fn a_cache_repo_folder_means_its_main_snapshot() {
        let dir = tempdir();
        let repo = dir.join("datasets--openai--gsm8k");
        touch(&repo, "snapshots/aaa/main/test-0.parquet");
        touch(&repo, "snapshots/bbb/main/test-0.parquet");
        let repo_s = repo.to_str().unwrap();
        assert_eq!(snapshot_of(repo_s), format!("{repo_s}/snapshots/bbb"));
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "aaa\n").unwrap();
        assert_eq!(snapshot_of(repo_s), format!("{repo_s}/snapshots/aaa"));
        let other = dir.to_str().unwrap();
        assert_eq!(snapshot_of(other), other);
    }

    fn tempdir() -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hf-files-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
