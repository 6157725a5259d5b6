//! `bench sweep plot` (vLLM's `vllm bench sweep plot`): curves of any result key against
//! any parameter from a sweep's results, one figure per `--fig-by` group, a grid of
//! panels by `--row-by` and `--col-by`, one curve per `--curve-by` group.
//!
//! The results are read as vLLM's `plot` reads them: every `summary.json` under the
//! output directory (a JSON list of runs, each a result with its sweep parameters and
//! `run_number` merged in, which `bench sweep serve` and vLLM's sweep both write), so
//! the command plots vLLM's sweep directories too. Runs at the same x on one curve are
//! drawn at their mean (seaborn's `lineplot` estimator).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::{Chart, Scale, Series, SeriesStyle, XyChart, curves, grid};
use crate::results::number;
use bench_core::pyjson::float_repr;

/// One run of a sweep: a result with the sweep's parameters merged in, and the
/// `summary.json` it came from (named in errors).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub source: PathBuf,
    pub data: serde_json::Map<String, Value>,
}

impl Run {
    /// The value of `key`, or an error naming the key, the flag it came from and the file.
    pub fn get(&self, key: &str, flag: &str) -> Result<&Value> {
        self.data.get(key).with_context(|| {
            format!(
                "{}: a run has no key {key:?} ({flag}); its keys: {}",
                self.source.display(),
                self.data.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// The value of `key` as a number (see [`number`]), or an error naming it and the file.
    pub fn number(&self, key: &str, flag: &str) -> Result<f64> {
        let v = self.get(key, flag)?;
        number(v).with_context(|| {
            format!(
                "{}: {key} ({flag}) is {v}, not a number",
                self.source.display()
            )
        })
    }
}

/// Every run in every `summary.json` under `output_dir`, files in path order.
pub fn load_runs(output_dir: &Path) -> Result<Vec<Run>> {
    if !output_dir.is_dir() {
        bail!(
            "no parameter sweep results under {}: not a directory",
            output_dir.display()
        );
    }
    let mut files = Vec::new();
    find_summaries(output_dir, &mut files)?;
    files.sort();
    let mut runs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let list: Vec<Value> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a JSON list of runs", path.display()))?;
        for (i, run) in list.into_iter().enumerate() {
            let Value::Object(data) = run else {
                bail!("{}: run {} is not a JSON object", path.display(), i + 1);
            };
            runs.push(Run {
                source: path.clone(),
                data,
            });
        }
    }
    if runs.is_empty() {
        bail!(
            "did not find any parameter sweep results (summary.json) under {}",
            output_dir.display()
        );
    }
    Ok(runs)
}

fn find_summaries(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            find_summaries(&path, out)?;
        } else if entry.file_name() == "summary.json" {
            out.push(path);
        }
    }
    Ok(())
}

/// A `--filter-by` comparison (vLLM's operators, longest first: `==`, `!=`, `<=`, `>=`,
/// `<`, `>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
}

const OPS: [(&str, Op); 6] = [
    ("==", Op::Eq),
    ("!=", Op::Ne),
    ("<=", Op::Le),
    (">=", Op::Ge),
    ("<", Op::Lt),
    (">", Op::Gt),
];

/// One `--filter-by` statement: `VAR OP VALUE`; the value may be quoted.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub var: String,
    pub op: Op,
    pub target: String,
}

impl FromStr for Filter {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        for (text, op) in OPS {
            if let Some((var, target)) = s.split_once(text) {
                let target = target.trim_matches('\'').trim_matches('"').to_string();
                return Ok(Filter {
                    var: var.trim().to_string(),
                    op,
                    target,
                });
            }
        }
        bail!("invalid --filter-by statement {s:?}: the operators are ==, !=, <=, >=, <, >")
    }
}

impl Filter {
    /// Whether `run` passes. `==` and `!=` compare as numbers when both sides are, else
    /// as text; the orderings need numbers.
    fn keeps(&self, run: &Run) -> Result<bool> {
        let flag = "--filter-by";
        let value = run.get(&self.var, flag)?;
        let target_num = self.target.parse::<f64>().ok();
        Ok(match self.op {
            Op::Eq | Op::Ne => {
                let equal = match (number(value), target_num) {
                    (Some(v), Some(t)) => v == t,
                    _ => value.as_str() == Some(self.target.as_str()),
                };
                equal == (self.op == Op::Eq)
            }
            _ => {
                let t = target_num.with_context(|| {
                    format!(
                        "--filter-by {}: {:?} is not a number",
                        self.var, self.target
                    )
                })?;
                let v = run.number(&self.var, flag)?;
                match self.op {
                    Op::Le => v <= t,
                    Op::Ge => v >= t,
                    Op::Lt => v < t,
                    _ => v > t,
                }
            }
        })
    }
}

