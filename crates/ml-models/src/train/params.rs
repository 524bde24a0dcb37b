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

    /// Writes every parameter plus `extra` tensors to a safetensors file.
    pub fn save(&self, path: &Path, extra: &[(String, Tensor)]) -> Result<()> {
        let mut map: HashMap<String, Tensor> = self
            .params
            .iter()
            .map(|p| (p.name.clone(), p.var.as_tensor().clone()))
            .collect();
        for (k, t) in extra {
            map.insert(k.clone(), t.clone());
        }
        candle_core::safetensors::save(&map, path).map_err(|e| match e {
            candle_core::Error::Io(io) => MlError::io(path, io),
            other => MlError::Candle(other),
        })
    }

    /// Loads parameter values from a safetensors file written by [`ParamStore::save`] (or any
    /// file with the same names and shapes). Returns the tensors in the file that are not
    /// parameters (optimiser state and the like).
    ///
    /// Errors: [`MlError::CorruptCheckpoint`] when the file does not parse,
    /// [`MlError::MissingTensor`] when a parameter is absent, [`MlError::ShapeMismatch`] when a
    /// shape differs. Nothing is modified unless every parameter checks out.
    pub fn load(&self, path: &Path) -> Result<HashMap<String, Tensor>> {
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
        for (p, t) in self.params.iter().zip(&vals) {
            p.var.set(t)?;
        }
        Ok(map)
    }
}

/// Reads all tensors of a safetensors file, mapping parse failures to
/// [`MlError::CorruptCheckpoint`].
pub fn read_checkpoint(path: &Path, dev: &Device) -> Result<HashMap<String, Tensor>> {
    let bytes = std::fs::read(path).map_err(|e| MlError::io(path, e))?;
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
