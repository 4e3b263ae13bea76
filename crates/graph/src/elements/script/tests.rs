use super::machine::{Ending, Machine, World};
use super::program::Program;
use super::*;
use crate::testing::router;
use std::collections::HashMap;
use std::time::Duration;

/// A world of fixed handlers and a clock the test moves, recording what the script
/// prints, writes and reports.
#[derive(Default)]
struct FakeWorld {
    reads: HashMap<String, String>,
    printed: String,
    files: HashMap<String, String>,
    written: Vec<String>,
    messages: Vec<String>,
    errors: Vec<String>,
    stops: usize,
    now: u64,
}

impl World for FakeWorld {
    fn read(&mut self, handler: &str, param: &str) -> Result<String, String> {
        if let Some(r) = super::functions::call(handler, param) {
            return r;
        }
        let call = if param.is_empty() {
            handler.to_string()
        } else {
            format!("{} {}", handler, param)
        };
        self.reads
            .get(&call)
            .cloned()
            .ok_or_else(|| format!("no read handler '{}'", call))
    }
    fn write(&mut self, handler: &str, value: &str) -> Result<(), String> {
        let call = if value.is_empty() {
            handler.to_string()
        } else {
            format!("{} {}", handler, value)
        };
        self.written.push(call.clone());
        if call.starts_with("bad.") {
            Err(format!("refused '{}'", call))
        } else {
            Ok(())
        }
    }
    fn full_name(&self, handler: &str) -> String {
        if handler.contains('.') {
            handler.to_string()
        } else {
            format!("s.{}", handler)
        }
    }
    fn readable(&self, handler: &str) -> bool {
        self.reads.contains_key(handler) || super::functions::HANDLERS.contains(&handler)
    }
    fn is_own(&self, handler: &str) -> Option<String> {
        let h = handler.strip_prefix("s.").unwrap_or(handler);
        (!h.contains('.') && ["get", "set", "shift", "v"].contains(&h)).then(|| h.to_string())
    }
    fn print(&mut self, file: Option<(&str, bool)>, text: &str) -> Result<(), String> {
        match file {
            None => self.printed.push_str(text),
            Some((f, append)) => {
                let e = self.files.entry(f.to_string()).or_default();
                if !append {
                    e.clear();
                }
                e.push_str(text);
            }
        }
        Ok(())
    }
    fn message(&mut self, text: &str) {
        self.messages.push(text.to_string());
    }
    fn error(&mut self, text: &str) {
        self.errors.push(text.to_string());
    }
    fn stop(&mut self) {
        self.stops += 1;
    }
    fn now(&self) -> u64 {
        self.now
    }
    /// One tick a millisecond.
    fn ticks(&self, d: Duration) -> u64 {
        d.as_millis() as u64
    }
}

