//! Any bytes as an MRT dump (`lpm::mrt::parse`) must load or be refused, never panic,
//! bare and behind table-dump record headers (so the record parsers see them too);
//! every route loaded has a length its family allows and no bits past it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn record(kind: u16, sub: u16, body: &[u8]) -> Vec<u8> {
    let mut r = vec![0; 4];
    r.extend_from_slice(&kind.to_be_bytes());
    r.extend_from_slice(&sub.to_be_bytes());
    r.extend_from_slice(&(body.len() as u32).to_be_bytes());
    r.extend_from_slice(body);
    r
}

fn check(bytes: &[u8]) {
    if let Ok(t) = lpm::mrt::parse(bytes, "fuzz") {
        for &(a, l, _) in &t.v4 {
            assert!(l <= 32 && (l == 32 || a & (u32::MAX >> l) == 0), "{a:x}/{l}");
        }
        for &(a, l, _) in &t.v6 {
            assert!(l <= 128 && (l == 128 || a & (u128::MAX >> l) == 0), "{a:x}/{l}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some((&pick, body)) = data.split_first() {
        let (kind, sub) = match pick % 5 {
            0 => (13, 2),
            1 => (13, 4),
            2 => (13, 8),
            3 => (13, 10),
            _ => (12, u16::from(pick % 2) + 1),
        };
        check(&record(kind, sub, body));
    }
});
