//! Serving an array over NBD, and reaching it while it is served.
//!
//! One process has an array open at a time (the directory's `lock`). While
//! `real serve` runs, the other commands (`fail`, `replace`, `rebuild`,
//! `check`, `status`) do not open the array themselves: they send their
//! request to the server's control channel and the server carries it out on
//! the array it has open, so a failure is seen by the very next request and
//! the server keeps serving (degraded, recovering...) without a restart.
//!
//! The control channel is a TCP socket on 127.0.0.1 with a random token;
//! port and token are in `serve.json` (mode 0600, beside the array), so only
//! users who can read the array directory can send commands. A request is
//! one JSON line `{"token", "op", ...}`, the answer one JSON line `{"ok",
//! "result"}` or `{"ok": false, "error"}`. A stale `serve.json` (the server
//! was killed) is ignored: the lock is free and the command opens the array.
//! The request line is bounded while it is read, before its token is looked
//! at (`MAX_REQUEST_LINE`), and must arrive within `REQUEST_TIMEOUT`; a
//! stopping server drops a connection still sending its request.
//!
//! The server also runs MD's bitmap daemon: every two seconds, if bitmap
//! regions are dirty, it syncs the members and clears the idle regions.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::dgraid::{self, RealDgraid};
use super::rebuild::{RebuildOptions, RebuildReport};
use super::scrub::ScrubReport;
use super::stack::RealStack;
use super::{is_open_elsewhere, OpenConfig, RealArray, ReqError, Status};
use crate::error::{Error, Result};
use crate::nbd::server::{serve_exports, ServerConfig, ServerHandle};
use crate::nbd::{Export, ExportError};

pub const SERVE_FILE: &str = "serve.json";

/// Longest control request line; the longest real one (a rebuild's options)
/// is a few hundred bytes.
pub const MAX_REQUEST_LINE: usize = 64 * 1024;
/// How long a control client may take to send its request line.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a control connection's blocked read wakes up to look at the
/// stop flag and the clock.
const CONTROL_POLL: Duration = Duration::from_millis(200);

/// How to reach a running server (`serve.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServeInfo {
    pub pid: u32,
    /// The NBD address (`127.0.0.1:PORT`).
    pub nbd: String,
    /// The export (a stack with tenants: the first tenant's).
    pub export: String,
    /// Every export served (a stack with tenants: one per tenant).
    #[serde(default)]
    pub exports: Vec<String>,
    pub control: String,
    pub token: String,
}

impl Export for RealArray {
    fn size(&self) -> u64 {
        self.size_bytes()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ExportError> {
        RealArray::read(self, offset, buf).map_err(to_export)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ExportError> {
        RealArray::write(self, offset, data, fua).map_err(to_export)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ExportError> {
        RealArray::write_zeroes(self, offset, len, fua).map_err(to_export)
    }
    /// Whole stripes become holes (see `trim`).
    fn trim(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ExportError> {
        RealArray::trim(self, offset, len, fua).map_err(to_export)
    }
    fn flush(&self) -> std::result::Result<(), ExportError> {
        RealArray::flush(self).map_err(to_export)
    }
    /// Never-written blocks are holes (see `alloc`); the rest is data.
    fn extents(&self, offset: u64, len: u64) -> std::result::Result<Vec<(u64, u32)>, ExportError> {
        let hz = crate::nbd::STATE_HOLE | crate::nbd::STATE_ZERO;
        Ok(self
            .allocation(offset, len)
            .into_iter()
            .map(|(n, hole)| (n, if hole { hz } else { 0 }))
            .collect())
    }
    fn description(&self) -> String {
        let c = self.config();
        format!(
            "blocklab {} of {}, chunk {} ({})",
            c.level.name(),
            c.disks,
            human_bytes(c.chunk_bytes),
            self.dir().display()
        )
    }
}

/// A size in the largest binary unit that divides it (`65536` -> `64 KiB`),
/// as people write chunk sizes.
pub fn human_bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut i = 0;
    while i + 1 < units.len() && v >= 1024 && v.is_multiple_of(1024) {
        v /= 1024;
        i += 1;
    }
    format!("{v} {}", units[i])
}

pub(super) fn to_export(e: ReqError) -> ExportError {
    match e {
        ReqError::OutOfRange(m) => ExportError::OutOfRange(m),
        ReqError::Unreadable(m) | ReqError::Io(m) => ExportError::Io(m),
    }
}

/// `real serve` settings.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `127.0.0.1:PORT` (port 0: any free port).
    pub listen: String,
    pub threads: usize,
    pub direct: bool,
    pub name: String,
    /// MD's bitmap daemon period.
    pub bitmap_interval: Duration,
    /// Start a dirty degraded array (`--start-dirty-degraded`).
    pub start_dirty_degraded: bool,
    /// Record the export's write stream here (`--record-writes`; D-GRAID
    /// arrays only).
    pub record_writes: Option<std::path::PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: "127.0.0.1:10809".into(),
            threads: 16,
            direct: false,
            name: "blocklab".into(),
            bitmap_interval: Duration::from_secs(2),
            start_dirty_degraded: false,
            record_writes: None,
        }
    }
}

