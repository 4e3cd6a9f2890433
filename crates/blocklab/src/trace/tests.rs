//! Tests of the trace readers: hand-worked records of every format, the
//! errors bad input must give, auto sniffing, and properties (no panic on
//! random input; writers round-trip).

use super::order::{Reordered, TimeOrder};
use super::*;
use crate::error::Location;
use proptest::prelude::*;
use std::io::Write as _;

fn ctx() -> ParseCtx {
    ParseCtx { file: "t".into() }
}

fn file_with(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
    (dir, path)
}

fn read(path: &Path, format: &str) -> Result<Vec<Request>> {
    open(
        path,
        &TraceOptions {
            format: format.into(),
            ..Default::default()
        },
    )?
    .collect()
}

fn one(format: &mut dyn TextFormat, line: &str) -> Request {
    format.parse_line(line, 1, &ctx()).unwrap().unwrap()
}

fn req(time: f64, op: Op, offset: u64, len: u64, tenant: u32) -> Request {
    Request {
        time,
        op,
        offset,
        len,
        tenant,
        fs: Default::default(),
    }
}

// ---- hand-worked records ------------------------------------------------------------

#[test]
fn spc_record() {
    let r = one(&mut spc::Spc, "2,20941264,8192,W,0.551706");
    assert_eq!(r, req(0.551706, Op::Write, 20941264 * 512, 8192, 2));
    let r = one(&mut spc::Spc, "0,1,512,r,1.5,extra");
    assert_eq!(r, req(1.5, Op::Read, 512, 512, 0));
}

#[test]
fn msr_times_are_relative_to_the_first_record() {
    let mut f = msr::Msr::default();
    let a = f
        .parse_line("128166385295514663,hm,0,Write,9056014336,2048,2833", 1, &ctx())
        .unwrap()
        .unwrap();
    let b = f
        .parse_line("128166385305514663,hm,1,Read,4096,512,10", 2, &ctx())
        .unwrap()
        .unwrap();
    // hm is host 1: tenant 256 + disk.
    assert_eq!(a, req(0.0, Op::Write, 9056014336, 2048, 256));
    // 10,000,000 ticks of 100 ns = 1 s
    assert_eq!(b, req(1.0, Op::Read, 4096, 512, 257));
}

#[test]
fn msr_tenant_is_host_and_disk() {
    let t = |line: &str| one(&mut msr::Msr::default(), line).tenant;
    assert_eq!(t("1,hm,0,Read,0,512,1"), 256);
    assert_eq!(t("1,web,0,Read,0,512,1"), 13 * 256);
    assert_eq!(t("1,src1,2,Read,0,512,1"), 7 * 256 + 2);
    assert_eq!(t("1,WDEV,0,Read,0,512,1"), 12 * 256);
    assert_eq!(msr::volume_name(13 * 256), Some("web_0".into()));
    assert_eq!(msr::volume_name(7 * 256 + 2), Some("src1_2".into()));
    assert_eq!(msr::volume_name(3), None);
    // Every known host has its own id; unknown names hash above them,
    // deterministically, below 2^16.
    let ids: std::collections::BTreeSet<u32> = msr::HOSTS.iter().map(|h| msr::host_id(h)).collect();
    assert_eq!(ids, (1..=13).collect());
    let other = msr::host_id("fileserver");
    assert!((14..1 << 16).contains(&other));
    assert_eq!(other, msr::host_id("FileServer"));
    assert_ne!(other, msr::host_id("fileserver2"));
    assert_eq!(t("1,fileserver,3,Read,0,512,1"), other * 256 + 3);
    // Disk numbers above 255 and empty host names are errors naming the field.
    let mut f = msr::Msr::default();
    let e = f
        .parse_line("1,hm,256,Read,0,512,1", 1, &ctx())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 1") && e.contains("DiskNumber") && e.contains("256"),
        "{e}"
    );
    let e = f.parse_line("1,,0,Read,0,512,1", 2, &ctx()).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("Hostname"), "{e}");
}

#[test]
fn disksim_and_mqsim_differ_only_in_time_unit() {
    let line = "11413000 3 657728 16 1";
    let ms = one(&mut disksim::DiskSim::millis(), line);
    let ns = one(&mut disksim::DiskSim::nanos(), line);
    assert_eq!(ms, req(11413.0, Op::Read, 657728 * 512, 16 * 512, 3));
    assert_eq!(ns.time, 11413000.0 * 1e-9);
    assert_eq!(
        (ns.op, ns.offset, ns.len, ns.tenant),
        (ms.op, ms.offset, ms.len, ms.tenant)
    );
    // flags are hexadecimal, bit 0 = read
    assert_eq!(one(&mut disksim::DiskSim::millis(), "0.5 0 8 8 0x10").op, Op::Write);
    assert_eq!(one(&mut disksim::DiskSim::millis(), "0.5 0 8 8 b").op, Op::Read);
}

