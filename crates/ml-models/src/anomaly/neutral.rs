//! NeuTraL-AD, neural transformation learning for anomaly detection (Qiu, Pfrommer, Kloft,
//! Mandt & Rudolph, ICML 2021).
//!
//! K learnable masks `T_k(x) = sigmoid(M_k(x)) ⊙ x` (M_k an MLP d → min(d, 64) → d) and an encoder
//! d → 96 → 64 are trained jointly with the deterministic contrastive loss: each transformed view
//! should be close to the original's embedding and far from the other views,
//! `Σ_k −log( h(z_k, z) / (h(z_k, z) + Σ_{l≠k} h(z_k, z_l)) )` with `h = exp(cos/τ)`. The
//! anomaly score is this loss.

use candle_core::Tensor;
use candle_nn::ops::sigmoid;

use super::deep::{
    l2_normalise, score_rows, to_tensor, train, view_contrast_loss, DeepConfig, Mlp,
};
use super::{check_cols, Detector, Features, InputError};
use crate::train::{ParamStore, SeededInit};
use crate::Result;

/// NeuTraL-AD hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NeutralConfig {
    /// Learnable transformations K, default 11.
    pub transforms: usize,
    /// Temperature τ, default 0.1.
    pub tau: f64,
    /// Encoder hidden width, default 96.
    pub hidden: usize,
    /// Representation size, default 64.
    pub rep: usize,
    /// Training loop settings.
    pub train: DeepConfig,
}

impl Default for NeutralConfig {
    fn default() -> Self {
        Self {
            transforms: 11,
            tau: 0.1,
            hidden: 96,
            rep: 64,
            train: DeepConfig::default(),
        }
    }
}

#[derive(Debug)]
struct Model {
    masks: Vec<Mlp>,
    encoder: Mlp,
    tau: f64,
}

impl Model {
    fn loss(&self, x: &Tensor) -> Result<Tensor> {
        let mut views = vec![x.clone()];
        for m in &self.masks {
            views.push((sigmoid(&m.forward(x)?)? * x)?);
        }
        let z = l2_normalise(&self.encoder.forward(&Tensor::stack(&views, 1)?)?)?;
        view_contrast_loss(&z, self.tau)
    }
}

/// The NeuTraL-AD detector.
#[derive(Debug)]
pub struct Neutral {
    cfg: NeutralConfig,
    model: Option<Model>,
    cols: Option<usize>,
}

impl Neutral {
    /// An unfitted detector.
    pub fn new(cfg: NeutralConfig) -> Self {
        Self {
            cfg,
            model: None,
            cols: None,
        }
    }
}

impl Detector for Neutral {
    fn name(&self) -> &'static str {
        "neutral"
    }

    fn fit(&mut self, train_x: &Features) -> Result<()> {
        let d = train_x.cols;
        let c = &self.cfg;
        if c.transforms < 2 {
            return Err(InputError::Unsupported(
                "NeuTraL-AD needs at least 2 transformations".into(),
            )
            .into());
        }
        let mut init = SeededInit::new(c.train.seed);
        let mut store = ParamStore::new();
        let masks = (0..c.transforms)
            .map(|k| {
                let h = d.min(64);
                Mlp::new(
                    &mut store,
                    &mut init,
                    &format!("t{k}"),
                    &[d, h, d],
                    true,
                    true,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let encoder = Mlp::new(
            &mut store,
            &mut init,
            "enc",
            &[d, c.hidden, c.rep],
            true,
            true,
        )?;
        let model = Model {
            masks,
            encoder,
            tau: c.tau,
        };
        let x = to_tensor(train_x)?;
        train(&store, train_x.rows, &c.train, &mut init, |idx| {
            model.loss(&x.index_select(idx, 0)?)
        })?;
        self.model = Some(model);
        self.cols = Some(d);
        Ok(())
    }

    fn score(&self, x: &Features) -> Result<Vec<f64>> {
        check_cols(self.cols, x)?;
        let model = self.model.as_ref().ok_or(InputError::NotFitted)?;
        score_rows(x, |b| model.loss(b))
    }
}
