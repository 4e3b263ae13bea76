//! Input specifications (Click's `IPRewriterInput`): what a rewriter does with a
//! packet of no known flow arriving on an input.

use super::flow::FlowId;
use super::pattern::Pattern;
use std::sync::Arc;

/// An element that chooses mappings for new flows (Click's `IPMapper`), named by an
/// `ELEMENTNAME` input spec: RoundRobinIPMapper.
pub(crate) trait Mapper: Send + Sync {
    /// The rewritten flow and the forward and reply outputs for `flow`, or `None`
    /// (a mapping failure). `taken(reply)` says whether a reply flow is mapped.
    fn rewrite(&self, flow: FlowId, taken: &dyn Fn(FlowId) -> bool) -> Option<(FlowId, u16, u16)>;
}

#[derive(Clone)]
pub(crate) enum InputSpec {
    Drop,
    Pass(u16),
    Keep(u16, u16),
    Pattern(Arc<Pattern>, u16, u16),
    Mapper(Arc<dyn Mapper>),
}

impl InputSpec {
    /// Click's text of the spec in the `patterns` handler.
    pub fn unparse(&self) -> String {
        match self {
            InputSpec::Drop => "<drop>".to_string(),
            InputSpec::Pass(_) => "<nochange>".to_string(),
            InputSpec::Keep(..) => "<keep>".to_string(),
            InputSpec::Pattern(p, ..) => p.unparse(),
            InputSpec::Mapper(_) => "<mapper>".to_string(),
        }
    }
}

impl InputSpec {
    /// Whether `other` does what this spec does with a new flow: the same kind, outputs
    /// and pattern (as Click prints it). Mappers compare by kind only: the flows they
    /// made stay valid whatever the mapper would choose next.
    pub fn same_as(&self, other: &InputSpec) -> bool {
        match (self, other) {
            (InputSpec::Drop, InputSpec::Drop) | (InputSpec::Mapper(_), InputSpec::Mapper(_)) => true,
            (InputSpec::Pass(a), InputSpec::Pass(b)) => a == b,
            (InputSpec::Keep(a, b), InputSpec::Keep(c, d)) => (a, b) == (c, d),
            (InputSpec::Pattern(p, a, b), InputSpec::Pattern(q, c, d)) => {
                (a, b) == (c, d) && p.unparse() == q.unparse()
            }
            _ => false,
        }
    }
}

/// What input specs may name: the patterns of the configuration's
/// IPRewriterPatterns elements and its mapper elements, found at configuration time.
#[derive(Clone, Default)]
pub(crate) struct Resolver {
    pub patterns: Vec<(String, Arc<Pattern>)>,
    pub mappers: Vec<(String, Arc<dyn Mapper>)>,
    /// Names of other elements, for "element is not an IPMapper".
    pub elements: Vec<String>,
}

/// Parses one input spec. `addresses`: an address rewriter's (two-field patterns).
/// Errors are Click's, without the "input spec N: " prefix.
pub(crate) fn parse(
    text: &str,
    noutputs: usize,
    addresses: bool,
    resolver: &Resolver,
) -> Result<InputSpec, String> {
    let text = text.trim();
    let (word, rest) = match text.split_once(|c: char| c.is_ascii_whitespace()) {
        Some((w, r)) => (w, r.trim()),
        None => (text, ""),
    };
    if word.is_empty() {
        return Err("empty argument".to_string());
    }
    let out_of_range = || "output port out of range".to_string();
    let port =
        |s: &str, what: &str| -> Result<u16, String> { s.parse::<u16>().map_err(|_| what.to_string()) };
    match word {
        "pass" | "passthrough" | "nochange" => {
            let out = if rest.is_empty() {
                0
            } else {
                rest.parse::<i64>()
                    .map_err(|_| "syntax error, expected 'nochange [OUTPUT]'".to_string())?
            };
            if out < 0 || out as usize >= noutputs {
                return Err(out_of_range());
            }
            Ok(InputSpec::Pass(out as u16))
        }
        "keep" => {
            let w: Vec<&str> = rest.split_whitespace().collect();
            if w.len() != 2 {
                return Err("bad forward port".to_string());
            }
            let f = port(w[0], "bad forward port")?;
            let r = port(w[1], "bad reply port")?;
            if usize::from(f) >= noutputs || usize::from(r) >= noutputs {
                return Err(out_of_range());
            }
            Ok(InputSpec::Keep(f, r))
        }
        "drop" | "discard" => {
            if !rest.is_empty() {
                return Err(format!("syntax error, expected '{}'", word));
            }
            Ok(InputSpec::Drop)
        }
        "pattern" | "xpattern" => {
            let w: Vec<&str> = rest.split_whitespace().collect();
            if w.len() <= 2 {
                return Err(super::pattern::SYNTAX.to_string());
            }
            let (pw, ports) = w.split_at(w.len() - 2);
            let pattern = if pw.len() == 1 {
                resolver
                    .patterns
                    .iter()
                    .find(|(n, _)| n == pw[0])
                    .map(|(_, p)| p.clone())
                    .ok_or_else(|| format!("no such pattern '{}'", pw[0]))?
            } else if addresses {
                Arc::new(Pattern::parse_addresses(pw)?)
            } else {
                Arc::new(Pattern::parse(pw)?)
            };
            let f = port(ports[0], "bad forward port")?;
            let r = port(ports[1], "bad reply port")?;
            if usize::from(f) >= noutputs || usize::from(r) >= noutputs {
                return Err(out_of_range());
            }
            Ok(InputSpec::Pattern(pattern, f, r))
        }
        name => {
            if let Some((_, m)) = resolver.mappers.iter().find(|(n, _)| n == name) {
                if !rest.is_empty() {
                    return Err("syntax error, expected 'ELEMENTNAME'".to_string());
                }
                Ok(InputSpec::Mapper(m.clone()))
            } else if resolver.elements.iter().any(|n| n == name) {
                Err("element is not an IPMapper".to_string())
            } else {
                Err("unknown specification".to_string())
            }
        }
    }
}
