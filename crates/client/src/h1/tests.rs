use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::{HttpClient, HttpClientKind, Tls};
use bench_mock::{self as mock, Closing, Faults, MockConfig, SilentClose};

/// Feeds `pieces` one read at a time, the way [`H1Client::read_body`] does; returns the
/// payload and whether the body ended, or the framing error.
fn decode(kind: BodyKind, pieces: &[&[u8]]) -> Result<(Vec<u8>, bool), &'static str> {
    let mut body = Body::new(kind);
    let (mut pending, mut payload) = (Vec::new(), Vec::new());
    for piece in pieces {
        pending.extend_from_slice(piece);
        loop {
            let (used, step) = body.next(&pending);
            match step {
                Step::Data(s, e) => payload.extend_from_slice(&pending[s..e]),
                Step::More => {}
                Step::End => {
                    pending.drain(..used);
                    assert!(pending.is_empty(), "bytes left after the end");
                    return Ok((payload, true));
                }
                Step::Invalid(why) => return Err(why),
            }
            pending.drain(..used);
            if step == Step::More {
                break;
            }
        }
    }
    Ok((payload, false))
}

fn chunked(payloads: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        // Upper and lower case hex, and an extension on every other chunk.
        let size = if i % 2 == 0 {
            format!("{:x}", p.len())
        } else {
            format!("{:X};name=value", p.len())
        };
        out.extend_from_slice(size.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nx-trailer: 1\r\n\r\n");
    out
}

#[test]
fn chunked_bodies_decode_the_same_however_the_reads_split_them() {
    let payloads: [&[u8]; 4] = [
        b"data: {\"a\":1}\n\n",
        b"data: \xc3\xa9t\xc3\xa9\n\n",
        &[b'x'; 300],
        b"data: [DONE]\n\n",
    ];
    let wire = chunked(&payloads);
    let want = payloads.concat();
    for i in 0..=wire.len() {
        for j in i..=wire.len() {
            let got = decode(BodyKind::Chunked, &[&wire[..i], &wire[i..j], &wire[j..]]);
            assert_eq!(got, Ok((want.clone(), true)), "split at {i} and {j}");
        }
    }
    // Without its terminator the body has not ended.
    let cut = &wire[..wire.len() - 2];
    assert_eq!(decode(BodyKind::Chunked, &[cut]), Ok((want, false)));
}

#[test]
fn broken_chunked_framing_is_refused() {
    assert_eq!(
        decode(BodyKind::Chunked, &[b"zz\r\nab\r\n"]),
        Err("an invalid chunk-size line")
    );
    assert_eq!(
        decode(BodyKind::Chunked, &[b"2\r\nabc\r\n"]),
        Err("a chunk longer than its size")
    );
    assert_eq!(
        decode(BodyKind::Chunked, &[&[b'1'; MAX_LINE + 1]]),
        Err("a chunk-size line that never ends")
    );
    assert_eq!(chunk_size(b"ffffffffffffffff"), None, "too many digits");
    assert_eq!(chunk_size(b"1a ; x\r"), Some(26));
    assert_eq!(chunk_size(b"\r"), None);
}

#[test]
fn length_and_close_delimited_bodies() {
    assert_eq!(
        decode(BodyKind::Length(5), &[b"ab", b"cde"]),
        Ok((b"abcde".to_vec(), true))
    );
    assert_eq!(
        decode(BodyKind::Length(5), &[b"ab"]),
        Ok((b"ab".to_vec(), false))
    );
    assert_eq!(decode(BodyKind::Empty, &[b""]), Ok((Vec::new(), true)));
    // Ends only when the connection does.
    assert_eq!(
        decode(BodyKind::UntilClose, &[b"ab", b"c"]),
        Ok((b"abc".to_vec(), false))
    );
}

#[test]
fn response_heads_say_how_the_body_ends_and_whether_to_reuse() {
    let head = |text: &str| parse_head(text.as_bytes(), false).unwrap().unwrap();
    let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\nrest");
    assert_eq!(
        (h.status, h.body, h.keep_alive),
        (200, BodyKind::Chunked, true)
    );
    assert_eq!(h.len, 66);
    let h = head("HTTP/1.1 200 OK\r\ncontent-length: 12\r\nconnection: Close\r\n\r\n");
    assert_eq!((h.body, h.keep_alive), (BodyKind::Length(12), false));
    let h = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n");
    assert!(!h.keep_alive, "HTTP/1.0 closes by default");
    let h = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n");
    assert!(h.keep_alive);
    let h = head("HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!((h.body, h.keep_alive), (BodyKind::UntilClose, false));
    let h = head("HTTP/1.1 204 No Content\r\n\r\n");
    assert_eq!((h.body, h.keep_alive), (BodyKind::Empty, true));
    assert!(
        parse_head(b"HTTP/1.1 200 OK\r\nContent-", false)
            .unwrap()
            .is_none()
    );
    assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n", false).is_err());
    assert!(
        parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            false
        )
        .is_err()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
    ))]
    /// Any payloads, chunked any way and read in any pieces, come out whole and in order.
    #[test]
    fn fuzz_chunked_decoding(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..200), 0..12),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let wire = chunked(&refs);
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(wire.len() + 1)).collect();
        at.sort_unstable();
        let mut pieces = Vec::new();
        let mut last = 0;
        for &c in &at {
            pieces.push(&wire[last..c]);
            last = c;
        }
        pieces.push(&wire[last..]);
        prop_assert_eq!(decode(BodyKind::Chunked, &pieces), Ok((payloads.concat(), true)));
    }
}