fn program(insns: &[&str]) -> Program {
    Program::parse(&insns.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

/// Initializes and runs `insns` once in `w`.
fn run_in(insns: &[&str], w: &mut FakeWorld) -> (Program, Machine) {
    let p = program(insns);
    let mut m = Machine::new(&p);
    m.initialize(&p, w);
    m.step(&p, w, 0);
    (p, m)
}

#[test]
fn the_counting_loop_of_clicks_documentation() {
    let mut w = FakeWorld::default();
    let (_, m) = run_in(
        &[
            "set x 0",
            "label begin_loop",
            "print $x",
            "set x $(add $x 1)",
            "goto begin_loop $(lt $x 5)",
            "stop",
        ],
        &mut w,
    );
    assert_eq!(w.printed, "0\n1\n2\n3\n4\n");
    assert_eq!((w.stops, m.ending), (1, Some(Ending::Stop)));
    assert!(w.errors.is_empty());
}

#[test]
fn set_setq_and_print_quoting_as_documented() {
    let mut w = FakeWorld::default();
    w.reads.insert("c.count".into(), "0".into());
    run_in(
        &[
            "set x $(c.count)",
            "print $x",
            "set x \"$(c.count)\"",
            "print $x",
            "setq x \"$(c.count)\"",
            "print $x",
            "print c.count",
            "print \"c.count\"",
            "print '\"c.count\"'",
            "set y c.count",
            "print $y",
            "print $($y)",
            "printn no newline",
            "printn \"|\"",
        ],
        &mut w,
    );
    assert_eq!(w.printed, "0\n\"0\"\n0\n0\nc.count\n\"c.count\"\nc.count\n0\n|");
}

#[test]
fn a_value_with_quotes_and_newlines_prints_as_it_is() {
    let mut w = FakeWorld::default();
    w.reads.insert("e.text".into(), "say \"hi\"\\\n".into());
    run_in(&["set t $(e.text)", "print [$t]", "print \"[$t]\""], &mut w);
    assert_eq!(w.printed, "[say \"hi\"\\\n]\n[say \"hi\"\\\n]\n");
}

#[test]
fn print_to_files_read_write_and_their_status() {
    let mut w = FakeWorld::default();
    w.reads.insert("c.count".into(), "7\n".into());
    run_in(
        &[
            "print >out \"a\"",
            "print >>out \"b\"",
            "print >>log $(c.count)",
            "print >out2 c.count",
            "read c.count",
            "write c.reset",
            "print $?",
            "write bad.x 1",
            "print $?",
            "writeq d.set \"a b\"",
            "read nope",
        ],
        &mut w,
    );
    assert_eq!(w.files["out"], "a\nb\n");
    assert_eq!(w.files["log"], "7\n");
    assert_eq!(w.files["out2"], "7\n");
    assert_eq!(w.messages, vec!["c.count:\n7"]);
    assert_eq!(w.written, vec!["c.reset", "bad.x 1", "d.set a b"]);
    assert_eq!(w.printed, "0\n-22\n");
    assert_eq!(w.errors, vec!["refused 'bad.x 1'", "no read handler 'nope'"]);
}

#[test]
fn pause_waits_for_steps_and_wait_for_time_or_a_step() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(
        &[
            "print \"a\"",
            "pause 2",
            "print \"b\"",
            "wait 5ms",
            "print \"c\"",
            "wait 1s",
            "print \"d\"",
        ],
        &mut w,
    );
    assert_eq!((w.printed.as_str(), m.ending.clone()), ("a\n", None));
    m.step(&p, &mut w, 1);
    assert_eq!(w.printed, "a\n");
    m.step(&p, &mut w, 1);
    assert_eq!(w.printed, "a\nb\n");
    // Blocked at `wait 5ms`, due at tick 5.
    assert_eq!(m.deadline, Some(5));
    w.now = 5;
    m.step(&p, &mut w, 1);
    assert_eq!(w.printed, "a\nb\nc\n");
    assert_eq!(m.deadline, Some(1005));
    // A step passes a wait before its time.
    m.step(&p, &mut w, 1);
    assert_eq!(w.printed, "a\nb\nc\nd\n");
    assert_eq!((m.deadline, m.ending), (None, Some(Ending::End)));
}

#[test]
fn steps_beyond_the_waits_reached_are_dropped() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(&["pause", "print \"a\"", "pause", "print \"b\""], &mut w);
    m.step(&p, &mut w, 5);
    assert_eq!(w.printed, "a\nb\n");
    let (p, mut m) = run_in(
        &["pause", "print 1", "wait 1s", "print 2", "pause", "print 3"],
        &mut w,
    );
    m.step(&p, &mut w, 2);
    assert_eq!(w.printed, "a\nb\n1\n2\n");
    assert_eq!(m.ending, None);
}

#[test]
fn a_loop_waits_again_at_each_pause() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(&["pause", "print \"tick\"", "loop"], &mut w);
    for _ in 0..3 {
        m.step(&p, &mut w, 1);
    }
    assert_eq!(w.printed, "tick\ntick\ntick\n");
}

#[test]
fn gotos_with_conditions_and_builtin_labels() {
    let mut w = FakeWorld::default();
    let (_, m) = run_in(
        &[
            "goto skip true",
            "print 1",
            "label skip",
            "goto end $(eq 1 1)",
            "print 2",
        ],
        &mut w,
    );
    assert_eq!((w.printed.as_str(), m.ending), ("", Some(Ending::End)));
    let (_, m) = run_in(&["goto exit false", "goto error", "print 1"], &mut w);
    assert_eq!(m.ending, Some(Ending::Error(String::new())));
    let (_, m) = run_in(&["goto exit maybe", "print 3"], &mut w);
    assert_eq!(w.errors, vec!["bad condition 'maybe'"]);
    assert_eq!((w.printed.as_str(), m.ending), ("3\n", Some(Ending::End)));
}

