//! The load generator: releases prepared requests at their scheduled offsets, caps
//! concurrency with a semaphore whose permits go out in release order, and hands every
//! recorded response to the decode worker.
//!
//! The send path does no plugin work, no JSON and takes no lock. Under a concurrency cap a
//! released request waits in the gate's queue (`InOrderPermits`) as a few dozen bytes, not
//! as a task: the gate starts its task when its turn comes, so that a run released faster
//! than its cap lets it go holds no task per waiting request.
//! Decoding runs on its own thread, overlapped with the run.
//!
//! A run can be stopped early through its [`StopSignal`] (Ctrl-C, SIGTERM, or a part of
//! the run that cannot go on): no request is released or sent after that, requests in
//! flight get a grace period to finish, and those still running after it are cancelled
//! and recorded as failed with error kind `interrupted`. Every result measured so far is
//! kept. A run bounded by time ([`Timed`]) ends its sending when the time is up; its
//! requests in flight then have its drain to finish, and those still running after it
//! are cancelled as the client's own choice (kind `cancelled`, as AIPerf leaves answers
//! after its grace period out).
//!
//! Requests chosen by [`Cancellation`] are cancelled on purpose a set time after they
//! were sent (see [`crate::cancellation`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::cancellation::Cancellation;
use super::cpu::ClientCpu;
use super::decode::RequestMeta;
use super::endpoints::Endpoints;
use super::framing::Frames;
use super::stop::StopReason;
use super::stop::StopSignal;
use super::worker::{DecodeWorker, Job};
use super::{PreparedRequest, RawResponse};
use crate::record::{FailureKind, RequestRecord};

/// How the load generator drives a run, besides its requests and schedule.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Requests in flight at once (`None`: no cap).
    pub max_concurrency: Option<usize>,
    /// Raised to end the run early: no request is released after it.
    pub stop: Arc<StopSignal>,
    /// How long requests in flight may go on once the run is stopped; those still
    /// running after it are recorded as failed with kind `interrupted`.
    pub shutdown_grace: Duration,
    /// Advanced by one per request answered.
    pub progress: indicatif::ProgressBar,
    /// The benchmark's start (its offsets count from it), when it is set from outside: a
    /// shard of a run starts at the shared start, which may be in the future, or in the
    /// past when the shard was ready late (its overdue requests then go at once, and
    /// their lag is measured). `None`: now.
    pub start: Option<Instant>,
    /// Requests the client cancels on purpose, and when; `None`: none.
    pub cancellation: Option<Cancellation>,
    /// A shard's requests' places in the whole workload, by their place in the shard (the
    /// requests carry the latter): the cancellation choice is made by the former, so that
    /// every shard cancels what one process would. `None`: the requests' own indices.
    pub workload_index: Option<Arc<Vec<usize>>>,
    /// Counts each request sent, for whoever watches the run; `None`: nobody does.
    pub live: Option<Arc<super::live::LiveStats>>,
}

/// What the load generator measured.
#[derive(Debug)]
pub struct LoadOutput {
    /// One record per request sent, in workload order.
    pub records: Vec<RequestRecord>,
    /// From the first scheduled send to the end of the last response.
    pub duration: f64,
    /// Why the run was stopped before its workload ended.
    pub stopped: Option<StopReason>,
    /// Requests never sent because the run was stopped.
    pub not_sent: usize,
    /// Requests cancelled at the end of the grace period after a stop (in `records`,
    /// failed as interrupted) or of a timed run's drain (in `records`, kind `cancelled`).
    pub cancelled: usize,
    /// The monotonic clock at the benchmark start, in seconds.
    pub clock_origin_s: f64,
    /// What the run cost the client's CPU.
    pub cpu: ClientCpu,
    /// Which HTTP client sent the requests (`h1`, `reqwest`).
    pub transport: &'static str,
}

/// What became of one released request.
enum Outcome {
    /// Answered (successfully or not) and handed to the decode worker.
    Done,
    /// Still running at the end of the grace period or of the drain: cancelled.
    Cancelled,
    /// The run was stopped before it was sent.
    NotSent,
}

