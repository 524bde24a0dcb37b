//! Named parameters, trainable flags and safetensors checkpoints.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor, Var};

use crate::{MlError, Result};

/// One named parameter.
#[derive(Debug, Clone)]
pub struct Param {
    /// Unique dotted name, e.g. `layers.0.attn.q.weight`.
    pub name: String,
    /// The variable (shared with the module that uses it).
    pub var: Var,
    /// Whether the optimiser updates it.
    pub trainable: bool,
}

/// The parameters of a model, in creation order, with checkpoint save/load.
#[derive(Debug, Default, Clone)]
pub struct ParamStore {
    params: Vec<Param>,
}

impl ParamStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `tensor` as parameter `name` and returns its variable.
    ///
    /// # Panics
    /// If `name` is already registered (a programming error in model construction).
    #[track_caller]
    pub fn add(&mut self, name: impl Into<String>, tensor: Tensor, trainable: bool) -> Result<Var> {
        let name = name.into();
        assert!(
            self.get(&name).is_none(),
            "parameter `{name}` registered twice"
        );
        let var = Var::from_tensor(&tensor)?;
        self.params.push(Param {
            name,
            var: var.clone(),
            trainable,
        });
        Ok(var)
    }

    /// The variable called `name`.
    pub fn get(&self, name: &str) -> Option<&Var> {
        self.params.iter().find(|p| p.name == name).map(|p| &p.var)
    }

    /// Removes parameter `name` (e.g. a dense weight replaced by its NF4 form).
    pub fn remove(&mut self, name: &str) -> Option<Param> {
        let i = self.params.iter().position(|p| p.name == name)?;
        Some(self.params.remove(i))
    }

    /// Moves every parameter of `other` to the end of this store, in its order (e.g. layers
    /// built in a staging store once they all succeeded).
    ///
    /// # Panics
    /// If a name of `other` is already registered here (as [`ParamStore::add`]).
    #[track_caller]
    pub fn append(&mut self, other: ParamStore) {
        for p in other.params {
            assert!(
                self.get(&p.name).is_none(),
                "parameter `{}` registered twice",
                p.name
            );
            self.params.push(p);
        }
    }

    /// Sets the trainable flag of every parameter for which `pred(name)` holds.
    pub fn set_trainable(&mut self, trainable: bool, pred: impl Fn(&str) -> bool) {
        for p in &mut self.params {
            if pred(&p.name) {
                p.trainable = trainable;
            }
        }
    }

    /// All parameters in creation order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// The trainable parameters, in creation order.
    pub fn trainable(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.trainable)
    }

    /// Number of scalar values, all or trainable only.
    pub fn count(&self, trainable_only: bool) -> usize {
        self.params
            .iter()
            .filter(|p| p.trainable || !trainable_only)
            .map(|p| p.var.elem_count())
            .sum()
    }

    /// Snapshot of all values (detached copies), for restoring the best epoch.
    pub fn snapshot(&self) -> Result<Vec<Tensor>> {
        Ok(self
            .params
            .iter()
            .map(|p| p.var.as_tensor().copy())
            .collect::<candle_core::Result<_>>()?)
    }

    /// Restores values taken by [`ParamStore::snapshot`] on the same store.
    pub fn restore(&self, snap: &[Tensor]) -> Result<()> {
        for (p, t) in self.params.iter().zip(snap) {
            p.var.set(t)?;
        }
        Ok(())
    }

    /// Writes every parameter plus `extra` tensors to a safetensors file, replacing `path` if
    /// it exists (the per-epoch checkpoint of [`crate::train::Trainer`]). The write is atomic
    /// ([`write_atomically`]): a crash leaves either the old file or the complete new one
    /// under `path`, never a partial one.
    pub fn save(&self, path: &Path, extra: &[(String, Tensor)]) -> Result<()> {
        self.save_as(path, extra, Publish::Replace)
    }

    /// [`ParamStore::save`] that never replaces a file: when `path` exists (or appears while
    /// writing), the error is an [`MlError::Io`] of kind
    /// [`std::io::ErrorKind::AlreadyExists`] and the file there is untouched.
    pub fn save_new(&self, path: &Path, extra: &[(String, Tensor)]) -> Result<()> {
        self.save_as(path, extra, Publish::NoReplace)
    }

    fn save_as(&self, path: &Path, extra: &[(String, Tensor)], how: Publish) -> Result<()> {
        let mut map: HashMap<String, Tensor> = self
            .params
            .iter()
            .map(|p| (p.name.clone(), p.var.as_tensor().clone()))
            .collect();
        for (k, t) in extra {
            map.insert(k.clone(), t.clone());
        }
        write_atomically(path, how, |tmp| save_tensors(&map, tmp))
    }

    /// Loads parameter values from a safetensors file written by [`ParamStore::save`] (or any
    /// file with the same names and shapes). Returns the tensors in the file that are not
    /// parameters (optimiser state and the like).
    ///
    /// Errors: [`MlError::CorruptCheckpoint`] when the file does not parse,
    /// [`MlError::MissingTensor`] when a parameter is absent, [`MlError::ShapeMismatch`] when a
    /// shape differs. Nothing is modified unless every parameter checks out.
    pub fn load(&self, path: &Path) -> Result<HashMap<String, Tensor>> {
        let (vals, rest) = self.stage(path)?;
        self.commit(&vals)?;
        Ok(rest)
    }

    /// Reads and checks the values of every parameter from `path` without installing them
    /// (the first half of [`ParamStore::load`]): the converted values in parameter order and
    /// the file's other tensors.
    pub(crate) fn stage(&self, path: &Path) -> Result<(Vec<Tensor>, HashMap<String, Tensor>)> {
        let mut map = read_checkpoint(path, &Device::Cpu)?;
        let mut vals = Vec::with_capacity(self.params.len());
        for p in &self.params {
            let t = map.remove(&p.name).ok_or_else(|| MlError::MissingTensor {
                path: path.to_path_buf(),
                name: p.name.clone(),
            })?;
            if t.dims() != p.var.dims() {
                return Err(MlError::ShapeMismatch {
                    name: p.name.clone(),
                    expected: p.var.dims().to_vec(),
                    found: t.dims().to_vec(),
                });
            }
            vals.push(t.to_dtype(p.var.dtype())?.to_device(p.var.device())?);
        }
        Ok((vals, map))
    }

    /// Installs values staged by [`ParamStore::stage`] (shapes, dtypes and devices already
    /// match, so setting them does not fail in practice).
    pub(crate) fn commit(&self, vals: &[Tensor]) -> Result<()> {
        for (p, t) in self.params.iter().zip(vals) {
            p.var.set(t)?;
        }
        Ok(())
    }
}