/// A served array (with the stack in front of it, when its directory has one).
pub struct Serving {
    array: Option<Arc<RealArray>>,
    /// A D-GRAID array served instead of a RAID one (`exec/real/dgraid`).
    dgraid: Option<Arc<RealDgraid>>,
    stack: Option<Arc<RealStack>>,
    nbd: Option<ServerHandle>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub info: ServeInfo,
    dir: PathBuf,
}

fn random_token() -> String {
    // Not secret-grade randomness, but unguessable from outside the machine
    // and the file carrying it is readable by its owner only.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(
        &(std::process::id(), Instant::now(), std::thread::current().id()),
        &mut h,
    );
    let a = std::hash::Hasher::finish(&h);
    let b = std::collections::hash_map::RandomState::new();
    let c = std::hash::BuildHasher::hash_one(&b, a);
    format!("{a:016x}{c:016x}")
}

/// Open the array in `dir` and serve it.
pub fn serve(dir: &Path, opts: &ServeOptions) -> Result<Serving> {
    let listener =
        TcpListener::bind(&opts.listen).map_err(|e| Error::config(format!("--listen {}: {e}", opts.listen)))?;
    if dgraid::is_dgraid_dir(dir) {
        let array = Arc::new(RealDgraid::open(dir)?);
        if let Some(p) = &opts.record_writes {
            array.record_writes(p)?;
        }
        let ops = {
            let a = array.clone();
            Arc::new(move |req: &Value, stop: &AtomicBool| a.run_op(req, stop)) as OpHandler
        };
        let exports = vec![(opts.name.clone(), array.clone() as Arc<dyn Export>)];
        return start(dir, opts, listener, exports, false, ops, None, Some(array), None);
    }
    if opts.record_writes.is_some() {
        return Err(Error::config(
            "--record-writes: only a D-GRAID array records its write stream (for `dgraid infer --order stream:LOG`)",
        ));
    }
    let array = Arc::new(RealArray::open(
        dir,
        OpenConfig {
            direct: opts.direct,
            faults: None,
            start_dirty_degraded: opts.start_dirty_degraded,
        },
    )?);
    let stack = RealStack::load(dir, &array)?.map(Arc::new);
    // A stack with tenants offers one export per tenant, peers (no default
    // export); otherwise one export, `--name`, also under the empty name.
    let exports: Vec<(String, Arc<dyn Export>)> = match &stack {
        Some(s) => s.exports(&opts.name),
        None => vec![(opts.name.clone(), array.clone() as Arc<dyn Export>)],
    };
    let peers = stack.as_ref().is_some_and(|s| s.has_tenants());
    let ops = {
        let (array, stack) = (array.clone(), stack.clone());
        let rebuilding = Arc::new(Mutex::new(()));
        Arc::new(move |req: &Value, stop: &AtomicBool| run_op(&array, stack.as_deref(), req, stop, &rebuilding))
            as OpHandler
    };
    start(dir, opts, listener, exports, peers, ops, Some(array), None, stack)
}

/// A control request's handler: the request and the server's stop flag in,
/// the result out.
type OpHandler = Arc<dyn Fn(&Value, &AtomicBool) -> Result<Value> + Send + Sync>;

