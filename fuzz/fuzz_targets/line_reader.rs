#![no_main]

// The bounded line reader against a plain split on '\n': same lines, same offsets and
// numbers, whatever the chunking; oversized lines keep their ends; the buffer stays
// within the limit.

use baton::tail::{Item, LineReader};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else {
        return;
    };
    let max = usize::from(cut % 97) + 1;
    let step = usize::from(cut / 3 % 31) + 1;
    let mut r = LineReader::new(max);
    let mut got: Vec<(u64, u64, Vec<u8>, u64)> = Vec::new();
    for chunk in data.chunks(step) {
        r.feed(chunk, |it| match it {
            Item::Line {
                offset,
                line_no,
                bytes,
            } => got.push((offset, line_no, bytes.to_vec(), bytes.len() as u64)),
            Item::Oversized {
                offset,
                line_no,
                len,
                head,
                tail,
            } => {
                assert!(head.len() <= baton::tail::OVERSIZE_KEEP);
                assert!(tail.len() <= baton::tail::OVERSIZE_KEEP);
                got.push((offset, line_no, head.to_vec(), len))
            }
        });
        assert!(r.offset() <= r.pos());
    }
    let mut off = 0u64;
    let mut n = 1u64;
    let mut expect = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.iter().position(|b| *b == b'\n') {
        let line = &rest[..i];
        let kept = if line.len() > max {
            line[..line.len().min(baton::tail::OVERSIZE_KEEP)].to_vec()
        } else {
            line.to_vec()
        };
        expect.push((off, n, kept, line.len() as u64));
        off += i as u64 + 1;
        n += 1;
        rest = &rest[i + 1..];
    }
    assert_eq!(got, expect);
    assert_eq!(r.offset(), off);
    assert_eq!(r.line_no(), n);
    assert_eq!(r.pos(), data.len() as u64);
});
