//! `-h ELEMENT.HANDLER` after a run, printed exactly as Click's userlevel driver does.

use graph::router::RouterSpec;
use std::fmt::Write;

fn is_glob(s: &str) -> bool {
    s.contains(['?', '*', '['])
}

/// Shell-style glob match (`*`, `?`, `[...]`), as Click's `glob_match`.
pub fn glob_match(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    fn rec(t: &[char], p: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|i| rec(&t[i..], &p[1..])),
            Some('?') => !t.is_empty() && rec(&t[1..], &p[1..]),
            Some('[') => {
                let Some(end) = p.iter().skip(1).position(|&c| c == ']').map(|i| i + 1) else {
                    return !t.is_empty() && t[0] == '[' && rec(&t[1..], &p[1..]);
                };
                if t.is_empty() {
                    return false;
                }
                let set = &p[1..end];
                let (neg, set) = match set.first() {
                    Some('!') | Some('^') => (true, &set[1..]),
                    _ => (false, set),
                };
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= t[0] && t[0] <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == t[0];
                        i += 1;
                    }
                }
                hit != neg && rec(&t[1..], &p[end + 1..])
            }
            Some(&c) => !t.is_empty() && t[0] == c && rec(&t[1..], &p[1..]),
        }
    }
    rec(&t, &p)
}

/// Reads every requested handler. Returns the text for standard output and the error
/// messages (Click's wording), in order.
pub fn read_all(router: &RouterSpec, requests: &[String]) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut errors = Vec::new();
    let print_names = requests.len() > 1;
    for req in requests {
        let Some((pattern, hname)) = req.split_once('.') else {
            match router.read_global_handler(req) {
                Some(v) => emit(&mut out, req, &v, print_names),
                None => errors.push(format!("no '{}' handler", req)),
            }
            continue;
        };
        // Click: an element name first, then a glob pattern or a class name.
        let (elements, expanded): (Vec<String>, bool) = if router.has_element(pattern) {
            (vec![pattern.to_string()], false)
        } else {
            let matched: Vec<String> = if is_glob(pattern) {
                router
                    .element_names()
                    .filter(|n| glob_match(n, pattern))
                    .map(String::from)
                    .collect()
            } else {
                router
                    .elements_of_class(pattern)
                    .into_iter()
                    .map(String::from)
                    .collect()
            };
            if matched.is_empty() {
                errors.push(if is_glob(pattern) {
                    format!("no element matching '{}'", pattern)
                } else {
                    format!("no element '{}'", pattern)
                });
                continue;
            }
            let readable = matched
                .into_iter()
                .filter(|e| router.has_read_handler(e, hname))
                .collect();
            (readable, true)
        };
        for e in elements {
            let full = format!("{}.{}", e, hname);
            match router.read_handler(&full) {
                Ok(v) => emit(&mut out, &full, &v, print_names || expanded),
                Err(msg) => errors.push(msg),
            }
        }
    }
    (out, errors)
}

fn emit(out: &mut String, name: &str, value: &str, print_name: bool) {
    if print_name {
        let _ = writeln!(out, "{}:", name);
    }
    out.push_str(value);
    if !value.is_empty() && !value.ends_with('\n') {
        out.push('\n');
    }
    if print_name {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globbing() {
        assert!(glob_match("c1", "c*"));
        assert!(glob_match("if1/cnt", "if?/cnt"));
        assert!(glob_match("c2", "c[0-3]"));
        assert!(!glob_match("c5", "c[0-3]"));
        assert!(glob_match("c5", "c[!0-3]"));
        assert!(!glob_match("d1", "c*"));
    }

    #[test]
    fn emit_matches_click() {
        let mut s = String::new();
        emit(&mut s, "c.count", "42", true);
        assert_eq!(s, "c.count:\n42\n\n");
        let mut s = String::new();
        emit(&mut s, "c.count", "42", false);
        assert_eq!(s, "42\n");
        let mut s = String::new();
        emit(&mut s, "c.x", "", true);
        assert_eq!(s, "c.x:\n\n");
    }
}
