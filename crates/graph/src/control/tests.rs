use super::*;
use crate::registry::Registry;
use std::path::Path;

/// A counter in front of a route lookup with two routes.
const CONFIG: &str = "src :: InfiniteSource(LIMIT 1) -> c :: Counter \
    -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Discard; rt[1] -> Discard;";

fn router() -> RouterSpec {
    let flat = crate::lang::parse(CONFIG, "t.click", &Default::default()).unwrap();
    RouterSpec::build(&flat, &Registry::with_library(), Path::new("."), 1).unwrap()
}

/// The answers to `input`, fed whole, then the end of input.
fn talk(router: &RouterSpec, read_only: bool, input: &str) -> String {
    let mut s = Session::new(router, read_only);
    let mut out = Vec::new();
    s.feed(input.as_bytes(), false, &mut out);
    s.feed(b"", true, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn read_answers_data_with_its_length() {
    let r = router();
    assert_eq!(
        talk(&r, false, "READ rt.table\r\n"),
        "200 Read handler 'rt.table' OK\r\nDATA 33\r\n10.0.0.0/8\t\t-\t\t0\n0.0.0.0/0\t\t-\t\t1\n"
    );
    // GET is READ; commands are case-insensitive; LF alone ends a line.
    assert_eq!(
        talk(&r, false, "get c.count\n"),
        "200 Read handler 'c.count' OK\r\nDATA 1\r\n0"
    );
}

#[test]
fn read_passes_the_rest_of_the_line_as_parameter() {
    let r = router();
    assert_eq!(
        talk(&r, false, "READ rt.lookup 10.1.2.3\n"),
        "200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0"
    );
    assert_eq!(
        talk(&r, false, "READ rt.lookup 192.0.2.1\n"),
        "200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n1"
    );
}

#[test]
fn write_changes_routes_for_the_next_read() {
    let r = router();
    let out = talk(
        &r,
        false,
        "WRITE rt.add 192.0.2.0/24 0\nREAD rt.lookup 192.0.2.1\nWRITE rt.remove 192.0.2.0/24\nREAD rt.lookup 192.0.2.1\n",
    );
    assert_eq!(
        out,
        "200 Write handler 'rt.add' OK\r\n\
         200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0\
         200 Write handler 'rt.remove' OK\r\n\
         200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n1"
    );
}

#[test]
fn data_blocks_follow_their_command_line() {
    let r = router();
    // A block of two lines, then a command right after the block.
    let routes = "add 192.0.2.0/24 0\nadd 198.51.0.0/16 0";
    assert_eq!(routes.len(), 38);
    let out = talk(
        &r,
        false,
        &format!(
            "WRITEDATA rt.ctrl 38\r\n{}READDATA rt.lookup 10\n198.51.7.7\r\nQUIT\n",
            routes
        ),
    );
    assert_eq!(
        out,
        "200 Write handler 'rt.ctrl' OK\r\n\
         200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0\
         200 Goodbye!\r\n"
    );
    // A handler's error, one answer line per line of it.
    assert_eq!(
        talk(&r, false, "WRITE rt.add 192.0.2.0/24\n"),
        "520-Write handler 'rt.add' error:\r\n520 expected 'ADDR/MASK [GATEWAY] OUTPUT'\r\n"
    );
}

#[test]
fn until_commands_take_lines_up_to_the_terminator() {
    let r = router();
    let out = talk(
        &r,
        false,
        "WRITEUNTIL rt.add END\n192.0.2.0/24 0\nEND  \nREAD rt.lookup 192.0.2.9\n",
    );
    assert_eq!(
        out,
        "200 Write handler 'rt.add' OK\r\n200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0"
    );
    // No terminator given: a blank line ends the data.
    let out = talk(&r, false, "READUNTIL rt.lookup\n10.9.9.9\n\nREAD c.count\n");
    assert_eq!(
        out,
        "200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0200 Read handler 'c.count' OK\r\nDATA 1\r\n0"
    );
}

#[test]
fn commands_split_across_reads_are_answered_once_complete() {
    let r = router();
    let input = "WRITEDATA rt.add 14\r\n192.0.2.0/24 0READ rt.lookup 192.0.2.1\r\n";
    let mut whole = Vec::new();
    let mut s = Session::new(&r, false);
    s.feed(input.as_bytes(), true, &mut whole);
    let r2 = router();
    let mut s = Session::new(&r2, false);
    let mut bytewise = Vec::new();
    for b in input.as_bytes() {
        s.feed(&[*b], false, &mut bytewise);
    }
    s.feed(b"", true, &mut bytewise);
    assert_eq!(
        String::from_utf8(whole).unwrap(),
        "200 Write handler 'rt.add' OK\r\n200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0"
    );
    assert_eq!(
        bytewise,
        b"200 Write handler 'rt.add' OK\r\n200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n0"
    );
}

#[test]
fn a_cr_at_the_end_of_input_waits_only_where_data_follows() {
    let r = router();
    let mut s = Session::new(&r, false);
    let mut out = Vec::new();
    s.feed(b"READ c.count\r", false, &mut out);
    assert_eq!(out, b"200 Read handler 'c.count' OK\r\nDATA 1\r\n0");
    out.clear();
    // The LF of that CRLF is an empty line: nothing.
    s.feed(b"\nWRITEDATA rt.add 14\r", false, &mut out);
    assert!(out.is_empty());
    s.feed(b"\n192.0.2.0/24 0", false, &mut out);
    assert_eq!(out, b"200 Write handler 'rt.add' OK\r\n");
}

#[test]
fn handler_names_take_numbers_and_global_forms() {
    let r = router();
    // Element 2 is c.
    assert_eq!(
        talk(&r, false, "READ 2.name\n"),
        "200 Read handler '2.name' OK\r\nDATA 1\r\nc"
    );
    let list = "200 Read handler 'list' OK\r\nDATA 31\r\n5\nsrc\nc\nrt\nDiscard@4\nDiscard@5\n";
    assert_eq!(talk(&r, false, "READ list\n"), list);
    assert_eq!(talk(&r, false, "READ .list\n"), list.replace("'list'", "'.list'"));
    assert_eq!(
        talk(&r, false, "READ 0.list\n"),
        list.replace("'list'", "'0.list'")
    );
}

#[test]
fn bad_requests_are_refused_with_a_reason() {
    let r = router();
    let cases = [
        ("READ\n", "500 Wrong number of arguments\r\n"),
        ("READ nosuch.count\n", "510 No element named 'nosuch'\r\n"),
        ("READ 9.count\n", "510 No element named '9'\r\n"),
        ("READ c.nosuch\n", "511 No handler named 'c.nosuch'\r\n"),
        ("READ nosuch\n", "511 No handler named 'nosuch'\r\n"),
        ("READ rt.add\n", "530 Handler 'rt.add' write-only\r\n"),
        ("WRITE c.count 3\n", "530 Handler 'c.count' read-only\r\n"),
        ("WRITE list\n", "530 Handler 'list' read-only\r\n"),
        ("READ stop\n", "530 Handler 'stop' write-only\r\n"),
        (
            "READ rt.lookup nonsense\n",
            "520-Read handler 'rt.lookup' error:\r\n520 expected IP address, not 'nonsense'\r\n",
        ),
        (
            "READ list x\n",
            "520-Read handler 'list' error:\r\n520 read handler 'list' does not take parameters\r\n",
        ),
        ("READDATA c.count x\n", "500 Syntax error in 'READDATA'\r\n"),
        ("WRITEDATA c.count\n", "500 Wrong number of arguments\r\n"),
        ("FROB c.count\n", "501 Command 'FROB' unimplemented\r\n"),
        ("LLRPC c#1\n", "501 Cannot call LLRPC 'c#1' remotely\r\n"),
        ("CHECKREAD\n", "500 Wrong number of arguments\r\n"),
        ("READ c.\u{ff}count\n", "511 No handler named 'c.\u{ff}count'\r\n"),
        // Control characters are shown as Click shows them; a vertical tab separates
        // words, as C's isspace says.
        ("READ c.\x1bx\n", "511 No handler named 'c.^[x'\r\n"),
        ("READ\x0bc.nosuch\n", "511 No handler named 'c.nosuch'\r\n"),
    ];
    for (input, want) in cases {
        assert_eq!(talk(&r, false, input), want, "{input:?}");
    }
    // Bytes that are not UTF-8 text.
    let mut s = Session::new(&r, false);
    let mut out = Vec::new();
    s.feed(b"READ c.\xffcount\nREAD c.count\n", false, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "500 Command is not UTF-8 text\r\n200 Read handler 'c.count' OK\r\nDATA 1\r\n0"
    );
}

#[test]
fn data_the_client_never_sends_is_reported_at_end_of_input() {
    let r = router();
    assert_eq!(
        talk(&r, false, "WRITEDATA rt.add 100\n1.2.3.0/24 0"),
        "500 Not enough data\r\n"
    );
    assert_eq!(
        talk(&r, false, "WRITEUNTIL rt.add END\n1.2.3.0/24 0\n"),
        "500 Not enough data\r\n"
    );
    // A last command without a line end is still answered.
    assert_eq!(
        talk(&r, false, "READ c.count"),
        "200 Read handler 'c.count' OK\r\nDATA 1\r\n0"
    );
}

#[test]
fn oversized_lines_and_blocks_close_the_session() {
    let r = router();
    let mut s = Session::new(&r, false);
    let mut out = Vec::new();
    s.feed(&vec![b'x'; MAX_LINE + 1], false, &mut out);
    assert_eq!(out, b"500 Command line too long\r\n");
    assert!(s.is_closed());
    assert_eq!(
        talk(
            &r,
            false,
            &format!("WRITEDATA rt.add {}\nREAD c.count\n", MAX_DATA + 1)
        ),
        format!(
            "521 Data too large for handler 'rt.add' (at most {} bytes)\r\n",
            MAX_DATA
        )
    );
}

#[test]
fn read_only_sessions_refuse_writes_but_not_reads() {
    let r = router();
    assert_eq!(
        talk(
            &r,
            true,
            "WRITE rt.add 192.0.2.0/24 0\nREAD rt.lookup 192.0.2.1\n"
        ),
        "530 Permission denied for 'rt.add'\r\n200 Read handler 'rt.lookup' OK\r\nDATA 1\r\n1"
    );
    assert_eq!(
        talk(&r, true, "CHECKWRITE rt.add\n"),
        "530 Permission denied for 'rt.add'\r\n"
    );
    assert!(!r.stop_flag().is_requested());
    assert_eq!(
        talk(&r, true, "WRITE stop\n"),
        "530 Permission denied for 'stop'\r\n"
    );
    assert!(!r.stop_flag().is_requested());
}

#[test]
fn check_commands_say_whether_a_handler_can_be_called() {
    let r = router();
    let cases = [
        ("CHECKREAD c.count\n", "200 Read handler 'c.count' OK\r\n"),
        ("CHECKWRITE rt.add\n", "200 Write handler 'rt.add' OK\r\n"),
        ("CHECKWRITE c.count\n", "511 Handler 'c.count' not writable\r\n"),
        ("CHECKREAD rt.add\n", "511 Handler 'rt.add' not readable\r\n"),
        ("CHECKREAD c.nosuch\n", "511 No handler named 'c.nosuch'\r\n"),
        ("CHECKWRITE nosuch\n", "511 No handler named 'nosuch'\r\n"),
        ("CHECKWRITE stop\n", "200 Write handler 'stop' OK\r\n"),
        ("CHECKREAD version\n", "200 Read handler 'version' OK\r\n"),
    ];
    for (input, want) in cases {
        assert_eq!(talk(&r, false, input), want, "{input:?}");
    }
}

#[test]
fn stop_asks_the_router_to_stop() {
    let r = router();
    assert!(!r.stop_flag().is_requested());
    assert_eq!(talk(&r, false, "WRITE stop\n"), "200 Write handler 'stop' OK\r\n");
    assert!(r.stop_flag().is_requested());
}

#[test]
fn quit_ends_the_session_and_ignores_what_follows() {
    let r = router();
    let mut s = Session::new(&r, false);
    let mut out = Vec::new();
    s.feed(b"quit\nREAD c.count\n", false, &mut out);
    assert_eq!(out, b"200 Goodbye!\r\n");
    assert!(s.is_closed());
    s.feed(b"READ c.count\n", false, &mut out);
    assert_eq!(out, b"200 Goodbye!\r\n");
}

#[test]
fn help_lists_the_commands_on_continued_lines() {
    let r = router();
    let out = talk(&r, false, "HELP\n");
    let lines: Vec<&str> = out.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 10);
    assert!(lines[..9].iter().all(|l| l.starts_with("200-")), "{out}");
    assert!(lines[9].starts_with("200 QUIT"), "{out}");
}

#[test]
fn an_unfinished_until_line_is_searched_once_and_bounded() {
    let r = router();
    let mut s = Session::new(&r, false);
    let mut out = Vec::new();
    s.feed(b"READUNTIL c.count END\n", false, &mut out);
    // 65 pieces of 1 MiB with no line end: the block passes MAX_DATA inside one line.
    let piece = vec![b'a'; 1 << 20];
    for _ in 0..65 {
        s.feed(&piece, false, &mut out);
        if s.is_closed() {
            break;
        }
    }
    assert!(s.is_closed());
    assert_eq!(out, b"521 Data too large\r\n");
}

#[test]
fn config_answers_the_text_the_driver_gave() {
    let mut r = router();
    assert_eq!(
        talk(&r, false, "READ config\n"),
        "511 No handler named 'config'\r\n"
    );
    r.set_text(CONFIG.to_string());
    assert_eq!(
        talk(&r, false, "READ config\n"),
        format!(
            "200 Read handler 'config' OK\r\nDATA {}\r\n{}",
            CONFIG.len(),
            CONFIG
        )
    );
}

/// A live session whose `hotconfig` handler builds the written text and makes it the
/// current router: the commands after the write, even those sent with it, call the new
/// one; a text that does not build is answered with its error and changes nothing.
#[test]
fn a_live_session_calls_the_router_hotconfig_put_in_place() {
    use std::sync::Mutex;
    let current: Arc<Mutex<Arc<RouterSpec>>> = Arc::new(Mutex::new(Arc::new(router())));
    let hook_current = current.clone();
    let hook: Arc<crate::router::Reconfigure> = Arc::new(move |text: &str| {
        let flat = crate::lang::parse(text, "<hotconfig>", &Default::default()).map_err(|e| e.to_string())?;
        let r = RouterSpec::build(&flat, &Registry::with_library(), Path::new("."), 1)
            .map_err(|e| e.to_string())?;
        *hook_current.lock().unwrap() = Arc::new(r);
        Ok(())
    });
    {
        let mut first = router();
        first.set_hotconfig(hook.clone());
        *current.lock().unwrap() = Arc::new(first);
    }
    let get = || current.lock().unwrap().clone();
    let mut s = Session::live(&get, false);
    let mut out = Vec::new();
    s.feed(
        b"CHECKWRITE hotconfig\nWRITE hotconfig Idle -> nosuch :: Frob;\nREAD c.count\n",
        false,
        &mut out,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "200 Write handler 'hotconfig' OK\r\n\
         520-Write handler 'hotconfig' error:\r\n\
         520-<hotconfig>:1:19: error: unknown element class 'Frob'\r\n\
         520-  Idle -> nosuch :: Frob;\r\n\
         520                     ^\r\n\
         200 Read handler 'c.count' OK\r\nDATA 1\r\n0"
    );
    let mut out = Vec::new();
    s.feed(
        b"WRITE hotconfig d :: Idle -> Discard;\nREAD d.class\nREAD c.count\nCHECKWRITE hotconfig\n",
        false,
        &mut out,
    );
    // (The new router was built without a hotconfig handler of its own.)
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "200 Write handler 'hotconfig' OK\r\n\
         200 Read handler 'd.class' OK\r\nDATA 4\r\nIdle\
         510 No element named 'c'\r\n\
         511 No handler named 'hotconfig'\r\n"
    );
}
