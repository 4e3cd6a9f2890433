//! The server against an in-memory device, driven by our client and by
//! raw bytes: handshake options, every command, errors, requests in flight.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::client::{Client, ClientError};
use super::server::{serve, serve_exports, ServerConfig, ServerHandle};
use super::*;

struct Mem {
    data: Mutex<Vec<u8>>,
    flushes: Mutex<u64>,
}

impl Export for Mem {
    fn size(&self) -> u64 {
        self.data.lock().unwrap().len() as u64
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        if offset == 12_345 {
            return Err(ExportError::Io("byte 12345 is unreadable".into()));
        }
        let d = self.data.lock().unwrap();
        buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), ExportError> {
        self.data.lock().unwrap()[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn write_zeroes(&self, offset: u64, len: u64, _fua: bool) -> Result<(), ExportError> {
        self.data.lock().unwrap()[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }
    fn flush(&self) -> Result<(), ExportError> {
        *self.flushes.lock().unwrap() += 1;
        Ok(())
    }
    fn description(&self) -> String {
        "memory".into()
    }
    /// Every 4 KiB block of zeroes is a hole (this device can see that).
    fn extents(&self, offset: u64, len: u64) -> Result<Vec<(u64, u32)>, ExportError> {
        let d = self.data.lock().unwrap();
        let mut runs = Vec::new();
        let mut at = offset;
        while at < offset + len {
            let end = ((at / 4096 + 1) * 4096).min(offset + len);
            let zero = d[at as usize..end as usize].iter().all(|&b| b == 0);
            runs.push((end - at, if zero { STATE_HOLE | STATE_ZERO } else { 0 }));
            at = end;
        }
        Ok(runs)
    }
}

fn start(size: usize) -> (ServerHandle, Arc<Mem>) {
    let mem = Arc::new(Mem {
        data: Mutex::new(vec![0; size]),
        flushes: Mutex::new(0),
    });
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let h = serve(l, mem.clone(), ServerConfig::default()).unwrap();
    (h, mem)
}

#[test]
fn client_round_trip_and_errors() {
    let (h, mem) = start(1 << 20);
    let mut c = Client::connect(h.addr(), "blocklab").unwrap();
    assert_eq!(c.size, 1 << 20);
    let want = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;
    assert_eq!(c.flags & want, want);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    c.write(123, &data, true).unwrap();
    let mut back = vec![0u8; 10_000];
    c.read(123, &mut back).unwrap();
    assert_eq!(back, data);
    c.write_zeroes(200, 100).unwrap();
    c.trim(400, 100).unwrap();
    c.read(123, &mut back).unwrap();
    assert!(back[77..177].iter().all(|&b| b == 0) && back[277..377].iter().all(|&b| b == 0));
    assert_eq!(back[177..277], data[177..277]);
    c.flush().unwrap();
    assert_eq!(*mem.flushes.lock().unwrap(), 1);
    // Errors are replies, and the connection goes on.
    let mut b = vec![0u8; 4096];
    assert!(matches!(c.read(12_345, &mut b), Err(ClientError::Nbd(EIO))));
    assert!(matches!(c.read((1 << 20) - 10, &mut b), Err(ClientError::Nbd(EINVAL))));
    assert!(matches!(
        c.write((1 << 20) - 10, &b, false),
        Err(ClientError::Nbd(ENOSPC))
    ));
    let cookie = c.send_raw(99, 0, 0, 0, &[]).unwrap();
    assert_eq!(c.recv_header().unwrap(), (EINVAL, cookie));
    let cookie = c.send_raw(CMD_READ, 1 << 5, 0, 512, &[]).unwrap();
    assert_eq!(c.recv_header().unwrap(), (EINVAL, cookie), "unknown command flag");
    c.read(0, &mut b).unwrap();
    c.disconnect().unwrap();
    // An unknown export name is refused cleanly.
    let e = Client::connect(h.addr(), "other").err().unwrap().to_string();
    assert!(e.contains("refused"), "{e}");
    h.shutdown();
}

#[test]
fn many_requests_in_flight_and_many_clients() {
    let (h, _mem) = start(4 << 20);
    // Pipelined: 64 writes sent before any reply is read; then 64 reads.
    let mut c = Client::connect(h.addr(), "").unwrap();
    let mut cookies = Vec::new();
    for i in 0..64u64 {
        let d = vec![i as u8 + 1; 4096];
        cookies.push(c.send_raw(CMD_WRITE, 0, i * 4096, 4096, &d).unwrap());
    }
    let mut got: Vec<u64> = (0..64)
        .map(|_| {
            let (e, k) = c.recv_header().unwrap();
            assert_eq!(e, 0);
            k
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, cookies);
    for i in 0..64u64 {
        c.send_raw(CMD_READ, 0, i * 4096, 4096, &[]).unwrap();
    }
    for _ in 0..64 {
        let (e, k) = c.recv_header().unwrap();
        assert_eq!(e, 0);
        let mut b = vec![0u8; 4096];
        c.recv_data(&mut b).unwrap();
        let i = cookies.iter().position(|&x| x == k - 64).unwrap() as u8;
        assert!(b.iter().all(|&x| x == i + 1));
    }
    // Eight clients at once, each on its own region.
    let addr = h.addr();
    let ts: Vec<_> = (0..8u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr, "blocklab").unwrap();
                for r in 0..50u64 {
                    let off = (1 << 20) + t * 65536 + (r % 16) * 4096;
                    let d = vec![(t * 31 + r) as u8; 4096];
                    c.write(off, &d, r % 7 == 0).unwrap();
                    let mut b = vec![0u8; 4096];
                    c.read(off, &mut b).unwrap();
                    assert_eq!(b, d);
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    h.shutdown();
}

fn u32b(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

fn opt(s: &mut TcpStream, o: u32, data: &[u8]) {
    let mut m = IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&u32b(o));
    m.extend_from_slice(&u32b(data.len() as u32));
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
}

/// (option, reply type, payload)
fn rep(s: &mut TcpStream) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), REPLY_MAGIC);
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).unwrap();
    (
        u32::from_be_bytes(h[8..12].try_into().unwrap()),
        u32::from_be_bytes(h[12..16].try_into().unwrap()),
        p,
    )
}

fn hello(addr: std::net::SocketAddr, client_flags: u32) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), NBDMAGIC);
    assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), IHAVEOPT);
    assert_eq!(u16::from_be_bytes([h[16], h[17]]), FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
    s.write_all(&u32b(client_flags)).unwrap();
    s
}

