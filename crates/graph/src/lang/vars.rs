//! `$variable` substitution in configuration strings (Click's `cp_expand` and
//! `VariableEnvironment`) and the assignment of compound arguments to formal
//! parameters (Click's `cp_assign_arguments`).

use crate::args::{skip_comment, split_words};
use std::rc::Rc;

/// A scope of variables: the file's `define`s (and command-line definitions) at depth
/// 0, a compound's formals and `define`s at the compound's depth.
pub(crate) struct Env {
    pub vars: Vec<(String, String)>,
    pub depth: usize,
    pub parent: Option<Rc<Env>>,
}

impl Env {
    pub fn lookup(&self, name: &str) -> Option<&str> {
        let mut e = Some(self);
        while let Some(env) = e {
            if let Some((_, v)) = env.vars.iter().find(|(n, _)| n == name) {
                return Some(v);
            }
            e = env.parent.as_deref();
        }
        None
    }

    /// The innermost enclosing scope (starting with `env` itself) whose depth is less
    /// than `depth`: the parent scope for a compound defined at `depth`.
    pub fn parent_of(env: &Rc<Env>, depth: usize) -> Option<Rc<Env>> {
        let mut v = Some(env.clone());
        while let Some(e) = &v {
            if e.depth < depth {
                break;
            }
            v = e.parent.clone();
        }
        v
    }

    /// Defines or overrides `name`.
    pub fn set(&mut self, name: &str, value: String) {
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name.to_string(), value)),
        }
    }
}

/// `s` in double quotes, escaped so that unquoting gives it back (Click's `cp_quote`).
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    quote_inner(s, &mut out);
    out.push('"');
    out
}

/// Click's `cp_quote` without the surrounding double quotes.
fn quote_inner(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '\\' | '"' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 32 || c as u32 == 127 => {
                let u = c as u32;
                out.push('\\');
                out.push(char::from(b'0' + (u >> 6) as u8));
                out.push(char::from(b'0' + ((u >> 3) & 7) as u8));
                out.push(char::from(b'0' + (u & 7) as u8));
            }
            c => out.push(c),
        }
    }
}

/// How a variable was written: `$NAME` (also `$?`, `$#`, `$$`), `${...}` or `$(...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarForm {
    Plain,
    Braces,
    Parens,
}

/// Click's `VariableEnvironment::expand`: the text `var` stands for, or None if it is
/// undefined. Inside braces `var` is `NAME`, optionally `[N]` (the Nth space-separated
/// word of the value, counting from 0; empty past the last), optionally `-DEFAULT`
/// (used when NAME is undefined), white space allowed around NAME. A value, and a
/// default, is itself expanded, down to Click's depth limit.
fn lookup(var: &str, form: VarForm, env: &Env, depth: usize) -> Option<String> {
    let mut name = var;
    let mut word_index = None;
    let mut default = None;
    if form == VarForm::Braces {
        let b = var.as_bytes();
        let skip_space = |mut i: usize| {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            i
        };
        let start = skip_space(0);
        let mut s = start;
        while s < b.len() && (b[s].is_ascii_alphanumeric() || b[s] == b'_') {
            s += 1;
        }
        name = &var[start..s];
        s = skip_space(s);
        if s < b.len() && b[s] == b'[' {
            let digits = skip_space(s + 1);
            s = digits;
            while s < b.len() && b[s].is_ascii_digit() {
                s += 1;
            }
            if s > digits && s < b.len() && b[s] == b']' {
                word_index = var[digits..s].parse::<usize>().ok();
                s = skip_space(s + 1);
            }
        }
        if s < b.len() && b[s] == b'-' {
            default = Some(&var[s + 1..]);
        }
    }
    match env.lookup(name) {
        Some(value) => {
            let value = expand_at(value, env, depth + 1);
            Some(match word_index {
                Some(i) => split_words(&value).into_iter().nth(i).unwrap_or_default(),
                None => value,
            })
        }
        None => default.map(|d| expand_at(d, env, depth + 1)),
    }
}

/// Substitutes `$NAME`, `${NAME}`, `${NAME[N]}`, `${NAME-DEFAULT}` and `$(NAME)` in
/// `config`, as Click's `cp_expand` does: a variable's value is expanded in turn, and a
/// variable name containing `$` is expanded before it is looked up. Nothing is
/// substituted inside single quotes or comments; inside double quotes the value is
/// backslash-quoted. Undefined variables are left as written.
pub(crate) fn expand(config: &str, env: &Env) -> String {
    expand_at(config, env, 0)
}

/// Click stops substituting past this depth of values within values, so a variable
/// defined in terms of itself ends up unexpanded instead of looping.
const MAX_DEPTH: usize = 10;

fn expand_at(config: &str, env: &Env, depth: usize) -> String {
    substitute(config, depth, false, &mut |name, form, depth| {
        lookup(name, form, env, depth)
    })
}