#[test]
fn blkparse_events() {
    let lines = "  8,16   5        1     0.000000000 18615  A   R 1444645666 + 256 <- (8,17) 1444645632\n\
                   8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]\n\
                   8,16   5        3     0.000006438 18615  G   R 1444645666 + 256 [java]\n\
                   8,16   5        0     0.000012990     0  m   N cfq18615S / insert_request\n\
                   8,16   5        6     0.000031865 18615  D   R 1444645666 + 256 [java]\n\
                   8,32   1        7     0.5 1  Q  WS 100 + 8 [flush]\n\
                   8,16   1        8     0.6 1  Q  FWS [kworker]\n\
                   8,16   1        9     0.7 1  Q  D 100 + 8 [discard]\n\
                 CPU0 (sdb):\n Reads Queued:           4,      100KiB\n\
                 Total (sdb):\n";
    let (_d, path) = file_with("x.blkparse", lines.as_bytes());
    let q = read(&path, "blkparse").unwrap();
    assert_eq!(
        q,
        vec![
            req(0.00000185, Op::Read, 1444645666 * 512, 256 * 512, 0),
            req(0.5, Op::Write, 51200, 4096, 1)
        ]
    );
    let d: Vec<Request> = open(
        &path,
        &TraceOptions {
            format: "blkparse".into(),
            blkparse_event: 'D',
            ..Default::default()
        },
    )
    .unwrap()
    .collect::<Result<_>>()
    .unwrap();
    assert_eq!(d, vec![req(0.000031865, Op::Read, 1444645666 * 512, 256 * 512, 0)]);
    assert_eq!(sniff::sniff(&path).unwrap(), "blkparse");
    let e = open(
        &path,
        &TraceOptions {
            format: "blkparse".into(),
            blkparse_event: 'X',
            ..Default::default()
        },
    );
    assert!(e.is_err());
}

#[test]
fn cloudphysics_tencent_systor_hpsrt_csv_records() {
    assert_eq!(
        one(&mut cloudphysics::CloudPhysics, "1,5633898,2a,512,42932745"),
        req(5633898.0, Op::Write, 42932745 * 512, 512, 0)
    );
    assert_eq!(one(&mut cloudphysics::CloudPhysics, "1,7,28,4096,8").op, Op::Read);
    assert_eq!(
        one(&mut tencent::Tencent, "1538323199,13896880,128,0,1063"),
        req(1538323199.0, Op::Read, 13896880 * 512, 128 * 512, 1063)
    );
    assert_eq!(
        one(&mut tencent_cut::TencentCut, "1500.000,134,0,4096,42242048,0.100,4096"),
        req(1.5, Op::Write, 42242048, 4096, 0)
    );
    assert_eq!(
        one(&mut msr_cut::MsrCut, "250.5 2 11562803200 4096 1"),
        req(0.2505, Op::Read, 11562803200, 4096, 2)
    );
    assert_eq!(
        one(
            &mut systor::Systor,
            "1456095145.133076000,0.000806000,R,3,899056122368,131072"
        ),
        req(1456095145.133076, Op::Read, 899056122368, 131072, 3)
    );
    assert_eq!(
        one(&mut hpsrt_csv::HpSrtCsv, "0.022479,1,1040,4096,W,9962"),
        req(0.022479, Op::Write, 1040 * 512, 4096, 1)
    );
}

fn vscsi_record(cmd: u16, ver: u16, len: u32, lbn: u64, ts: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&7u32.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&1u32.to_le_bytes());
    r.extend_from_slice(&cmd.to_le_bytes());
    r.extend_from_slice(&ver.to_le_bytes());
    r.extend_from_slice(&lbn.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r
}

#[test]
fn vscsi_records_and_truncation() {
    let mut bytes = vscsi_record(0x2a, 0x100, 512, 42932745, 5_633_898_500_000);
    bytes.extend(vscsi_record(0x00, 0x100, 0, 0, 1)); // TEST UNIT READY: skipped
    bytes.extend(vscsi_record(0x28, 0x100, 4096, 8, 5_633_899_000_000));
    let (_d, path) = file_with("t.bin", &bytes);
    assert_eq!(sniff::sniff(&path).unwrap(), "vscsi");
    let rs = read(&path, "vscsi").unwrap();
    assert_eq!(
        rs,
        vec![
            req(5633898.5, Op::Write, 42932745 * 512, 512, 0),
            req(5633899.0, Op::Read, 4096, 4096, 0)
        ]
    );
    // truncated last record
    bytes.truncate(bytes.len() - 5);
    let (_d, path) = file_with("t.vscsi", &bytes);
    let e = read(&path, "vscsi").unwrap_err();
    assert!(
        matches!(e, Error::Parse { location: Location::Record(2), ref field, .. } if field == "record"),
        "{e}"
    );
    // unknown opcode
    let (_d, path) = file_with("u.vscsi", &vscsi_record(0x77, 0x100, 512, 1, 1));
    let e = read(&path, "vscsi").unwrap_err();
    assert!(
        matches!(e, Error::Parse { location: Location::Record(0), ref field, .. } if field == "cmd"),
        "{e}"
    );
}

