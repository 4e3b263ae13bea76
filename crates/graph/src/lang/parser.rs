//! The Click language parser (after Click's `Lexer` in `lib/lexer.cc`).
//!
//! Statements are parsed into a [`Body`] per scope (the file, or one compound element
//! definition): its elements (with `input`/`output` pseudo-elements and element-group
//! tunnels), connections, and variable definitions. [`super::flatten`] then expands
//! compounds and resolves connections through tunnels.

use super::flatten;
use super::lexer::{Lexer, Tok, Token};
use super::FlatConfig;
use crate::args::{split_args, split_words, unquote};
use crate::error::{ConfigError, Landmark};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// Deepest nesting of compound elements and element groups.
const MAX_DEPTH: usize = 50;

/// An element class as the parser knows it.
#[derive(Clone)]
pub(crate) enum ClassRef {
    Primitive(String),
    Compound(Rc<CompoundDef>),
}

/// Connection tunnels: an element group or expanded compound (`Outer`) and its
/// `input` / `output` pseudo-elements. A compound definition's own pseudo-elements
/// have no outer element until the compound is expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tunnel {
    Outer { input: usize, output: usize },
    Input { outer: Option<usize> },
    Output { outer: Option<usize> },
}

#[derive(Clone)]
pub(crate) enum Kind {
    Tunnel(Tunnel),
    Class(ClassRef),
}

pub(crate) struct BodyElem {
    /// Name; anonymous names start with `;` until deanonymized.
    pub name: String,
    pub kind: Kind,
    pub config: String,
    pub landmark: Landmark,
    pub class_landmark: Landmark,
    /// Number of input and output ports used by connections in this scope.
    pub nports: [usize; 2],
}

pub(crate) struct BodyConn {
    pub from: usize,
    pub from_port: usize,
    pub to: usize,
    pub to_port: usize,
    pub landmark: Landmark,
}

/// One scope: the file, or the body of a compound element.
pub(crate) struct Body {
    pub elements: Vec<BodyElem>,
    pub map: HashMap<String, usize>,
    pub conns: Vec<BodyConn>,
    anonymous_offset: usize,
    /// Formal parameters (the first `nformals`, with their keyword, "" or `__REST__`)
    /// then `define`d variables with their raw values.
    pub vars: Vec<(String, String)>,
    pub nformals: usize,
    pub depth: usize,
    order_error: bool,
}

impl Body {
    fn new(depth: usize) -> Body {
        Body {
            elements: Vec::new(),
            map: HashMap::new(),
            conns: Vec::new(),
            anonymous_offset: 0,
            vars: Vec::new(),
            nformals: 0,
            depth,
            order_error: false,
        }
    }

    fn connect(&mut self, from: usize, from_port: i64, to: usize, to_port: i64, landmark: &Landmark) {
        let fp = from_port.max(0) as usize;
        let tp = to_port.max(0) as usize;
        self.conns.push(BodyConn {
            from,
            from_port: fp,
            to,
            to_port: tp,
            landmark: landmark.clone(),
        });
        let n = &mut self.elements[to].nports[0];
        *n = (*n).max(tp + 1);
        let n = &mut self.elements[from].nports[1];
        *n = (*n).max(fp + 1);
    }
}

/// A compound element class (one definition of an overloaded class).
pub(crate) struct CompoundDef {
    pub name: String,
    pub landmark: Landmark,
    pub body: Body,
    pub ninputs: usize,
    pub noutputs: usize,
    /// The next overload to try, or the class this one extends (`...`).
    pub overload: Option<ClassRef>,
}

fn plural(n: usize, word: &str) -> String {
    format!("{} {}{}", n, word, if n == 1 { "" } else { "s" })
}

impl CompoundDef {
    pub fn printable_name(&self) -> &str {
        if self.name.is_empty() {
            "<anonymous>"
        } else {
            &self.name
        }
    }

    pub fn formal_types(&self) -> Vec<&str> {
        self.body.vars[..self.body.nformals]
            .iter()
            .map(|(_, t)| t.as_str())
            .collect()
    }

    /// Click's signature of a definition: `Name(<arg>, KEY)[1 input, 1 output]`.
    pub fn signature(&self) -> String {
        let mut s = self.printable_name().to_string();
        let types = self.formal_types();
        if !types.is_empty() {
            let parts: Vec<&str> = types
                .iter()
                .map(|t| match *t {
                    "" => "<arg>",
                    "__REST__" => "...",
                    t => t,
                })
                .collect();
            s.push('(');
            s.push_str(&parts.join(", "));
            s.push(')');
        }
        s.push_str(&format!(
            "[{}, {}]",
            plural(self.ninputs, "input"),
            plural(self.noutputs, "output")
        ));
        s
    }

