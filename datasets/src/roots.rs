//! Data roots and verification.

use crate::{Dataset, DatasetError};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Which root a file was found under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The directory given by `$PARDIS_DATA`.
    Env,
    /// `<workspace>/datasets/cache/`.
    Cache,
    /// `<workspace>/../shared/datasets/`.
    Shared,
    /// `/usr/share/datasets/`, where Debian's `dataset-*` packages install (e.g.
    /// `dataset-fashion-mnist`).
    System,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Env => "$PARDIS_DATA",
            Origin::Cache => "datasets/cache",
            Origin::Shared => "../shared/datasets",
            Origin::System => "/usr/share/datasets",
        })
    }
}

/// A data set's file found on disk.
#[derive(Debug, Clone)]
pub struct Located {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Which root it was found under.
    pub origin: Origin,
}

/// The ordered list of directories searched for data.
#[derive(Debug, Clone)]
pub struct DataRoots {
    roots: Vec<(Origin, PathBuf)>,
}

/// The workspace root, known at compile time (this crate lives in `<workspace>/datasets`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

impl DataRoots {
    /// Roots for this workspace: `env_dir` (the value of `$PARDIS_DATA`, if the caller has one),
    /// then `datasets/cache/`, then `../shared/datasets/`, then `/usr/share/datasets/` (Debian
    /// data-set packages).
    pub fn default_for_workspace(env_dir: Option<PathBuf>) -> DataRoots {
        let ws = workspace_root();
        let mut roots = Vec::new();
        if let Some(dir) = env_dir.filter(|d| !d.as_os_str().is_empty()) {
            roots.push((Origin::Env, dir));
        }
        roots.push((Origin::Cache, ws.join("datasets").join("cache")));
        roots.push((
            Origin::Shared,
            ws.join("..").join("shared").join("datasets"),
        ));
        roots.push((Origin::System, PathBuf::from("/usr/share/datasets")));
        DataRoots { roots }
    }

    /// Convenience for binaries, tests and benches: reads `$PARDIS_DATA` and calls
    /// [`DataRoots::default_for_workspace`]. Library crates should take roots from their caller.
    pub fn from_env() -> DataRoots {
        Self::default_for_workspace(std::env::var_os("PARDIS_DATA").map(PathBuf::from))
    }

    /// Explicit roots, searched in order.
    pub fn new(roots: Vec<(Origin, PathBuf)>) -> DataRoots {
        DataRoots { roots }
    }

    /// The searched directories, in order.
    pub fn dirs(&self) -> impl Iterator<Item = &(Origin, PathBuf)> {
        self.roots.iter()
    }

    /// Where `dataset` is on disk, if anywhere (the first root that has the file).
    pub fn locate(&self, dataset: &Dataset) -> Option<Located> {
        self.locate_path(&dataset.path)
    }

    /// Where a path relative to a data root is on disk, if anywhere.
    pub fn locate_path(&self, rel: &str) -> Option<Located> {
        self.roots.iter().find_map(|(origin, dir)| {
            let p = dir.join(rel);
            p.is_file().then_some(Located {
                path: p,
                origin: *origin,
            })
        })
    }

    /// Every copy of `dataset` on disk, in search order.
    pub fn locate_all(&self, dataset: &Dataset) -> Vec<Located> {
        self.roots
            .iter()
            .filter_map(|(origin, dir)| {
                let p = dir.join(&dataset.path);
                p.is_file().then_some(Located {
                    path: p,
                    origin: *origin,
                })
            })
            .collect()
    }

    /// The first copy of `dataset` that passes [`verify`] (a corrupt copy earlier in the search
    /// order does not shadow a good one further down); the first copy's verification error when
    /// none passes, or the not-found error of [`DataRoots::require`].
    pub fn require_verified(&self, dataset: &Dataset) -> Result<Located, DatasetError> {
        let mut first_error = None;
        for loc in self.locate_all(dataset) {
            match dataset.verify(&loc.path) {
                Ok(()) => return Ok(loc),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| DatasetError::NotFound {
            name: dataset.name.clone(),
            path: dataset.path.clone(),
            searched: self.searched(),
        }))
    }

    /// The first copy of `dataset` whose size is the manifest's (a cheap check: a truncated or
    /// foreign file earlier in the search order does not shadow a good copy further down; use
    /// [`DataRoots::require_verified`] to check the bytes too). Errors: the first copy's size
    /// mismatch when no copy has the right size, or [`DatasetError::NotFound`] naming the
    /// searched roots.
    pub fn require(&self, dataset: &Dataset) -> Result<Located, DatasetError> {
        let mut first_error = None;
        for loc in self.locate_all(dataset) {
            let size = std::fs::metadata(&loc.path)
                .map_err(|source| DatasetError::Io {
                    path: loc.path.clone(),
                    source,
                })?
                .len();
            if size == dataset.size {
                return Ok(loc);
            }
            first_error.get_or_insert(DatasetError::Mismatch {
                path: loc.path,
                what: "size",
                expected: dataset.size.to_string(),
                found: size.to_string(),
            });
        }
        Err(first_error.unwrap_or_else(|| DatasetError::NotFound {
            name: dataset.name.clone(),
            path: dataset.path.clone(),
            searched: self.searched(),
        }))
    }

    /// Locates a path relative to a data root (e.g. `minilm/tokenizer.json`, a file the manifest
    /// may not list) and returns where it is, or an error naming the searched roots.
    pub fn require_path(&self, rel: &str) -> Result<Located, DatasetError> {
        self.locate_path(rel)
            .ok_or_else(|| DatasetError::FileNotFound {
                path: rel.to_string(),
                searched: self.searched(),
            })
    }

