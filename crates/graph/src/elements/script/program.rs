//! A Script's instructions, parsed from its configuration arguments as Click's Script
//! reads them: one instruction per argument, its first word the instruction's name.

use crate::args::{FromArg, Interval};

/// Where a `goto` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The instruction at this index (a label's, or 0 for `begin` and `loop`).
    At(usize),
    /// `end`: the script ends (a packet script emits the packet on output 0).
    End,
    /// `exit`: the script ends (a packet script drops the packet).
    Exit,
    /// `stop`: the script ends and asks the router to stop.
    Stop,
    /// `error`, `errorq`: the script ends with an error.
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Insn {
    /// `pause [COUNT]`, `wait` with no time, `wait_step`, `wait_stop`: until the `step`
    /// handler has been written COUNT times.
    WaitSteps(u32),
    /// `wait TIME`, `wait_time`, `wait_for`: until TIME (substituted when reached) has
    /// passed or a step.
    WaitTime(String),
    /// `print`, `printn` (no newline), `printq`, `printnq` (a handler's parameter
    /// unquoted); `save` and `append` are prints to a file.
    Print {
        newline: bool,
        unquote: bool,
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
    /// `init`, `initq`, `export`, `exportq`: evaluated once, when the script is first
    /// run.
    Init {
        unquote: bool,
        var: usize,
        text: String,
    },
    Label(String),
    /// `goto LABEL [CONDITION]`, `loop`; also `end`, `exit`, `stop` (unconditional
    /// gotos to their labels).
    Goto {
        target: Target,
        condition: String,
    },
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
    /// Variables `export` makes readable as handlers of the same name.
    pub exported: Vec<usize>,
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
                // A time with no `$` in it must be one now; others are read when reached.
                "wait" | "wait_time" | "wait_for" => {
                    (rest.contains('$') || Interval::from_arg(rest).is_some()).then_some(Insn::WaitTime(text))
                }
                "print" | "printn" | "printq" | "printnq" => Some(Insn::Print {
                    newline: !name.starts_with("printn"),
                    unquote: name.ends_with('q'),
                    text,
                }),
                // `save TEXT [FILE]` is `print >FILE TEXT`, `append` `print >>FILE TEXT`.
                "save" | "append" => {
                    let (what, file) = first_word(rest);
                    let file = if file.is_empty() { "-" } else { file };
                    let redirect = if name == "save" { ">" } else { ">>" };
                    Some(Insn::Print {
                        newline: true,
                        unquote: false,
                        text: format!("{}{} {}", redirect, file, what),
                    })
                }
                "read" | "readq" => Some(Insn::Read {
                    unquote: name == "readq",
                    text,
                }),
                "write" | "writeq" => Some(Insn::Write {
                    unquote: name == "writeq",
                    text,
                }),
                "set" | "setq" | "init" | "initq" | "export" | "exportq" => {
                    let (var, value) = first_word(rest);
                    if var.is_empty() || name.starts_with("set") && value.is_empty() {
                        None
                    } else {
                        let var = p.variable(var);
                        let (unquote, text) = (name.ends_with('q'), value.to_string());
                        if name.starts_with("export") && !p.exported.contains(&var) {
                            p.exported.push(var);
                        }
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
                "loop" | "end" | "exit" | "stop" => Some(Insn::Goto {
                    target: match name {
                        "loop" => Target::At(0),
                        "end" => Target::End,
                        "exit" => Target::Exit,
                        _ => Target::Stop,
                    },
                    condition: String::new(),
                }),
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

    /// Where label `name` is: a `label` instruction's, or Click's built-in `begin`
    /// and `loop` (the first instruction), `end`, `exit`, `stop` and `error`.
    pub fn label(&self, name: &str) -> Option<Target> {
        let at = self
            .insns
            .iter()
            .position(|i| matches!(i, Insn::Label(l) if l == name));
        match (at, name) {
            (Some(i), _) => Some(Target::At(i)),
            (None, "begin" | "loop") => Some(Target::At(0)),
            (None, "end") => Some(Target::End),
            (None, "exit") => Some(Target::Exit),
            (None, "stop") => Some(Target::Stop),
            (None, "error" | "errorq") => Some(Target::Error),
            _ => None,
        }
    }
}

/// The first space-separated word of `s` and the rest, trimmed (Click's
/// `cp_shift_spacevec`): a quoted string (with its backslash escapes, in double quotes)
/// and a `\<...>` hex string count as part of a word.
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
            b'\\' if quote == 0 && b.get(i + 1) == Some(&b'<') => {
                i = b[i..].iter().position(|&c| c == b'>').map_or(b.len(), |p| i + p);
            }
            c if quote == 0 && c.is_ascii_whitespace() => break,
            _ => {}
        }
        i += 1;
    }
    // (A backslash before a multibyte character may leave `i` inside it.)
    let mut i = i.min(b.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    (&s[..i], s[i..].trim())
}

/// Every space-separated word of `s`, as [`first_word`] takes them.
pub fn words(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let (w, r) = first_word(rest);
        if w.is_empty() {
            return out;
        }
        out.push(w);
        rest = r;
    }
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
                    unquote: false,
                    text: "$x".into()
                },
                Insn::WaitTime("1.5s".into()),
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
                Insn::Goto {
                    target: Target::Stop,
                    condition: String::new()
                },
            ]
        );
    }

    #[test]
    fn labels_may_come_after_their_goto_and_builtin_ones_exist() {
        let p = parse(&[
            "goto done",
            "goto exit $c",
            "goto error",
            "label done",
            "goto loop",
            "goto stop",
        ])
        .unwrap();
        assert_eq!(
            p.insns[..3],
            [
                Insn::Goto {
                    target: Target::At(3),
                    condition: String::new()
                },
                Insn::Goto {
                    target: Target::Exit,
                    condition: "$c".into()
                },
                Insn::Goto {
                    target: Target::Error,
                    condition: String::new()
                },
            ]
        );
        assert_eq!(
            p.insns[4..],
            [
                Insn::Goto {
                    target: Target::At(0),
                    condition: String::new()
                },
                Insn::Goto {
                    target: Target::Stop,
                    condition: String::new()
                },
            ]
        );
    }

    #[test]
    fn save_append_export_and_late_waits() {
        let p = parse(&["save $x out", "append c.count", "exportq v \"a b\"", "wait $t"]).unwrap();
        assert_eq!(p.exported, vec![0]);
        assert_eq!(
            p.insns,
            vec![
                Insn::Print {
                    newline: true,
                    unquote: false,
                    text: ">out $x".into()
                },
                Insn::Print {
                    newline: true,
                    unquote: false,
                    text: ">>- c.count".into()
                },
                Insn::Init {
                    unquote: true,
                    var: 0,
                    text: "\"a b\"".into()
                },
                Insn::WaitTime("$t".into()),
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
    fn words_keep_escaped_quotes_and_hex_strings_together() {
        assert_eq!(words(r#""a\" b" c d"#), vec![r#""a\" b""#, "c", "d"]);
        assert_eq!(words(r"\<41 42> z"), vec![r"\<41 42>", "z"]);
        assert_eq!(words(r"'a\' b"), vec![r"'a\'", "b"]);
        assert_eq!(words("  "), Vec::<&str>::new());
        assert_eq!(words("\\é x"), vec!["\\é", "x"]);
    }

    #[test]
    fn first_word_keeps_quotes_together() {
        assert_eq!(first_word("  print \"a b\" c "), ("print", "\"a b\" c"));
        assert_eq!(first_word("\"a b\"c d"), ("\"a b\"c", "d"));
        assert_eq!(first_word("one"), ("one", ""));
        assert_eq!(first_word(""), ("", ""));
    }
}