/// Serve `exports` on `listener` (`peers`: no default export), answer
/// control requests with `ops`, and write `serve.json`.
#[allow(clippy::too_many_arguments)]
fn start(
    dir: &Path,
    opts: &ServeOptions,
    listener: TcpListener,
    exports: Vec<(String, Arc<dyn Export>)>,
    peers: bool,
    ops: OpHandler,
    array: Option<Arc<RealArray>>,
    dgraid: Option<Arc<RealDgraid>>,
    stack: Option<Arc<RealStack>>,
) -> Result<Serving> {
    let names: Vec<String> = exports.iter().map(|(n, _)| n.clone()).collect();
    let nbd = serve_exports(
        listener,
        exports,
        ServerConfig {
            threads: opts.threads,
            empty_name_is_first: !peers,
            ..Default::default()
        },
    )
    .map_err(|e| Error::io(&opts.listen, e))?;
    let control = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("control socket", e))?;
    control
        .set_nonblocking(true)
        .map_err(|e| Error::io("control socket", e))?;
    let info = ServeInfo {
        pid: std::process::id(),
        nbd: nbd.addr().to_string(),
        export: names[0].clone(),
        exports: names,
        control: control
            .local_addr()
            .map_err(|e| Error::io("control socket", e))?
            .to_string(),
        token: random_token(),
    };
    let serve_path = dir.join(SERVE_FILE);
    {
        let _ = fs::remove_file(&serve_path);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&serve_path)
            .map_err(|e| Error::io(serve_path.display().to_string(), e))?;
        f.write_all(serde_json::to_string_pretty(&info).expect("serializes").as_bytes())
            .map_err(|e| Error::io(serve_path.display().to_string(), e))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (stop, token) = (stop.clone(), info.token.clone());
        threads.push(std::thread::spawn(move || control_loop(control, ops, stop, token)));
    }
    if let Some(array) = &array {
        let (array, stop, every) = (array.clone(), stop.clone(), opts.bitmap_interval);
        threads.push(std::thread::spawn(move || {
            let mut last = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                if last.elapsed() >= every {
                    last = Instant::now();
                    if array.bitmap_dirty() {
                        if let Err(e) = array.flush() {
                            eprintln!("blocklab: bitmap daemon: {e}");
                        }
                    }
                }
            }
        }));
    }
    Ok(Serving {
        array,
        dgraid,
        stack,
        nbd: Some(nbd),
        stop,
        threads,
        info,
        dir: dir.to_path_buf(),
    })
}

impl Serving {
    /// The RAID array served (not for a D-GRAID one: see [`Serving::status`]).
    pub fn array(&self) -> &Arc<RealArray> {
        self.array.as_ref().expect("a RAID array is served")
    }

    /// The served array's status (RAID or D-GRAID).
    pub fn status(&self) -> Status {
        match (&self.array, &self.dgraid) {
            (Some(a), _) => a.status(),
            (None, Some(d)) => d.status(),
            (None, None) => unreachable!("something is served"),
        }
    }

    /// What opening the served array had to do.
    pub fn recovery(&self) -> super::Recovery {
        match (&self.array, &self.dgraid) {
            (Some(a), _) => a.recovery.clone(),
            (None, Some(d)) => d.recovery.clone(),
            (None, None) => unreachable!("something is served"),
        }
    }

    /// The stack served in front of the array, if any.
    pub fn stack(&self) -> Option<&Arc<RealStack>> {
        self.stack.as_ref()
    }

    /// Stop serving: requests in flight finish, the stack's dirty blocks
    /// are destaged, the array is closed cleanly.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(n) = self.nbd.take() {
            n.shutdown();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(s) = self.stack.take() {
            s.flush().map_err(|e| Error::io(self.dir.display().to_string(), e))?;
        }
        let _ = fs::remove_file(self.dir.join(SERVE_FILE));
        if let Some(d) = self.dgraid.take() {
            let d = Arc::try_unwrap(d).map_err(|_| Error::config("array still in use at shutdown"))?;
            return d.close();
        }
        let array = self.array.take().expect("a RAID array is served");
        let array = Arc::try_unwrap(array).map_err(|_| Error::config("array still in use at shutdown"))?;
        array.close()
    }
}

