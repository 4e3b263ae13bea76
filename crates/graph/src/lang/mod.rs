//! The Click configuration language: lexer, parser, `elementclass` expansion.
//!
//! [`parse`] turns a configuration into a [`FlatConfig`]: every compound element
//! expanded (inner elements named `compound/inner` as Click names them), every
//! connection between primitive elements resolved to element indices.

use crate::error::{ConfigError, Landmark};
use std::collections::HashMap;

mod flatten;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;
pub(crate) mod vars;

/// Parses the Click configuration `source` (read from `file`, for error landmarks)
/// and flattens it. `defines` are command-line `$NAME` definitions; they override the
/// file's `define` statements.
///
/// Whether a bare undeclared name such as `Discard` in `a -> Discard` is an element
/// class (an anonymous element) or an undeclared element is decided by case: names
/// starting with an upper-case letter are classes. [`parse_with_classes`] decides
/// exactly, as Click does, from the set of known classes.
pub fn parse(source: &str, file: &str, defines: &HashMap<String, String>) -> Result<FlatConfig, ConfigError> {
    parser::parse(source, file, defines)
}

/// The text of a configuration read as bytes (a file, standard input): bytes that
/// are not UTF-8 are accepted in comments and otherwise refused with an error at
/// `file:line:column`.
pub fn source_text(bytes: &[u8], file: &str) -> Result<String, ConfigError> {
    lexer::source_text(bytes, file)
}

/// Like [`parse`], with `is_class` telling which names are primitive element classes
/// (for instance `|n| registry.get(n).is_some()`).
pub fn parse_with_classes(
    source: &str,
    file: &str,
    defines: &HashMap<String, String>,
    is_class: &dyn Fn(&str) -> bool,
) -> Result<FlatConfig, ConfigError> {
    parser::parse_with(source, file, defines, Some(is_class))
}

/// One primitive element of a flattened configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementDecl {
    /// Full name (`c/inner` inside compounds; `Class@N` for anonymous elements).
    pub name: String,
    /// Class name as written (a primitive class: compounds are expanded).
    pub class: String,
    /// Configuration string, with `$variables` already substituted; not yet split into
    /// arguments (see [`crate::args`]).
    pub config: String,
    /// Where the element was declared (the start of its name or, for anonymous
    /// elements, of its class name).
    pub landmark: Landmark,
    /// Where the class name was written (for "unknown element class" errors).
    pub class_landmark: Landmark,
}

/// A connection `from [from_port] -> [to_port] to` between primitive elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    pub from: usize,
    pub from_port: usize,
    pub to: usize,
    pub to_port: usize,
    pub landmark: Landmark,
}

/// A parsed, flattened configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlatConfig {
    pub elements: Vec<ElementDecl>,
    pub connections: Vec<Connection>,
    /// Arguments of `require(...)` statements, as written.
    pub requirements: Vec<String>,
}

impl FlatConfig {
    pub fn element_index(&self, name: &str) -> Option<usize> {
        self.elements.iter().position(|e| e.name == name)
    }
}
