//! A Script's execution: where it is, its variables, and one step of it — the
//! instructions from the current one until it blocks on a wait or ends.

use super::expand::{expand, Expander, Reference};
use super::program::{first_word, words, Insn, Program, Target};
use crate::args::{unquote, FromArg, Interval};

/// Jumps one step may take before the script is taken for looping and disabled, as
/// Click's Script does.
pub const MAX_JUMPS: usize = 1000;

/// What a script reaches while it runs: the router's handlers, its output, the stop
/// flag and the clock.
pub trait World {
    /// Calls read handler `handler` (`element.handler`, or a name of the script's own
    /// or a global one) with `param` (empty for none).
    fn read(&mut self, handler: &str, param: &str) -> Result<String, String>;
    /// Calls write handler `handler` with `value`.
    fn write(&mut self, handler: &str, value: &str) -> Result<(), String>;
    /// `handler` as `element.handler`, the name `read` prints.
    fn full_name(&self, handler: &str) -> String;
    /// The script's own handler `handler` names, if it names one (`get`, `s.get`).
    fn is_own(&self, handler: &str) -> Option<String>;
    /// Whether `handler` exists and can be read.
    fn readable(&self, handler: &str) -> bool;
    /// Writes what `print` prints: to standard output, or to FILE (appended to with
    /// `append`).
    fn print(&mut self, file: Option<(&str, bool)>, text: &str) -> Result<(), String>;
    /// A message for standard error (`read`'s output).
    fn message(&mut self, text: &str);
    /// An error while running, for standard error.
    fn error(&mut self, text: &str);
    /// Asks the router to stop.
    fn stop(&mut self);
    /// The time-stamp counter now.
    fn now(&self) -> u64;
    /// TSC ticks in `d`.
    fn ticks(&self, d: std::time::Duration) -> u64;
}

/// How a script's run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Its last instruction, `end`, or a `goto end` (a packet script sends the packet
    /// to output 0).
    End,
    /// `exit` (a packet script drops the packet).
    Exit,
    /// `stop`.
    Stop,
    /// `return`: the value is variable `_`.
    Return,
    /// `error [MSG]`, or a `goto error`.
    Error(String),
}

/// The handler call that runs a script (`run`, or any handler of a PROXY script):
/// `$0` and `$write` within it.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub handler: String,
    pub write: bool,
}

#[derive(Debug)]
pub struct Machine {
    /// The instruction to run next (or the wait the script is blocked at).
    pub pos: usize,
    /// The script's variables, by index, and their values; variables the script
    /// sets only at run time (`input`) are added.
    names: Vec<String>,
    values: Vec<String>,
    /// The variables `export` makes readable as handlers.
    exported: Vec<String>,
    /// `$?`: 0 after a write handler succeeded, Click's -EINVAL after one failed.
    write_status: i32,
    /// `$args` (and `$1`, `$#`): what the `run` handler was given.
    pub run_args: String,
    /// `$0`, `$write`.
    pub caller: Caller,
    /// Steps taken so far at each `pause`.
    steps_taken: Vec<u32>,
    /// While blocked at a `wait TIME`: when it ends (TSC).
    pub deadline: Option<u64>,
    initialized: bool,
    /// How the last run ended, if it has.
    pub ending: Option<Ending>,
}

/// `$?` after a failed write (Click's handlers return -EINVAL).
const WRITE_FAILED: i32 = -22;

impl Machine {
    pub fn new(program: &Program) -> Machine {
        Machine {
            pos: 0,
            names: program.vars.clone(),
            values: vec![String::new(); program.vars.len()],
            exported: program
                .exported
                .iter()
                .map(|&v| program.vars[v].clone())
                .collect(),
            write_status: 0,
            run_args: String::new(),
            caller: Caller::default(),
            steps_taken: vec![0; program.insns.len()],
            deadline: None,
            initialized: false,
            ending: None,
        }
    }

