//! `brickroute run` end to end: configurations, errors, handlers, output captures.

mod common;
use common::*;

const SAMPLE: &str = "conf/samples/router-sample.pcap";

#[test]
fn syntax_error_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.click");
    std::fs::write(
        &f,
        "// a comment\nsrc :: InfiniteSource(LIMIT 1)\n  -> -> Discard;\n",
    )
    .unwrap();
    let o = brickroute(&["run", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let want = format!("{}:3:", f.display());
    assert!(err.starts_with(&want), "stderr: {}", err);
    assert!(err.contains("syntax error"), "stderr: {}", err);
    assert!(err.contains("  -> -> Discard;"), "the line is quoted: {}", err);
}

#[test]
fn unknown_class_suggests_the_nearest_names() {
    let o = brickroute(&["run", "-e", "InfiniteSource(LIMIT 1) -> Countr -> Discard"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with("<expr>:1:28: error: undeclared element 'Countr'"),
        "stderr: {}",
        err
    );
    assert!(err.contains("did you mean 'Counter'"), "stderr: {}", err);
}

#[test]
fn bad_argument_and_bad_port_fail_with_a_location() {
    let o = brickroute(&["run", "-e", "InfiniteSource(LIMIT x) -> Discard"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("<expr>:1:1: error: "),
        "stderr: {}",
        stderr(&o)
    );

    let o = brickroute(&["run", "-e", "s :: InfiniteSource(LIMIT 1) -> [1] d :: Discard"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("'d :: Discard' has no input 1"),
        "stderr: {}",
        stderr(&o)
    );

    // As in Click, the output count comes from the connections: one connected output
    // for two patterns is a configuration error of the Classifier.
    let o = brickroute(&[
        "run",
        "-e",
        "s :: InfiniteSource(LIMIT 1) -> c :: Classifier(12/0800, -) -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("need 1 arguments, one per output port"),
        "stderr: {}",
        stderr(&o)
    );

    let o = brickroute(&[
        "run",
        "-e",
        "s :: InfiniteSource(LIMIT 1) -> c :: Classifier(12/0800, -); c[1] -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("'c :: Classifier' output 0 unused"),
        "stderr: {}",
        stderr(&o)
    );

    // Every unused port, as Click reports them, then the verdict.
    let o = brickroute(&["run", "-q", "-e", "p :: Print; Idle -> q :: Print"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let errors = error_messages(&err);
    assert_eq!(
        errors,
        [
            "'p :: Print' input 0 unused",
            "'p :: Print' output 0 unused",
            "'q :: Print' output 0 unused"
        ]
    );
    assert!(err.ends_with("Router could not be initialized!\n"), "{err}");
}

#[test]
fn every_element_that_fails_to_configure_is_reported_with_its_place() {
    // Three bad elements, one good one between them and one after: each bad one gets
    // its own error, in order, with its line and column, then Click's verdict.
    let config = "a :: Counter(FOO 1);\nb :: Counter;\nc :: CheckIPHeader(BOGUS 3);\n\
                  d :: RadixIPLookup(10.0.0.0/8 0, garbage);\nIdle -> a -> b -> c -> d -> Discard;";
    let o = brickroute(&["run", "-q", "-e", config]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error: ")).collect();
    assert_eq!(
        errors,
        [
            "<expr>:1:1: error: a :: Counter: bad keyword 'FOO'",
            "<expr>:3:1: error: c :: CheckIPHeader: bad keyword 'BOGUS'",
            "<expr>:4:1: error: d :: RadixIPLookup: argument 2 should be 'ADDR/MASK [GATEWAY] OUTPUT'",
        ],
        "{err}"
    );
    assert!(err.ends_with("Router could not be initialized!\n"), "{err}");

    // Unknown classes and bad connections are each listed too.
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        "f :: Fooo; b :: Barr; Idle -> f -> b -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let errors = error_messages(&err);
    assert_eq!(
        errors,
        ["unknown element class 'Fooo'", "unknown element class 'Barr'"],
        "{err}"
    );
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        "i :: Counter; Idle -> i -> Discard; i[1] -> Discard; i[2] -> Discard",
    ]);
    let err = stderr(&o);
    let errors = error_messages(&err);
    assert_eq!(
        errors,
        ["'i :: Counter' has no output 1", "'i :: Counter' has no output 2"],
        "{err}"
    );
}

#[test]
fn missing_and_corrupt_captures_are_clear_errors() {
    let o = brickroute(&["run", "-e", "FromDump(/nonexistent/x.pcap) -> Discard"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("/nonexistent/x.pcap") && err.contains("No such file"),
        "stderr: {}",
        err
    );

    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("junk.pcap");
    std::fs::write(&f, b"this is not a capture file at all").unwrap();
    let o = brickroute(&["run", "-e", &format!("FromDump({}) -> Discard", f.display())]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a tcpdump file"),
        "stderr: {}",
        stderr(&o)
    );
}

/// The frame the sample's first record holds, after Strip(14) -> CheckIPHeader ->
/// DecIPTTL -> Unstrip(14): written out by hand.
fn first_frame_after_ttl_decrement() -> Vec<u8> {
    let mut ip = vec![
        0x45, 0x00, 0x00, 0x27, // version/IHL, TOS, total length 39
        0x00, 0x01, 0x00, 0x00, // ID 1, no flags
        63, 17, 0x00, 0x00, // TTL 63 (was 64), UDP, checksum below
        10, 0, 0, 2, // source
        198, 18, 1, 10, // destination
    ];
    let c = inet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut udp = vec![0x04, 0x00, 0x00, 0x09, 0x00, 0x13, 0x00, 0x00];
    udp.extend_from_slice(b"hello net A");
    // UDP checksum over the pseudo-header (unchanged by the TTL decrement).
    let mut pseudo = vec![10, 0, 0, 2, 198, 18, 1, 10, 0, 17, 0, 0x13];
    pseudo.extend_from_slice(&udp);
    let uc = inet_checksum(&pseudo);
    udp[6..8].copy_from_slice(&uc.to_be_bytes());
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    // Ethernet padding beyond the IP length is removed by CheckIPHeader.
    f
}

const PIPELINE: &str = "FromDump($IN, STOP true) -> c0 :: Classifier(12/0800, -) [0] -> Strip(14) \
     -> ch :: CheckIPHeader -> DecIPTTL -> Unstrip(14) -> c :: Counter -> ToDump($OUT); \
     c0[1] -> arp :: Discard; ch[1] -> bad :: Discard";

#[test]
fn pipeline_output_and_handlers_match_click() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    let o = brickroute(&[
        "run",
        "-e",
        PIPELINE,
        &format!("IN={}", SAMPLE),
        &format!("OUT={}", out.display()),
        "-h",
        "c.count",
        "-h",
        "bad.count",
        "-h",
        "arp.count",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    // Several handlers: each printed as NAME:, value, blank line (Click's driver).
    assert_eq!(stdout(&o), "c.count:\n10\n\nbad.count:\n3\n\narp.count:\n1\n\n");
    let (linktype, recs) = read_pcap(&out);
    assert_eq!(linktype, 1, "Ethernet");
    assert_eq!(recs.len(), 10);
    assert_eq!(recs[0].data, first_frame_after_ttl_decrement());
    // Timestamps come from the input capture (record i at 1700000000 + i s, 1000*i us).
    assert_eq!((recs[0].sec, recs[0].usec), (1_700_000_000, 0));
    assert_eq!((recs[1].sec, recs[1].usec), (1_700_000_001, 1000));

    // A single handler prints just its value, as Click does.
    let o = brickroute(&[
        "run",
        "-e",
        PIPELINE,
        &format!("IN={}", SAMPLE),
        "OUT=/dev/null",
        "-h",
        "c.count",
    ]);
    assert_eq!(stdout(&o), "10\n");
}

#[test]
fn two_workers_give_the_same_packets_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let out = dir.path().join(format!("out{}.pcap", threads));
        let o = brickroute(&[
            "run",
            "--threads",
            threads,
            "-e",
            PIPELINE,
            &format!("IN={}", SAMPLE),
            &format!("OUT={}", out.display()),
            "-h",
            "c.count",
        ]);
        assert!(o.status.success(), "stderr: {}", stderr(&o));
        assert_eq!(stdout(&o), "10\n");
        outputs.push(read_pcap(&out).1);
    }
    assert_eq!(outputs[0], outputs[1]);
}

/// ToDump to standard output: the file header once the configuration is the
/// router's, then a record a packet (also with `-q`, which runs nothing).
#[test]
fn a_capture_to_standard_output_starts_with_its_header() {
    let config = "InfiniteSource(DATA \\<0102>, LIMIT 2, STOP true) -> ToDump(-, ENCAP IP)";
    // Magic, version 2.4, zone, sigfigs, SNAPLEN 2000, raw IP (101).
    let mut header = 0xA1B2_C3D4u32.to_ne_bytes().to_vec();
    header.extend_from_slice(&2u16.to_ne_bytes());
    header.extend_from_slice(&4u16.to_ne_bytes());
    for w in [0u32, 0, 2000, 101] {
        header.extend_from_slice(&w.to_ne_bytes());
    }
    let o = brickroute(&["run", "-q", "-e", config]);
    assert!(o.status.success());
    assert_eq!(o.stdout, header);
    let o = brickroute(&["run", "-e", config]);
    assert!(o.status.success());
    let out = &o.stdout;
    assert_eq!(out.len(), 24 + 2 * (16 + 2), "{out:?}");
    assert_eq!(&out[..24], &header[..]);
    for record in out[24..].chunks(18) {
        // caplen and len 2, then the bytes.
        assert_eq!(
            &record[8..16],
            &[2u32.to_ne_bytes(), 2u32.to_ne_bytes()].concat()[..]
        );
        assert_eq!(&record[16..], &[1, 2]);
    }
}

#[test]
fn quit_option_configures_without_running() {
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        "s :: InfiniteSource(LIMIT 5, STOP true) -> c :: Counter -> Discard",
        "-h",
        "c.count",
    ]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "0\n");
    let o = brickroute(&[
        "run",
        "-e",
        "s :: InfiniteSource(LIMIT 5, STOP true) -> c :: Counter -> Discard",
        "-h",
        "c.count",
    ]);
    assert_eq!(stdout(&o), "5\n");
}

#[test]
fn handler_errors_use_click_wording() {
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        "s :: InfiniteSource -> d :: Discard",
        "-h",
        "d.nothing",
        "-h",
        "x.count",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("no 'd.nothing' handler"), "stderr: {}", err);
    assert!(err.contains("no element 'x'"), "stderr: {}", err);
}

#[test]
fn missing_configuration_file_is_a_clear_error() {
    let o = brickroute(&["run", "/nonexistent/router.click"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("/nonexistent/router.click: No such file or directory\n"),
        "stderr: {}",
        stderr(&o)
    );
}

#[test]
fn configuration_from_standard_input_and_definitions() {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args(["run", "--no-summary", "-h", "c.count", "N=4"])
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"InfiniteSource(LIMIT $N, STOP true) -> c :: Counter -> Discard")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert_eq!(stdout(&o), "4\n");
}

#[test]
fn route_lookup_is_a_read_handler_with_a_parameter() {
    let cfg = "s :: InfiniteSource(LIMIT 0) -> rt :: RadixIPLookup(10.0.0.0/8 0, 10.1.0.0/16 10.1.0.1 1) \
               -> Discard; rt[1] -> Discard";
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        cfg,
        "-h",
        "rt.lookup 10.1.2.3",
        "-h",
        "rt.lookup 10.9.9.9",
        "-h",
        "rt.lookup 8.8.8.8",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "rt.lookup 10.1.2.3:\n1 10.1.0.1\n\nrt.lookup 10.9.9.9:\n0\n\nrt.lookup 8.8.8.8:\n-1\n\n"
    );
    let o = brickroute(&["run", "-q", "-e", cfg, "-h", "rt.lookup bogus"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("expected IP address, not 'bogus'"),
        "stderr: {}",
        stderr(&o)
    );
}

#[test]
fn sigint_stops_the_router_and_handlers_are_still_read() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_brickroute"))
        .args([
            "run",
            "-e",
            "InfiniteSource(BURST 32) -> c :: Counter -> Discard",
            "-h",
            "c.count",
        ])
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ok = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    // The router must stop on its own; give it ten seconds before failing.
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            panic!("brickroute did not stop on SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    let count: u64 = stdout(&o).trim().parse().expect("a count");
    assert!(count > 0);
    assert!(stderr(&o).contains("(interrupted)"), "stderr: {}", stderr(&o));
}

#[test]
fn the_summary_says_where_each_workers_cycles_went() {
    let o = brickroute(&[
        "run",
        "--threads",
        "2",
        "--idle-spin-us",
        "0",
        "-e",
        "InfiniteSource(LIMIT 100, STOP true) -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("brickroute: 2 workers, 100 packets from sources"),
        "stderr: {}",
        err
    );
    // The source runs on one worker; both workers report.
    for w in ["brickroute: worker 0", "brickroute: worker 1"] {
        assert!(err.contains(w), "stderr: {}", err);
    }
    assert!(err.contains("cycles a packet when busy"), "stderr: {}", err);
    assert!(
        err.contains("% of its polling cycles in empty polls"),
        "stderr: {}",
        err
    );

    let o = brickroute(&[
        "run",
        "--idle-spin-us",
        "x",
        "-e",
        "InfiniteSource(LIMIT 1) -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--idle-spin-us"), "stderr: {}", stderr(&o));
}

/// An Ethernet frame carrying an IPv6/UDP packet to `dst` with hop limit `hlim` and 8
/// bytes of payload (the UDP checksum is not checked by the elements under test), and
/// `pad` bytes of Ethernet padding after it.
fn ip6_frame(dst: [u8; 16], hlim: u8, pad: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x86, 0xdd];
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 16, 17, hlim]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99]);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x04, 0x00, 0x00, 0x09, 0x00, 0x10, 0x00, 0x00]);
    f.extend_from_slice(b"ipv6 pkt");
    f.extend_from_slice(&vec![0; pad]);
    f
}

