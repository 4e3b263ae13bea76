//! ESP packets are untrusted bytes, before and after decryption: ESPDecap takes any
//! frame without panicking, also ones that authenticate (the fuzzer's bytes sealed with
//! the association's key here, so the decrypted trailer and inner packet are its
//! choice too); and what ESPEncap accepts, ESPDecap gives back byte for byte.
#![no_main]

use graph::registry::Registry;
use graph::testing::Harness;
use libfuzzer_sys::fuzz_target;
use packet::Packet;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};

const KEY: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const SALT: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];
const CONFIG: &str = "0x1000, 0x000102030405060708090a0b0c0d0e0fdeadbeef";

/// An IPv4 ESP packet of SPI 0x1000 and sequence number `seq` whose sealed part
/// (inner packet, padding, pad length, next header) is `plain`, whatever it holds.
fn sealed(plain: &[u8], seq: u32) -> Vec<u8> {
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &KEY).unwrap());
    let iv = u64::from(seq).to_be_bytes();
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(&SALT);
    nonce[4..].copy_from_slice(&iv);
    let mut aad = [0u8; 8];
    aad[..4].copy_from_slice(&0x1000u32.to_be_bytes());
    aad[4..].copy_from_slice(&seq.to_be_bytes());
    let mut body = plain.to_vec();
    let tag = key
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut body)
        .unwrap();
    let total = (20 + 16 + body.len() + 16).min(65535) as u16;
    let mut p = vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0, 0, 64, 50, 0, 0];
    p.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2]);
    p.extend_from_slice(&0x1000u32.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&iv);
    p.extend_from_slice(&body);
    p.extend_from_slice(tag.as_ref());
    p
}

fuzz_target!(|data: &[u8]| {
    let reg = Registry::with_library();
    let decap = reg.get("ESPDecap").unwrap();
    let encap = reg.get("ESPEncap").unwrap();
    let mut d = Harness::new(decap.as_ref(), CONFIG, 1, 2);
    let _ = d.push_bytes(0, data);
    let _ = d.push_bytes(0, &sealed(data, 1));
    let mut d = Harness::new(decap.as_ref(), &format!("{CONFIG}, ESN true, REPLAY 1"), 1, 1);
    let _ = d.push_bytes(0, &sealed(data, 2));

    let mut e = Harness::new(encap.as_ref(), &format!("{CONFIG}, 192.0.2.1, 192.0.2.2"), 1, 1);
    let out = e.push_bytes(0, data);
    if let Some(p) = out[0].first() {
        let mut d = Harness::new(decap.as_ref(), CONFIG, 1, 2);
        let back = d.push(0, vec![Packet::from_slice(p.data())]);
        assert_eq!(back[0].len(), 1, "an encapsulated packet did not come back");
        assert_eq!(back[0][0].data(), data);
    }
});
