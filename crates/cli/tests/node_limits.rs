//! A node process under hostile clients: it stops within its grace period on SIGTERM and after a
//! store failure while clients hold event streams and half-sent requests; it closes silent and
//! idle connections after the header timeout; it caps connections (answering the one too many at
//! once) and keeps serving under a low descriptor limit; and one client cannot hold every event
//! stream.
//!
//! Clients here speak raw HTTP/1.1 over `std::net::TcpStream`, so that a test can send half a
//! request, or nothing at all, and see exactly when the node closes the connection.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use walras_testkit::*;

/// The node's shutdown grace period (`listen::SHUTDOWN_GRACE`).
const GRACE: Duration = Duration::from_secs(5);
/// Slack for process exit, runtime shutdown and a loaded test machine.
const MARGIN: Duration = Duration::from_secs(3);

/// A node process started with resource limits; killed on drop. Its stderr is kept.
struct LimitedNode {
    child: Child,
    address: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

/// Resource limits applied to the node process before it starts.
#[derive(Default, Clone, Copy)]
struct Rlimits {
    open_files: Option<u64>,
    file_size_bytes: Option<u64>,
}

impl LimitedNode {
    fn start(data: &Path, extra: &[&str], limits: Rlimits) -> LimitedNode {
        let mut command = Command::new(env!("CARGO_BIN_EXE_walras"));
        command
            .args(["node", "--data"])
            .arg(data)
            .args(["--listen", "127.0.0.1:0", "--dev", "--dev-accounts"])
            .arg(DEV_ACCOUNTS.to_string())
            .args(["--dev-assets", "4", "--block-interval-ms", "50"])
            .args(["--rate-limit-rps", "0", "--threads", "2"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
        unsafe {
            command.pre_exec(move || apply_rlimits(limits));
        }
        let mut child = command.spawn().expect("walras node starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut kept = sink.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let Some(url) = first.strip_prefix("walras node listening on http://") else {
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "the node did not start: {first:?}; stderr:\n{}",
                stderr.lock().unwrap()
            );
        };
        let address = url.parse().expect("an address");
        std::thread::spawn(move || for _ in lines {});
        LimitedNode {
            child,
            address,
            stderr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill has no memory effects; the pid is our own child, not yet reaped.
        let sent = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(sent, 0, "signalling the node");
    }

    /// Waits up to `limit` for the process to exit.
    fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for LimitedNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn apply_rlimits(limits: Rlimits) -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct only.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    if let Some(open_files) = limits.open_files {
        set(libc::RLIMIT_NOFILE, open_files)?;
    }
    if let Some(file_size_bytes) = limits.file_size_bytes {
        // A write past the limit then fails with EFBIG instead of killing the process, as a
        // full or failing disk makes a write fail.
        // SAFETY: setting a signal's disposition to ignore is async-signal-safe.
        unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        set(libc::RLIMIT_FSIZE, file_size_bytes)?;
    }
    Ok(())
}

fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).expect("connecting to the node");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Reads a response head (up to the blank line); `None` if the node closed the connection first.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) => return None,
            Ok(_) => head.push(byte[0]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return None,
            Err(error) => panic!("reading a response head: {error}"),
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// Reads the body announced by `head`'s content-length.
fn read_body(stream: &mut TcpStream, head: &str) -> String {
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .and_then(|length| length.trim().parse().ok())
        .expect("a content length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("the body");
    String::from_utf8_lossy(&body).into_owned()
}

/// Opens an event stream from `local` (an address on the loopback network) and returns the
/// connection with the response head.
fn open_event_stream(address: SocketAddr, local: &str) -> (TcpStream, String) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{local}:0").parse().unwrap();
    socket
        .bind(&local.into())
        .expect("binding a loopback address");
    socket.connect(&address.into()).expect("connecting");
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /v1/events HTTP/1.1\r\nhost: node\r\naccept: text/event-stream\r\n\r\n")
        .unwrap();
    let head = read_head(&mut stream).expect("an answer to the event stream request");
    (stream, head)
}

/// A request whose head is cut off: the node waits for the rest.
fn half_sent_head(address: SocketAddr) -> TcpStream {
    let mut stream = connect(address);
    stream.write_all(b"GET /v1/status HTTP/1.1\r\nho").unwrap();
    stream
}

/// A request whose head is complete but whose body is cut off.
fn half_sent_body(address: SocketAddr) -> TcpStream {
    let mut stream = connect(address);
    stream
        .write_all(
            b"POST /v1/transactions HTTP/1.1\r\nhost: node\r\ncontent-type: application/json\r\n\
              content-length: 500\r\n\r\n{\"source\":",
        )
        .unwrap();
    stream
}

/// `GET path` on a new connection: the status code, or `None` if the connection was closed or
/// the answer took longer than `patience`.
fn get_status(address: SocketAddr, path: &str, patience: Duration) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&address, patience).ok()?;
    stream.set_read_timeout(Some(patience)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: node\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let line = String::from_utf8_lossy(&head);
    line.split(' ').nth(1)?.parse().ok()
}

/// Whether the node closed `stream` within `limit` (reads return end of file or a reset).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue, // an error answer before closing is fine
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return true,
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(error) => panic!("reading: {error}"),
        }
    }
}

