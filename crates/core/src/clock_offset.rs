//! How far this machine's wall clock is from the server's, to the millisecond.
//!
//! Shards of one run send from different machines, and their per-request records are put
//! on one timeline by wall clock; a shard whose clock is 40 ms ahead would seem to send
//! 40 ms late. The one clock every shard can read is the server under test's, through the
//! `Date` header of its answers, but that has whole seconds only. So [`estimate`] polls
//! the server in a tight loop and watches for the moment the `Date` second ticks over:
//! the answer stamped `D` was stamped at some local time between its request's send and
//! its response's arrival, and so was the next one, stamped `D + 1`; the server's clock
//! read exactly `D + 1` somewhere between the first's send and the second's arrival.
//! On loopback that window is a fraction of a millisecond; across a network it is about
//! two round trips.
//!
//! The figure is exact only for a server that stamps `Date` from its clock as it answers
//! (hyper and axum, so the mock server, Go's `net/http`, nginx). Some cache the header
//! and refresh it on a timer of their own: uvicorn (so vLLM) about once a second, Envoy
//! twice a second. Their `Date` ticks late by up to that period, and the estimate then
//! says the server is behind by as much more than it is. That bias is the same for every
//! shard that measures the same server process at about the same moment, so the shards'
//! offsets *from each other*, which is what a merged timeline needs, stay as exact as
//! the windows say.

use std::time::{Duration, Instant, SystemTime};

use reqwest::StatusCode;
use reqwest::header::DATE;

use crate::prepare::HostHeaders;

/// A budget that sees one tick of the server's `Date` second on any server that answers
/// within a tenth of a second: the tick comes at most a second after the polling starts,
/// and the answers on either side of it take two round trips.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(1250);

/// The least time from one poll's send to the next: at most a thousand polls a second, so
/// that the estimate is good to about a millisecond without loading the server.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// This machine's clock minus the server's, as the narrowest window around a tick of the
/// server's `Date` second bounds it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClockOffset {
    /// Positive when this machine's clock is ahead of the server's: subtract it from a
    /// local wall-clock time to get the server's.
    pub offset_ms: f64,
    /// Half the window the tick was seen in: the server's clock is within this of
    /// `offset_ms` (for a server that stamps `Date` as it answers; see the module).
    pub uncertainty_ms: f64,
    /// Answers read, for judging the window: a handful means a slow server.
    pub samples: usize,
}

/// Why no offset could be estimated; each names the URL polled.
#[derive(Debug, thiserror::Error)]
pub enum ClockOffsetError {
    /// The server did not answer (its cause says why: refused, TLS, reset...).
    #[error("clock offset: GET {url} got no answer")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The server answers without `Date`, so its clock cannot be read at all.
    #[error("clock offset: GET {url} answered (HTTP {status}) without a Date header")]
    NoDate { url: String, status: StatusCode },
    /// A `Date` that is not RFC 7231's HTTP-date.
    #[error("clock offset: GET {url} answered with a Date header that is no HTTP date: {value:?}")]
    BadDate { url: String, value: String },
    /// The server's `Date` did not move on by exactly one second between two consecutive
    /// answers within the budget: too slow a server for the budget, or a frozen clock.
    #[error(
        "clock offset: GET {url}: the server's Date did not tick over by one second within {budget:?} ({samples} answers read)"
    )]
    NoTick {
        url: String,
        budget: Duration,
        samples: usize,
    },
}

/// Estimates this machine's clock offset from the server's by polling `url` (any cheap
/// GET of the server under test, such as `{base_url}/v1/models`; any status will do as long
/// as it carries `Date`) with the run's `headers` through `client` (one built from
/// [`crate::client::reqwest_builder`], so the run's TLS setting applies), one request at a
/// time for at most `budget`. A budget over a second sees one tick; every further second
/// adds one more, and the narrowest window wins.
pub async fn estimate(
    client: &reqwest::Client,
    url: &str,
    headers: &HostHeaders,
    budget: Duration,
) -> Result<ClockOffset, ClockOffsetError> {
    let clock = LocalClock::now();
    let deadline = tokio::time::Instant::from_std(clock.at + budget);
    let mut samples = Vec::new();
    while tokio::time::Instant::now() < deadline {
        let request = get(client, url, headers);
        let sent = Instant::now();
        let Ok(answer) = tokio::time::timeout_at(deadline, request.send()).await else {
            break;
        };
        let response = answer.map_err(|source| ClockOffsetError::Unreachable {
            url: url.to_owned(),
            source,
        })?;
        let received = Instant::now();
        let date = server_second(url, &response)?;
        samples.push(Sample {
            sent_ms: clock.ms(sent),
            received_ms: clock.ms(received),
            date_s: date,
        });
        // Read to the end so the connection is kept for the next poll (a new connection
        // would widen the window by a handshake). A body that fails is no concern of the
        // estimate: the next poll then opens a new connection, or says why it cannot.
        let _ = tokio::time::timeout_at(deadline, response.bytes()).await;
        // Paced, so that every shard of a large run polling the server at once stays a
        // light load on it; the window is then about this wide at most.
        tokio::time::sleep_until(tokio::time::Instant::from_std(sent + POLL_INTERVAL)).await;
    }
    narrowest_tick(&samples).ok_or_else(|| ClockOffsetError::NoTick {
        url: url.to_owned(),
        budget,
        samples: samples.len(),
    })
}

