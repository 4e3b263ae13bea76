use super::*;
use std::io::Cursor;

/// A router's side of a connection written out in advance; what the client sends is
/// kept.
struct Scripted {
    answers: Cursor<Vec<u8>>,
    sent: Vec<u8>,
}

impl Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.answers.read(buf)
    }
}

impl Write for Scripted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sent.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn router(answers: &str) -> Router<Scripted> {
    Router::new(Scripted {
        answers: Cursor::new(answers.as_bytes().to_vec()),
        sent: Vec::new(),
    })
    .expect("greeting")
}

fn sent(r: &Router<Scripted>) -> String {
    String::from_utf8(r.conn.get_ref().sent.clone()).unwrap()
}

const HELLO: &str = "Click::ControlSocket/1.3\r\n";

#[test]
fn a_read_sends_its_parameter_as_a_data_block_and_returns_the_value() {
    let mut r = router(&format!(
        "{HELLO}200 Read handler 'rt.lookup' OK\r\nDATA 2\r\n1\n"
    ));
    assert_eq!(r.read("rt.lookup", b"10.0.0.1").unwrap(), Ok(b"1\n".to_vec()));
    assert_eq!(sent(&r), "READDATA rt.lookup 8\r\n10.0.0.1");
}

#[test]
fn a_write_sends_every_byte_of_its_value() {
    let mut r = router(&format!("{HELLO}200 Write handler 'rt.ctrl' OK\r\n"));
    let routes = b"add 10.0.0.0/8 1\nadd  192.0.2.0/24 2\n";
    assert_eq!(r.write("rt.ctrl", routes).unwrap(), Ok(()));
    assert_eq!(
        sent(&r),
        "WRITEDATA rt.ctrl 37\r\nadd 10.0.0.0/8 1\nadd  192.0.2.0/24 2\n"
    );
}

#[test]
fn a_refusal_of_several_lines_keeps_each_line_and_its_code() {
    let mut r = router(&format!(
        "{HELLO}520-Write handler 'rt.add' error:\r\n520 expected 'ADDR/MASK [GATEWAY] OUTPUT'\r\n"
    ));
    assert_eq!(
        r.write("rt.add", b"nonsense").unwrap(),
        Err("520 Write handler 'rt.add' error:\n520 expected 'ADDR/MASK [GATEWAY] OUTPUT'".to_string())
    );
}

#[test]
fn a_refused_read_reads_no_data_block() {
    let mut r = router(&format!("{HELLO}511 No handler named 'c.nosuch'\r\n"));
    assert_eq!(
        r.read("c.nosuch", b"").unwrap(),
        Err("511 No handler named 'c.nosuch'".to_string())
    );
}

#[test]
fn a_peer_that_is_not_a_router_is_named_as_such() {
    let greet = |bytes: &[u8]| {
        Router::new(Scripted {
            answers: Cursor::new(bytes.to_vec()),
            sent: Vec::new(),
        })
        .err()
        .unwrap()
    };
    let Greeting::Lost(e) = greet(b"SSH-2.0-OpenSSH_9.2\r\n") else {
        panic!("taken for a refusal")
    };
    // A router that takes no more connections says so instead of greeting.
    let Greeting::Refused(busy) = greet(b"590 Too many connections (64 open)\r\n") else {
        panic!("not taken for a refusal")
    };
    assert_eq!(busy, "590 Too many connections (64 open)");
    assert_eq!(
        e.to_string(),
        "not a Click control socket (it said \"SSH-2.0-OpenSSH_9.2\", expected \
         Click::ControlSocket/1.x)"
    );
}

#[test]
fn a_value_cut_short_says_how_much_came() {
    let mut r = router(&format!(
        "{HELLO}200 Read handler 'rt.table' OK\r\nDATA 10\r\nabc"
    ));
    let e = r.read("rt.table", b"").unwrap_err();
    assert_eq!(
        e.to_string(),
        "the router closed the connection after 3 of the 10 bytes of rt.table"
    );
}

#[test]
fn answers_out_of_protocol_are_errors() {
    for (answer, message) in [
        ("hello\r\n", "unexpected answer from the router: \"hello\""),
        ("200x OK\r\n", "unexpected answer from the router: \"200x OK\""),
        (
            "200 Read handler 'c.count' OK\r\nDATA many\r\n",
            "unexpected answer from the router: \"DATA many\"",
        ),
        (
            "200 Read",
            "the router closed the connection in the middle of a line",
        ),
        ("", "the router closed the connection"),
    ] {
        let mut r = router(&format!("{HELLO}{answer}"));
        assert_eq!(r.read("c.count", b"").unwrap_err().to_string(), message);
    }
}

#[test]
fn requests_are_checked_before_connecting() {
    let refused = |action| match request(action) {
        Err(Failure(m, code)) => (m, code),
        Ok(_) => panic!("accepted"),
    };
    let write = |handler: &str, value: Vec<String>| Action::Write {
        file: None,
        handler: handler.into(),
        value,
    };
    assert_eq!(
        refused(write("rt add", vec![])),
        ("\"rt add\": a handler's name is one word".to_string(), 2)
    );
    // Over the control socket's data limit: the router would close the connection.
    let big = "x".repeat(MAX_DATA);
    assert_eq!(
        refused(write("rt.ctrl", vec![big, "y".into()])),
        (
            format!(
                "rt.ctrl: {} bytes, where a control socket takes at most {MAX_DATA} (64 MiB) a call",
                MAX_DATA + 2
            ),
            2
        )
    );
    assert!(request(write("rt.add", vec!["-h".into()])).is_ok());
}

#[test]
fn a_tcp_port_alone_means_the_loopback_address() {
    assert_eq!(
        tcp_addresses("41930").unwrap(),
        vec!["127.0.0.1:41930".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(
        tcp_addresses("[::1]:7").unwrap(),
        vec!["[::1]:7".parse::<SocketAddr>().unwrap()]
    );
    assert!(tcp_addresses("localhost")
        .unwrap_err()
        .starts_with("--tcp localhost: expected [HOST:]PORT"));
}
