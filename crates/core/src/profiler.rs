//! vLLM's `--profile`: the server's profiler started before the measured run and stopped
//! after it, by `POST /start_profile` and `/stop_profile`.

use anyhow::Result;

use crate::prepare::HostHeaders;

/// Which end of the run a `--profile` call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfilerStep {
    /// `POST /start_profile` is about to be sent (before the run, after the warm-ups).
    Starting,
    /// The server answered it with 200.
    Started,
    /// `POST /stop_profile` is about to be sent (after the results are shown).
    Stopping,
    /// The server answered it with 200.
    Stopped,
}

/// vLLM's `--profile`: `POST {base_url}/start_profile` and `/stop_profile`, with no body
/// and the run's headers (`Authorization` from `OPENAI_API_KEY`, then `--header`); to
/// every server of a run with several `--base-url`s, in their order.
#[derive(Debug, Clone)]
pub struct Profiler {
    base_urls: Vec<String>,
    headers: HostHeaders,
    client: reqwest::Client,
}

impl Profiler {
    /// A profiler of the servers at `base_urls` (no trailing slash), reached through
    /// `client` (the run's TLS settings).
    pub fn new(base_urls: &[String], headers: HostHeaders, client: reqwest::Client) -> Profiler {
        Profiler {
            base_urls: base_urls.to_vec(),
            headers,
            client,
        }
    }

    /// `POST /start_profile`.
    pub async fn start(&self) -> Result<(), String> {
        self.call("/start_profile").await
    }

    /// `POST /stop_profile`.
    pub async fn stop(&self) -> Result<(), String> {
        self.call("/stop_profile").await
    }

    /// `path` on every server: the first error (after every server was called), if any.
    async fn call(&self, path: &str) -> Result<(), String> {
        let mut first_error = Ok(());
        for base_url in &self.base_urls {
            let called = self.call_one(base_url, path).await;
            if first_error.is_ok() {
                first_error = called;
            }
        }
        first_error
    }

    /// What vLLM counts as success: status 200; anything else, or no answer, is an error
    /// whose text says what came back.
    async fn call_one(&self, base_url: &str, path: &str) -> Result<(), String> {
        let url = format!("{base_url}{path}");
        let mut request = self.client.post(&url);
        if let Some(key) = &self.headers.api_key {
            request = request.bearer_auth(key);
        }
        for (k, v) in &self.headers.extra {
            request = request.header(k, v);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("POST {url}: {e}"))?;
        match response.status() {
            reqwest::StatusCode::OK => Ok(()),
            status => Err(format!("POST {url}: HTTP {status}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers one request with `status` and hands back what it read.
    async fn answer_once(status: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed before its request head ended");
                head.extend_from_slice(&buf[..n]);
            }
            let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
            conn.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&head).into_owned()
        });
        (url, served)
    }

    #[tokio::test]
    async fn the_profiler_posts_with_the_runs_headers_and_only_200_is_success() {
        let headers = HostHeaders {
            api_key: Some("k3y".into()),
            extra: vec![("x-team".into(), "bench".into())],
        };
        let (url, served) = answer_once("200 OK").await;
        let profiler = Profiler::new(
            std::slice::from_ref(&url),
            headers.clone(),
            reqwest::Client::new(),
        );
        assert_eq!(profiler.start().await, Ok(()));
        let head = served.await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /start_profile http/1.1"), "{head}");
        assert!(head.contains("authorization: bearer k3y"), "{head}");
        assert!(head.contains("x-team: bench"), "{head}");

        let (url, served) = answer_once("404 Not Found").await;
        let profiler = Profiler::new(
            std::slice::from_ref(&url),
            headers.clone(),
            reqwest::Client::new(),
        );
        let err = profiler.stop().await.unwrap_err();
        assert!(
            err.contains("/stop_profile") && err.contains("404"),
            "{err}"
        );
        served.await.unwrap();

        // Nothing listening: an error, not a panic.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let profiler = Profiler::new(
            std::slice::from_ref(&closed),
            headers,
            reqwest::Client::new(),
        );
        assert!(profiler.start().await.is_err());
    }
}