fn request(body: &str) -> PreparedRequest {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    PreparedRequest {
        session: None,
        index: 0,
        request_id: "r".into(),
        method: reqwest::Method::POST,
        headers,
        body: Bytes::from(body.to_owned()),
        prompt_len: 1,
        expected_output_len: 1,
        check: None,
    }
}

const STREAM: &str =
    r#"{"model":"mock","prompt":"hi","max_tokens":6,"stream":true,"ignore_eos":true}"#;
const WHOLE: &str = r#"{"model":"mock","prompt":"hi","max_tokens":6,"stream":false}"#;

fn client(url: &str, framing: FramingKind, kind: HttpClientKind) -> HttpClient {
    HttpClient::new(
        url,
        framing,
        Some(Duration::from_millis(800)),
        kind,
        Tls::Verify,
    )
    .unwrap()
}

/// What a response amounts to, for comparing the two clients: status, frame payloads,
/// and the failure kind.
fn summary(r: &RawResponse) -> (Option<u16>, Vec<String>, Option<String>) {
    let frames = r
        .frames
        .iter()
        .map(|f| {
            // Ids and timestamps differ per request; the text and the shape do not.
            serde_json::from_slice::<serde_json::Value>(f)
                .map(|v| v["choices"].to_string())
                .unwrap_or_else(|_| {
                    let text = String::from_utf8_lossy(f);
                    text.split("\"choices\":")
                        .last()
                        .unwrap_or_default()
                        .to_owned()
                })
        })
        .collect();
    let kind = r.error.as_ref().map(|e| e.kind.to_string());
    assert_eq!(r.frames.len(), r.frame_times.len());
    (r.status, frames, kind)
}

