//! The NBD server: one thread per connection reads requests (many pipelined
//! headers per read of the socket) and hands them to a shared pool of worker
//! threads, so several requests of one client (and of several clients) are
//! in flight at once. A worker sends its reply itself when the socket is
//! free, without blocking; what cannot go out at once goes to the
//! connection's reply writer thread, the only one that waits on the peer
//! (`outbox.rs`), so a client that stops reading stalls only itself.
//!
//! What a client may have outstanding is bounded (as nbdkit and qemu-nbd
//! bound it): a request is admitted only when its connection has fewer than
//! `conn_max_requests` requests and `conn_max_bytes` payload bytes between
//! admission and the end of its reply, and the whole server fewer than
//! `max_queued_bytes`; otherwise the connection stops reading, and TCP
//! pushes back on the client. A write's payload is read only once admitted
//! (but for what the 64 KiB read-ahead of request headers took with them).
//!
//! A `FLUSH` covers every write already replied to (a write is replied only
//! once its member writes completed). `DISC` stops reading, waits for the
//! connection's requests in flight, then closes. Stopping the server stops
//! accepting and reading (a request half received is dropped), lets each
//! connection's requests in flight finish, delivers their replies for at most
//! `stop_grace` (a peer that does not read is then cut off), and answers
//! nothing more. A client that has not finished the handshake within
//! `handshake_limit` is dropped.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::outbox::Outbox;
use super::*;
use crate::exec::buf::AlignedBuf;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The export's name (`NBD_OPT_LIST`); the empty default name is accepted too.
    pub name: String,
    /// Worker threads shared by all connections.
    pub threads: usize,
    /// Requests one connection may have admitted and not yet answered.
    pub conn_max_requests: u64,
    /// Payload bytes (read data, write data) one connection may have
    /// admitted and not yet answered; one request is always admitted when
    /// none is outstanding, whatever its size.
    pub conn_max_bytes: u64,
    /// Payload bytes admitted and not yet answered, all connections together.
    pub max_queued_bytes: u64,
    /// How long a stopping server keeps sending replies already due.
    pub stop_grace: Duration,
    /// How long a client may take to reach the transmission phase (as
    /// qemu-nbd's `--handshake-limit`, 10 s by default).
    pub handshake_limit: Duration,
    /// Whether the empty export name means the first export. Off when the
    /// exports are peers (a stack's tenants): then no export is the
    /// default, and the empty name is unknown like any other.
    pub empty_name_is_first: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            name: "blocklab".into(),
            threads: 8,
            // Deep enough for iodepth 64 of 1 MiB, two 32 MiB requests.
            conn_max_requests: 128,
            conn_max_bytes: 2 * MAX_PAYLOAD as u64,
            max_queued_bytes: 16 * MAX_PAYLOAD as u64,
            stop_grace: Duration::from_secs(2),
            handshake_limit: Duration::from_secs(10),
            empty_name_is_first: true,
        }
    }
}

/// Counters of the server's life.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    /// Payload bytes admitted and not yet answered, now and at most.
    pub queued_bytes: AtomicU64,
    pub peak_queued_bytes: AtomicU64,
    /// Replies sent whole by the worker that completed the request.
    pub replies_direct: AtomicU64,
    /// Replies sent (or finished) by a connection's reply writer thread:
    /// the socket was busy or the peer's window full.
    pub replies_by_writer: AtomicU64,
}

type Job = Box<dyn FnOnce() + Send>;

/// The requests of every connection waiting for a worker, in arrival
/// order. A job wakes one idle worker (a receiver shared under a mutex
/// would wake two: the receiver, then the next waiter for the mutex).
#[derive(Default)]
struct JobQueue {
    /// The jobs, and whether the queue is closed.
    state: Mutex<(std::collections::VecDeque<Job>, bool)>,
    ready: Condvar,
}

impl JobQueue {
    /// Add a job; false once the queue is closed.
    fn push(&self, job: Job) -> bool {
        let mut s = self.state.lock().unwrap();
        if s.1 {
            return false;
        }
        s.0.push_back(job);
        drop(s);
        self.ready.notify_one();
        true
    }

    /// The next job, waiting for one; None once the queue is closed and empty.
    fn pop(&self) -> Option<Job> {
        let mut s = self.state.lock().unwrap();
        loop {
            if let Some(job) = s.0.pop_front() {
                return Some(job);
            }
            if s.1 {
                return None;
            }
            s = self.ready.wait(s).unwrap();
        }
    }