/// Conversations that go on during a run (multi-turn workloads): the dataset's next turns
/// arrive on `next` while the run goes on, built and ready to send.
pub struct MoreTurns {
    pub next: std::sync::mpsc::Receiver<NextTurn>,
    /// Turns that may still lead to more: sent or queued, and not yet answered by the
    /// dataset. The run ends when the workload is sent, no turn is queued and this is 0.
    pub open: Arc<AtomicUsize>,
}

/// A conversation's next turn.
pub struct NextTurn {
    pub request: PreparedRequest,
    /// When to send it, in seconds after the benchmark start; `None`: at once.
    pub due: Option<f64>,
}

/// When the requests of a run are released.
pub enum Releases {
    /// Request `i` of the workload at `offsets[i]` seconds after the start.
    Workload(Vec<f64>),
    /// A run bounded by time (`--duration`): see [`Timed`].
    Timed(Timed),
}

/// A run that sends until its time is up, whatever the size of its workload: the run's
/// position `k` sends the workload's request `k mod n`, again from the first when the
/// workload runs out, each send a request of its own (its record's index is `k`; from the
/// second round on, its request id is the workload's with `-<round>` added, so that no two
/// sends share one).
pub struct Timed {
    /// The offset of every position of the run, in order, as long as the run asks (the
    /// positions of other shards included: their draws are part of the one process).
    pub arrivals: Box<dyn Iterator<Item = f64> + Send>,
    /// Seconds after the start from which nothing more is sent.
    pub until: f64,
    /// This process sends the positions `k` with `k mod step == first` (a shard's part);
    /// `(0, 1)` for a whole run.
    pub first: usize,
    pub step: usize,
    /// Every offset is 0 (an infinite rate): the run is paced by its concurrency cap
    /// alone, so a request is released only when the cap has room for it.
    pub unpaced: bool,
    /// How long the requests in flight when the time is up may go on (AIPerf's
    /// `--benchmark-grace-period`): those still running after it are cancelled, as the
    /// client's own choice (kind `cancelled`: neither completed nor failed).
    pub drain: Duration,
}

