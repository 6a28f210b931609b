//! The terminal's network namespace: only `lo` is up, and the only listener
//! in it is the egress guard's.
//!
//! Created once per boot on a short-lived thread (`unshare(CLONE_NEWNET)`
//! changes only the calling thread), which opens a descriptor to the new
//! namespace, brings `lo` up and binds the guard's listening socket there —
//! a socket stays in the namespace it was created in, so the guard process
//! (which runs in the container's namespace, from where it dials upstream)
//! accepts connections that only terminal commands can make. The namespace
//! lives as long as the descriptor; nothing needs cleaning up.
//!
//! No veth, no route: a command in this namespace cannot reach the
//! supervisor, Hermes, DNS or any address outside, over IPv4 or IPv6,
//! whatever it tries, and nothing in the container's (or devhost's host)
//! namespace or firewall is changed.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The namespace and the guard's listener inside it.
pub struct TerminalNetns {
    /// `/proc/thread-self/ns/net` of the namespace (for `setns`).
    pub ns: File,
    /// The egress guard's listening socket, bound inside the namespace.
    pub guard_listener: TcpListener,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn unshare_net() -> io::Result<()> {
    // SAFETY: unshare with a constant flag only changes this thread's
    // network namespace.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(|_| ())
}

/// `struct ifreq` with the `ifr_flags` member (40 bytes on Linux 64-bit).
#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn dgram_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned by the returned OwnedFd.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl_ifreq(sock: &OwnedFd, request: libc::c_ulong, req: &mut IfReqFlags) -> io::Result<()> {
    // SAFETY: `req` is a valid, writable ifreq-sized buffer for
    // SIOCGIFFLAGS/SIOCSIFFLAGS on a live socket.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), request, req as *mut IfReqFlags) }).map(|_| ())
}

/// Bring the loopback interface of the current thread's namespace up.
fn loopback_up() -> io::Result<()> {
    let sock = dgram_socket()?;
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    for (dst, src) in req.name.iter_mut().zip(b"lo") {
        *dst = *src as libc::c_char;
    }
    ioctl_ifreq(&sock, libc::SIOCGIFFLAGS, &mut req)?;
    req.flags |= libc::IFF_UP as libc::c_short;
    ioctl_ifreq(&sock, libc::SIOCSIFFLAGS, &mut req)
}

fn create_on_this_thread(guard_addr: SocketAddr) -> io::Result<TerminalNetns> {
    unshare_net()?;
    let ns = File::open("/proc/thread-self/ns/net")?;
    loopback_up()?;
    let guard_listener = TcpListener::bind(guard_addr)?;
    Ok(TerminalNetns { ns, guard_listener })
}

/// Create the namespace and the guard listener on a throwaway thread (the
/// caller's own namespace is untouched).
pub fn create(guard_addr: SocketAddr) -> io::Result<TerminalNetns> {
    std::thread::Builder::new()
        .name("terminal-netns".into())
        .spawn(move || create_on_this_thread(guard_addr))?
        .join()
        .map_err(|_| io::Error::other("terminal-netns thread panicked"))?
}