    fn close(&self) {
        self.state.lock().unwrap().1 = true;
        self.ready.notify_all();
    }
}

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    pub stats: Arc<ServerStats>,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting and reading, finish the requests in flight, return
    /// when all connections are closed (within about `stop_grace`, whatever
    /// the peers do).
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// What every connection shares.
struct Shared {
    /// The exports by name, the first one also under the empty name.
    exports: Vec<(String, Arc<dyn Export>)>,
    jobs: Arc<JobQueue>,
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
    queued: Arc<GlobalBytes>,
    cfg: ServerConfig,
}

/// Serve `export` under `cfg.name` on `listener` until the handle is shut down.
pub fn serve(listener: TcpListener, export: Arc<dyn Export>, cfg: ServerConfig) -> io::Result<ServerHandle> {
    let name = cfg.name.clone();
    serve_exports(listener, vec![(name, export)], cfg)
}

/// Serve several named exports (all listed by `NBD_OPT_LIST`; a client
/// picks one by name, the empty name meaning the first) until the handle is
/// shut down. `cfg.name` is not used.
pub fn serve_exports(
    listener: TcpListener,
    exports: Vec<(String, Arc<dyn Export>)>,
    cfg: ServerConfig,
) -> io::Result<ServerHandle> {
    if exports.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no export to serve"));
    }
    for (i, (n, _)) in exports.iter().enumerate() {
        if n.is_empty() || n.len() > 4096 || exports[..i].iter().any(|(m, _)| m == n) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("export name {n:?}: empty, longer than 4096 bytes, or given twice"),
            ));
        }
    }
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ServerStats::default());
    let jobs = Arc::new(JobQueue::default());
    let mut workers = Vec::new();
    for _ in 0..cfg.threads.max(1) {
        let jobs = jobs.clone();
        workers.push(std::thread::spawn(move || {
            while let Some(job) = jobs.pop() {
                job();
            }
        }));
    }
    let shared = Arc::new(Shared {
        exports,
        jobs: jobs.clone(),
        stop: stop.clone(),
        queued: Arc::new(GlobalBytes::new(cfg.max_queued_bytes, stats.clone())),
        stats: stats.clone(),
        cfg,
    });
    let accept = std::thread::spawn(move || {
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        while !shared.stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((sock, _)) => {
                    shared.stats.connections.fetch_add(1, Ordering::Relaxed);
                    let shared = shared.clone();
                    conns.push(std::thread::spawn(move || {
                        let _ = Connection::run(sock, &shared);
                    }));
                    conns.retain(|h| !h.is_finished());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        for h in conns {
            let _ = h.join();
        }
        // No connection is left to add jobs: the workers end once the
        // queue is empty.
        drop(shared);
        jobs.close();
        for w in workers {
            let _ = w.join();
        }
    });
    Ok(ServerHandle {
        addr,
        stop,
        accept: Some(accept),
        stats,
    })
}

/// How often a blocked read or write wakes up to see whether the server is
/// stopping.
const POLL: Duration = Duration::from_millis(200);

/// Read exactly `buf.len()` bytes, waking up every read timeout to see
/// whether the server is stopping. Ok(false): clean end of stream, or the
/// server stopping before the first byte; stopping mid-message is an error
/// (the half-received message is dropped), and so is passing `deadline`.
fn read_full(s: &mut TcpStream, buf: &mut [u8], stop: &AtomicBool, deadline: Option<Instant>) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        match s.read(&mut buf[done..]) {
            Ok(0) => {
                if done == 0 {
                    return Ok(false);
                }
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed mid-message"));
            }
            Ok(k) => done += k,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::SeqCst) {
                    if done == 0 {
                        return Ok(false);
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "server stopping mid-message",
                    ));
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "handshake time limit passed"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Bytes of a connection's requests read ahead of the one being parsed:
/// one read of the socket returns the headers of many pipelined requests,
/// where reading each 28-byte header alone costs a system call per request.
/// At most `INBOUND` bytes are read ahead, so admission still bounds what a
/// client has in the server.
struct Inbound {
    buf: Box<[u8]>,
    at: usize,
    end: usize,
}

const INBOUND: usize = 64 * 1024;

impl Inbound {
    fn new() -> Self {
        Inbound {
            buf: vec![0u8; INBOUND].into_boxed_slice(),
            at: 0,
            end: 0,
        }
    }

