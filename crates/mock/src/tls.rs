//! An https front for the mock server (`bench mock-server --tls-cert C --tls-key K`): it
//! accepts TLS connections and relays their bytes to the plain-HTTP mock behind it, so a
//! client's https path (certificate checks, `--insecure`) can be tried on loopback with a
//! self-signed certificate, as users meet it in front of real servers.
//!
//! A relay rather than TLS inside the mock's own listener: the mock's fault injection and
//! connection closing act on its plain TCP connections, and stay the same behind the front.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A running https front; dropping it stops accepting connections.
pub struct TlsFront {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TlsFront {
    /// `https://ADDR`, the base URL clients use.
    pub fn base_url(&self) -> String {
        format!("https://{}", self.addr)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Listens on `listen` (port 0 picks a free one) for TLS connections presenting the PEM
/// certificate chain `cert_pem` with the key `key_pem`, and relays each to `upstream`.
pub async fn front(
    listen: (&str, u16),
    upstream: SocketAddr,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<TlsFront> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("reading the TLS certificate (PEM)")?;
    if certs.is_empty() {
        bail!("the TLS certificate file holds no PEM certificate");
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).context("reading the TLS key (PEM)")?;
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("the TLS certificate and key do not make a server identity")?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = crate::listen::bind(listen.0, listen.1)
        .await
        .with_context(|| format!("binding the TLS front to {}:{}", listen.0, listen.1))?;
    let addr = listener
        .local_addr()
        .context("reading the TLS front's address")?;
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A failed handshake (a client refusing the certificate) or a closed
                // upstream just ends this connection; the client sees the failure itself.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = plain.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    Ok(TlsFront { addr, task })
}