/// This machine's wall clock, read once and carried forward by the monotonic clock, so
/// that every time of one estimate is on the same scale (a step of the wall clock during
/// the polling would otherwise land in the middle of a window).
struct LocalClock {
    /// Milliseconds since the Unix epoch at `at`.
    wall_ms: f64,
    at: Instant,
}

impl LocalClock {
    fn now() -> LocalClock {
        let wall = SystemTime::now();
        let at = Instant::now();
        LocalClock {
            wall_ms: unix_ms(wall),
            at,
        }
    }

    /// The wall-clock time of `t`, in milliseconds since the Unix epoch.
    fn ms(&self, t: Instant) -> f64 {
        self.wall_ms + t.duration_since(self.at).as_secs_f64() * 1e3
    }
}

fn unix_ms(t: SystemTime) -> f64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64() * 1e3,
        Err(before) => -before.duration().as_secs_f64() * 1e3,
    }
}

/// `GET url` with the run's headers (those of every request: the API key may be needed
/// for any answer at all, and `--header` may route through a gateway).
fn get(client: &reqwest::Client, url: &str, headers: &HostHeaders) -> reqwest::RequestBuilder {
    let mut request = client.get(url);
    if let Some(key) = &headers.api_key {
        request = request.bearer_auth(key);
    }
    for (k, v) in &headers.extra {
        request = request.header(k, v);
    }
    request
}

/// The server's `Date`, in whole seconds since the Unix epoch.
fn server_second(url: &str, response: &reqwest::Response) -> Result<u64, ClockOffsetError> {
    let value = response
        .headers()
        .get(DATE)
        .ok_or_else(|| ClockOffsetError::NoDate {
            url: url.to_owned(),
            status: response.status(),
        })?;
    let bad = || ClockOffsetError::BadDate {
        url: url.to_owned(),
        value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
    };
    let date = value.to_str().map_err(|_| bad())?;
    let date = httpdate::parse_http_date(date).map_err(|_| bad())?;
    // An HTTP-date is never before 1970, so this is whole and exact.
    Ok(date
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| bad())?
        .as_secs())
}

/// One poll: when it was sent and answered (local wall clock), and the `Date` it got.
#[derive(Debug, Clone, Copy)]
struct Sample {
    sent_ms: f64,
    received_ms: f64,
    date_s: u64,
}