/// Drives the whole workload: request `i` is released at `t0 + offsets[i]`, until
/// `options.stop` is raised; with `more`, the conversations' next turns too, at their
/// times, until every conversation has ended. A [`Timed`] run releases positions at
/// their arrivals until its time is up.
///
/// Releases happen on a dedicated thread that sleeps until shortly before each target and
/// spins the rest, so the schedule is kept to microseconds; tokio's timer wheel rounds
/// every sleep up to the next millisecond. The decode worker may hold a clone of the stop
/// signal and raise it too.
pub async fn run(
    endpoints: Endpoints,
    requests: Arc<Vec<PreparedRequest>>,
    releases: Releases,
    worker: DecodeWorker,
    options: LoadOptions,
    more: Option<MoreTurns>,
) -> Result<LoadOutput> {
    match &releases {
        Releases::Workload(offsets) => anyhow::ensure!(
            offsets.len() == requests.len(),
            "schedule and workload differ in length"
        ),
        Releases::Timed(timed) => {
            anyhow::ensure!(
                more.is_none(),
                "--duration: a multi-turn workload's later turns are made from the answers \
                 during the run, and cannot be sent again; run it by --num-prompts"
            );
            anyhow::ensure!(
                !timed.unpaced || max_concurrency_of(&options).is_some(),
                "--duration at an infinite request rate needs --max-concurrency: nothing else \
                 paces the run"
            );
            anyhow::ensure!(!requests.is_empty(), "--duration: the workload is empty");
        }
    }
    let LoadOptions {
        max_concurrency,
        stop,
        shutdown_grace: grace,
        progress: pb,
        start,
        cancellation,
        workload_index,
        live,
    } = options;
    let total = requests.len();
    let transport = endpoints.first().transport();
    let drain = match &releases {
        Releases::Timed(timed) => Some(timed.drain),
        Releases::Workload(_) => None,
    };
    // More permits than requests change nothing, and would make tokio panic past its
    // maximum (conversations and timed runs add requests as they go: no such bound).
    let bound = if more.is_some() || matches!(releases, Releases::Timed(_)) {
        usize::MAX >> 4
    } else {
        total.max(1)
    };
    // Raised once the grace period after a stop is over: requests still running end.
    let cancel = Arc::new(StopSignal::new());
    let grace_timer = tokio::spawn({
        let (stop, cancel) = (stop.clone(), cancel.clone());
        async move {
            stop.stopped().await;
            // A run that met its own stopping rule lets its requests in flight finish;
            // a signal after that starts the grace period as usual.
            if stop.reason().is_some_and(|r| r.is_goal()) {
                stop.signalled().await;
            }
            tokio::time::sleep(grace).await;
            cancel.stop(format!(
                "still running {:.1} s after the benchmark was stopped",
                grace.as_secs_f64()
            ));
        }
    });
    let cpu_at_start = super::cpu::process();
    let (now, monotonic_now) = (Instant::now(), super::cpu::monotonic().as_secs_f64());
    let t0 = start.unwrap_or(now);
    // The monotonic clock's reading at t0, which may lie on either side of now.
    let clock_origin_s = match t0.checked_duration_since(now) {
        Some(ahead) => monotonic_now + ahead.as_secs_f64(),
        None => monotonic_now - now.duration_since(t0).as_secs_f64(),
    };
    let tally = Arc::new(Tally::default());
    let sends = Arc::new(Sends {
        tally: tally.clone(),
        handle: tokio::runtime::Handle::current(),
        endpoints,
        tx: worker.sender(),
        pb: pb.clone(),
        stop: stop.clone(),
        cancel: cancel.clone(),
        t0,
        live,
    });
    let permits = max_concurrency.map(|n| {
        let sends = sends.clone();
        InOrderPermits::new(n.clamp(1, bound), stop.clone(), move |pending, turn| {
            sends.spawn(pending, Some(turn));
        })
    });
    let spawner = Spawner {
        sends,
        permits,
        cancellation,
        workload_index,
        max_concurrency,
        open: None,
    };
    let dispatcher = std::thread::Builder::new()
        .name("bench-dispatch".into())
        .spawn(move || {
            precise_sleeps();
            match (releases, more) {
                (Releases::Workload(offsets), None) => spawner.workload(&requests, &offsets),
                (Releases::Workload(offsets), Some(more)) => {
                    spawner.conversations(&requests, &offsets, more)
                }
                (Releases::Timed(timed), _) => spawner.timed(&requests, timed),
            }
        })
        .context("starting the dispatch thread")?;
    let (released, reached) = tokio::task::spawn_blocking(move || dispatcher.join())
        .await
        .context("waiting for the dispatch thread")?
        .map_err(|_| anyhow::anyhow!("the dispatch thread panicked"))?;
    // A timed run's time is up (unless it was stopped first, then the grace applies):
    // its requests in flight have the drain to finish.
    let drain_timer = drain.filter(|_| !stop.is_stopped()).map(|drain| {
        tokio::spawn(async move {
            tokio::time::sleep(drain).await;
            cancel.stop(StopReason::Goal(format!(
                "still running {:.1} s after --duration ended",
                drain.as_secs_f64()
            )));
        })
    });
    tally.all_ended(released).await;
    if let Some(timer) = drain_timer {
        timer.abort();
    }
    anyhow::ensure!(
        tally.panicked.load(Ordering::Acquire) == 0,
        "a request task panicked (its message is above)"
    );
    // Requests of the workload the dispatcher never reached were not sent either (a timed
    // run has no such requests: it is over when its time is).
    let not_sent = reached.unreached(total) + tally.not_sent.load(Ordering::Acquire);
    let cancelled = tally.cancelled.load(Ordering::Acquire);
    let duration = t0.elapsed().as_secs_f64();
    grace_timer.abort();
    pb.finish_and_clear();
    let (records, decode_cpu) = tokio::task::spawn_blocking(move || worker.finish())
        .await
        .context("waiting for the decode thread")??;
    Ok(LoadOutput {
        records,
        duration,
        stopped: stop.reason(),
        not_sent,
        cancelled,
        clock_origin_s,
        cpu: ClientCpu {
            total_s: (super::cpu::process() - cpu_at_start).as_secs_f64(),
            decode_s: decode_cpu.as_secs_f64(),
        },
        transport,
    })
}

/// How far the dispatcher got: how many of the workload's requests it released, or that
/// it ran a timed run (whose every position it reached is released).
enum Reached {
    Workload(usize),
    Timed,
}

