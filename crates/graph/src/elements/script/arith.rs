//! Script's read handlers with parameters for arithmetic and comparisons (`add`, `sub`,
//! `mul`, `div`, `idiv`, `eq`, `ne`, `lt`, `gt`, `le`, `ge`, `not`, `sprintf`,
//! `first`), as Click's: integers while every operand is one (C syntax: `0x1f`, `017`),
//! real numbers otherwise, printed as C's `%.12g`.

use crate::args::{split_words, unquote, FromArg};

/// The names of the handlers this module answers.
pub const HANDLERS: [&str; 14] = [
    "add", "sub", "mul", "div", "idiv", "eq", "ne", "lt", "gt", "le", "ge", "not", "sprintf", "first",
];

/// Calls handler `name` on `args`; `None` if `name` is not one of [`HANDLERS`].
pub fn call(name: &str, args: &str) -> Option<Result<String, String>> {
    Some(match name {
        "add" | "sub" | "mul" | "div" | "idiv" => fold(name, args),
        "eq" | "ne" | "lt" | "gt" | "le" | "ge" => compare(name, args),
        "not" => match bool::from_arg(args.trim()) {
            Some(b) => Ok((!b).to_string()),
            None => Err("syntax error".to_string()),
        },
        "sprintf" => sprintf(args),
        "first" => Ok(split_words(args).into_iter().next().unwrap_or_default()),
        _ => return None,
    })
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
}

fn number(word: &str) -> Option<Number> {
    i64::from_arg(word)
        .map(Number::Int)
        .or_else(|| word.trim().parse::<f64>().ok().map(Number::Real))
}

/// `add`, `sub`, `mul`, `div`, `idiv` over a space-separated list: the first operand,
/// then each next one applied to it. `div` divides as real numbers, `idiv` truncates
/// that to an integer; integer overflow wraps, as in C.
fn fold(op: &str, args: &str) -> Result<String, String> {
    let mut acc: Option<Number> = None;
    for word in split_words(args) {
        let n = number(&word).ok_or("expected list of numbers")?;
        acc = Some(match acc {
            None if matches!(op, "div" | "idiv") => Number::Real(n.real()),
            None => n,
            Some(a) => apply(op, a, n),
        });
    }
    let identity = if matches!(op, "add" | "sub") { 0 } else { 1 };
    Ok(match (op, acc.unwrap_or(Number::Int(identity))) {
        ("idiv", n) => (n.real() as i64).to_string(),
        (_, Number::Int(i)) => i.to_string(),
        (_, Number::Real(r)) => format_real(r),
    })
}

fn apply(op: &str, a: Number, b: Number) -> Number {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) if !matches!(op, "div" | "idiv") => Number::Int(match op {
            "add" => x.wrapping_add(y),
            "sub" => x.wrapping_sub(y),
            _ => x.wrapping_mul(y),
        }),
        _ => {
            let (x, y) = (a.real(), b.real());
            Number::Real(match op {
                "add" => x + y,
                "sub" => x - y,
                "mul" => x * y,
                _ => x / y,
            })
        }
    }
}

/// Two operands compared as numbers when both are, else as unquoted text, bytewise.
fn compare(op: &str, args: &str) -> Result<String, String> {
    let words = split_words(args);
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
    let mut words = split_words(args).into_iter();
    let format = unquote(&words.next().unwrap_or_default());
    let next_int = |words: &mut std::vec::IntoIter<String>| words.next().and_then(|w| i64::from_arg(&w));
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
                let s = unquote(&words.next().ok_or_else(syntax)?);
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