#[test]
fn ipv6_packets_are_checked_routed_and_their_hop_limit_decremented() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out0, out1, errs) = (
        dir.path().join("in.pcap"),
        dir.path().join("out0.pcap"),
        dir.path().join("out1.pcap"),
        dir.path().join("errors.pcap"),
    );
    let net1 = |last: u8| [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, last];
    let net2 = |last: u8| [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 7, 0, 0, 0, 0, 0, 0, 0, last];
    let elsewhere = [0x26, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let mut bad_version = ip6_frame(net1(4), 64, 0);
    bad_version[14] = 0x45;
    write_pcap(
        &input,
        &[
            ip6_frame(net1(1), 64, 0),
            // Ethernet padding, which CheckIP6Header trims.
            ip6_frame(net2(2), 64, 6),
            ip6_frame(elsewhere, 64, 0),
            ip6_frame(net1(3), 1, 0),
            bad_version,
            ip6_frame(net1(5), 255, 0),
        ],
    );
    let cfg = "FromDump($IN, STOP true) -> Classifier(12/86dd) -> Strip(14) -> ch :: CheckIP6Header \
               -> GetIP6Address(24) \
               -> rt :: LookupIP6Route(2001:db8:1::/48 0, 2001:db8:2::/48 2001:db8::2 1); \
               rt[0] -> dh0 :: DecIP6HLIM -> Unstrip(14) -> c0 :: Counter -> ToDump($OUT0); \
               rt[1] -> dh1 :: DecIP6HLIM -> Unstrip(14) -> c1 :: Counter -> ToDump($OUT1); \
               dh0[1] -> expired :: Counter -> ICMP6Error(2001:db8::fe, 3, 0) \
               -> EtherEncap(0x86dd, 2:0:0:0:1:1, 2:0:0:0:1:2) -> ToDump($ERR); \
               ch[1] -> bad :: Counter -> Discard";
    let o = brickroute(&[
        "run",
        "-e",
        cfg,
        &format!("IN={}", input.display()),
        &format!("OUT0={}", out0.display()),
        &format!("OUT1={}", out1.display()),
        &format!("ERR={}", errs.display()),
        "-h",
        "c0.count",
        "-h",
        "c1.count",
        "-h",
        "expired.count",
        "-h",
        "bad.count",
        "-h",
        "rt.table",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    // The packet to 2600::1 has no route and is dropped.
    assert_eq!(
        stdout(&o),
        "c0.count:\n2\n\nc1.count:\n1\n\nexpired.count:\n1\n\nbad.count:\n1\n\n\
         rt.table:\n# Active routes\n2001:db8:1::/48\t::\t0\n2001:db8:2::/48\t2001:db8::2\t1\n\n"
    );
    assert!(
        stderr(&o).contains("IP6 header check failed"),
        "stderr: {}",
        stderr(&o)
    );
    // The frames leave with their hop limit one lower (the gateway only changes the
    // annotation) and without the padding.
    let (_, recs) = read_pcap(&out0);
    let got: Vec<Vec<u8>> = recs.into_iter().map(|r| r.data).collect();
    assert_eq!(got, vec![ip6_frame(net1(1), 63, 0), ip6_frame(net1(5), 254, 0)]);
    let (_, recs) = read_pcap(&out1);
    let got: Vec<Vec<u8>> = recs.into_iter().map(|r| r.data).collect();
    assert_eq!(got, vec![ip6_frame(net2(2), 63, 0)]);
    // The packet whose hop limit ran out is answered with an ICMPv6 time exceeded
    // (RFC 4443 3.3) to its source, quoting it from its IPv6 header.
    let quote = ip6_frame(net1(3), 1, 0)[14..].to_vec();
    let router = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe];
    let sender = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99];
    let mut icmp = vec![3, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&quote);
    let mut pseudo = router.to_vec();
    pseudo.extend_from_slice(&sender);
    pseudo.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(&icmp);
    let c = inet_checksum(&pseudo);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut want = vec![2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1, 0x86, 0xdd];
    want.extend_from_slice(&[0x60, 0, 0, 0, 0, icmp.len() as u8, 58, 255]);
    want.extend_from_slice(&router);
    want.extend_from_slice(&sender);
    want.extend_from_slice(&icmp);
    let (_, recs) = read_pcap(&errs);
    let got: Vec<Vec<u8>> = recs.into_iter().map(|r| r.data).collect();
    assert_eq!(got, vec![want]);
}