impl Reached {
    /// Of a workload of `total` requests, those never released.
    fn unreached(&self, total: usize) -> usize {
        match self {
            Reached::Workload(sent) => total - sent,
            Reached::Timed => 0,
        }
    }
}

/// `options.max_concurrency`, for the checks made before the options are taken apart.
fn max_concurrency_of(options: &LoadOptions) -> Option<usize> {
    options.max_concurrency
}

/// A request to send: one of the workload's, or a conversation's next turn (or a timed
/// run's send of a workload request again, under its own index and id).
enum Slot {
    Workload(Arc<Vec<PreparedRequest>>, usize),
    Turn(Box<PreparedRequest>),
}

impl Slot {
    fn request(&self) -> &PreparedRequest {
        match self {
            Slot::Workload(requests, i) => &requests[*i],
            Slot::Turn(request) => request,
        }
    }
}

/// What became of the released requests, counted by their tasks as they end. The load
/// generator keeps no handle per request: a finished task's handle keeps the task's whole
/// allocation (its future's state, a few KB) until it is awaited, which for a long run is
/// memory that grows with every request.
#[derive(Default)]
struct Tally {
    ended: AtomicUsize,
    cancelled: AtomicUsize,
    not_sent: AtomicUsize,
    panicked: AtomicUsize,
    /// Notified as each task ends.
    ending: tokio::sync::Notify,
}

impl Tally {
    /// Returns once `released` tasks have ended.
    async fn all_ended(&self, released: usize) {
        // `notify_one` leaves a permit when nobody waits, so no ending is missed between
        // the check and the wait.
        while self.ended.load(Ordering::Acquire) < released {
            self.ending.notified().await;
        }
    }
}

/// A released request's place in the [`Tally`]: counted as ended when dropped, however it
/// ends. Dropped before its task counted an outcome, it was not sent: a request still in
/// the gate's queue when the run was stopped, or a task dropped unfinished; dropped by a
/// panic, it counts as one.
struct Ending {
    tally: Arc<Tally>,
    counted: bool,
}

impl Ending {
    fn new(tally: Arc<Tally>) -> Self {
        Ending {
            tally,
            counted: false,
        }
    }

    fn count(mut self, outcome: Outcome) {
        self.counted = true;
        let counter = match outcome {
            Outcome::Done => return,
            Outcome::Cancelled => &self.tally.cancelled,
            Outcome::NotSent => &self.tally.not_sent,
        };
        counter.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.tally.panicked.fetch_add(1, Ordering::AcqRel);
        } else if !self.counted {
            self.tally.not_sent.fetch_add(1, Ordering::AcqRel);
        }
        self.tally.ended.fetch_add(1, Ordering::AcqRel);
        self.tally.ending.notify_one();
    }
}

/// What every request's task shares: one `Arc` per task rather than a clone of each part.
struct Sends {
    tally: Arc<Tally>,
    handle: tokio::runtime::Handle,
    endpoints: Endpoints,
    tx: std::sync::mpsc::Sender<Job>,
    pb: indicatif::ProgressBar,
    stop: Arc<StopSignal>,
    /// Raised when the requests still running are to be cancelled: at the end of the
    /// grace period after a stop, or of a timed run's drain (a [`StopReason::Goal`]).
    cancel: Arc<StopSignal>,
    t0: Instant,
    live: Option<Arc<super::live::LiveStats>>,
}

/// A released request not yet sent: what its task needs, kept while it waits in the
/// gate's queue (its task is spawned only when its turn comes).
struct Pending {
    slot: Slot,
    /// Its scheduled offset, in seconds after the start.
    offset: f64,
    /// When it was released.
    dispatch: Instant,
    /// Its index in the whole workload (a shard's requests are numbered from 0): what the
    /// seeded choices go by.
    global: usize,
    cancel_after: Option<Duration>,
    /// Held for its drop: the request's place among an unpaced run's open requests.
    _open: Option<OpenSlot>,
    ending: Ending,
}

/// What the dispatcher needs to release requests.
struct Spawner {
    sends: Arc<Sends>,
    permits: Option<InOrderPermits<Pending>>,
    cancellation: Option<Cancellation>,
    workload_index: Option<Arc<Vec<usize>>>,
    max_concurrency: Option<usize>,
    /// An unpaced timed run's count of requests released and not yet answered; `None`
    /// otherwise.
    open: Option<Open>,
}

