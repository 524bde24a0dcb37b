//! The class-incremental networks: an MLP or a small CNN feature extractor and a single
//! classification head that grows by one block of outputs per task.

use candle_core::{Device, Tensor, D};

use crate::train::ops::leaky_relu;
use crate::train::{ParamStore, SeededInit};
use crate::{MlError, Result};

/// The feature extractor.
#[derive(Debug, Clone, PartialEq)]
pub enum Arch {
    /// Fully connected layers of these widths, leaky ReLU after each (the features are the last
    /// hidden layer).
    Mlp {
        /// Hidden widths, e.g. `[256, 256]`.
        hidden: Vec<usize>,
    },
    /// For single-channel images: two blocks of 3×3 convolution (padding 1), leaky ReLU and 2×2
    /// max-pooling with `channels[0]` and `channels[1]` maps, then one fully connected layer of
    /// `hidden` units (28×28 → 14×14 → 7×7).
    Cnn {
        /// Output channels of the two convolutions, e.g. `[16, 32]`.
        channels: [usize; 2],
        /// Width of the fully connected feature layer, e.g. 128.
        hidden: usize,
    },
}

impl Default for Arch {
    fn default() -> Self {
        Self::Mlp {
            hidden: vec![256, 256],
        }
    }
}

/// The stored layout of a dense layer's weight drawn as `[out, in]` (PyTorch's, whose order
/// of draws the initialisation keeps): its transpose `[in, out]`, contiguous, so that the layer
/// is `x · w` with no transpose in the graph. Through a transpose node, candle's backward adds
/// the weight's gradient to its zero-initialised sum as a strided view, element by element with
/// index arithmetic (a fifth of a training step's time); stored `[in, out]` the gradient comes
/// out contiguous. The products are the same numbers: candle's matrix product gives identical
/// bits for either layout of the right-hand side (checked in the tests), except for a single
/// row (`[1, in]` inputs), where its matrix-vector path rounds differently.
pub(super) fn dense_layout(w: &Tensor) -> Result<Tensor> {
    Ok(w.t()?.contiguous()?)
}

/// `x · w` for an `x` that takes no gradient (the data rows entering the first dense layer):
/// candle's product with its own backward, which forms the weight's gradient `xᵀ · g` as
/// candle's does but not the input's `g · wᵀ` — for the first layer of the MLP on 784 pixels
/// that unused product is about a quarter of a training step's arithmetic. The forward is
/// candle's CPU product itself (`BackendStorage::matmul`, what `Tensor::matmul` calls), so
/// values and weight gradients are bit for bit those of `x.matmul(w)` (test
/// `input_product_matches_matmul`).
pub(super) struct InputProduct;