/// The offset from the narrowest window around a tick: for consecutive answers stamped
/// `D` and `D + 1`, the server's clock read `D + 1` after the first was sent and before
/// the second arrived. Answers a second or more apart (a stall) bound nothing useful.
fn narrowest_tick(samples: &[Sample]) -> Option<ClockOffset> {
    samples
        .windows(2)
        .filter(|pair| pair[1].date_s == pair[0].date_s + 1)
        .map(|pair| {
            let (from, to) = (pair[0].sent_ms, pair[1].received_ms);
            ClockOffset {
                offset_ms: (from + to) / 2.0 - pair[1].date_s as f64 * 1e3,
                uncertainty_ms: (to - from) / 2.0,
                samples: samples.len(),
            }
        })
        .min_by(|a, b| a.uncertainty_ms.total_cmp(&b.uncertainty_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;

    /// A loopback HTTP/1.1 server answering every request with an empty `200` whose
    /// `Date` is what `date` gives at that moment (none for `None`); its URL.
    async fn serve(date: impl Fn() -> Option<String> + Send + Sync + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/models", listener.local_addr().unwrap());
        let date = Arc::new(date);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let date = date.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut read = BufReader::new(read);
                    let mut line = String::new();
                    loop {
                        // A GET's head, to its empty line; end of stream ends the connection.
                        loop {
                            line.clear();
                            if read.read_line(&mut line).await.unwrap() == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                        }
                        let date = date().map(|d| format!("date: {d}\r\n"));
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n{}\r\n",
                            date.unwrap_or_default()
                        );
                        write.write_all(head.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        url
    }

    /// The server's clock `skew_ms` ahead of this machine's.
    fn skewed(skew_ms: i64) -> impl Fn() -> Option<String> {
        move || {
            let skew = Duration::from_millis(skew_ms.unsigned_abs());
            let now = SystemTime::now();
            let server = if skew_ms >= 0 { now + skew } else { now - skew };
            Some(httpdate::fmt_http_date(server))
        }
    }

    fn client() -> reqwest::Client {
        crate::client::reqwest_builder(crate::client::Tls::Verify)
            .build()
            .unwrap()
    }

    async fn estimate_at(url: &str, budget: Duration) -> Result<ClockOffset, ClockOffsetError> {
        estimate(&client(), url, &HostHeaders::default(), budget).await
    }

    /// A server `skew_ms` ahead is found `skew_ms` behind this machine, to within the
    /// estimate's own uncertainty, and that is a few milliseconds on loopback. The budget
    /// sees two ticks, so that one stall of a busy test machine across a tick (a window
    /// of tens of milliseconds, seen here) leaves the other.
    async fn recovers(skew_ms: i64) {
        let url = serve(skewed(skew_ms)).await;
        let got = estimate_at(&url, Duration::from_millis(2250))
            .await
            .unwrap();
        let error = got.offset_ms + skew_ms as f64;
        eprintln!("server skew {skew_ms:+} ms: {got:?}, error {error:+.3} ms");
        // The server stamps with the wall clock itself, the estimate with the wall clock
        // carried by the monotonic one: they agree but for the rounding of epoch
        // milliseconds in an f64 (well under a microsecond).
        assert!(
            error.abs() <= got.uncertainty_ms + 1e-3,
            "{got:?}, error {error} ms"
        );
        assert!(got.uncertainty_ms < 5.0, "{got:?}");
        assert!(got.samples > 10, "{got:?}");
    }

    #[tokio::test]
    async fn a_server_ahead_by_250_ms_is_found_250_ms_ahead() {
        recovers(250).await;
    }

    #[tokio::test]
    async fn a_server_behind_by_1700_ms_is_found_1700_ms_behind() {
        recovers(-1700).await;
    }

    #[tokio::test]
    async fn a_server_without_date_is_named() {
        let url = serve(|| None).await;
        let err = estimate_at(&url, DEFAULT_BUDGET).await.unwrap_err();
        assert!(
            matches!(&err, ClockOffsetError::NoDate { url: u, status } if *u == url && *status == StatusCode::OK),
            "{err:?}"
        );
        assert!(err.to_string().contains("without a Date header"), "{err}");
    }

    #[tokio::test]
    async fn a_frozen_date_ends_within_the_budget_without_a_tick() {
        let frozen = httpdate::fmt_http_date(SystemTime::now());
        let url = serve(move || Some(frozen.clone())).await;
        let budget = Duration::from_millis(300);
        let start = Instant::now();
        let err = estimate_at(&url, budget).await.unwrap_err();
        let took = start.elapsed();
        assert!(
            matches!(err, ClockOffsetError::NoTick { samples, budget: b, .. } if samples > 0 && b == budget),
            "{err:?}"
        );
        assert!(took < budget + Duration::from_millis(200), "{took:?}");
    }

    #[tokio::test]
    async fn a_date_that_is_no_http_date_is_named() {
        let url = serve(|| Some("yesterday".to_owned())).await;
        let err = estimate_at(&url, DEFAULT_BUDGET).await.unwrap_err();
        assert!(
            matches!(&err, ClockOffsetError::BadDate { value, .. } if value == "yesterday"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_server_that_is_not_there_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/models", listener.local_addr().unwrap());
        drop(listener);
        let err = estimate_at(&url, DEFAULT_BUDGET).await.unwrap_err();
        assert!(
            matches!(&err, ClockOffsetError::Unreachable { url: u, .. } if *u == url),
            "{err:?}"
        );
    }

    /// The narrowest of several ticks wins, and a jump of two seconds (a stall across a
    /// tick) bounds nothing.
    #[test]
    fn the_narrowest_one_second_tick_wins() {
        let s = |sent_ms, received_ms, date_s| Sample {
            sent_ms,
            received_ms,
            date_s,
        };
        let samples = [
            s(0.0, 10.0, 100),
            s(10.0, 20.0, 101), // tick in (0, 20): 10 ± 10 -> offset 10 - 101,000
            s(20.0, 3000.0, 103), // a jump of two: ignored
            s(3000.0, 3001.0, 103),
            s(3001.0, 3002.0, 104), // tick in (3000, 3002): 3001 ± 1 -> offset -100,999
        ];
        let got = narrowest_tick(&samples).unwrap();
        assert_eq!(
            got,
            ClockOffset {
                offset_ms: 3001.0 - 104_000.0,
                uncertainty_ms: 1.0,
                samples: 5
            }
        );
        assert_eq!(narrowest_tick(&samples[2..4]), None);
    }
}