/// Requests released and not yet answered, for a dispatcher that waits on them.
#[derive(Clone)]
struct Open {
    count: Arc<AtomicUsize>,
    /// Unparked as each request ends.
    dispatcher: std::thread::Thread,
}

/// One released request's place in [`Open`]: taken at the release, given back (and the
/// dispatcher woken) when its task ends, whichever way it ends.
struct OpenSlot(Open);

impl OpenSlot {
    fn take(open: &Open) -> OpenSlot {
        open.count.fetch_add(1, Ordering::AcqRel);
        OpenSlot(open.clone())
    }
}

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.dispatcher.unpark();
    }
}

impl Spawner {
    /// Releases the workload at its offsets; returns how many requests were released and
    /// how many of the workload's.
    fn workload(self, requests: &Arc<Vec<PreparedRequest>>, offsets: &[f64]) -> (usize, Reached) {
        let mut released = 0;
        for (i, &offset) in offsets.iter().enumerate() {
            if !sleep_until(
                self.sends.t0 + Duration::from_secs_f64(offset),
                &self.sends.stop,
            ) {
                break;
            }
            self.release(Slot::Workload(requests.clone(), i), offset);
            released += 1;
        }
        (released, Reached::Workload(released))
    }

    /// Releases a timed run's positions at their arrivals until its time is up (or the run
    /// is stopped); an unpaced run releases each once its concurrency cap has room, so
    /// that no more than the cap's requests are ever waiting.
    fn timed(self, requests: &Arc<Vec<PreparedRequest>>, timed: Timed) -> (usize, Reached) {
        let Timed {
            arrivals,
            until,
            first,
            step,
            unpaced,
            // Applied by `run` once this thread is done.
            drain: _,
        } = timed;
        let end = self.sends.t0 + Duration::from_secs_f64(until);
        // Released and not yet answered: what an unpaced run waits on.
        let open = Arc::new(AtomicUsize::new(0));
        let cap = self.max_concurrency.unwrap_or(usize::MAX);
        let mut this = self;
        this.open = unpaced.then(|| Open {
            count: open.clone(),
            dispatcher: std::thread::current(),
        });
        let this = this;
        let mut released = 0;
        let n = requests.len();
        for (position, offset) in arrivals.enumerate() {
            if offset >= until {
                break;
            }
            if position % step != first {
                continue;
            }
            if !sleep_until(
                this.sends.t0 + Duration::from_secs_f64(offset),
                &this.sends.stop,
            ) {
                break;
            }
            // Woken by each answer (`Open`'s drop unparks this thread).
            while unpaced && open.load(Ordering::Acquire) >= cap && !this.sends.stop.is_stopped() {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::park_timeout(STOP_POLL.min(left));
            }
            if this.sends.stop.is_stopped() || Instant::now() >= end {
                break;
            }
            // An unpaced request is due when the cap has room for it: its schedule lag
            // counts from then, not from the run's start.
            let offset = match unpaced {
                true => this.sends.t0.elapsed().as_secs_f64(),
                false => offset,
            };
            let (round, i) = (position / n, position % n);
            let slot = if round == 0 {
                Slot::Workload(requests.clone(), i)
            } else {
                Slot::Turn(Box::new(requests[i].again(position, round)))
            };
            this.release(slot, offset);
            released += 1;
        }
        (released, Reached::Timed)
    }

    /// Releases the workload at its offsets and each conversation's next turns as they
    /// come, until every conversation has ended (or the run is stopped). Waits on the
    /// turns' channel rather than spinning: a turn can arrive at any moment.
    fn conversations(
        self,
        requests: &Arc<Vec<PreparedRequest>>,
        offsets: &[f64],
        more: MoreTurns,
    ) -> (usize, Reached) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        use std::sync::mpsc::RecvTimeoutError;

