//! AdamW (Loshchilov & Hutter 2019) with exportable state and global-norm gradient clipping.
//!
//! candle-nn's `AdamW` keeps its moments private, so a resumed run would restart them; this one
//! stores `m`, `v`, the step count and the per-parameter learning-rate factors
//! ([`AdamW::scale_lr`]) in the checkpoint, making resume exact.

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};

use crate::train::params::ParamStore;
use crate::{MlError, Result};

/// AdamW hyper-parameters (defaults: β = (0.9, 0.999), ε = 1e-8, no weight decay).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    /// First-moment decay, default 0.9.
    pub beta1: f64,
    /// Second-moment decay, default 0.999.
    pub beta2: f64,
    /// Denominator guard, default 1e-8.
    pub eps: f64,
    /// Decoupled weight decay, default 0.0.
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

/// AdamW over the trainable parameters of a [`ParamStore`].
#[derive(Debug)]
pub struct AdamW {
    cfg: AdamWConfig,
    vars: Vec<(String, Var)>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    t: usize,
    /// Per-variable learning-rate factor (1 unless [`AdamW::scale_lr`] set it).
    lr_scale: Vec<f64>,
}

impl AdamW {
    /// An optimiser for the parameters of `store` that are trainable now.
    pub fn new(store: &ParamStore, cfg: AdamWConfig) -> Result<Self> {
        let vars: Vec<(String, Var)> = store
            .trainable()
            .map(|p| (p.name.clone(), p.var.clone()))
            .collect();
        let m = vars
            .iter()
            .map(|(_, v)| v.zeros_like())
            .collect::<candle_core::Result<Vec<_>>>()?;
        let v = m.clone();
        let lr_scale = vec![1.0; vars.len()];
        Ok(Self {
            cfg,
            vars,
            m,
            v,
            t: 0,
            lr_scale,
        })
    }

    /// Multiplies the learning rate of every optimised variable whose name satisfies `pred`
    /// by `factor` (e.g. a pretrained encoder fine-tuned at a fraction of a new head's rate);
    /// returns how many variables it applies to.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] for a factor [`check_lr_factor`] refuses (not a finite number
    /// ≥ 0); nothing changes then. The same check guards [`AdamW::load_state`], so every
    /// factor set here can be saved and resumed.
    pub fn scale_lr(&mut self, factor: f64, pred: impl Fn(&str) -> bool) -> Result<usize> {
        check_lr_factor(factor, "learning-rate factor")?;
        let mut hit = 0;
        for ((name, _), s) in self.vars.iter().zip(&mut self.lr_scale) {
            if pred(name) {
                *s = factor;
                hit += 1;
            }
        }
        Ok(hit)
    }

    /// The optimised variables with their names.
    pub fn vars(&self) -> &[(String, Var)] {
        &self.vars
    }

    /// Number of updates applied so far.
    pub fn steps(&self) -> usize {
        self.t
    }

    /// Global L2 norm of the gradients of the optimised variables.
    pub fn grad_norm(&self, grads: &GradStore) -> Result<f64> {
        let mut sq = 0.0f64;
        for (_, var) in &self.vars {
            if let Some(g) = grads.get(var.as_tensor()) {
                sq += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
            }
        }
        Ok(sq.sqrt())
    }

    /// One update with learning rate `lr`; gradients are first scaled so that their global norm
    /// is at most `clip` (when given). Returns the pre-clipping gradient norm.
    pub fn step(&mut self, grads: &GradStore, lr: f64, clip: Option<f64>) -> Result<f64> {
        let norm = self.grad_norm(grads)?;
        let scale = match clip {
            Some(c) if norm > c => c / norm,
            _ => 1.0,
        };
        self.t += 1;
        let c = &self.cfg;
        let bc1 = 1.0 - c.beta1.powi(self.t as i32);
        let bc2 = 1.0 - c.beta2.powi(self.t as i32);
        for (i, (_, var)) in self.vars.iter().enumerate() {
            let Some(g) = grads.get(var.as_tensor()) else {
                continue;
            };
            let lr = lr * self.lr_scale[i];
            let g = (g * scale)?;
            let m = ((&self.m[i] * c.beta1)? + (&g * (1.0 - c.beta1))?)?;
            let v = ((&self.v[i] * c.beta2)? + (g.sqr()? * (1.0 - c.beta2))?)?;
            let upd = ((&m / bc1)? / ((&v / bc2)?.sqrt()? + c.eps)?)?;
            let theta = var.as_tensor();
            let decayed = (theta * (1.0 - lr * c.weight_decay))?;
            var.set(&(decayed - (upd * lr)?)?)?;
            self.m[i] = m;
            self.v[i] = v;
        }
        Ok(norm)
    }

    /// The learning-rate factor of each optimised variable, in [`AdamW::vars`] order.
    pub fn lr_scales(&self) -> &[f64] {
        &self.lr_scale
    }

