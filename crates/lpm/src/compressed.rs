//! Compressed table files: route tables and MRT dumps are published gzip- or
//! bzip2-compressed (RIPE RIS `.gz`, RouteViews `.bz2`), so a file that starts with
//! either format's magic is decompressed before it is parsed. Only for files the user
//! names (`table::load`): the in-memory parsers and their fuzz targets see plain bytes.

use std::io::Read;

/// gzip's two magic bytes (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// bzip2's stream header: `BZh` and the block size, `1` to `9`; then a block's magic
/// (the digits of pi) or, for empty input, the end-of-stream magic (of sqrt(pi)).
fn is_bzip2(b: &[u8]) -> bool {
    const BLOCK: [u8; 6] = [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
    const END: [u8; 6] = [0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
    b.len() >= 10
        && b.starts_with(b"BZh")
        && (b'1'..=b'9').contains(&b[3])
        && (b[4..10] == BLOCK || b[4..10] == END)
}

/// Decompressed data a file may give, at least: a RIB dump with many peers grows
/// several times, a table file of 1M routes is about 25 MB.
const MIN_LIMIT: u64 = 256 << 20;

/// Decompressed bytes a compressed file may give per byte of its own beyond
/// [`MIN_LIMIT`]: tables and dumps compress about 4-10 times; a file of runs of one
/// byte (a decompression bomb) up to about 1,000 times (deflate) or far more (bzip2).
const MAX_RATIO: u64 = 100;

/// The file's bytes, decompressed if they are gzip or bzip2 data (every member or
/// stream of a concatenated file, as `gunzip`/`bunzip2` read them; zero bytes after
/// the last, padding, are ignored as `gunzip` ignores them); otherwise as given. The
/// error says which format failed and why, or where bytes that are not the format's
/// follow the compressed data. Data that would decompress to more than [`MAX_RATIO`]
/// times the file's size (and over [`MIN_LIMIT`]) is refused once that much has been
/// read, so a small file cannot take the machine's memory.
pub(crate) fn decompress(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let gzip = bytes.starts_with(&GZIP_MAGIC);
    if !gzip && !is_bzip2(&bytes) {
        return Ok(bytes);
    }
    let format = if gzip { "gzip" } else { "bzip2" };
    let fail = |e: std::io::Error| {
        let why = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "the data ends early (truncated file?)".to_string(),
            _ => e.to_string(),
        };
        format!("{format}-compressed, but cannot decompress: {why}")
    };
    let limit = MIN_LIMIT.max(MAX_RATIO.saturating_mul(bytes.len() as u64));
    let mut out = Vec::new();
    let mut rest: &[u8] = &bytes;
    // One member (gzip) or stream (bzip2) at a time: the decoders stop at its end and
    // give back the bytes after it.
    loop {
        let before = rest.len();
        // Up to one byte past the limit, so that reaching it is told from ending on it.
        let room = (limit + 1).saturating_sub(out.len() as u64);
        rest = if gzip {
            let mut d = flate2::bufread::GzDecoder::new(rest);
            (&mut d).take(room).read_to_end(&mut out).map_err(fail)?;
            d.into_inner()
        } else {
            let mut d = bzip2::bufread::BzDecoder::new(rest);
            (&mut d).take(room).read_to_end(&mut out).map_err(fail)?;
            d.into_inner()
        };
        if out.len() as u64 > limit {
            return Err(format!(
                "{format}-compressed, and it decompresses to more than {limit} bytes ({MAX_RATIO} times its size): refused"
            ));
        }
        let next = if gzip {
            rest.starts_with(&GZIP_MAGIC)
        } else {
            is_bzip2(rest)
        };
        if rest.len() == before || !next {
            break;
        }
    }
    if rest.iter().any(|&b| b != 0) {
        return Err(format!(
            "{format}-compressed, but the {} bytes from byte {} on, after the compressed data, are not {format} data",
            rest.len(),
            bytes.len() - rest.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
