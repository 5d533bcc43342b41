//! A TCP proxy that injects the faults a database restart or failover causes, for tests of
//! clients riding them out: every open connection cut and new ones refused for a while
//! ([`FaultProxy::outage`]), or one connection cut right after the client's `COMMIT` reached
//! the server, so the transaction is stored and its answer lost
//! ([`FaultProxy::cut_after_commit`]). Loopback only.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The `host:port` of a `scheme://user@host:port/…` URL on an IP address.
pub fn upstream_of(url: &str) -> Option<SocketAddr> {
    let rest = url.split_once("://")?.1;
    let after_at = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    after_at.split(['/', '?']).next()?.parse().ok()
}

/// A TCP proxy in front of the server whose faults a test switches on.
pub struct FaultProxy {
    address: SocketAddr,
    refusing: Arc<AtomicBool>,
    /// Armed by a test: the next chunk holding `COMMIT` reaches the server, then the
    /// connection is cut before the answer comes back (the fault disarms itself).
    pub cut_after_commit: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let proxy = Self {
            address,
            refusing: Arc::new(AtomicBool::new(false)),
            cut_after_commit: Arc::new(AtomicBool::new(false)),
            open: Arc::new(Mutex::new(Vec::new())),
        };
        let (refusing, cut, open) = (
            Arc::clone(&proxy.refusing),
            Arc::clone(&proxy.cut_after_commit),
            Arc::clone(&proxy.open),
        );
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if refusing.load(Ordering::SeqCst) {
                    // As a server that is down: the connection ends at once.
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let mut tracked = open.lock().unwrap_or_else(PoisonError::into_inner);
                tracked.extend(client.try_clone().ok());
                tracked.extend(server.try_clone().ok());
                drop(tracked);
                // Set while a cut is under way: the server's answer is never relayed.
                let muted = Arc::new(AtomicBool::new(false));
                let to_server = Fault {
                    cut: Some(Arc::clone(&cut)),
                    muted: Arc::clone(&muted),
                };
                pump(client.try_clone(), server.try_clone(), to_server);
                let to_client = Fault { cut: None, muted };
                pump(server.try_clone(), client.try_clone(), to_client);
            }
        });
        Ok(proxy)
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Cuts every open connection and refuses new ones for `length`.
    pub fn outage(&self, length: Duration) -> std::thread::JoinHandle<()> {
        self.refusing.store(true, Ordering::SeqCst);
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(PoisonError::into_inner));
        for stream in open {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let refusing = Arc::clone(&self.refusing);
        std::thread::spawn(move || {
            std::thread::sleep(length);
            refusing.store(false, Ordering::SeqCst);
        })
    }

    /// `server_url` (`scheme://user@host:port/…`) pointed at this proxy instead.
    pub fn url(&self, server_url: &str) -> String {
        let (scheme, rest) = server_url
            .split_once("://")
            .unwrap_or(("postgres", server_url));
        let (user_info, after_at) = rest.rsplit_once('@').map_or(("", rest), |(u, h)| (u, h));
        let tail = after_at.find(['/', '?']).map_or("", |at| &after_at[at..]);
        let at = if user_info.is_empty() { "" } else { "@" };
        format!("{scheme}://{user_info}{at}{}{tail}", self.address)
    }
}

/// The fault one direction of a connection may inject.
struct Fault {
    /// Client to server: when armed, the next chunk holding `COMMIT` reaches the server and
    /// then both connections are cut.
    cut: Option<Arc<AtomicBool>>,
    /// Server to client: set once such a cut began, so no answer comes back.
    muted: Arc<AtomicBool>,
}

/// Copies `from` to `to` on a thread, injecting `fault`.
fn pump(from: std::io::Result<TcpStream>, to: std::io::Result<TcpStream>, fault: Fault) {
    let (Ok(mut from), Ok(mut to)) = (from, to) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        while let Ok(read) = from.read(&mut buffer) {
            let chunk = &buffer[..read];
            let commits = chunk.windows(6).any(|window| window == b"COMMIT");
            let cutting = commits
                && fault
                    .cut
                    .as_ref()
                    .is_some_and(|cut| cut.swap(false, Ordering::SeqCst));
            if cutting {
                fault.muted.store(true, Ordering::SeqCst);
            }
            if read == 0 || fault.muted.load(Ordering::SeqCst) && fault.cut.is_none() {
                break;
            }
            if to.write_all(chunk).is_err() {
                break;
            }
            if cutting {
                // Let the server commit, then cut before its answer can come back.
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}
