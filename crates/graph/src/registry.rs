//! The table of element classes known to a router, by Click name.

use crate::element::ElementClass;
use crate::error::ConfigError;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Registry {
    classes: BTreeMap<&'static str, Arc<dyn ElementClass>>,
}

impl Registry {
    /// An empty registry.
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// Every element class of the graph crate's library.
    pub fn with_library() -> Registry {
        let mut r = Registry::empty();
        crate::elements::register_all(&mut r);
        r
    }

    pub fn add(&mut self, class: Arc<dyn ElementClass>) {
        self.classes.insert(class.name(), class);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn ElementClass>> {
        self.classes.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.classes.keys().copied()
    }

    /// Known class names closest to `name` (for "unknown element class" hints).
    pub fn suggest(&self, name: &str) -> Vec<&'static str> {
        let lname = name.to_ascii_lowercase();
        let mut scored: Vec<(usize, &'static str)> = self
            .names()
            .map(|n| (edit_distance(&lname, &n.to_ascii_lowercase()), n))
            .filter(|(d, n)| *d <= (n.len().max(name.len()) / 3).max(2))
            .collect();
        scored.sort();
        scored.into_iter().take(3).map(|(_, n)| n).collect()
    }
}

impl Registry {
    /// "did you mean 'A' or 'B'?" for the known classes nearest `name`, if any.
    pub fn did_you_mean(&self, name: &str) -> Option<String> {
        let near = self.suggest(name);
        if near.is_empty() {
            return None;
        }
        let list: Vec<String> = near.iter().map(|s| format!("'{}'", s)).collect();
        Some(format!("did you mean {}?", list.join(" or ")))
    }

    /// Adds "did you mean" to an error about a name that is neither a declared element
    /// nor a known class: the Click parser reports a bare unknown word as an undeclared
    /// element, which is most often a misspelt class.
    pub fn hint_unknown_name(&self, err: ConfigError) -> ConfigError {
        let Some(name) = err
            .message
            .strip_prefix("undeclared element '")
            .and_then(|r| r.strip_suffix('\''))
        else {
            return err;
        };
        if err.hint.is_some() {
            return err;
        }
        let Some(question) = self.did_you_mean(name) else {
            return err;
        };
        let hint = format!("'{}' is not a known element class either; {}", name, question);
        err.with_hint(hint)
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("counter", "countr"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
