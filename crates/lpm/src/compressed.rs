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

/// The file's bytes, decompressed if they are gzip or bzip2 data (every member or
/// stream of a concatenated file, as `gunzip`/`bunzip2` read them); otherwise as given.
/// The error says which format failed and why.
pub(crate) fn decompress(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let (format, mut reader): (&str, Box<dyn Read + '_>) = if bytes.starts_with(&GZIP_MAGIC) {
        ("gzip", Box::new(flate2::read::MultiGzDecoder::new(&bytes[..])))
    } else if is_bzip2(&bytes) {
        ("bzip2", Box::new(bzip2::read::MultiBzDecoder::new(&bytes[..])))
    } else {
        return Ok(bytes);
    };
    let mut out = Vec::new();
    reader.read_to_end(&mut out).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "the data ends early (truncated file?)".to_string(),
            _ => e.to_string(),
        };
        format!("{format}-compressed, but cannot decompress: {why}")
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests;