    /// The signature of a use: `Name[2 arguments, 1 input, 1 output]`.
    pub fn use_signature(name: &str, nargs: usize, ninputs: usize, noutputs: usize) -> String {
        let name = if name.is_empty() { "<anonymous>" } else { name };
        let args = if nargs > 0 {
            format!("{}, ", plural(nargs, "argument"))
        } else {
            String::new()
        };
        format!(
            "{}[{}{}, {}]",
            name,
            args,
            plural(ninputs, "input"),
            plural(noutputs, "output")
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    File,
    Compound,
    Group,
}

/// An element of a connection's element list, with the ports written around it
/// (`-1` ends a list whose ports continue upwards as needed, as in `[0, ]`).
#[derive(Default)]
struct Entry {
    idx: usize,
    pos: usize,
    inp: Vec<i64>,
    out: Vec<i64>,
}

/// An element reference or declaration waiting to be resolved at the end of its list.
struct Pending {
    name: String,
    /// The class if `name` is a class name (an anonymous element).
    ty: Option<ClassRef>,
    /// The class after `::`.
    decl: Option<ClassRef>,
    bare: bool,
    config: String,
    pos: usize,
    class_pos: usize,
}

impl Pending {
    fn new(name: String, ty: Option<ClassRef>, bare: bool, pos: usize) -> Pending {
        Pending {
            name,
            ty,
            decl: None,
            bare,
            config: String::new(),
            pos,
            class_pos: pos,
        }
    }
}

fn is_implied_class(name: &str) -> bool {
    name.as_bytes().first().is_some_and(|c| c.is_ascii_uppercase())
}

/// Parses a port number as Click's `IntArg` does (decimal, `0x` hex, `0` octal).
fn parse_port(s: &str) -> Option<i64> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<i64>().ok()?
    };
    (s.bytes().all(|b| b.is_ascii_alphanumeric()) && v <= i64::from(i32::MAX)).then_some(v)
}