#[test]
fn handshake_options() {
    let (h, _mem) = start(1 << 16);
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE);
    // LIST: one server, then ACK; with data: invalid.
    opt(&mut s, OPT_LIST, &[]);
    let (o, t, p) = rep(&mut s);
    assert_eq!((o, t), (OPT_LIST, REP_SERVER));
    assert_eq!(&p[..12], b"\0\0\0\x08blocklab");
    assert_eq!(rep(&mut s).1, REP_ACK);
    opt(&mut s, OPT_LIST, b"x");
    assert_eq!(rep(&mut s).1, REP_ERR_INVALID);
    // Unknown and unsupported options.
    opt(&mut s, 77, b"whatever");
    assert_eq!(rep(&mut s).1, REP_ERR_UNSUP);
    opt(&mut s, OPT_STARTTLS, &[]);
    assert_eq!(rep(&mut s).1, REP_ERR_UNSUP);
    // INFO with name, description and block size requests.
    let mut d = u32b(8).to_vec();
    d.extend_from_slice(b"blocklab");
    d.extend_from_slice(&3u16.to_be_bytes());
    for r in [INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE] {
        d.extend_from_slice(&r.to_be_bytes());
    }
    opt(&mut s, OPT_INFO, &d);
    let mut infos = Vec::new();
    loop {
        let (o, t, p) = rep(&mut s);
        assert_eq!(o, OPT_INFO);
        if t == REP_ACK {
            break;
        }
        assert_eq!(t, REP_INFO);
        infos.push(p);
    }
    assert_eq!(infos.len(), 4);
    assert_eq!(&infos[0][..2], &INFO_EXPORT.to_be_bytes());
    assert_eq!(u64::from_be_bytes(infos[0][2..10].try_into().unwrap()), 1 << 16);
    assert_eq!(&infos[1][2..], b"blocklab");
    assert_eq!(&infos[2][2..], b"memory");
    assert_eq!(u32::from_be_bytes(infos[3][6..10].try_into().unwrap()), 4096);
    // Malformed INFO and an unknown export.
    opt(&mut s, OPT_INFO, &[0, 0, 0, 9, 1]);
    assert_eq!(rep(&mut s).1, REP_ERR_INVALID);
    let mut d = u32b(3).to_vec();
    d.extend_from_slice(b"abc");
    d.extend_from_slice(&0u16.to_be_bytes());
    opt(&mut s, OPT_GO, &d);
    assert_eq!(rep(&mut s).1, REP_ERR_UNKNOWN);
    // ABORT is acknowledged, then the server closes.
    opt(&mut s, OPT_ABORT, &[]);
    assert_eq!(rep(&mut s).1, REP_ACK);
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap(), 0);

    // EXPORT_NAME: size, flags, and 124 zeroes unless NO_ZEROES.
    for (flags, tail) in [
        (FLAG_C_FIXED_NEWSTYLE, 124usize),
        (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES, 0),
    ] {
        let mut s = hello(h.addr(), flags);
        opt(&mut s, OPT_EXPORT_NAME, b"");
        let mut r = vec![0u8; 10 + tail];
        s.read_exact(&mut r).unwrap();
        assert_eq!(u64::from_be_bytes(r[..8].try_into().unwrap()), 1 << 16);
        assert!(r[10..].iter().all(|&x| x == 0));
        // A request right away works.
        let mut m = REQUEST_MAGIC.to_be_bytes().to_vec();
        m.extend_from_slice(&0u16.to_be_bytes());
        m.extend_from_slice(&CMD_READ.to_be_bytes());
        m.extend_from_slice(&42u64.to_be_bytes());
        m.extend_from_slice(&0u64.to_be_bytes());
        m.extend_from_slice(&u32b(512));
        s.write_all(&m).unwrap();
        let mut r = vec![0u8; 16 + 512];
        s.read_exact(&mut r).unwrap();
        assert_eq!(u32::from_be_bytes(r[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
        assert_eq!(u64::from_be_bytes(r[8..16].try_into().unwrap()), 42);
    }
    // Unknown client flags: the server drops the connection.
    let mut s = hello(h.addr(), 1 << 7);
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0);
    h.shutdown();
}

// --- clients that misbehave --------------------------------------------------

/// A raw connection in the transmission phase (EXPORT_NAME, no zeroes).
fn transmitting(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = hello(addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_EXPORT_NAME, b"blocklab");
    let mut sz = [0u8; 10];
    s.read_exact(&mut sz).unwrap();
    s
}

fn request_header(typ: u16, cookie: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut m = REQUEST_MAGIC.to_be_bytes().to_vec();
    m.extend_from_slice(&0u16.to_be_bytes());
    m.extend_from_slice(&typ.to_be_bytes());
    m.extend_from_slice(&cookie.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&len.to_be_bytes());
    m
}

/// Run `f` on a thread; its result, or None if it has not finished after
/// `secs` seconds (the thread is then left behind).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).ok()
}

