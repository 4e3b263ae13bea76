//! A Script's execution: where it is, its variables, and one step of it — the
//! instructions from the current one until it blocks on a wait or ends.

use super::expand::{expand, Expander, Reference};
use super::program::{first_word, Insn, Program, Target};
use crate::args::{split_words, unquote, FromArg};

/// Jumps one step may take before the script is taken for looping and disabled, as
/// Click's Script does.
pub const MAX_JUMPS: usize = 1000;

/// What a script reaches while it runs: the router's handlers, its output, the stop
/// flag and the clock.
pub trait World {
    /// Calls a read handler: `HANDLER [ARGS]`.
    fn read(&mut self, call: &str) -> Result<String, String>;
    /// Calls a write handler: `HANDLER [VALUE]`.
    fn write(&mut self, call: &str) -> Result<(), String>;
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
    /// Its last instruction, `end`, `exit`, or a `goto` to `end`/`exit`.
    End,
    /// `stop`.
    Stop,
    /// `return`: the value is variable `_`.
    Return,
    /// `error [MSG]`, or a `goto error`.
    Error(String),
}

#[derive(Debug)]
pub struct Machine {
    /// The instruction to run next (or the wait the script is blocked at).
    pub pos: usize,
    /// The program's variables, by index, and their values.
    names: Vec<String>,
    values: Vec<String>,
    /// `$?`: 0 after a write handler succeeded, Click's -EINVAL after one failed.
    write_status: i32,
    /// `$args` (and `$1`, `$#`): what the `run` handler was given.
    pub run_args: String,
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
            write_status: 0,
            run_args: String::new(),
            steps_taken: vec![0; program.insns.len()],
            deadline: None,
            initialized: false,
            ending: None,
        }
    }

    /// Evaluates the `init` instructions, once.
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

    /// The value of variable `_`, which `return` sets.
    pub fn returned(&self) -> String {
        match self.names.iter().position(|v| v == "_") {
            Some(i) if self.ending == Some(Ending::Return) => self.values[i].clone(),
            _ => String::new(),
        }
    }

    /// Starts over from the first instruction (the `run` handler) with `args`.
    pub fn restart(&mut self, args: &str) {
        self.pos = 0;
        self.run_args = args.to_string();
        self.deadline = None;
        self.ending = None;
        self.steps_taken.iter_mut().for_each(|s| *s = 0);
    }

    /// Moves to `target` (the `goto` handler). `Err` for a label that is not an
    /// instruction (`exit`, `end`, `error`), which Click refuses too.
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
                Insn::WaitTime(d) => {
                    if pending > 0 {
                        pending -= 1;
                        self.deadline = None;
                    } else {
                        if self.deadline.is_none() {
                            self.deadline = Some(world.now().saturating_add(world.ticks(*d)));
                        }
                        self.pos = at;
                        return;
                    }
                }
                Insn::Print { newline, text } => self.print(text, *newline, world),
                Insn::Read { unquote: q, text } => {
                    let arg = if *q { unquote(text) } else { text.clone() };
                    let call = self.expand(&arg, world, false);
                    match world.read(&call) {
                        Ok(v) => {
                            let (name, _) = first_word(&call);
                            let v = v.strip_suffix('\n').unwrap_or(&v);
                            world.message(&format!("{}:\n{}", name, v));
                        }
                        Err(e) => world.error(&e),
                    }
                }
                Insn::Write { unquote: q, text } => {
                    let arg = if *q { unquote(text) } else { text.clone() };
                    let call = self.expand(&arg, world, false);
                    self.write_status = match world.write(&call) {
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
                        match *target {
                            Target::At(i) => {
                                // The pauses a backward jump goes back over wait again.
                                for s in self.steps_taken.iter_mut().take(at).skip(i) {
                                    *s = 0;
                                }
                                self.pos = i;
                            }
                            Target::End => {
                                self.pos = at;
                                self.ending = Some(Ending::End);
                                return;
                            }
                            Target::Error => {
                                self.pos = at;
                                self.ending = Some(Ending::Error(String::new()));
                                return;
                            }
                        }
                    }
                }
                Insn::Stop => {
                    world.stop();
                    self.pos = at;
                    self.ending = Some(Ending::Stop);
                    return;
                }
                Insn::End => {
                    self.pos = at;
                    self.ending = Some(Ending::End);
                    return;
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
    /// `_` names a read handler; other text is printed with one layer of quotes removed.
    fn print(&mut self, text: &str, newline: bool, world: &mut dyn World) {
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
            match world.read(&call) {
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

struct ScriptExpander<'a> {
    machine: &'a Machine,
    world: &'a mut dyn World,
}

impl Expander for ScriptExpander<'_> {
    fn value(&mut self, name: &str, how: Reference) -> Option<String> {
        let m = self.machine;
        if how == Reference::Call {
            return match self.world.read(name) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.world.error(&e);
                    None
                }
            };
        }
        // Script variables first, as in Click: a variable may be named `args`.
        if let Some(i) = m.names.iter().position(|x| x == name) {
            return Some(m.values[i].clone());
        }
        let args = || split_words(&m.run_args);
        match name {
            "?" => Some(m.write_status.to_string()),
            "args" => Some(m.run_args.clone()),
            "#" => Some(args().len().to_string()),
            n if n.starts_with(|c: char| ('1'..='9').contains(&c)) => {
                let k: usize = n.parse().ok()?;
                Some(args().into_iter().nth(k - 1).unwrap_or_default())
            }
            _ => None,
        }
    }
}
