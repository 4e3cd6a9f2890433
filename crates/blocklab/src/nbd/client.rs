//! A small synchronous NBD client (fixed newstyle, `NBD_OPT_GO`, simple
//! replies) for tests, the integrity suite and measurements. One request
//! at a time per connection; open several connections for parallelism.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use super::*;

pub struct Client {
    sock: TcpStream,
    pub size: u64,
    pub flags: u16,
    cookie: u64,
}

/// An NBD error reply (the errno-like code) or a broken connection.
#[derive(Debug)]
pub enum ClientError {
    Nbd(u32),
    Io(io::Error),
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Nbd(c) => write!(f, "NBD error {c}"),
            ClientError::Io(e) => write!(f, "{e}"),
        }
    }
}

fn get<const N: usize>(s: &mut TcpStream) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    s.read_exact(&mut b)?;
    Ok(b)
}

impl Client {
    /// Connect and negotiate export `name` with `NBD_OPT_GO`.
    pub fn connect(addr: impl ToSocketAddrs, name: &str) -> io::Result<Client> {
        let mut s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
        if u64::from_be_bytes(get::<8>(&mut s)?) != NBDMAGIC || u64::from_be_bytes(get::<8>(&mut s)?) != IHAVEOPT {
            return Err(bad("not an NBD newstyle server"));
        }
        let hflags = u16::from_be_bytes(get::<2>(&mut s)?);
        if hflags & FLAG_FIXED_NEWSTYLE == 0 {
            return Err(bad("server is not fixed newstyle"));
        }
        s.write_all(&(FLAG_C_FIXED_NEWSTYLE | (hflags as u32 & FLAG_C_NO_ZEROES)).to_be_bytes())?;
        let mut data = Vec::new();
        data.extend_from_slice(&(name.len() as u32).to_be_bytes());
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        let mut m = Vec::new();
        m.extend_from_slice(&IHAVEOPT.to_be_bytes());
        m.extend_from_slice(&OPT_GO.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(&data);
        s.write_all(&m)?;
        let (mut size, mut flags) = (None, 0u16);
        loop {
            let head = get::<20>(&mut s)?;
            if u64::from_be_bytes(head[..8].try_into().unwrap()) != REPLY_MAGIC {
                return Err(bad("bad option reply magic"));
            }
            let typ = u32::from_be_bytes(head[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(head[16..20].try_into().unwrap()) as usize;
            let mut payload = vec![0u8; len];
            s.read_exact(&mut payload)?;
            match typ {
                REP_INFO if len >= 12 && u16::from_be_bytes([payload[0], payload[1]]) == INFO_EXPORT => {
                    size = Some(u64::from_be_bytes(payload[2..10].try_into().unwrap()));
                    flags = u16::from_be_bytes([payload[10], payload[11]]);
                }
                REP_INFO => {}
                REP_ACK => break,
                t => {
                    return Err(bad(&format!(
                        "NBD_OPT_GO refused ({t:#x}): {}",
                        String::from_utf8_lossy(&payload)
                    )))
                }
            }
        }
        let size = size.ok_or_else(|| bad("no NBD_INFO_EXPORT"))?;
        Ok(Client {
            sock: s,
            size,
            flags,
            cookie: 0,
        })
    }

    fn request(&mut self, typ: u16, flags: u16, offset: u64, len: u32, payload: &[u8]) -> io::Result<u64> {
        self.cookie += 1;
        let mut m = Vec::with_capacity(28 + payload.len());
        m.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        m.extend_from_slice(&flags.to_be_bytes());
        m.extend_from_slice(&typ.to_be_bytes());
        m.extend_from_slice(&self.cookie.to_be_bytes());
        m.extend_from_slice(&offset.to_be_bytes());
        m.extend_from_slice(&len.to_be_bytes());
        m.extend_from_slice(payload);
        self.sock.write_all(&m)?;
        Ok(self.cookie)
    }

    fn reply(&mut self, cookie: u64, data: Option<&mut [u8]>) -> Result<(), ClientError> {
        let h = get::<16>(&mut self.sock)?;
        let bad = |m: &str| ClientError::Io(io::Error::new(io::ErrorKind::InvalidData, m.to_string()));
        if u32::from_be_bytes(h[..4].try_into().unwrap()) != SIMPLE_REPLY_MAGIC {
            return Err(bad("bad reply magic"));
        }
        if u64::from_be_bytes(h[8..16].try_into().unwrap()) != cookie {
            return Err(bad("reply to another request"));
        }
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        if err != 0 {
            return Err(ClientError::Nbd(err));
        }
        if let Some(buf) = data {
            self.sock.read_exact(buf)?;
        }
        Ok(())
    }

    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ClientError> {
        let c = self.request(CMD_READ, 0, offset, buf.len() as u32, &[])?;
        self.reply(c, Some(buf))
    }

    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), ClientError> {
        let flags = if fua { CMD_FLAG_FUA } else { 0 };
        let c = self.request(CMD_WRITE, flags, offset, data.len() as u32, data)?;
        self.reply(c, None)
    }

    pub fn write_zeroes(&mut self, offset: u64, len: u32) -> Result<(), ClientError> {
        let c = self.request(CMD_WRITE_ZEROES, 0, offset, len, &[])?;
        self.reply(c, None)
    }

    pub fn trim(&mut self, offset: u64, len: u32) -> Result<(), ClientError> {
        let c = self.request(CMD_TRIM, 0, offset, len, &[])?;
        self.reply(c, None)
    }

    pub fn flush(&mut self) -> Result<(), ClientError> {
        let c = self.request(CMD_FLUSH, 0, 0, 0, &[])?;
        self.reply(c, None)
    }

    /// Soft disconnect.
    pub fn disconnect(mut self) -> io::Result<()> {
        self.request(CMD_DISC, 0, 0, 0, &[])?;
        self.sock.shutdown(std::net::Shutdown::Write)
    }

    /// Send a raw request (tests: pipelining, bad requests).
    pub fn send_raw(&mut self, typ: u16, flags: u16, offset: u64, len: u32, payload: &[u8]) -> io::Result<u64> {
        self.request(typ, flags, offset, len, payload)
    }

    /// Read one simple reply header: (error, cookie).
    pub fn recv_header(&mut self) -> io::Result<(u32, u64)> {
        let h = get::<16>(&mut self.sock)?;
        Ok((
            u32::from_be_bytes(h[4..8].try_into().unwrap()),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
        ))
    }

    pub fn recv_data(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.sock.read_exact(buf)
    }
}
