//! The mock's listening sockets, bound with a deep accept queue.
//!
//! `TcpListener::bind` asks the kernel for a queue of 1,024 connections. A benchmark at an
//! infinite rate opens every connection at once (10,000 in `tests/e2e/load.rs`); past the
//! queue the kernel drops handshakes or answers them with SYN cookies, and a connection
//! whose cookie arrives while the queue is still full can be reset after the client has
//! sent its request: a failure of the test server's socket, not of the client under test.
//! Real servers listen deeper too (uvicorn, behind vLLM, asks for 2,048). Linux caps the
//! queue at `net.core.somaxconn` (4,096 by default since 5.4).

use std::io;

use tokio::net::{TcpListener, TcpSocket, lookup_host};

/// The accept queue asked for; the kernel takes at most `net.core.somaxconn` of it.
const BACKLOG: u32 = 65_535;

/// Binds `host:port` (the first address of `host` that binds) and listens with [`BACKLOG`].
pub(crate) async fn bind(host: &str, port: u16) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in lookup_host((host, port)).await? {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restarted mock takes its port back at once.
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{host} resolves to no address"),
        )
    }))
}
