//! Tokens of the Click language (after Click's `lib/lexer.cc`): identifiers that may
//! contain `/` between word characters, `$variables`, `->`, `=>`, `::`, `||`, `...`,
//! the keywords `elementclass`, `require`, `provide` and `define`, single characters,
//! `//` and `/* */` comments, `# line "file"` directives at the start of a line, and
//! raw configuration strings between balanced parentheses.

use crate::error::{ConfigError, Landmark};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident,
    Variable,
    Arrow,
    DArrow,
    TwoColon,
    TwoBar,
    ThreeDot,
    Elementclass,
    Require,
    Provide,
    Define,
    Char(char),
    Eof,
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub kind: Tok,
    /// Identifier text, variable name (without `$`), or the token as written.
    pub text: String,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn is_char(&self, c: char) -> bool {
        self.kind == Tok::Char(c)
    }

    pub fn is_arrow(&self) -> bool {
        matches!(self.kind, Tok::Arrow | Tok::DArrow)
    }

    /// How Click names a token in "expected ..." messages.
    pub fn describe(kind: Tok) -> String {
        match kind {
            Tok::Ident => "identifier".into(),
            Tok::Variable => "variable".into(),
            Tok::Arrow => "'->'".into(),
            Tok::DArrow => "'=>'".into(),
            Tok::TwoColon => "'::'".into(),
            Tok::TwoBar => "'||'".into(),
            Tok::ThreeDot => "'...'".into(),
            Tok::Elementclass => "'elementclass'".into(),
            Tok::Require => "'require'".into(),
            Tok::Provide => "'provide'".into(),
            Tok::Define => "'define'".into(),
            Tok::Char(c) => format!("'{}'", c),
            Tok::Eof => "end of file".into(),
        }
    }
}

/// A `# line "file"` directive: from byte `at` on (the start of the following physical
/// line, whose index is `phys_line`), lines are numbered from `line` in `file`.
struct Directive {
    at: usize,
    phys_line: usize,
    line: u32,
    file: Arc<str>,
}

/// Maps byte offsets to landmarks.
pub(crate) struct SourceMap<'a> {
    text: &'a str,
    file: Arc<str>,
    line_starts: Vec<usize>,
    directives: Vec<Directive>,
}

