//! A Script's instructions, parsed from its configuration arguments as Click's Script
//! reads them: one instruction per argument, its first word the instruction's name.

use crate::args::{FromArg, Interval};
use std::time::Duration;

/// Where a `goto` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The instruction at this index (a label's, or 0 for `begin` and `loop`).
    At(usize),
    /// `exit` and `end`: the script ends.
    End,
    /// `error`: the script ends with an error.
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Insn {
    /// `pause [COUNT]`, `wait` with no time, `wait_step`, `wait_stop`: until the `step`
    /// handler has been written COUNT times.
    WaitSteps(u32),
    /// `wait TIME`, `wait_time`, `wait_for`: until TIME has passed or a step.
    WaitTime(Duration),
    /// `print`, `printn` (no newline).
    Print {
        newline: bool,
        text: String,
    },
    /// `read`, `readq`: a read handler's name and value to standard error.
    Read {
        unquote: bool,
        text: String,
    },
    /// `write`, `writeq`: calls a write handler.
    Write {
        unquote: bool,
        text: String,
    },
    /// `set`, `setq`; `return`, `returnq` set `_` and end (`ends`).
    Set {
        unquote: bool,
        var: usize,
        text: String,
        ends: bool,
    },
    /// `init`, `initq`: evaluated once, when the script is first run.
    Init {
        unquote: bool,
        var: usize,
        text: String,
    },
    Label(String),
    /// `goto LABEL [CONDITION]`, `loop`.
    Goto {
        target: Target,
        condition: String,
    },
    /// `stop`: asks the router to stop, and ends the script.
    Stop,
    /// `end`, `exit`.
    End,
    /// `error [MSG]`, `errorq [MSG]`.
    Error {
        unquote: bool,
        text: String,
    },
}

/// Parsed instructions and the variables they name (index into `vars`).
#[derive(Debug, Default)]
pub struct Program {
    pub insns: Vec<Insn>,
    pub vars: Vec<String>,
}

impl Program {
    /// Parses `args` (raw, quotes kept). Every bad instruction is reported, as Click
    /// reports each: the errors are returned together.
    pub fn parse(args: &[String]) -> Result<Program, Vec<String>> {
        let mut p = Program::default();
        let mut errors = Vec::new();
        // Gotos name labels that may come later: resolved at the end.
        let mut gotos = Vec::new();
        for arg in args {
            let (name, rest) = first_word(arg);
            if name.is_empty() {
                continue;
            }
            let syntax = || format!("syntax error at '{}'", name);
            let text = rest.to_string();
            let insn = match name {
                "wait" if rest.is_empty() => Some(Insn::WaitSteps(1)),
                "pause" | "wait_step" | "wait_stop" if rest.is_empty() => Some(Insn::WaitSteps(1)),
                "pause" | "wait_step" | "wait_stop" => u32::from_arg(rest).map(Insn::WaitSteps),
                "wait" | "wait_time" | "wait_for" => {
                    Interval::from_arg(rest).map(|i| Insn::WaitTime(Duration::from_nanos(i.0)))
                }
                "print" | "printn" => Some(Insn::Print {
                    newline: name == "print",
                    text,
                }),
                "read" | "readq" => Some(Insn::Read {
                    unquote: name == "readq",
                    text,
                }),
                "write" | "writeq" => Some(Insn::Write {
                    unquote: name == "writeq",
                    text,
                }),
                "set" | "setq" | "init" | "initq" => {
                    let (var, value) = first_word(rest);
                    if var.is_empty() || name.starts_with("set") && value.is_empty() {
                        None
                    } else {
                        let var = p.variable(var);
                        let (unquote, text) = (name.ends_with('q'), value.to_string());
                        Some(if name.starts_with("set") {
                            Insn::Set {
                                unquote,
                                var,
                                text,
                                ends: false,
                            }
                        } else {
                            Insn::Init { unquote, var, text }
                        })
                    }
                }
                "return" | "returnq" => Some(Insn::Set {
                    unquote: name == "returnq",
                    var: p.variable("_"),
                    text,
                    ends: true,
                }),
                "label" => match first_word(rest) {
                    (word, "") if !word.is_empty() => Some(Insn::Label(word.to_string())),
                    _ => None,
                },
                "goto" => {
                    gotos.push((p.insns.len(), text));
                    Some(Insn::Goto {
                        target: Target::At(0),
                        condition: String::new(),
                    })
                }
                "loop" | "end" | "exit" | "stop" if !rest.is_empty() => None,
                "loop" => Some(Insn::Goto {
                    target: Target::At(0),
                    condition: String::new(),
                }),
                "end" | "exit" => Some(Insn::End),
                "stop" => Some(Insn::Stop),
                "error" | "errorq" => Some(Insn::Error {
                    unquote: name == "errorq",
                    text,
                }),
                _ => None,
            };
            match insn {
                Some(i) => p.insns.push(i),
                None => errors.push(syntax()),
            }
        }
        for (at, text) in gotos {
            let (label, condition) = first_word(&text);
            // A goto without a label goes to the beginning, as `loop` does.
            let target = if label.is_empty() {
                Some(Target::At(0))
            } else {
                p.label(label)
            };
            match target {
                Some(target) => {
                    p.insns[at] = Insn::Goto {
                        target,
                        condition: condition.to_string(),
                    }
                }
                None => errors.push(format!("no such label '{}'", label)),
            }
        }
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors)
        }
    }

    /// The index of variable `name`, added if new.
    fn variable(&mut self, name: &str) -> usize {
        match self.vars.iter().position(|v| v == name) {
            Some(i) => i,
            None => {
                self.vars.push(name.to_string());
                self.vars.len() - 1
            }
        }
    }

    /// Where label `name` is: a `label` instruction's, or Click's built-in `begin`,
    /// `exit`, `end` and `error`.
    pub fn label(&self, name: &str) -> Option<Target> {
        let at = self
            .insns
            .iter()
            .position(|i| matches!(i, Insn::Label(l) if l == name));
        match (at, name) {
            (Some(i), _) => Some(Target::At(i)),
            (None, "begin") => Some(Target::At(0)),
            (None, "exit" | "end") => Some(Target::End),
            (None, "error") => Some(Target::Error),
            _ => None,
        }
    }
}

