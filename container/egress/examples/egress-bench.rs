//! Egress guard benchmark (run by `scripts/bench-egress.sh`, needs root).
//!
//! In a private network namespace (this process `unshare`s before any thread
//! exists), a fake upstream listens on 11.0.0.1:443 and the real
//! `hermes-egress-guard` binary runs as a child with `--resolve
//! bench.test=11.0.0.1`. The same run measures, direct versus through a
//! CONNECT tunnel: bulk download throughput, and the time until the first
//! upstream byte arrives on a fresh connection (connect latency).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const UPSTREAM: &str = "11.0.0.1:443";
const CHUNK: usize = 256 * 1024;
/// Rate of the paced upstream, roughly a 1 Gbit/s link.
const PACED_MIB_S: u64 = 110;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut guard_bin = String::from("target/release/hermes-egress-guard");
    let mut total_mib: u64 = 1024;
    let mut rounds: usize = 1000;
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--guard" => guard_bin = args.next().unwrap(),
            "--mib" => total_mib = args.next().unwrap().parse().unwrap(),
            "--rounds" => rounds = args.next().unwrap().parse().unwrap(),
            other => panic!("unknown argument {other}"),
        }
    }
    // SAFETY: single-threaded here; affects only this process.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        eprintln!(
            "egress-bench needs root (network namespace): {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
    for args in [
        vec!["link", "set", "lo", "up"],
        vec!["addr", "add", "11.0.0.1/32", "dev", "lo"],
    ] {
        assert!(Command::new("ip").args(&args).status().unwrap().success());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(guard_bin, total_mib, rounds));
}

async fn start_guard(guard_bin: &str, extra: &[&str]) -> (std::process::Child, SocketAddr) {
    let mut child = Command::new(guard_bin)
        .env_clear()
        .env("EGRESS_ALLOWED_HOSTS", "bench.test")
        .args([
            "--listen",
            "127.0.0.1:0",
            "--resolve",
            "bench.test=11.0.0.1",
            "--max-tunnels",
            "16",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {guard_bin}: {e}"));
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let addr: SocketAddr = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "guard exited early"
        );
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        if value["event"] == "listening" {
            break value["addr"].as_str().unwrap().parse().unwrap();
        }
    };
    // Drain audit lines so the guard never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    (child, addr)
}

fn summary(label: &str, runs: &[f64]) -> (f64, f64) {
    let mut sorted = runs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (best, median) = (sorted[sorted.len() - 1], sorted[sorted.len() / 2]);
    println!(
        "throughput {label:<22}: best {best:6.0} MiB/s  median {median:6.0} MiB/s  runs {runs:.0?}"
    );
    (best, median)
}

async fn bench(guard_bin: String, total_mib: u64, rounds: usize) {
    tokio::spawn(upstream(TcpListener::bind(UPSTREAM).await.unwrap()));
    let (mut child, guard) = start_guard(&guard_bin, &[]).await;

    let bytes = total_mib * 1024 * 1024;
    println!("egress-bench: {total_mib} MiB download per run, 5 interleaved runs each, {rounds} connect rounds");
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        direct.push(throughput(None, b'T', bytes).await);
        proxied.push(throughput(Some(guard), b'T', bytes).await);
    }
    let (direct_best, direct_median) = summary("direct (loopback)", &direct);
    let (proxied_best, proxied_median) = summary("via guard (loopback)", &proxied);
    println!(
        "throughput ratio, unpaced : best {:.2}  median {:.2}  (target >= 0.80)",
        proxied_best / direct_best,
        proxied_median / direct_median
    );
    // A link-speed upstream (paced at PACED_MIB_S): the case egress really
    // has, where the guard must not be the bottleneck.
    let paced_bytes = 2 * PACED_MIB_S * 1024 * 1024;
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        direct.push(throughput(None, b'P', paced_bytes).await);
        proxied.push(throughput(Some(guard), b'P', paced_bytes).await);
    }
    let (_, direct_median) = summary("direct (paced)", &direct);
    let (_, proxied_median) = summary("via guard (paced)", &proxied);
    println!(
        "throughput ratio, paced at {PACED_MIB_S} MiB/s: median {:.2}",
        proxied_median / direct_median
    );

    let (mut direct_lat, mut proxied_lat) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        direct_lat.push(first_byte(None).await);
        proxied_lat.push(first_byte(Some(guard)).await);
    }
    let (d50, d99) = percentiles(&mut direct_lat);
    let (p50, p99) = percentiles(&mut proxied_lat);
    println!(
        "connect->first byte direct   : p50 {:6.0} us  p99 {:6.0} us",
        micros(d50),
        micros(d99)
    );
    println!(
        "connect->first byte via guard: p50 {:6.0} us  p99 {:6.0} us",
        micros(p50),
        micros(p99)
    );
    println!(
        "added connect latency        : p50 {:+6.0} us  p99 {:+6.0} us",
        micros(p50) - micros(d50),
        micros(p99) - micros(d99)
    );

    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let _ = child.wait();
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}

