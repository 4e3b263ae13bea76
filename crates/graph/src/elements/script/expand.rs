//! Substitution in a Script's text, as Click's `cp_expand`: `$name`, `${name}`, `$?`,
//! `$#` and `$(handler args)` are replaced by what the expander gives; nothing is
//! expanded inside single quotes or comments; inside double quotes a value is escaped
//! so that one layer of unquoting gives it back unchanged.

use crate::lang::vars::{substitute, VarForm};

/// How a reference was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// `$name`, `${name}`, `$?`, `$#`.
    Variable,
    /// `$(handler args)`: a read handler call.
    Call,
}

/// What a reference stands for: `None` leaves the reference as written (an unknown
/// variable, a handler call that failed).
pub trait Expander {
    fn value(&mut self, name: &str, how: Reference) -> Option<String>;
}

/// `text` with its references replaced (Click's `cp_expand`, the configuration
/// language's own substitution over the script's names). With `quote_values`, a value
/// substituted outside any quotes is put in double quotes, so that one unquoting
/// (Click's `print`) gives the value byte for byte.
pub fn expand(text: &str, ex: &mut dyn Expander, quote_values: bool) -> String {
    substitute(text, 0, quote_values, &mut |name, form, _depth| {
        let how = match form {
            VarForm::Parens => Reference::Call,
            VarForm::Plain | VarForm::Braces => Reference::Variable,
        };
        ex.value(name, how)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::unquote;
    use std::collections::HashMap;

    struct Vars(HashMap<&'static str, &'static str>, Vec<String>);

    impl Expander for Vars {
        fn value(&mut self, name: &str, how: Reference) -> Option<String> {
            match how {
                Reference::Variable => self.0.get(name).map(|v| v.to_string()),
                Reference::Call => {
                    self.1.push(name.to_string());
                    (name == "c.count").then(|| "42".to_string())
                }
            }
        }
    }

    fn vars() -> Vars {
        Vars(
            [("x", "7"), ("q", "a \"b\"\n"), ("1", "first"), ("#", "2")]
                .into_iter()
                .collect(),
            Vec::new(),
        )
    }

    #[test]
    fn variables_and_calls_are_replaced() {
        let mut v = vars();
        assert_eq!(expand("x=$x ${x}y $1 $#", &mut v, false), "x=7 7y first 2");
        assert_eq!(expand("n $(c.count) end", &mut v, false), "n 42 end");
        assert_eq!(v.1, vec!["c.count"]);
    }

    #[test]
    fn unknown_references_stay_as_written() {
        let mut v = vars();
        assert_eq!(
            expand("$nope ${nope} $(d.count) $ $(open", &mut v, false),
            "$nope ${nope} $(d.count) $ $(open"
        );
    }

    #[test]
    fn nothing_is_expanded_in_single_quotes_or_comments() {
        let mut v = vars();
        assert_eq!(expand("'$x' \"$x\" // $x", &mut v, false), "'$x' \"7\" // $x");
        assert_eq!(expand("a /* $x */ $x", &mut v, false), "a /* $x */ 7");
    }

    #[test]
    fn a_call_may_hold_references() {
        let mut v = vars();
        v.0.insert("e", "c");
        assert_eq!(expand("$($e.count)", &mut v, false), "42");
        assert_eq!(v.1, vec!["c.count"]);
    }

    #[test]
    fn values_in_double_quotes_unquote_to_themselves() {
        let mut v = vars();
        let inside = expand("\"[$q]\"", &mut v, false);
        assert_eq!(inside, "\"[a \\\"b\\\"\\n]\"");
        assert_eq!(unquote(&inside), "[a \"b\"\n]");
        // Quoted for print: outside quotes a value gets its own.
        let printed = expand("v=$q", &mut v, true);
        assert_eq!(unquote(&printed), "v=a \"b\"\n");
        assert_eq!(unquote(&expand("'$q' $x", &mut v, true)), "$q 7");
    }
}
