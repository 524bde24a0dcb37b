//! Shared helpers for the pardis benches.
