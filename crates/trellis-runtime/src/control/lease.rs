//! The leases a controller holds: the descriptors a detached controller inherits them (and its
//! ledger's note relay) on, adopting an inherited one, taking one, and the event a controller
//! attaches to its run with.

use std::fs::File;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use trellis_ledger::RunEvent;

use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, LeaseAttempt};

/// The file descriptors a controller inherits its leases on.
pub(crate) const CONTROLLER_LEASE_FD: i32 = 3;
pub(crate) const WORKSPACE_LEASE_FD: i32 = 4;
/// The descriptor a controller inherits its host's relay of ledger notes on, when the
/// environment variable [`NOTE_RELAY_ENV`] names it.
pub(crate) const NOTE_RELAY_FD: i32 = 5;
/// Set by the starting host when the controller inherited a note relay (`relay.rs` of the
/// PostgreSQL ledger); its value is the descriptor.
pub(crate) const NOTE_RELAY_ENV: &str = "TRELLIS_NOTE_RELAY_FD";

/// Adopts a lease whose locked descriptor this process inherited at `fd`.
pub(crate) fn inherited_lease(fd: i32) -> Result<Lease, RuntimeError> {
    // SAFETY: fcntl(F_GETFD) only inspects the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(RuntimeError::ControllerStart(format!(
            "lease descriptor {fd} was not inherited; controllers are started by `trellis run`"
        )));
    }
    // Workers must not inherit the lease: it has to die with this process.
    // SAFETY: fcntl(F_SETFD) only changes the descriptor's close-on-exec flag.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(RuntimeError::io(
            "cannot protect the lease descriptor",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: the descriptor is open (checked above) and owned by nothing else in this process.
    let file = unsafe { File::from_raw_fd(fd) };
    Ok(Lease::from_inherited(file))
}

/// The relay of ledger notes this controller inherited from the host that started it, if any
/// (anything else on that descriptor is left alone: the controller then listens itself).
pub(crate) fn inherited_note_relay() -> Option<UnixStream> {
    let fd: i32 = std::env::var(NOTE_RELAY_ENV).ok()?.parse().ok()?;
    if fd != NOTE_RELAY_FD {
        return None;
    }
    // SAFETY: fcntl(F_GETFD) only inspects the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    let mut kind: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `length` bytes into `kind`, a c_int.
    let answered = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut length,
        )
    };
    if answered < 0 || kind != libc::SOCK_STREAM {
        return None;
    }
    // Steps must not inherit it: the host would forward notes to whoever holds it.
    // SAFETY: fcntl(F_SETFD) only changes the descriptor's close-on-exec flag.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return None;
    }
    // SAFETY: the descriptor is open, a stream socket (checked above) and owned by nothing
    // else in this process: the starting host placed it here for this use alone.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    // A stream socket of another family (TCP) has no Unix address.
    stream.local_addr().ok()?;
    Some(stream)
}

/// The two leases a controller holds for its whole life: its run's and its workspace's.
pub(crate) struct Leases {
    pub controller: Lease,
    pub workspace: Lease,
}

/// Takes the lease at `path`; `None` when another process holds it.
pub(crate) fn acquire(path: &Path) -> Result<Option<Lease>, RuntimeError> {
    match Lease::try_acquire(path).map_err(|e| RuntimeError::io("cannot take a lease", e))? {
        LeaseAttempt::Acquired(lease) => Ok(Some(lease)),
        LeaseAttempt::HeldElsewhere => Ok(None),
    }
}

/// The `controller_attached` event describing this process.
pub(crate) fn controller_attached() -> RunEvent {
    RunEvent::ControllerAttached {
        pid: std::process::id(),
        started_at_ms: trellis_ledger::store::now_ms(),
        host: hostname(),
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_owned()),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}
