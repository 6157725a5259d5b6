//! Tests that measure time run alone among the end-to-end tests.
//!
//! The tests run in parallel: on threads of one process under `cargo test`, in processes
//! of their own under `cargo nextest` (as `.ci/run` runs them). A test that checks bench's
//! timing against a server's (`serve_timing`) or that loads the machine on purpose (`load`)
//! takes the gate with [`exclusive`]: it waits until no other test is working and keeps the
//! others waiting until it is done.
//!
//! The gate is an advisory lock on one file of Cargo's test scratch directory
//! (`flock(2)` through [`File::lock`]): a working test holds it shared, an exclusive test
//! holds it alone. Locks taken through different opens of the file exclude each other
//! whether they belong to two threads or two processes, so the same gate serves both
//! harnesses, and the kernel gives a test's place back when its process dies.
//!
//! The other tests need not say anything: every helper that starts work (running `bench`,
//! starting a mock server, loading plugins) calls [`enter`], which marks the calling test
//! as working until its thread ends. A waiting exclusive test gets in at the first moment
//! no test is working; new tests are not held back for it, so it can wait, at worst, until
//! the others are done.

use std::cell::RefCell;
use std::fs::File;
use std::path::PathBuf;

/// The lock file, shared by every test binary built from this code.
fn lock_file() -> File {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-gate.lock");
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("opening the test gate {}: {e}", path.display()))
}

/// What this thread holds: its own open of the lock file, locked shared (a working test)
/// or alone (an exclusive one). Closing it, when the thread ends or the [`Exclusive`] guard
/// is dropped, gives the place back.
struct Held {
    exclusive: bool,
    _lock: File,
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Marks the calling test as working (once per thread), waiting while a test holds the
/// gate alone. A test holding it alone passes straight through.
pub fn enter() {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_some() {
            return;
        }
        let file = lock_file();
        file.lock_shared().expect("taking the test gate shared");
        *held = Some(Held {
            exclusive: false,
            _lock: file,
        });
    });
}

/// The gate alone: returns once no other test is working; the others wait until the
/// guard is dropped. A test that holds the gate alone already gets a guard that leaves it
/// held.
#[must_use = "the gate is held only while the guard lives"]
pub fn exclusive() -> Exclusive {
    let taken = HELD.with(|held| {
        if held.borrow().as_ref().is_some_and(|h| h.exclusive) {
            return false;
        }
        // This test's own place among the working ones would block it forever.
        drop(held.borrow_mut().take());
        let file = lock_file();
        file.lock().expect("taking the test gate alone");
        *held.borrow_mut() = Some(Held {
            exclusive: true,
            _lock: file,
        });
        true
    });
    Exclusive { taken }
}

/// Holds the gate alone until dropped (if it took it).
pub struct Exclusive {
    taken: bool,
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        if self.taken {
            HELD.with(|held| held.borrow_mut().take());
        }
    }
}
