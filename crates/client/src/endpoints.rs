//! Several servers behind one run (`--base-url` repeated): one [`HttpClient`] per endpoint
//! and the choice of which one sends each request.
//!
//! Replicas without a gateway in front of them are benchmarked as a whole this way
//! (AIPerf's repeated `--url`). The choice is made once per request, when it is sent,
//! never per chunk:
//! - **round robin** (the default) sends workload request `i` to endpoint `i mod n`, by
//!   the request's index in the whole workload (a shard's global index), so the same seed
//!   sends the same requests to the same endpoints whatever the timing, in one process or
//!   in shards;
//! - **least outstanding** sends each request to the endpoint with the fewest requests in
//!   flight from this process (ties to the lowest index), which follows the endpoints'
//!   speeds: a slower replica keeps its requests longer and gets fewer new ones.
//!
//! A conversation's turns all go where its id hashes to (FNV-1a, mod n), whatever the
//! policy: its later turns carry its history, which only that server's prefix cache holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{HttpClient, PreparedRequest, RawResponse};

/// How requests are spread over several endpoints (see the module documentation). A
/// command line can take it as a flag's value (feature `clap`).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Request `i` of the workload to endpoint `i mod n`.
    #[default]
    RoundRobin,
    /// Each request to the endpoint with the fewest requests in flight.
    LeastOutstanding,
}

impl Routing {
    /// The name the result and the console use.
    pub fn name(self) -> &'static str {
        match self {
            Routing::RoundRobin => "round-robin",
            Routing::LeastOutstanding => "least-outstanding",
        }
    }
}

/// The clients of a run's endpoints and the routing between them. Cloned into every
/// request's task: the clients and counters are shared.
#[derive(Clone)]
pub struct Endpoints {
    clients: Arc<[HttpClient]>,
    routing: Routing,
    /// Requests in flight per endpoint, for [`Routing::LeastOutstanding`].
    outstanding: Arc<[AtomicUsize]>,
}

impl Endpoints {
    /// The endpoints in the order the user gave them (their indices in records).
    ///
    /// # Panics
    ///
    /// When `clients` is empty: a run has at least one server.
    pub fn new(clients: Vec<HttpClient>, routing: Routing) -> Endpoints {
        assert!(!clients.is_empty(), "a run has at least one endpoint");
        let outstanding = clients.iter().map(|_| AtomicUsize::new(0)).collect();
        Endpoints {
            clients: clients.into(),
            routing,
            outstanding,
        }
    }

    /// One endpoint: every request goes to it.
    pub fn one(client: HttpClient) -> Endpoints {
        Endpoints::new(vec![client], Routing::RoundRobin)
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// The first endpoint's client (for what one server answers for all: the ready
    /// check's reference, the transport's name).
    pub fn first(&self) -> &HttpClient {
        &self.clients[0]
    }

    /// Every endpoint's client, in order.
    pub fn clients(&self) -> &[HttpClient] {
        &self.clients
    }

    /// The endpoint that sends a request: a conversation's by its id, else by the policy
    /// (`index` is the request's index in the whole workload).
    pub fn pick(&self, index: usize, session: Option<&str>) -> usize {
        let n = self.clients.len();
        if n == 1 {
            return 0;
        }
        if let Some(id) = session {
            return (fnv1a(id.as_bytes()) % n as u64) as usize;
        }
        match self.routing {
            Routing::RoundRobin => index % n,
            Routing::LeastOutstanding => self
                .outstanding
                .iter()
                .enumerate()
                .min_by_key(|(i, count)| (count.load(Ordering::Acquire), *i))
                .map_or(0, |(i, _)| i),
        }
    }

    /// Sends `req` to endpoint `endpoint` (see [`HttpClient::send_started`]), counting it
    /// in flight there until it ends when the routing reads the counts (least
    /// outstanding over several endpoints; else the request path is one client's).
    pub async fn send_started(
        &self,
        endpoint: usize,
        req: &PreparedRequest,
        start: Instant,
        cancel_after: Option<Duration>,
    ) -> RawResponse {
        let counted = self.routing == Routing::LeastOutstanding && self.clients.len() > 1;
        let _in_flight = counted.then(|| InFlight::new(&self.outstanding[endpoint]));
        self.clients[endpoint]
            .send_started(req, start, cancel_after)
            .await
    }
}

/// One request in flight at an endpoint; counted down when dropped (also when the
/// request's task is cancelled).
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every process and version (std's
/// `DefaultHasher` promises neither), so shards place a conversation alike.
fn fnv1a(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FramingKind;

    fn endpoints(n: usize, routing: Routing) -> Endpoints {
        let clients = (0..n)
            .map(|i| {
                HttpClient::new(
                    &format!("http://127.0.0.1:{}/v1/completions", 9000 + i),
                    FramingKind::Sse,
                    None,
                    Default::default(),
                    Default::default(),
                )
                .unwrap()
            })
            .collect();
        Endpoints::new(clients, routing)
    }

    #[test]
    fn round_robin_goes_by_the_workload_index() {
        let e = endpoints(3, Routing::RoundRobin);
        let picks: Vec<usize> = (0..7).map(|i| e.pick(i, None)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0]);
        // Whatever order the requests are sent in.
        assert_eq!(e.pick(5, None), 2);
        assert_eq!(endpoints(1, Routing::LeastOutstanding).pick(9, None), 0);
    }

    #[test]
    fn least_outstanding_picks_the_endpoint_with_the_fewest_in_flight() {
        let e = endpoints(3, Routing::LeastOutstanding);
        assert_eq!(e.pick(0, None), 0);
        let a = InFlight::new(&e.outstanding[0]);
        assert_eq!(e.pick(0, None), 1);
        let b = InFlight::new(&e.outstanding[1]);
        let c = InFlight::new(&e.outstanding[2]);
        let d = InFlight::new(&e.outstanding[1]);
        // 1, 2, 1 in flight: the lowest index of the fewest.
        assert_eq!(e.pick(0, None), 0);
        drop((a, b, c, d));
        assert!(e.outstanding.iter().all(|n| n.load(Ordering::Acquire) == 0));
    }

    #[test]
    fn a_conversation_stays_on_one_endpoint_whatever_the_policy() {
        for routing in [Routing::RoundRobin, Routing::LeastOutstanding] {
            let e = endpoints(4, routing);
            let first = e.pick(0, Some("conv-7"));
            let _busy = InFlight::new(&e.outstanding[first]);
            assert!((1..50).all(|i| e.pick(i, Some("conv-7")) == first));
        }
        // Conversations spread over the endpoints.
        let e = endpoints(4, Routing::RoundRobin);
        let mut used: Vec<usize> = (0..40)
            .map(|c| e.pick(0, Some(&format!("conv-{c}"))))
            .collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used, [0, 1, 2, 3]);
        // FNV-1a's published test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
