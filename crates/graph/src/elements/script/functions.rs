//! Script's read handlers with parameters that compute from their parameters alone,
//! as Click's: arithmetic (`add`, `sub`, `min`, `max`, `avg`, `count`, `popcount`,
//! `gt_vec`, `mul`, `div`, `idiv`, `mod`, `rem`, `neg`, `abs`, `ceil`) on integers
//! while every operand is one (C syntax: `0x1f`, `017`) and on real numbers otherwise,
//! printed as C's `%.12g`; comparisons; Booleans (`not`, `and`, `or`, `nand`, `nor`,
//! `if`, `in`); text (`sprintf`, `first`, `length`, `unquote`); byte order (`htons`,
//! `htonl`, `ntohs`, `ntohl`); `random`, `now`, `now_steady`; and the files `cat`
//! and `catq` read.

use crate::args::{unquote, FromArg};
use crate::elements::script::program::{first_word, words};

/// The names of the handlers this module answers.
pub const HANDLERS: [&str; 40] = [
    "add",
    "sub",
    "min",
    "max",
    "avg",
    "count",
    "popcount",
    "gt_vec",
    "mul",
    "div",
    "idiv",
    "mod",
    "rem",
    "neg",
    "abs",
    "ceil",
    "eq",
    "ne",
    "lt",
    "gt",
    "le",
    "ge",
    "not",
    "and",
    "or",
    "nand",
    "nor",
    "if",
    "in",
    "sprintf",
    "first",
    "random",
    "length",
    "unquote",
    "htons",
    "htonl",
    "ntohs",
    "ntohl",
    "now",
    "now_steady",
];

/// Handlers that read files (`cat`, `catq`): a script's own calls only, never the
/// control socket's, as Click makes them private.
pub const FILE_HANDLERS: [&str; 2] = ["cat", "catq"];

/// Calls handler `name` on `args`; `None` if `name` is not one of [`HANDLERS`] or
/// [`FILE_HANDLERS`].
pub fn call(name: &str, args: &str) -> Option<Result<String, String>> {
    Some(match name {
        "add" | "sub" | "min" | "max" | "avg" | "count" | "popcount" | "gt_vec" | "mul" | "div" | "idiv" => {
            fold(name, args)
        }
        "mod" | "rem" => modulo(name, args),
        "neg" | "abs" | "ceil" => unary(name, args),
        "eq" | "ne" | "lt" | "gt" | "le" | "ge" => compare(name, args),
        "not" => boolean(args.trim()).map(|b| (!b).to_string()),
        "and" | "or" | "nand" | "nor" => logic(name, args),
        "if" => choose(args),
        "in" => {
            let mut words = words(args).into_iter().map(unquote);
            let word = words.next().unwrap_or_default();
            Ok((!word.is_empty() && words.any(|w| w == word)).to_string())
        }
        "sprintf" => sprintf(args),
        "first" => Ok(first_word(args).0.to_string()),
        "length" => Ok(args.len().to_string()),
        "unquote" => Ok(unquote(args)),
        "htons" | "ntohs" => i64::from_arg(args.trim())
            .map(|x| (x as u16).swap_bytes().to_string())
            .ok_or_else(|| "syntax error".to_string()),
        "htonl" | "ntohl" => i64::from_arg(args.trim())
            .map(|x| (x as u32).swap_bytes().to_string())
            .ok_or_else(|| "syntax error".to_string()),
        "random" => random(args),
        "now" => Ok(timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default(),
        )),
        "now_steady" => Ok(timestamp(steady_epoch().elapsed())),
        "cat" | "catq" => std::fs::read(args.trim())
            .map_err(|e| format!("{}: {}", args.trim(), e))
            .map(|bytes| {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                if name == "catq" {
                    crate::lang::vars::quoted(&text)
                } else {
                    text
                }
            }),
        _ => return None,
    })
}

fn boolean(word: &str) -> Result<bool, String> {
    bool::from_arg(word).ok_or_else(|| "syntax error".to_string())
}