#[test]
fn oracle_and_lbn32_records() {
    let mut bytes = Vec::new();
    oracle::write_record(&mut bytes, 7, 5, 4096, 2).unwrap();
    oracle::write_record(&mut bytes, 8, (3u64 << 40) | 9, 4096, -1).unwrap();
    let (_d, path) = file_with("x.oracleGeneral.bin", &bytes);
    assert_eq!(sniff::sniff(&path).unwrap(), "oracle");
    let rs = read(&path, "oracle").unwrap();
    assert_eq!(
        rs,
        vec![
            req(7.0, Op::Read, 5 * 4096, 4096, 0),
            req(8.0, Op::Read, 9 * 4096, 4096, 3)
        ]
    );
    // The cache key of each access is the obj_id.
    let keys: Vec<u64> = blocks::BlockStream::new(
        open(
            &path,
            &TraceOptions {
                format: "oracle".into(),
                ..Default::default()
            },
        )
        .unwrap(),
        Default::default(),
    )
    .unwrap()
    .map(|a| a.unwrap().key)
    .collect();
    assert_eq!(keys, vec![5, (3u64 << 40) | 9]);
    bytes.pop();
    let (_d, path) = file_with("y.oracle", &bytes);
    let e = read(&path, "oracle").unwrap_err();
    assert!(
        e.to_string().contains("record 1") && e.to_string().contains("truncated"),
        "{e}"
    );

    let (_d, path) = file_with("w.lbn32", &[1, 0, 0, 0, 2, 1, 0, 0]);
    let rs = read(&path, "lbn32").unwrap();
    assert_eq!(
        rs,
        vec![
            req(0.0, Op::Read, 4096, 4096, 0),
            req(1.0, Op::Read, 258 * 4096, 4096, 0)
        ]
    );
}

fn srt_record(words: &[u32]) -> Vec<u8> {
    let mut r = ((words.len() as u32 + 1) * 4).to_be_bytes().to_vec();
    for w in words {
        r.extend_from_slice(&w.to_be_bytes());
    }
    r
}

#[test]
fn hpsrt_records() {
    let mut bytes = b"$$TR_IOREC-1.3\nversion = 1.3;\n\x0c".to_vec();
    // id, sec, usec, start, stop, bytes, sector, devno, drivertype, cylno, flags, info, queuelen
    bytes.extend(srt_record(&[
        0x0004_0001,
        2,
        500000,
        10,
        20,
        4096,
        1056,
        0x0800_0107,
        4,
        1,
        0x1b,
        0,
        1,
    ]));
    bytes.extend(srt_record(&[0x0004_0004, 3, 0, 10, 20, 4096, 1, 0, 4, 1, 0, 0, 1, 0])); // suspect I/O: skipped
    bytes.extend(srt_record(&[
        0x0004_0001,
        3,
        1,
        10,
        20,
        8192,
        8,
        0x0800_0008,
        4,
        1,
        0x8810a,
        0,
        1,
    ]));
    let (_d, path) = file_with("a.srt", &bytes);
    let rs = read(&path, "hpsrt").unwrap();
    assert_eq!(
        rs,
        vec![
            req(2.5, Op::Read, 1056 * 512, 4096, 1),
            req(3.000001, Op::Write, 8 * 512, 8192, 0)
        ]
    );
    let (_d, path) = file_with("a.dat", &bytes);
    assert_eq!(sniff::sniff(&path).unwrap(), "hpsrt");
    bytes.truncate(bytes.len() - 3);
    let (_d, path) = file_with("b.srt", &bytes);
    let e = read(&path, "hpsrt").unwrap_err();
    assert!(
        matches!(
            e,
            Error::Parse {
                location: Location::Record(2),
                ..
            }
        ),
        "{e}"
    );
    let (_d, path) = file_with("c.srt", b"not a trace");
    assert!(read(&path, "hpsrt").is_err());
}

#[test]
fn compressed_input_is_read_transparently() {
    let text = b"timestamp,op,offset,size,tenant\n0.5,R,4096,512,1\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text).unwrap();
    let (_d, path) = file_with("t.csv.gz", &gz.finish().unwrap());
    assert_eq!(read(&path, "auto").unwrap(), vec![req(0.5, Op::Read, 4096, 512, 1)]);
    let z = zstd::encode_all(&text[..], 3).unwrap();
    let (_d, path) = file_with("t.csv.zst", &z);
    assert_eq!(read(&path, "csv").unwrap(), vec![req(0.5, Op::Read, 4096, 512, 1)]);
}

