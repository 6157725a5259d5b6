//! The gate of the timing tests (`tests/common/gate.rs`) holds across processes: `.ci/run`
//! runs each test in a process of its own (`cargo nextest`), and a test that measures time
//! must still run alone among them.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::gate;

/// Where a helper process writes that it is about to give the gate back.
const LEFT_ENV: &str = "BENCH_TEST_GATE_LEFT";
/// Which place the helper takes: `working` or `alone`.
const HOLD_ENV: &str = "BENCH_TEST_GATE_HOLD";

/// Not a test on its own: run by the tests below as a child process that takes the gate,
/// says so on stdout, holds it for a second, writes the file `LEFT_ENV` names and exits
/// (which gives the gate back).
#[test]
#[ignore = "a helper process for the gate's tests"]
fn gate_holder() {
    let (Some(left), Ok(hold)) = (std::env::var_os(LEFT_ENV), std::env::var(HOLD_ENV)) else {
        return;
    };
    let _alone = match hold.as_str() {
        "working" => {
            gate::enter();
            None
        }
        "alone" => Some(gate::exclusive()),
        other => panic!("{HOLD_ENV}={other}"),
    };
    println!("holding the gate");
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(left, b"").unwrap();
}

/// Starts the helper holding the gate as `hold` and returns once it holds it.
fn holder(hold: &str, left: &Path) -> std::process::Child {
    let (_, module) = module_path!().split_once("::").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", &format!("{module}::gate_holder")])
        .arg("--nocapture")
        .env(LEFT_ENV, left)
        .env(HOLD_ENV, hold)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let held = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line == "holding the gate");
    assert!(held, "the helper never said it held the gate");
    // The rest of its output is read, so that its harness's last lines find a reader.
    std::thread::spawn(move || lines.for_each(drop));
    child
}

/// A test that wants the gate alone waits until a working test in another process is done.
#[test]
fn an_exclusive_test_waits_for_a_working_test_of_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let left = dir.path().join("left");
    let mut child = holder("working", &left);
    let alone = gate::exclusive();
    assert!(
        left.exists(),
        "the gate was taken alone while another process's test was still working"
    );
    drop(alone);
    assert!(child.wait().unwrap().success());
}

/// A test that starts work waits while a test in another process holds the gate alone.
#[test]
fn a_working_test_waits_for_an_exclusive_test_of_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let left = dir.path().join("left");
    let mut child = holder("alone", &left);
    gate::enter();
    assert!(
        left.exists(),
        "a test started work while another process's test held the gate alone"
    );
    assert!(child.wait().unwrap().success());
}