pub(crate) struct Parser<'a> {
    lx: Lexer<'a>,
    back: Vec<Token>,
    types: HashMap<String, ClassRef>,
    body: Body,
    requirements: Vec<String>,
    classes: Option<&'a dyn Fn(&str) -> bool>,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn lex(&mut self) -> Result<Token, ConfigError> {
        match self.back.pop() {
            Some(t) => Ok(t),
            None => self.lx.next_token(),
        }
    }

    fn unlex(&mut self, t: Token) {
        self.back.push(t);
    }

    fn landmark(&self, pos: usize) -> Landmark {
        self.lx.map.landmark(pos)
    }

    fn err(&self, pos: usize, message: impl Into<String>) -> ConfigError {
        self.lx.map.error(pos, message)
    }

    fn syntax_error(&self, t: &Token) -> ConfigError {
        if t.kind == Tok::Eof {
            self.err(t.start, "syntax error near end of file")
        } else {
            self.err(t.start, format!("syntax error near '{}'", t.text))
        }
    }

    fn expect_char(&mut self, c: char) -> Result<Token, ConfigError> {
        let t = self.lex()?;
        if t.is_char(c) {
            Ok(t)
        } else {
            Err(self.err(t.start, format!("expected {}", Token::describe(Tok::Char(c)))))
        }
    }

    /// The class named `name`, if it is one: an `elementclass` in scope or, when the
    /// caller gave the set of primitive classes, one of those.
    fn element_type(&self, name: &str) -> Option<ClassRef> {
        if let Some(c) = self.types.get(name) {
            return Some(c.clone());
        }
        match self.classes {
            Some(is_class) if is_class(name) => Some(ClassRef::Primitive(name.to_string())),
            _ => None,
        }
    }

    fn force_type(&self, name: &str) -> ClassRef {
        self.element_type(name)
            .unwrap_or_else(|| ClassRef::Primitive(name.to_string()))
    }

    fn anon_name(&self, class: &str) -> String {
        let n = self.body.elements.len() - self.body.anonymous_offset + 1;
        format!(";{}@{}", class, n)
    }

    fn get_element(
        &mut self,
        name: String,
        kind: Kind,
        config: String,
        pos: usize,
        class_pos: usize,
    ) -> Result<usize, ConfigError> {
        if let Some(&i) = self.body.map.get(&name) {
            return Ok(i);
        }
        if name
            .split('/')
            .any(|part| part.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(self.err(pos, format!("element name '{}' has all-digit component", name)));
        }
        let i = self.body.elements.len();
        self.body.map.insert(name.clone(), i);
        self.body.elements.push(BodyElem {
            name,
            kind,
            config,
            landmark: self.landmark(pos),
            class_landmark: self.landmark(class_pos),
            nports: [0, 0],
        });
        Ok(i)
    }

    /// Creates the tunnel elements `name`, `name/input` and `name/output` of a group.
    fn add_tunnels(&mut self, name: &str, pos: usize) -> Result<[usize; 3], ConfigError> {
        let names = [
            name.to_string(),
            format!("{}/input", name),
            format!("{}/output", name),
        ];
        let mut idx = [0; 3];
        for (k, n) in names.iter().enumerate() {
            if let Some(&old) = self.body.map.get(n) {
                return Err(redeclaration(
                    &self.landmark(pos),
                    n,
                    &self.body.elements[old].landmark,
                ));
            }
            idx[k] = self.get_element(
                n.clone(),
                Kind::Tunnel(Tunnel::Input { outer: None }),
                String::new(),
                pos,
                pos,
            )?;
        }
        self.body.elements[idx[0]].kind = Kind::Tunnel(Tunnel::Outer {
            input: idx[1],
            output: idx[2],
        });
        self.body.elements[idx[1]].kind = Kind::Tunnel(Tunnel::Input { outer: Some(idx[0]) });
        self.body.elements[idx[2]].kind = Kind::Tunnel(Tunnel::Output { outer: Some(idx[0]) });
        Ok(idx)
    }

    /// Reads the configuration string after the `(` token `open`, and its `)`.
    fn read_config(&mut self, open: &Token) -> Result<String, ConfigError> {
        if !self.back.is_empty() {
            self.lx.pos = open.end;
            self.back.clear();
        }
        let config = self.lx.config()?;
        let t = self.lex()?;
        if !t.is_char(')') {
            return Err(self.err(t.start, "expected ')'").with_hint(format!(
                "the configuration string opened at {} is not closed",
                self.landmark(open.start)
            )));
        }
        Ok(config)
    }

    /// Statements up to the end of `ctx`; returns the token that ended it.
    fn statements(&mut self, ctx: Ctx) -> Result<Token, ConfigError> {
        loop {
            let t = self.lex()?;
            match t.kind {
                Tok::Ident | Tok::Arrow | Tok::DArrow | Tok::Char('[' | '{' | '(') => {
                    self.unlex(t);
                    self.connection(ctx)?;
                }
                Tok::Elementclass => self.elementclass()?,
                Tok::Require => self.require()?,
                Tok::Define => self.define()?,
                Tok::Char(';') => {}
                Tok::Char('}') | Tok::TwoBar if ctx == Ctx::Compound => return Ok(t),
                Tok::Char(')') if ctx == Ctx::Group => return Ok(t),
                Tok::Eof => {
                    return match ctx {
                        Ctx::File => Ok(t),
                        Ctx::Group => Err(self.err(t.start, "expected ')'")),
                        Ctx::Compound => Err(self.err(t.start, "expected '}'")),
                    }
                }
                _ => return Err(self.syntax_error(&t)),
            }
        }
    }

    /// `[p, q, ...]`, if present.
    fn ports(&mut self, ports: &mut Vec<i64>) -> Result<(), ConfigError> {
        let t = self.lex()?;
        if !t.is_char('[') {
            self.unlex(t);
            return Ok(());
        }
        loop {
            let t = self.lex()?;
            if t.kind == Tok::Ident {
                match parse_port(&t.text) {
                    Some(p) => ports.push(p),
                    None => return Err(self.err(t.start, "syntax error: port number should be integer")),
                }
            } else if t.is_char(']') {
                if ports.is_empty() {
                    ports.push(0);
                }
                ports.push(-1);
                return Ok(());
            } else {
                return Err(self.err(t.start, "syntax error: expected port number"));
            }
            let t = self.lex()?;
            if t.is_char(']') {
                return Ok(());
            } else if !t.is_char(',') {
                return Err(self.err(t.start, "syntax error: expected ','"));
            }
        }
    }

    /// A connection statement (or declaration): element lists joined by `->`/`=>`.
    fn connection(&mut self, ctx: Ctx) -> Result<(), ConfigError> {
        let nested = ctx != Ctx::File;
        let mut last: Vec<Entry> = Vec::new();
        let mut connector = Tok::Arrow;
        let mut conn_pos = 0;
        'chain: loop {
            let first_set = last.is_empty();
            let mut elements: Vec<Entry> = Vec::new();
            let mut pending: Vec<Pending> = Vec::new();
            let mut any_implicit = false;
            let mut any_ports = false;
            loop {
                let mut entry = Entry::default();
                self.ports(&mut entry.inp)?;
                let t = self.lex()?;
                entry.pos = t.start;
                let mut implicit = false;
                let mut pend = None;
                if t.kind == Tok::Ident {
                    let ty = self.element_type(&t.text);
                    pend = Some(Pending::new(t.text.clone(), ty, true, t.start));
                } else if t.is_char('{') {
                    let class = self.compound("", &t)?;
                    pend = Some(Pending::new(String::new(), Some(class), false, t.start));
                } else if t.is_char('(') {
                    let name = self.anon_name("");
                    self.group(&name, &t, &mut entry)?;
                    pend = Some(Pending::new(name, None, false, t.start));
                } else {
                    let cur_zero = elements.is_empty();
                    if nested && t.is_arrow() {
                        implicit = first_set && (!entry.inp.is_empty() || cur_zero);
                    } else if nested && t.is_char(',') {
                        implicit = !entry.inp.is_empty();
                    } else if nested && t.kind != Tok::TwoColon {
                        implicit = !first_set && (!entry.inp.is_empty() || cur_zero);
                    }
                    if implicit {
                        let name = if first_set { "input" } else { "output" };
                        any_implicit = true;
                        if first_set {
                            std::mem::swap(&mut entry.inp, &mut entry.out);
                        }
                        let ty = self.element_type(name);
                        pend = Some(Pending::new(name.to_string(), ty, false, t.start));
                        self.unlex(t);
                    } else {
                        if !entry.inp.is_empty() {
                            return Err(self.err(t.start, "stranded port ignored"));
                        }
                        if cur_zero {
                            if nested && first_set {
                                self.unlex(t);
                                break 'chain;
                            }
                            return Err(self.syntax_error(&t));
                        }
                    }
                }
                if let Some(mut p) = pend {
                    self.declaration(&mut p, implicit, &mut entry)?;
                    any_ports |= !entry.inp.is_empty() || !entry.out.is_empty();
                    pending.push(p);
                    elements.push(entry);
                }

                let t = self.lex()?;
                if t.is_char(',') {
                    continue;
                }
                if any_implicit && !first_set && t.is_arrow() {
                    return Err(self.err(t.start, "implicit ports used in the middle of a chain"));
                }
                if pending.len() > 1 && first_set && !t.is_arrow() && !any_ports && !any_implicit {
                    spread_declaration(&mut pending);
                }
                self.unlex(t);
                break;
            }
            if elements.is_empty() {
                // only a trailing comma: nothing to connect
                break;
            }
            for (p, e) in pending.into_iter().zip(elements.iter_mut()) {
                e.idx = self.resolve(p)?;
            }

            if first_set {
                if let Some(e) = elements.iter().find(|e| !e.inp.is_empty()) {
                    return Err(self.err(e.pos, "input ports ignored at start of chain"));
                }
            } else {
                self.connect_all(&last, &elements, connector, conn_pos)?;
            }
            last = elements;

            let t = self.lex()?;
            match t.kind {
                Tok::Char(',') | Tok::TwoColon => return Err(self.syntax_error(&t)),
                Tok::Arrow | Tok::DArrow => {
                    connector = t.kind;
                    conn_pos = t.start;
                }
                Tok::Ident
                | Tok::Char('{' | '}' | '[' | ')')
                | Tok::TwoBar
                | Tok::Elementclass
                | Tok::Require
                | Tok::Provide
                | Tok::Define => {
                    self.unlex(t);
                    break;
                }
                Tok::Char(';') | Tok::Eof => break,
                _ => return Err(self.syntax_error(&t)),
            }
        }
        if let Some(e) = last.iter().find(|e| !e.out.is_empty()) {
            return Err(self.err(e.pos, "output ports ignored at end of chain"));
        }
        Ok(())
    }

    /// `:: Class`, `(config)` and output ports after an element name.
    fn declaration(&mut self, p: &mut Pending, implicit: bool, entry: &mut Entry) -> Result<(), ConfigError> {
        let t = self.lex()?;
        if t.kind == Tok::TwoColon && !implicit {
            p.bare = false;
            let t2 = self.lex()?;
            if t2.kind == Tok::Ident {
                p.decl = Some(self.force_type(&t2.text));
                p.class_pos = t2.start;
            } else if t2.is_char('{') {
                p.decl = Some(self.compound("", &t2)?);
                p.class_pos = t2.start;
            } else {
                return Err(self.err(t2.start, "missing element type in declaration"));
            }
        } else {
            self.unlex(t);
        }
        let mut t = self.lex()?;
        if t.is_char('(') && !implicit {
            if self.body.map.contains_key(&p.name) {
                return Err(self.err(t.start, "configuration string ignored on element reference"));
            }
            p.config = self.read_config(&t)?;
            p.bare = false;
            t = self.lex()?;
        }
        let is_port = t.is_char('[') && !implicit;
        self.unlex(t);
        if is_port {
            entry.out.clear();
            self.ports(&mut entry.out)?;
        }
        Ok(())
    }

    /// Turns a pending element into an element index: a reference to a declared
    /// element, a new declaration, or an anonymous element.
    fn resolve(&mut self, p: Pending) -> Result<usize, ConfigError> {
        let existing = self.body.map.get(&p.name).copied();
        match existing {
            Some(i) if p.ty.is_none() => {
                if p.decl.is_some() {
                    let old = &self.body.elements[i];
                    let mut e = self.err(p.pos, format!("redeclaration of element '{}'", p.name));
                    if !matches!(old.kind, Kind::Tunnel(_)) {
                        e = e.with_hint(format!(
                            "element '{}' previously declared at {}",
                            p.name, old.landmark
                        ));
                    }
                    return Err(e);
                }
                Ok(i)
            }
            _ => {
                let mut ty = p.ty;
                if ty.is_some() && p.decl.is_some() {
                    return Err(self.err(p.pos, format!("class '{}' used as element name", p.name)));
                }
                if ty.is_none() && p.decl.is_none() {
                    if self.classes.is_none() && is_implied_class(&p.name) {
                        ty = Some(ClassRef::Primitive(p.name.clone()));
                    } else {
                        return Err(self.err(p.pos, format!("undeclared element '{}'", p.name)));
                    }
                }
                let (name, class, class_pos) = match ty {
                    Some(t) => (self.anon_name(&p.name), t, p.pos),
                    None => (
                        p.name,
                        p.decl.unwrap_or(ClassRef::Primitive(String::new())),
                        p.class_pos,
                    ),
                };
                self.get_element(name, Kind::Class(class), p.config, p.pos, class_pos)
            }
        }
    }

    /// Connects the outputs of `outputs` to the inputs of `inputs`, as Click does for
    /// one `->` or `=>` between element lists.
    fn connect_all(
        &mut self,
        outputs: &[Entry],
        inputs: &[Entry],
        connector: Tok,
        pos: usize,
    ) -> Result<(), ConfigError> {
        let lm = self.landmark(pos);
        let sides: [&[Entry]; 2] = [inputs, outputs];
        let ports = |e: &'_ Entry, k: usize| -> Vec<i64> {
            if k == 1 {
                e.out.clone()
            } else {
                e.inp.clone()
            }
        };
        let mut minp = [0i64; 2];
        let mut expandable = [0i64; 2];
        for k in 0..2 {
            for e in sides[k] {
                let pv = ports(e, k);
                let n = pv.len() as i64;
                if n <= 1 {
                    minp[k] += 1;
                } else if pv.last() == Some(&-1) {
                    minp[k] += n - 1;
                    expandable[k] += 1;
                } else {
                    minp[k] += n;
                }
            }
        }
        if expandable[0] + expandable[1] > 1 {
            return Err(self.err(pos, "at most one expandable port allowed per connection"));
        }
        if connector == Tok::DArrow {
            for k in 0..2 {
                let first_bare = sides[k].first().is_some_and(|e| ports(e, k).is_empty());
                if minp[k] == 1 && minp[1 - k] > 1 && first_bare {
                    expandable[k] = 1;
                }
            }
        }
        let mut step = [false; 2];
        let mut nexp = [0i64; 2];
        for k in 0..2 {
            step[k] = minp[k] > 1 || expandable[k] > 0;
            nexp[k] = if expandable[k] > 0 {
                minp[1 - k] - minp[k]
            } else {
                0
            };
        }
        if step[0] && step[1] {
            if connector != Tok::DArrow {
                return Err(self.err(pos, "syntax error: many-to-many connections require '=>'"));
            }
            if expandable[0] == 0 && expandable[1] == 0 && minp[0] != minp[1] {
                return Err(self.err(
                    pos,
                    format!(
                        "connection mismatch: {} outputs connected to {} inputs",
                        minp[1], minp[0]
                    ),
                ));
            } else if expandable[0] == 0 && minp[0] < minp[1] {
                return Err(self.err(
                    pos,
                    format!(
                        "connection mismatch: {} or more outputs connected to {} inputs",
                        minp[1], minp[0]
                    ),
                ));
            } else if expandable[1] == 0 && minp[1] < minp[0] {
                return Err(self.err(
                    pos,
                    format!(
                        "connection mismatch: {} outputs connected to {} or more inputs",
                        minp[1], minp[0]
                    ),
                ));
            }
        } else if !step[0] && !step[1] {
            step[0] = true;
        }

        let mut it = [0usize; 2];
        let mut ppos = [0i64; 2];
        let mut port = [-1i64; 2];
        while it[0] < inputs.len() && it[1] < outputs.len() {
            for k in 0..2 {
                if port[k] < 0 {
                    port[k] = ports(&sides[k][it[k]], k).first().copied().unwrap_or(0).max(0);
                }
            }
            self.body
                .connect(outputs[it[1]].idx, port[1], inputs[it[0]].idx, port[0], &lm);
            for k in 0..2 {
                if !step[k] {
                    continue;
                }
                let pv = ports(&sides[k][it[k]], k);
                let np = pv.len() as i64;
                ppos[k] += 1;
                if ppos[k] < np && pv[ppos[k] as usize] >= 0 {
                    port[k] = pv[ppos[k] as usize];
                } else if np >= 2 && pv[(np - 1) as usize] == -1 && nexp[k] > 0 {
                    port[k] = pv[(np - 2) as usize] + ppos[k] - (np - 2);
                    nexp[k] -= 1;
                } else if np == 0 && minp[k] == 1 && nexp[k] > 0 {
                    port[k] = ppos[k];
                    nexp[k] -= 1;
                } else {
                    port[k] = -1;
                    ppos[k] = 0;
                    it[k] += 1;
                }
            }
        }
        Ok(())
    }

    /// An element group `( statements )`; `name` is its tunnel's name.
    fn group(&mut self, name: &str, open: &Token, entry: &mut Entry) -> Result<(), ConfigError> {
        let [_, gin, gout] = self.add_tunnels(name, open.start)?;
        let saved_in = self.body.map.insert("input".to_string(), gin);
        let saved_out = self.body.map.insert("output".to_string(), gout);
        if self.depth + 1 >= MAX_DEPTH {
            return Err(self.err(open.start, "maximum element group nesting depth exceeded"));
        }
        self.depth += 1;
        let end = self.statements(Ctx::Group);
        self.depth -= 1;
        let end = end?;
        let lm = self.landmark(end.start);
        let nin = check_pseudo(&self.body, gin, false, "<anonymous group>", &lm)?;
        let nout = check_pseudo(&self.body, gout, true, "<anonymous group>", &lm)?;
        for (key, saved) in [("input", saved_in), ("output", saved_out)] {
            match saved {
                Some(i) => {
                    self.body.map.insert(key.to_string(), i);
                }
                None => {
                    self.body.map.remove(key);
                }
            }
        }
        if entry.inp.is_empty() {
            entry.inp = (0..nin as i64).collect();
        }
        if entry.out.is_empty() {
            entry.out = (0..nout as i64).collect();
        }
        Ok(())
    }

    /// A compound class `{ ... }` (possibly overloaded with `||`, possibly ending in
    /// `|| ...`), the `{` being `open`. `name` is the elementclass name or "".
    fn compound(&mut self, name: &str, open: &Token) -> Result<ClassRef, ConfigError> {
        let saved_types = self.types.clone();
        let mut defs: Vec<CompoundDef> = Vec::new();
        let mut extension = None;
        let mut open_pos = open.start;
        loop {
            let t = self.lex()?;
            if t.kind == Tok::ThreeDot {
                extension = match self.element_type(name) {
                    Some(c) => Some(c),
                    None if self.classes.is_none() && !name.is_empty() => {
                        Some(ClassRef::Primitive(name.to_string()))
                    }
                    None => {
                        return Err(
                            self.err(t.start, format!("cannot extend unknown element class '{}'", name))
                        );
                    }
                };
                let t2 = self.lex()?;
                if defs.is_empty() || !t2.is_char('}') {
                    return Err(self.err(t.start, "'...' should occur last, after one or more compounds"));
                }
                break;
            }
            self.unlex(t);
            if self.depth + 1 >= MAX_DEPTH {
                return Err(self.err(open_pos, "maximum compound element nesting depth exceeded"));
            }
            let mut inner = Body::new(self.body.depth + 1);
            for pseudo in ["input", "output"] {
                let lm = self.landmark(open_pos);
                inner.map.insert(pseudo.to_string(), inner.elements.len());
                inner.elements.push(BodyElem {
                    name: pseudo.to_string(),
                    kind: Kind::Tunnel(if pseudo == "input" {
                        Tunnel::Input { outer: None }
                    } else {
                        Tunnel::Output { outer: None }
                    }),
                    config: String::new(),
                    landmark: lm.clone(),
                    class_landmark: lm,
                    nports: [0, 0],
                });
            }
            inner.anonymous_offset = 2;
            let outer = std::mem::replace(&mut self.body, inner);
            self.depth += 1;
            let end = self.compound_body();
            self.depth -= 1;
            let inner = std::mem::replace(&mut self.body, outer);
            self.types = saved_types.clone();
            let end = end?;
            defs.push(finish_compound(name, self.landmark(open_pos), inner)?);
            if end.kind == Tok::TwoBar {
                open_pos = end.start;
                continue;
            }
            break;
        }
        let mut next = extension;
        for mut def in defs.into_iter().rev() {
            def.overload = next;
            next = Some(ClassRef::Compound(Rc::new(def)));
        }
        next.ok_or_else(|| self.err(open.start, "syntax error near '{'"))
    }

    fn compound_body(&mut self) -> Result<Token, ConfigError> {
        self.compound_arguments()?;
        self.statements(Ctx::Compound)
    }

    /// Formal parameters: `$a, KEYWORD $b, __REST__ $c |`.
    fn compound_arguments(&mut self) -> Result<(), ConfigError> {
        loop {
            let t1 = self.lex()?;
            let (ty, var, pos);
            if t1.kind == Tok::Ident {
                let t2 = self.lex()?;
                if t2.kind == Tok::Variable {
                    ty = t1.text.clone();
                    var = t2.text.clone();
                    pos = t1.start;
                } else {
                    if !self.body.vars.is_empty() {
                        return Err(self.err(t2.start, "expected variable"));
                    }
                    self.unlex(t2);
                    self.unlex(t1);
                    return Ok(());
                }
            } else if t1.kind == Tok::Variable {
                ty = String::new();
                var = t1.text.clone();
                pos = t1.start;
            } else if t1.is_char('|') {
                return Ok(());
            } else {
                if self.body.nformals > 0 {
                    return Err(self.err(t1.start, "expected variable"));
                }
                self.unlex(t1);
                return Ok(());
            }
            self.define_var(&var, &ty, true, pos)?;
            let sep = self.lex()?;
            if sep.is_char('|') {
                return Ok(());
            } else if !sep.is_char(',') {
                return Err(self.err(sep.start, "expected ',' or '|'"));
            }
        }
    }

    fn define_var(&mut self, name: &str, value: &str, formal: bool, pos: usize) -> Result<(), ConfigError> {
        if self.body.vars.iter().any(|(n, _)| n == name) {
            return Err(self.err(pos, format!("parameter '${}' multiply defined", name)));
        }
        self.body.vars.push((name.to_string(), value.to_string()));
        if formal {
            let n = self.body.vars.len();
            self.body.nformals = n;
            if !value.is_empty() && self.body.vars[..n - 1].iter().any(|(_, v)| v == value) {
                return Err(self.err(
                    pos,
                    format!("repeated keyword parameter '{}' in compound element", value),
                ));
            }
            if !self.body.order_error && n > 1 {
                let prev = &self.body.vars[n - 2].1;
                if (value.is_empty() && !prev.is_empty()) || prev == "__REST__" {
                    self.body.order_error = true;
                    return Err(self
                        .err(pos, "compound element parameters out of order")
                        .with_hint("the correct order is '[positional], [keywords], [__REST__]'"));
                }
            }
        }
        Ok(())
    }

    fn elementclass(&mut self) -> Result<(), ConfigError> {
        let tname = self.lex()?;
        if tname.kind != Tok::Ident {
            return Err(self.err(tname.start, "expected element type name"));
        }
        let tnext = self.lex()?;
        let class = if tnext.is_char('{') {
            self.compound(&tname.text, &tnext)?
        } else if tnext.kind == Tok::Ident {
            self.force_type(&tnext.text)
        } else {
            return Err(self.syntax_error(&tnext));
        };
        self.types.insert(tname.text, class);
        Ok(())
    }

    fn require(&mut self) -> Result<(), ConfigError> {
        let open = self.expect_char('(')?;
        let config = self.read_config(&open)?;
        let t = self.lex()?;
        if !t.is_char(';') {
            self.unlex(t);
        }
        for arg in split_args(&config) {
            let words = split_words(&arg);
            let Some(first) = words.first() else {
                continue;
            };
            let ty = unquote(first);
            // As in Click, `require(NAME)` means `require(package NAME)`.
            let package = match (ty.as_str(), words.len()) {
                ("library", 2) => {
                    return Err(self.err(open.end, "'require(library ...)' is not supported"));
                }
                ("compact_config", 1) => None,
                ("package", 2) => Some(unquote(&words[1])),
                ("package" | "library", 1) => return Err(self.err(open.end, "syntax error at requirement")),
                (t, 1) if !t.is_empty() => Some(ty.clone()),
                _ => return Err(self.err(open.end, "syntax error at requirement")),
            };
            if let Some(name) = package {
                if !PROVIDED_REQUIREMENTS.contains(&name.as_str()) {
                    return Err(self.err(open.end, format!("requirement '{}' not available", name)));
                }
            }
            self.requirements.push(arg);
        }
        Ok(())
    }

    fn define(&mut self) -> Result<(), ConfigError> {
        let open = self.expect_char('(')?;
        let config = self.read_config(&open)?;
        for arg in split_args(&config) {
            if arg.is_empty() {
                continue;
            }
            let (word, value) = split_first_word(&arg);
            let valid = word.len() >= 2
                && word.starts_with('$')
                && word[1..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(self.err(open.end, "bad 'define' declaration: not a variable"));
            }
            self.define_var(&word[1..], value, false, open.end)?;
        }
        Ok(())
    }
}

