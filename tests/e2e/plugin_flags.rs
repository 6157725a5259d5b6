//! Flags of third-party plugins and the general flags, as an author declares them: the
//! `third-party-lengths` fixture takes `--input-len` through its `input-len` option's
//! shared flag (vLLM's way, with `--lengths-input-len` its own flag) and `--output-len`
//! because its `output-len` option names `output-len` as its flag (an author's natural
//! guess). The mock answers exactly `max_tokens` tokens, so a result's output lengths are
//! what reached the server. Also: each warning once, only for flags the user typed, and
//! colour on standard error only where it is a terminal and `NO_COLOR` is not set.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use crate::common::*;

fn plugin() -> std::path::PathBuf {
    match fixtures::fixture("third-party-lengths") {
        bench::runtime::PluginRef::File(path) => path,
        other => unreachable!("fixtures are files, not {other:?}"),
    }
}

/// Two requests of the fixture against the mock with `extra` flags: each request's
/// (input, output) length as the result saved them.
fn lengths(extra: &[&str]) -> (Vec<(u64, u64)>, Run) {
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .backend("openai")
        .arg("--dataset-name")
        .arg(plugin())
        .args(extra)
        .prompts(2)
        .save_detailed()
        .run()
        .assert_success();
    let r = run.json();
    let column = |key: &str| -> Vec<u64> {
        r[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} in {r:#}"))
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let pairs = column("input_lens")
        .into_iter()
        .zip(column("output_lens"))
        .collect();
    (pairs, run)
}

#[test]
fn the_general_lengths_reach_a_third_party_dataset() {
    let (got, run) = lengths(&["--output-len", "7", "--input-len", "5"]);
    assert_eq!(got, [(5, 7), (5, 7)], "{run}");
    assert!(!run.stderr.contains("WARNING"), "{run}");
    // The option's own flag, and the general flag winning over it, as in vLLM.
    let (got, run) = lengths(&["--lengths-input-len", "3"]);
    assert_eq!(got, [(3, 4), (3, 4)], "{run}");
    let (got, run) = lengths(&["--lengths-input-len", "3", "--input-len", "6"]);
    assert_eq!(got, [(6, 4), (6, 4)], "{run}");
}

#[test]
fn a_flag_the_dataset_ignores_is_warned_about_once() {
    let (got, run) = lengths(&["--random-input-len", "9", "--output-len", "2"]);
    assert_eq!(got, [(4, 2), (4, 2)], "{run}");
    let warning = "WARNING: --random-input-len is a flag of dataset plugin 'random'; ignored";
    assert_eq!(run.stderr.matches(warning).count(), 1, "{run}");
    assert_eq!(run.stderr.matches("WARNING").count(), 1, "{run}");
}

#[test]
fn a_general_length_no_option_takes_is_warned_about_only_when_typed() {
    let m = mock(Default::default());
    let latency = |extra: &[&str]| {
        Bench::new()
            .arg("latency")
            .with_server(&m.url)
            .args(["--backend", "openai", "--dataset-name", "sharegpt"])
            .arg("--dataset-path")
            .arg(sharegpt())
            .args([
                "--num-iters",
                "1",
                "--num-iters-warmup",
                "0",
                "--batch-size",
                "2",
            ])
            .args(extra)
            .run()
            .assert_success()
    };
    // `latency` fills in --input-len itself; sharegpt has no input length to set.
    let run = latency(&[]);
    assert!(!run.stderr.contains("--input-len"), "{run}");
    let run = latency(&["--input-len", "16"]);
    let warning = "WARNING: --input-len is ignored: dataset plugin 'sharegpt' has no option";
    assert_eq!(run.stderr.matches(warning).count(), 1, "{run}");
    assert!(run.stderr.contains("shared-flags"), "{run}");
}

/// `bench dataset sample` with the fixture, whose info log line goes to standard error.
fn sample_args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = ["dataset", "sample", "--tokenizer", &gpt2()]
        .iter()
        .map(Into::into)
        .collect();
    args.extend(["--num-prompts".into(), "1".into(), "--dataset-name".into()]);
    args.push(plugin().into());
    args
}

#[test]
fn nothing_on_a_pipe_is_coloured() {
    for no_color in [None, Some("1")] {
        let mut bench = Bench::new().default_log().args(sample_args());
        if let Some(v) = no_color {
            bench = bench.env("NO_COLOR", v);
        }
        let run = bench.run().assert_success();
        assert!(run.stderr.contains("prompts of 4 words"), "{run}");
        assert!(!run.stderr.contains("\x1b["), "{run}");
    }
    // A plugin's own coloured output (a traceback) in a fault report loses its colour.
    let run = Bench::new()
        .args(sample_args())
        .args([
            "--dataset-option",
            "fail-with=\x1b[31mTraceback in red\x1b[0m",
        ])
        .run()
        .assert_failure();
    assert!(run.stderr.contains("Traceback in red"), "{run}");
    assert!(!run.stderr.contains("\x1b["), "{run}");
}

/// Runs `bench` with `args` and standard error on a new pseudo-terminal; what it wrote there.
fn on_a_terminal<S: AsRef<OsStr>>(args: &[S], env: &[(&str, &str)]) -> String {
    gate::enter();
    // SAFETY: plain libc calls on a descriptor this function owns; ptsname's buffer is
    // copied before any other call.
    let (master, slave) = unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(fd)).to_owned();
        (master, name.into_string().unwrap())
    };
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&slave)
        .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_bench"));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("BENCH_") || key.contains("COLOR") {
            command.env_remove(key);
        }
    }
    command
        .env("TERM", "xterm-256color")
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(tty);
    let mut child = command.spawn().unwrap();
    // Once the child is gone, no end of the terminal is open (the command held this
    // process's copy): reading the master gives what was written, then an error (EIO).
    drop(command);
    let mut out = Vec::new();
    let mut master = std::fs::File::from(master);
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = master.read(&mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    child.wait().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_terminal_gets_colour_unless_no_color_is_set() {
    let args = sample_args();
    let coloured = on_a_terminal(&args, &[]);
    assert!(coloured.contains("prompts of 4 words"), "{coloured:?}");
    assert!(coloured.contains("\x1b["), "{coloured:?}");
    for value in ["1", "yes"] {
        let plain = on_a_terminal(&args, &[("NO_COLOR", value)]);
        assert!(plain.contains("prompts of 4 words"), "{plain:?}");
        assert!(!plain.contains("\x1b["), "NO_COLOR={value}: {plain:?}");
    }
    // clap's own errors follow the same rule.
    let error = on_a_terminal(&["--no-such-flag"], &[("NO_COLOR", "1")]);
    assert!(error.contains("--no-such-flag"), "{error:?}");
    assert!(!error.contains("\x1b["), "{error:?}");
    assert!(on_a_terminal(&["--no-such-flag"], &[]).contains("\x1b["));
}