#[test]
fn a_client_not_reading_its_replies_stalls_only_itself() {
    // 20 pipelined 32 MiB reads whose replies are never read: the server may
    // hold at most the connection's budget for them, and another client is
    // served meanwhile.
    let (h, _mem) = start(64 << 20);
    let mut bad = transmitting(h.addr());
    for i in 0..20u64 {
        bad.write_all(&request_header(CMD_READ, i, (i % 2) * (32 << 20), MAX_PAYLOAD))
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let addr = h.addr();
    let good = within(10, move || {
        let mut c = Client::connect(addr, "blocklab").unwrap();
        let mut b = vec![0u8; 4096];
        c.write(8192, &[7u8; 4096], false).unwrap();
        c.read(8192, &mut b).unwrap();
        b
    });
    assert_eq!(
        good.expect("the other client's 4 KiB read did not complete"),
        vec![7u8; 4096]
    );
    let cfg = ServerConfig::default();
    let peak = h.stats.peak_queued_bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(peak <= cfg.conn_max_bytes + 8192, "{peak} bytes queued");
    // Stopping does not wait for the peer that does not read.
    assert!(within(10, move || h.shutdown()).is_some(), "shutdown hangs");
    drop(bad);
}

#[test]
fn replies_go_out_from_the_workers_and_stay_whole_when_the_peer_lags() {
    use std::sync::atomic::Ordering::Relaxed;
    // Every 4 KiB block holds its own number, so a reply's bytes say where
    // they came from.
    let (h, mem) = start(32 << 20);
    for (i, b) in mem.data.lock().unwrap().chunks_mut(4096).enumerate() {
        b.fill((i % 251) as u8 + 1);
    }
    let block =
        |off: u64, len: usize| -> Vec<u8> { (0..len).map(|k| ((off as usize + k) / 4096 % 251) as u8 + 1).collect() };
    // One request at a time: the socket is free when the worker completes
    // (unless the writer thread still holds it for a moment: scheduling, so
    // only "most" is asserted), so the worker sends the reply itself.
    let mut c = Client::connect(h.addr(), "blocklab").unwrap();
    for i in 0..10u64 {
        let mut b = vec![0u8; 4096];
        c.read(i * 40960, &mut b).unwrap();
        assert_eq!(b, block(i * 40960, 4096));
    }
    // A reply is counted just after it is sent, so the client may see it
    // before the count moves: wait for the ten counts (bounded), then check.
    let counted = || h.stats.replies_direct.load(Relaxed) + h.stats.replies_by_writer.load(Relaxed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counted() < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(counted(), 10, "{:?}", h.stats);
    assert!(h.stats.replies_direct.load(Relaxed) >= 1, "{:?}", h.stats);
    c.disconnect().unwrap();
    // 32 pipelined 1 MiB reads whose replies are read only after a while:
    // more than the socket buffers hold, so replies are sent in part by a
    // worker and finished by the writer thread, or wait for it whole; every
    // reply still arrives whole, its bytes not mixed with another's.
    let mut s = transmitting(h.addr());
    for i in 0..32u64 {
        s.write_all(&request_header(CMD_READ, 1000 + i, i * (1 << 20), 1 << 20))
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut seen = Vec::new();
    for _ in 0..32 {
        let mut head = [0u8; 16];
        s.read_exact(&mut head).unwrap();
        assert_eq!(u32::from_be_bytes(head[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
        assert_eq!(u32::from_be_bytes(head[4..8].try_into().unwrap()), 0);
        let cookie = u64::from_be_bytes(head[8..].try_into().unwrap());
        let i = cookie - 1000;
        let mut b = vec![0u8; 1 << 20];
        s.read_exact(&mut b).unwrap();
        assert!(
            b == block(i * (1 << 20), 1 << 20),
            "reply {i} is not the bytes it asked for"
        );
        seen.push(i);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..32).collect::<Vec<u64>>());
    assert!(h.stats.replies_by_writer.load(Relaxed) >= 1, "{:?}", h.stats);
    h.shutdown();
}

/// Memory whose writes wait until the gate opens.
struct Gated {
    mem: Mem,
    open: Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Export for Gated {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        self.mem.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError> {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        drop(open);
        self.mem.write(offset, data, fua)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError> {
        self.mem.write_zeroes(offset, len, fua)
    }
    fn flush(&self) -> Result<(), ExportError> {
        self.mem.flush()
    }
}

#[test]
fn pipelined_writes_are_admitted_only_within_the_bounds() {
    // Two clients each pipeline 48 MiB of writes while the device is stuck:
    // the server reads no more payload than each connection's budget and the
    // server-wide bound allow, so the senders block (TCP pushes back) instead
    // of the server's memory growing; once the device moves, all complete.
    const MIB: usize = 1 << 20;
    let g = Arc::new(Gated {
        mem: Mem {
            data: Mutex::new(vec![0; 48 * MIB]),
            flushes: Mutex::new(0),
        },
        open: Mutex::new(false),
        cv: std::sync::Condvar::new(),
    });
    let cfg = ServerConfig {
        conn_max_bytes: 4 * MIB as u64,
        max_queued_bytes: 6 * MIB as u64,
        ..Default::default()
    };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let h = serve(l, g.clone(), cfg).unwrap();
    let sent: Vec<_> = (0..2u8)
        .map(|k| {
            let addr = h.addr();
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                let mut c = Client::connect(addr, "").unwrap();
                let data = vec![k + 1; MIB];
                for i in 0..24u64 {
                    c.send_raw(CMD_WRITE, 0, (k as u64 * 24 + i) * MIB as u64, MIB as u32, &data)
                        .unwrap();
                }
                let _ = tx.send(());
                for _ in 0..24 {
                    assert_eq!(c.recv_header().unwrap().0, 0);
                }
                c.disconnect().unwrap();
            });
            (rx, t)
        })
        .collect();
    let early: Vec<bool> = sent
        .iter()
        .map(|(rx, _)| rx.recv_timeout(std::time::Duration::from_secs(3)).is_ok())
        .collect();
    let peak = h.stats.peak_queued_bytes.load(std::sync::atomic::Ordering::Relaxed);
    *g.open.lock().unwrap() = true;
    g.cv.notify_all();
    assert_eq!(
        early,
        [false, false],
        "the server took 24 MiB of writes it cannot carry out yet"
    );
    assert!(peak <= 6 * MIB as u64, "{peak} bytes queued");
    for (_, t) in sent {
        t.join().unwrap();
    }
    h.shutdown();
    let d = g.mem.data.lock().unwrap();
    assert!(d[..24 * MIB].iter().all(|&b| b == 1) && d[24 * MIB..].iter().all(|&b| b == 2));
}

#[test]
fn stopping_ends_with_peers_stalled_anywhere() {
    // Peers stalled mid-handshake, mid-option, mid-header, mid-payload and
    // not reading: the server stops within a few seconds anyway.
    let (h, _mem) = start(64 << 20);
    let addr = h.addr();
    let mut handshake = TcpStream::connect(addr).unwrap();
    handshake.write_all(&[0, 0]).unwrap(); // half of the client flags
    let mut option = hello(addr, FLAG_C_FIXED_NEWSTYLE);
    option.write_all(&IHAVEOPT.to_be_bytes()[..5]).unwrap();
    let mut header = transmitting(addr);
    header.write_all(&request_header(CMD_READ, 1, 0, 4096)[..13]).unwrap();
    let mut payload = transmitting(addr);
    payload.write_all(&request_header(CMD_WRITE, 2, 0, 1 << 20)).unwrap();
    payload.write_all(&[5u8; 100_000]).unwrap();
    let mut reader = transmitting(addr);
    for i in 0..8u64 {
        reader.write_all(&request_header(CMD_READ, i, 0, MAX_PAYLOAD)).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(within(10, move || h.shutdown()).is_some(), "shutdown hangs");
    drop((handshake, option, header, payload, reader));
}

#[test]
fn a_client_slow_in_the_handshake_is_dropped() {
    let mem = Arc::new(Mem {
        data: Mutex::new(vec![0; 1 << 16]),
        flushes: Mutex::new(0),
    });
    let cfg = ServerConfig {
        handshake_limit: std::time::Duration::from_millis(500),
        ..Default::default()
    };
    let h = serve(TcpListener::bind("127.0.0.1:0").unwrap(), mem, cfg).unwrap();
    // Half of the client flags, then one byte of an option header: the
    // server closes the connection instead of waiting forever.
    let mut flags = TcpStream::connect(h.addr()).unwrap();
    flags.write_all(&[0, 0]).unwrap();
    let mut option = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE);
    option.write_all(&[0x49]).unwrap();
    for mut s in [flags, option] {
        let closed = within(10, move || {
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).is_ok()
        });
        assert_eq!(closed, Some(true), "the server kept a stalled handshake open");
    }
    // A client in the transmission phase may stay idle longer.
    let mut c = Client::connect(h.addr(), "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let mut b = [0u8; 512];
    c.read(0, &mut b).unwrap();
    h.shutdown();
}

/// A client that keeps sending options but never reads their replies is
/// dropped at the handshake limit too: the server's replies fill the socket,
/// and a reply it cannot send gives up then instead of blocking for good.
#[test]
fn a_handshake_client_not_reading_its_option_replies_is_dropped() {
    let mem = Arc::new(Mem {
        data: Mutex::new(vec![0; 1 << 16]),
        flushes: Mutex::new(0),
    });
    let cfg = ServerConfig {
        handshake_limit: std::time::Duration::from_millis(500),
        ..Default::default()
    };
    let h = serve(TcpListener::bind("127.0.0.1:0").unwrap(), mem, cfg).unwrap();
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE);
    s.set_write_timeout(Some(std::time::Duration::from_millis(100)))
        .unwrap();
    let mut one = IHAVEOPT.to_be_bytes().to_vec();
    one.extend_from_slice(&u32b(OPT_LIST));
    one.extend_from_slice(&u32b(0));
    let batch = one.repeat(4096);
    // Options are written until the server closes the connection.
    let dropped = within(10, move || loop {
        match s.write(&batch) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    });
    assert_eq!(
        dropped,
        Some(true),
        "the server kept a handshake that never reads its replies"
    );
    h.shutdown();
}

/// `NBD_CMD_CACHE` is not advertised, so a client sending it anyway gets
/// `EINVAL` (and the connection goes on).
#[test]
fn cache_is_refused_when_not_advertised() {
    let (h, _mem) = start(1 << 16);
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_EXPORT_NAME, b"blocklab");
    let mut sz = [0u8; 10];
    s.read_exact(&mut sz).unwrap();
    let flags = u16::from_be_bytes([sz[8], sz[9]]);
    assert_eq!(flags & FLAG_SEND_CACHE, 0, "CACHE is not advertised");
    s.write_all(&request_header(CMD_CACHE, 7, 0, 4096)).unwrap();
    s.write_all(&request_header(CMD_READ, 8, 0, 512)).unwrap();
    let mut r = [0u8; 16];
    s.read_exact(&mut r).unwrap();
    assert_eq!(u32::from_be_bytes(r[4..8].try_into().unwrap()), EINVAL);
    assert_eq!(u64::from_be_bytes(r[8..16].try_into().unwrap()), 7);
    let mut r = vec![0u8; 16 + 512];
    s.read_exact(&mut r).unwrap();
    assert_eq!(u32::from_be_bytes(r[4..8].try_into().unwrap()), 0);
    assert_eq!(u64::from_be_bytes(r[8..16].try_into().unwrap()), 8);
    h.shutdown();
}

fn mem(size: usize, fill: u8) -> Arc<Mem> {
    Arc::new(Mem {
        data: Mutex::new(vec![fill; size]),
        flushes: Mutex::new(0),
    })
}

fn go(s: &mut TcpStream, name: &[u8]) -> (u32, u64) {
    let mut d = u32b(name.len() as u32).to_vec();
    d.extend_from_slice(name);
    d.extend_from_slice(&0u16.to_be_bytes());
    opt(s, OPT_GO, &d);
    let (_, t, p) = rep(s);
    if t != REP_INFO {
        return (t, 0);
    }
    assert_eq!(rep(s).1, REP_ACK);
    (t, u64::from_be_bytes(p[2..10].try_into().unwrap()))
}

/// Several named exports: LIST names each (with its description), GO and
/// EXPORT_NAME pick one by name, the empty name picks the first, and each
/// connection reads its own export's bytes.
#[test]
fn several_named_exports_are_listed_and_chosen_by_name() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let (a, b) = (mem(1 << 16, 0xaa), mem(1 << 17, 0xbb));
    let h = serve_exports(
        l,
        vec![("tenant-a".into(), a as Arc<dyn Export>), ("tenant-b".into(), b)],
        ServerConfig::default(),
    )
    .unwrap();
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_LIST, &[]);
    let mut names = Vec::new();
    loop {
        let (_, t, p) = rep(&mut s);
        if t == REP_ACK {
            break;
        }
        assert_eq!(t, REP_SERVER);
        let n = u32::from_be_bytes(p[..4].try_into().unwrap()) as usize;
        names.push((
            String::from_utf8(p[4..4 + n].to_vec()).unwrap(),
            String::from_utf8(p[4 + n..].to_vec()).unwrap(),
        ));
    }
    assert_eq!(
        names,
        [
            ("tenant-a".to_string(), "memory".to_string()),
            ("tenant-b".to_string(), "memory".to_string())
        ]
    );
    assert_eq!(go(&mut s, b"blocklab").0, REP_ERR_UNKNOWN);
    assert_eq!(go(&mut s, b"tenant-b"), (REP_INFO, 1 << 17));
    s.write_all(&request_header(CMD_READ, 1, 100, 4)).unwrap();
    let mut r = [0u8; 20];
    s.read_exact(&mut r).unwrap();
    assert_eq!(
        (u32::from_be_bytes(r[4..8].try_into().unwrap()), &r[16..]),
        (0, &[0xbb; 4][..])
    );
    // The empty name is the first export.
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    assert_eq!(go(&mut s, b""), (REP_INFO, 1 << 16));
    // EXPORT_NAME by name.
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_EXPORT_NAME, b"tenant-b");
    let mut sz = [0u8; 10];
    s.read_exact(&mut sz).unwrap();
    assert_eq!(u64::from_be_bytes(sz[..8].try_into().unwrap()), 1 << 17);
    h.shutdown();
    // Two exports of one name, or none, are refused.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(serve_exports(
        l,
        vec![("x".into(), mem(512, 0) as Arc<dyn Export>), ("x".into(), mem(512, 0))],
        ServerConfig::default()
    )
    .is_err());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(serve_exports(l, vec![], ServerConfig::default()).is_err());
}

