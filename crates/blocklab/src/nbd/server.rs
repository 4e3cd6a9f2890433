//! The NBD server: one thread per connection reads requests and hands them
//! to a shared pool of worker threads, so several requests of one client (and
//! of several clients) are in flight at once; replies go back in completion
//! order, each written whole under the connection's writer lock.
//!
//! A `FLUSH` covers every write already replied to (a write is replied only
//! once its member writes completed). `DISC` stops reading, waits for the
//! connection's requests in flight, then closes. Stopping the server stops
//! accepting, lets each connection finish its requests in flight, and
//! answers nothing more.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::*;
use crate::exec::buf::AlignedBuf;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The export's name (`NBD_OPT_LIST`); the empty default name is accepted too.
    pub name: String,
    /// Worker threads shared by all connections.
    pub threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            name: "blocklab".into(),
            threads: 8,
        }
    }
}

/// Counters of the server's life.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub errors: AtomicU64,
}

type Job = Box<dyn FnOnce() + Send>;

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

    /// Stop accepting, finish the requests in flight, return when all
    /// connections are closed.
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

/// Serve `export` on `listener` until the handle is shut down.
pub fn serve(listener: TcpListener, export: Arc<dyn Export>, cfg: ServerConfig) -> io::Result<ServerHandle> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ServerStats::default());
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let mut workers = Vec::new();
    for _ in 0..cfg.threads.max(1) {
        let rx = rx.clone();
        workers.push(std::thread::spawn(move || loop {
            let job = match rx.lock().unwrap().recv() {
                Ok(j) => j,
                Err(_) => return,
            };
            job();
        }));
    }
    let st = stop.clone();
    let sts = stats.clone();
    let accept = std::thread::spawn(move || {
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        while !st.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((sock, _)) => {
                    sts.connections.fetch_add(1, Ordering::Relaxed);
                    let (export, tx, st, sts, cfg) = (export.clone(), tx.clone(), st.clone(), sts.clone(), cfg.clone());
                    conns.push(std::thread::spawn(move || {
                        let _ = Connection::run(sock, export, tx, st, sts, &cfg);
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
        drop(tx);
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

/// Read exactly `buf.len()` bytes, waking up every read timeout to see
/// whether the server is stopping. Ok(false): clean end of stream (or
/// stop) before the first byte.
fn read_full(s: &mut TcpStream, buf: &mut [u8], stop: &AtomicBool) -> io::Result<bool> {
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
                if stop.load(Ordering::SeqCst) && done == 0 {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
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

/// Requests of one connection still being served.
#[derive(Default)]
struct InFlight {
    n: Mutex<u64>,
    cv: Condvar,
}

impl InFlight {
    fn start(&self) {
        *self.n.lock().unwrap() += 1;
    }
    fn end(&self) {
        let mut n = self.n.lock().unwrap();
        *n -= 1;
        if *n == 0 {
            self.cv.notify_all();
        }
    }
    fn wait_idle(&self) {
        let mut n = self.n.lock().unwrap();
        while *n > 0 {
            n = self.cv.wait(n).unwrap();
        }
    }
}

struct Connection {
    sock: TcpStream,
    writer: Arc<Mutex<TcpStream>>,
    export: Arc<dyn Export>,
    stop: Arc<AtomicBool>,
}

enum Handshake {
    /// Go to transmission; send the trailing zeroes (EXPORT_NAME without NO_ZEROES).
    Transmit,
    Close,
}

impl Connection {
    fn run(
        sock: TcpStream,
        export: Arc<dyn Export>,
        jobs: mpsc::Sender<Job>,
        stop: Arc<AtomicBool>,
        stats: Arc<ServerStats>,
        cfg: &ServerConfig,
    ) -> io::Result<()> {
        sock.set_nodelay(true)?;
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        let writer = Arc::new(Mutex::new(sock.try_clone()?));
        let mut c = Connection {
            sock,
            writer,
            export,
            stop,
        };
        match c.handshake(cfg)? {
            Handshake::Close => return Ok(()),
            Handshake::Transmit => {}
        }
        let inflight = Arc::new(InFlight::default());
        let r = c.transmit(&jobs, &inflight, &stats);
        inflight.wait_idle();
        let _ = c.sock.shutdown(std::net::Shutdown::Both);
        r
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        self.writer.lock().unwrap().write_all(bytes)
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

    fn handshake(&mut self, cfg: &ServerConfig) -> io::Result<Handshake> {
        let mut hello = Vec::new();
        hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
        hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
        hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
        self.send(&hello)?;
        let mut cf = [0u8; 4];
        if !read_full(&mut self.sock, &mut cf, &self.stop)? {
            return Ok(Handshake::Close);
        }
        let client_flags = be32(&cf);
        if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
            return Ok(Handshake::Close); // unknown client flags: drop the connection
        }
        let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
        let known = |name: &[u8]| name.is_empty() || name == cfg.name.as_bytes();
        loop {
            let mut head = [0u8; 16];
            if !read_full(&mut self.sock, &mut head, &self.stop)? {
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
            if len > 0 && !read_full(&mut self.sock, &mut data, &self.stop)? {
                return Ok(Handshake::Close);
            }
            if self.stop.load(Ordering::SeqCst) && opt != OPT_ABORT {
                self.opt_reply(opt, REP_ERR_SHUTDOWN, b"server shutting down")?;
                continue;
            }
            match opt {
                OPT_EXPORT_NAME => {
                    if !known(&data) {
                        return Ok(Handshake::Close); // no way to report an error here
                    }
                    let mut m = Vec::new();
                    m.extend_from_slice(&self.export.size().to_be_bytes());
                    m.extend_from_slice(&self.transmission_flags().to_be_bytes());
                    if !no_zeroes {
                        m.extend_from_slice(&[0u8; 124]);
                    }
                    self.send(&m)?;
                    return Ok(Handshake::Transmit);
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
                    let mut m = Vec::new();
                    m.extend_from_slice(&(cfg.name.len() as u32).to_be_bytes());
                    m.extend_from_slice(cfg.name.as_bytes());
                    self.opt_reply(opt, REP_SERVER, &m)?;
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
                    if !known(&name) {
                        self.opt_reply(opt, REP_ERR_UNKNOWN, b"no such export")?;
                        continue;
                    }
                    let mut info = Vec::new();
                    info.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                    info.extend_from_slice(&self.export.size().to_be_bytes());
                    info.extend_from_slice(&self.transmission_flags().to_be_bytes());
                    self.opt_reply(opt, REP_INFO, &info)?;
                    for r in reqs {
                        let mut info = r.to_be_bytes().to_vec();
                        match r {
                            INFO_NAME => info.extend_from_slice(cfg.name.as_bytes()),
                            INFO_DESCRIPTION => info.extend_from_slice(self.export.description().as_bytes()),
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
                        return Ok(Handshake::Transmit);
                    }
                }
                OPT_STRUCTURED_REPLY | OPT_STARTTLS => {
                    self.opt_reply(opt, REP_ERR_UNSUP, b"not offered by this server")?;
                }
                _ => self.opt_reply(opt, REP_ERR_UNSUP, b"unknown option")?,
            }
        }
    }

    fn transmit(
        &mut self,
        jobs: &mpsc::Sender<Job>,
        inflight: &Arc<InFlight>,
        stats: &Arc<ServerStats>,
    ) -> io::Result<()> {
        let size = self.export.size();
        loop {
            let mut h = [0u8; 28];
            if !read_full(&mut self.sock, &mut h, &self.stop)? {
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
            let mut payload = AlignedBuf::scratch(0);
            if typ == CMD_WRITE {
                if len > MAX_PAYLOAD {
                    return Ok(()); // cannot skip it safely: hard disconnect
                }
                payload = AlignedBuf::scratch(len as usize);
                if !read_full(&mut self.sock, &mut payload, &self.stop)? {
                    return Ok(());
                }
            }
            let allowed = match typ {
                CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
                _ => CMD_FLAG_FUA,
            };
            let fua = flags & CMD_FLAG_FUA != 0;
            let end = offset.checked_add(len as u64);
            let bad = if flags & !allowed != 0 {
                Some(EINVAL)
            } else {
                match typ {
                    CMD_READ if len > MAX_PAYLOAD => Some(EINVAL),
                    CMD_READ | CMD_TRIM | CMD_CACHE if end.is_none_or(|e| e > size) => Some(EINVAL),
                    CMD_WRITE | CMD_WRITE_ZEROES if end.is_none_or(|e| e > size) => Some(ENOSPC),
                    CMD_FLUSH if offset != 0 || len != 0 => Some(EINVAL),
                    CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_CACHE | CMD_WRITE_ZEROES => None,
                    _ => Some(EINVAL),
                }
            };
            if let Some(err) = bad {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                reply(&self.writer, cookie, err, None)?;
                continue;
            }
            let (export, writer, inflight2, stats2) = (
                self.export.clone(),
                self.writer.clone(),
                inflight.clone(),
                stats.clone(),
            );
            inflight.start();
            let job: Job = Box::new(move || {
                let result = execute(&*export, typ, offset, len, fua, payload);
                let (err, data) = match result {
                    Ok(data) => (0, data),
                    Err(e) => {
                        stats2.errors.fetch_add(1, Ordering::Relaxed);
                        (e, None)
                    }
                };
                let _ = reply(&writer, cookie, err, data);
                inflight2.end();
            });
            if jobs.send(job).is_err() {
                inflight.end();
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
    payload: AlignedBuf,
) -> Result<Option<AlignedBuf>, u32> {
    let code = |e: ExportError, write: bool| match e {
        ExportError::OutOfRange(_) if write => ENOSPC,
        ExportError::OutOfRange(_) => EINVAL,
        ExportError::Io(_) => EIO,
    };
    match typ {
        CMD_READ => {
            let mut buf = AlignedBuf::scratch(len as usize);
            export.read(offset, &mut buf).map_err(|e| code(e, false))?;
            Ok(Some(buf))
        }
        CMD_WRITE => export
            .write(offset, &payload, fua)
            .map(|_| None)
            .map_err(|e| code(e, true)),
        CMD_WRITE_ZEROES | CMD_TRIM => export
            .write_zeroes(offset, len as u64, fua)
            .map(|_| None)
            .map_err(|e| code(e, true)),
        CMD_FLUSH => export.flush().map(|_| None).map_err(|e| code(e, true)),
        _ => Ok(None), // CACHE: nothing to do
    }
}

fn reply(writer: &Mutex<TcpStream>, cookie: u64, err: u32, data: Option<AlignedBuf>) -> io::Result<()> {
    let mut head = [0u8; 16];
    head[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    head[4..8].copy_from_slice(&err.to_be_bytes());
    head[8..16].copy_from_slice(&cookie.to_be_bytes());
    let mut w = writer.lock().unwrap();
    let data: &[u8] = data.as_deref().unwrap_or(&[]);
    // Header and data in one vectored write where possible.
    let mut parts = [io::IoSlice::new(&head), io::IoSlice::new(data)];
    let mut slices: &mut [io::IoSlice] = &mut parts;
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
            Ok(k) => io::IoSlice::advance_slices(&mut slices, k),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