/// `and`, `or` (stopping at the first word that decides), `nand`, `nor`.
fn logic(op: &str, args: &str) -> Result<String, String> {
    let all = matches!(op, "and" | "nand");
    let mut value = all;
    for word in words(args) {
        if value != all {
            break;
        }
        let b = boolean(word)?;
        value = if all { value && b } else { value || b };
    }
    Ok((if op.starts_with('n') { !value } else { value }).to_string())
}

/// `if BOOL A B`: A if BOOL is true, else B (empty when missing).
fn choose(args: &str) -> Result<String, String> {
    let (cond, rest) = first_word(args);
    let (a, rest) = first_word(rest);
    let (b, _) = first_word(rest);
    Ok(if boolean(cond)? { a } else { b }.to_string())
}

/// `random`: a number in 0..=2^31-1; `random N`: in 0..N; `random N1 N2`: in N1..=N2.
fn random(args: &str) -> Result<String, String> {
    thread_local! {
        static RNG: std::cell::RefCell<crate::elements::random::Rng> =
            std::cell::RefCell::new(crate::elements::random::Rng::new(0));
    }
    let words = words(args);
    let n = |w: &&str| u32::from_arg(w).ok_or_else(|| "bad N".to_string());
    // The first value and how many follow it.
    let (low, span) = match words.as_slice() {
        [] => (0, 1u64 << 31),
        [a] => match n(a)? {
            0 => return Err("bad N".to_string()),
            a => (0, u64::from(a)),
        },
        [a, b] => {
            let (a, b) = (n(a)?, n(b)?);
            if b < a {
                return Err("bad N".to_string());
            }
            (a, u64::from(b - a) + 1)
        }
        _ => return Err("too many arguments".to_string()),
    };
    let v = RNG.with(|r| r.borrow_mut().below(span as usize)) as u64 + u64::from(low);
    Ok(v.to_string())
}

/// A time as Click's `Timestamp::unparse`: seconds, a point, microseconds.
fn timestamp(d: std::time::Duration) -> String {
    format!("{}.{:06}", d.as_secs(), d.subsec_micros())
}

/// The steady clock's origin: the first time it is read.
fn steady_epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

#[derive(Clone, Copy)]
enum Number {
    Int(i64),
    Real(f64),
}

impl Number {
    fn real(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Real(r) => r,
        }
    }

    fn greater(self, than: Number) -> bool {
        match (self, than) {
            (Number::Int(x), Number::Int(y)) => x > y,
            (x, y) => x.real() > y.real(),
        }
    }
}

fn number(word: &str) -> Option<Number> {
    i64::from_arg(word)
        .map(Number::Int)
        .or_else(|| word.trim().parse::<f64>().ok().map(Number::Real))
}

/// The list handlers over space-separated numbers: `add`, `sub`, `mul`, `div`,
/// `idiv`, `min`, `max` fold the list from its first number (`div` as real numbers,
/// `idiv` truncating that); `avg` is the mean; `count` counts the numbers, `popcount`
/// the non-zero ones, `gt_vec` the ones after the first greater than it. Integer
/// overflow wraps, as in C.
fn fold(op: &str, args: &str) -> Result<String, String> {
    let counts = matches!(op, "count" | "popcount" | "gt_vec");
    let mut acc = Number::Int(if matches!(op, "add" | "sub") || counts {
        0
    } else {
        1
    });
    if matches!(op, "div" | "idiv") {
        acc = Number::Real(1.0);
    }
    let mut first: Option<Number> = None;
    let mut n = 0i64;
    for word in words(args) {
        let x = number(word).ok_or("expected list of numbers")?;
        n += 1;
        let is_first = first.is_none();
        if is_first {
            first = Some(x);
        }
        acc = match op {
            "count" => add(acc, Number::Int(1)),
            "popcount" => add(acc, Number::Int(i64::from(x.real() != 0.0))),
            "gt_vec" if is_first => acc,
            "gt_vec" => add(acc, Number::Int(i64::from(x.greater(first.expect("first"))))),
            _ if is_first => match op {
                "div" | "idiv" => Number::Real(x.real()),
                _ => x,
            },
            _ => apply(op, acc, x),
        };
    }
    Ok(match (op, acc) {
        ("avg", _) if n == 0 => i32::MAX.to_string(),
        ("avg", Number::Int(sum)) => (sum / n).to_string(),
        ("avg", Number::Real(sum)) => format_real(sum / n as f64),
        ("idiv", a) => (a.real() as i64).to_string(),
        (_, Number::Int(i)) => i.to_string(),
        (_, Number::Real(r)) => format_real(r),
    })
}