#[test]
fn a_script_that_loops_without_blocking_is_stopped() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(&["label a", "goto a"], &mut w);
    assert_eq!(w.errors, vec!["too many jumps, giving up"]);
    assert_eq!(m.ending, Some(Ending::End));
    // It stays disabled.
    m.step(&p, &mut w, 1);
    assert_eq!(w.errors.len(), 1);
}

#[test]
fn return_error_init_and_run_arguments() {
    let mut w = FakeWorld::default();
    w.reads.insert("c.count".into(), "3".into());
    let p = program(&[
        "init n $(c.count)",
        "set n $(add $n 1)",
        "return \"$n $# [$1] [$2] [$3] $args\"",
    ]);
    let mut m = Machine::new(&p);
    m.initialize(&p, &mut w);
    w.reads.insert("c.count".into(), "100".into());
    m.initialize(&p, &mut w);
    m.restart("a 'b c'");
    m.step(&p, &mut w, 0);
    assert_eq!(m.ending, Some(Ending::Return));
    assert_eq!(m.returned(), "\"4 2 [a] ['b c'] [] a 'b c'\"");
    m.restart("");
    m.step(&p, &mut w, 0);
    assert_eq!(m.returned(), "\"5 0 [] [] [] \"");
    let (_, m) = run_in(&["returnq \"x y\""], &mut w);
    assert_eq!(m.returned(), "x y");
    let (_, m) = run_in(&["errorq \"bad $(add 1 1)\"", "print 1"], &mut w);
    assert_eq!(m.ending, Some(Ending::Error("bad 2".into())));
    assert_eq!(w.errors, vec!["bad 2"]);
}

#[test]
fn an_ended_script_stepped_runs_its_ending_instruction_again() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(&["print \"a\"", "stop", "print \"b\""], &mut w);
    assert_eq!(w.stops, 1);
    m.step(&p, &mut w, 1);
    assert_eq!((w.printed.as_str(), w.stops), ("a\n", 2));
}

// ---- Through a router ----

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("brickroute-script-{}-{}", std::process::id(), name));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("out")
}

/// Runs `r` on one worker until every source is done or a stop is asked (at most 5 s).
fn run_router(r: &RouterSpec) {
    let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let res = g.run_sources_in(r, tsc::rdtsc());
        if res.all_done || r.stop_flag().is_requested() {
            return;
        }
    }
    panic!("router did not finish");
}

#[test]
fn an_active_script_reads_counters_after_a_wait_and_stops_the_router() {
    let out = temp_path("active");
    let text = format!(
        "InfiniteSource(LIMIT 5, STOP false) -> c :: Counter -> Discard;
         Script(wait 20ms, print >{0} $(c.count), write c.reset, print >>{0} c.count, stop)",
        out.display()
    );
    let r = router(&text).unwrap();
    let t0 = std::time::Instant::now();
    run_router(&r);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert!(r.stop_flag().was_asked());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "5\n0\n");
}

#[test]
fn an_active_script_that_ends_lets_the_router_end() {
    let out = temp_path("ends");
    let r = router(&format!("Script(print >{} \"done\")", out.display())).unwrap();
    run_router(&r);
    assert!(!r.stop_flag().was_asked());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "done\n");
}

#[test]
fn a_passive_script_answers_its_run_handler() {
    let r = router(
        "Idle -> c1 :: Counter -> Discard; Idle -> c2 :: Counter -> Discard;
         s :: Script(TYPE PASSIVE, return $(add $(c1.count) $(c2.count) $#))",
    )
    .unwrap();
    assert_eq!(r.read_handler("s.run").unwrap(), "0");
    assert_eq!(r.read_handler("s.run a b c").unwrap(), "3");
    // Arithmetic handlers answer anyone.
    assert_eq!(r.read_handler("s.add 1 2").unwrap(), "3");
    assert_eq!(r.read_handler("s.sprintf \"%03d\" 7").unwrap(), "007");
    assert!(r.read_handler("s.handlers").unwrap().contains("step\tw\n"));
}

#[test]
fn step_and_goto_handlers_move_a_script() {
    let out = temp_path("step");
    let r = router(&format!(
        "s :: Script(TYPE PASSIVE, print >>{0} 1, pause, print >>{0} 2, label l, print >>{0} 3, error oops)",
        out.display()
    ))
    .unwrap();
    r.write_handler("s.run", "").unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "1\n");
    assert_eq!(r.write_handler("s.step", ""), Err("oops".to_string()));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "1\n2\n3\n");
    assert_eq!(r.write_handler("s.goto", "l"), Err("oops".to_string()));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "1\n2\n3\n3\n");
    assert_eq!(
        r.write_handler("s.goto", "nowhere"),
        Err("jump to nonexistent label".to_string())
    );
    assert_eq!(
        r.write_handler("s.goto", "exit"),
        Err("jump to nonexistent label".to_string())
    );
    assert_eq!(r.write_handler("s.step", "x"), Err("syntax error".to_string()));
    assert_eq!(
        r.write_handler("s.add", "1"),
        Err("'s.add' is a read handler".to_string())
    );
}

