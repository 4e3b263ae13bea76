//! Configuration errors that point at `file:line:column`.

use std::fmt;
use std::sync::Arc;

/// A place in a configuration: file, line and column (both 1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landmark {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
    /// The text of that line, for quoting it with a caret under the column.
    pub source_line: Arc<str>,
}

impl Landmark {
    /// A landmark for things that do not come from a file (the command line, tests).
    pub fn unknown() -> Landmark {
        Landmark {
            file: Arc::from("<config>"),
            line: 0,
            column: 0,
            source_line: Arc::from(""),
        }
    }
}

impl fmt::Display for Landmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A configuration error: where, what, and optionally a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub landmark: Option<Landmark>,
    pub message: String,
    pub hint: Option<String>,
    /// Further errors found in the same check (Click reports every unused port, not
    /// only the first), each printed on lines of its own after this one.
    pub also: Vec<ConfigError>,
}

impl ConfigError {
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            landmark: None,
            message: message.into(),
            hint: None,
            also: Vec::new(),
        }
    }

    pub fn at(landmark: &Landmark, message: impl Into<String>) -> ConfigError {
        ConfigError {
            landmark: Some(landmark.clone()),
            message: message.into(),
            hint: None,
            also: Vec::new(),
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> ConfigError {
        self.hint = Some(hint.into());
        self
    }

    /// The first of `errors` carrying the others; `None` if there are none.
    pub fn all(errors: Vec<ConfigError>) -> Option<ConfigError> {
        let mut errors = errors.into_iter();
        let mut first = errors.next()?;
        first.also.extend(errors);
        Some(first)
    }

    /// Sets the landmark if none is set yet.
    pub fn or_at(mut self, landmark: &Landmark) -> ConfigError {
        if self.landmark.is_none() {
            self.landmark = Some(landmark.clone());
        }
        self
    }
}

impl fmt::Display for ConfigError {
    /// `file:line:column: error: message`, then the line quoted with a caret under the
    /// column, then the hint if any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.landmark {
            Some(l) if l.line > 0 => {
                write!(f, "{}: error: {}", l, self.message)?;
                if !l.source_line.is_empty() {
                    let line = l.source_line.trim_end_matches(['\r', '\n']);
                    let caret_pad: String = line
                        .chars()
                        .take(l.column.saturating_sub(1) as usize)
                        .map(|c| if c == '\t' { '\t' } else { ' ' })
                        .collect();
                    write!(f, "\n  {}\n  {}^", line, caret_pad)?;
                }
            }
            Some(l) => write!(f, "{}: error: {}", l.file, self.message)?,
            None => write!(f, "error: {}", self.message)?,
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  = {}", h)?;
        }
        for e in &self.also {
            write!(f, "\n{}", e)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_line_with_caret() {
        let l = Landmark {
            file: Arc::from("r.click"),
            line: 3,
            column: 5,
            source_line: Arc::from("a -> Fooo -> b;\n"),
        };
        let e = ConfigError::at(&l, "unknown element class 'Fooo'").with_hint("did you mean 'Foo'?");
        assert_eq!(
            e.to_string(),
            "r.click:3:5: error: unknown element class 'Fooo'\n  a -> Fooo -> b;\n      ^\n  = did you mean 'Foo'?"
        );
    }
}