/// One `--bin-by` statement: `VAR%SIZE`, the variable rounded down to a multiple of SIZE.
#[derive(Debug, Clone, PartialEq)]
pub struct Binner {
    pub var: String,
    pub size: f64,
}

impl FromStr for Binner {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let (var, size) = s
            .split_once('%')
            .with_context(|| format!("invalid --bin-by statement {s:?}: expected VAR%SIZE"))?;
        let size: f64 = size
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| *x > 0.0 && x.is_finite())
            .with_context(|| format!("--bin-by {s:?}: the bin size must be a positive number"))?;
        Ok(Binner {
            var: var.trim().to_string(),
            size,
        })
    }
}

/// Parses a comma-separated list of statements (`--filter-by`, `--bin-by`); empty: none.
pub fn parse_list<T: FromStr<Err = anyhow::Error>>(s: &str) -> Result<Vec<T>> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::parse)
        .collect()
}

/// The file format of a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigFormat {
    Png,
    Svg,
}

impl FigFormat {
    pub fn extension(self) -> &'static str {
        match self {
            FigFormat::Png => "png",
            FigFormat::Svg => "svg",
        }
    }
}

/// What `bench sweep plot` draws (its flags, vLLM's names).
#[derive(Debug, Clone, PartialEq)]
pub struct PlotSpec {
    /// Where the figures go.
    pub fig_dir: PathBuf,
    pub fig_by: Vec<String>,
    pub row_by: Vec<String>,
    pub col_by: Vec<String>,
    pub curve_by: Vec<String>,
    pub var_x: String,
    pub var_y: String,
    pub filter_by: Vec<Filter>,
    pub bin_by: Vec<Binner>,
    pub scale_x: Scale,
    pub scale_y: Scale,
    /// The figures' file name prefix (vLLM's `--fig-name`, default `FIGURE`).
    pub fig_name: String,
    pub formats: Vec<FigFormat>,
}

/// A group's values, in the order of its keys: `[(key, value as Python's str())]`.
pub type Group = Vec<(String, String)>;

/// One figure to draw: its group, its grid and its files.
#[derive(Debug, Clone, PartialEq)]
pub struct FigurePlan {
    pub group: Group,
    pub rows: usize,
    pub cols: usize,
    /// One file per format.
    pub paths: Vec<PathBuf>,
    /// The runs it draws, filtered and binned.
    runs: Vec<Run>,
}

