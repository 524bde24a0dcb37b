//! LoRA (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", ICLR 2022) over a
//! frozen base weight that may be f32, bf16, NF4 or int8 (QLoRA when NF4), with per-layer-type
//! and per-depth configuration as studied by Shen, Lai, Li, Hu ("Optimizing Fine-Tuning in
//! Quantized Language Models: An In-Depth Analysis of Key Variables", CMC 2025).
//!
//! `y = x·W₀ᵀ + (α/r) · dropout(x)·Aᵀ·Bᵀ` with `A ∈ ℝ^{r×in}` Kaiming-uniform and
//! `B ∈ ℝ^{out×r}` zero, so training starts exactly at the base model.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use candle_core::{DType, Tensor, Var};

use crate::qlora::fused::{FrozenLinearOp, QuantLinearOp};
use crate::qlora::nf4::Nf4Matrix;
use crate::qlora::quant::Int8Matrix;
use crate::train::{ParamStore, SeededInit};
use crate::{MlError, Result};

/// The linear layer types of a transformer block.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum LayerKind {
    /// Attention query projection.
    Q,
    /// Attention key projection.
    K,
    /// Attention value projection.
    V,
    /// Attention output projection.
    O,
    /// MLP gate projection (SwiGLU).
    Gate,
    /// MLP up projection.
    Up,
    /// MLP down projection.
    Down,
}

impl LayerKind {
    /// The four attention projections.
    pub const ATTENTION: [LayerKind; 4] = [LayerKind::Q, LayerKind::K, LayerKind::V, LayerKind::O];
    /// The three MLP projections.
    pub const MLP: [LayerKind; 3] = [LayerKind::Gate, LayerKind::Up, LayerKind::Down];
    /// All seven.
    pub const ALL: [LayerKind; 7] = [
        LayerKind::Q,
        LayerKind::K,
        LayerKind::V,
        LayerKind::O,
        LayerKind::Gate,
        LayerKind::Up,
        LayerKind::Down,
    ];
}

/// Rank and balancing factor of one adapter.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdapterSpec {
    /// Rank `r` (≥ 1).
    pub rank: usize,
    /// Balancing factor `α`; the update is scaled by `α / r`.
    pub alpha: f32,
}

/// Adapters for the layer kinds `kinds` at depths `layers`; `adapter: None` disables them there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraRule {
    /// Layer kinds the rule applies to.
    pub kinds: Vec<LayerKind>,
    /// Block indices the rule applies to.
    pub layers: Range<usize>,
    /// The adapter, or `None` for "no adapter here".
    pub adapter: Option<AdapterSpec>,
}

/// Storage of the frozen base weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BaseFormat {
    /// 32-bit floats (plain LoRA).
    F32,
    /// bfloat16, converted to f32 inside each matmul.
    Bf16,
    /// NF4 blocks of 64 (QLoRA), optionally with double-quantized scales.
    Nf4 {
        /// Quantize the absmax constants to 8 bits too.
        double_quant: bool,
    },
    /// Blockwise int8 absmax (block 64).
    Int8,
}

/// Where to put adapters, with which rank and α, over which base format.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraConfig {
    /// Rules, applied in order: the last rule matching a (kind, layer) decides. Default: one rule,
    /// all kinds, all layers, r = 64, α = 16 (the QLoRA authors' reference setup).
    pub rules: Vec<LoraRule>,
    /// Dropout on the adapter input, default 0.0.
    pub dropout: f32,
    /// Base weight storage, default NF4 with double quantization.
    pub base: BaseFormat,
}

impl Default for LoraConfig {
    fn default() -> Self {
        Self::uniform(
            &LayerKind::ALL,
            64,
            16.0,
            BaseFormat::Nf4 { double_quant: true },
        )
    }
}

impl LoraConfig {
    /// Same rank and α on `kinds` at every depth.
    pub fn uniform(kinds: &[LayerKind], rank: usize, alpha: f32, base: BaseFormat) -> Self {
        Self {
            rules: vec![LoraRule {
                kinds: kinds.to_vec(),
                layers: 0..usize::MAX,
                adapter: Some(AdapterSpec { rank, alpha }),
            }],
            dropout: 0.0,
            base,
        }
    }