/// Trigger: SIGTERM while one client holds an event stream, another has sent half a request
/// head and a third half a body. The node used to wait for them for ever (20 s and counting).
#[test]
fn sigterm_stops_the_node_within_the_grace_period_while_clients_hold_streams_and_half_requests() {
    let dir = TempDir::new("sigterm");
    let mut node = LimitedNode::start(dir.path(), &[], Rlimits::default());
    let (_stream, head) = open_event_stream(node.address, "127.0.0.1");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let _head = half_sent_head(node.address);
    let _body = half_sent_body(node.address);
    std::thread::sleep(Duration::from_millis(200));
    let signalled = Instant::now();
    node.signal(libc::SIGTERM);
    let status = node.exit_within(GRACE + MARGIN);
    let status = status.unwrap_or_else(|| {
        panic!(
            "still running {:?} after SIGTERM; stderr:\n{}",
            signalled.elapsed(),
            node.stderr()
        )
    });
    assert!(status.success(), "{status}; stderr:\n{}", node.stderr());
    eprintln!("stopped {:?} after SIGTERM", signalled.elapsed());
}

/// Trigger: the store cannot grow (a file-size limit makes LMDB's writes fail, as a full disk
/// does) while a client holds an event stream and another a half-sent request. The node used
/// to stay up, silent, until the clients left; it must exit with an error in bounded time.
#[test]
fn a_store_failure_stops_the_node_with_an_error_while_clients_hold_connections() {
    let dir = TempDir::new("store-failure");
    let mut first = LimitedNode::start(dir.path(), &[], Rlimits::default());
    first.signal(libc::SIGTERM);
    assert!(first
        .exit_within(GRACE + MARGIN)
        .is_some_and(|s| s.success()));
    let store_bytes = std::fs::metadata(dir.path().join("data.mdb"))
        .expect("the store file")
        .len();
    let limits = Rlimits {
        file_size_bytes: Some(store_bytes + 64 * 1024),
        ..Rlimits::default()
    };
    let mut node = LimitedNode::start(dir.path(), &[], limits);
    let url = node.url();
    let (_stream, head) = open_event_stream(node.address, "127.0.0.1");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let _head = half_sent_head(node.address);
    let _body = half_sent_body(node.address);
    let started = Instant::now();
    // Payments grow the block log until a write fails; the load is open loop and stops
    // mattering once the node is down.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load_done = done.clone();
    let load = std::thread::spawn(move || {
        runtime().block_on(async {
            let client = reqwest::Client::new();
            let mut rng = walras_sim::Rng::new(5);
            let load = PaymentLoad {
                accounts: 40,
                per_batch: 200,
                every_ms: 20,
            };
            let finished = async {
                while !load_done.load(std::sync::atomic::Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            tokio::select! {
                () = load_payments(&client, &url, &mut rng, load) => {},
                () = finished => {},
            }
        })
    });
    let status = node.exit_within(Duration::from_secs(20) + GRACE);
    let status = status.unwrap_or_else(|| {
        panic!(
            "still running {:?} after the load started; stderr:\n{}",
            started.elapsed(),
            node.stderr()
        )
    });
    let exited_after = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = load.join();
    let stderr = node.stderr();
    assert!(!status.success(), "a failed store is an error exit");
    assert!(
        stderr.contains("committing a block failed"),
        "the error names the failed commit:\n{stderr}"
    );
    eprintln!("exited ({status}) {exited_after:?} after the load started");
}

/// Trigger: 500 connections that send nothing, half a head, or one request and then nothing
/// (kept alive). None used to be closed, ever.
#[test]
fn silent_half_sent_and_idle_connections_are_closed_after_the_header_timeout() {
    let dir = TempDir::new("idle");
    let node = LimitedNode::start(
        dir.path(),
        &["--header-timeout-ms", "1000"],
        Rlimits::default(),
    );
    let mut connections = Vec::new();
    for index in 0..500 {
        let mut stream = connect(node.address);
        match index % 3 {
            0 => {}
            1 => stream.write_all(b"GET /v1/status HTTP/1.1\r\nhos").unwrap(),
            _ => {
                stream
                    .write_all(b"GET /v1/status HTTP/1.1\r\nhost: node\r\n\r\n")
                    .unwrap();
                let head = read_head(&mut stream).expect("an answer");
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                read_body(&mut stream, &head);
            }
        }
        connections.push(stream);
    }
    let opened = Instant::now();
    for (index, stream) in connections.iter_mut().enumerate() {
        let left = (Duration::from_secs(1) + MARGIN).saturating_sub(opened.elapsed());
        assert!(
            closed_within(stream, left.max(Duration::from_millis(10))),
            "connection {index} (kind {}) still open {:?} after the last was opened",
            index % 3,
            opened.elapsed()
        );
    }
}

/// Trigger: as many silent connections as `--connections-max`. The one too many is answered
/// 503 at once (not left waiting), and a normal request succeeds once the silent ones time out.
#[test]
fn past_the_connection_cap_new_connections_are_refused_at_once_and_served_after_idle_ones_time_out()
{
    let dir = TempDir::new("cap");
    let node = LimitedNode::start(
        dir.path(),
        &["--connections-max", "20", "--header-timeout-ms", "1500"],
        Rlimits::default(),
    );
    let silent: Vec<TcpStream> = (0..20).map(|_| connect(node.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    let refused = get_status(node.address, "/v1/status", Duration::from_secs(1));
    assert_eq!(
        refused,
        Some(503),
        "the connection over the cap is answered 503"
    );
    assert!(asked.elapsed() < Duration::from_secs(1));
    let served = retry_until_ok(node.address, Duration::from_millis(1500) + MARGIN);
    assert!(
        served.is_some(),
        "a request succeeds once the silent connections timed out; stderr:\n{}",
        node.stderr()
    );
    drop(silent);
}

/// Trigger: the node runs under a 256-descriptor limit and 300 sockets connect and stay
/// silent. Every request used to time out (the descriptors were gone for good).
#[test]
fn under_a_256_descriptor_limit_300_silent_sockets_do_not_starve_requests() {
    let dir = TempDir::new("fd-limit");
    let limits = Rlimits {
        open_files: Some(256),
        ..Rlimits::default()
    };
    let node = LimitedNode::start(dir.path(), &["--header-timeout-ms", "1000"], limits);
    let silent: Vec<TcpStream> = (0..300).map(|_| connect(node.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let served = retry_until_ok(node.address, Duration::from_secs(1) + MARGIN);
    assert!(
        served.is_some(),
        "no request succeeded; stderr:\n{}",
        node.stderr()
    );
    eprintln!("served after {:?}", served.unwrap());
    drop(silent);
}

/// Retries `GET /v1/status` until it answers 200; how long that took, or `None` past `limit`.
fn retry_until_ok(address: SocketAddr, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if get_status(address, "/v1/status", Duration::from_millis(500)) == Some(200) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Trigger: one client opens event streams until refused. It used to get all 256 slots
/// (everyone else then got 503); now it gets 8, the ninth is refused with 429, and another
/// client still gets a stream.
#[test]
fn one_client_cannot_hold_every_event_stream() {
    let dir = TempDir::new("streams");
    let node = LimitedNode::start(dir.path(), &[], Rlimits::default());
    let mut held = Vec::new();
    for _ in 0..8 {
        let (stream, head) = open_event_stream(node.address, "127.0.0.1");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(stream);
    }
    let (mut refused, head) = open_event_stream(node.address, "127.0.0.1");
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    let body = read_body(&mut refused, &head);
    assert!(body.contains("too_many_streams"), "{body}");
    let (_other, head) = open_event_stream(node.address, "127.0.0.2");
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "another client is served: {head}"
    );
}

/// `GET path` from `local` (a loopback address) on a new connection: the response head, or
/// `None` if the connection was closed first.
fn get_head_from(address: SocketAddr, local: &str, path: &str) -> Option<String> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{local}:0").parse().unwrap();
    socket
        .bind(&local.into())
        .expect("binding a loopback address");
    socket.connect(&address.into()).ok()?;
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: node\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    read_head(&mut stream)
}

/// Trigger: one client held every connection the node serves (2,500 opened against a cap of
/// 1,024); another address was then answered 503 `too_many_connections` until the first let go.
/// Now the newcomer is served at once and the busiest address's newest connection is closed.
#[test]
fn one_address_holding_every_connection_cannot_keep_another_address_out() {
    let dir = TempDir::new("fair-connections");
    let node = LimitedNode::start(
        dir.path(),
        &["--connections-max", "20", "--header-timeout-ms", "20000"],
        Rlimits::default(),
    );
    let mut hog: Vec<TcpStream> = (0..25).map(|_| connect(node.address)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let head = get_head_from(node.address, "127.0.0.1", "/v1/status");
    assert!(
        head.as_deref()
            .is_some_and(|h| h.starts_with("HTTP/1.1 503")),
        "the busiest address gets no more: {head:?}"
    );
    let asked = Instant::now();
    let head = get_head_from(node.address, "127.0.0.2", "/v1/status").expect("an answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "served at once, not after the header timeout"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("x-content-type-options: nosniff"),
        "{head}"
    );
    let closed = hog
        .iter_mut()
        .map(|stream| closed_within(stream, Duration::from_millis(300)))
        .filter(|closed| *closed)
        .count();
    assert_eq!(
        closed, 6,
        "the 5 over the cap and the one given to the newcomer are closed, no other"
    );
}