/// Each fault mode of the mock server, streamed and not: bench's HTTP/1.1 client sees
/// exactly what reqwest sees, and fails with the same kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_clients_agree_on_every_kind_of_response() {
    let modes: Vec<(&str, Faults, Option<&str>)> = vec![
        ("clean", Faults::default(), None),
        (
            "http error",
            Faults {
                http_error_rate: 1.0,
                http_error_status: 503,
                ..Faults::default()
            },
            Some("http-503"),
        ),
        (
            "reset",
            Faults {
                reset_rate: 1.0,
                ..Faults::default()
            },
            Some("reset"),
        ),
        (
            "cut",
            Faults {
                cut_rate: 1.0,
                ..Faults::default()
            },
            Some("stream-cut"),
        ),
        (
            "malformed",
            Faults {
                malformed_rate: 1.0,
                ..Faults::default()
            },
            None,
        ),
        (
            "stall",
            Faults {
                stall_rate: 1.0,
                ..Faults::default()
            },
            Some("timeout"),
        ),
        (
            "no [DONE]",
            Faults {
                no_done_rate: 1.0,
                ..Faults::default()
            },
            None,
        ),
        (
            "dribble",
            Faults {
                dribble_rate: 1.0,
                ..Faults::default()
            },
            None,
        ),
    ];
    for (name, faults, want_kind) in modes {
        let server = mock::spawn(MockConfig {
            faults,
            ..MockConfig::default()
        })
        .await
        .unwrap();
        for (body, framing, path) in [
            (STREAM, FramingKind::Sse, "/v1/completions"),
            (WHOLE, FramingKind::Raw, "/v1/completions"),
        ] {
            let url = format!("{}{path}", server.base_url());
            let req = request(body);
            let ours = client(&url, framing, HttpClientKind::H1).send(&req).await;
            let theirs = client(&url, framing, HttpClientKind::Reqwest)
                .send(&req)
                .await;
            let (ours, theirs) = (summary(&ours), summary(&theirs));
            assert_eq!(ours, theirs, "{name}, {framing:?}");
            assert_eq!(ours.2.as_deref(), want_kind, "{name}, {framing:?}");
            if want_kind.is_none() {
                assert_eq!(ours.0, Some(200));
                let min = if framing == FramingKind::Sse { 6 } else { 1 };
                assert!(ours.1.len() >= min, "{name}, {framing:?}: {:?}", ours.1);
            }
        }
    }
    // Nobody listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1/completions");
    let r = client(&url, FramingKind::Sse, HttpClientKind::H1)
        .send(&request(STREAM))
        .await;
    let error = r.error.unwrap().to_string();
    assert!(
        error.starts_with("connect: ") && error.contains("refused"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_reused_and_never_cap_concurrency() {
    let server = mock::spawn(MockConfig {
        itl: Duration::from_millis(2),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let url = format!("{}/v1/completions", server.base_url());
    let c = client(&url, FramingKind::Sse, HttpClientKind::H1);
    let req = request(STREAM);
    for _ in 0..10 {
        assert!(c.send(&req).await.error.is_none());
    }
    let idle = |c: &HttpClient| c.h1.as_ref().unwrap().idle.lock().unwrap().len();
    assert_eq!(idle(&c), 1, "ten requests in turn share one connection");
    let all = futures_util::future::join_all((0..12).map(|_| c.send(&req))).await;
    assert!(all.iter().all(|r| r.error.is_none() && r.frames.len() == 6));
    assert_eq!(idle(&c), 12, "twelve at once open twelve connections");

    // Opened ahead, connections are what the run uses: no new ones.
    let c = client(&url, FramingKind::Sse, HttpClientKind::H1);
    c.preconnect(8).await.unwrap();
    assert_eq!(idle(&c), 8);
    let all = futures_util::future::join_all((0..8).map(|_| c.send(&req))).await;
    assert!(all.iter().all(|r| r.error.is_none()));
    assert_eq!(idle(&c), 8);
    c.preconnect(8).await.unwrap();
    assert_eq!(idle(&c), 8, "tops up to n, never beyond");
}

/// A one-connection-at-a-time server on a thread: `serve(n, stream)` answers the `n`th
/// connection (from 0). Returns the URL and the number of connections accepted so far.
fn raw_server(
    serve: impl Fn(usize, std::net::TcpStream) + Send + 'static,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/completions", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            serve(n, stream.unwrap());
        }
    });
    (url, accepted)
}

fn accepted(count: &std::sync::atomic::AtomicUsize) -> usize {
    count.load(std::sync::atomic::Ordering::SeqCst)
}

/// Reads one request (head and Content-Length body) off the stream.
fn read_request(s: &mut std::net::TcpStream) {
    assert!(try_read_request(s), "a request");
}

/// Reads one request off the stream; false when the client closed the connection instead.
fn try_read_request(s: &mut std::net::TcpStream) -> bool {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap_or(0) == 0 {
            assert!(got.is_empty(), "the client closed inside a request");
            return false;
        }
        got.push(byte[0]);
    }
    let head = String::from_utf8(got).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .parse()
        .unwrap();
    s.read_exact(&mut vec![0; len]).unwrap();
    true
}