/// The first space-separated word of `arg` (quotes kept whole) and the rest.
fn split_first_word(arg: &str) -> (&str, &str) {
    let b = arg.as_bytes();
    let mut i = 0;
    while i < b.len() && !b[i].is_ascii_whitespace() {
        if b[i] == b'"' || b[i] == b'\'' {
            let q = b[i];
            i += 1;
            while i < b.len() && b[i] != q {
                if b[i] == b'\\' && q == b'"' {
                    i += 1;
                }
                i += 1;
            }
        }
        i += 1;
    }
    let i = i.min(b.len());
    (&arg[..i], arg[i..].trim_start())
}

/// Click's declaration shorthand `a, b, c :: Class(config)`: the class and
/// configuration of the last (non-bare) element apply to all.
fn spread_declaration(pending: &mut [Pending]) {
    let k = pending.iter().position(|p| !p.bare).unwrap_or(pending.len() - 1);
    if k + 1 != pending.len() || pending[k].decl.is_none() {
        return;
    }
    let (decl, config, class_pos) = (
        pending[k].decl.clone(),
        pending[k].config.clone(),
        pending[k].class_pos,
    );
    for p in &mut pending[..k] {
        p.decl = decl.clone();
        p.config = config.clone();
        p.class_pos = class_pos;
    }
}