#[test]
fn a_script_calling_its_own_run_is_refused_not_deadlocked() {
    let r = router("s :: Script(TYPE PASSIVE, write s.step, return $?, )").unwrap();
    assert_eq!(r.read_handler("s.run").unwrap(), "-22");
    // The call fails (reported), and a handler that exists answers nothing.
    let r = router("s :: Script(TYPE PASSIVE, return [$(run)])").unwrap();
    assert_eq!(r.read_handler("s.run").unwrap(), "[]");
}

#[test]
fn a_script_writes_global_and_element_handlers() {
    let r = router(
        "InfiniteSource(LIMIT 3, STOP false) -> c :: Counter -> Discard;
         s :: Script(TYPE PASSIVE, write c.reset, write stop, return $(c.count))",
    )
    .unwrap();
    let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
    for _ in 0..10 {
        g.run_sources_in(&r, tsc::rdtsc());
    }
    assert_eq!(r.read_handler("c.count").unwrap(), "3");
    assert!(!r.stop_flag().was_asked());
    assert_eq!(r.read_handler("s.run").unwrap(), "0");
    assert!(r.stop_flag().was_asked());
}

#[test]
fn configuration_errors() {
    let err = |text: &str| router(text).err().expect("refused").to_string();
    let e = err("Script(set x 1, frob, goto nowhere)");
    assert!(e.contains("Script@1 :: Script: syntax error at 'frob'"), "{}", e);
    assert!(e.contains("Script@1 :: Script: no such label 'nowhere'"), "{}", e);
    assert!(err("Script(TYPE SOMETIMES, stop)").contains("Script@1 :: Script: bad TYPE"));
    assert!(err("Script(TYPE PASSIVE, stop) -> Discard").contains("ports allowed only on PACKET scripts"));
    assert!(
        err("Idle -> Script(TYPE PACKET, end) -> Discard; Script(TYPE PACKET)")
            .contains("PACKET script must have inputs")
    );
    assert!(err("Script(TYPE DRIVER, stop)").contains("TYPE DRIVER is not supported"));
    assert!(err("Script(TYPE SIGNAL HUP, stop)").contains("TYPE SIGNAL is not supported"));
}

/// Runs `text` on one worker until its sources are done, then cleans up (files
/// flushed).
fn run_to_end(text: &str) -> RouterSpec {
    let r = router(text).unwrap_or_else(|e| panic!("{}", e));
    let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
    let start = std::time::Instant::now();
    while !g.run_sources_in(&r, tsc::rdtsc()).all_done {
        assert!(start.elapsed() < Duration::from_secs(5), "router did not finish");
    }
    drop(g);
    r.cleanup();
    r
}

/// Click's test/standard/Script-01.testie, as it is: packet scripts send each packet
/// to output 0 (`end`, or falling off the end), to the output `return` names, or drop
/// it (`exit`, an output the element does not have); `init` happens once.
#[test]
fn clicks_script_01_testie() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out) = (dir.path().join("IN"), dir.path().join("OUT"));
    std::fs::write(
        &input,
        "!data link sport\n0 0\n1 1\n2 2\n3 3\n0 4\n1 5\n2 6\n3 7\n3 8\n3 9\n4 10\n4 11\n4 12\n4 13\n4 14\n4 15\n",
    )
    .unwrap();
    run_to_end(&format!(
        "FromIPSummaryDump({}, STOP true)
         -> ps :: PaintSwitch;
         t :: ToIPSummaryDump({}, DATA link sport);
         ps[0] -> Script(TYPE PACKET) -> Paint(0) -> t;
         ps[1] -> Script(TYPE PACKET, end) -> Paint(1) -> t;
         ps[2] -> Script(TYPE PACKET, exit) -> Paint(2) -> t;
         ps[3] -> sx :: Script(TYPE PACKET, init i 0, set j $i, set i $(if $(eq $i 0) 1 0), return $j) -> Paint(3) -> t;
               sx [1] -> Paint(4) -> t;
         ps[4] -> sy :: Script(TYPE PACKET, init i 0, set j $i, set i $(add $i 1), set i $(if $(eq $i 3) 0 $i), return $j) -> Paint(5) -> t;
               sy [1] -> Paint(6) -> t;",
        input.display(),
        out.display()
    ));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('!')).collect();
    assert_eq!(
        lines,
        ["0 0", "1 1", "3 3", "0 4", "1 5", "4 7", "3 8", "4 9", "5 10", "6 11", "5 13", "6 14"]
    );
}

