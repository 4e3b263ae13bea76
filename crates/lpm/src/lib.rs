//! Longest-prefix match.