fn control_loop(listener: TcpListener, ops: OpHandler, stop: Arc<AtomicBool>, token: String) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((sock, _)) => {
                let (ops, stop, token) = (ops.clone(), stop.clone(), token.clone());
                conns.push(std::thread::spawn(move || {
                    let _ = handle_control(sock, &*ops, &stop, &token);
                }));
                conns.retain(|h| !h.is_finished());
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

fn handle_control(
    mut sock: TcpStream,
    ops: &(dyn Fn(&Value, &AtomicBool) -> Result<Value> + Send + Sync),
    stop: &AtomicBool,
    token: &str,
) -> std::io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(CONTROL_POLL))?;
    sock.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let answer = match read_request_line(&mut sock, stop, REQUEST_TIMEOUT) {
        Err(RequestLine::Stopping) => return Ok(()),
        Err(RequestLine::Bad(e)) => {
            let answer = json!({"ok": false, "error": format!("bad control request: {e}")});
            sock.write_all(format!("{answer}\n").as_bytes())?;
            // Closing with unread input would reset the connection and
            // could lose the answer: discard (never keep) what still comes,
            // for a moment.
            sock.shutdown(std::net::Shutdown::Write)?;
            let until = Instant::now() + Duration::from_secs(2);
            let mut sink = [0u8; 4096];
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                match sock.read(&mut sink) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            return Ok(());
        }
        Ok(line) => match serde_json::from_str::<Value>(&line) {
            Err(e) => json!({"ok": false, "error": format!("bad control request: {e}")}),
            Ok(req) if req["token"].as_str() != Some(token) => json!({"ok": false, "error": "bad control token"}),
            Ok(req) => match ops(&req, stop) {
                Ok(v) => json!({"ok": true, "result": v}),
                Err(e) => json!({"ok": false, "error": e.to_string()}),
            },
        },
    };
    sock.write_all(format!("{answer}\n").as_bytes())
}

/// Why no request line was read.
enum RequestLine {
    /// Answered with an error: too long, too slow, not UTF-8, cut short.
    Bad(String),
    /// The server is stopping: the connection is dropped unanswered.
    Stopping,
}

/// Read one request line (without its newline), never holding more than
/// `MAX_REQUEST_LINE` bytes of it, and giving up after `timeout`.
fn read_request_line(
    sock: &mut TcpStream,
    stop: &AtomicBool,
    timeout: Duration,
) -> std::result::Result<String, RequestLine> {
    let started = Instant::now();
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return Err(RequestLine::Bad("connection closed before the end of the line".into())),
            Ok(k) => {
                let end = buf[..k].iter().position(|&b| b == b'\n');
                line.extend_from_slice(&buf[..end.unwrap_or(k)]);
                if line.len() > MAX_REQUEST_LINE {
                    return Err(RequestLine::Bad(format!(
                        "request line longer than {MAX_REQUEST_LINE} bytes"
                    )));
                }
                if end.is_some() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RequestLine::Bad(e.to_string())),
        }
        if stop.load(Ordering::SeqCst) {
            return Err(RequestLine::Stopping);
        }
        if started.elapsed() >= timeout {
            return Err(RequestLine::Bad(format!(
                "no complete request line within {} s",
                timeout.as_secs()
            )));
        }
    }
    String::from_utf8(line).map_err(|_| RequestLine::Bad("request line is not UTF-8".into()))
}

fn arg_u64(req: &Value, key: &str) -> Result<u64> {
    req[key]
        .as_u64()
        .ok_or_else(|| Error::config(format!("control request: field `{key}` missing or not a number")))
}

/// Field `disk`: a member of this array (checked as sent, never truncated).
fn arg_disk(array: &RealArray, req: &Value) -> Result<u32> {
    let disk = arg_u64(req, "disk")?;
    let disks = array.config().disks;
    if disk >= disks as u64 {
        return Err(Error::config(format!(
            "control request: field `disk`: {disk} is not a member (the array has disks 0..{})",
            disks - 1
        )));
    }
    Ok(disk as u32)
}

fn run_op(
    array: &RealArray,
    stack: Option<&RealStack>,
    req: &Value,
    stop: &AtomicBool,
    rebuilding: &Mutex<()>,
) -> Result<Value> {
    match req["op"].as_str().unwrap_or("") {
        "status" => Ok(to(&array.status())),
        "stack" => match stack {
            Some(s) => Ok(to(&s.result())),
            None => Err(Error::config("this server serves an array without a stack")),
        },
        "fail" => Ok(to(&array.fail(arg_disk(array, req)?)?)),
        "replace" => Ok(to(&array.replace(arg_disk(array, req)?)?)),
        "check" => Ok(to(&array.check(req["repair"].as_bool().unwrap_or(false))?)),
        "flush" => {
            match stack {
                Some(s) => s.flush(),
                None => array.flush(),
            }
            .map_err(|e| Error::io(array.dir().display().to_string(), e))?;
            Ok(json!({}))
        }
        "rebuild" => {
            let _busy = rebuilding
                .try_lock()
                .map_err(|_| Error::config("a rebuild is already running on this server"))?;
            let opts: RebuildOptions = serde_json::from_value(req["opts"].clone())
                .map_err(|e| Error::config(format!("control request: field `opts`: {e}")))?;
            Ok(to(&array.rebuild(&opts, stop)?))
        }
        other => Err(Error::config(format!("unknown control operation `{other}`"))),
    }
}