    /// Evaluates the `init` and `export` instructions, once.
    pub fn initialize(&mut self, program: &Program, world: &mut dyn World) {
        if std::mem::replace(&mut self.initialized, true) {
            return;
        }
        for insn in &program.insns {
            if let Insn::Init {
                unquote: q,
                var,
                text,
            } = insn
            {
                let v = self.expand(text, world, false);
                self.values[*var] = if *q { unquote(&v) } else { v };
            }
        }
    }

    /// Variable `name`'s value, if the script has one of that name (`args` is the
    /// run's arguments).
    pub fn get(&self, name: &str) -> Option<&str> {
        if name == "args" {
            return Some(&self.run_args);
        }
        let i = self.names.iter().position(|n| n == name)?;
        Some(&self.values[i])
    }

    /// Sets variable `name`, adding it if new (`args` is the run's arguments).
    pub fn set(&mut self, name: &str, value: String) {
        if name == "args" {
            self.run_args = value;
        } else if let Some(i) = self.names.iter().position(|n| n == name) {
            self.values[i] = value;
        } else {
            self.names.push(name.to_string());
            self.values.push(value);
        }
    }

    /// Removes the first word of variable `name` and returns it (the `shift`
    /// handler); `None` if there is no such variable.
    pub fn shift(&mut self, name: &str) -> Option<String> {
        let value = self.get(name)?.to_string();
        let (word, rest) = first_word(&value);
        let word = word.to_string();
        self.set(name, rest.to_string());
        Some(word)
    }

    /// The variable handlers: `get VAR`, `shift [VAR]` (`args` by default), and an
    /// exported variable's own handler.
    pub fn read_variable(&mut self, handler: &str, param: &str) -> Result<String, String> {
        let (var, rest) = first_word(param);
        let var = match (handler, var) {
            ("shift", "") => "args",
            ("get", "") => return Err("no variable".to_string()),
            ("get" | "shift", v) => v,
            (exported, _) => exported,
        };
        if !rest.is_empty() {
            return Err("too many arguments".to_string());
        }
        let undefined = || format!("undefined variable '{}'", var);
        if handler == "shift" {
            self.shift(var).ok_or_else(undefined)
        } else {
            self.get(var).map(str::to_string).ok_or_else(undefined)
        }
    }

    /// Whether `handler`, one of the script's own, is answered from its variables.
    pub fn is_variable_handler(&self, handler: &str) -> bool {
        handler == "get" || handler == "shift" || self.exported.iter().any(|e| e == handler)
    }

    /// Calls read handler `handler`: the script's variable handlers here (the script
    /// is running, so its state is this), the others through `world`.
    fn call_read(&mut self, world: &mut dyn World, handler: &str, param: &str) -> Result<String, String> {
        match world.is_own(handler) {
            Some(h) if self.is_variable_handler(&h) => self.read_variable(&h, param),
            _ => world.read(handler, param),
        }
    }

    /// What the run answers: the value `return` gave, or empty.
    pub fn returned(&self) -> String {
        match self.ending {
            Some(Ending::Return) => self.get("_").unwrap_or("").to_string(),
            _ => String::new(),
        }
    }

    /// The output a packet script's run sends its packet to: 0 after `end`, the
    /// number `return` gave; `None` (drop) after `exit`, `stop`, `error`, a wait or a
    /// return value that is not a port number.
    pub fn output(&self) -> Option<usize> {
        match self.ending {
            Some(Ending::End) => Some(0),
            Some(Ending::Return) => usize::from_arg(self.get("_").unwrap_or("")),
            _ => None,
        }
    }

    /// Starts over from the first instruction (the `run` handler) with `args`. Steps
    /// already taken at `pause`s count on, as in Click.
    pub fn restart(&mut self, args: &str) {
        self.pos = 0;
        self.run_args = args.to_string();
        self.deadline = None;
        self.ending = None;
    }

    /// Moves to `target` (the `goto` handler). `Err` for a label that is not an
    /// instruction (`exit`, `end`, `stop`, `error`), which Click refuses too.
    pub fn jump(&mut self, target: Target) -> Result<(), String> {
        let Target::At(i) = target else {
            return Err("jump to nonexistent label".to_string());
        };
        for s in &mut self.steps_taken[i..] {
            *s = 0;
        }
        self.pos = i;
        self.deadline = None;
        self.ending = None;
        Ok(())
    }