pub(crate) fn redeclaration(at: &Landmark, name: &str, old: &Landmark) -> ConfigError {
    ConfigError::at(at, format!("redeclaration of element '{}'", name))
        .with_hint(format!("element '{}' previously declared at {}", name, old))
}

/// Checks a pseudo-element `input` (`isoutput` false) or `output` of a compound or
/// group: used only in its direction, no intermediate port unused. Returns the number
/// of ports.
fn check_pseudo(
    body: &Body,
    which: usize,
    isoutput: bool,
    name: &str,
    lm: &Landmark,
) -> Result<usize, ConfigError> {
    let names = ["input", "output"];
    let (this, other) = (names[isoutput as usize], names[1 - isoutput as usize]);
    if body.elements[which].nports[isoutput as usize] > 0 {
        return Err(ConfigError::at(
            lm,
            format!(
                "'{}' pseudoelement '{}' may only be used as {}",
                name, this, other
            ),
        ));
    }
    let used: BTreeSet<usize> = body
        .conns
        .iter()
        .filter_map(|c| {
            if isoutput {
                (c.to == which).then_some(c.to_port)
            } else {
                (c.from == which).then_some(c.from_port)
            }
        })
        .collect();
    let n = body.elements[which].nports[1 - isoutput as usize];
    if let Some(missing) = (0..n).find(|p| !used.contains(p)) {
        return Err(ConfigError::at(
            lm,
            format!("'{}' {} {} missing", name, this, missing),
        ));
    }
    Ok(n)
}