/// Click's test/standard/Script-02.testie: a quoted argument reaches a passive
/// script's `$1` as written, `returnq` unquotes it to its three bytes, and `printn`
/// writes them as they are.
#[test]
fn clicks_script_02_testie() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("FILE");
    let r = run_to_end(&format!(
        "s0 :: Script(printn >{} $(s.run \"\\<0a 09 01>\"), readq length \"\\<0a 09 01>\", stop)
         s :: Script(TYPE PASSIVE, returnq $1)",
        file.display()
    ));
    assert_eq!(std::fs::read(&file).unwrap(), b"\n\t\x01");
    assert!(r.stop_flag().was_asked());
    assert_eq!(r.read_handler("s0.length \"\\<0a 09 01>\"").unwrap(), "13");
}

#[test]
fn a_proxy_script_answers_any_handler() {
    let r = router(
        "s :: Script(TYPE PROXY,
                goto nota $(ne $0 a),
                returnq \"you called 'a'\",
                label nota,
                goto notb $(ne $0 b),
                returnq \"you called 'b' with $args, write $write\",
                label notb,
                error bad handler)",
    )
    .unwrap();
    assert_eq!(r.read_handler("s.a").unwrap(), "you called 'a'");
    assert_eq!(
        r.read_handler("s.b 1 2").unwrap(),
        "you called 'b' with 1 2, write false"
    );
    assert_eq!(r.write_handler("s.b", "x"), Ok(()));
    assert_eq!(r.read_handler("s.c"), Err("bad handler".to_string()));
    assert_eq!(r.write_handler("s.c", ""), Err("bad handler".to_string()));
    // Its own handlers stay its own.
    assert_eq!(r.read_handler("s.add 1 2").unwrap(), "3");
    // Any name is a handler to a handler client.
    assert_eq!(r.handler_access("s", "anything"), Some((true, true)));
    assert!(r.has_read_handler("s", "zz"));
    assert_eq!(r.handler_access("s", "class"), Some((true, false)));
    let mut session = crate::control::Session::new(&r, false);
    let mut out = Vec::new();
    session.feed(b"READ s.a\r\n", false, &mut out);
    assert!(
        String::from_utf8_lossy(&out).contains("200 Read handler 's.a' OK\r\nDATA 14\r\nyou called 'a'"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

#[test]
fn variables_through_handlers_and_export() {
    let r = router(
        "s :: Script(TYPE PASSIVE, export v 5, set w $(get v), write set v $(add $w 1),
                     return \"$(shift) $(shift) [$args] $v $(s.v)\")",
    )
    .unwrap();
    assert_eq!(r.read_handler("s.v").unwrap(), "5");
    assert_eq!(r.read_handler("s.run a b c").unwrap(), "\"a b [c] 6 6\"");
    assert_eq!(r.read_handler("s.v").unwrap(), "6");
    r.write_handler("s.set", "v 9").unwrap();
    assert_eq!(r.read_handler("s.get v").unwrap(), "9");
    assert_eq!(
        r.read_handler("s.get nope"),
        Err("undefined variable 'nope'".to_string())
    );
    assert_eq!(r.read_handler("s.get"), Err("no variable".to_string()));
    assert!(r.read_handler("s.handlers").unwrap().contains("shift\tr\n"));
}

#[test]
fn readable_writable_cat_and_the_stop_label() {
    let dir = tempfile::tempdir().unwrap();
    let (data, out) = (dir.path().join("data"), dir.path().join("out"));
    std::fs::write(&data, "x \"y\"\n").unwrap();
    let r = run_to_end(&format!(
        "Idle -> c :: Counter -> Discard;
         Script(print >{out} $(readable c.count c.rate version add),
                print >>{out} $(readable c.nope),
                print >>{out} $(writable c.reset stop step),
                print >>{out} $(writable c.count),
                printn >>{out} $(cat {data}),
                print >>{out} $(catq {data}),
                goto stop $(eq 1 1),
                print >>{out} \"not reached\")",
        out = out.display(),
        data = data.display()
    ));
    assert!(r.stop_flag().was_asked());
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "true\nfalse\ntrue\nfalse\nx \"y\"\n\"x \\\"y\\\"\\n\"\n"
    );
    // `cat` reads files for the script only, not for a handler caller.
    assert_eq!(
        r.read_handler(&format!("Script@4.cat {}", data.display())),
        Err("'Script@4.cat' is private".to_string())
    );
}

#[test]
fn save_append_printq_and_a_wait_time_from_a_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = run_to_end(&format!(
        "s :: Script(set t 10ms, wait $t, set two $(add 1 1), save $two {out}, append \"x y\" {out},
                     printq >>{out} s.length \"a b\", print >>{out} s.length \"a b\", stop)",
        out = out.display()
    ));
    assert!(r.stop_flag().was_asked());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "2\nx y\n3\n5\n");
}