        /// A queued turn, ordered by due time, then arrival.
        struct Queued(f64, u64, Box<PreparedRequest>);
        impl PartialEq for Queued {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other).is_eq()
            }
        }
        impl Eq for Queued {}
        impl PartialOrd for Queued {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Queued {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
            }
        }

        let mut released = 0;
        let mut queued: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
        let mut arrivals = 0u64;
        let mut next = 0usize;
        let mut channel_open = true;
        let mut enqueue = |turn: NextTurn, queued: &mut BinaryHeap<Reverse<Queued>>| {
            let now = self.sends.t0.elapsed().as_secs_f64();
            let due = turn.due.unwrap_or(now).max(0.0);
            arrivals += 1;
            queued.push(Reverse(Queued(due, arrivals, Box::new(turn.request))));
        };
        while !self.sends.stop.is_stopped() {
            while let Ok(turn) = more.next.try_recv() {
                enqueue(turn, &mut queued);
            }
            let workload_due = offsets.get(next).copied();
            let turn_due = queued.peek().map(|Reverse(q)| q.0);
            let due = match (workload_due, turn_due) {
                (Some(w), Some(t)) => w.min(t),
                (Some(w), None) => w,
                (None, Some(t)) => t,
                (None, None) => {
                    if !channel_open || more.open.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    // Waiting for answers: wake for a turn, or to see whether all ended.
                    match more.next.recv_timeout(STOP_POLL) {
                        Ok(turn) => enqueue(turn, &mut queued),
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => channel_open = false,
                    }
                    continue;
                }
            };
            let target = self.sends.t0 + Duration::from_secs_f64(due);
            let now = Instant::now();
            if now < target && channel_open {
                // A turn arriving meanwhile may be due earlier.
                match more.next.recv_timeout((target - now).min(STOP_POLL)) {
                    Ok(turn) => enqueue(turn, &mut queued),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => channel_open = false,
                }
                continue;
            }
            if !sleep_until(target, &self.sends.stop) {
                break;
            }
            if workload_due == Some(due) {
                if requests[next].session.is_some() {
                    more.open.fetch_add(1, Ordering::AcqRel);
                }
                self.release(Slot::Workload(requests.clone(), next), due);
                released += 1;
                next += 1;
            } else if let Some(Reverse(Queued(due, _, request))) = queued.pop() {
                // Counted in `open` since the dataset made it.
                self.sends.pb.inc_length(1);
                self.release(Slot::Turn(request), due);
                released += 1;
            }
        }
        (released, Reached::Workload(next))
    }

    /// Releases one request now, scheduled at `offset`: into the gate's queue under a
    /// concurrency cap, else straight to its task.
    fn release(&self, slot: Slot, offset: f64) {
        let dispatch = Instant::now();
        let index = slot.request().index;
        let global = self
            .workload_index
            .as_ref()
            .and_then(|g| g.get(index).copied())
            .unwrap_or(index);
        let pending = Pending {
            slot,
            offset,
            dispatch,
            global,
            cancel_after: self.cancellation.and_then(|c| c.delay_for(global)),
            _open: self.open.as_ref().map(OpenSlot::take),
            ending: Ending::new(self.sends.tally.clone()),
        };
        match &self.permits {
            // Queued here, on the one dispatch thread, so permits follow release order.
            Some(gate) => gate.queue(pending),
            None => self.sends.spawn(pending, None),
        }
    }
}

impl Sends {
    /// Spawns the task that sends `pending` (holding its `turn` under a concurrency cap);
    /// the task counts itself into the [`Tally`] as it ends. The handle is dropped: the
    /// task's memory goes as soon as it ends.
    fn spawn(self: &Arc<Self>, pending: Pending, turn: Option<Turn>) {
        // The wait for the cap ends here, when the gate grants the turn.
        let concurrency_wait = match turn {
            Some(_) => pending.dispatch.elapsed(),
            None => Duration::ZERO,
        };
        let sends = self.clone();
        self.handle.spawn(async move {
            let outcome = sends.send(&pending, turn, concurrency_wait).await;
            let Pending { ending, .. } = pending;
            ending.count(outcome);
        });
    }