/// The first space-separated word of `s` (a quoted string counts as part of a word)
/// and the rest, trimmed (Click's `cp_pop_spacevec`).
pub fn first_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let b = s.as_bytes();
    let mut i = 0;
    let mut quote = 0u8;
    while i < b.len() {
        match b[i] {
            c @ (b'"' | b'\'') if quote == 0 => quote = c,
            c if c == quote => quote = 0,
            b'\\' if quote == b'"' => i += 1,
            c if quote == 0 && c.is_ascii_whitespace() => break,
            _ => {}
        }
        i += 1;
    }
    let i = i.min(b.len());
    (&s[..i], s[i..].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Program, Vec<String>> {
        Program::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn instructions_and_their_arguments() {
        let p = parse(&[
            "set x 0",
            "label top",
            "print $x",
            "wait 1.5s",
            "pause",
            "pause 3",
            "goto top $(lt $x 5)",
            "loop",
            "return $x",
            "stop",
        ])
        .unwrap();
        assert_eq!(p.vars, vec!["x", "_"]);
        assert_eq!(
            p.insns,
            vec![
                Insn::Set {
                    unquote: false,
                    var: 0,
                    text: "0".into(),
                    ends: false
                },
                Insn::Label("top".into()),
                Insn::Print {
                    newline: true,
                    text: "$x".into()
                },
                Insn::WaitTime(Duration::from_millis(1500)),
                Insn::WaitSteps(1),
                Insn::WaitSteps(3),
                Insn::Goto {
                    target: Target::At(1),
                    condition: "$(lt $x 5)".into()
                },
                Insn::Goto {
                    target: Target::At(0),
                    condition: String::new()
                },
                Insn::Set {
                    unquote: false,
                    var: 1,
                    text: "$x".into(),
                    ends: true
                },
                Insn::Stop,
            ]
        );
    }

    #[test]
    fn labels_may_come_after_their_goto_and_builtin_ones_exist() {
        let p = parse(&["goto done", "goto exit $c", "goto error", "label done"]).unwrap();
        assert_eq!(
            p.insns[..3],
            [
                Insn::Goto {
                    target: Target::At(3),
                    condition: String::new()
                },
                Insn::Goto {
                    target: Target::End,
                    condition: "$c".into()
                },
                Insn::Goto {
                    target: Target::Error,
                    condition: String::new()
                },
            ]
        );
    }

    #[test]
    fn every_bad_instruction_is_reported() {
        assert_eq!(
            parse(&[
                "frob x",
                "wait soon",
                "set x",
                "label a b",
                "goto nowhere",
                "stop now",
                "pause -1"
            ])
            .unwrap_err(),
            vec![
                "syntax error at 'frob'",
                "syntax error at 'wait'",
                "syntax error at 'set'",
                "syntax error at 'label'",
                "syntax error at 'stop'",
                "syntax error at 'pause'",
                "no such label 'nowhere'",
            ]
        );
    }

    #[test]
    fn first_word_keeps_quotes_together() {
        assert_eq!(first_word("  print \"a b\" c "), ("print", "\"a b\" c"));
        assert_eq!(first_word("\"a b\"c d"), ("\"a b\"c", "d"));
        assert_eq!(first_word("one"), ("one", ""));
        assert_eq!(first_word(""), ("", ""));
    }
}