// ---- bad input ------------------------------------------------------------------------

fn parse_error(format: &str, text: &str) -> (Location, String, String) {
    let (_d, path) = file_with("bad.txt", text.as_bytes());
    match read(&path, format) {
        Err(Error::Parse {
            file,
            location,
            field,
            message,
        }) => {
            assert!(file.ends_with("bad.txt"), "{file}");
            (location, field, message)
        }
        other => panic!("{format}: expected a parse error, got {other:?}"),
    }
}

#[test]
fn malformed_lines_name_line_and_field() {
    let cases: &[(&str, &str, u64, &str)] = &[
        (
            "csv",
            "timestamp,op,offset,size\n0.1,R,0,512\n0.2,R,x12,512\n",
            3,
            "offset",
        ),
        ("csv", "0.1,Q,0,512\n", 1, "op"),
        ("csv", "0.1,R,0,-512\n", 1, "size"),
        ("csv", "0.1,R,0\n", 1, "size"),
        ("csv", "nan,R,0,1\n", 1, "timestamp"),
        ("spc", "0,1,512,X,0.5\n", 1, "Opcode"),
        ("spc", "0,1,-512,r,0.5\n", 1, "Size"),
        ("spc", "0,1,512\n", 1, "Opcode"),
        ("msr", "1,hm,0,Erase,0,512,1\n", 1, "Type"),
        ("msr", "1,hm,0,Read,0\n", 1, "Size"),
        ("msr-cut", "0.1 0 0 512 2\n", 1, "op"),
        ("disksim", "0.1 0 5 8\n", 1, "flags"),
        ("disksim", "0.1 0 5 -8 1\n", 1, "bcount"),
        ("mqsim", "abc 0 5 8 1\n", 1, "time"),
        ("blkparse", "  8,16 0 1 0.1 1 Q R x12 + 8 [a]\n", 1, "sector"),
        ("blkparse", "  8,16 0 1 0.1 1 Q R 12 + -8 [a]\n", 1, "count"),
        ("cloudphysics", "version,time,op,size,lbn\n1,5,2b,512,1\n", 2, "op"),
        ("tencent", "1,2,3,7,5\n", 1, "type"),
        ("tencent", "1,2,3,0\n", 1, "volume_id"),
        ("tencent-cut", "0,1,5,4096,0,0,4096\n", 1, "op"),
        ("systor", "1.0,0.1,X,0,0,512\n", 1, "IOType"),
        ("systor", "1.0,0.1,R,0,0,-512\n", 1, "Size"),
        ("hpsrt-csv", "0.1,0,5,512,Z,1\n", 1, "op"),
    ];
    for &(format, text, line, field) in cases {
        let (loc, f, msg) = parse_error(format, text);
        assert_eq!(loc, Location::Line(line), "{format}: {text:?}: {msg}");
        assert_eq!(f, field, "{format}: {text:?}: {msg}");
    }
    let (_, _, msg) = parse_error("csv", "0.1,R,0,-512\n");
    assert!(msg.contains("negative"), "{msg}");
}

#[test]
fn overflowing_offsets_are_errors_not_panics() {
    let (loc, field, _) = parse_error("spc", "0,36028797018963968,512,r,0\n");
    assert_eq!((loc, field.as_str()), (Location::Line(1), "LBA"));
    let (_, field, _) = parse_error("csv", "0,R,18446744073709551615,2\n");
    assert_eq!(field, "size");
}

#[test]
fn skip_bad_counts_skipped_records() {
    let (_d, path) = file_with(
        "s.csv",
        b"0.1,R,0,512\n0.2,Q,0,512\nnot,a,line\n0.3,W,512,512\n\xff\xfe,R,0,1\n",
    );
    let opts = TraceOptions {
        format: "csv".into(),
        skip_bad: true,
        ..Default::default()
    };
    let mut r = open(&path, &opts).unwrap();
    let got: Vec<Request> = (&mut r).collect::<Result<_>>().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(r.skipped(), 3);
    // Without skip_bad the first bad line stops the run.
    let e = read(&path, "csv").unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn overlong_lines_stop_the_reader() {
    let mut bytes = b"0.1,R,0,512\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'7', (1 << 20) + 10));
    let (_d, path) = file_with("long.csv", &bytes);
    let opts = TraceOptions {
        format: "csv".into(),
        skip_bad: true,
        ..Default::default()
    };
    let mut r = open(&path, &opts).unwrap();
    assert_eq!((&mut r).count(), 1);
    assert_eq!(r.skipped(), 1);
    let e = read(&path, "csv").unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("longer"), "{e}");
}