    /// Sends one request (unless the run was stopped meanwhile) and hands its response to
    /// the decode worker.
    async fn send(
        &self,
        pending: &Pending,
        turn: Option<Turn>,
        concurrency_wait: Duration,
    ) -> Outcome {
        if self.stop.is_stopped() {
            return Outcome::NotSent;
        }
        let req = pending.slot.request();
        // Chosen at the send, after the concurrency wait, so that the least outstanding
        // endpoint is the one now.
        let endpoint = self
            .endpoints
            .pick(pending.global, req.session.as_ref().map(|s| s.id.as_str()));
        let start = Instant::now();
        if let Some(live) = &self.live {
            live.sent();
        }
        // Started: the gate may hand the next request its turn.
        let permit = turn.map(Turn::started);
        let (raw, outcome) = tokio::select! {
            biased;
            // Boxed, so that the send's state is allocated only once the request goes.
            raw = Box::pin(self.endpoints.send_started(endpoint, req, start, pending.cancel_after)) => {
                (raw, Outcome::Done)
            }
            () = self.cancel.stopped() => (
                cancelled(req.index, start, &self.cancel),
                Outcome::Cancelled,
            ),
        };
        drop(permit);
        let meta = RequestMeta {
            index: req.index,
            request_id: req.request_id.clone(),
            prompt_len: req.prompt_len,
            expected_output_len: req.expected_output_len,
            intended_start_time: pending.offset,
            dispatch: pending.dispatch,
            concurrency_wait,
            session: req.session.clone(),
            endpoint,
            check: req.check.clone(),
        };
        // The receiver lives until `finish`, after every task has ended.
        let _ = self.tx.send(Job {
            meta,
            raw,
            t0: self.t0,
        });
        self.pb.inc(1);
        outcome
    }
}

/// `--max-concurrency`'s gate: requests start strictly in the order they were queued,
/// as in vLLM's client (its asyncio tasks reach `Semaphore.acquire` in creation order, and
/// one thread runs each to its `start_time` before the next).
///
/// Why not each request task acquiring the semaphore itself: tokio's semaphore is fair
/// in the order of first polls, and on a multi-threaded runtime tasks spawned in order
/// are first polled in whatever order the worker threads pick them up, so request 7
/// could be sent before request 6. Here one task takes the queued requests in order,
/// acquires a permit for each, starts it (`start`, which spawns its task), and waits
/// until it has taken its start time before starting the next: two requests whose
/// permits free up together (a server finishing a batch) would otherwise race on two
/// threads. A waiting request is only its queue entry: a run released faster than its cap
/// (an infinite rate releases every request at once) holds no task per waiting request
/// (the 100,000 waiting tasks of such a run took 230 MB). The cost is one small
/// allocation and one cross-thread wake-up per request, paid only under a cap.
///
/// Once the run is stopped the gate grants nothing more, and drops what is queued.
struct InOrderPermits<T> {
    queue: mpsc::UnboundedSender<T>,
}

/// A request's turn: its concurrency permit, and the signal that it has started.
struct Turn {
    permit: OwnedSemaphorePermit,
    started: oneshot::Sender<()>,
}

impl Turn {
    /// Tells the gate the request has taken its start time; keeps the permit.
    fn started(self) -> OwnedSemaphorePermit {
        // The gate is gone only when the run was stopped.
        let _ = self.started.send(());
        self.permit
    }
}

impl<T: Send + 'static> InOrderPermits<T> {
    /// Starts the granting task on the current runtime, which hands each queued item its
    /// turn through `start`; it ends when `stop` is raised or the gate is dropped and its
    /// queue drained.
    fn new(limit: usize, stop: Arc<StopSignal>, start: impl Fn(T, Turn) + Send + 'static) -> Self {
        let semaphore = Arc::new(Semaphore::new(limit));
        let (queue, mut waiting) = mpsc::unbounded_channel::<T>();
        tokio::spawn(async move {
            while let Some(item) = waiting.recv().await {
                let permit = tokio::select! {
                    biased;
                    () = stop.stopped() => return,
                    p = semaphore.clone().acquire_owned() => p.expect("semaphore never closes"),
                };
                let (started, has_started) = oneshot::channel();
                start(item, Turn { permit, started });
                // One that gives up instead of starting drops `started`: go on too.
                tokio::select! {
                    biased;
                    () = stop.stopped() => return,
                    _ = has_started => {}
                }
            }
        });
        InOrderPermits { queue }
    }

    /// Queues one item: it is started once a permit is free and every item queued before
    /// it has started. Callable from any thread. After a stop the item is dropped, here
    /// or with the gate's queue.
    fn queue(&self, item: T) {
        let _ = self.queue.send(item);
    }
}