/// Click's `cp_expand` over any variables: replaces each `$NAME` (also `$?`, `$#`,
/// `$$`), `${...}` and `$(...)` in `config` with what `value(name, form, depth)` gives,
/// leaving a reference it gives nothing for as written. A braced or parenthesised name
/// holding a `$` is substituted first (one level deeper). Nothing is substituted inside
/// single quotes or comments, nor deeper than Click's limit; inside double quotes a
/// value is backslash-quoted, and so is one outside quotes when `quote_values` (which
/// then puts it in double quotes), so that one unquoting gives the value back.
pub(crate) fn substitute(
    config: &str,
    depth: usize,
    quote_values: bool,
    value: &mut dyn FnMut(&str, VarForm, usize) -> Option<String>,
) -> String {
    if !config.contains('$') {
        return config.to_string();
    }
    let b = config.as_bytes();
    let mut out = String::with_capacity(config.len());
    let mut copied = 0;
    let mut quote = 0u8;
    let mut s = 0;
    while s < b.len() {
        match b[s] {
            b'\\' if s + 1 < b.len() && quote == b'"' => s += 1,
            q @ (b'\'' | b'"') => {
                if quote == 0 {
                    quote = q;
                } else if quote == q {
                    quote = 0;
                }
            }
            b'/' if quote == 0 && s + 1 < b.len() && (b[s + 1] == b'/' || b[s + 1] == b'*') => {
                s = skip_comment(b, s);
                continue;
            }
            b'$' if s + 1 < b.len() && quote != b'\'' && depth <= MAX_DEPTH => {
                let before = s;
                let Some((form, name_start, name_end, end)) = reference_at(config, s) else {
                    if matches!(b[s + 1], b'{' | b'(') {
                        // Unclosed: nothing after it is substituted, as in Click.
                        break;
                    }
                    s += 1;
                    continue;
                };
                let written = &config[name_start..name_end];
                let name_has_var = form != VarForm::Plain && written.contains('$');
                let name = if name_has_var {
                    substitute(written, depth + 1, false, value)
                } else {
                    written.to_string()
                };
                out.push_str(&config[copied..before]);
                s = end;
                copied = end;
                match value(&name, form, depth) {
                    Some(text) if quote == b'"' => quote_inner(&text, &mut out),
                    Some(text) if quote_values => {
                        out.push('"');
                        quote_inner(&text, &mut out);
                        out.push('"');
                    }
                    Some(text) => out.push_str(&text),
                    None if name_has_var => {
                        out.push_str(&config[before..name_start]);
                        out.push_str(&name);
                        out.push_str(&config[name_end..end]);
                    }
                    None => copied = before,
                }
                continue;
            }
            _ => {}
        }
        s += 1;
    }
    out.push_str(&config[copied.min(config.len())..]);
    out
}

/// The reference starting with the `$` at `s`: how it is written, where its name
/// starts and ends, and the position after it; `None` if no reference starts there (or
/// a brace or parenthesis is not closed).
fn reference_at(config: &str, s: usize) -> Option<(VarForm, usize, usize, usize)> {
    let b = config.as_bytes();
    let next = b[s + 1];
    if next == b'{' {
        let close = config[s + 2..].find('}')?;
        Some((VarForm::Braces, s + 2, s + 2 + close, s + 2 + close + 1))
    } else if next == b'(' {
        let mut level = 1;
        let mut nquote = 0u8;
        let mut i = s + 2;
        while i < b.len() && level > 0 {
            match b[i] {
                b'(' if nquote == 0 => level += 1,
                b')' if nquote == 0 => level -= 1,
                q @ (b'"' | b'\'') => {
                    if nquote == 0 {
                        nquote = q;
                    } else if nquote == q {
                        nquote = 0;
                    }
                }
                b'\\' if i + 1 < b.len() && nquote != b'\'' => i += 1,
                _ => {}
            }
            i += 1;
        }
        (level == 0).then_some((VarForm::Parens, s + 2, i - 1, i))
    } else if next.is_ascii_alphanumeric() || next == b'_' {
        let mut i = s + 1;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        Some((VarForm::Plain, s + 1, i, i))
    } else if matches!(next, b'?' | b'#' | b'$') {
        Some((VarForm::Plain, s + 1, s + 2, s + 2))
    } else {
        None
    }
}

/// Assigns compound arguments to formals (`types[i]` is "" for a positional formal,
/// a keyword, or `__REST__`). Positional formals come first and are required, keyword
/// formals are required, `__REST__` collects the remaining arguments joined by ", ".
/// Returns the values in formal order, or None if the arguments do not fit.
pub(crate) fn assign_arguments(args: &[String], types: &[&str]) -> Option<Vec<String>> {
    if matches!(types.last(), None | Some(&"")) {
        return (args.len() == types.len()).then(|| args.to_vec());
    }
    let rest = types.last() == Some(&"__REST__");
    let nvalues = types.len() - usize::from(rest);
    let npos = types.iter().take_while(|t| t.is_empty()).count().min(nvalues);
    if args.len() < npos {
        return None;
    }
    let mut values: Vec<Option<String>> = vec![None; types.len()];
    let mut leftover = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if i < npos {
            values[i] = Some(arg.clone());
            continue;
        }
        let (word, value) = match arg.find(|c: char| c.is_ascii_whitespace()) {
            Some(sp) => (&arg[..sp], arg[sp..].trim_start()),
            None => (arg.as_str(), ""),
        };
        if let Some(j) = (npos..nvalues).find(|&j| types[j] == word) {
            values[j] = Some(value.to_string());
        } else if rest {
            leftover.push(arg.as_str());
        } else {
            return None;
        }
    }
    if rest {
        values[nvalues] = Some(leftover.join(", "));
    }
    values.into_iter().collect()
}