#[test]
fn failed_conversion_leaves_no_output() {
    let (d, path) = file_with("bad.csv", b"0.1,R,0,512\n0.2,R,0,512\n0.3,R,zz,512\n");
    let opts = TraceOptions {
        format: "csv".into(),
        ..Default::default()
    };
    for to in ["csv", "oracle"] {
        let dst = d.path().join(format!("out.{to}"));
        let e = convert::convert(&path, &opts, &dst, to, 4096).unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        assert!(!dst.exists(), "{to}");
    }
    let e = convert::convert(&path, &opts, &path, "csv", 4096).unwrap_err();
    assert!(e.to_string().contains("same file"), "{e}");
    assert!(path.exists());
}

#[test]
fn time_order_is_not_checked() {
    let (_d, path) = file_with("o.csv", b"5,R,0,512\n1,R,0,512\n");
    assert_eq!(read(&path, "csv").unwrap().len(), 2);
}

#[test]
fn unknown_format_and_missing_file() {
    let (_d, path) = file_with("o.csv", b"5,R,0,512\n");
    let e = read(&path, "nope").unwrap_err().to_string();
    assert!(
        e.contains("nope") && e.contains("blkparse") && e.contains("auto"),
        "{e}"
    );
    let e = read(Path::new("/no/such/trace.csv"), "csv").unwrap_err().to_string();
    assert!(e.contains("/no/such/trace.csv") && e.contains("no such file"), "{e}");
}

