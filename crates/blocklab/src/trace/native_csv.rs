//! blocklab's native CSV: header `timestamp,op,offset,size[,tenant[,owner,kind[,parent]]]`,
//! timestamp in seconds, op `R`/`W`, offset and size in bytes.
//!
//! The optional annotation columns say what a request's blocks are: `owner`
//! (inode number; 0 for blocks shared by the whole file system), `kind` (a
//! block kind: `superblock`, `descriptors`, `reserved-descriptors`,
//! `block-bitmap`, `inode-bitmap`, `inode-table`, `directory`, `indirect`,
//! `data`) and `parent` (the directory holding the owner). Plain readers
//! check and ignore them; [`read_annotated`] returns them (the D-GRAID layer
//! places blocks by them). Files without them parse as before.
//!
//! The writer ([`write_record`]) prints times with Rust's shortest
//! round-trip float formatting, so a written record parses back to exactly
//! the same [`Request`].

use super::input::{field, missing, open_decompressed, request, size_field, time_field};
use super::{FsTag, Op, ParseCtx, Request, TextFormat};
use crate::error::{Error, Location, Result};
use crate::fsmodel::kind::{BlockKind, Tag};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

#[derive(Default)]
pub struct NativeCsv;

pub const HEADER: &str = "timestamp,op,offset,size,tenant";
/// Header of a trace with the annotation columns.
pub const ANNOTATED_HEADER: &str = "timestamp,op,offset,size,tenant,owner,kind,parent";

impl TextFormat for NativeCsv {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        Ok(parse_annotated(line, lineno, ctx)?.map(|(r, _)| r))
    }
}

/// Parse one line: the request and, when the line carries them, its owner,
/// kind and parent. Headers and comments give `None`.
pub fn parse_annotated(line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<(Request, Option<Tag>)>> {
    if line.starts_with('#') || (lineno == 1 && line.starts_with("timestamp")) {
        return Ok(None);
    }
    let mut cols = line.split(',');
    let time = time_field(cols.next(), "timestamp", lineno, ctx)?;
    let op = match cols.next().map(str::trim) {
        Some("R") | Some("r") => Op::Read,
        Some("W") | Some("w") => Op::Write,
        Some(other) => return Err(ctx.err(Location::Line(lineno), "op", format!("`{other}` is not R or W"))),
        None => return Err(missing("op", lineno, ctx)),
    };
    let offset: u64 = size_field(cols.next(), "offset", lineno, ctx)?;
    let len: u64 = size_field(cols.next(), "size", lineno, ctx)?;
    let tenant: u32 = match cols.next() {
        Some(t) if !t.trim().is_empty() => field(Some(t), "tenant", lineno, ctx)?,
        _ => 0,
    };
    let mut req = request(time, op, offset, len, tenant, Location::Line(lineno), ctx)?;
    let tag = match (nonempty(cols.next()), nonempty(cols.next())) {
        (None, None) => None,
        (Some(o), Some(k)) => {
            let owner: u64 = field(Some(o), "owner", lineno, ctx)?;
            let kind = BlockKind::parse(k).map_err(|e| ctx.err(Location::Line(lineno), "kind", e.to_string()))?;
            let parent: u64 = match nonempty(cols.next()) {
                Some(p) => field(Some(p), "parent", lineno, ctx)?,
                None => 0,
            };
            Some(Tag::of(owner, kind, parent))
        }
        (Some(_), None) => return Err(ctx.err(Location::Line(lineno), "kind", "missing (an owner needs a kind)")),
        (None, Some(_)) => return Err(ctx.err(Location::Line(lineno), "owner", "missing (a kind needs an owner)")),
    };
    if let Some(t) = &tag {
        req.fs = FsTag::new(t).map_err(|(field, msg)| ctx.err(Location::Line(lineno), field, msg))?;
    }
    Ok(Some((req, tag)))
}

fn nonempty(c: Option<&str>) -> Option<&str> {
    c.filter(|t| !t.trim().is_empty())
}

/// One record of an annotated trace: line number, request, annotation.
pub type Annotated = (u64, Request, Option<Tag>);

/// Read a native CSV trace with its annotations (streamed; the first bad
/// line is an error naming file, line and field).
pub fn read_annotated(path: &Path) -> Result<impl Iterator<Item = Result<Annotated>>> {
    let ctx = ParseCtx {
        file: path.display().to_string(),
    };
    let reader = BufReader::new(open_decompressed(path)?);
    let mut lines = reader.lines().enumerate();
    let mut failed = false;
    Ok(std::iter::from_fn(move || loop {
        if failed {
            return None;
        }
        let (i, line) = lines.next()?;
        let lineno = i as u64 + 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                failed = true;
                return Some(Err(Error::parse(
                    ctx.file.clone(),
                    Location::Line(lineno),
                    "line",
                    e.to_string(),
                )));
            }
        };
        let text = line.trim_end_matches('\r');
        let text = if lineno == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if text.trim().is_empty() {
            continue;
        }
        match parse_annotated(text, lineno, &ctx) {
            Ok(Some((r, t))) => return Some(Ok((lineno, r, t))),
            Ok(None) => continue,
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        }
    }))
}