fn to<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("reports serialize")
}

/// The running server of `dir`, if any.
pub fn server_of(dir: &Path) -> Result<Option<ServeInfo>> {
    let p = dir.join(SERVE_FILE);
    // A lock seen held without a serve file may be a process closing the
    // array, or a child process forked meanwhile that holds the lock's file
    // descriptor until it executes: look again for a moment before saying so.
    for _ in 0..50 {
        if !is_open_elsewhere(dir) {
            return Ok(None);
        }
        if p.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = fs::read_to_string(&p).map_err(|_| {
        Error::config(format!(
            "{}: the array is open in another process that is not a server (no {SERVE_FILE})",
            dir.display()
        ))
    })?;
    let info: ServeInfo = serde_json::from_str(&text).map_err(|e| {
        Error::parse(
            p.display().to_string(),
            crate::error::Location::Whole,
            "serve",
            e.to_string(),
        )
    })?;
    Ok(Some(info))
}

/// Send one control request to a server and return its result.
pub fn request(info: &ServeInfo, mut req: Value) -> Result<Value> {
    req["token"] = json!(info.token);
    let mut s = TcpStream::connect(&info.control).map_err(|e| {
        Error::config(format!(
            "cannot reach the server (pid {}) at {}: {e}",
            info.pid, info.control
        ))
    })?;
    s.write_all(format!("{req}\n").as_bytes())
        .map_err(|e| Error::io(&info.control, e))?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| Error::io(&info.control, e))?;
    let v: Value = serde_json::from_str(&line).map_err(|e| Error::io(&info.control, e))?;
    if v["ok"].as_bool() == Some(true) {
        Ok(v["result"].clone())
    } else {
        Err(Error::config(
            v["error"].as_str().unwrap_or("control request failed").to_string(),
        ))
    }
}

/// Run `op` on the served array through its server, or open the array here.
fn dispatch<T: serde::de::DeserializeOwned>(
    dir: &Path,
    req: Value,
    local: impl FnOnce(&RealArray) -> Result<T>,
) -> Result<T> {
    dispatch_with(dir, req, &OpenConfig::default(), local)
}

/// [`dispatch`], opening the array here with `open`.
fn dispatch_with<T: serde::de::DeserializeOwned>(
    dir: &Path,
    req: Value,
    open: &OpenConfig,
    local: impl FnOnce(&RealArray) -> Result<T>,
) -> Result<T> {
    if let Some(r) = served_answer(dir, req)? {
        return Ok(r);
    }
    let a = RealArray::open(dir, open.clone())?;
    let r = local(&a)?;
    a.close()?;
    Ok(r)
}

/// The served array's answer to `req`, or `None` when no server holds
/// `dir` (the caller then opens the array itself).
pub fn served_answer<T: serde::de::DeserializeOwned>(dir: &Path, req: Value) -> Result<Option<T>> {
    let Some(info) = server_of(dir)? else {
        return Ok(None);
    };
    let v = request(&info, req)?;
    serde_json::from_value(v)
        .map(Some)
        .map_err(|e| Error::config(format!("bad answer from the server: {e}")))
}

pub fn status(dir: &Path) -> Result<Status> {
    if dgraid::is_dgraid_dir(dir) {
        return dgraid::ops::status(dir);
    }
    dispatch(dir, json!({"op": "status"}), |a| Ok(a.status()))
}

pub fn fail(dir: &Path, disk: u32) -> Result<Status> {
    if dgraid::is_dgraid_dir(dir) {
        return dgraid::ops::fail(dir, disk);
    }
    dispatch(dir, json!({"op": "fail", "disk": disk}), |a| a.fail(disk))
}

