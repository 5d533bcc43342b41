//! The accept loop of both front ends, with the limits a server on a network needs: the head
//! of a connection's first request (and its TLS handshake) must arrive within the header
//! timeout, a kept-alive connection may wait for its next request only as long as the idle
//! timeout, a request body must arrive within the body timeout and size limit ([`body`]), and
//! at most `max_connections` are open at once ([`connections`]: at the cap, the oldest one
//! that never carried an accepted request is closed to make room). HTTP/1.1 only, plain or over
//! TLS ([`tls`]).

pub mod body;
pub mod connections;
pub mod tls;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tower::ServiceExt;

pub use body::{BodyLimits, DEFAULT_BODY_TIMEOUT, MAX_BODY_BYTES};
pub use connections::Connection;
use connections::{Registration, Registry};
pub use tls::{TlsConfig, TlsError};

/// Default: how long the head of a connection's first request may take to arrive.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default: how long a kept-alive connection may wait for the head of its next request.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default: how many connections may be open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// File descriptors kept free for everything else the server opens (ledger, logs, children).
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// The limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub body: BodyLimits,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body: BodyLimits::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Raises this process's soft limit on open files to its hard limit and returns how many
/// connections fit under it with [`RESERVED_DESCRIPTORS`] to spare (at least 16), so the cap
/// is met before descriptors run out. `None`: the limits could not be read.
pub fn connections_within_descriptor_limit() -> Option<usize> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let usable = soft.saturating_sub(RESERVED_DESCRIPTORS).max(16);
    Some(usize::try_from(usable).unwrap_or(usize::MAX))
}

/// Serves `app` on `listener` under `limits` (over TLS when `tls` is given) until `shutdown`
/// completes. Open connections (event streams among them) are not waited for.
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    tls: Option<TlsConfig>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let registry = Registry::new(limits.max_connections);
    let acceptor = tls.map(|config| tokio_rustls::TlsAcceptor::from(config.0));
    let body_limits = Arc::new(limits.body);
    let accepting = async {
        loop {
            registry.make_room().await;
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                // Out of descriptors or a connection reset before it was accepted: wait a
                // little rather than spin, then go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let registration = registry.register();
            let app = app.clone();
            let acceptor = acceptor.clone();
            let body_limits = Arc::clone(&body_limits);
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + limits.header_timeout;
                match acceptor {
                    None => {
                        serve_connection(
                            stream,
                            peer,
                            registration,
                            app,
                            limits,
                            body_limits,
                            deadline,
                        )
                        .await;
                    }
                    Some(acceptor) => {
                        let handshake =
                            tokio::time::timeout_at(deadline, acceptor.accept(stream)).await;
                        if let Ok(Ok(stream)) = handshake {
                            serve_connection(
                                stream,
                                peer,
                                registration,
                                app,
                                limits,
                                body_limits,
                                deadline,
                            )
                            .await;
                        }
                    }
                }
            });
        }
    };
    tokio::select! {
        () = accepting => Ok(()),
        () = shutdown => Ok(()),
    }
}

/// One connection from `peer`, until it ends, its first request head misses `deadline`, or the
/// registry closes it to make room. Its requests carry the peer's address as axum's
/// [`ConnectInfo`](axum::extract::ConnectInfo) (the sign-in throttle counts failures by it).
async fn serve_connection<IO>(
    io: IO,
    peer: std::net::SocketAddr,
    registration: Registration,
    app: Router,
    limits: Limits,
    body_limits: Arc<BodyLimits>,
    deadline: tokio::time::Instant,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = Arc::clone(&registration.connection);
    let service = {
        let connection = Arc::clone(&connection);
        hyper::service::service_fn(move |mut request: Request<Incoming>| {
            connection.mark_started();
            request.extensions_mut().insert(Arc::clone(&connection));
            request.extensions_mut().insert(Arc::clone(&body_limits));
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            let app = app.clone();
            async move {
                let answer = app.oneshot(request.map(axum::body::Body::new)).await;
                Ok::<_, Infallible>(match answer {
                    Ok(response) => response,
                    Err(never) => match never {},
                })
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout.max(Duration::from_millis(1)))
        .keep_alive(true);
    let served = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    let first_head = tokio::time::sleep_until(deadline);
    tokio::pin!(first_head);
    let mut head_arrived = false;
    loop {
        tokio::select! {
            _ = &mut served => break,
            () = &mut first_head, if !head_arrived => {
                if !connection.has_started() {
                    break;
                }
                head_arrived = true;
            }
            () = connection.evicted() => break,
        }
    }
    drop(registration);
}
