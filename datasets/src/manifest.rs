//! The manifest of public data sets.

use crate::DatasetError;
use serde::Deserialize;

/// The manifest shipped with this crate (`datasets/manifest.toml`).
const BUILTIN: &str = include_str!("../manifest.toml");

/// One public data set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dataset {
    /// Short unique name, e.g. `email-Enron`.
    pub name: String,
    /// `graph`, `matrix`, `tabular`, `text`, `image`.
    pub kind: String,
    /// File format, e.g. `snap-edgelist-gz`, `matrix-market`, `dlmc-smtx`, `npz`, `csv`.
    pub format: String,
    /// Path relative to a data root.
    pub path: String,
    /// Original public URL.
    pub url: String,
    /// Licence of the data.
    pub license: String,
    /// One line saying what it is.
    pub description: String,
    /// How the file differs from what `url` serves, when it does.
    #[serde(default)]
    pub prepared: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// Lower-case hex sha256 of the file.
    pub sha256: String,
}

/// All data sets known to pardis.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    /// Entries in manifest order.
    #[serde(rename = "dataset")]
    pub datasets: Vec<Dataset>,
}

impl Manifest {
    /// The manifest compiled into this crate.
    pub fn builtin() -> Manifest {
        Self::parse(BUILTIN).expect("the built-in manifest is valid (checked by a test)")
    }

    /// Parses a manifest from TOML text.
    pub fn parse(text: &str) -> Result<Manifest, DatasetError> {
        toml::from_str(text).map_err(|e| DatasetError::Manifest(e.to_string()))
    }

    /// Looks a data set up by name.
    pub fn get(&self, name: &str) -> Result<&Dataset, DatasetError> {
        self.datasets
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| DatasetError::Unknown {
                name: name.to_string(),
                known: self
                    .datasets
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Data sets of one kind (`graph`, `matrix`, ...).
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Dataset> + 'a {
        self.datasets.iter().filter(move |d| d.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_manifest_is_consistent() {
        let m = Manifest::builtin();
        assert!(m.datasets.len() > 50);
        let mut names: Vec<_> = m.datasets.iter().map(|d| &d.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), m.datasets.len(), "names are unique");
        for d in &m.datasets {
            assert_eq!(d.sha256.len(), 64, "{}", d.name);
            assert!(d.url.starts_with("https://"), "{}", d.name);
            assert!(
                !d.path.starts_with('/') && !d.path.contains(".."),
                "{}",
                d.name
            );
        }
    }

    #[test]
    fn unknown_name_lists_known_ones() {
        let err = Manifest::builtin().get("no-such-set").unwrap_err();
        assert!(err.to_string().contains("email-Enron"));
    }

    #[test]
    fn malformed_manifest_is_an_error() {
        assert!(Manifest::parse("[[dataset]]\nname = 3").is_err());
    }
}