pub fn replace(dir: &Path, disk: u32) -> Result<Status> {
    if dgraid::is_dgraid_dir(dir) {
        return dgraid::ops::replace(dir, disk);
    }
    dispatch(dir, json!({"op": "replace", "disk": disk}), |a| a.replace(disk))
}

pub fn check(dir: &Path, repair: bool) -> Result<ScrubReport> {
    check_with(dir, repair, &OpenConfig::default())
}

/// [`check`], opening the array here (when not served) with `open`.
pub fn check_with(dir: &Path, repair: bool, open: &OpenConfig) -> Result<ScrubReport> {
    if dgraid::is_dgraid_dir(dir) {
        return Err(Error::config(format!(
            "{}: a D-GRAID array has no parity to check (its copies are made equal after a crash)",
            dir.display()
        )));
    }
    dispatch_with(dir, json!({"op": "check", "repair": repair}), open, |a| a.check(repair))
}

/// Rebuild; `stop` (local runs) ends it early, resumable.
pub fn rebuild(dir: &Path, opts: &RebuildOptions, stop: &AtomicBool) -> Result<RebuildReport> {
    rebuild_with(dir, opts, stop, &OpenConfig::default())
}

/// [`rebuild`], opening the array here (when not served) with `open`.
pub fn rebuild_with(dir: &Path, opts: &RebuildOptions, stop: &AtomicBool, open: &OpenConfig) -> Result<RebuildReport> {
    if dgraid::is_dgraid_dir(dir) {
        return dgraid::ops::rebuild(dir, opts, stop);
    }
    dispatch_with(dir, json!({"op": "rebuild", "opts": opts}), open, |a| {
        a.rebuild(opts, stop)
    })
}

/// Run `f` on another thread, calling `poll` every 100 ms; when `poll`
/// returns an error (e.g. Ctrl-C seen by the caller) `stop` is raised, `f`
/// is waited for, and the error is returned.
pub fn run_interruptible<T: Send, E>(
    f: impl FnOnce(&AtomicBool) -> T + Send,
    mut poll: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<T, E> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| f(&stop));
        loop {
            if h.is_finished() {
                return Ok(h.join().expect("the task does not panic"));
            }
            std::thread::sleep(Duration::from_millis(100));
            if let Err(e) = poll() {
                stop.store(true, Ordering::SeqCst);
                let _ = h.join();
                return Err(e);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair: (the server's end, with the control channel's read
    /// timeout, the client's end).
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_read_timeout(Some(CONTROL_POLL)).unwrap();
        (server, client)
    }

    #[test]
    fn a_request_line_is_read_whole() {
        let (mut s, mut c) = pair();
        c.write_all(b"{\"op\": \"status\"}\nrest").unwrap();
        let stop = AtomicBool::new(false);
        let line = read_request_line(&mut s, &stop, Duration::from_secs(10)).ok().unwrap();
        assert_eq!(line, "{\"op\": \"status\"}");
    }

    #[test]
    fn a_line_past_the_bound_is_refused_while_it_is_read() {
        let (mut s, mut c) = pair();
        // 16 MiB without a newline: refused once past the bound, the rest
        // never read (the sender is left blocked, not the reader).
        std::thread::spawn(move || {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..16 {
                if c.write_all(&chunk).is_err() {
                    return;
                }
            }
        });
        let stop = AtomicBool::new(false);
        match read_request_line(&mut s, &stop, Duration::from_secs(60)) {
            Err(RequestLine::Bad(e)) => assert!(e.contains("longer than 65536 bytes"), "{e}"),
            _ => panic!("an endless line was accepted"),
        }
    }

    #[test]
    fn a_silent_client_times_out_and_a_stop_ends_the_wait() {
        let (mut s, mut c) = pair();
        c.write_all(b"{\"op\": ").unwrap();
        let stop = AtomicBool::new(false);
        match read_request_line(&mut s, &stop, Duration::from_millis(500)) {
            Err(RequestLine::Bad(e)) => assert!(e.contains("no complete request line"), "{e}"),
            _ => panic!("a half line was accepted"),
        }
        let (mut s, _c) = pair();
        stop.store(true, Ordering::SeqCst);
        assert!(matches!(
            read_request_line(&mut s, &stop, Duration::from_secs(60)),
            Err(RequestLine::Stopping)
        ));
    }
}