    /// The roots as one comma-separated list, for error messages.
    fn searched(&self) -> String {
        self.roots
            .iter()
            .map(|(_, d)| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Checks a file's size and sha256 against the manifest entry.
pub fn verify(dataset: &Dataset, path: &Path) -> Result<(), DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size != dataset.size {
        return Err(DatasetError::Mismatch {
            path: path.to_path_buf(),
            what: "size",
            expected: dataset.size.to_string(),
            found: size.to_string(),
        });
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let found = hex::encode(hasher.finalize());
    if found != dataset.sha256 {
        return Err(DatasetError::Mismatch {
            path: path.to_path_buf(),
            what: "sha256",
            expected: dataset.sha256.clone(),
            found,
        });
    }
    Ok(())
}

impl Dataset {
    /// Verifies the file at `path` against this entry's size and sha256.
    pub fn verify(&self, path: &Path) -> Result<(), DatasetError> {
        verify(self, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Manifest;

    fn tmp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pardis-datasets-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entry(size: u64, sha256: &str) -> Dataset {
        Dataset {
            name: "t".into(),
            kind: "text".into(),
            format: "plain-text".into(),
            path: "sub/t.txt".into(),
            url: "https://example.org/t.txt".into(),
            license: "none".into(),
            description: "test".into(),
            prepared: None,
            size,
            sha256: sha256.into(),
        }
    }

    #[test]
    fn first_root_wins_and_verification_checks_bytes() {
        let a = tmp_dir("a");
        let b = tmp_dir("b");
        std::fs::create_dir_all(b.join("sub")).unwrap();
        std::fs::write(b.join("sub/t.txt"), b"abc").unwrap();
        let roots = DataRoots::new(vec![(Origin::Env, a.clone()), (Origin::Cache, b.clone())]);
        // sha256("abc")
        let good = entry(
            3,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        );
        let found = roots.require(&good).unwrap();
        assert_eq!(found.origin, Origin::Cache);
        good.verify(&found.path).unwrap();
        let bad = entry(3, &"0".repeat(64));
        assert!(matches!(
            bad.verify(&found.path),
            Err(DatasetError::Mismatch { what: "sha256", .. })
        ));
        let short = entry(4, &"0".repeat(64));
        assert!(matches!(
            short.verify(&found.path),
            Err(DatasetError::Mismatch { what: "size", .. })
        ));
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::write(a.join("sub/t.txt"), b"xyz").unwrap();
        assert_eq!(roots.require(&good).unwrap().origin, Origin::Env);
        // A corrupt copy earlier in the search order does not shadow the good one.
        assert_eq!(roots.require_verified(&good).unwrap().origin, Origin::Cache);
        assert_eq!(roots.locate_all(&good).len(), 2);
        assert!(matches!(
            roots.require_verified(&bad),
            Err(DatasetError::Mismatch { .. })
        ));
        // A copy of the wrong size does not shadow one of the right size for `require`; with
        // no copy of the right size, the first one's mismatch is the error.
        std::fs::write(a.join("sub/t.txt"), b"truncated file").unwrap();
        assert_eq!(roots.require(&good).unwrap().origin, Origin::Cache);
        assert!(matches!(
            roots.require(&entry(5, "x")),
            Err(DatasetError::Mismatch { what: "size", path, .. }) if path.starts_with(&a)
        ));
        let _ = std::fs::remove_dir_all(a);
        let _ = std::fs::remove_dir_all(b);
    }

    #[test]
    fn missing_dataset_names_searched_roots() {
        let roots = DataRoots::new(vec![(Origin::Cache, PathBuf::from("/nonexistent-root"))]);
        let err = roots.require(&entry(1, "x")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-root"));
    }

    #[test]
    fn require_path_finds_unlisted_files_in_root_order() {
        let a = tmp_dir("pa");
        let b = tmp_dir("pb");
        std::fs::create_dir_all(b.join("m")).unwrap();
        std::fs::write(b.join("m/f.json"), b"{}").unwrap();
        let roots = DataRoots::new(vec![(Origin::Env, a.clone()), (Origin::Shared, b.clone())]);
        let found = roots.require_path("m/f.json").unwrap();
        assert_eq!(
            (found.origin, found.path),
            (Origin::Shared, b.join("m/f.json"))
        );
        // A directory of that name is not a file.
        std::fs::create_dir_all(a.join("m/f.json")).unwrap();
        assert_eq!(
            roots.require_path("m/f.json").unwrap().origin,
            Origin::Shared
        );
        let err = roots.require_path("m/g.json").unwrap_err();
        assert!(matches!(&err, DatasetError::FileNotFound { path, .. } if path == "m/g.json"));
        let msg = err.to_string();
        assert!(msg.contains(&a.display().to_string()) && msg.contains(&b.display().to_string()));
        let _ = std::fs::remove_dir_all(a);
        let _ = std::fs::remove_dir_all(b);
    }

    #[test]
    fn shared_copies_verify_when_present() {
        let m = Manifest::builtin();
        let roots = DataRoots::default_for_workspace(None);
        let d = m.get("facebook-combined").unwrap();
        match roots.locate(d) {
            Some(found) => d.verify(&found.path).unwrap(),
            None => eprintln!("skipping: facebook-combined not found in any data root"),
        }
    }
}