    /// `read_full` through the buffer: the bytes read ahead first, then one
    /// read of the socket into the buffer at a time, or straight into `dst`
    /// for a large payload.
    fn read_exact(&mut self, s: &mut TcpStream, dst: &mut [u8], stop: &AtomicBool) -> io::Result<bool> {
        let have = (self.end - self.at).min(dst.len());
        dst[..have].copy_from_slice(&self.buf[self.at..self.at + have]);
        self.at += have;
        let mut done = have;
        while done < dst.len() {
            let mid = |what: &str| Err(io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string()));
            if dst.len() - done >= INBOUND / 2 {
                return match read_full(s, &mut dst[done..], stop, None)? {
                    true => Ok(true),
                    false if done == 0 => Ok(false),
                    false => mid("peer closed or server stopping mid-message"),
                };
            }
            // The buffer is empty here: every byte in it went to `dst`.
            let k = loop {
                match s.read(&mut self.buf) {
                    Ok(k) => break k,
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                        if stop.load(Ordering::SeqCst) {
                            break 0;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            if k == 0 {
                return if done == 0 {
                    Ok(false)
                } else {
                    mid("peer closed or server stopping mid-message")
                };
            }
            let take = k.min(dst.len() - done);
            dst[done..done + take].copy_from_slice(&self.buf[..take]);
            (self.at, self.end) = (take, k);
            done += take;
        }
        Ok(true)
    }
}

/// Write all of `parts`, waking up every write timeout; once the server is
/// stopping, give up after `grace` (a peer that does not read), and so at
/// `deadline` (a handshake whose client does not read its option replies).
pub(super) fn write_full(
    s: &TcpStream,
    parts: &mut [io::IoSlice],
    stop: &AtomicBool,
    grace: Duration,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let mut slices: &mut [io::IoSlice] = parts;
    let mut stopping_since: Option<Instant> = None;
    let mut w = s;
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
            Ok(k) => io::IoSlice::advance_slices(&mut slices, k),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if !slices.is_empty() && deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "handshake time limit"));
        }
        if stop.load(Ordering::SeqCst) {
            let since = *stopping_since.get_or_insert_with(Instant::now);
            if !slices.is_empty() && since.elapsed() >= grace {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "peer not reading at shutdown"));
            }
        }
    }
    Ok(())
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes(b[..2].try_into().unwrap())
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}
fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// Payload bytes admitted on the whole server. Taking and giving back are
/// atomic operations; only a reader finding the bound reached waits.
struct GlobalBytes {
    max: u64,
    stats: Arc<ServerStats>,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
}

impl GlobalBytes {
    fn new(max: u64, stats: Arc<ServerStats>) -> Self {
        GlobalBytes {
            max,
            stats,
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            freed: Condvar::new(),
        }
    }