fn add(a: Number, b: Number) -> Number {
    apply("add", a, b)
}

fn apply(op: &str, a: Number, b: Number) -> Number {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) if !matches!(op, "div" | "idiv") => Number::Int(match op {
            "add" | "avg" => x.wrapping_add(y),
            "sub" => x.wrapping_sub(y),
            "min" => x.min(y),
            "max" => x.max(y),
            _ => x.wrapping_mul(y),
        }),
        _ => {
            let (x, y) = (a.real(), b.real());
            Number::Real(match op {
                "add" | "avg" => x + y,
                "sub" => x - y,
                "min" => x.min(y),
                "max" => x.max(y),
                "mul" => x * y,
                _ => x / y,
            })
        }
    }
}

/// `mod A B` on integers; `rem A B` also on real numbers (C's `fmod`).
fn modulo(op: &str, args: &str) -> Result<String, String> {
    let two = || "expected two numbers".to_string();
    let words = words(args);
    let [a, b] = words.as_slice() else {
        return Err(two());
    };
    match (number(a).ok_or_else(two)?, number(b).ok_or_else(two)?) {
        (Number::Int(_), Number::Int(0)) => Err("division by zero".to_string()),
        (Number::Int(x), Number::Int(y)) => Ok(x.wrapping_rem(y).to_string()),
        (x, y) if op == "rem" => Ok(format_real(x.real() % y.real())),
        _ => Err(two()),
    }
}

/// `neg`, `abs`, `ceil` of one number.
fn unary(op: &str, args: &str) -> Result<String, String> {
    Ok(match number(args).ok_or("expected one number")? {
        Number::Int(x) => match op {
            "neg" => x.wrapping_neg(),
            "abs" => x.wrapping_abs(),
            _ => x,
        }
        .to_string(),
        Number::Real(x) => format_real(match op {
            "neg" => -x,
            "abs" => x.abs(),
            _ => x.ceil(),
        }),
    })
}

/// Two operands compared as numbers when both are, else as unquoted text, bytewise.
fn compare(op: &str, args: &str) -> Result<String, String> {
    let words = words(args);
    let [a, b] = words.as_slice() else {
        return Err("expected two numbers".to_string());
    };
    let order = match (number(a), number(b)) {
        (Some(Number::Int(x)), Some(Number::Int(y))) => x.cmp(&y),
        (Some(x), Some(y)) => x
            .real()
            .partial_cmp(&y.real())
            .unwrap_or(std::cmp::Ordering::Less),
        _ => unquote(a).as_bytes().cmp(unquote(b).as_bytes()),
    };
    use std::cmp::Ordering::*;
    let yes = match op {
        "eq" => order == Equal,
        "ne" => order != Equal,
        "lt" => order == Less,
        "gt" => order == Greater,
        "le" => order != Greater,
        _ => order != Less,
    };
    Ok(yes.to_string())
}