#[test]
fn sniffing_rules() {
    let cases: &[(&str, &[u8], std::result::Result<&str, &str>)] = &[
        ("a.txt", b"timestamp,op,offset,size\n0.5,R,0,512\n", Ok("csv")),
        ("a.txt", b"0,20941264,8192,W,0.551706\n1,1,512,r,0.6\n", Ok("spc")),
        ("a", b"128166385295514663,hm,0,Write,9056014336,2048,2833\n", Ok("msr")),
        (
            "a",
            b"Timestamp,Response,IOType,LUN,Offset,Size\n1456095145.1,0.0008,R,0,899056122368,131072\n",
            Ok("systor"),
        ),
        ("a", b"1538323200,4247200,128,1,1058\n", Ok("tencent")),
        ("a", b"0.000,134,1,4096,42242048,0.100,4096\n", Ok("tencent-cut")),
        (
            "a",
            b"version,time,op,size,lbn\n1,5633898,2a,512,42932745\n",
            Ok("cloudphysics"),
        ),
        (
            "a",
            b"time_s,devno,lba512,size_bytes,op,service_us\n0.000000,1,1056,4096,R,19513\n",
            Ok("hpsrt-csv"),
        ),
        ("a", b"11413000 0 657728 16 1\n", Err("ambiguous")),
        ("a", b"hello world\n", Err("could not recognise")),
        ("a", b"", Err("empty")),
        ("a.bin", &[1, 0, 0, 0, 0, 0, 0, 0], Err("binary")),
        ("x.lbn_u32le.xz", b"", Ok("lbn32")),
    ];
    for &(name, bytes, want) in cases {
        let (_d, path) = file_with(name, bytes);
        match (sniff::sniff(&path), want) {
            (Ok(got), Ok(w)) => assert_eq!(got, w, "{name}: {bytes:?}"),
            (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{name}: {e}"),
            (got, w) => panic!("{name} {bytes:?}: got {got:?}, want {w:?}"),
        }
    }
}

// ---- properties -----------------------------------------------------------------------

fn text_formats() -> Vec<Box<dyn TextFormat>> {
    super::text_formats().into_iter().map(|(_, f)| f).collect()
}

/// Valid-looking lines of each format, mutated by the properties below.
const SEEDS: &[&str] = &[
    "0.5,R,4096,512,1",
    "2,20941264,8192,W,0.551706",
    "128166385295514663,hm,0,Write,9056014336,2048,2833",
    "0.000 0 11562803200 4096 1",
    "11413000 0 657728 16 1",
    "  8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]",
    "1,5633898,2a,512,42932745",
    "1538323200,4247200,128,1,1058",
    "0.000,134,1,4096,42242048,0.100,4096",
    "1456095145.133076000,0.000806000,R,0,899056122368,131072",
    "0.022479,1,1040,4096,R,9962",
];

/// Requests a reader may legally produce: their byte range fits in 64 bits.
fn sane(r: &Request) -> bool {
    r.offset.checked_add(r.len).is_some() && r.time.is_finite()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn text_parsers_never_panic_on_random_lines(line in "\\PC{0,80}") {
        for mut f in text_formats() {
            if let Ok(Some(r)) = f.parse_line(&line, 1, &ctx()) {
                prop_assert!(sane(&r));
            }
        }
    }

    #[test]
    fn text_parsers_never_panic_on_mutated_lines(seed in 0..SEEDS.len(), pos in 0usize..100, byte in 0u8..128, cut in 0usize..100, dup in any::<bool>()) {
        let mut b = SEEDS[seed].as_bytes().to_vec();
        let p = pos % (b.len() + 1);
        if dup { b.insert(p, byte) } else if p < b.len() { b[p] = byte }
        b.truncate(b.len().saturating_sub(cut % 4));
        let line = String::from_utf8_lossy(&b).into_owned();
        for (i, mut f) in text_formats().into_iter().enumerate() {
            for lineno in [1, 2] {
                if let Ok(Some(r)) = f.parse_line(&line, lineno, &ctx()) {
                    prop_assert!(sane(&r), "format {i}: {line:?} gave {r:?}");
                }
            }
        }
    }

    #[test]
    fn every_reader_survives_random_files(bytes in proptest::collection::vec(any::<u8>(), 0..300), skip in any::<bool>()) {
        let (_d, path) = file_with("f", &bytes);
        for format in FORMATS.iter().copied().chain(["auto"]) {
            let opts = TraceOptions { format: format.into(), skip_bad: skip, ..Default::default() };
            if let Ok(reader) = open(&path, &opts) {
                for r in reader.take(1000).flatten() {
                    prop_assert!(sane(&r));
                }
            }
        }
    }

    #[test]
    fn csv_round_trip(time in 0.0f64..1e12, write in any::<bool>(), offset in 0u64..(1u64 << 62), len in 0u64..(1u64 << 32), tenant in any::<u32>()) {
        let r = req(time, if write { Op::Write } else { Op::Read }, offset, len, tenant);
        let mut out = Vec::new();
        native_csv::write_record(&mut out, &r).unwrap();
        let line = std::str::from_utf8(&out).unwrap().trim_end();
        let back = native_csv::NativeCsv.parse_line(line, 2, &ctx()).unwrap().unwrap();
        prop_assert_eq!(back, r);
    }

    #[test]
    fn oracle_round_trip(time in any::<u32>(), tenant in 0u32..(1 << 24), block in 0u64..(1u64 << 40)) {
        let r = req(time as f64, Op::Read, block * 4096, 4096, tenant);
        let key = blocks::block_key(tenant, block).unwrap();
        let mut out = Vec::new();
        oracle::write_record(&mut out, time, key, 4096, -1).unwrap();
        let back = oracle::Oracle.parse_record(&out, 0, &ctx()).unwrap().unwrap();
        prop_assert_eq!(back, r);
    }
}

/// Convert random traces to csv and oracle; check the csv reads back equal
/// and the oracle records against a brute-force next-access computation.
#[test]
fn convert_round_trips_and_next_access() {
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    });
    let strat = proptest::collection::vec((0u32..100, any::<bool>(), 0u64..40, 1u64..3, 0u32..3), 0..60);
    runner
        .run(&strat, |spec| {
            let reqs: Vec<Request> = spec
                .iter()
                .map(|&(t, w, blk, n, ten)| {
                    req(
                        t as f64,
                        if w { Op::Write } else { Op::Read },
                        blk * 4096,
                        n * 4096,
                        ten,
                    )
                })
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let src = dir.path().join("src.csv");
            let mut f = std::fs::File::create(&src).unwrap();
            native_csv::write_header(&mut f).unwrap();
            for r in &reqs {
                native_csv::write_record(&mut f, r).unwrap();
            }
            drop(f);
            let opts = TraceOptions {
                format: "csv".into(),
                ..Default::default()
            };
            let csv = dir.path().join("out.csv.gz");
            let s = convert::convert(&src, &opts, &csv, "csv", 4096).unwrap();
            prop_assert_eq!(s.requests, reqs.len() as u64);
            prop_assert_eq!(read(&csv, "csv").unwrap(), reqs.clone());

            let ora = dir.path().join("out.oracle");
            let s = convert::convert(&src, &opts, &ora, "oracle", 4096).unwrap();
            let bytes = std::fs::read(&ora).unwrap();
            let recs: Vec<(u32, u64, u32, i64)> = bytes
                .chunks(24)
                .map(|c| {
                    (
                        u32::from_le_bytes(c[0..4].try_into().unwrap()),
                        u64::from_le_bytes(c[4..12].try_into().unwrap()),
                        u32::from_le_bytes(c[12..16].try_into().unwrap()),
                        i64::from_le_bytes(c[16..24].try_into().unwrap()),
                    )
                })
                .collect();
            // Brute force: expand blocks, then next access by scanning forward.
            let mut accesses = Vec::new();
            for r in &reqs {
                for b in r.blocks(4096) {
                    accesses.push((r.time as u32, blocks::block_key(r.tenant, b).unwrap()));
                }
            }
            prop_assert_eq!(recs.len(), accesses.len());
            prop_assert_eq!(s.records, accesses.len() as u64);
            for (i, &(t, k)) in accesses.iter().enumerate() {
                let next = accesses[i + 1..]
                    .iter()
                    .position(|&(_, k2)| k2 == k)
                    .map(|j| (i + 1 + j) as i64 + 1)
                    .unwrap_or(-1);
                prop_assert_eq!(recs[i], (t, k, 4096, next));
            }
            // Reading the oracle file back gives the same block-key sequence.
            let back: Vec<u64> = blocks::BlockStream::new(
                open(
                    &ora,
                    &TraceOptions {
                        format: "oracle".into(),
                        ..Default::default()
                    },
                )
                .unwrap(),
                Default::default(),
            )
            .unwrap()
            .map(|a| a.unwrap().key)
            .collect();
            prop_assert_eq!(back, accesses.iter().map(|a| a.1).collect::<Vec<_>>());
            Ok(())
        })
        .unwrap();
}

