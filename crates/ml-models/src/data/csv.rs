//! Numeric CSV tables (comma, semicolon or tab separated; optional header row).

use std::path::Path;

use crate::{MlError, Result};

/// A numeric table, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvTable {
    /// Column names when the first row was not numeric.
    pub header: Option<Vec<String>>,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Values, `rows × cols`, row-major.
    pub data: Vec<f64>,
}

impl CsvTable {
    /// Column `j` as a vector.
    pub fn column(&self, j: usize) -> Vec<f64> {
        (0..self.rows)
            .map(|i| self.data[i * self.cols + j])
            .collect()
    }
}

/// Reads a numeric CSV file. Blank lines are skipped; every row must have the same number of
/// fields; a non-numeric first row is taken as the header.
///
/// # Errors
/// Those of [`super::read_text_limited`] with the limit [`super::MAX_FILE_BYTES`], and
/// [`MlError::Format`] naming the line of a bad row.
pub fn read_csv(path: &Path) -> Result<CsvTable> {
    let text = super::read_text_limited(path, "csv", super::MAX_FILE_BYTES)?;
    parse_csv(&text, path)
}

/// Parses CSV text; `path` only labels errors.
pub fn parse_csv(text: &str, path: &Path) -> Result<CsvTable> {
    let sep = [',', ';', '\t']
        .into_iter()
        .find(|&c| text.lines().next().is_some_and(|l| l.contains(c)))
        .unwrap_or(',');
    let mut header = None;
    let mut data = Vec::new();
    let mut cols = 0usize;
    let mut rows = 0usize;
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(sep).map(str::trim).collect();
        let parsed: std::result::Result<Vec<f64>, _> =
            fields.iter().map(|f| f.parse::<f64>()).collect();
        match parsed {
            Ok(v) => {
                if cols == 0 {
                    cols = v.len();
                } else if v.len() != cols {
                    return Err(MlError::format(
                        "csv",
                        path,
                        format!("line {}: {} fields, expected {cols}", lineno + 1, v.len()),
                    ));
                }
                data.extend(v);
                rows += 1;
            }
            Err(e) if rows == 0 && header.is_none() => {
                let _ = e;
                cols = fields.len();
                header = Some(fields.iter().map(|s| s.to_string()).collect());
            }
            Err(e) => {
                return Err(MlError::format(
                    "csv",
                    path,
                    format!("line {}: {e}", lineno + 1),
                ))
            }
        }
    }
    Ok(CsvTable {
        header,
        rows,
        cols,
        data,
    })
}