/// Opens a connection to the upstream, directly or via a CONNECT tunnel.
async fn open(guard: Option<SocketAddr>) -> TcpStream {
    match guard {
        None => {
            let stream = TcpStream::connect(UPSTREAM).await.unwrap();
            stream.set_nodelay(true).unwrap();
            stream
        }
        Some(guard) => {
            let mut stream = TcpStream::connect(guard).await.unwrap();
            stream.set_nodelay(true).unwrap();
            stream
                .write_all(b"CONNECT bench.test:443 HTTP/1.1\r\nHost: bench.test:443\r\n\r\n")
                .await
                .unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                assert_eq!(stream.read(&mut byte).await.unwrap(), 1);
                head.push(byte[0]);
            }
            assert!(
                head.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&head)
            );
            stream
        }
    }
}

/// MiB/s for downloading `bytes` from the upstream.
async fn throughput(guard: Option<SocketAddr>, kind: u8, bytes: u64) -> f64 {
    let mut stream = open(guard).await;
    let started = Instant::now();
    let mut request = vec![kind];
    request.extend_from_slice(&bytes.to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut buf = vec![0u8; CHUNK];
    let mut received = 0u64;
    while received < bytes {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "upstream closed early");
        received += n as u64;
    }
    received as f64 / (1024.0 * 1024.0) / started.elapsed().as_secs_f64()
}

/// Time from starting to connect until the upstream's first byte arrives.
async fn first_byte(guard: Option<SocketAddr>) -> Duration {
    let started = Instant::now();
    let mut stream = open(guard).await;
    stream.write_all(b"L").await.unwrap();
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).await.unwrap();
    started.elapsed()
}

/// `L` → one byte back; `T<u64>` → that many bytes back as fast as
/// possible; `P<u64>` → the same, paced at [`PACED_MIB_S`].
async fn upstream(listener: TcpListener) {
    while let Ok((mut stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let mut kind = [0u8; 1];
            if stream.read_exact(&mut kind).await.is_err() {
                return;
            }
            match kind[0] {
                b'L' => {
                    let _ = stream.write_all(b"!").await;
                }
                kind @ (b'T' | b'P') => {
                    let mut len = [0u8; 8];
                    if stream.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let total = u64::from_be_bytes(len);
                    let (chunk_len, paced) = if kind == b'P' {
                        (64 * 1024, true)
                    } else {
                        (CHUNK, false)
                    };
                    let chunk = vec![0u8; chunk_len];
                    let started = tokio::time::Instant::now();
                    let mut sent = 0u64;
                    while sent < total {
                        let n = (total - sent).min(chunk_len as u64) as usize;
                        if stream.write_all(&chunk[..n]).await.is_err() {
                            return;
                        }
                        sent += n as u64;
                        if paced {
                            let due = Duration::from_secs_f64(
                                sent as f64 / (PACED_MIB_S as f64 * 1024.0 * 1024.0),
                            );
                            tokio::time::sleep_until(started + due).await;
                        }
                    }
                }
                _ => {}
            }
        });
    }
}