fn read_ordered(path: &Path, format: &str, order: TimeOrder) -> (Result<Vec<Request>>, Option<Reordered>) {
    let mut r = open(
        path,
        &TraceOptions {
            format: format.into(),
            order,
            ..Default::default()
        },
    )
    .unwrap();
    let got = (&mut r).collect();
    (got, r.reordered())
}

/// The trace: times 0.5, 0.2, 0.9, 0.1 (a header line first).
const BACKWARDS: &[u8] = b"# time,op,offset,size\n0.5,R,0,4096\n0.2,R,4096,4096\n0.9,W,8192,4096\n0.1,R,0,4096\n";

#[test]
fn times_that_go_back_are_an_error_naming_the_line() {
    let (_d, path) = file_with("b.csv", BACKWARDS);
    let (got, _) = read_ordered(&path, "csv", TimeOrder::Strict);
    let e = got.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}: line 3: field `time`: time goes back: 0.2 s after 0.5 s at line 2",
            path.display()
        )),
        "{e}"
    );
    assert!(e.contains("--sort"), "{e}");
    // Without an order (cache, mrc: no time) the file reads as it is.
    assert_eq!(read(&path, "csv").unwrap().len(), 4);
    // Equal times are in order.
    let (_d, same) = file_with("s.csv", b"1,R,0,512\n1,R,512,512\n2,R,0,512\n");
    assert_eq!(read_ordered(&same, "csv", TimeOrder::Strict).0.unwrap().len(), 3);
}

#[test]
fn sort_reorders_within_the_window_and_reports_what_moved() {
    let (_d, path) = file_with("b.csv", BACKWARDS);
    let (got, moved) = read_ordered(&path, "csv", TimeOrder::Sort { window_s: 1.0 });
    let times: Vec<f64> = got.unwrap().iter().map(|r| r.time).collect();
    assert_eq!(times, vec![0.1, 0.2, 0.5, 0.9]);
    // 0.2 came behind 0.5 (0.3 s), 0.1 behind 0.9 (0.8 s).
    let m = moved.unwrap();
    assert_eq!(m.moved, 2);
    assert!((m.max_behind_ms - 800.0).abs() < 1e-6, "{m:?}");
    assert_eq!(m.window_ms, 1000.0);
    // A window of 0.5 s holds 0.2 (0.3 s behind) but not 0.1 (0.8 s behind): an error at its line.
    let (got, _) = read_ordered(&path, "csv", TimeOrder::Sort { window_s: 0.5 });
    let e = got.unwrap_err().to_string();
    assert!(
        e.contains(": line 5: field `time`: 0.1 s is 0.800000 s behind 0.9 s at line 4"),
        "{e}"
    );
    assert!(e.contains("sort window of 0.5 s"), "{e}");
}

proptest! {
    /// A sort with a window at least as wide as the trace's largest step
    /// back gives the stable time order of the requests (what a full sort
    /// gives), and reports each request that came behind a later one.
    #[test]
    fn sort_in_a_wide_enough_window_is_the_stable_sort(times in prop::collection::vec(0u32..50, 0..60)) {
        let text: String = times.iter().enumerate().map(|(i, t)| format!("{t},R,{},512\n", i * 512)).collect();
        let (_d, path) = file_with("p.csv", text.as_bytes());
        let (got, moved) = read_ordered(&path, "csv", TimeOrder::Sort { window_s: 50.0 });
        let got: Vec<(f64, u64)> = got.unwrap().iter().map(|r| (r.time, r.offset)).collect();
        let mut want: Vec<(f64, u64)> = times.iter().enumerate().map(|(i, &t)| (t as f64, i as u64 * 512)).collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0));
        prop_assert_eq!(got, want);
        let mut latest = f64::NEG_INFINITY;
        let behind = times.iter().filter(|&&t| { let b = (t as f64) < latest; latest = latest.max(t as f64); b }).count();
        prop_assert_eq!(moved.unwrap().moved, behind as u64);
    }
}

