use super::arp_frame;
use crate::elements::arp::ARPResponderClass;
use crate::testing::{build_error, Harness};
use packet::Packet;

const ASKER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x09];
const ETH_A: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
const ETH_B: [u8; 6] = [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f];

const CONFIG: &str = "10.0.0.1 10.0.1.0/24 00:11:22:33:44:55, 10.0.0.0/8 0a:0b:0c:0d:0e:0f";

fn request(tpa: [u8; 4]) -> Vec<u8> {
    arp_frame([0xff; 6], ASKER, 1, ASKER, [10, 0, 0, 9], [0; 6], tpa)
}

fn data(ps: &[Packet]) -> Vec<Vec<u8>> {
    ps.iter().map(|p| p.data().to_vec()).collect()
}

#[test]
fn a_matching_request_gets_the_exact_reply_with_the_requests_annotations() {
    let mut h = Harness::new(&ARPResponderClass, CONFIG, 1, 2);
    // Padded to Ethernet's 60 bytes, as requests arrive.
    let mut req = request([10, 0, 1, 77]);
    req.resize(60, 0xee);
    let mut p = Packet::from_slice(&req);
    p.set_user_anno(packet::anno::VLAN_TCI_ANNO_OFFSET, &[0x12, 0x34]);
    p.anno_mut().input_port = 3;
    let out = h.push(0, vec![p]);
    assert!(out[1].is_empty());
    #[rustfmt::skip]
    let want: [u8; 42] = [
        0x02, 0, 0, 0, 0, 0x09,             0x00, 0x11, 0x22, 0x33, 0x44, 0x55,  0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 6, 4,  0x00, 0x02,
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 10, 0, 1, 77,
        0x02, 0, 0, 0, 0, 0x09,             10, 0, 0, 9,
    ];
    assert_eq!(data(&out[0]), vec![want.to_vec()]);
    let r = &out[0][0];
    assert_eq!(r.anno().user[20..22], [0x12, 0x34]);
    assert_eq!(r.anno().input_port, 3);
    assert_eq!(r.mac_header_offset(), Some(0));
    assert_eq!(r.network_header_offset(), Some(14));
}

#[test]
fn the_most_specific_prefix_answers() {
    let mut h = Harness::new(&ARPResponderClass, CONFIG, 1, 2);
    // 10.0.0.1 is in both 10.0.0.1/32 and 10/8; 10.2.3.4 only in 10/8.
    for (tpa, eth) in [
        ([10, 0, 0, 1], ETH_A),
        ([10, 0, 1, 1], ETH_A),
        ([10, 2, 3, 4], ETH_B),
    ] {
        let out = h.push_bytes(0, &request(tpa));
        let want = arp_frame(ASKER, eth, 2, eth, tpa, ASKER, [10, 0, 0, 9]);
        assert_eq!(data(&out[0]), vec![want], "{:?}", tpa);
    }
}

#[test]
fn other_frames_leave_on_output_1_unchanged() {
    let mut h = Harness::new(&ARPResponderClass, CONFIG, 1, 2);
    let mut wrong_htype = request([10, 0, 0, 1]);
    wrong_htype[15] = 6;
    let mut wrong_ptype = request([10, 0, 0, 1]);
    wrong_ptype[16] = 0x86;
    let mut wrong_lengths = request([10, 0, 0, 1]);
    wrong_lengths[18] = 8;
    let mut not_arp = request([10, 0, 0, 1]);
    not_arp[12..14].copy_from_slice(&[0x08, 0x00]);
    let others = vec![
        request([11, 0, 0, 1]),                                                 // no entry
        arp_frame(ASKER, ASKER, 2, ASKER, [10, 0, 0, 9], ASKER, [10, 0, 0, 1]), // a reply
        request([10, 0, 0, 1])[..41].to_vec(),                                  // short
        wrong_htype,
        wrong_ptype,
        wrong_lengths,
        not_arp,
        vec![],
    ];
    let out = h.push(0, others.iter().map(|b| Packet::from_slice(b)).collect());
    assert!(out[0].is_empty());
    assert_eq!(data(&out[1]), others);
    assert_eq!(h.read("drops"), "0");
}