impl<'a> SourceMap<'a> {
    fn new(text: &'a str, file: &str) -> SourceMap<'a> {
        let b = text.as_bytes();
        let mut line_starts = vec![0];
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\n' => line_starts.push(i + 1),
                b'\r' => {
                    if i + 1 < b.len() && b[i + 1] == b'\n' {
                        i += 1;
                    }
                    line_starts.push(i + 1);
                }
                _ => {}
            }
            i += 1;
        }
        SourceMap {
            text,
            file: Arc::from(file),
            line_starts,
            directives: Vec::new(),
        }
    }

    fn phys_line(&self, pos: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= pos).saturating_sub(1)
    }

    pub fn landmark(&self, pos: usize) -> Landmark {
        let pos = pos.min(self.text.len());
        let phys = self.phys_line(pos);
        let start = self.line_starts[phys];
        let mut end = self.line_starts.get(phys + 1).copied().unwrap_or(self.text.len());
        let bytes = self.text.as_bytes();
        while end > start && matches!(bytes[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        let (file, line) = match self.directives.iter().rev().find(|d| d.at <= pos) {
            Some(d) => (
                d.file.clone(),
                d.line.saturating_add(phys.saturating_sub(d.phys_line) as u32),
            ),
            None => (self.file.clone(), (phys + 1) as u32),
        };
        let line_text = self.text.get(start..end).unwrap_or("");
        let column = self.text.get(start..pos).map_or(1, |s| s.chars().count() + 1) as u32;
        Landmark {
            file,
            line,
            column,
            source_line: Arc::from(line_text),
        }
    }

    pub fn error(&self, pos: usize, message: impl Into<String>) -> ConfigError {
        ConfigError::at(&self.landmark(pos), message)
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'@'
}

pub(crate) struct Lexer<'a> {
    text: &'a str,
    b: &'a [u8],
    pub pos: usize,
    pub map: SourceMap<'a>,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str, file: &str) -> Lexer<'a> {
        Lexer {
            text,
            b: text.as_bytes(),
            pos: 0,
            map: SourceMap::new(text, file),
        }
    }

    fn at_line_start(&self, s: usize) -> bool {
        s == 0 || matches!(self.b[s - 1], b'\n' | b'\r')
    }

    /// Position after the end of the line containing `s` (after its newline).
    fn skip_line(&self, mut s: usize) -> usize {
        while s < self.b.len() {
            match self.b[s] {
                b'\n' => return s + 1,
                b'\r' => {
                    return if s + 1 < self.b.len() && self.b[s + 1] == b'\n' {
                        s + 2
                    } else {
                        s + 1
                    }
                }
                _ => s += 1,
            }
        }
        s
    }

    /// Position after the `*/` closing a comment whose body starts at `s` (or the end).
    fn skip_slash_star(&self, mut s: usize) -> usize {
        while s + 1 < self.b.len() {
            if self.b[s] == b'*' && self.b[s + 1] == b'/' {
                return s + 2;
            }
            s += 1;
        }
        self.b.len()
    }

    /// Position after the `>` closing a `\<...>` sequence whose body starts at `s`.
    fn skip_backslash_angle(&self, mut s: usize) -> usize {
        while s < self.b.len() {
            match self.b[s] {
                b'/' if s + 1 < self.b.len() && self.b[s + 1] == b'/' => s = self.skip_line(s + 2),
                b'/' if s + 1 < self.b.len() && self.b[s + 1] == b'*' => s = self.skip_slash_star(s + 2),
                b'>' => return s + 1,
                _ => s += 1,
            }
        }
        self.b.len()
    }

    /// Position after the quote `endc` closing a string whose body starts at `s`.
    fn skip_quote(&self, mut s: usize, endc: u8) -> usize {
        while s < self.b.len() {
            let c = self.b[s];
            if c == b'\\' && endc == b'"' && s + 1 < self.b.len() {
                if self.b[s + 1] == b'<' {
                    s = self.skip_backslash_angle(s + 2);
                } else {
                    s += 2;
                }
            } else if c == endc {
                return s + 1;
            } else {
                s += 1;
            }
        }
        self.b.len()
    }

    /// Processes the line directive whose `#` is at `s`; returns the position of the
    /// newline ending it (or the end of the text).
    fn line_directive(&mut self, mut s: usize) -> Result<usize, ConfigError> {
        let hash = s;
        let b = self.b;
        s += 1;
        while s < b.len() && matches!(b[s], b' ' | b'\t') {
            s += 1;
        }
        if s + 4 < b.len() && &b[s..s + 4] == b"line" && matches!(b[s + 4], b' ' | b'\t') {
            s += 5;
            while s < b.len() && matches!(b[s], b' ' | b'\t') {
                s += 1;
            }
        }
        if s >= b.len() || !b[s].is_ascii_digit() {
            return Err(self.map.error(hash, "unknown preprocessor directive"));
        }
        let mut line: u32 = 0;
        while s < b.len() && b[s].is_ascii_digit() {
            line = line.saturating_mul(10).saturating_add(u32::from(b[s] - b'0'));
            s += 1;
        }
        while s < b.len() && matches!(b[s], b' ' | b'\t') {
            s += 1;
        }
        let mut file = None;
        if s < b.len() && b[s] == b'"' {
            let first = s;
            s += 1;
            while s < b.len() && !matches!(b[s], b'"' | b'\n' | b'\r') {
                if b[s] == b'\\' && s + 1 < b.len() && !matches!(b[s + 1], b'\n' | b'\r') {
                    s += 1;
                }
                s += 1;
            }
            let quoted = format!("{}\"", &self.text[first..s.min(b.len())]);
            let name = crate::args::unquote(&quoted);
            file = Some(if name.is_empty() {
                self.map.file.clone()
            } else {
                Arc::from(name.as_str())
            });
        }
        while s < b.len() && !matches!(b[s], b'\n' | b'\r') {
            s += 1;
        }
        let next = self.skip_line(s);
        if !matches!(self.map.directives.last(), Some(d) if d.at >= next) {
            let file = file.unwrap_or_else(|| {
                self.map
                    .directives
                    .last()
                    .map_or_else(|| self.map.file.clone(), |d| d.file.clone())
            });
            let phys_line = self.map.phys_line(next);
            self.map.directives.push(Directive {
                at: next,
                phys_line,
                line,
                file,
            });
        }
        Ok(s)
    }

    pub fn next_token(&mut self) -> Result<Token, ConfigError> {
        let b = self.b;
        let mut s = self.pos;
        loop {
            while s < b.len() && (b[s].is_ascii_whitespace() || b[s] == 0x0b) {
                s += 1;
            }
            if s >= b.len() {
                self.pos = b.len();
                return Ok(Token {
                    kind: Tok::Eof,
                    text: String::new(),
                    start: b.len(),
                    end: b.len(),
                });
            }
            if b[s] == b'/' && s + 1 < b.len() && b[s + 1] == b'/' {
                s = self.skip_line(s + 2);
            } else if b[s] == b'/' && s + 1 < b.len() && b[s + 1] == b'*' {
                s = self.skip_slash_star(s + 2);
            } else if b[s] == b'#' && self.at_line_start(s) {
                s = self.line_directive(s)?;
            } else {
                break;
            }
        }
        let start = s;
        let tok = |kind, end: usize, text: &str| Token {
            kind,
            text: text.to_string(),
            start,
            end,
        };
        if is_word(b[s]) {
            s += 1;
            loop {
                while s < b.len() && is_word(b[s]) {
                    s += 1;
                }
                if s + 1 < b.len() && b[s] == b'/' && is_word(b[s + 1]) {
                    s += 1;
                } else {
                    break;
                }
            }
            self.pos = s;
            let word = &self.text[start..s];
            let kind = match word {
                "elementclass" => Tok::Elementclass,
                "require" => Tok::Require,
                "provide" => Tok::Provide,
                "define" => Tok::Define,
                _ => Tok::Ident,
            };
            return Ok(tok(kind, s, word));
        }
        if b[s] == b'$' {
            s += 1;
            while s < b.len() && (b[s].is_ascii_alphanumeric() || b[s] == b'_') {
                s += 1;
            }
            self.pos = s;
            return Ok(tok(Tok::Variable, s, &self.text[start + 1..s]));
        }
        if s + 1 < b.len() {
            let two = &b[s..s + 2];
            let kind = match two {
                b"->" => Some(Tok::Arrow),
                b"=>" => Some(Tok::DArrow),
                b"::" => Some(Tok::TwoColon),
                b"||" => Some(Tok::TwoBar),
                _ => None,
            };
            if let Some(kind) = kind {
                self.pos = s + 2;
                return Ok(tok(kind, s + 2, &self.text[s..s + 2]));
            }
        }
        if s + 2 < b.len() && &b[s..s + 3] == b"..." {
            self.pos = s + 3;
            return Ok(tok(Tok::ThreeDot, s + 3, "..."));
        }
        let c = self.text[s..].chars().next().unwrap_or('\u{fffd}');
        let end = s + c.len_utf8();
        self.pos = end;
        Ok(tok(Tok::Char(c), end, &self.text[s..end]))
    }

    /// Reads a configuration string starting at the current position (just after its
    /// `(`) up to the unbalanced `)`, which is left unread. Parentheses inside quotes
    /// and comments do not count; line directives at the start of a line are removed.
    pub fn config(&mut self) -> Result<String, ConfigError> {
        let b = self.b;
        let mut out = String::new();
        let mut from = self.pos;
        let mut s = self.pos;
        let mut depth = 1u32;
        while s < b.len() {
            match b[s] {
                b'(' => {
                    depth += 1;
                    s += 1;
                }
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                    s += 1;
                }
                b'#' if s > 0 && matches!(b[s - 1], b'\n' | b'\r') => {
                    out.push_str(&self.text[from..s]);
                    s = self.line_directive(s)?;
                    from = s;
                }
                b'/' if s + 1 < b.len() && b[s + 1] == b'/' => s = self.skip_line(s + 2),
                b'/' if s + 1 < b.len() && b[s + 1] == b'*' => s = self.skip_slash_star(s + 2),
                q @ (b'\'' | b'"') => s = self.skip_quote(s + 1, q),
                b'\\' if s + 1 < b.len() && b[s + 1] == b'<' => s = self.skip_backslash_angle(s + 2),
                _ => s += 1,
            }
        }
        let s = s.min(b.len());
        out.push_str(&self.text[from..s]);
        self.pos = s;
        Ok(out)
    }
}