/// The packages `require` accepts. brickroute loads no packages (Click's userlevel
/// driver loads them from CLICKPATH); it answers for the features these names stand for
/// in Click's element map: it runs at user level, with 64-bit integers, and has IPv6
/// elements. Any other requirement fails as in Click.
pub(crate) const PROVIDED_REQUIREMENTS: [&str; 3] = ["userlevel", "int64", "ip6"];

/// Gives an anonymous element (named `;Class@N`) its final name `Class@N`, or the next
/// free number if that name is taken.
pub(crate) fn deanonymize(elements: &mut [impl NamedMut], map: &mut HashMap<String, usize>, i: usize) {
    let name = elements[i].name_mut();
    let Some(stripped) = name.strip_prefix(';') else {
        return;
    };
    let mut n = stripped.to_string();
    if map.contains_key(&n) {
        let at = n.rfind('@').map_or(n.len(), |a| a + 1);
        let prefix = n[..at].to_string();
        let digits: String = n[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
        let mut k: u64 = digits.parse().unwrap_or(0);
        loop {
            k = k.saturating_add(1);
            n = format!("{}{}", prefix, k);
            if !map.contains_key(&n) || k == u64::MAX {
                break;
            }
        }
    }
    map.insert(n.clone(), i);
    *elements[i].name_mut() = n;
}

pub(crate) trait NamedMut {
    fn name_mut(&mut self) -> &mut String;
}

impl NamedMut for BodyElem {
    fn name_mut(&mut self) -> &mut String {
        &mut self.name
    }
}

fn finish_compound(name: &str, landmark: Landmark, mut body: Body) -> Result<CompoundDef, ConfigError> {
    let printable = if name.is_empty() { "<anonymous>" } else { name };
    let ninputs = check_pseudo(&body, 0, false, printable, &landmark)?;
    let noutputs = check_pseudo(&body, 1, true, printable, &landmark)?;
    for i in 0..body.elements.len() {
        deanonymize(&mut body.elements, &mut body.map, i);
    }
    Ok(CompoundDef {
        name: name.to_string(),
        landmark,
        body,
        ninputs,
        noutputs,
        overload: None,
    })
}

/// Parses `source` and flattens it. `classes`, when given, says which names are
/// primitive element classes; without it, an undeclared name that starts with an
/// upper-case letter is taken as a class.
pub(crate) fn parse_with(
    source: &str,
    file: &str,
    defines: &HashMap<String, String>,
    classes: Option<&dyn Fn(&str) -> bool>,
) -> Result<FlatConfig, ConfigError> {
    let mut p = Parser {
        lx: Lexer::new(source, file),
        back: Vec::new(),
        types: HashMap::new(),
        body: Body::new(0),
        requirements: Vec::new(),
        classes,
        depth: 0,
    };
    p.statements(Ctx::File)?;
    flatten::flatten(p.body, defines, p.requirements)
}

/// Parses a Click configuration into a flat list of primitive elements and
/// connections.
pub(crate) fn parse(
    source: &str,
    file: &str,
    defines: &HashMap<String, String>,
) -> Result<FlatConfig, ConfigError> {
    parse_with(source, file, defines, None)
}