/// A script called from within another script waits at most NESTED_WAIT for its lock,
/// so two scripts on two threads calling each other end in an error, not a deadlock.
#[test]
fn a_script_called_from_a_script_does_not_wait_for_ever() {
    let program = program(&["return 1"]);
    let script = Arc::new(Script {
        name: "b".into(),
        kind: Kind::Passive,
        machine: Mutex::new(Machine::new(&program)),
        program,
        wake: AtomicU64::new(u64::MAX),
        ended: AtomicBool::new(false),
        base_dir: ".".into(),
    });
    // Another thread runs it.
    let held = script.machine.lock().unwrap();
    let other = script.clone();
    let caller = std::thread::spawn(move || {
        // As if script `a` (any other script) were running on this thread.
        RUNNING.with(|r| r.borrow_mut().push(1));
        let t0 = std::time::Instant::now();
        let r = other.with_machine(None, |m, _| m.returned()).map(|(v, _)| v);
        (r, t0.elapsed())
    });
    let (r, waited) = caller.join().unwrap();
    drop(held);
    assert_eq!(
        r,
        Err("b: the script is busy (is it calling a script that calls it back?)".to_string())
    );
    assert!(waited >= NESTED_WAIT, "{:?}", waited);
    // Free, it answers; and a call that is not nested simply waits its turn.
    assert_eq!(
        script.advance(None, Advance::Run("", Caller::default())).0,
        Ok("1".to_string())
    );
}

/// A wait that a handler starts after the script ended still ends, though no other
/// source keeps the router running (Click's timer fires).
#[test]
fn a_wait_started_by_a_handler_keeps_the_router_running() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = run_to_end(&format!(
        "s :: Script(print >>{0} \"s-start\", end, label l, wait 0.05, print >>{0} \"s-late\", stop);
         Script(wait 0.02, write s.goto l, print >>{0} \"written\")",
        out.display()
    ));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "s-start\nwritten\ns-late\n"
    );
    assert!(r.stop_flag().was_asked());
    // A passive script's wait too.
    let r = router(&format!(
        "s :: Script(TYPE PASSIVE, wait 0.02, print >>{0} \"passive\", stop)",
        out.display()
    ))
    .unwrap();
    let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
    assert!(g.run_sources_in(&r, tsc::rdtsc()).all_done);
    r.write_handler("s.run", "").unwrap();
    let start = std::time::Instant::now();
    while !g.run_sources_in(&r, tsc::rdtsc()).all_done {
        assert!(start.elapsed() < Duration::from_secs(5));
    }
    assert!(r.stop_flag().was_asked());
    assert!(std::fs::read_to_string(&out).unwrap().ends_with("passive\n"));
}

#[test]
fn the_standard_handlers_stay_the_routers_on_a_proxy() {
    let r = router("p :: Script(TYPE PROXY, return \"proxied $0\")").unwrap();
    assert_eq!(r.read_handler("p.class").unwrap(), "Script");
    assert_eq!(r.read_handler("p.name").unwrap(), "p");
    assert_eq!(r.read_handler("p.other").unwrap(), "\"proxied other\"");
    let r = router(
        "s :: Script(TYPE PASSIVE, return \"$(class) $(s.name) $(readable s.bogus) $(readable s.get)\")",
    )
    .unwrap();
    assert_eq!(r.read_handler("s.run").unwrap(), "\"Script s false true\"");
}