#[test]
fn a_file_and_an_expression_are_one_configuration_too_many() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("r.click");
    std::fs::write(&f, "InfiniteSource -> Discard;\n").unwrap();
    let f = f.to_str().unwrap();
    for args in [
        vec!["run", "-q", "-f", f, "-e", "InfiniteSource -> Discard"],
        vec!["run", "-q", "-e", "InfiniteSource -> Discard", "-f", f],
        vec!["run", "-q", f, "-e", "InfiniteSource -> Discard"],
        vec![
            "run",
            "-q",
            "-f",
            "/nonexistent/r.click",
            "-e",
            "InfiniteSource -> Discard",
        ],
    ] {
        let o = brickroute(&args);
        assert_eq!(o.status.code(), Some(1), "{:?}", args);
        assert_eq!(
            stderr(&o),
            "router configuration specified twice\nRouter could not be initialized!\n",
            "{:?}",
            args
        );
    }
}

#[test]
fn bytes_that_are_not_utf8_may_be_in_comments_and_are_located_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("latin1.click");
    std::fs::write(
        &f,
        b"// caf\xe9\nInfiniteSource(LIMIT 2, STOP true) /* \xff */ -> c :: Counter -> Discard;\n",
    )
    .unwrap();
    let o = brickroute(&["run", "--no-summary", f.to_str().unwrap(), "-h", "c.count"]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "2\n");

    std::fs::write(
        &f,
        b"InfiniteSource -> Discard;\nPrint(\"caf\xe9\") -> Discard;\n",
    )
    .unwrap();
    let o = brickroute(&["run", "-q", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let want = format!(
        "{}:2:11: error: byte 0xE9 is not UTF-8 (configurations are read as UTF-8; other bytes may appear only in comments)\n",
        f.display()
    );
    assert!(stderr(&o).starts_with(&want), "stderr: {}", stderr(&o));
}

#[test]
fn string_escapes_decode_as_in_click() {
    let o = brickroute(&[
        "run",
        "--no-summary",
        "-e",
        r#"InfiniteSource(DATA "x", LIMIT 1, STOP true) -> Print("a\012b\x41\<43>") -> Discard"#,
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(stderr(&o), "a\nbAC:    1 | 78\n");

    let o = brickroute(&["run", "-q", "-e", r#"InfiniteSource -> Print("\377") -> Discard"#]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "LABEL expects string: its escapes make byte 0xFF (byte 1 of the value), which is not UTF-8 text"
        ),
        "stderr: {}",
        stderr(&o)
    );
}

#[test]
fn ip_addresses_may_have_leading_zeros() {
    // An IPv4 header (checksum not checked by CheckIPHeader2) to 10.0.0.1, then one
    // to 10.0.0.2.
    for (dst, hits) in [("0a000001", "3"), ("0a000002", "0")] {
        let config = format!(
            "InfiniteSource(DATA \\<45000014 00000000 40000000 01020304 {}>, LIMIT 3, STOP true) \
             -> s :: SetIPAddress(010.000.000.001) -> CheckIPHeader2 \
             -> ic :: IPClassifier(dst host 10.0.0.01, -) -> hit :: Counter -> Discard; \
             ic[1] -> Discard",
            dst
        );
        let o = brickroute(&[
            "run",
            "--no-summary",
            "-e",
            &config,
            "-h",
            "s.addr",
            "-h",
            "hit.count",
        ]);
        assert!(o.status.success(), "stderr: {}", stderr(&o));
        assert_eq!(
            stdout(&o),
            format!("s.addr:\n10.0.0.1\n\nhit.count:\n{}\n\n", hits)
        );
    }
}

#[test]
fn a_requirement_brickroute_lacks_is_an_error() {
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        "require(unknownpkg); InfiniteSource -> Discard",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("<expr>:1:9: error: requirement 'unknownpkg' not available\n"),
        "stderr: {}",
        stderr(&o)
    );
    let o = brickroute(&[
        "run",
        "-q",
        "-e",
        "require(ip6, userlevel); InfiniteSource -> Discard",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
}

/// `brickroute run ARGS`, killed after 30 s if it has not ended.
fn run_limited(args: &[&str]) -> std::process::Output {
    std::process::Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_brickroute"))
        .args(args)
        .output()
        .expect("run timeout")
}

#[test]
fn a_script_times_handler_calls_on_two_workers_and_stops_the_router() {
    let o = run_limited(&[
        "run",
        "--no-summary",
        "-j",
        "2",
        "-e",
        "InfiniteSource(LIMIT 300, STOP false) -> c :: Counter -> Discard;
         Script(set i 0, label l, wait 20ms, print \"$i: $(c.count)\", set i $(add $i 1),
                goto l $(lt $i 2), write c.reset, read c.count, stop)",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "0: 300\n1: 300\n");
    assert_eq!(stderr(&o), "c.count:\n0\n");
}

#[test]
fn a_passive_script_is_a_handler() {
    let o = run_limited(&[
        "run",
        "-q",
        "-e",
        "s :: Script(TYPE PASSIVE, return $(sprintf \"%d-%s\" $(mul 2 3) x))",
        "-h",
        "s.run",
        "-h",
        "s.add",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "s.run:\n6-x\n\ns.add:\n0\n\n");
    // A call that fails answers nothing, as Click's, and its error goes to standard
    // error.
    let o = run_limited(&[
        "run",
        "-q",
        "-e",
        "s :: Script(TYPE PASSIVE, return $(sprintf \"%d-%s\" $1 $2))",
        "-h",
        "s.run",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "s :: Script: syntax error\n");
}

/// Click's test/handlers/expansion-01.testie, as it is: handler calls whose names come
/// from script variables, other calls and configuration variables.
#[test]
fn clicks_expansion_01_testie() {
    let o = run_limited(&[
        "run",
        "--no-summary",
        "-e",
        "
	define($j sub)
	Script(print $(add 1 2),
		set i add,
		print $($i 3 4),
		print $($(s.run).name),
		print $($j 8 5),
		print $($j.run),
		stop)
	s :: Script(TYPE PASSIVE,
		return i2)
	sub :: Script(TYPE PASSIVE, return Hello)
	i1, i2 :: Idle",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "3\n7\ni2\n3\nHello\n");
}

/// The messages of the `error:` lines of `err`, in order.
fn error_messages(err: &str) -> Vec<&str> {
    err.lines()
        .filter_map(|l| l.split_once("error: "))
        .map(|(_, m)| m)
        .collect()
}
