//! Snapshots (`insta`, in `snapshots/`) of `--help` for every command, as a user's terminal
//! shows it: the real binary, a terminal `COLUMNS` wide (clap wraps the text to it), no
//! `BENCH_*` variable set (clap would show its value). A change to a flag, its help text or
//! its wrapping shows up as a diff to review; `INSTA_UPDATE=always cargo test -p bench
//! --test e2e help::` accepts it.

use crate::common::*;

/// `bench ARGS --help`: it succeeds, prints to stdout alone, and fits the terminal.
fn help(args: &[&str]) -> String {
    let out = Bench::new().args(args).arg("--help").run().assert_success();
    assert_eq!(out.stderr, "", "{out}");
    let width: usize = COLUMNS.parse().unwrap();
    for line in out.stdout.lines() {
        assert!(
            line.chars().count() <= width,
            "a line wider than {width} columns:\n{line}"
        );
    }
    out.stdout
}

/// One test, and one snapshot named after it, per command.
macro_rules! help_snapshots {
    ($($name:ident: [$($arg:literal),*];)*) => {
        $(
            #[test]
            fn $name() {
                insta::assert_snapshot!(help(&[$($arg),*]));
            }
        )*
    };
}

help_snapshots! {
    bench: [];
    serve: ["serve"];
    throughput: ["throughput"];
    latency: ["latency"];
    mock_server: ["mock-server"];
    selfcheck: ["selfcheck"];
    plugin: ["plugin"];
    plugin_list: ["plugin", "list"];
    plugin_inspect: ["plugin", "inspect"];
    plugin_export: ["plugin", "export"];
    plugin_cache: ["plugin", "cache"];
    plugin_cache_dir: ["plugin", "cache", "dir"];
    plugin_cache_clear: ["plugin", "cache", "clear"];
    plugin_new: ["plugin", "new"];
    dataset: ["dataset"];
    dataset_sample: ["dataset", "sample"];
    startup: ["startup"];
    sweep_startup: ["sweep", "startup"];
    compare: ["compare"];
    merge: ["merge"];
    k8s: ["k8s"];
    k8s_render: ["k8s", "render"];
    report: ["report"];
    sweep_plot: ["sweep", "plot"];
    sweep_plot_pareto: ["sweep", "plot_pareto"];
    sweep: ["sweep"];
    sweep_serve: ["sweep", "serve"];
    sweep_serve_sla: ["sweep", "serve_sla"];
    sweep_serve_workload: ["sweep", "serve_workload"];
}

/// The snapshots above cover every command `bench --help` lists (and every subcommand of
/// those with subcommands of their own).
#[test]
fn every_command_has_a_snapshot() {
    let commands = |args: &[&str]| -> Vec<String> {
        help(args)
            .lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            // Command lines start with two spaces; wrapped descriptions with more.
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help")
            .map(str::to_owned)
            .collect()
    };
    let snapshots = repo().join("tests/e2e/snapshots");
    let has_snapshot = |name: &str| {
        snapshots
            .join(format!("e2e__help__{}.snap", name.replace('-', "_")))
            .is_file()
    };
    let top = commands(&[]);
    assert!(top.contains(&"serve".to_owned()), "{top:?}");
    for command in &top {
        assert!(
            has_snapshot(command),
            "no --help snapshot for `bench {command}`"
        );
        for sub in commands(&[command.as_str()]) {
            assert!(
                has_snapshot(&format!("{command}_{sub}")),
                "no --help snapshot for `bench {command} {sub}`"
            );
        }
    }
}