/// `x` as C's `printf("%.12g")` prints it.
pub fn format_real(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    const DIGITS: i32 = 12;
    // The exponent after rounding to 12 significant digits.
    let sci = format!("{:.*e}", (DIGITS - 1) as usize, x);
    let (mantissa, exp) = sci.split_once('e').expect("exponent in {:e}");
    let exp: i32 = exp.parse().expect("integer exponent");
    if !(-4..DIGITS).contains(&exp) {
        let m = trim_fraction(mantissa);
        format!("{}e{}{:02}", m, if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        trim_fraction(&format!("{:.*}", (DIGITS - 1 - exp) as usize, x)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The widest field `sprintf` makes (C's has no limit; a handler's answer should).
const MAX_FIELD: usize = 4096;

/// Click's `sprintf FORMAT ARGS...`: C conversions `d i u x X o s %` with flags
/// `0 # - + space`, a width (or `*`), a precision (or `.*`) and ignored length
/// modifiers `h l ll L q`.
fn sprintf(args: &str) -> Result<String, String> {
    let syntax = || "syntax error".to_string();
    let mut words = words(args).into_iter();
    let format = unquote(words.next().unwrap_or_default());
    let next_int = |words: &mut std::vec::IntoIter<&str>| words.next().and_then(i64::from_arg);
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while let Some(&f) = chars.peek().filter(|f| "0#-+ ".contains(**f)) {
            flags.push(f);
            chars.next();
        }
        let mut width = 0usize;
        if chars.peek() == Some(&'*') {
            chars.next();
            let w = next_int(&mut words).ok_or_else(syntax)?;
            if w < 0 {
                flags.push('-');
            }
            width = w.unsigned_abs() as usize;
        } else {
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                width = width.saturating_mul(10).saturating_add(d as usize);
                chars.next();
            }
        }
        let mut precision = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            if chars.peek() == Some(&'*') {
                chars.next();
                let p = next_int(&mut words).filter(|p| *p >= 0).ok_or_else(syntax)?;
                precision = Some(p as usize);
            } else {
                let mut p = 0usize;
                while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                    p = p.saturating_mul(10).saturating_add(d as usize);
                    chars.next();
                }
                precision = Some(p);
            }
        }
        while chars.peek().is_some_and(|c| "hlLq".contains(*c)) {
            chars.next();
        }
        if width > MAX_FIELD || precision.is_some_and(|p| p > MAX_FIELD) {
            return Err("field width too large".to_string());
        }
        let conv = chars.next().ok_or_else(syntax)?;
        let body = match conv {
            '%' => "%".to_string(),
            's' => {
                let s = unquote(words.next().ok_or_else(syntax)?);
                match precision {
                    Some(p) => s.chars().take(p).collect(),
                    None => s,
                }
            }
            'd' | 'i' | 'u' | 'x' | 'X' | 'o' => {
                let v = next_int(&mut words).ok_or_else(syntax)?;
                integer(conv, v, &flags, precision)
            }
            _ => return Err(syntax()),
        };
        out.push_str(&pad(
            body,
            width,
            &flags,
            conv != 's' && conv != '%' && precision.is_none(),
        ));
    }
    if words.next().is_some() {
        return Err(syntax());
    }
    Ok(out)
}

/// An integer conversion without its field width.
fn integer(conv: char, v: i64, flags: &str, precision: Option<usize>) -> String {
    let (sign, digits) = match conv {
        'd' | 'i' => (
            if v < 0 {
                "-"
            } else if flags.contains('+') {
                "+"
            } else if flags.contains(' ') {
                " "
            } else {
                ""
            },
            v.unsigned_abs().to_string(),
        ),
        'u' => ("", (v as u64).to_string()),
        'x' => (
            if flags.contains('#') && v != 0 { "0x" } else { "" },
            format!("{:x}", v as u64),
        ),
        'X' => (
            if flags.contains('#') && v != 0 { "0X" } else { "" },
            format!("{:X}", v as u64),
        ),
        _ => (
            if flags.contains('#') { "0" } else { "" },
            format!("{:o}", v as u64),
        ),
    };
    let digits = match precision {
        Some(0) if v == 0 => String::new(),
        Some(p) if digits.len() < p => format!("{}{}", "0".repeat(p - digits.len()), digits),
        _ => digits,
    };
    format!("{}{}", sign, digits)
}

