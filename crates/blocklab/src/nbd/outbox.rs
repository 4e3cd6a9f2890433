//! How one connection's replies reach the wire. The worker that completes
//! a request sends its reply itself when the socket is free, in one
//! non-blocking vectored send: no hand-off to another thread, whose wake-up
//! costs more than the send on a small request. Whatever cannot go out at
//! once (the socket is busy, or the peer's window is full) goes to the
//! connection's reply writer thread, the only one that ever blocks on the
//! socket; so a client that stops reading still stalls only itself, and
//! workers never wait on a peer.
//!
//! Every byte goes out under the `wire` lock, and a reply sent in part
//! leaves its remainder in that lock (`Wire::rest`), which the writer sends
//! before anything else: two replies' bytes never interleave.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::server::{encode, write_full, Reply, ServerStats};

/// A reply and how many of its bytes are already on the wire.
pub(super) struct Pending {
    reply: Reply,
    sent: usize,
}

/// The socket's sending side, shared by the workers and the writer thread.
struct Wire {
    sock: TcpStream,
    /// Held by whoever sends; holds the reply sent in part, if any.
    rest: Mutex<Option<Pending>>,
    broken: Arc<AtomicBool>,
    structured: bool,
    stats: Arc<ServerStats>,
}

impl Wire {
    /// Give up on the peer: no more replies, the reader stops.
    fn cut(&self) {
        self.broken.store(true, Ordering::SeqCst);
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

/// What a worker holds to reply (cloned per request). The writer thread
/// ends once every `Outbox` of its connection is dropped.
#[derive(Clone)]
pub(super) struct Outbox {
    wire: Arc<Wire>,
    /// To the writer thread: a reply to send whole, or None: a wake-up to
    /// send `Wire::rest`.
    queue: mpsc::Sender<Option<Pending>>,
}

impl Outbox {
    /// The outbox of a connection, and its writer thread (which gives up on
    /// a peer not reading for `grace` once `stop` is set).
    pub(super) fn start(
        sock: TcpStream,
        structured: bool,
        broken: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
        grace: Duration,
        stats: Arc<ServerStats>,
    ) -> (Outbox, std::thread::JoinHandle<()>) {
        let wire = Arc::new(Wire {
            sock,
            rest: Mutex::new(None),
            broken,
            structured,
            stats,
        });
        let (queue, due) = mpsc::channel();
        let writer = {
            let wire = wire.clone();
            std::thread::spawn(move || write_replies(&wire, due, &stop, grace))
        };
        (Outbox { wire, queue }, writer)
    }

    /// Send `reply` now if the socket is free, else leave it to the writer
    /// thread. Never blocks on the peer. A reply to a peer given up on is
    /// dropped.
    pub(super) fn deliver(&self, reply: Reply) {
        let w = &*self.wire;
        if w.broken.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut rest) = w.rest.try_lock() else {
            let _ = self.queue.send(Some(Pending { reply, sent: 0 }));
            return;
        };
        if rest.is_some() {
            drop(rest);
            let _ = self.queue.send(Some(Pending { reply, sent: 0 }));
            return;
        }
        let sent = {
            let (head, data) = encode(&reply, w.structured);
            match send_now(&w.sock, &head, data) {
                Ok(n) if n == head.len() + data.len() => {
                    w.stats.replies_direct.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Ok(n) => n,
                Err(_) => {
                    w.cut();
                    return;
                }
            }
        };
        // The rest goes before any other reply; the writer is woken for it
        // while the lock is held, so it cannot miss it.
        *rest = Some(Pending { reply, sent });
        let _ = self.queue.send(None);
    }
}

/// One non-blocking vectored send of `head` then `data`: the bytes sent
/// (0 when the socket's buffer is full).
fn send_now(sock: &TcpStream, head: &[u8], data: &[u8]) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        },
    ];
    // SAFETY: a zeroed msghdr is valid; it names only the iovecs above,
    // which name `head` and `data`, borrowed for the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = if data.is_empty() { 1 } else { 2 };
    loop {
        // SAFETY: as above; the flags make the call return at once and
        // turn a closed peer into EPIPE rather than SIGPIPE.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// The reply writer of one connection: sends what the workers could not,
/// the rest of a reply sent in part first. After a failed write (peer gone,
/// or not reading at shutdown) it cuts the connection and drops what else
/// comes.
fn write_replies(wire: &Wire, due: mpsc::Receiver<Option<Pending>>, stop: &AtomicBool, grace: Duration) {
    for next in due {
        if wire.broken.load(Ordering::SeqCst) {
            wire.rest.lock().unwrap().take();
            continue;
        }
        let mut rest = wire.rest.lock().unwrap();
        let ok = rest
            .take()
            .into_iter()
            .chain(next)
            .try_for_each(|p| send_rest(wire, &p, stop, grace));
        drop(rest);
        if ok.is_err() {
            wire.cut();
        }
    }
}

/// Send what is left of `p`, blocking (within `grace` once stopping).
fn send_rest(wire: &Wire, p: &Pending, stop: &AtomicBool, grace: Duration) -> io::Result<()> {
    wire.stats.replies_by_writer.fetch_add(1, Ordering::Relaxed);
    let (head, data) = encode(&p.reply, wire.structured);
    let mut parts = [io::IoSlice::new(&head), io::IoSlice::new(data)];
    let mut slices: &mut [io::IoSlice] = &mut parts;
    io::IoSlice::advance_slices(&mut slices, p.sent);
    write_full(&wire.sock, slices, stop, grace, None)
}
