//! RFC 1071's sum of 16-bit words, written out plainly for the fuzz targets that check
//! checksums (independent of the code under test). Include with `#[path]`.

/// The folded one's-complement sum of `data` added to `acc`.
pub fn ones(data: &[u8], mut acc: u64) -> u16 {
    for c in data.chunks(2) {
        acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}