impl candle_core::CustomOp2 for InputProduct {
    fn name(&self) -> &'static str {
        "input-product"
    }

    fn cpu_fwd(
        &self,
        s1: &candle_core::CpuStorage,
        l1: &candle_core::Layout,
        s2: &candle_core::CpuStorage,
        l2: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        use candle_core::backend::BackendStorage;
        let (m, k) = l1.shape().dims2()?;
        let (k2, n) = l2.shape().dims2()?;
        if k != k2 {
            candle_core::bail!("input-product: [{m}, {k}] times [{k2}, {n}]");
        }
        Ok((s1.matmul(s2, (1, m, n, k), l1, l2)?, (m, n).into()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        _w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        // candle's `Matmul` backward for the right-hand side; none for the input.
        Ok((None, Some(x.t()?.matmul(grad)?)))
    }
}

/// A feature extractor plus a growing linear head. The trainable network (built by
/// [`Net::new`]) keeps its weights in a [`ParamStore`]; [`Net::frozen_copy`] makes a detached
/// copy (a distillation teacher or an exponential-moving-average teacher) that only runs
/// forward.
#[derive(Debug, Clone)]
pub struct Net {
    arch: Arch,
    dim: usize,
    image: Option<(usize, usize)>,
    /// Body `(weight, bias)` pairs, then one pair per head block (dense weights `[in, out]`,
    /// convolutions `[out, in, 3, 3]`).
    weights: Vec<Tensor>,
    n_body: usize,
    heads: Vec<usize>,
    feat_dim: usize,
    store: Option<ParamStore>,
    init: SeededInit,
}

impl Net {
    /// A trainable network for rows of `dim` features (`image` = `(h, w)` for the CNN), with
    /// no outputs yet, weights drawn from `seed` (PyTorch's default uniform initialisation).
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] for a CNN without an image shape or with images smaller than
    /// 4×4, or a zero width.
    pub fn new(arch: Arch, dim: usize, image: Option<(usize, usize)>, seed: u64) -> Result<Self> {
        let mut init = SeededInit::new(seed);
        let mut store = ParamStore::new();
        let dev = Device::Cpu;
        let mut weights = Vec::new();
        let mut add = |store: &mut ParamStore,
                       init: &mut SeededInit,
                       name: String,
                       wshape: &[usize],
                       fan_in: usize|
         -> Result<()> {
            if wshape.contains(&0) {
                return Err(MlError::InvalidInput(format!(
                    "layer {name} has a zero width"
                )));
            }
            let bound = 1.0 / (fan_in as f32).sqrt();
            let w = init.uniform(wshape, -bound, bound, &dev)?;
            let b = init.uniform(&[wshape[0]], -bound, bound, &dev)?;
            // Dense layers keep `[in, out]` (see `dense_layout`); convolutions stay as drawn.
            let w = if wshape.len() == 2 {
                dense_layout(&w)?
            } else {
                w
            };
            weights.push(store.add(format!("{name}.w"), w, true)?.as_tensor().clone());
            weights.push(store.add(format!("{name}.b"), b, true)?.as_tensor().clone());
            Ok(())
        };
        let feat_dim = match &arch {
            Arch::Mlp { hidden } => {
                let mut fan = dim;
                for (l, &h) in hidden.iter().enumerate() {
                    add(&mut store, &mut init, format!("body.{l}"), &[h, fan], fan)?;
                    fan = h;
                }
                fan
            }
            Arch::Cnn { channels, hidden } => {
                let Some((h, w)) = image.filter(|&(h, w)| h >= 4 && w >= 4 && h * w == dim) else {
                    return Err(MlError::InvalidInput(format!(
                        "the CNN needs single-channel images of at least 4×4 ({dim} features, \
                         image {image:?})"
                    )));
                };
                let [c1, c2] = *channels;
                add(
                    &mut store,
                    &mut init,
                    "body.conv0".into(),
                    &[c1, 1, 3, 3],
                    9,
                )?;
                add(
                    &mut store,
                    &mut init,
                    "body.conv1".into(),
                    &[c2, c1, 3, 3],
                    9 * c1,
                )?;
                let flat = c2 * (h / 4) * (w / 4);
                add(
                    &mut store,
                    &mut init,
                    "body.fc".into(),
                    &[*hidden, flat],
                    flat,
                )?;
                *hidden
            }
        };
        let n_body = weights.len();
        Ok(Self {
            arch,
            dim,
            image,
            weights,
            n_body,
            heads: Vec::new(),
            feat_dim,
            store: Some(store),
            init,
        })
    }

    /// The trainable parameters (`None` for a frozen copy).
    pub fn store(&self) -> Option<&ParamStore> {
        self.store.as_ref()
    }

    /// Outputs of the head (classes seen so far).
    pub fn classes(&self) -> usize {
        self.heads.iter().sum()
    }

    /// Width of the features the head reads.
    pub fn feature_dim(&self) -> usize {
        self.feat_dim
    }

    /// Features per input row.
    pub fn input_dim(&self) -> usize {
        self.dim
    }

    /// Grows the head by `n` outputs (a new block `head.<k>` of the parameter store).
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] on a frozen copy or for `n == 0`.
    pub fn add_classes(&mut self, n: usize) -> Result<()> {
        let Some(store) = self.store.as_mut() else {
            return Err(MlError::InvalidInput("a frozen network cannot grow".into()));
        };
        if n == 0 {
            return Err(MlError::InvalidInput(
                "a head block needs at least one output".into(),
            ));
        }
        let k = self.heads.len();
        let bound = 1.0 / (self.feat_dim as f32).sqrt();
        let w = dense_layout(&self.init.uniform(
            &[n, self.feat_dim],
            -bound,
            bound,
            &Device::Cpu,
        )?)?;
        let b = self.init.uniform(&[n], -bound, bound, &Device::Cpu)?;
        self.weights.push(
            store
                .add(format!("head.{k}.w"), w, true)?
                .as_tensor()
                .clone(),
        );
        self.weights.push(
            store
                .add(format!("head.{k}.b"), b, true)?
                .as_tensor()
                .clone(),
        );
        self.heads.push(n);
        Ok(())
    }

    /// A detached copy that runs forward only (no parameter store, no gradients).
    pub fn frozen_copy(&self) -> Result<Self> {
        Ok(Self {
            weights: self
                .weights
                .iter()
                .map(|t| t.detach().copy())
                .collect::<candle_core::Result<_>>()?,
            store: None,
            ..self.clone()
        })
    }

    /// Moves a frozen copy towards `student`: `w ← decay·w + (1 − decay)·w_student` for every
    /// weight both have; head blocks the student grew since are copied.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when the two networks have different bodies.
    pub fn ema_update(&mut self, student: &Net, decay: f64) -> Result<()> {
        if self.n_body != student.n_body
            || self.arch != student.arch
            || self.heads.len() > student.heads.len()
        {
            return Err(MlError::InvalidInput(
                "EMA between different networks".into(),
            ));
        }
        for (i, s) in student.weights.iter().enumerate() {
            let s = s.detach();
            if i < self.weights.len() {
                self.weights[i] = ((&self.weights[i] * decay)? + (s * (1.0 - decay))?)?;
            } else {
                self.weights.push(s.copy()?);
            }
        }
        self.heads.clone_from(&student.heads);
        Ok(())
    }

    /// Features `[b, feature_dim]` of `x` `[b, dim]`.
    pub fn features(&self, x: &Tensor) -> Result<Tensor> {
        let w = &self.weights;
        let dense = |h: &Tensor, i: usize| -> Result<Tensor> {
            // Data rows (no gradient wanted) skip the input gradient candle's product would form.
            let p = if h.track_op() || h.dim(0)? == 0 {
                h.matmul(&w[i])?
            } else {
                h.apply_op2(&w[i], InputProduct)?
            };
            leaky_relu(&p.broadcast_add(&w[i + 1])?)
        };
        match &self.arch {
            Arch::Mlp { .. } => {
                let mut h = x.clone();
                for i in (0..self.n_body).step_by(2) {
                    h = dense(&h, i)?;
                }
                Ok(h)
            }
            Arch::Cnn { .. } => {
                let (ih, iw) = self.image.expect("checked in Net::new");
                let b = x.dim(0)?;
                let mut h = x.reshape((b, 1, ih, iw))?;
                for i in [0, 2] {
                    let c = w[i].dim(0)?;
                    h = h.conv2d(&w[i], 1, 1, 1, 1)?;
                    h = leaky_relu(&h.broadcast_add(&w[i + 1].reshape((1, c, 1, 1))?)?)?;
                    h = h.max_pool2d(2)?;
                }
                dense(&h.flatten_from(1)?, 4)
            }
        }
    }

    /// Head logits `[b, classes]` of features `[b, feature_dim]`.
    pub fn head(&self, f: &Tensor) -> Result<Tensor> {
        if self.heads.is_empty() {
            return Err(MlError::InvalidInput("the head has no outputs yet".into()));
        }
        let blocks = (self.n_body..self.weights.len())
            .step_by(2)
            .map(|i| {
                f.matmul(&self.weights[i])?
                    .broadcast_add(&self.weights[i + 1])
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Tensor::cat(&blocks, D::Minus1)?)
    }

    /// Logits `[b, classes]` of `x` `[b, dim]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.head(&self.features(x)?)
    }

    /// `f` applied to row-major `x` in chunks of 512 rows, results concatenated along rows.
    fn chunked(&self, x: &[f32], f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
        let n = x.len() / self.dim;
        let mut out = Vec::new();
        for s in (0..n).step_by(512) {
            let len = (n - s).min(512);
            let t = Tensor::from_slice(
                &x[s * self.dim..(s + len) * self.dim],
                (len, self.dim),
                &Device::Cpu,
            )?;
            out.push(f(&t)?.detach());
        }
        Ok(Tensor::cat(&out, 0)?)
    }

    /// Predicted head outputs (arg-max) of row-major `x`.
    pub fn predict(&self, x: &[f32]) -> Result<Vec<u32>> {
        Ok(self
            .chunked(x, |t| self.forward(t))?
            .argmax(D::Minus1)?
            .to_vec1()?)
    }

    /// Logits of row-major `x`, one vector per row.
    pub fn logits(&self, x: &[f32]) -> Result<Vec<Vec<f32>>> {
        Ok(self.chunked(x, |t| self.forward(t))?.to_vec2()?)
    }

    /// Features of row-major `x`, one vector per row.
    pub fn feature_rows(&self, x: &[f32]) -> Result<Vec<Vec<f32>>> {
        Ok(self.chunked(x, |t| self.features(t))?.to_vec2()?)
    }
}
