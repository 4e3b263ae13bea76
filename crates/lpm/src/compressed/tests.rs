use super::*;
use crate::table;
use std::io::Write;

const TEXT: &[u8] = b"10.0.0.0/8 1\n10.1.0.0/16 2\n2001:db8::/32 3\n";

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn bzip2(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Writes `bytes` to a fresh file and loads it as a table.
fn load(bytes: &[u8]) -> Result<table::RouteTable, table::LoadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rib");
    std::fs::write(&path, bytes).unwrap();
    table::load(&path).map_err(|mut e| {
        // The temporary directory's name varies; keep the file's.
        e.origin = "rib".to_string();
        e
    })
}

#[test]
fn gzip_and_bzip2_files_load_as_their_contents() {
    let plain = table::parse(TEXT, "t").unwrap();
    assert_eq!(plain.v4, [(0x0a00_0000, 8, 1), (0x0a01_0000, 16, 2)]);
    assert_eq!(load(&gzip(TEXT)).unwrap(), plain);
    assert_eq!(load(&bzip2(TEXT)).unwrap(), plain);
    assert_eq!(load(TEXT).unwrap(), plain);
}

#[test]
fn concatenated_members_and_streams_are_all_read() {
    // `cat a.gz b.gz` and pbzip2's output: several members or streams in one file.
    let (a, b) = TEXT.split_at(13);
    let want = table::parse(TEXT, "t").unwrap();
    assert_eq!(load(&[gzip(a), gzip(b)].concat()).unwrap(), want);
    assert_eq!(load(&[bzip2(a), bzip2(b)].concat()).unwrap(), want);
}

#[test]
fn an_mrt_dump_inside_gzip_is_read_as_mrt() {
    // One TABLE_DUMP_V2 RIB_IPV4_UNICAST record: 192.0.2.0/24, one entry with ORIGIN
    // and NEXT_HOP 198.18.0.2.
    let mut body = vec![0, 0, 0, 1, 24, 192, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 11];
    body.extend_from_slice(&[0x40, 1, 1, 0, 0x40, 3, 4, 198, 18, 0, 2]);
    let mut rec = vec![0x65, 0x53, 0xf1, 0x00, 0, 13, 0, 2];
    rec.extend_from_slice(&(body.len() as u32).to_be_bytes());
    rec.extend_from_slice(&body);
    let t = load(&gzip(&rec)).unwrap();
    assert_eq!(t.v4, [(0xc000_0200, 24, 0)]);
}

#[test]
fn broken_compressed_files_say_which_format_failed() {
    let gz = gzip(TEXT);
    let err = load(&gz[..gz.len() - 10]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rib: gzip-compressed, but cannot decompress: the data ends early (truncated file?)"
    );
    let mut bz = bzip2(TEXT);
    let n = bz.len();
    bz[n / 2] ^= 0xff;
    let err = load(&bz).unwrap_err().to_string();
    assert!(
        err.starts_with("rib: bzip2-compressed, but cannot decompress: "),
        "{err}"
    );
    let bz = bzip2(TEXT);
    let err = load(&bz[..bz.len() / 2]).unwrap_err().to_string();
    assert!(
        err.starts_with("rib: bzip2-compressed, but cannot decompress: "),
        "{err}"
    );
}

#[test]
fn only_real_stream_headers_count_as_compressed() {
    // Text that starts like a bzip2 header, but without a block's magic after it, is
    // text (and here a bad line).
    let err = load(b"BZh9 is no route\n").unwrap_err();
    assert_eq!(err.line, Some(1), "{err}");
    assert!(!err.reason.contains("compress"), "{}", err.reason);
    // An empty bzip2 stream is an empty table.
    assert_eq!(load(&bzip2(b"")).unwrap(), table::RouteTable::default());
    assert_eq!(decompress(b"BZh9".to_vec()).unwrap(), b"BZh9");
    assert!(is_bzip2(&bzip2(b"x")));
}

#[test]
fn zero_padding_after_the_data_is_ignored_and_other_trailing_bytes_are_refused() {
    let want = table::parse(TEXT, "t").unwrap();
    for (name, packed) in [("gzip", gzip(TEXT)), ("bzip2", bzip2(TEXT))] {
        // Zeros, as a block device pads a file: gunzip ignores them silently.
        let padded = [packed.clone(), vec![0; 100]].concat();
        assert_eq!(load(&padded).unwrap(), want, "{name}");
        // Other bytes: not taken for truncation, and not ignored.
        let trailing = [packed.clone(), b"garbage\n".to_vec()].concat();
        assert_eq!(
            load(&trailing).unwrap_err().to_string(),
            format!(
                "rib: {name}-compressed, but the 8 bytes from byte {} on, after the compressed data, are not {name} data",
                packed.len()
            )
        );
    }
}

#[test]
fn data_that_decompresses_past_the_limit_is_refused_without_taking_it_all() {
    // 300 MiB of zeros: about 0.3 MB as gzip, so past 100 times its size and 256 MiB.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let block = vec![0u8; 1 << 20];
    for _ in 0..300 {
        e.write_all(&block).unwrap();
    }
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 2 << 20, "{}", bomb.len());
    let err = decompress(bomb).unwrap_err();
    assert_eq!(
        err,
        format!("gzip-compressed, and it decompresses to more than {MIN_LIMIT} bytes (100 times its size): refused")
    );
}

#[test]
fn errors_quote_at_most_64_bytes_of_a_field() {
    let long = format!("10.0.0.0/8{}\n", "x".repeat(100_000));
    let err = table::parse(long.as_bytes(), "t").unwrap_err().to_string();
    assert_eq!(
        err,
        format!("t:1: missing next hop after 10.0.0.0/8{}…", "x".repeat(54))
    );
    let err = table::parse(
        b"10.0.0.0/8 99999999999999999999999999999999999999999999999999999999999999999999999\n",
        "t",
    )
    .unwrap_err()
    .to_string();
    assert!(err.len() < 150, "{err}");
}