/// Byte ranges of the comments in `b`, found as the lexer finds them: `//` to the end
/// of the line and `/* ... */` outside quotes, also inside `\<...>`.
fn comment_ranges(b: &[u8]) -> Vec<(usize, usize)> {
    use crate::args::skip_comment;
    fn is_comment(b: &[u8], i: usize) -> bool {
        b[i] == b'/' && i + 1 < b.len() && matches!(b[i + 1], b'/' | b'*')
    }
    // `\<...>` whose body starts at `i`; returns the position after `>`.
    fn skip_angle(b: &[u8], mut i: usize, ranges: &mut Vec<(usize, usize)>) -> usize {
        while i < b.len() && b[i] != b'>' {
            if is_comment(b, i) {
                let end = skip_comment(b, i);
                ranges.push((i, end));
                i = end;
            } else {
                i += 1;
            }
        }
        (i + 1).min(b.len())
    }
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            _ if is_comment(b, i) => {
                let end = skip_comment(b, i);
                ranges.push((i, end));
                i = end;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i = if b[i + 1] == b'<' {
                            skip_angle(b, i + 2, &mut ranges)
                        } else {
                            i + 2
                        };
                    } else {
                        i += 1;
                    }
                }
                i += 1;
            }
            b'\'' => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            }
            b'\\' if i + 1 < b.len() && b[i + 1] == b'<' => i = skip_angle(b, i + 2, &mut ranges),
            _ => i += 1,
        }
    }
    ranges
}

