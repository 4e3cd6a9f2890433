//! Feed arbitrary bytes to every text parser (line by line) and every binary
//! parser (record by record). Any panic is a bug; every accepted request must
//! have a byte range that fits in 64 bits.
#![no_main]

use blocklab::trace::*;
use libfuzzer_sys::fuzz_target;

fn check(r: &Request) {
    assert!(r.offset.checked_add(r.len).is_some() && r.time.is_finite());
}

fuzz_target!(|data: &[u8]| {
    let ctx = ParseCtx { file: "fuzz".into() };
    let mut texts = text_formats();
    if let Ok(text) = std::str::from_utf8(data) {
        for (i, line) in text.lines().enumerate() {
            for (_, f) in texts.iter_mut() {
                if let Ok(Some(r)) = f.parse_line(line, i as u64 + 1, &ctx) {
                    check(&r);
                }
            }
        }
    }
    let mut bins: Vec<Box<dyn BinaryFormat>> =
        vec![Box::new(oracle::Oracle), Box::new(lbn32::Lbn32), Box::new(vscsi::Vscsi::new(1)), Box::new(vscsi::Vscsi::new(2))];
    for f in bins.iter_mut() {
        let size = f.record_size();
        for (i, rec) in data.chunks_exact(size).enumerate() {
            if let Ok(Some(r)) = f.parse_record(rec, i as u64, &ctx) {
                check(&r);
            }
        }
    }
});