#[test]
fn with_one_output_other_frames_are_counted_and_dropped() {
    let mut h = Harness::new(&ARPResponderClass, CONFIG, 1, 1);
    let out = h.push(
        0,
        vec![
            Packet::from_slice(&request([11, 0, 0, 1])),
            Packet::from_slice(&request([10, 0, 0, 1])),
            Packet::from_slice(&[1, 2, 3]),
        ],
    );
    assert_eq!(out[0].len(), 1);
    assert_eq!(out[0][0].data()[20..22], [0, 2]);
    assert_eq!(h.read("drops"), "2");
}

#[test]
fn handlers_show_and_change_the_table_for_every_worker() {
    let h = Harness::new(&ARPResponderClass, CONFIG, 1, 2);
    let mut other = h.another_worker();
    assert_eq!(
        h.read("table"),
        "10.0.0.1/32 00-11-22-33-44-55\n10.0.1.0/24 00-11-22-33-44-55\n10.0.0.0/8 0A-0B-0C-0D-0E-0F\n"
    );
    let lookup = |a: &str| h.spec.read_handler_with("lookup", a).unwrap();
    assert_eq!(lookup("10.0.1.9"), Ok("00-11-22-33-44-55".to_string()));
    assert_eq!(lookup("10.9.9.9"), Ok("0A-0B-0C-0D-0E-0F".to_string()));
    assert_eq!(lookup("11.0.0.1"), Err("no entry for 11.0.0.1".to_string()));
    assert_eq!(lookup("x"), Err("lookup expects IP address".to_string()));

    h.write("add", "11.0.0.0/255.255.0.0 12.0.0.1 2:2:2:2:2:2")
        .unwrap();
    h.write("remove", "10.0.1.0/24").unwrap();
    assert_eq!(
        h.read("table"),
        "10.0.0.1/32 00-11-22-33-44-55\n12.0.0.1/32 02-02-02-02-02-02\n11.0.0.0/16 02-02-02-02-02-02\n10.0.0.0/8 0A-0B-0C-0D-0E-0F\n"
    );
    // The other worker's instance answers from the new table.
    let out = other.push_bytes(0, &request([11, 0, 7, 7]));
    assert_eq!(out[0][0].data()[6..12], [2; 6]);
    let out = other.push_bytes(0, &request([10, 0, 1, 7]));
    assert_eq!(out[0][0].data()[6..12], ETH_B);

    assert_eq!(
        h.write("remove", "10.0.1.0/24"),
        Err("no entry for 10.0.1.0/24".to_string())
    );
    assert_eq!(
        h.write("add", "1.2.3.4"),
        Err(
            "expected 'IP/MASK [IP/MASK...] ETH', not '1.2.3.4' (or an AddressInfo name of both)".to_string()
        )
    );
    assert_eq!(
        h.write("add", "1.2.3.4 zz"),
        Err("'zz' is not an Ethernet address".to_string())
    );
    assert_eq!(
        h.write("remove", "nope"),
        Err("'nope' is not an IP address or prefix".to_string())
    );
}

#[test]
fn configuration_errors_name_the_bad_word() {
    let err = |c: &str| build_error(&ARPResponderClass, c, 1, 1);
    assert_eq!(
        err("10.0.0.1 bogus"),
        "e :: ARPResponder: 'bogus' is not an Ethernet address"
    );
    assert_eq!(
        err("10.0.0.300 0:1:2:3:4:5"),
        "e :: ARPResponder: '10.0.0.300' is not an IP address or prefix"
    );
    assert_eq!(
        err("0:1:2:3:4:5"),
        "e :: ARPResponder: '0:1:2:3:4:5' has no IP address or prefix before it"
    );
    assert_eq!(
        err("myhost"),
        "e :: ARPResponder: expected 'IP/MASK [IP/MASK...] ETH', not 'myhost' (or an AddressInfo name of both)"
    );
}