    /// The optimiser state as named tensors (`adamw.m.<param>`, `adamw.v.<param>`,
    /// `adamw.lr_scale.<param>` (f64 `[1]`), `adamw.t`).
    pub fn state(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::with_capacity(3 * self.vars.len() + 1);
        let dev = self.m.first().map(|t| t.device().clone());
        let dev = dev.unwrap_or(candle_core::Device::Cpu);
        for (i, (name, _)) in self.vars.iter().enumerate() {
            out.push((format!("adamw.m.{name}"), self.m[i].clone()));
            out.push((format!("adamw.v.{name}"), self.v[i].clone()));
            out.push((
                format!("adamw.lr_scale.{name}"),
                Tensor::new(&[self.lr_scale[i]], &dev)?,
            ));
        }
        out.push(("adamw.t".to_string(), Tensor::new(&[self.t as u32], &dev)?));
        Ok(out)
    }

    /// Restores state written by [`AdamW::state`]: moments, step count and learning-rate
    /// factors (a resumed run updates with the factors of the run that wrote the state, not
    /// with those set on this optimiser; state written before the factors were stored has
    /// none, and then the factors set here stay). All or nothing: on an error the optimiser is
    /// unchanged.
    ///
    /// # Errors
    /// [`MlError::MissingTensor`] / [`MlError::ShapeMismatch`] for an absent or misshaped
    /// moment or step count, [`MlError::InvalidInput`] for a factor [`check_lr_factor`]
    /// refuses.
    pub fn load_state(&mut self, map: &HashMap<String, Tensor>) -> Result<()> {
        let staged = self.stage_state(map)?;
        self.commit_state(staged);
        Ok(())
    }

    /// Checks and converts state written by [`AdamW::state`] without touching the optimiser
    /// (the first half of [`AdamW::load_state`]; [`AdamW::commit_state`] installs it).
    pub(crate) fn stage_state(&self, map: &HashMap<String, Tensor>) -> Result<StagedState> {
        let missing = |name: String| MlError::MissingTensor {
            path: "<optimizer state>".into(),
            name,
        };
        let mut m = Vec::with_capacity(self.vars.len());
        let mut v = Vec::with_capacity(self.vars.len());
        let mut lr_scale = self.lr_scale.clone();
        for (i, (name, var)) in self.vars.iter().enumerate() {
            for (slot, kind) in [(&mut m, "m"), (&mut v, "v")] {
                let key = format!("adamw.{kind}.{name}");
                let t = map.get(&key).ok_or_else(|| missing(key.clone()))?;
                if t.dims() != var.dims() {
                    return Err(MlError::ShapeMismatch {
                        name: key,
                        expected: var.dims().to_vec(),
                        found: t.dims().to_vec(),
                    });
                }
                slot.push(t.to_dtype(var.dtype())?.to_device(var.device())?);
            }
            let key = format!("adamw.lr_scale.{name}");
            if let Some(t) = map.get(&key) {
                let vals = t
                    .flatten_all()?
                    .to_dtype(candle_core::DType::F64)?
                    .to_vec1::<f64>()?;
                match vals.as_slice() {
                    [f] => lr_scale[i] = check_lr_factor(*f, &format!("optimizer state `{key}`"))?,
                    _ => {
                        return Err(MlError::InvalidInput(format!(
                            "optimizer state `{key}` holds {vals:?}, not one factor"
                        )))
                    }
                }
            }
        }
        let t = map
            .get("adamw.t")
            .ok_or_else(|| missing("adamw.t".into()))?;
        let t = t.flatten_all()?.to_vec1::<u32>()?;
        let &[t] = t.as_slice() else {
            return Err(MlError::ShapeMismatch {
                name: "adamw.t".into(),
                expected: vec![1],
                found: vec![t.len()],
            });
        };
        Ok(StagedState {
            m,
            v,
            lr_scale,
            t: t as usize,
        })
    }

    /// Installs state checked by [`AdamW::stage_state`] (cannot fail).
    pub(crate) fn commit_state(&mut self, s: StagedState) {
        self.m = s.m;
        self.v = s.v;
        self.lr_scale = s.lr_scale;
        self.t = s.t;
    }
}

/// Optimiser state read and checked by [`AdamW::stage_state`], not yet installed.
#[derive(Debug)]
pub(crate) struct StagedState {
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    lr_scale: Vec<f64>,
    t: usize,
}

/// The one check of a per-parameter learning-rate factor, shared by [`AdamW::scale_lr`] and
/// [`AdamW::load_state`] (hence [`crate::train::Trainer::resume`]): a finite number ≥ 0 (0
/// freezes the parameters it applies to). Returns the factor; `what` names it in the error.
///
/// # Errors
/// [`MlError::InvalidInput`] for NaN, ±∞ or a negative factor.
pub fn check_lr_factor(factor: f64, what: &str) -> Result<f64> {
    if factor.is_finite() && factor >= 0.0 {
        Ok(factor)
    } else {
        Err(MlError::InvalidInput(format!(
            "{what} is {factor}, not a finite number ≥ 0"
        )))
    }
}