#[test]
fn run_step_and_goto_set_the_caller_variables() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = router(&format!(
        "s :: Script(TYPE PASSIVE, print >>{} \"[$0][$write]\", pause, label l, print >>{} \"[$0][$write]\")",
        out.display(),
        out.display()
    ))
    .unwrap();
    r.read_handler("s.run a").unwrap();
    r.write_handler("s.run", "x").unwrap();
    r.write_handler("s.step", "").unwrap();
    r.write_handler("s.goto", "l").unwrap();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "[run][false]\n[run][true]\n[step][true]\n[goto][true]\n"
    );
}

#[test]
fn init_happens_as_the_router_starts() {
    let r = router(
        "InfiniteSource(LIMIT 5, STOP false) -> c :: Counter -> Discard;
         p :: Script(TYPE PASSIVE, init start $(c.count), export seen $(c.count), return $start)",
    )
    .unwrap();
    let mut g = r.instantiate(WorkerInfo { index: 0, count: 1 });
    // (Without STOP, the source stays, idle, after its LIMIT.)
    let start = std::time::Instant::now();
    while r.read_handler("c.count").unwrap() != "5" {
        g.run_sources_in(&r, tsc::rdtsc());
        assert!(start.elapsed() < Duration::from_secs(5));
    }
    assert_eq!(r.read_handler("p.run").unwrap(), "0");
    assert_eq!(r.read_handler("p.seen").unwrap(), "0");
}

#[test]
fn a_bad_wait_time_ends_the_step_after_the_wait() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(&["set t bogus", "wait $t", "print \"b\"", "stop"], &mut w);
    assert_eq!(w.errors, vec!["syntax error at 'wait' ('bogus')"]);
    assert_eq!((w.printed.as_str(), m.ending.clone()), ("", None));
    m.step(&p, &mut w, 0);
    assert_eq!((w.printed.as_str(), w.stops), ("b\n", 1));
}

#[test]
fn run_keeps_the_steps_a_pause_took_as_click_does() {
    let mut w = FakeWorld::default();
    let (p, mut m) = run_in(&["print \"a\"", "pause", "print \"b\""], &mut w);
    m.step(&p, &mut w, 1);
    m.restart("");
    m.step(&p, &mut w, 0);
    assert_eq!(w.printed, "a\nb\na\nb\n");
}

#[test]
fn words_of_arguments_keep_escaped_quotes() {
    let r = router("s :: Script(TYPE PASSIVE, return \"$# [$2]\")").unwrap();
    assert_eq!(r.read_handler("s.run \"a\\\" b\" c d").unwrap(), "\"3 [c]\"");
    assert_eq!(r.read_handler("s.run \\<41 42> z").unwrap(), "\"2 [z]\"");
    assert_eq!(r.read_handler("s.eq \"a\\\" b\" \"a\\\" b\"").unwrap(), "true");
    assert_eq!(r.read_handler("s.in \"x\\\" y\" \"x\\\" y\"").unwrap(), "true");
    assert_eq!(
        r.read_handler("s.sprintf \"%s|%s\" \"a\\\" b\" c").unwrap(),
        "a\" b|c"
    );
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any instructions, parsed and run (in a world without handlers), end or
        /// block without panicking.
        #[test]
        fn any_script_text_runs_without_panicking(
            insns in proptest::collection::vec("(set x|print|printn|goto l|label l|wait|pause|return|error|write|read|init y|sprintf) ?[$(){}'\"\\ a-z0-9%.#?*é/-]{0,24}", 0..8),
            steps in 0u32..4,
        ) {
            let Ok(p) = Program::parse(&insns) else { return Ok(()) };
            let mut w = FakeWorld::default();
            let mut m = Machine::new(&p);
            m.initialize(&p, &mut w);
            m.step(&p, &mut w, 0);
            m.step(&p, &mut w, steps);
            m.restart("a 'b c' $x");
            m.step(&p, &mut w, steps);
        }

        #[test]
        fn arithmetic_on_any_words_does_not_panic(
            name in prop::sample::select(super::super::functions::HANDLERS.to_vec()),
            args in "[-+0-9a-fx.e%*#'\" dsuXo]{0,24}",
        ) {
            let _ = super::super::functions::call(name, &args);
        }
    }
}
