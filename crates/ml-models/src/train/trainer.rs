//! The training loop shared by every model of the crate.
//!
//! A run is a sequence of epochs of `steps_per_epoch` optimiser steps. After each epoch the
//! optional evaluation runs, early stopping watches it, and a checkpoint (parameters + AdamW state
//! + step) is written when a path is set; [`Trainer::resume`] continues such a run exactly.

use std::path::PathBuf;
use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor, Var};

use crate::train::optim::{AdamW, AdamWConfig};
use crate::train::params::ParamStore;
use crate::{MlError, Result};

/// Training-loop settings. Defaults follow the QLoRA authors' reference setup where one exists
/// (AdamW, constant lr 2e-4, gradient clipping 0.3).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// Learning rate (constant after warm-up), default 2e-4.
    pub lr: f64,
    /// Linear warm-up steps, default 0.
    pub warmup_steps: usize,
    /// AdamW settings, default [`AdamWConfig::default`].
    pub adamw: AdamWConfig,
    /// Global gradient-norm clip, default `Some(0.3)`.
    pub grad_clip: Option<f64>,
    /// Total optimiser steps (upper bound), default 1000.
    pub max_steps: usize,
    /// Steps per epoch (evaluation, early stopping and checkpoint granularity), default 100.
    pub steps_per_epoch: usize,
    /// Stop when the evaluation metric has not improved by `min_delta` for this many epochs;
    /// default `None` (never).
    pub patience: Option<usize>,
    /// Minimum improvement of the evaluation metric that resets patience, default 0.0.
    pub min_delta: f32,
    /// Restore the parameters of the best evaluated epoch at the end, default true.
    pub restore_best: bool,
    /// Where to write a checkpoint after every epoch, default `None`. Each write replaces the
    /// previous one atomically ([`ParamStore::save`]): a crash while saving leaves the last
    /// complete checkpoint to resume from.
    pub checkpoint: Option<PathBuf>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            lr: 2e-4,
            warmup_steps: 0,
            adamw: AdamWConfig::default(),
            grad_clip: Some(0.3),
            max_steps: 1000,
            steps_per_epoch: 100,
            patience: None,
            min_delta: 0.0,
            restore_best: true,
            checkpoint: None,
        }
    }
}

impl TrainConfig {
    /// Plain AdamW at a constant learning rate `lr` with decoupled `weight_decay`, no gradient
    /// clipping, no warm-up, at most `max_steps` steps (the setting of the mini-batch loops of
    /// the anomaly detectors and the class-incremental learners).
    pub fn adamw(lr: f64, weight_decay: f64, max_steps: usize) -> Self {
        Self {
            lr,
            adamw: AdamWConfig {
                weight_decay,
                ..AdamWConfig::default()
            },
            grad_clip: None,
            max_steps,
            ..Self::default()
        }
    }
}

/// What a step callback sees.
#[derive(Debug, Clone, Copy)]
pub struct StepMetrics {
    /// Global step (1-based, after the update).
    pub step: usize,
    /// Training loss of the step's batch.
    pub loss: f32,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Learning rate used.
    pub lr: f64,
}

/// What an epoch callback sees.
#[derive(Debug, Clone, Copy)]
pub struct EpochMetrics {
    /// Epoch index (0-based).
    pub epoch: usize,
    /// Global step at the end of the epoch.
    pub step: usize,
    /// Mean training loss over the epoch.
    pub train_loss: f32,
    /// Evaluation metric (lower is better), if an evaluator was given.
    pub eval: Option<f32>,
}

/// Hooks for progress bars and logging; both default to doing nothing.
pub trait TrainCallback {
    /// Called after every optimiser step.
    fn on_step(&mut self, _m: &StepMetrics) {}
    /// Called after every epoch (after evaluation).
    fn on_epoch(&mut self, _m: &EpochMetrics) {}
}

/// A callback that does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCallback;
impl TrainCallback for NoCallback {}

/// Summary of a finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainReport {
    /// Steps taken in total (including those before a resume).
    pub steps: usize,
    /// Training loss per step of this run.
    pub losses: Vec<f32>,
    /// Evaluation metric per epoch of this run.
    pub evals: Vec<f32>,
    /// Best evaluation metric seen, if any.
    pub best_eval: Option<f32>,
    /// Whether early stopping ended the run.
    pub stopped_early: bool,
    /// Wall-clock seconds of this run.
    pub seconds: f64,
}

/// Gradient synchronisation between backward and the optimiser update (data parallelism: an
/// all-reduce that averages every rank's gradients).
pub trait GradSync: std::fmt::Debug {
    /// Replaces the gradients of `vars` in `grads` by their synchronised values.
    fn sync(&mut self, vars: &[(String, Var)], grads: &mut GradStore) -> Result<()>;
}

/// Runs [`TrainConfig`] over a parameter store with AdamW.
#[derive(Debug)]
pub struct Trainer {
    cfg: TrainConfig,
    opt: AdamW,
    sync: Option<Box<dyn GradSync>>,
}

impl Trainer {
    /// A trainer for the trainable parameters of `store` (frozen ones are not touched).
    pub fn new(cfg: TrainConfig, store: &ParamStore) -> Result<Self> {
        let opt = AdamW::new(store, cfg.adamw)?;
        Ok(Self {
            cfg,
            opt,
            sync: None,
        })
    }

    /// Synchronises gradients through `sync` before every update (see `train::distributed`).
    pub fn set_grad_sync(&mut self, sync: Box<dyn GradSync>) {
        self.sync = Some(sync);
    }