/// The text of a configuration file read as bytes. Comments may hold bytes that are
/// not UTF-8 (a Latin-1 name, say), as Click, which reads bytes, allows; they become
/// U+FFFD. Anywhere else such a byte is an error at its line and column.
pub(crate) fn source_text(bytes: &[u8], file: &str) -> Result<String, ConfigError> {
    let comments = comment_ranges(bytes);
    let in_comment = |at: usize| {
        let k = comments.partition_point(|&(start, _)| start <= at);
        k > 0 && at < comments[k - 1].1
    };
    let mut text = String::with_capacity(bytes.len());
    let mut first_bad: Option<(usize, u8)> = None;
    let mut at = 0;
    while at < bytes.len() {
        match std::str::from_utf8(&bytes[at..]) {
            Ok(rest) => {
                text.push_str(rest);
                break;
            }
            Err(e) => {
                let good = e.valid_up_to();
                text.push_str(&String::from_utf8_lossy(&bytes[at..at + good]));
                let bad = at + good;
                if first_bad.is_none() && !in_comment(bad) {
                    first_bad = Some((text.len(), bytes[bad]));
                }
                text.push(char::REPLACEMENT_CHARACTER);
                at = bad + e.error_len().unwrap_or(bytes.len() - bad);
            }
        }
    }
    match first_bad {
        None => Ok(text),
        Some((pos, byte)) => Err(SourceMap::new(&text, file).error(
            pos,
            format!(
                "byte 0x{:02X} is not UTF-8 (configurations are read as UTF-8; other bytes may appear only in comments)",
                byte
            ),
        )),
    }
}
