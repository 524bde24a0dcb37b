//! ICL, internal contrastive learning (Shenkar & Wolf, "Anomaly detection for tabular data with
//! internal contrastive learning", ICLR 2022).
//!
//! Each instance is split into P pairs `(a_j, b_j)`: `a_j` the window of k consecutive features
//! starting at j, `b_j` the other d − k features. Two encoders map windows and complements to the
//! unit sphere; the loss asks each `a_j` to find its own complement among the instance's P
//! complements: `mean_j ( log Σ_l exp(f(a_j)·g(b_l)/τ) − f(a_j)·g(b_j)/τ )`. The anomaly score is
//! this loss. P = min(`max_pairs`, d − 1), so k = d + 1 − P (pardis's choice; the paper tunes k
//! per data-set size).

use candle_core::Tensor;

use super::deep::{l2_normalise, score_rows, to_tensor, train, DeepConfig, Mlp};
use super::{check_cols, Detector, Features, InputError};
use crate::core::{ParamStore, SeededInit};
use crate::Result;

/// ICL hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IclConfig {
    /// Most window/complement pairs per instance, default 10.
    pub max_pairs: usize,
    /// Temperature τ, default 0.1.
    pub tau: f64,
    /// Encoder hidden width, default 96.
    pub hidden: usize,
    /// Representation size, default 64.
    pub rep: usize,
    /// Training loop settings.
    pub train: DeepConfig,
}

impl Default for IclConfig {
    fn default() -> Self {
        Self {
            max_pairs: 10,
            tau: 0.1,
            hidden: 96,
            rep: 64,
            train: DeepConfig::default(),
        }
    }
}

#[derive(Debug)]
struct Model {
    k: usize,
    pairs: usize,
    window: Mlp,
    complement: Mlp,
    tau: f64,
}

impl Model {
    fn loss(&self, x: &Tensor) -> Result<Tensor> {
        let d = x.dim(1)?;
        let mut a = Vec::with_capacity(self.pairs);
        let mut b = Vec::with_capacity(self.pairs);
        for j in 0..self.pairs {
            a.push(x.narrow(1, j, self.k)?);
            let mut rest = Vec::new();
            if j > 0 {
                rest.push(x.narrow(1, 0, j)?);
            }
            if j + self.k < d {
                rest.push(x.narrow(1, j + self.k, d - j - self.k)?);
            }
            b.push(Tensor::cat(&rest, 1)?);
        }
        let fa = l2_normalise(&self.window.forward(&Tensor::stack(&a, 1)?)?)?; // [n, P, rep]
        let gb = l2_normalise(&self.complement.forward(&Tensor::stack(&b, 1)?)?)?;
        let s = (fa.matmul(&gb.transpose(1, 2)?.contiguous()?)? / self.tau)?; // [n, P, P]
        let lse = s.log_sum_exp(2)?;
        let eye = Tensor::eye(self.pairs, s.dtype(), s.device())?;
        let pos = s.broadcast_mul(&eye)?.sum(2)?;
        Ok((lse - pos)?.mean(1)?)
    }
}

/// The ICL detector.
#[derive(Debug)]
pub struct Icl {
    cfg: IclConfig,
    model: Option<Model>,
    cols: Option<usize>,
}

impl Icl {
    /// An unfitted detector.
    pub fn new(cfg: IclConfig) -> Self {
        Self {
            cfg,
            model: None,
            cols: None,
        }
    }
}

impl Detector for Icl {
    fn name(&self) -> &'static str {
        "icl"
    }

    fn fit(&mut self, train_x: &Features) -> Result<()> {
        let d = train_x.cols;
        if d < 3 {
            return Err(InputError::Unsupported(format!(
                "ICL needs at least 3 features (2 window/complement pairs), got {d}"
            ))
            .into());
        }
        let c = &self.cfg;
        let pairs = c.max_pairs.clamp(2, d - 1);
        let k = d + 1 - pairs;
        let mut init = SeededInit::new(c.train.seed);
        let mut store = ParamStore::new();
        let window = Mlp::new(
            &mut store,
            &mut init,
            "f",
            &[k, c.hidden, c.rep],
            true,
            true,
        )?;
        let complement = Mlp::new(
            &mut store,
            &mut init,
            "g",
            &[d - k, c.hidden, c.rep],
            true,
            true,
        )?;
        let model = Model {
            k,
            pairs,
            window,
            complement,
            tau: c.tau,
        };
        train(&store, &to_tensor(train_x)?, &c.train, &mut init, |b| {
            model.loss(b)
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