/// Reads until the client closes the connection.
fn read_to_close(s: &mut std::net::TcpStream) {
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_closed_while_idle_is_not_used() {
    let (url, count) = raw_server(|_, mut s| {
        read_request(&mut s);
        s.write_all(OK).unwrap();
        // Keep-alive was promised; close anyway, as servers do after their idle timeout.
    });
    let c = client(&url, FramingKind::Raw, HttpClientKind::H1);
    let first = c.send(&request("{}")).await;
    assert_eq!(summary(&first), (Some(200), vec!["ok".into()], None));
    // Wait for the server's FIN to reach the pooled connection (peeking leaves it there).
    let h1 = c.h1.as_ref().unwrap();
    let conn = h1.idle.lock().unwrap().pop().expect("pooled");
    assert_eq!(conn.stream.peek(&mut [0u8; 1]).await.unwrap(), 0, "a FIN");
    h1.put_back(conn);
    let second = c.send(&request("{}")).await;
    assert_eq!(summary(&second), (Some(200), vec!["ok".into()], None));
    assert!(
        !second.retried,
        "the check found the close; nothing was resent"
    );
    assert_eq!(accepted(&count), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_is_timestamped_when_it_arrives() {
    let (url, _) = raw_server(|_, mut s| {
        read_request(&mut s);
        s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            .unwrap();
        s.write_all(b"a\r\ndata: one\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(150));
        s.write_all(b"a\r\ndata: two\n\r\n").unwrap();
        // The event's blank line, in a read of its own 100 ms later.
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(b"1\r\n\n\r\n").unwrap();
        // [DONE], then the connection stays open without the chunked terminator: the
        // response is complete and the connection is dropped after a short wait.
        s.write_all(b"f\r\ndata: [DONE]\n\n\r\n").unwrap();
        std::thread::sleep(Duration::from_secs(3));
    });
    let c = client(&url, FramingKind::Sse, HttpClientKind::H1);
    let started = Instant::now();
    let r = c.send(&request("{}")).await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let frames: Vec<&[u8]> = r.frames.iter().collect();
    assert_eq!(frames, [b"one\ntwo".as_slice()]);
    // The frame was completed by the read of the blank line, 250 ms in.
    let at = r.frame_times[0] - r.start;
    assert!(at >= Duration::from_millis(250), "{at:?}");
    assert!(at < Duration::from_millis(400), "{at:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "waited for the terminator"
    );
    let idle = c.h1.as_ref().unwrap().idle.lock().unwrap().len();
    assert_eq!(idle, 0, "a connection whose body never ended is not reused");
}

/// Sends `n` streamed requests through `c`, `concurrency` at a time, each worker one after
/// the other.
async fn run_requests(c: &HttpClient, n: usize, concurrency: usize) -> Vec<RawResponse> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let req = request(STREAM);
    let workers = (0..concurrency).map(|_| async {
        let mut got = Vec::new();
        while next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < n {
            got.push(c.send(&req).await);
        }
        got
    });
    futures_util::future::join_all(workers)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Every way a real server ends kept-alive connections, against both clients, one
/// request at a time and four: no request is lost, and a request is sent again exactly
/// when the server dropped it unanswered on a connection it had given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_way_of_closing_connections_costs_a_request_with_either_client() {
    let modes = [
        (
            "connection: close",
            Closing {
                connection_close: true,
                ..Closing::default()
            },
        ),
        (
            "3 requests per connection",
            Closing {
                keep_alive_requests: Some(3),
                ..Closing::default()
            },
        ),
        (
            // Closes race the next request on every connection.
            "idle timeout of 1 ms",
            Closing {
                idle_timeout_ms: Some(1),
                ..Closing::default()
            },
        ),
        (
            "silent close after each stream",
            Closing {
                close_after_stream: Some(SilentClose::AtOnce),
                ..Closing::default()
            },
        ),
        (
            "silent close on the next request",
            Closing {
                close_after_stream: Some(SilentClose::OnReuse),
                ..Closing::default()
            },
        ),
    ];
    for (name, closing) in modes {
        for kind in [HttpClientKind::H1, HttpClientKind::Reqwest] {
            for concurrency in [1, 4] {
                let case = format!("{name}, {kind:?}, concurrency {concurrency}");
                let server = mock::spawn(MockConfig {
                    closing: closing.clone(),
                    ..MockConfig::default()
                })
                .await
                .unwrap();
                let url = format!("{}/v1/completions", server.base_url());
                let c = HttpClient::new(
                    &url,
                    FramingKind::Sse,
                    Some(Duration::from_secs(10)),
                    kind,
                    Tls::Verify,
                )
                .unwrap();
                let all = run_requests(&c, 40, concurrency).await;
                assert_eq!(all.len(), 40);
                for r in &all {
                    assert_eq!(r.error, None, "{case}, resent: {}", r.retried);
                    assert_eq!((r.status, r.frames.len()), (Some(200), 6), "{case}");
                }
                let retried = all.iter().filter(|r| r.retried).count() as u64;
                // The server counts a dropped request when it reads it, which can be
                // after the client saw the close and resent it.
                let deadline = Instant::now() + Duration::from_secs(5);
                while server.dropped_requests() < retried && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(retried, server.dropped_requests(), "{case}");
                if closing.connection_close || closing.keep_alive_requests.is_some() {
                    // Announced closes: nothing is ever lost, so nothing is resent.
                    assert_eq!(retried, 0, "{case}");
                }
                if closing.connection_close {
                    assert_eq!(server.connections(), 40, "{case}");
                }
                if closing.keep_alive_requests.is_some() {
                    // At most 3 a connection; bench's client, one at a time, uses each
                    // to the end (hyper may open a new one before the last is back).
                    let least = 40u64.div_ceil(3);
                    assert!(server.connections() >= least, "{case}");
                    if kind == HttpClientKind::H1 && concurrency == 1 {
                        assert_eq!(server.connections(), least, "{case}");
                    }
                }
                if closing.close_after_stream == Some(SilentClose::OnReuse)
                    && kind == HttpClientKind::H1
                    && concurrency == 1
                {
                    // Every request after the first reuses the connection of the one
                    // before, which the server drops: each is resent once, on a new one.
                    assert_eq!((retried, server.connections()), (39, 40), "{case}");
                }
            }
        }
    }
}

/// A raw server for the resend rules: connection 0 answers its first request and then
/// handles the next one as `second` says; every later connection is handled by `later`.
/// Returns the URL, the accepted-connection count, and whether connection 0 got a second
/// request (reqwest may open a new connection instead of reusing it).
fn second_request_server(
    second: fn(&mut std::net::TcpStream),
    later: fn(&mut std::net::TcpStream),
) -> (
    String,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let reused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = reused.clone();
    let (url, count) = raw_server(move |n, mut s| {
        if n == 0 {
            read_request(&mut s);
            s.write_all(OK).unwrap();
            if try_read_request(&mut s) {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
                second(&mut s);
            }
        } else {
            later(&mut s);
        }
    });
    (url, count, reused)
}

fn answer(s: &mut std::net::TcpStream) {
    read_request(s);
    s.write_all(OK).unwrap();
    read_to_close(s);
}

fn close_unanswered(s: &mut std::net::TcpStream) {
    read_request(s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_reused_connection_closed_under_it_is_resent_once_timed_from_the_first_try()
{
    const CLOSE_AFTER: Duration = Duration::from_millis(300);
    for kind in [HttpClientKind::H1, HttpClientKind::Reqwest] {
        let (url, count, reused) =
            second_request_server(|_| std::thread::sleep(CLOSE_AFTER), answer);
        let c = HttpClient::new(
            &url,
            FramingKind::Raw,
            Some(Duration::from_secs(10)),
            kind,
            Tls::Verify,
        )
        .unwrap();
        let first = c.send(&request("{}")).await;
        assert_eq!(summary(&first), (Some(200), vec!["ok".into()], None));
        assert!(!first.retried);
        // reqwest hands the connection back to its pool from another task.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = c.send(&request("{}")).await;
        assert_eq!(
            summary(&second),
            (Some(200), vec!["ok".into()], None),
            "{kind:?}"
        );
        let reused = reused.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(second.retried, reused, "{kind:?}");
        if kind == HttpClientKind::H1 {
            assert!(reused, "bench's client reuses the connection it pooled");
        }
        if second.retried {
            // TTFT runs from the first attempt: it includes the wait for the close.
            let ttft = second.frame_times[0] - second.start;
            assert!(ttft >= CLOSE_AFTER, "{kind:?}: {ttft:?}");
        }
        assert_eq!(accepted(&count), 2, "{kind:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_that_closes_unanswered_is_a_reset_not_resent() {
    for kind in [HttpClientKind::H1, HttpClientKind::Reqwest] {
        let (url, count) = raw_server(|_, mut s| close_unanswered(&mut s));
        let r = client(&url, FramingKind::Raw, kind)
            .send(&request("{}"))
            .await;
        let error = r.error.unwrap().to_string();
        assert!(error.starts_with("reset: "), "{kind:?}: {error}");
        assert!(!r.retried, "{kind:?}");
        assert_eq!(accepted(&count), 1, "{kind:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_resent_at_most_once() {
    for kind in [HttpClientKind::H1, HttpClientKind::Reqwest] {
        let (url, count, reused) = second_request_server(|_| {}, close_unanswered);
        let c = client(&url, FramingKind::Raw, kind);
        assert_eq!(c.send(&request("{}")).await.error, None);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = c.send(&request("{}")).await;
        let error = r.error.unwrap().to_string();
        assert!(error.starts_with("reset: "), "{kind:?}: {error}");
        assert_eq!(r.retried, reused.load(std::sync::atomic::Ordering::SeqCst));
        // Reused and resent, or new and not: two connections either way, never three.
        assert_eq!(accepted(&count), 2, "{kind:?}");
    }
}

/// Once a byte of the response arrived, the server was answering: no resend. (reqwest
/// cannot tell a partial head from none, see `HttpClient::reqwest_head`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_connection_that_breaks_inside_the_head_is_not_resent() {
    let (url, count, reused) = second_request_server(
        |s| s.write_all(b"HTTP/1.1 200 OK\r\ncontent-").unwrap(),
        answer,
    );
    let c = client(&url, FramingKind::Raw, HttpClientKind::H1);
    assert_eq!(c.send(&request("{}")).await.error, None);
    let r = c.send(&request("{}")).await;
    assert!(reused.load(std::sync::atomic::Ordering::SeqCst));
    let error = r.error.unwrap().to_string();
    assert_eq!(
        error,
        "reset: the connection was closed before a response head arrived"
    );
    assert!(!r.retried);
    assert_eq!(accepted(&count), 1);
}

/// `Connection: close` and HTTP/1.0 without keep-alive: the connection is never pooled,
/// even when the server leaves it open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_closes_its_connection_is_never_reused() {
    const CLOSING: [&[u8]; 2] = [
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
    ];
    for response in CLOSING {
        for kind in [HttpClientKind::H1, HttpClientKind::Reqwest] {
            let (url, count) = raw_server(move |_, mut s| {
                read_request(&mut s);
                s.write_all(response).unwrap();
                // A request sent here anyway would never be answered.
                read_to_close(&mut s);
            });
            let c = client(&url, FramingKind::Raw, kind);
            for _ in 0..2 {
                let r = c.send(&request("{}")).await;
                assert_eq!(
                    summary(&r),
                    (Some(200), vec!["ok".into()], None),
                    "{kind:?}"
                );
                assert!(!r.retried);
            }
            assert_eq!(accepted(&count), 2, "{kind:?}");
        }
    }
}

#[test]
fn keep_alive_timeouts_are_read_from_the_header() {
    let secs = |v: &[u8]| keep_alive_timeout(v).map(|d| d.as_secs());
    assert_eq!(secs(b"timeout=5, max=100"), Some(5));
    assert_eq!(secs(b"max=100,Timeout=60"), Some(60));
    assert_eq!(secs(b"max=100"), None);
    assert_eq!(secs(b"timeout=soon"), None);
    let head = parse_head(
        b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\ncontent-length: 0\r\n\r\n",
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(head.idle_limit, Some(Duration::from_secs(5)));
}

/// A connection idle for (nearly) the server's announced `Keep-Alive: timeout` is not
/// reused: the server is about to close it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_near_the_servers_idle_timeout_is_not_reused() {
    for (timeout, connections) in [(1, 2), (60, 1)] {
        let (url, count) = raw_server(move |_, mut s| {
            while try_read_request(&mut s) {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nkeep-alive: timeout={timeout}, max=100\r\n\
                     content-length: 2\r\n\r\nok"
                );
                s.write_all(head.as_bytes()).unwrap();
            }
        });
        let c = client(&url, FramingKind::Raw, HttpClientKind::H1);
        assert_eq!(c.send(&request("{}")).await.error, None);
        // Past 1 s less its margin (a quarter), far from 60 s less 1 s.
        tokio::time::sleep(Duration::from_millis(800)).await;
        let r = c.send(&request("{}")).await;
        assert_eq!(summary(&r), (Some(200), vec!["ok".into()], None));
        assert!(!r.retried);
        assert_eq!(accepted(&count), connections, "timeout={timeout}");
    }
}

/// https goes through reqwest: a self-signed certificate is refused by default, with a
/// message that says why, and accepted with `Tls::Insecure` (vLLM's `--insecure`), which
/// then streams the same response as plain HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_checks_the_certificate_unless_insecure() {
    let tls = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/tls");
    let read = |name: &str| std::fs::read(tls.join(name)).unwrap();
    let server = mock::spawn(MockConfig::default()).await.unwrap();
    let front = mock::tls::front(
        ("127.0.0.1", 0),
        server.addr(),
        &read("cert.pem"),
        &read("key.pem"),
    )
    .await
    .unwrap();
    let url = format!("{}/v1/completions", front.base_url());
    let open = |tls: Tls| {
        HttpClient::new(
            &url,
            FramingKind::Sse,
            Some(Duration::from_secs(10)),
            HttpClientKind::Auto,
            tls,
        )
        .unwrap()
    };

    let refused = open(Tls::Verify).send(&request(STREAM)).await;
    let failure = refused
        .error
        .as_ref()
        .expect("a self-signed certificate is refused");
    assert!(
        failure.message.contains("certificate") || failure.message.contains("Certificate"),
        "{failure}"
    );
    assert_eq!(refused.status, None);

    let insecure = open(Tls::Insecure);
    assert_eq!(insecure.transport(), "reqwest");
    let over_tls = insecure.send(&request(STREAM)).await;
    let plain = client(
        &format!("{}/v1/completions", server.base_url()),
        FramingKind::Sse,
        HttpClientKind::Auto,
    )
    .send(&request(STREAM))
    .await;
    assert_eq!(summary(&over_tls), summary(&plain));
    assert_eq!(summary(&over_tls).0, Some(200));
    // max_tokens 6: six chunks, each a token, all through the front.
    assert_eq!(summary(&over_tls).1.len(), 6, "{:?}", summary(&over_tls));
}

/// A request cancelled on purpose (`--request-cancellation-delay`), with either client:
/// its connection is closed the delay after it was sent, what arrived before is kept, the
/// error kind is `cancelled`, and the server records the client's going away; a response
/// that ends before the delay is not cancelled, and the server records nothing for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_on_purpose_closes_its_connection_after_the_delay() {
    let server = mock::spawn(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(10),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let url = format!("{}/v1/completions", server.base_url());
    let with_id = |body: &str, id: &str| {
        let mut req = request(body);
        req.headers.insert("x-request-id", id.parse().unwrap());
        req
    };
    // 100 tokens: 20 ms + 99 x 10 ms, far past the delay; 3 tokens: 40 ms, well before.
    let long = r#"{"model":"mock","prompt":"hi","max_tokens":100,"stream":true}"#;
    let short = r#"{"model":"mock","prompt":"hi","max_tokens":3,"stream":true}"#;
    let delay = Duration::from_millis(150);
    for kind in [HttpClientKind::H1, HttpClientKind::Reqwest] {
        let c = HttpClient::new(&url, FramingKind::Sse, None, kind, Tls::Verify).unwrap();
        let start = Instant::now();
        let r = c
            .send_started(
                &with_id(long, &format!("long-{kind:?}")),
                start,
                Some(delay),
            )
            .await;
        let ended = start.elapsed();
        let error = r.error.expect("cancelled");
        assert_eq!(error.kind, FailureKind::Cancelled, "{kind:?}: {error}");
        assert!(error.message.contains("0.15 s"), "{error}");
        assert!(ended >= delay, "{kind:?}: cancelled after {ended:?}");
        assert!(ended < Duration::from_millis(900), "{kind:?}: {ended:?}");
        // The tokens sent in the 150 ms were kept: about 13, never all 100.
        assert!(
            (1..50).contains(&r.frames.len()),
            "{kind:?}: {} frames",
            r.frames.len()
        );
        let r = c
            .send_started(
                &with_id(short, &format!("short-{kind:?}")),
                Instant::now(),
                Some(delay),
            )
            .await;
        assert_eq!(r.error, None, "{kind:?}");
        assert_eq!(r.frames.len(), 3, "{kind:?}: 3 token chunks");
    }
    // The server learns of a closed connection at its next write (10 ms apart here).
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.aborted().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.aborted(), ["long-H1", "long-Reqwest"]);
    assert_eq!(server.timing().aborted, 2);
}