/// Writes `map` as safetensors to `path` (which [`write_atomically`] created).
pub(crate) fn save_tensors(map: &HashMap<String, Tensor>, path: &Path) -> Result<()> {
    candle_core::safetensors::save(map, path).map_err(|e| match e {
        candle_core::Error::Io(io) => MlError::io(path, io),
        other => MlError::Candle(other),
    })
}

/// What [`write_atomically`] does when the final name exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Replace it (atomically: `rename`).
    Replace,
    /// Leave it and fail with [`std::io::ErrorKind::AlreadyExists`].
    NoReplace,
}

/// Writes a file so that a crash never leaves a partial file under `path`:
/// `write` fills a temporary file created (`create_new`, a unique name) in the directory of
/// `path`; it is flushed to disk (`fsync`) and only then given the final name — by `rename`
/// for [`Publish::Replace`], by `hard_link` (which fails if the name exists, atomically) and
/// removing the temporary name for [`Publish::NoReplace`]. The directory is synced afterwards
/// (best effort). On any error, and when `write` panics, the temporary file is removed. A
/// crash (power loss, `kill -9`) can leave a `.<name>.tmp-*` file next to `path`, never a
/// partial `path`.
///
/// On a file system without hard links (`hard_link` fails with other than `AlreadyExists`),
/// [`Publish::NoReplace`] falls back to checking that `path` is absent and then renaming: a
/// file created under `path` by another process between the check and the rename would be
/// replaced (the one race left; std has no portable `renameat2(RENAME_NOREPLACE)`).
///
/// # Errors
/// [`MlError::Io`] naming `path` (kind `AlreadyExists` for [`Publish::NoReplace`] when it
/// exists) or the temporary file; errors of `write`.
pub fn write_atomically(
    path: &Path,
    how: Publish,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let exists = || {
        MlError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the file exists"),
        )
    };
    if how == Publish::NoReplace && path.symlink_metadata().is_ok() {
        return Err(exists());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| MlError::InvalidInput(format!("{} names no file", path.display())))?
        .to_string_lossy()
        .into_owned();
    let tmp = TempFile::create(&dir, &name)?;
    write(&tmp.path)?;
    // The bytes reach the disk before the name does.
    // (A handle opened for writing: some platforms refuse to flush a read-only one.)
    std::fs::OpenOptions::new()
        .write(true)
        .open(&tmp.path)
        .and_then(|f| f.sync_all())
        .map_err(|e| MlError::io(&tmp.path, e))?;
    match how {
        Publish::Replace => {
            std::fs::rename(&tmp.path, path).map_err(|e| MlError::io(path, e))?;
        }
        Publish::NoReplace => match std::fs::hard_link(&tmp.path, path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(exists()),
            Err(_) => {
                // No hard links here: check, then rename (see the race above).
                if path.symlink_metadata().is_ok() {
                    return Err(exists());
                }
                std::fs::rename(&tmp.path, path).map_err(|e| MlError::io(path, e))?;
            }
        },
    }
    // `tmp` is dropped here: removes the temporary name (already gone after a rename).
    drop(tmp);
    if let Ok(d) = std::fs::File::open(&dir) {
        // Best effort: makes the new directory entry durable (not every platform can sync a
        // directory; the file itself is already on disk).
        let _ = d.sync_all();
    }
    Ok(())
}