    /// Loads parameters and optimiser state from `path` (written by a run with
    /// `checkpoint = Some(path)`), so that [`Trainer::fit`] continues where it stopped: moments,
    /// step count (hence the warm-up schedule) and the learning-rate factors of
    /// [`Trainer::scale_lr`] come from the checkpoint.
    ///
    /// All or nothing: the parameters and the optimiser state are both read and checked before
    /// either is installed, so on an error `store` and the trainer are as before.
    ///
    /// # Errors
    /// Those of [`ParamStore::load`] and [`AdamW::load_state`] (a missing optimiser tensor
    /// names `path`).
    pub fn resume(&mut self, store: &ParamStore, path: &std::path::Path) -> Result<()> {
        let (vals, rest) = store.stage(path)?;
        let state = self.opt.stage_state(&rest).map_err(|e| match e {
            MlError::MissingTensor { name, .. } => MlError::MissingTensor {
                path: path.to_path_buf(),
                name,
            },
            other => other,
        })?;
        store.commit(&vals)?;
        self.opt.commit_state(state);
        Ok(())
    }

    /// Multiplies the learning rate of the parameters whose name satisfies `pred` by `factor`
    /// ([`AdamW::scale_lr`]); returns how many parameters it applies to. The factors are
    /// saved with the optimiser state; [`Trainer::resume`] restores them.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] for a factor that is not a finite number ≥ 0 (the check
    /// [`Trainer::resume`] applies too: [`crate::train::optim::check_lr_factor`]).
    pub fn scale_lr(&mut self, factor: f64, pred: impl Fn(&str) -> bool) -> Result<usize> {
        self.opt.scale_lr(factor, pred)
    }

    /// Global steps done so far.
    pub fn steps(&self) -> usize {
        self.opt.steps()
    }

    fn lr_at(&self, step: usize) -> f64 {
        if self.cfg.warmup_steps > 0 && step < self.cfg.warmup_steps {
            self.cfg.lr * (step + 1) as f64 / self.cfg.warmup_steps as f64
        } else {
            self.cfg.lr
        }
    }

    /// One optimiser step on the loss `loss_at(step)` returns (no epoch logic, no step limit).
    pub fn step_once(
        &mut self,
        loss_at: &mut dyn FnMut(usize) -> Result<Tensor>,
    ) -> Result<StepMetrics> {
        let step = self.opt.steps();
        let loss_t = loss_at(step)?;
        let loss = loss_t
            .to_dtype(candle_core::DType::F32)?
            .to_scalar::<f32>()?;
        if !loss.is_finite() {
            return Err(MlError::Diverged { step, loss });
        }
        let mut grads = loss_t.backward()?;
        if let Some(s) = self.sync.as_mut() {
            s.sync(self.opt.vars(), &mut grads)?;
        }
        let lr = self.lr_at(step);
        let grad_norm = self.opt.step(&grads, lr, self.cfg.grad_clip)?;
        Ok(StepMetrics {
            step: step + 1,
            loss,
            grad_norm,
            lr,
        })
    }

    /// Trains until `max_steps` or early stopping.
    ///
    /// `loss_at(step)` builds the batch of global step `step` and returns its scalar loss;
    /// `eval()` (optional) returns a metric where lower is better (e.g. held-out loss).
    pub fn fit(
        &mut self,
        store: &ParamStore,
        loss_at: &mut dyn FnMut(usize) -> Result<Tensor>,
        mut eval: Option<&mut dyn FnMut() -> Result<f32>>,
        cb: &mut dyn TrainCallback,
    ) -> Result<TrainReport> {
        let start = Instant::now();
        let mut rep = TrainReport {
            steps: self.opt.steps(),
            losses: Vec::new(),
            evals: Vec::new(),
            best_eval: None,
            stopped_early: false,
            seconds: 0.0,
        };
        let mut best_snap: Option<Vec<Tensor>> = None;
        let mut bad_epochs = 0usize;
        let spe = self.cfg.steps_per_epoch.max(1);
        while self.opt.steps() < self.cfg.max_steps {
            let epoch = self.opt.steps() / spe;
            let mut sum = 0.0f32;
            let mut n = 0usize;
            while self.opt.steps() < self.cfg.max_steps
                && (n == 0 || !self.opt.steps().is_multiple_of(spe))
            {
                let m = self.step_once(loss_at)?;
                rep.losses.push(m.loss);
                sum += m.loss;
                n += 1;
                cb.on_step(&m);
            }
            let ev = match eval.as_mut() {
                Some(f) => Some(f()?),
                None => None,
            };
            if let Some(e) = ev {
                rep.evals.push(e);
                let improved = rep.best_eval.is_none_or(|b| e < b - self.cfg.min_delta);
                if improved {
                    rep.best_eval = Some(e);
                    bad_epochs = 0;
                    if self.cfg.restore_best {
                        best_snap = Some(store.snapshot()?);
                    }
                } else {
                    bad_epochs += 1;
                }
            }
            if let Some(path) = &self.cfg.checkpoint {
                store.save(path, &self.opt.state()?)?;
            }
            cb.on_epoch(&EpochMetrics {
                epoch,
                step: self.opt.steps(),
                train_loss: sum / n.max(1) as f32,
                eval: ev,
            });
            if self.cfg.patience.is_some_and(|p| bad_epochs >= p) {
                rep.stopped_early = true;
                break;
            }
        }
        if let Some(s) = best_snap {
            store.restore(&s)?;
        }
        rep.steps = self.opt.steps();
        rep.seconds = start.elapsed().as_secs_f64();
        Ok(rep)
    }
}

/// The CPU device (convenience for examples and tests).
pub fn cpu() -> Device {
    Device::Cpu
}