/// The response of a request cancelled by `cancel`: at the end of the grace period after
/// a stop, failed as interrupted; at the end of a timed run's drain, the client's own
/// choice (kind `cancelled`).
fn cancelled(index: usize, start: Instant, cancel: &StopSignal) -> RawResponse {
    let reason = cancel.reason();
    let kind = match &reason {
        Some(reason) if reason.is_goal() => FailureKind::Cancelled,
        _ => FailureKind::Interrupted,
    };
    let why = reason.map(|r| r.to_string()).unwrap_or_default();
    RawResponse {
        index,
        status: None,
        headers: Default::default(),
        frames: Frames::default(),
        frame_times: Vec::new(),
        start,
        error: Some(kind.failure(format_args!("{why}; cancelled"))),
        retried: false,
    }
}

/// How long before a target the dispatcher stops sleeping and spins. Short on purpose:
/// the dispatcher shares its core with the request tasks, and every microsecond spun is
/// taken from them (at 5,000 req/s, a 200 us window is the whole core). With the
/// thread's timer slack at 1 ns ([`precise_sleeps`]) a sleep ends a few tens of
/// microseconds late, well inside the 1 ms lag budget.
const SPIN_WINDOW: Duration = Duration::from_micros(20);

/// Asks the kernel to end this thread's sleeps on time: the default timer slack lets it
/// wake a sleeping thread up to 50 us late, to batch wake-ups.
fn precise_sleeps() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The longest the dispatcher sleeps without looking at the stop signal.
const STOP_POLL: Duration = Duration::from_millis(10);

/// Blocks the calling thread until `target`, sleeping while far and spinning when near;
/// `false` (at once, or within [`STOP_POLL`]) when `stop` is raised first.
fn sleep_until(target: Instant, stop: &StopSignal) -> bool {
    loop {
        if stop.is_stopped() {
            return false;
        }
        let now = Instant::now();
        if now >= target {
            return true;
        }
        let left = target - now;
        if left > SPIN_WINDOW {
            std::thread::sleep((left - SPIN_WINDOW).min(STOP_POLL));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate whose items are channels that receive their turns.
    type Gate = InOrderPermits<oneshot::Sender<Turn>>;

    fn grant(waiting: oneshot::Sender<Turn>, turn: Turn) {
        let _ = waiting.send(turn);
    }

    /// Queues one item; its turn arrives on the returned channel.
    fn granted(gate: &Gate) -> oneshot::Receiver<Turn> {
        let (waiting, turn) = oneshot::channel();
        gate.queue(waiting);
        turn
    }

    #[test]
    fn the_dispatcher_wakes_for_a_stop_long_before_its_target() {
        let stop = Arc::new(StopSignal::new());
        let raiser = std::thread::spawn({
            let stop = stop.clone();
            move || {
                std::thread::sleep(Duration::from_millis(30));
                stop.stop("test");
            }
        });
        let t = Instant::now();
        assert!(!sleep_until(t + Duration::from_secs(60), &stop));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        raiser.join().unwrap();
        // Once raised, nothing more is released, even a request already due.
        assert!(!sleep_until(Instant::now(), &stop));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn permits_go_out_in_queue_order_on_a_multi_threaded_runtime() {
        // Eight permits, so up to eight requests hold one at once: they must still start
        // in order.
        let gate = InOrderPermits::new(8, Arc::new(StopSignal::new()), grant);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..500usize)
            .map(|i| {
                let (turn, order) = (granted(&gate), order.clone());
                tokio::spawn(async move {
                    let turn = turn.await.expect("granted");
                    order.lock().unwrap().push(i);
                    let _permit = turn.started();
                    tokio::task::yield_now().await;
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..500).collect::<Vec<_>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_ends_the_waiting_without_a_permit() {
        let stop = Arc::new(StopSignal::new());
        let gate = InOrderPermits::new(1, stop.clone(), grant);
        let first = granted(&gate)
            .await
            .expect("a free permit is granted")
            .started();
        let second = granted(&gate);
        stop.stop("test");
        assert!(second.await.is_err());
        drop(first);
    }

    #[test]
    fn an_unstopped_dispatcher_reaches_its_target() {
        let stop = StopSignal::new();
        let target = Instant::now() + Duration::from_millis(25);
        assert!(sleep_until(target, &stop));
        assert!(Instant::now() >= target);
    }
}