/// Write one request with its annotation (`tag` None leaves the columns empty).
pub fn write_annotated(w: &mut impl Write, r: &Request, tag: Option<&Tag>) -> std::io::Result<()> {
    match tag {
        Some(t) => writeln!(
            w,
            "{},{},{},{},{},{},{},{}",
            r.time,
            r.op.letter(),
            r.offset,
            r.len,
            r.tenant,
            t.owner,
            t.kind.name(),
            t.parent
        ),
        None => writeln!(w, "{},{},{},{},{},,,", r.time, r.op.letter(), r.offset, r.len, r.tenant),
    }
}

/// Write the header line.
pub fn write_header(w: &mut impl Write) -> std::io::Result<()> {
    writeln!(w, "{HEADER}")
}

/// Write one request as a native CSV line.
#[inline]
pub fn write_record(w: &mut impl Write, r: &Request) -> std::io::Result<()> {
    match r.fs.get() {
        Some(t) => write_annotated(w, r, Some(&t)),
        None => writeln!(w, "{},{},{},{},{}", r.time, r.op.letter(), r.offset, r.len, r.tenant),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ParseCtx {
        ParseCtx { file: "a.csv".into() }
    }

    #[test]
    fn plain_lines_have_no_annotation_and_annotated_ones_round_trip() {
        let (r, t) = parse_annotated("0.5,R,4096,512,3", 2, &ctx()).unwrap().unwrap();
        assert_eq!((r.offset, r.len, r.tenant, t), (4096, 512, 3, None));
        let (r, t) = parse_annotated("1,W,8192,4096,0,12,indirect,2", 2, &ctx())
            .unwrap()
            .unwrap();
        assert_eq!(t, Some(Tag::of(12, BlockKind::Indirect, 2)));
        let mut buf = Vec::new();
        write_annotated(&mut buf, &r, t.as_ref()).unwrap();
        write_annotated(&mut buf, &r, None).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            parse_annotated(lines.next().unwrap(), 2, &ctx()).unwrap().unwrap(),
            (r, t)
        );
        assert_eq!(
            parse_annotated(lines.next().unwrap(), 3, &ctx()).unwrap().unwrap(),
            (Request { fs: FsTag::NONE, ..r }, None)
        );
        // The plain reader accepts annotated lines (and keeps the annotation).
        assert_eq!(
            NativeCsv.parse_line("1,W,8192,4096,0,12,data", 2, &ctx()).unwrap(),
            Some(Request {
                fs: FsTag::new(&Tag::of(12, BlockKind::Data, 0)).unwrap(),
                ..r
            })
        );
    }

    #[test]
    fn the_reader_keeps_the_annotation_in_the_request() {
        let (r, t) = parse_annotated("1,W,8192,4096,0,12,indirect,2", 2, &ctx())
            .unwrap()
            .unwrap();
        assert_eq!(r.fs.get(), t);
        let plain = NativeCsv.parse_line("1,W,8192,4096,0", 2, &ctx()).unwrap().unwrap();
        assert!(plain.fs.is_none() && plain.fs.get().is_none());
        // Every kind and the largest inodes survive packing; write_record keeps them.
        for &(kind, _) in crate::fsmodel::kind::KINDS {
            let t = Tag::of(FsTag::MAX_INODE, kind, FsTag::MAX_INODE - 1);
            assert_eq!(FsTag::new(&t).unwrap().get(), Some(t));
        }
        let mut buf = Vec::new();
        write_record(&mut buf, &r).unwrap();
        write_record(&mut buf, &plain).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text, "1,W,8192,4096,0,12,indirect,2\n1,W,8192,4096,0\n");
        let e = NativeCsv
            .parse_line("1,W,0,4096,0,1073741824,data", 3, &ctx())
            .unwrap_err();
        assert!(matches!(e, Error::Parse { ref field, .. } if field == "owner"), "{e}");
        assert!(std::mem::size_of::<Request>() <= 40, "a request stays small");
    }

    #[test]
    fn bad_annotations_name_the_field() {
        for (line, want) in [
            ("1,W,0,4096,0,12", "kind"),
            ("1,W,0,4096,0,,data", "owner"),
            ("1,W,0,4096,0,x,data", "owner"),
            ("1,W,0,4096,0,5,inode", "kind"),
            ("1,W,0,4096,0,5,data,z", "parent"),
        ] {
            match parse_annotated(line, 4, &ctx()).unwrap_err() {
                Error::Parse { field, location, .. } => {
                    assert_eq!((field.as_str(), location), (want, Location::Line(4)), "{line}");
                }
                e => panic!("{e}"),
            }
        }
    }

    #[test]
    fn read_annotated_streams_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        std::fs::write(
            &p,
            format!("{ANNOTATED_HEADER}\n0,W,0,1024,0,0,superblock,0\n0.1,R,1024,1024\n"),
        )
        .unwrap();
        let got: Vec<_> = read_annotated(&p).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].2.unwrap().kind, BlockKind::Superblock);
        assert_eq!((got[1].0, got[1].2), (3, None));
        std::fs::write(&p, "0,W,0,1024,0,1,dir\n").unwrap();
        let e = read_annotated(&p).unwrap().next().unwrap().unwrap_err().to_string();
        assert!(e.contains("t.csv") && e.contains("line 1") && e.contains("kind"), "{e}");
    }
}
