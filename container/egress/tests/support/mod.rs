//! Shared integration-test fixtures: a private network namespace per test,
//! fake upstreams inside it, canary listeners and a raw HTTP/1 client.
//!
//! Why a namespace rather than a "permit loopback for tests" switch: the
//! guard must never contain a switch that turns address classification off.
//! Instead each test runs on a thread that `unshare(CLONE_NEWNET)`s into a
//! fresh namespace (it dies with the thread; nothing to clean up), brings up
//! `lo` and gives it `11.0.0.1` — a global-unicast address that classify
//! allows, reachable only inside that namespace — plus `10.0.0.5` as a
//! private canary. Names are mapped to those addresses by the guard's
//! `StaticResolver`, exactly like DNS answers, and still classified.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The fake public upstream's address.
pub const PUBLIC: &str = "11.0.0.1";
/// A private address with a canary listener on it.
pub const PRIVATE: &str = "10.0.0.5";

pub fn ip(addr: &str) -> IpAddr {
    addr.parse().unwrap()
}

/// Runs `test` on a current-thread runtime inside a fresh network namespace
/// with `lo` up and [`PUBLIC`] and [`PRIVATE`] on it. Skips loudly when the
/// namespace cannot be created and we are not root; fails when root.
pub fn in_private_netns<F, Fut>(name: &str, test: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let name = name.to_owned();
    let outcome = std::thread::spawn(move || {
        // SAFETY: unshare on this thread only affects this thread's namespaces.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        run_ip(&["link", "set", "lo", "up"]);
        run_ip(&["addr", "add", &format!("{PUBLIC}/32"), "dev", "lo"]);
        run_ip(&["addr", "add", &format!("{PRIVATE}/32"), "dev", "lo"]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(test());
        Ok(())
    })
    .join();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                panic!("{name}: cannot create a network namespace as root: {error}");
            }
            eprintln!("SKIPPED {name}: needs root to create a network namespace ({error})");
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn run_ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// Counts accepted connections.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A listener that only counts connections: reaching it means an attack
/// got through.
pub async fn canary(addr: SocketAddr) -> Counter {
    let listener = TcpListener::bind(addr).await.unwrap();
    let counter = Counter::default();
    let count = counter.clone();
    tokio::spawn(async move {
        while let Ok((_stream, _)) = listener.accept().await {
            count.bump();
        }
    });
    counter
}

/// Greets with `upstream-hello\n`, then echoes everything back.
pub async fn echo_upstream(addr: SocketAddr) -> Counter {
    let listener = TcpListener::bind(addr).await.unwrap();
    let counter = Counter::default();
    let count = counter.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.bump();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                if stream.write_all(b"upstream-hello\n").await.is_err() {
                    return;
                }
                let (mut reader, mut writer) = stream.split();
                let _ = tokio::io::copy(&mut reader, &mut writer).await;
            });
        }
    });
    counter
}

/// Answers every request with its own request head as the body.
pub async fn http_upstream(addr: SocketAddr) -> Counter {
    let listener = TcpListener::bind(addr).await.unwrap();
    let counter = Counter::default();
    let count = counter.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.bump();
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\nX-Upstream: yes\r\n\r\n{head}",
                    head.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    counter
}

/// Reads up to and including the blank line.
pub async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A parsed response from the guard.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Reads a response head and a `Content-Length` body.
pub async fn read_reply(stream: &mut TcpStream) -> Reply {
    let head = read_head(stream).await;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    Reply {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Sends `CONNECT authority` and returns the reply and the stream.
pub async fn connect_via(guard: SocketAddr, authority: &str) -> (Reply, TcpStream) {
    let mut stream = TcpStream::connect(guard).await.unwrap();
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let reply = read_reply(&mut stream).await;
    (reply, stream)
}

/// Sends one raw request and reads the reply.
pub async fn request_via(guard: SocketAddr, raw: &str) -> Reply {
    let mut stream = TcpStream::connect(guard).await.unwrap();
    stream.write_all(raw.as_bytes()).await.unwrap();
    read_reply(&mut stream).await
}

/// Reads exactly `n` bytes.
pub async fn read_n(stream: &mut TcpStream, n: usize) -> String {
    let mut buf = vec![0u8; n];
    stream.read_exact(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf).into_owned()
}