/// A uniquely named temporary file, removed when dropped.
struct TempFile {
    path: std::path::PathBuf,
}

impl TempFile {
    fn create(dir: &Path, name: &str) -> Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut last = None;
        for _ in 0..100 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(
                ".{name}.tmp-{}-{n}-{nanos:08x}",
                std::process::id()
            ));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(Self { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(MlError::io(&path, e)),
            }
        }
        Err(MlError::io(
            dir,
            last.unwrap_or_else(|| std::io::Error::other("no free temporary name")),
        ))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads all tensors of a safetensors file, mapping parse failures to
/// [`MlError::CorruptCheckpoint`].
///
/// # Errors
/// Those of [`crate::data::read_bytes_limited`] with the limit
/// [`crate::data::MAX_WEIGHTS_BYTES`]; [`MlError::CorruptCheckpoint`] when the file is not
/// safetensors.
pub fn read_checkpoint(path: &Path, dev: &Device) -> Result<HashMap<String, Tensor>> {
    let bytes =
        crate::data::read_bytes_limited(path, "safetensors", crate::data::MAX_WEIGHTS_BYTES)?;
    // Validate with the safetensors parser first so a truncated file is a typed error.
    safetensors::SafeTensors::deserialize(&bytes).map_err(|e| MlError::CorruptCheckpoint {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    candle_core::safetensors::load_buffer(&bytes, dev).map_err(|e| MlError::CorruptCheckpoint {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("ml-models-params-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    /// While the bytes are written (when a crash could strike) nothing is under the final name,
    /// or the previous file still is; a failed or panicking write leaves neither the final name
    /// nor a temporary file.
    #[test]
    fn a_partial_write_never_appears_under_the_final_name() {
        let dir = scratch("partial");
        let path = dir.join("ck.safetensors");
        for how in [Publish::Replace, Publish::NoReplace] {
            let e = write_atomically(&path, how, |tmp| {
                assert!(!path.exists(), "nothing under the final name while writing");
                assert_eq!(
                    tmp.parent(),
                    path.parent(),
                    "the temporary file is beside it"
                );
                std::fs::write(tmp, b"half a chec").unwrap();
                Err(MlError::InvalidInput("disk full".into()))
            });
            assert!(matches!(e, Err(MlError::InvalidInput(_))));
            assert!(entries(&dir).is_empty(), "{how:?}: {:?}", entries(&dir));
            let crashed = std::panic::catch_unwind(|| {
                write_atomically(&path, how, |tmp| {
                    std::fs::write(tmp, b"half a chec").unwrap();
                    panic!("killed while writing");
                })
            });
            assert!(crashed.is_err());
            assert!(entries(&dir).is_empty(), "{how:?}: {:?}", entries(&dir));
        }
        // Replacing: the old file stays whole until the new one is complete.
        std::fs::write(&path, b"old").unwrap();
        write_atomically(&path, Publish::Replace, |tmp| {
            assert_eq!(std::fs::read(&path).unwrap(), b"old");
            std::fs::write(tmp, b"new").map_err(|e| MlError::io(tmp, e))
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(entries(&dir), ["ck.safetensors"]);
    }

    /// `NoReplace` never replaces a file, whether it was there before or appeared while
    /// writing (another process), and cleans up after itself.
    #[test]
    fn no_replace_keeps_an_existing_file() {
        let dir = scratch("noreplace");
        let path = dir.join("ck.safetensors");
        std::fs::write(&path, b"theirs").unwrap();
        let mut called = false;
        let e = write_atomically(&path, Publish::NoReplace, |_| {
            called = true;
            Ok(())
        })
        .unwrap_err();
        assert!(
            matches!(&e, MlError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
            "{e:?}"
        );
        assert!(!called, "refused before writing");
        std::fs::remove_file(&path).unwrap();
        let e = write_atomically(&path, Publish::NoReplace, |tmp| {
            std::fs::write(&path, b"theirs").unwrap();
            std::fs::write(tmp, b"ours").map_err(|e| MlError::io(tmp, e))
        })
        .unwrap_err();
        assert!(
            matches!(&e, MlError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
            "{e:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        assert_eq!(entries(&dir), ["ck.safetensors"]);
        std::fs::remove_file(&path).unwrap();
        write_atomically(&path, Publish::NoReplace, |tmp| {
            std::fs::write(tmp, b"ours").map_err(|e| MlError::io(tmp, e))
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"ours");
        assert_eq!(entries(&dir), ["ck.safetensors"]);
    }

    /// `save_new` refuses an existing file; `save` replaces it; both round-trip.
    #[test]
    fn save_new_and_save() {
        let dir = scratch("save");
        let path = dir.join("p.safetensors");
        let mut store = ParamStore::new();
        store
            .add("w", Tensor::new(&[1f32, 2.0], &Device::Cpu).unwrap(), true)
            .unwrap();
        store.save_new(&path, &[]).unwrap();
        assert!(matches!(
            store.save_new(&path, &[]),
            Err(MlError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists
        ));
        store
            .get("w")
            .unwrap()
            .set(&Tensor::new(&[3f32, 4.0], &Device::Cpu).unwrap())
            .unwrap();
        store.save(&path, &[]).unwrap();
        store
            .get("w")
            .unwrap()
            .set(&Tensor::new(&[0f32, 0.0], &Device::Cpu).unwrap())
            .unwrap();
        store.load(&path).unwrap();
        let w = store
            .get("w")
            .unwrap()
            .as_tensor()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(w, [3.0, 4.0]);
        assert_eq!(entries(&dir), ["p.safetensors"]);
    }
}