/// Exports that are peers (a stack's tenants): the empty name is no
/// export, refused like an unknown one; named ones are served.
#[test]
fn peer_exports_have_no_default() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let cfg = ServerConfig {
        empty_name_is_first: false,
        ..Default::default()
    };
    let h = serve_exports(
        l,
        vec![
            ("web".into(), mem(1 << 16, 1) as Arc<dyn Export>),
            ("db".into(), mem(1 << 17, 2)),
        ],
        cfg,
    )
    .unwrap();
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    assert_eq!(go(&mut s, b"").0, REP_ERR_UNKNOWN);
    assert_eq!(go(&mut s, b"nosuch").0, REP_ERR_UNKNOWN);
    assert_eq!(go(&mut s, b"db"), (REP_INFO, 1 << 17));
    // EXPORT_NAME with the empty name: no way to report an error, closed.
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_EXPORT_NAME, b"");
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed, no export's size");
    h.shutdown();
}

/// libnbd's `nbdinfo --list` (a real client) sees every export, by name
/// and description, and the export's size through `--size`.
#[test]
fn nbdinfo_lists_every_export() {
    if std::process::Command::new("nbdinfo").arg("--version").output().is_err() {
        eprintln!("nbdinfo not installed (make tools): skipped");
        return;
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let h = serve_exports(
        l,
        vec![
            ("one".into(), mem(1 << 16, 0) as Arc<dyn Export>),
            ("two".into(), mem(1 << 17, 0)),
        ],
        ServerConfig::default(),
    )
    .unwrap();
    let out = std::process::Command::new("nbdinfo")
        .args(["--list", "--json", &format!("nbd://{}", h.addr())])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(String, u64)> = v["exports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["export-name"].as_str().unwrap().to_string(),
                e["export-size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(found, [("one".to_string(), 1 << 16), ("two".to_string(), 1 << 17)]);
    assert_eq!(v["exports"][1]["description"], "memory");
    h.shutdown();
}

// --- structured replies and base:allocation ---------------------------------

fn meta_query(name: &[u8], queries: &[&[u8]]) -> Vec<u8> {
    let mut d = u32b(name.len() as u32).to_vec();
    d.extend_from_slice(name);
    d.extend_from_slice(&u32b(queries.len() as u32));
    for q in queries {
        d.extend_from_slice(&u32b(q.len() as u32));
        d.extend_from_slice(q);
    }
    d
}

/// One structured reply chunk: (flags, type, cookie, payload).
fn chunk(s: &mut TcpStream) -> (u16, u16, u64, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), STRUCTURED_REPLY_MAGIC);
    let mut p = vec![0u8; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
    s.read_exact(&mut p).unwrap();
    (
        u16::from_be_bytes([h[4], h[5]]),
        u16::from_be_bytes([h[6], h[7]]),
        u64::from_be_bytes(h[8..16].try_into().unwrap()),
        p,
    )
}

/// The negotiation, worked through byte by byte: SET_META_CONTEXT needs
/// structured replies first; LIST offers base:allocation; then reads come
/// as OFFSET_DATA, errors as ERROR chunks, writes as NONE, and
/// BLOCK_STATUS gives the holes and data of the device.
#[test]
fn structured_replies_and_base_allocation() {
    let (h, mem) = start(1 << 16);
    mem.data.lock().unwrap()[8192..12288].fill(7); // block 2 written
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_SET_META_CONTEXT, &meta_query(b"", &[b"base:allocation"]));
    assert_eq!(rep(&mut s).1, REP_ERR_INVALID, "SET before STRUCTURED_REPLY");
    opt(&mut s, OPT_LIST_META_CONTEXT, &meta_query(b"blocklab", &[]));
    let (_, t, p) = rep(&mut s);
    assert_eq!(
        (t, &p[..4], &p[4..]),
        (REP_META_CONTEXT, &u32b(BASE_ALLOCATION_ID)[..], &b"base:allocation"[..])
    );
    assert_eq!(rep(&mut s).1, REP_ACK);
    opt(&mut s, OPT_LIST_META_CONTEXT, &meta_query(b"nope", &[]));
    assert_eq!(rep(&mut s).1, REP_ERR_UNKNOWN);
    opt(&mut s, OPT_LIST_META_CONTEXT, &[0, 0, 0, 9]);
    assert_eq!(rep(&mut s).1, REP_ERR_INVALID);
    opt(&mut s, OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(rep(&mut s).1, REP_ACK);
    // An unknown context is not selected, base:allocation is.
    opt(
        &mut s,
        OPT_SET_META_CONTEXT,
        &meta_query(b"", &[b"qemu:dirty-bitmap:x", b"base:allocation"]),
    );
    let (_, t, p) = rep(&mut s);
    assert_eq!((t, &p[4..]), (REP_META_CONTEXT, &b"base:allocation"[..]));
    assert_eq!(rep(&mut s).1, REP_ACK);
    assert_eq!(go(&mut s, b""), (REP_INFO, 1 << 16));

    s.write_all(&request_header(CMD_READ, 1, 8190, 4)).unwrap();
    assert_eq!(
        chunk(&mut s),
        (
            REPLY_FLAG_DONE,
            REPLY_TYPE_OFFSET_DATA,
            1,
            [&8190u64.to_be_bytes()[..], &[0, 0, 7, 7]].concat()
        )
    );
    s.write_all(&request_header(CMD_READ, 2, 12_345, 8)).unwrap();
    let (f, t, c, p) = chunk(&mut s);
    assert_eq!(
        (f, t, c, &p[..4]),
        (REPLY_FLAG_DONE, REPLY_TYPE_ERROR, 2, &u32b(EIO)[..])
    );
    // Whole blocks: hole, hole, data, then holes to the end.
    s.write_all(&request_header(CMD_BLOCK_STATUS, 3, 0, 1 << 16)).unwrap();
    let (f, t, c, p) = chunk(&mut s);
    assert_eq!((f, t, c), (REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS, 3));
    let hz = STATE_HOLE | STATE_ZERO;
    let want: Vec<u8> = [BASE_ALLOCATION_ID, 8192, hz, 4096, 0, (1 << 16) - 12288, hz]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    assert_eq!(p, want);
    // REQ_ONE: the first extent only, clipped to the request.
    let mut m = request_header(CMD_BLOCK_STATUS, 4, 9000, 100);
    m[4..6].copy_from_slice(&CMD_FLAG_REQ_ONE.to_be_bytes());
    s.write_all(&m).unwrap();
    assert_eq!(
        chunk(&mut s).3,
        [BASE_ALLOCATION_ID, 100, 0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect::<Vec<u8>>()
    );
    // Past the end: EINVAL; a write: NONE.
    s.write_all(&request_header(CMD_BLOCK_STATUS, 5, 1 << 16, 1)).unwrap();
    assert_eq!(chunk(&mut s).3[..4], u32b(EINVAL));
    s.write_all(&request_header(CMD_WRITE_ZEROES, 6, 8192, 4096)).unwrap();
    assert_eq!(chunk(&mut s), (REPLY_FLAG_DONE, REPLY_TYPE_NONE, 6, vec![]));

    // Contexts selected for another export do not hold (the empty name is
    // "blocklab" here, so selecting for it and going to it is fine: above).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let two: Vec<(String, Arc<dyn Export>)> = vec![("a".into(), self::mem(4096, 0)), ("b".into(), self::mem(4096, 0))];
    let h2 = serve_exports(l, two, ServerConfig::default()).unwrap();
    let mut s2 = hello(h2.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s2, OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(rep(&mut s2).1, REP_ACK);
    opt(&mut s2, OPT_SET_META_CONTEXT, &meta_query(b"a", &[b"base:allocation"]));
    assert_eq!(rep(&mut s2).1, REP_META_CONTEXT);
    assert_eq!(rep(&mut s2).1, REP_ACK);
    assert_eq!(go(&mut s2, b"b"), (REP_INFO, 4096));
    s2.write_all(&request_header(CMD_BLOCK_STATUS, 1, 0, 4096)).unwrap();
    let (_, t, _, p) = chunk(&mut s2);
    assert_eq!((t, &p[..4]), (REPLY_TYPE_ERROR, &u32b(EINVAL)[..]));
    h2.shutdown();

    // Without SET_META_CONTEXT, BLOCK_STATUS is refused.
    let mut s = hello(h.addr(), FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    opt(&mut s, OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(rep(&mut s).1, REP_ACK);
    assert_eq!(go(&mut s, b""), (REP_INFO, 1 << 16));
    s.write_all(&request_header(CMD_BLOCK_STATUS, 9, 0, 4096)).unwrap();
    let (_, t, _, p) = chunk(&mut s);
    assert_eq!((t, &p[..4]), (REPLY_TYPE_ERROR, &u32b(EINVAL)[..]));
    h.shutdown();
}

fn tool(name: &str) -> bool {
    let ok = std::process::Command::new(name).arg("--version").output().is_ok();
    if !ok {
        eprintln!("{name} not installed (make tools): skipped");
    }
    ok
}

fn run_tool(args: &[&str]) -> String {
    let out = std::process::Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Real clients over structured replies and base:allocation: `nbdinfo
/// --map` and `qemu-img map` see the written region between holes, and
/// `nbdcopy` (which skips holes) reproduces the image byte for byte.
#[test]
fn nbdinfo_map_qemu_img_map_and_nbdcopy_see_holes_and_data() {
    if !tool("nbdinfo") || !tool("nbdcopy") || !tool("qemu-img") {
        return;
    }
    let (h, mem) = start(1 << 20);
    {
        let mut d = mem.data.lock().unwrap();
        for (i, b) in d[65536..65536 + 8192].iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
        d[(1 << 20) - 4096] = 9;
    }
    let url = format!("nbd://{}", h.addr());
    let map: serde_json::Value = serde_json::from_str(&run_tool(&["nbdinfo", "--map", "--json", &url])).unwrap();
    let got: Vec<(u64, u64, u64)> = map
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["offset"].as_u64().unwrap(),
                e["length"].as_u64().unwrap(),
                e["type"].as_u64().unwrap(),
            )
        })
        .collect();
    let hz = (STATE_HOLE | STATE_ZERO) as u64;
    let last = (1 << 20) - 4096;
    assert_eq!(
        got,
        [
            (0, 65536, hz),
            (65536, 8192, 0),
            (73728, last - 73728, hz),
            (last, 4096, 0)
        ]
    );
    let qm: serde_json::Value =
        serde_json::from_str(&run_tool(&["qemu-img", "map", "--output=json", "-f", "raw", &url])).unwrap();
    let got: Vec<(u64, u64, bool)> = qm
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["start"].as_u64().unwrap(),
                e["length"].as_u64().unwrap(),
                e["data"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 65536, false),
            (65536, 8192, true),
            (73728, last - 73728, false),
            (last, 4096, true)
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("copy.img");
    run_tool(&["nbdcopy", &url, out.to_str().unwrap()]);
    assert!(
        std::fs::read(&out).unwrap() == *mem.data.lock().unwrap(),
        "nbdcopy's copy differs"
    );
    h.shutdown();
}
