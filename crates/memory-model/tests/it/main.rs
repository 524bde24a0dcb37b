//! Integration tests of `memory_model`: zoo counts, anchors against published numbers,
//! Hugging Face configs, bad input, and properties.

mod anchors;
mod bad_input;
mod hf;
mod properties;
mod search_space;
mod techniques;
mod zoo;