    /// Freezes `lin`'s base as [`LoraConfig::base`] and attaches the adapter this configuration
    /// gives a `kind` layer in block `layer`, if any.
    pub fn apply_to(
        &self,
        lin: &mut Linear,
        kind: LayerKind,
        layer: usize,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<()> {
        lin.freeze_base(self.base, store)?;
        match self.adapter_for(kind, layer) {
            Some(spec) => lin.attach_adapter(spec, self.dropout, store, init),
            None => Ok(()),
        }
    }

    /// [`LoraConfig::apply_to`] for every linear layer of a stack of blocks; `blocks` yields each
    /// block's layers with their kinds, in depth order (block `l` gets the rules for layer `l`).
    pub fn apply_to_blocks<'a, B>(
        &self,
        blocks: impl IntoIterator<Item = B>,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<()>
    where
        B: IntoIterator<Item = (LayerKind, &'a mut Linear)>,
    {
        for (l, block) in blocks.into_iter().enumerate() {
            for (kind, lin) in block {
                self.apply_to(lin, kind, l, store, init)?;
            }
        }
        Ok(())
    }

    /// The adapter for `kind` in block `layer`, if any.
    pub fn adapter_for(&self, kind: LayerKind, layer: usize) -> Option<AdapterSpec> {
        self.rules
            .iter()
            .rev()
            .find(|r| r.kinds.contains(&kind) && r.layers.contains(&layer))
            .and_then(|r| r.adapter)
    }
}

/// The frozen (or, for full fine-tuning, trainable) base weight of a [`Linear`].
#[derive(Debug, Clone)]
pub enum Base {
    /// An f32 variable `[out, in]`, registered in the parameter store.
    Dense(Var),
    /// A frozen tensor (f32 or bf16) outside the store.
    Frozen(Tensor),
    /// A frozen block-quantized matrix used through the fused kernel.
    Quantized(QuantLinearOp),
}

/// A LoRA adapter: `A [r, in]`, `B [out, r]`, scale `α/r`.
#[derive(Debug)]
pub struct Adapter {
    /// Down projection, Kaiming-uniform.
    pub a: Var,
    /// Up projection, zeros.
    pub b: Var,
    /// `α / r`.
    pub scale: f64,
    dropout: f32,
    rng: Mutex<SeededInit>,
    merged: bool,
}

/// A bias-free linear layer `y = x·Wᵀ` with an optional LoRA adapter.
#[derive(Debug)]
pub struct Linear {
    name: String,
    in_features: usize,
    out_features: usize,
    base: Base,
    adapter: Option<Adapter>,
    /// `false` for an evaluation view from [`Linear::detached`]: weights enter the forward
    /// pass detached, so no autograd graph is built.
    track: bool,
}

impl Linear {
    /// A dense trainable layer `[out, in]` with weights from `N(0, std²)`, registered as
    /// `<name>.weight`.
    pub fn new(
        name: &str,
        in_features: usize,
        out_features: usize,
        std: f32,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<Self> {
        let w = init.normal(&[out_features, in_features], std, &candle_core::Device::Cpu)?;
        Self::trainable(name, w, store)
    }

    /// A trainable layer over an existing weight `[out, in]` (a pretrained one to fine-tune),
    /// registered in `store` as `<name>.weight`.
    pub fn trainable(name: &str, weight: Tensor, store: &mut ParamStore) -> Result<Self> {
        let (out_features, in_features) = weight.dims2()?;
        let var = store.add(format!("{name}.weight"), weight.detach(), true)?;
        Ok(Self {
            name: name.to_string(),
            in_features,
            out_features,
            base: Base::Dense(var),
            adapter: None,
            track: true,
        })
    }

    /// A layer over an existing weight `[out, in]` (e.g. a pretrained checkpoint's), kept frozen
    /// outside the parameter store until [`Linear::freeze_base`] re-stores it.
    pub fn frozen(name: &str, weight: Tensor) -> Result<Self> {
        let (out_features, in_features) = weight.dims2()?;
        Ok(Self {
            name: name.to_string(),
            in_features,
            out_features,
            base: Base::Frozen(weight.detach()),
            adapter: None,
            track: true,
        })
    }

    /// The layer's name (its weight is `<name>.weight`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The base weight.
    pub fn base(&self) -> &Base {
        &self.base
    }

    /// The adapter, if attached.
    pub fn adapter(&self) -> Option<&Adapter> {
        self.adapter.as_ref()
    }

    /// An evaluation view sharing this layer's weights (no copy; later updates are visible)
    /// whose forward pass builds no autograd graph: candle records an op whenever an input is a
    /// variable, and it has no global no-grad switch, so the view reads every weight through
    /// `Tensor::detach`. Dropout is off in the view.
    pub fn detached(&self) -> Linear {
        Linear {
            name: self.name.clone(),
            in_features: self.in_features,
            out_features: self.out_features,
            base: match &self.base {
                Base::Dense(v) => Base::Frozen(v.as_tensor().detach()),
                other => other.clone(),
            },
            adapter: self.adapter.as_ref().map(|ad| Adapter {
                a: ad.a.clone(),
                b: ad.b.clone(),
                scale: ad.scale,
                dropout: 0.0,
                rng: Mutex::new(SeededInit::new(0)),
                merged: ad.merged,
            }),
            track: false,
        }
    }

    /// A variable's tensor, detached in an evaluation view.
    fn weight(&self, v: &Var) -> Tensor {
        if self.track {
            v.as_tensor().clone()
        } else {
            v.as_tensor().detach()
        }
    }

    /// `y = x·Wᵀ (+ adapter)` for `x` of shape `[..., in]`; dropout only when `train`.
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let x2 = x.reshape(((), self.in_features))?;
        let mut y = match &self.base {
            Base::Dense(w) => x2.matmul(&self.weight(w).t()?)?,
            // In training, a frozen weight goes through an op without a weight gradient (a
            // plain matmul would make candle derive and keep `∂W` too).
            Base::Frozen(w) if self.track => {
                x2.contiguous()?.apply_op1(FrozenLinearOp::new(w.clone()))?
            }
            Base::Frozen(w) => x2.matmul(&w.to_dtype(DType::F32)?.t()?)?,
            Base::Quantized(op) => x2.contiguous()?.apply_op1(op.clone())?,
        };
        if let Some(ad) = self.adapter.as_ref().filter(|a| !a.merged) {
            let h = if train && ad.dropout > 0.0 {
                let mut rng = ad.rng.lock().map_err(|_| {
                    MlError::InvalidInput("dropout generator poisoned by a panic".into())
                })?;
                let mask = rng.dropout_mask(x2.dims(), ad.dropout, x2.device())?;
                x2.mul(&mask)?
            } else {
                x2
            };
            let delta = h
                .matmul(&self.weight(&ad.a).t()?)?
                .matmul(&self.weight(&ad.b).t()?)?;
            y = (y + (delta * ad.scale)?)?;
        }
        let mut out = dims;
        *out.last_mut().expect("input has a feature dimension") = self.out_features;
        Ok(y.reshape(out)?)
    }

    /// Freezes the base: `<name>.weight` leaves the parameter store (adapter checkpoints hold
    /// adapters only, as in PEFT) and is kept as `format` outside autograd.
    pub fn freeze_base(&mut self, format: BaseFormat, store: &mut ParamStore) -> Result<()> {
        let wname = format!("{}.weight", self.name);
        let dense = match &self.base {
            Base::Dense(v) => v.as_tensor().clone(),
            Base::Frozen(t) if t.dtype() == DType::F32 => t.clone(),
            _ => return Ok(()),
        };
        let (o, i) = (self.out_features, self.in_features);
        let data = || -> Result<Vec<f32>> { Ok(dense.flatten_all()?.to_vec1::<f32>()?) };
        self.base = match format {
            // A frozen base leaves the autograd graph (a `Var` would get a gradient computed).
            BaseFormat::F32 => Base::Frozen(dense.detach()),
            BaseFormat::Bf16 => Base::Frozen(dense.to_dtype(DType::BF16)?),
            BaseFormat::Nf4 { double_quant } => Base::Quantized(QuantLinearOp::new(Arc::new(
                Nf4Matrix::quantize(&data()?, o, i, double_quant)?,
            ))),
            BaseFormat::Int8 => Base::Quantized(QuantLinearOp::new(Arc::new(
                Int8Matrix::quantize(&data()?, o, i, 64)?,
            ))),
        };
        store.remove(&wname);
        Ok(())
    }

    /// Attaches a fresh adapter (A Kaiming-uniform, B zero) registered as `<name>.lora_a` and
    /// `<name>.lora_b` (trainable).
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when `spec.rank` is 0 or larger than the layer's smaller side
    /// (a larger rank adds parameters without adding expressiveness), or `dropout` is not in
    /// `[0, 1)`.
    pub fn attach_adapter(
        &mut self,
        spec: AdapterSpec,
        dropout: f32,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<()> {
        let full = self.in_features.min(self.out_features);
        if spec.rank == 0 || spec.rank > full {
            return Err(MlError::InvalidInput(format!(
                "LoRA rank {} for `{}` must be in 1..={full} (its weight is {}×{})",
                spec.rank, self.name, self.out_features, self.in_features
            )));
        }
        if !(0.0..1.0).contains(&dropout) {
            return Err(MlError::InvalidInput(format!(
                "LoRA dropout {dropout} must be in [0, 1)"
            )));
        }
        let dev = candle_core::Device::Cpu;
        let a = init.kaiming_uniform(&[spec.rank, self.in_features], &dev)?;
        let b = Tensor::zeros((self.out_features, spec.rank), DType::F32, &dev)?;
        let a = store.add(format!("{}.lora_a", self.name), a, true)?;
        let b = store.add(format!("{}.lora_b", self.name), b, true)?;
        let seed = init.rng().next_u64_seed();
        self.adapter = Some(Adapter {
            a,
            b,
            scale: spec.alpha as f64 / spec.rank as f64,
            dropout,
            rng: Mutex::new(SeededInit::new(seed)),
            merged: false,
        });
        Ok(())
    }

    /// Folds the adapter into the base, `W ← W + (α/r)·B·A`; a quantized base is dequantized to
    /// f32 first (as PEFT does when merging QLoRA adapters). No-op without adapter or if merged.
    pub fn merge(&mut self) -> Result<()> {
        self.shift_base(1.0)
    }

    /// Undoes [`Linear::merge`] (exact up to f32 rounding of the add/subtract).
    pub fn unmerge(&mut self) -> Result<()> {
        self.shift_base(-1.0)
    }

    fn shift_base(&mut self, sign: f64) -> Result<()> {
        let Some(ad) = self.adapter.as_mut() else {
            return Ok(());
        };
        if ad.merged == (sign > 0.0) {
            return Ok(());
        }
        let delta = (ad.b.as_tensor().matmul(ad.a.as_tensor())? * (sign * ad.scale))?;
        match &mut self.base {
            Base::Dense(v) => v.set(&(v.as_tensor() + delta)?)?,
            Base::Frozen(t) => *t = (t.to_dtype(DType::F32)? + delta)?,
            Base::Quantized(op) => {
                self.base = Base::Frozen((op.dequantized(&candle_core::Device::Cpu)? + delta)?)
            }
        }
        ad.merged = sign > 0.0;
        Ok(())
    }
}

/// A fresh seed drawn from a generator.
trait NextSeed {
    fn next_u64_seed(&mut self) -> u64;
}

impl NextSeed for rand_chacha::ChaCha8Rng {
    fn next_u64_seed(&mut self) -> u64 {
        rand::RngCore::next_u64(self)
    }
}

/// Bytes of the base weight (for memory accounting).
pub fn base_bytes(base: &Base) -> usize {
    match base {
        Base::Dense(v) => 4 * v.elem_count(),
        Base::Frozen(t) => t.dtype().size_in_bytes() * t.elem_count(),
        Base::Quantized(op) => op.storage_bytes(),
    }
}