    /// Runs from the current instruction with `steps` steps to give to waits (a
    /// `step` write, or 1 when a wait's time has come) until the script blocks or
    /// ends. Steps left over when it blocks are dropped.
    ///
    /// A script that ended stays at the instruction that ended it (`return`, `stop`,
    /// `end`...), so a step runs that instruction again, as in Click.
    pub fn step(&mut self, program: &Program, world: &mut dyn World, steps: u32) {
        self.ending = None;
        let mut pending = steps;
        let mut jumps = 0;
        loop {
            let Some(insn) = program.insns.get(self.pos) else {
                self.pos = program.insns.len();
                self.ending = Some(Ending::End);
                return;
            };
            let at = self.pos;
            self.pos += 1;
            match insn {
                Insn::WaitSteps(n) => {
                    let taken = &mut self.steps_taken[at];
                    let take = pending.min(n - *taken);
                    *taken += take;
                    pending -= take;
                    if *taken < *n {
                        self.pos = at;
                        return;
                    }
                }
                Insn::WaitTime(text) => {
                    if pending > 0 {
                        pending -= 1;
                        self.deadline = None;
                    } else if self.deadline.is_some() {
                        self.pos = at;
                        return;
                    } else {
                        let time = self.expand(text, world, false);
                        match Interval::from_arg(&time) {
                            Some(Interval(ns)) => {
                                let d = std::time::Duration::from_nanos(ns);
                                self.deadline = Some(world.now().saturating_add(world.ticks(d)));
                                self.pos = at;
                                return;
                            }
                            // Click reports it and ends the step after the wait: the
                            // script goes on at the next step.
                            None => {
                                world.error(&format!("syntax error at 'wait' ('{}')", time));
                                return;
                            }
                        }
                    }
                }
                Insn::Print {
                    newline,
                    unquote: q,
                    text,
                } => self.print(text, *newline, *q, world),
                Insn::Read { unquote: q, text } => {
                    let call = self.expand(text, world, false);
                    let (handler, param) = call_parts(&call, *q);
                    match self.call_read(world, handler, &param) {
                        Ok(v) => {
                            let v = v.strip_suffix('\n').unwrap_or(&v);
                            world.message(&format!("{}:\n{}", world.full_name(handler), v));
                        }
                        Err(e) => world.error(&e),
                    }
                }
                Insn::Write { unquote: q, text } => {
                    let call = self.expand(text, world, false);
                    let (handler, value) = call_parts(&call, *q);
                    let written = match world.is_own(handler).as_deref() {
                        // The script's own variables are this state.
                        Some("set") => match first_word(&value) {
                            ("", _) => Err("no variable".to_string()),
                            (var, v) => {
                                let v = v.to_string();
                                self.set(var, v);
                                Ok(())
                            }
                        },
                        _ => world.write(handler, &value),
                    };
                    self.write_status = match written {
                        Ok(()) => 0,
                        Err(e) => {
                            world.error(&e);
                            WRITE_FAILED
                        }
                    };
                }
                Insn::Set {
                    unquote: q,
                    var,
                    text,
                    ends,
                } => {
                    let v = self.expand(text, world, false);
                    self.values[*var] = if *q { unquote(&v) } else { v };
                    if *ends {
                        self.pos = at;
                        self.ending = Some(Ending::Return);
                        return;
                    }
                }
                Insn::Init { .. } | Insn::Label(_) => {}
                Insn::Goto { target, condition } => {
                    let c = self.expand(condition, world, false);
                    let go = if c.trim().is_empty() {
                        true
                    } else {
                        match bool::from_arg(c.trim()) {
                            Some(b) => b,
                            None => {
                                world.error(&format!("bad condition '{}'", c));
                                false
                            }
                        }
                    };
                    if go {
                        let ending = match *target {
                            Target::At(i) => {
                                // The pauses a backward jump goes back over wait again.
                                for s in self.steps_taken.iter_mut().take(at).skip(i) {
                                    *s = 0;
                                }
                                self.pos = i;
                                None
                            }
                            Target::End => Some(Ending::End),
                            Target::Exit => Some(Ending::Exit),
                            Target::Stop => {
                                world.stop();
                                Some(Ending::Stop)
                            }
                            Target::Error => Some(Ending::Error(String::new())),
                        };
                        if let Some(e) = ending {
                            self.pos = at;
                            self.ending = Some(e);
                            return;
                        }
                    }
                }
                Insn::Error { unquote: q, text } => {
                    let m = self.expand(text, world, false);
                    let m = if *q { unquote(&m) } else { m };
                    if !m.is_empty() {
                        world.error(&m);
                    }
                    self.pos = at;
                    self.ending = Some(Ending::Error(m));
                    return;
                }
            }
            if self.pos != at + 1 {
                jumps += 1;
                if jumps >= MAX_JUMPS {
                    world.error("too many jumps, giving up");
                    self.pos = program.insns.len();
                    self.deadline = None;
                    self.ending = Some(Ending::End);
                    return;
                }
            }
        }
    }