#[test]
fn a_named_format_that_fails_says_which_formats_read_the_file() {
    // An SPC file read as native CSV.
    let (_d, path) = file_with("t.txt", b"0,20941264,8192,W,0.551706\n0,20939840,8192,W,0.554041\n");
    let e = read(&path, "csv").unwrap_err().to_string();
    assert!(e.contains("(not csv? the file reads as spc: try --format spc)"), "{e}");
    // A bad record after good ones is a bad record, not a wrong format.
    let (_d, path) = file_with("u.csv", b"0.1,R,0,512\n0.2,X,0,512\n");
    let e = read(&path, "csv").unwrap_err().to_string();
    assert!(!e.contains("reads as"), "{e}");
}

#[test]
fn convert_takes_the_output_format_from_the_name() {
    assert_eq!(convert::target_of(Path::new("out.spc")), Some("spc"));
    assert_eq!(convert::target_of(Path::new("d/out.CSV.gz")), Some("csv"));
    assert_eq!(convert::target_of(Path::new("w.oracleGeneral.zst")), Some("oracle"));
    assert_eq!(convert::target_of(Path::new("x.oracle")), Some("oracle"));
    assert_eq!(convert::target_of(Path::new("x.bin")), None);
    let (d, src) = file_with("x.csv", b"0.5,R,4096,8192,3\n1.25,W,0,512,0\n");
    let opts = TraceOptions {
        format: "csv".into(),
        ..Default::default()
    };
    let dst = d.path().join("out.spc");
    let s = convert::convert(&src, &opts, &dst, "auto", 4096).unwrap();
    assert_eq!((s.to.as_str(), s.requests), ("spc", 2));
    assert_eq!(
        std::fs::read_to_string(&dst).unwrap(),
        "3,8,8192,r,0.5\n0,0,512,w,1.25\n"
    );
    // The SPC output reads back as the same requests.
    assert_eq!(read(&dst, "spc").unwrap(), read(&src, "csv").unwrap());
    let e = convert::convert(&src, &opts, &d.path().join("out.bin"), "auto", 4096).unwrap_err();
    assert!(
        e.to_string().contains("cannot tell the output format from the name"),
        "{e}"
    );
    // SPC addresses sectors: an offset inside one is an error, not a rounded address.
    let (_d2, odd) = file_with("o.csv", b"0.5,R,100,512\n");
    let e = convert::convert(&odd, &opts, &d.path().join("o.spc"), "spc", 4096).unwrap_err();
    assert!(
        e.to_string()
            .contains("request 1 (offset 100 B) does not start on a 512-byte sector"),
        "{e}"
    );
}

/// The cache keys of `path` read as `format` (default 4 KiB blocks).
fn keys_of(path: &Path, format: &str) -> Result<Vec<u64>> {
    let opts = TraceOptions {
        format: format.into(),
        ..Default::default()
    };
    blocks::BlockStream::new(open(path, &opts)?, Default::default())?
        .map(|a| a.map(|a| a.key))
        .collect()
}

#[test]
fn txt_ids_are_the_cache_keys() {
    // Numeric ids are the keys; the non-numeric ones are interned from 2^64 - 1
    // down in order of first appearance; blank lines and surrounding blanks do
    // not count; time is the request's index.
    let text = b"1\n2\n 3 \n1\nobj-x\n\n1\n2\nobj-x\n003\r\nobj/y\n1\n";
    let (_d, path) = file_with("t.txt", text);
    let max = u64::MAX;
    assert_eq!(
        keys_of(&path, "txt").unwrap(),
        vec![1, 2, 3, 1, max, 1, 2, max, 3, max - 1, 1]
    );
    let rs = read(&path, "txt").unwrap();
    assert_eq!(rs[0], req(0.0, Op::Read, 4096, 4096, 0));
    assert_eq!(rs[10], req(10.0, Op::Read, 4096, 4096, 0));
    // Not sniffed: a one-id-per-line file is not mistaken for txt by `auto`, nor
    // does txt make other formats' files ambiguous.
    assert!(sniff::sniff(&path).is_err());
}

#[test]
fn txt_bad_lines_name_the_line_and_field() {
    for (text, line, what) in [
        (&b"1\n2 3\n"[..], 2, "one object id per line"),
        (&b"1\n\n99999999999999999999\n"[..], 3, "beyond the largest id"),
        (&b"a\n18446744073709551615\n"[..], 2, "collide"),
        (&b"18446744073709551615\na\n"[..], 2, "collide"),
    ] {
        let (_d, path) = file_with("bad.txt", text);
        let e = read(&path, "txt").unwrap_err();
        assert!(
            matches!(&e, Error::Parse { location: Location::Line(l), field, .. } if *l == line && field == "obj_id"),
            "{e}"
        );
        assert!(e.to_string().contains(what) && e.to_string().contains("bad.txt"), "{e}");
    }
}