/// `body` padded to `width`: left-justified with `-`, with zeros after any sign or
/// `0x` with `0` (for numbers without a precision), else with spaces in front.
fn pad(body: String, width: usize, flags: &str, zero_ok: bool) -> String {
    let len = body.chars().count();
    if len >= width {
        return body;
    }
    let fill = width - len;
    if flags.contains('-') {
        format!("{}{}", body, " ".repeat(fill))
    } else if flags.contains('0') && zero_ok {
        let prefix = ["0x", "0X", "-", "+", " "]
            .into_iter()
            .find(|p| body.starts_with(p))
            .unwrap_or("");
        format!("{}{}{}", prefix, "0".repeat(fill), &body[prefix.len()..])
    } else {
        format!("{}{}", " ".repeat(fill), body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str, args: &str) -> String {
        call(name, args).unwrap().unwrap()
    }

    #[test]
    fn arithmetic_as_click_documents_it() {
        assert_eq!(ok("add", "10 5 2"), "17");
        assert_eq!(ok("sub", "10 5 2"), "3");
        assert_eq!(ok("mul", "3 0x10"), "48");
        assert_eq!(ok("add", "017 1"), "16");
        assert_eq!(ok("add", ""), "0");
        assert_eq!(ok("mul", ""), "1");
        assert_eq!(ok("add", "1 2.5"), "3.5");
        assert_eq!(ok("div", "1 3"), "0.333333333333");
        assert_eq!(ok("div", "10 2"), "5");
        assert_eq!(ok("idiv", "7 2"), "3");
        assert_eq!(ok("idiv", "-7 2"), "-3");
        assert_eq!(ok("div", "1 0"), "inf");
        assert_eq!(ok("mul", "1e20 10"), "1e+21");
        assert_eq!(ok("div", "1 100000"), "1e-05");
        assert_eq!(
            call("add", "1 x"),
            Some(Err("expected list of numbers".to_string()))
        );
        assert_eq!(call("nope", "1"), None);
    }

    #[test]
    fn comparisons_of_numbers_and_of_text() {
        assert_eq!(ok("eq", "10 0xA"), "true");
        assert_eq!(ok("le", "9 8"), "false");
        assert_eq!(ok("ge", "9 8"), "true");
        assert_eq!(ok("lt", "1.5 2"), "true");
        assert_eq!(ok("ne", "1 1.0"), "false");
        assert_eq!(ok("eq", "10x 10x"), "true");
        assert_eq!(ok("lt", "abc abd"), "true");
        assert_eq!(ok("eq", "\"a b\" 'a b'"), "true");
        assert_eq!(call("eq", "1"), Some(Err("expected two numbers".to_string())));
        assert_eq!(call("eq", "1 2 3"), Some(Err("expected two numbers".to_string())));
    }

    #[test]
    fn not_and_first() {
        assert_eq!(ok("not", "true"), "false");
        assert_eq!(ok("not", " 0 "), "true");
        assert_eq!(call("not", "maybe"), Some(Err("syntax error".to_string())));
        assert_eq!(ok("first", "a b c"), "a");
        assert_eq!(ok("first", "\"a b\" c"), "\"a b\"");
        assert_eq!(ok("first", ""), "");
    }

    #[test]
    fn sprintf_conversions() {
        assert_eq!(ok("sprintf", "\"%05x\" 127"), "0007f");
        assert_eq!(
            ok("sprintf", "\"%d-%s|%5s|%-4d|\" -3 ab cd 7"),
            "-3-ab|   cd|7   |"
        );
        assert_eq!(
            ok("sprintf", "\"%+d %X %#x %o %u %%\" 5 255 255 8 -1"),
            "+5 FF 0xff 10 18446744073709551615 %"
        );
        assert_eq!(ok("sprintf", "\"%*d|%.3d|%.2s\" 4 7 7 abc"), "   7|007|ab");
        assert_eq!(ok("sprintf", "\"%05d\" -42"), "-0042");
        assert_eq!(call("sprintf", "\"%d\""), Some(Err("syntax error".to_string())));
        assert_eq!(
            call("sprintf", "\"%d\" 1 2"),
            Some(Err("syntax error".to_string()))
        );
        assert_eq!(call("sprintf", "\"%f\" 1"), Some(Err("syntax error".to_string())));
        assert_eq!(
            call("sprintf", "\"%99999999999d\" 1"),
            Some(Err("field width too large".to_string()))
        );
    }

    #[test]
    fn reals_print_as_c_g12() {
        assert_eq!(format_real(0.1 + 0.2), "0.3");
        assert_eq!(format_real(123456789012.0), "123456789012");
        assert_eq!(format_real(1234567890123.0), "1.23456789012e+12");
        assert_eq!(format_real(0.0001), "0.0001");
        assert_eq!(format_real(-2.5), "-2.5");
    }
}