    /// `print [>FILE | >>FILE] [TEXT | HANDLER]`: text starting with a letter, `@` or
    /// `_` names a read handler (whose parameter `printq` unquotes); other text is
    /// printed with one layer of quotes removed.
    fn print(&mut self, text: &str, newline: bool, unquote_param: bool, world: &mut dyn World) {
        let mut text = text;
        let mut file = None;
        if let Some(rest) = text.strip_prefix('>') {
            let (append, rest) = match rest.strip_prefix('>') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let (name, rest) = first_word(rest);
            if !name.is_empty() && name != "-" {
                file = Some((unquote(name), append));
            }
            text = rest;
        }
        let handler = text
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'@' || c == b'_');
        let mut out = if handler {
            let call = self.expand(text, world, false);
            let (handler, param) = call_parts(&call, unquote_param);
            match self.call_read(world, handler, &param) {
                Ok(v) => v,
                Err(e) => {
                    world.error(&e);
                    return;
                }
            }
        } else {
            unquote(&self.expand(text, world, true))
        };
        if newline && !out.ends_with('\n') {
            out.push('\n');
        }
        if let Err(e) = world.print(file.as_ref().map(|(f, a)| (f.as_str(), *a)), &out) {
            world.error(&e);
        }
    }

    fn expand(&mut self, text: &str, world: &mut dyn World, quote_values: bool) -> String {
        let mut ex = ScriptExpander { machine: self, world };
        expand(text, &mut ex, quote_values)
    }
}

/// A handler call's handler name and its parameter, unquoted for the `q` forms.
fn call_parts(call: &str, unquote_param: bool) -> (&str, String) {
    let (handler, param) = first_word(call);
    (
        handler,
        if unquote_param {
            unquote(param)
        } else {
            param.to_string()
        },
    )
}

struct ScriptExpander<'a> {
    machine: &'a mut Machine,
    world: &'a mut dyn World,
}

impl Expander for ScriptExpander<'_> {
    fn value(&mut self, name: &str, how: Reference) -> Option<String> {
        if how == Reference::Call {
            let (handler, param) = first_word(name);
            // A handler that exists answers, with nothing if its call failed (the error
            // is reported); a reference to one that does not stays as written.
            return match self.machine.call_read(self.world, handler, param) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.world.error(&e);
                    self.world.readable(handler).then(String::new)
                }
            };
        }
        let m = &*self.machine;
        // Script variables first, as in Click: a variable may be named `args`.
        if let Some(v) = m.get(name) {
            return Some(v.to_string());
        }
        let args = || words(&m.run_args);
        match name {
            "?" => Some(m.write_status.to_string()),
            "$" => Some(std::process::id().to_string()),
            "0" => Some(m.caller.handler.clone()),
            "write" => Some(m.caller.write.to_string()),
            "#" => Some(args().len().to_string()),
            n if n.starts_with(|c: char| ('1'..='9').contains(&c)) => {
                let k: usize = n.parse().ok()?;
                Some(args().into_iter().nth(k - 1).unwrap_or_default().to_string())
            }
            _ => None,
        }
    }
}
