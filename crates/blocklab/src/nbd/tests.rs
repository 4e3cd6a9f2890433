//! The server against an in-memory device, driven by our client and by
//! raw bytes: handshake options, every command, errors, requests in flight.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::client::{Client, ClientError};
use super::server::{serve, ServerConfig, ServerHandle};
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
    assert_eq!(&p[4..], b"blocklab");
    assert_eq!(rep(&mut s).1, REP_ACK);
    opt(&mut s, OPT_LIST, b"x");
    assert_eq!(rep(&mut s).1, REP_ERR_INVALID);
    // Unknown and unsupported options.
    opt(&mut s, 77, b"whatever");
    assert_eq!(rep(&mut s).1, REP_ERR_UNSUP);
    opt(&mut s, OPT_STRUCTURED_REPLY, &[]);
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