    fn try_take(&self, n: u64) -> bool {
        let q = &self.stats.queued_bytes;
        let mut cur = q.load(Ordering::Acquire);
        loop {
            // Nothing queued: admit any single request, so progress is sure.
            if cur != 0 && cur + n > self.max {
                return false;
            }
            match q.compare_exchange_weak(cur, cur + n, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.stats.peak_queued_bytes.fetch_max(cur + n, Ordering::Relaxed);
                    return true;
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Take `n` bytes, waiting while the bound is reached; false if the
    /// server stops meanwhile.
    fn take(&self, n: u64, stop: &AtomicBool) -> bool {
        if n == 0 || self.try_take(n) {
            return true;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap();
        let ok = loop {
            if self.try_take(n) {
                break true;
            }
            if stop.load(Ordering::SeqCst) {
                break false;
            }
            g = self.freed.wait_timeout(g, POLL).unwrap().0;
        };
        drop(g);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    fn give(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.stats.queued_bytes.fetch_sub(n, Ordering::AcqRel);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap();
            self.freed.notify_all();
        }
    }
}

/// Requests and payload bytes one connection has admitted and not yet
/// answered.
struct ConnBudget {
    max_requests: u64,
    max_bytes: u64,
    used: Mutex<(u64, u64)>,
    freed: Condvar,
}

impl ConnBudget {
    /// Wait until a request of `bytes` fits; false if the server stops
    /// meanwhile or the writer gave up on the peer.
    fn take(&self, bytes: u64, stop: &AtomicBool, broken: &AtomicBool) -> bool {
        let mut used = self.used.lock().unwrap();
        loop {
            let (reqs, b) = *used;
            let fits = reqs == 0 || (reqs < self.max_requests && b + bytes <= self.max_bytes);
            if fits {
                *used = (reqs + 1, b + bytes);
                return true;
            }
            if stop.load(Ordering::SeqCst) || broken.load(Ordering::SeqCst) {
                return false;
            }
            used = self.freed.wait_timeout(used, POLL).unwrap().0;
        }
    }

    fn give(&self, bytes: u64) {
        let mut used = self.used.lock().unwrap();
        used.0 -= 1;
        used.1 -= bytes;
        self.freed.notify_all();
    }
}

/// One admitted request's share of both budgets, given back when dropped
/// (its reply written, or dropped for a peer that is gone).
struct Ticket {
    bytes: u64,
    conn: Arc<ConnBudget>,
    global: Arc<GlobalBytes>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.global.give(self.bytes);
        self.conn.give(self.bytes);
    }
}

/// A reply due to the peer.
pub(super) struct Reply {
    cookie: u64,
    err: u32,
    /// The request's offset (a structured read reply carries it).
    offset: u64,
    body: Body,
    _ticket: Ticket,
}

/// What a successful reply carries.
pub(super) enum Body {
    None,
    Data(AlignedBuf),
    /// `base:allocation` descriptors: (length, flags).
    Extents(Vec<(u32, u32)>),
}

/// What the handshake agreed for the transmission phase.
#[derive(Clone, Copy, Default)]
struct Mode {
    /// `NBD_OPT_STRUCTURED_REPLY` accepted.
    structured: bool,
    /// `base:allocation` selected by `NBD_OPT_SET_META_CONTEXT`.
    allocation: bool,
}

impl Mode {
    /// The mode for transmission on `export`: the contexts selected hold
    /// only if the last SET_META_CONTEXT named that export.
    fn on(self, export: &str, meta_for: &Option<String>) -> Mode {
        Mode {
            allocation: self.allocation && meta_for.as_deref() == Some(export),
            ..self
        }
    }
}

struct Connection {
    sock: TcpStream,
    shared: Arc<Shared>,
    /// When the handshake must be over: its reads and its replies give up then.
    handshake_deadline: Instant,
}

impl Shared {
    /// The export a client names (the empty name: the first, unless the
    /// exports are peers).
    fn export(&self, name: &[u8]) -> Option<(&str, &Arc<dyn Export>)> {
        if name.is_empty() && self.cfg.empty_name_is_first {
            return self.exports.first().map(|(n, e)| (n.as_str(), e));
        }
        self.exports
            .iter()
            .find(|(n, _)| n.as_bytes() == name)
            .map(|(n, e)| (n.as_str(), e))
    }
}

enum Handshake {
    /// Go to transmission on this export.
    Transmit(Arc<dyn Export>, Mode),
    Close,
}

impl Connection {
    fn run(sock: TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
        sock.set_nodelay(true)?;
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(POLL))?;
        sock.set_write_timeout(Some(POLL))?;
        let mut c = Connection {
            sock,
            shared: shared.clone(),
            handshake_deadline: Instant::now() + shared.cfg.handshake_limit,
        };
        let r = match c.handshake() {
            Ok(Handshake::Transmit(export, mode)) => c.transmit(export, mode),
            Ok(Handshake::Close) => Ok(()),
            Err(e) => Err(e),
        };
        let _ = c.sock.shutdown(std::net::Shutdown::Both);
        r
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let cfg = &self.shared.cfg;
        write_full(
            &self.sock,
            &mut [io::IoSlice::new(bytes)],
            &self.shared.stop,
            cfg.stop_grace,
            Some(self.handshake_deadline),
        )
    }

    fn opt_reply(&self, opt: u32, typ: u32, data: &[u8]) -> io::Result<()> {
        let mut m = Vec::with_capacity(20 + data.len());
        m.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
        m.extend_from_slice(&opt.to_be_bytes());
        m.extend_from_slice(&typ.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.send(&m)
    }

    fn transmission_flags(&self) -> u16 {
        FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES | FLAG_CAN_MULTI_CONN
    }

    fn handshake(&mut self) -> io::Result<Handshake> {
        let shared = self.shared.clone();
        let stop = &*shared.stop;
        let deadline = self.handshake_deadline;
        let mut hello = Vec::new();
        hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
        hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
        hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
        self.send(&hello)?;
        let mut cf = [0u8; 4];
        if !read_full(&mut self.sock, &mut cf, stop, Some(deadline))? {
            return Ok(Handshake::Close);
        }
        let client_flags = be32(&cf);
        if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
            return Ok(Handshake::Close); // unknown client flags: drop the connection
        }
        let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
        let mut mode = Mode::default();
        // The export the last SET_META_CONTEXT named (contexts hold for it only).
        let mut meta_for: Option<String> = None;
        loop {
            let mut head = [0u8; 16];
            if !read_full(&mut self.sock, &mut head, stop, Some(deadline))? {
                return Ok(Handshake::Close);
            }
            if be64(&head) != IHAVEOPT {
                return Ok(Handshake::Close);
            }
            let opt = be32(&head[8..]);
            let len = be32(&head[12..]) as usize;
            if len > 64 * 1024 {
                return Ok(Handshake::Close); // no option is that long
            }
            let mut data = vec![0u8; len];
            if len > 0 && !read_full(&mut self.sock, &mut data, stop, Some(deadline))? {
                return Ok(Handshake::Close);
            }
            if stop.load(Ordering::SeqCst) && opt != OPT_ABORT {
                self.opt_reply(opt, REP_ERR_SHUTDOWN, b"server shutting down")?;
                continue;
            }
            match opt {
                OPT_EXPORT_NAME => {
                    let Some((export_name, export)) = shared.export(&data) else {
                        return Ok(Handshake::Close); // no way to report an error here
                    };
                    let mode = mode.on(export_name, &meta_for);
                    let export = export.clone();
                    let mut m = Vec::new();
                    m.extend_from_slice(&export.size().to_be_bytes());
                    m.extend_from_slice(&self.transmission_flags().to_be_bytes());
                    if !no_zeroes {
                        m.extend_from_slice(&[0u8; 124]);
                    }
                    self.send(&m)?;
                    return Ok(Handshake::Transmit(export, mode));
                }
                OPT_ABORT => {
                    let _ = self.opt_reply(opt, REP_ACK, &[]);
                    return Ok(Handshake::Close);
                }
                OPT_LIST => {
                    if len != 0 {
                        self.opt_reply(opt, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")?;
                        continue;
                    }
                    // One REP_SERVER per export: name length, name, and the
                    // description as the optional free text.
                    for (name, export) in &shared.exports {
                        let mut m = Vec::new();
                        m.extend_from_slice(&(name.len() as u32).to_be_bytes());
                        m.extend_from_slice(name.as_bytes());
                        m.extend_from_slice(export.description().as_bytes());
                        self.opt_reply(opt, REP_SERVER, &m)?;
                    }
                    self.opt_reply(opt, REP_ACK, &[])?;
                }
                OPT_INFO | OPT_GO => {
                    // name length, name, number of requests, requests.
                    let parsed = (|| {
                        if data.len() < 6 {
                            return None;
                        }
                        let nl = be32(&data) as usize;
                        if nl > data.len() - 6 {
                            return None;
                        }
                        let name = &data[4..4 + nl];
                        let nreq = be16(&data[4 + nl..]) as usize;
                        if data.len() != 6 + nl + 2 * nreq {
                            return None;
                        }
                        let reqs: Vec<u16> = (0..nreq).map(|i| be16(&data[6 + nl + 2 * i..])).collect();
                        Some((name.to_vec(), reqs))
                    })();
                    let Some((name, reqs)) = parsed else {
                        self.opt_reply(opt, REP_ERR_INVALID, b"malformed NBD_OPT_INFO/GO")?;
                        continue;
                    };
                    let Some((export_name, export)) = shared.export(&name) else {
                        self.opt_reply(opt, REP_ERR_UNKNOWN, b"no such export")?;
                        continue;
                    };
                    let export = export.clone();
                    let mut info = Vec::new();
                    info.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                    info.extend_from_slice(&export.size().to_be_bytes());
                    info.extend_from_slice(&self.transmission_flags().to_be_bytes());
                    self.opt_reply(opt, REP_INFO, &info)?;
                    for r in reqs {
                        let mut info = r.to_be_bytes().to_vec();
                        match r {
                            INFO_NAME => info.extend_from_slice(export_name.as_bytes()),
                            INFO_DESCRIPTION => info.extend_from_slice(export.description().as_bytes()),
                            INFO_BLOCK_SIZE => {
                                // Any alignment works (partial blocks are read, merged and
                                // written whole), 4 KiB avoids that, 32 MiB per request.
                                info.extend_from_slice(&1u32.to_be_bytes());
                                info.extend_from_slice(&4096u32.to_be_bytes());
                                info.extend_from_slice(&MAX_PAYLOAD.to_be_bytes());
                            }
                            _ => continue,
                        }
                        self.opt_reply(opt, REP_INFO, &info)?;
                    }
                    self.opt_reply(opt, REP_ACK, &[])?;
                    if opt == OPT_GO {
                        let mode = mode.on(export_name, &meta_for);
                        return Ok(Handshake::Transmit(export, mode));
                    }
                }
                OPT_STRUCTURED_REPLY => {
                    if len != 0 {
                        self.opt_reply(opt, REP_ERR_INVALID, b"NBD_OPT_STRUCTURED_REPLY takes no data")?;
                        continue;
                    }
                    mode.structured = true;
                    self.opt_reply(opt, REP_ACK, &[])?;
                }
                OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                    let set = opt == OPT_SET_META_CONTEXT;
                    let Some((name, queries)) = parse_meta_context(&data) else {
                        self.opt_reply(opt, REP_ERR_INVALID, b"malformed meta context request")?;
                        continue;
                    };
                    if set && !mode.structured {
                        self.opt_reply(opt, REP_ERR_INVALID, b"structured replies not negotiated")?;
                        continue;
                    }
                    if shared.export(&name).is_none() {
                        self.opt_reply(opt, REP_ERR_UNKNOWN, b"no such export")?;
                        continue;
                    }
                    // base:allocation is the one context: asked for by name,
                    // or (listing) by its namespace or by no query at all.
                    let wanted = queries
                        .iter()
                        .any(|q| q.as_slice() == BASE_ALLOCATION.as_bytes() || (!set && q.as_slice() == b"base:"))
                        || (!set && queries.is_empty());
                    if set {
                        mode.allocation = wanted;
                        meta_for = shared.export(&name).map(|(n, _)| n.to_string());
                    }
                    if wanted {
                        let mut m = BASE_ALLOCATION_ID.to_be_bytes().to_vec();
                        m.extend_from_slice(BASE_ALLOCATION.as_bytes());
                        self.opt_reply(opt, REP_META_CONTEXT, &m)?;
                    }
                    self.opt_reply(opt, REP_ACK, &[])?;
                }
                OPT_STARTTLS => {
                    self.opt_reply(opt, REP_ERR_UNSUP, b"not offered by this server")?;
                }
                _ => self.opt_reply(opt, REP_ERR_UNSUP, b"unknown option")?,
            }
        }
    }

    /// Read requests until the peer disconnects or the server stops; the
    /// workers and a reply writer of its own send the replies.
    fn transmit(&mut self, export: Arc<dyn Export>, mode: Mode) -> io::Result<()> {
        let shared = self.shared.clone();
        let cfg = &shared.cfg;
        let budget = Arc::new(ConnBudget {
            max_requests: cfg.conn_max_requests.max(1),
            max_bytes: cfg.conn_max_bytes,
            used: Mutex::new((0, 0)),
            freed: Condvar::new(),
        });
        let broken = Arc::new(AtomicBool::new(false));
        let (outbox, writer) = Outbox::start(
            self.sock.try_clone()?,
            mode.structured,
            broken.clone(),
            shared.stop.clone(),
            cfg.stop_grace,
            shared.stats.clone(),
        );
        let r = self.read_requests(&shared, &export, mode, &budget, &broken, &outbox);
        // The writer ends once every outbox (ours, and those of the jobs
        // still in flight) is gone.
        drop(outbox);
        let _ = writer.join();
        r
    }

    fn read_requests(
        &mut self,
        shared: &Arc<Shared>,
        export: &Arc<dyn Export>,
        mode: Mode,
        budget: &Arc<ConnBudget>,
        broken: &AtomicBool,
        outbox: &Outbox,
    ) -> io::Result<()> {
        let (stop, stats) = (&*shared.stop, &shared.stats);
        let size = export.size();
        let mut inbound = Inbound::new();
        loop {
            if stop.load(Ordering::SeqCst) || broken.load(Ordering::SeqCst) {
                return Ok(());
            }
            let mut h = [0u8; 28];
            if !inbound.read_exact(&mut self.sock, &mut h, stop)? {
                return Ok(());
            }
            if be32(&h) != REQUEST_MAGIC {
                return Ok(()); // protocol violation: hard disconnect
            }
            let flags = be16(&h[4..]);
            let typ = be16(&h[6..]);
            let cookie = be64(&h[8..]);
            let offset = be64(&h[16..]);
            let len = be32(&h[24..]);
            stats.requests.fetch_add(1, Ordering::Relaxed);
            if typ == CMD_DISC {
                return Ok(());
            }
            if typ == CMD_WRITE && len > MAX_PAYLOAD {
                return Ok(()); // cannot skip its payload safely: hard disconnect
            }
            let allowed = match typ {
                CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
                CMD_BLOCK_STATUS => CMD_FLAG_REQ_ONE,
                _ => CMD_FLAG_FUA,
            };
            let fua = flags & CMD_FLAG_FUA != 0;
            let end = offset.checked_add(len as u64);
            let bad = if flags & !allowed != 0 {
                Some(EINVAL)
            } else {
                match typ {
                    CMD_READ if len > MAX_PAYLOAD => Some(EINVAL),
                    CMD_READ | CMD_TRIM if end.is_none_or(|e| e > size) => Some(EINVAL),
                    CMD_WRITE | CMD_WRITE_ZEROES if end.is_none_or(|e| e > size) => Some(ENOSPC),
                    CMD_FLUSH if offset != 0 || len != 0 => Some(EINVAL),
                    // Only with base:allocation selected, and over bytes of the export.
                    CMD_BLOCK_STATUS if !mode.allocation || len == 0 || end.is_none_or(|e| e > size) => Some(EINVAL),
                    CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_WRITE_ZEROES | CMD_BLOCK_STATUS => None,
                    // CACHE included: not advertised (NBD_FLAG_SEND_CACHE), so
                    // the protocol asks for EINVAL.
                    _ => Some(EINVAL),
                }
            };
            // The payload this request holds until its reply is sent: a
            // write's data (read below, only once admitted), a read's data.
            let bytes = match typ {
                CMD_WRITE => len as u64,
                CMD_READ if bad.is_none() => len as u64,
                _ => 0,
            };
            if !budget.take(bytes, stop, broken) {
                return Ok(());
            }
            if !shared.queued.take(bytes, stop) {
                budget.give(bytes);
                return Ok(());
            }
            let ticket = Ticket {
                bytes,
                conn: budget.clone(),
                global: shared.queued.clone(),
            };
            let mut payload = AlignedBuf::scratch(0);
            if typ == CMD_WRITE {
                payload = AlignedBuf::scratch(len as usize);
                if !inbound.read_exact(&mut self.sock, &mut payload, stop)? {
                    return Ok(());
                }
            }
            if let Some(err) = bad {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                outbox.deliver(Reply {
                    cookie,
                    err,
                    offset,
                    body: Body::None,
                    _ticket: ticket,
                });
                continue;
            }
            let (export, outbox, stats2) = (export.clone(), outbox.clone(), stats.clone());
            let job: Job = Box::new(move || {
                let (err, body) = match execute(&*export, typ, offset, len, fua, flags, payload) {
                    Ok(body) => (0, body),
                    Err(e) => {
                        stats2.errors.fetch_add(1, Ordering::Relaxed);
                        (e, Body::None)
                    }
                };
                outbox.deliver(Reply {
                    cookie,
                    err,
                    offset,
                    body,
                    _ticket: ticket,
                });
            });
            if !shared.jobs.push(job) {
                return Ok(());
            }
        }
    }
}

/// Carry out one request; a read returns its data (in an aligned buffer,
/// so that the device may read into it with O_DIRECT).
fn execute(
    export: &dyn Export,
    typ: u16,
    offset: u64,
    len: u32,
    fua: bool,
    flags: u16,
    payload: AlignedBuf,
) -> Result<Body, u32> {
    let req_one = flags & CMD_FLAG_REQ_ONE != 0;
    let code = |e: ExportError, write: bool| match e {
        ExportError::OutOfRange(_) if write => ENOSPC,
        ExportError::OutOfRange(_) => EINVAL,
        ExportError::Io(_) => EIO,
    };
    match typ {
        CMD_READ => {
            let mut buf = AlignedBuf::scratch(len as usize);
            export.read(offset, &mut buf).map_err(|e| code(e, false))?;
            Ok(Body::Data(buf))
        }
        CMD_WRITE => export
            .write(offset, &payload, fua)
            .map(|_| Body::None)
            .map_err(|e| code(e, true)),
        CMD_WRITE_ZEROES if flags & CMD_FLAG_NO_HOLE != 0 => export
            .write_zeroes(offset, len as u64, fua)
            .map(|_| Body::None)
            .map_err(|e| code(e, true)),
        CMD_WRITE_ZEROES | CMD_TRIM => export
            .trim(offset, len as u64, fua)
            .map(|_| Body::None)
            .map_err(|e| code(e, true)),
        CMD_FLUSH => export.flush().map(|_| Body::None).map_err(|e| code(e, true)),
        CMD_BLOCK_STATUS => {
            let runs = export.extents(offset, len as u64).map_err(|e| code(e, false))?;
            descriptors(&runs, len, req_one).map(Body::Extents).ok_or(EIO)
        }
        _ => Err(EINVAL), // refused before it gets here
    }
}

/// An export's runs as `base:allocation` descriptors within the request's
/// `len` bytes: adjacent runs of equal flags merged, one only with
/// `REQ_ONE`. None if the export described no byte.
fn descriptors(runs: &[(u64, u32)], len: u32, req_one: bool) -> Option<Vec<(u32, u32)>> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    let mut left = len;
    for &(n, flags) in runs {
        let n = n.min(left as u64) as u32;
        if n == 0 {
            continue;
        }
        left -= n;
        match out.last_mut() {
            Some(last) if last.1 == flags => last.0 += n,
            _ => out.push((n, flags)),
        }
    }
    if req_one {
        out.truncate(1);
    }
    (!out.is_empty()).then_some(out)
}

/// The 20-byte header of a structured reply chunk.
fn chunk_head(flags: u16, typ: u16, cookie: u64, len: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(32);
    h.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    h.extend_from_slice(&flags.to_be_bytes());
    h.extend_from_slice(&typ.to_be_bytes());
    h.extend_from_slice(&cookie.to_be_bytes());
    h.extend_from_slice(&len.to_be_bytes());
    h
}

/// One reply on the wire: its head, and the data that follows it.
pub(super) fn encode(r: &Reply, structured: bool) -> (Vec<u8>, &[u8]) {
    let data: &[u8] = match &r.body {
        Body::Data(b) => b,
        _ => &[],
    };
    if !structured {
        let mut head = Vec::with_capacity(16);
        head.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        head.extend_from_slice(&r.err.to_be_bytes());
        head.extend_from_slice(&r.cookie.to_be_bytes());
        return (head, data);
    }
    if r.err != 0 {
        // Error number and an empty message.
        let mut head = chunk_head(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, r.cookie, 6);
        head.extend_from_slice(&r.err.to_be_bytes());
        head.extend_from_slice(&0u16.to_be_bytes());
        return (head, &[]);
    }
    match &r.body {
        Body::Data(_) if !data.is_empty() => {
            let mut head = chunk_head(REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, r.cookie, 8 + data.len() as u32);
            head.extend_from_slice(&r.offset.to_be_bytes());
            (head, data)
        }
        Body::Extents(d) => {
            let mut head = chunk_head(
                REPLY_FLAG_DONE,
                REPLY_TYPE_BLOCK_STATUS,
                r.cookie,
                4 + 8 * d.len() as u32,
            );
            head.extend_from_slice(&BASE_ALLOCATION_ID.to_be_bytes());
            for (n, flags) in d {
                head.extend_from_slice(&n.to_be_bytes());
                head.extend_from_slice(&flags.to_be_bytes());
            }
            (head, &[])
        }
        _ => (chunk_head(REPLY_FLAG_DONE, REPLY_TYPE_NONE, r.cookie, 0), &[]),
    }
}

/// The export name and the queries of `NBD_OPT_LIST/SET_META_CONTEXT`.
fn parse_meta_context(d: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = d.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    let nl = be32(take(4)?) as usize;
    let name = take(nl)?.to_vec();
    let nq = be32(take(4)?) as usize;
    let mut queries = Vec::new();
    for _ in 0..nq {
        let ql = be32(take(4)?) as usize;
        queries.push(take(ql)?.to_vec());
    }
    (at == d.len()).then_some((name, queries))
}
