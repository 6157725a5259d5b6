//! Tests that measure time run alone in this binary.
//!
//! The test harness runs tests on parallel threads. A test that checks bench's timing
//! against a server's (`serve_timing`) or that loads the machine on purpose (`load`) takes
//! the gate with [`exclusive`]: it waits until no other test is working and keeps the
//! others waiting until it is done.
//!
//! The other tests need not say anything: every helper that starts work (running `bench`,
//! starting a mock server, loading plugins) calls [`enter`], which marks the calling test
//! as working until its thread ends (the harness runs each test on a thread of its own).
//! A waiting exclusive test gets in at the first moment no test is working; new tests are
//! not held back for it, so it can wait, at worst, until the others are done.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

struct State {
    /// Threads inside the gate as ordinary tests.
    working: usize,
    /// Whether a test holds the gate alone.
    exclusive: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    working: 0,
    exclusive: false,
});
static CHANGED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    // A test that panicked while holding the lock left the counts consistent.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What this thread holds.
enum Held {
    /// A place among the working tests, given back when the thread ends.
    Working(Token),
    /// The gate alone (the [`Exclusive`] guard gives it back).
    Exclusive,
}

/// A working test's place; dropped with the thread's locals when the test ends.
struct Token;

impl Drop for Token {
    fn drop(&mut self) {
        state().working -= 1;
        CHANGED.notify_all();
    }
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
        let mut s = state();
        while s.exclusive {
            s = CHANGED.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.working += 1;
        *held = Some(Held::Working(Token));
    });
}

/// The gate alone: returns once no other test is working; the others wait until the
/// guard is dropped. A test that holds the gate alone already gets a guard that leaves it
/// held.
#[must_use = "the gate is held only while the guard lives"]
pub fn exclusive() -> Exclusive {
    let taken = HELD.with(|held| {
        if matches!(*held.borrow(), Some(Held::Exclusive)) {
            return false;
        }
        // This test's own place among the working ones would block it forever.
        drop(held.borrow_mut().take());
        let mut s = state();
        while s.exclusive || s.working > 0 {
            s = CHANGED.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.exclusive = true;
        *held.borrow_mut() = Some(Held::Exclusive);
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
        if !self.taken {
            return;
        }
        HELD.with(|held| held.borrow_mut().take());
        state().exclusive = false;
        CHANGED.notify_all();
    }
}