/// A value as Python's `str()` writes it, as vLLM names groups and files: `10`, `10.0`,
/// `inf`, `True`, text as it is.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => float_repr(n.as_f64().unwrap_or(f64::NAN)),
        Value::Number(n) => n.to_string(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

fn group_of(run: &Run, keys: &[String], flag: &str) -> Result<Group> {
    keys.iter()
        .map(|k| Ok((k.clone(), py_str(run.get(k, flag)?))))
        .collect()
}

/// Runs grouped by `keys`, groups in ascending order of their values (numbers as
/// numbers, as seaborn orders a numeric hue: 8 before 16), runs in their order.
fn group_by<'a>(
    runs: impl IntoIterator<Item = &'a Run>,
    keys: &[String],
    flag: &str,
) -> Result<Vec<(Group, Vec<&'a Run>)>> {
    let mut groups: Vec<(Group, Vec<&Run>)> = Vec::new();
    for run in runs {
        let g = group_of(run, keys, flag)?;
        match groups.iter_mut().find(|(k, _)| *k == g) {
            Some((_, members)) => members.push(run),
            None => groups.push((g, vec![run])),
        }
    }
    groups.sort_by(|(a, _), (b, _)| {
        a.iter()
            .zip(b)
            .map(
                |((_, x), (_, y))| match (x.parse::<f64>(), y.parse::<f64>()) {
                    (Ok(x), Ok(y)) => x.total_cmp(&y),
                    _ => x.cmp(y),
                },
            )
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(groups)
}

/// vLLM's `sanitize_filename`: no `/`, no `..`.
fn sanitize(name: &str) -> String {
    name.replace('/', "_").replace("..", "__")
}

/// The figures `spec` asks for: the runs grouped by `--fig-by`, each group filtered and
/// binned, with its grid and its files (`{fig_name}[-{key}={value}...].{png,svg}` under
/// the figure directory). Every key the spec names must be in every run it reaches; a
/// missing one is an error naming the key, its flag and the file.
pub fn plan(runs: &[Run], spec: &PlotSpec) -> Result<Vec<FigurePlan>> {
    let mut plans = Vec::new();
    for (group, members) in group_by(runs, &spec.fig_by, "--fig-by")? {
        let mut kept = Vec::new();
        for run in members {
            for (key, flag) in [(&spec.var_x, "--var-x"), (&spec.var_y, "--var-y")] {
                run.number(key, flag)?;
            }
            let mut keep = true;
            for f in &spec.filter_by {
                keep &= f.keeps(run)?;
            }
            if !keep {
                continue;
            }
            let mut run = run.clone();
            for b in &spec.bin_by {
                let v = run.number(&b.var, "--bin-by")?;
                let binned = (v / b.size).floor() * b.size;
                run.data.insert(b.var.clone(), serde_json::json!(binned));
            }
            kept.push(run);
        }
        let row_groups = group_by(&kept, &spec.row_by, "--row-by")?;
        group_by(&kept, &spec.curve_by, "--curve-by")?;
        let mut cols = 1;
        for (_, row) in &row_groups {
            cols = cols.max(group_by(row.iter().copied(), &spec.col_by, "--col-by")?.len());
        }
        let mut stem = spec.fig_name.clone();
        for (k, v) in &group {
            stem.push_str(&format!("-{k}={v}"));
        }
        let stem = sanitize(&stem);
        plans.push(FigurePlan {
            rows: row_groups.len().max(1),
            cols,
            paths: spec
                .formats
                .iter()
                .map(|f| spec.fig_dir.join(format!("{stem}.{}", f.extension())))
                .collect(),
            group,
            runs: kept,
        });
    }
    Ok(plans)
}

/// `k=v` pairs joined, as vLLM labels rows, columns and curves.
fn label(group: &Group) -> String {
    group
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The curves of a set of runs: one series per `--curve-by` group, the mean y at each x,
/// in ascending x.
fn series_of(runs: &[&Run], spec: &PlotSpec) -> Result<Vec<Series>> {
    let mut out = Vec::new();
    for (group, members) in group_by(runs.iter().copied(), &spec.curve_by, "--curve-by")? {
        let mut at: BTreeMap<OrdF64, (f64, usize)> = BTreeMap::new();
        for run in members {
            let x = run.number(&spec.var_x, "--var-x")?;
            let y = run.number(&spec.var_y, "--var-y")?;
            let e = at.entry(OrdF64(x)).or_insert((0.0, 0));
            e.0 += y;
            e.1 += 1;
        }
        out.push(Series {
            name: match group.is_empty() {
                true => spec.var_y.clone(),
                false => label(&group),
            },
            points: at
                .into_iter()
                .map(|(x, (sum, n))| (x.0, sum / n as f64))
                .collect(),
            style: SeriesStyle::LineMarkers,
            color: None,
        });
    }
    Ok(out)
}

/// An f64 ordered by `total_cmp`, as a map key.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The figure of a plan: a grid of panels (rows by `--row-by`, columns by `--col-by`),
/// each with its curves; a row with fewer columns than the widest leaves its last cells
/// empty.
pub fn chart(plan: &FigurePlan, spec: &PlotSpec) -> Result<Chart> {
    let mut cells = Vec::with_capacity(plan.rows * plan.cols);
    for (row_group, row) in group_by(&plan.runs, &spec.row_by, "--row-by")? {
        let col_groups = group_by(row, &spec.col_by, "--col-by")?;
        let filled = col_groups.len();
        for (col_group, members) in col_groups {
            let title = [label(&row_group), label(&col_group)]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" / ");
            cells.push(curves(XyChart {
                title,
                x_label: spec.var_x.clone(),
                y_label: spec.var_y.clone(),
                series: series_of(&members, spec)?,
                x_scale: spec.scale_x,
                y_scale: spec.scale_y,
            }));
        }
        for _ in filled..plan.cols {
            cells.push(curves(XyChart {
                title: String::new(),
                x_label: spec.var_x.clone(),
                y_label: spec.var_y.clone(),
                series: Vec::new(),
                x_scale: spec.scale_x,
                y_scale: spec.scale_y,
            }));
        }
    }
    let title = (!plan.group.is_empty()).then(|| label(&plan.group));
    Ok(grid(title.as_deref(), plan.cols, cells))
}

impl fmt::Display for FigFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.extension())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value) -> Run {
        Run {
            source: PathBuf::from("exp/SERVE-a/summary.json"),
            data: v.as_object().unwrap().clone(),
        }
    }

    fn spec() -> PlotSpec {
        PlotSpec {
            fig_dir: PathBuf::from("out"),
            fig_by: vec![],
            row_by: vec![],
            col_by: vec![],
            curve_by: vec![],
            var_x: "request_throughput".into(),
            var_y: "p99_e2el_ms".into(),
            filter_by: vec![],
            bin_by: vec![],
            scale_x: Scale::Linear,
            scale_y: Scale::Linear,
            fig_name: "FIGURE".into(),
            formats: vec![FigFormat::Png, FigFormat::Svg],
        }
    }

    #[test]
    fn filters_parse_with_the_longest_operator_first() {
        let f: Vec<Filter> =
            parse_list("max_concurrency<1000, max_num_batched_tokens<=4096,backend=='vllm'")
                .unwrap();
        assert_eq!(f[0].op, Op::Lt);
        assert_eq!(
            (f[1].var.as_str(), f[1].op, f[1].target.as_str()),
            ("max_num_batched_tokens", Op::Le, "4096")
        );
        assert_eq!((f[2].op, f[2].target.as_str()), (Op::Eq, "vllm"));
        assert!("a~1".parse::<Filter>().is_err());
        let keep = |s: &str, v: Value| s.parse::<Filter>().unwrap().keeps(&run(v)).unwrap();
        assert!(keep("c<=4", json!({"c": 4})));
        assert!(!keep("c<4", json!({"c": 4})));
        assert!(keep("c==4", json!({"c": 4.0})));
        assert!(keep("b!=x", json!({"b": "y"})));
        assert!(keep("r>100", json!({"r": "inf"})));
    }

    #[test]
    fn binning_rounds_down_to_a_multiple() {
        let b: Vec<Binner> = parse_list("request_throughput%2.5").unwrap();
        let mut s = spec();
        s.bin_by = b;
        let runs = [run(json!({"request_throughput": 7.4, "p99_e2el_ms": 1}))];
        let plans = plan(&runs, &s).unwrap();
        assert_eq!(plans[0].runs[0].data["request_throughput"], json!(5.0));
        assert!("x%0".parse::<Binner>().is_err());
    }

    #[test]
    fn figures_are_one_per_fig_by_group_with_vllm_names() {
        let mut s = spec();
        s.fig_by = vec!["model".into()];
        s.row_by = vec!["max_num_seqs".into()];
        s.col_by = vec!["tp".into()];
        let runs: Vec<Run> = [("a/b", 8, 1), ("a/b", 8, 2), ("a/b", 16, 1), ("c", 8, 1)]
            .into_iter()
            .map(|(m, seqs, tp)| {
                run(json!({"model": m, "max_num_seqs": seqs, "tp": tp,
                    "request_throughput": 1.0, "p99_e2el_ms": 2.0}))
            })
            .collect();
        let plans = plan(&runs, &s).unwrap();
        assert_eq!(plans.len(), 2);
        assert_eq!((plans[0].rows, plans[0].cols), (2, 2));
        assert_eq!(
            plans[0].paths,
            [
                PathBuf::from("out/FIGURE-model=a_b.png"),
                PathBuf::from("out/FIGURE-model=a_b.svg")
            ]
        );
        assert_eq!((plans[1].rows, plans[1].cols), (1, 1));
    }

    #[test]
    fn curves_average_the_runs_at_each_x() {
        let mut s = spec();
        s.curve_by = vec!["max_num_seqs".into()];
        let runs: Vec<Run> = [
            (8, 1.0, 10.0),
            (8, 1.0, 20.0),
            (8, 2.0, 30.0),
            (16, 1.0, 5.0),
        ]
        .into_iter()
        .map(|(seqs, x, y)| {
            run(json!({"max_num_seqs": seqs, "request_throughput": x, "p99_e2el_ms": y}))
        })
        .collect();
        let refs: Vec<&Run> = runs.iter().collect();
        let series = series_of(&refs, &s).unwrap();
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].name, "max_num_seqs=8");
        assert_eq!(series[0].points, vec![(1.0, 15.0), (2.0, 30.0)]);
        assert_eq!(series[1].points, vec![(1.0, 5.0)]);
    }

    #[test]
    fn a_missing_key_names_the_key_its_flag_and_the_file() {
        let runs = [run(json!({"request_throughput": 1.0}))];
        let e = plan(&runs, &spec()).unwrap_err().to_string();
        assert!(
            e.contains("exp/SERVE-a/summary.json")
                && e.contains("\"p99_e2el_ms\"")
                && e.contains("--var-y"),
            "{e}"
        );
    }

    #[test]
    fn python_str_of_values() {
        assert_eq!(py_str(&json!(10)), "10");
        assert_eq!(py_str(&json!(10.0)), "10.0");
        assert_eq!(py_str(&json!("inf")), "inf");
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
    }
}
