//! A BERT encoder (Devlin et al., NAACL 2019) loaded from a Hugging Face `model.safetensors`,
//! e.g. all-MiniLM-L6-v2 (Wang et al., "MiniLM", NeurIPS 2020, fine-tuned as a sentence
//! encoder by Reimers & Gurevych's sentence-transformers): post-LayerNorm blocks, GELU (erf)
//! MLP, learned absolute positions, mean pooling.
//!
//! Every projection is a LoRA [`Linear`] so the encoder can be NF4-quantized and adapted per
//! layer kind and depth exactly like the GPT of the study ([`Bert::apply_lora`]). The attention
//! projections of MiniLM have 384×384 = 147k weights and the MLP projections 384×1536 = 590k,
//! so layer sizes differ as in Shen et al. (CMC 2025). All normalisations are the
//! differentiable compositions of [`crate::train::ops`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor, D};
use serde::Deserialize;

use crate::qlora::lora::{base_bytes, Base, LayerKind, Linear, LoraConfig};
use crate::train::ops::{layer_norm, softmax};
use crate::train::{ParamStore, SeededInit};
use crate::{MlError, Result};

/// The fields of a Hugging Face BERT `config.json` the encoder uses.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct BertConfig {
    /// Word-piece vocabulary size.
    pub vocab_size: usize,
    /// Residual width.
    pub hidden_size: usize,
    /// Number of blocks.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Position-embedding table size.
    pub max_position_embeddings: usize,
    /// Token-type (segment) vocabulary size.
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
}

impl BertConfig {
    /// A configuration of the given shape with Hugging Face `BertConfig`'s defaults for the rest
    /// (two token types, LayerNorm ε = 1e-12, as in all-MiniLM-L6-v2, which is
    /// `BertConfig::new(30522, 384, 6, 12, 1536, 512)`).
    pub fn new(
        vocab_size: usize,
        hidden_size: usize,
        num_hidden_layers: usize,
        num_attention_heads: usize,
        intermediate_size: usize,
        max_position_embeddings: usize,
    ) -> Self {
        Self {
            vocab_size,
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            intermediate_size,
            max_position_embeddings,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
        }
    }

    /// Reads `config.json`.
    ///
    /// # Errors
    /// Those of [`crate::data::read_bytes_limited`] with the limit
    /// [`crate::data::MAX_FILE_BYTES`]; [`MlError::Format`] when the file is not such a JSON
    /// object or fails [`BertConfig::check`].
    pub fn from_file(path: &Path) -> Result<Self> {
        let json =
            crate::data::read_bytes_limited(path, "bert config", crate::data::MAX_FILE_BYTES)?;
        let cfg: Self = serde_json::from_slice(&json)
            .map_err(|e| MlError::format("bert config", path, e.to_string()))?;
        cfg.check()
            .map_err(|why| MlError::format("bert config", path, why))?;
        Ok(cfg)
    }

    /// Why an encoder of this shape cannot run, if it cannot: an empty vocabulary, token-type
    /// vocabulary, position table, hidden or MLP width (an encoder of empty or NaN outputs), no
    /// attention heads, a hidden size they do not divide, or a LayerNorm ε that is not a
    /// positive finite number.
    pub fn check(&self) -> std::result::Result<(), String> {
        for (what, v) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("type_vocab_size", self.type_vocab_size),
            ("max_position_embeddings", self.max_position_embeddings),
        ] {
            if v == 0 {
                return Err(format!("{what} is 0"));
            }
        }
        let (d, nh) = (self.hidden_size, self.num_attention_heads);
        if nh == 0 || !d.is_multiple_of(nh) {
            return Err(format!("hidden size {d} is not divisible by {nh} heads"));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(format!(
                "layer_norm_eps {} is not a positive number",
                self.layer_norm_eps
            ));
        }
        Ok(())
    }
}

/// A linear layer with a (frozen) bias.
#[derive(Debug)]
struct Dense {
    lin: Linear,
    bias: Tensor,
}

impl Dense {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        Ok(self.lin.forward(x, train)?.broadcast_add(&self.bias)?)
    }
}

#[derive(Debug, Clone)]
struct Norm {
    weight: Tensor,
    bias: Tensor,
}

impl Norm {
    fn detached(&self) -> Norm {
        Norm {
            weight: self.weight.detach(),
            bias: self.bias.detach(),
        }
    }
}

#[derive(Debug)]
struct BertLayer {
    q: Dense,
    k: Dense,
    v: Dense,
    o: Dense,
    attn_norm: Norm,
    up: Dense,
    down: Dense,
    out_norm: Norm,
}

/// The checkpoint prefixes of block `l`'s two LayerNorms (attention output, block output).
fn layer_norm_prefixes(l: usize) -> [String; 2] {
    let p = format!("encoder.layer.{l}");
    [format!("{p}.attention.output"), format!("{p}.output")]
}

impl BertLayer {
    /// The six projections with their biases.
    fn denses(&self) -> [&Dense; 6] {
        [&self.q, &self.k, &self.v, &self.o, &self.up, &self.down]
    }

    /// [`BertLayer::denses`], mutable, in the same order.
    fn denses_mut(&mut self) -> [&mut Dense; 6] {
        [
            &mut self.q,
            &mut self.k,
            &mut self.v,
            &mut self.o,
            &mut self.up,
            &mut self.down,
        ]
    }

    fn linears_mut(&mut self) -> [(LayerKind, &mut Linear); 6] {
        [
            (LayerKind::Q, &mut self.q.lin),
            (LayerKind::K, &mut self.k.lin),
            (LayerKind::V, &mut self.v.lin),
            (LayerKind::O, &mut self.o.lin),
            (LayerKind::Up, &mut self.up.lin),
            (LayerKind::Down, &mut self.down.lin),
        ]
    }
}

/// The encoder with frozen f32 weights; [`Bert::apply_lora`] quantizes and adapts it.
#[derive(Debug)]
pub struct Bert {
    cfg: BertConfig,
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    embed_norm: Norm,
    layers: Vec<BertLayer>,
}

/// Tensors of a safetensors file by name, with typed errors for absent or misshaped ones.
struct Weights {
    path: PathBuf,
    map: HashMap<String, Tensor>,
}

impl Weights {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self.map.get(name).ok_or_else(|| MlError::MissingTensor {
            path: self.path.clone(),
            name: name.to_string(),
        })?;
        if t.dims() != shape {
            return Err(MlError::ShapeMismatch {
                name: name.to_string(),
                expected: shape.to_vec(),
                found: t.dims().to_vec(),
            });
        }
        Ok(t.to_dtype(DType::F32)?)
    }

    fn norm(&self, prefix: &str, d: usize) -> Result<Norm> {
        Ok(Norm {
            weight: self.get(&format!("{prefix}.LayerNorm.weight"), &[d])?,
            bias: self.get(&format!("{prefix}.LayerNorm.bias"), &[d])?,
        })
    }

    fn dense(&self, prefix: &str, i: usize, o: usize) -> Result<Dense> {
        let w = self.get(&format!("{prefix}.weight"), &[o, i])?;
        Ok(Dense {
            lin: Linear::frozen(prefix, w)?,
            bias: self.get(&format!("{prefix}.bias"), &[o])?,
        })
    }
}

impl Bert {
    /// Loads the encoder from a Hugging Face `model.safetensors` (names as in `BertModel`, with
    /// or without a `bert.` prefix). Missing tensors and wrong shapes are typed errors.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when `cfg` fails [`BertConfig::check`]; those of
    /// [`crate::data::read_bytes_limited`] with the limit [`crate::data::MAX_WEIGHTS_BYTES`];
    /// [`MlError::CorruptCheckpoint`] when the file is not safetensors; [`MlError::MissingTensor`]
    /// and [`MlError::ShapeMismatch`] when it does not hold the encoder `cfg` describes.
    pub fn load(cfg: BertConfig, weights: &Path) -> Result<Self> {
        cfg.check()
            .map_err(|why| MlError::InvalidInput(format!("BERT configuration: {why}")))?;
        let bytes = crate::data::read_bytes_limited(
            weights,
            "safetensors",
            crate::data::MAX_WEIGHTS_BYTES,
        )?;
        let raw = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu).map_err(|e| {
            MlError::CorruptCheckpoint {
                path: weights.to_path_buf(),
                reason: e.to_string(),
            }
        })?;
        drop(bytes);
        let map = raw
            .into_iter()
            .map(|(k, v)| (k.strip_prefix("bert.").map(str::to_string).unwrap_or(k), v))
            .collect();
        let w = Weights {
            path: weights.to_path_buf(),
            map,
        };
        let (d, ff) = (cfg.hidden_size, cfg.intermediate_size);
        // Not sized by the configuration (a file's claim): a layer the weights lack ends the
        // loop with a typed error.
        let mut layers = Vec::new();
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            layers.push(BertLayer {
                q: w.dense(&format!("{p}.attention.self.query"), d, d)?,
                k: w.dense(&format!("{p}.attention.self.key"), d, d)?,
                v: w.dense(&format!("{p}.attention.self.value"), d, d)?,
                o: w.dense(&format!("{p}.attention.output.dense"), d, d)?,
                attn_norm: w.norm(&format!("{p}.attention.output"), d)?,
                up: w.dense(&format!("{p}.intermediate.dense"), d, ff)?,
                down: w.dense(&format!("{p}.output.dense"), ff, d)?,
                out_norm: w.norm(&format!("{p}.output"), d)?,
            });
        }
        Ok(Self {
            word: w.get("embeddings.word_embeddings.weight", &[cfg.vocab_size, d])?,
            position: w.get(
                "embeddings.position_embeddings.weight",
                &[cfg.max_position_embeddings, d],
            )?,
            token_type: w.get(
                "embeddings.token_type_embeddings.weight",
                &[cfg.type_vocab_size, d],
            )?,
            embed_norm: w.norm("embeddings", d)?,
            layers,
            cfg,
        })
    }

    /// An encoder with fresh trainable weights registered in `store`, for encoders trained from
    /// scratch, e.g. a few-layer BERT over a [`crate::data::WordVocab`]: projections
    /// `N(0, 1/fan_in)` (BERT's fixed 0.02 suits width 768; at width 32–64 it leaves the
    /// attention output ~1 % of the residual, so sentences barely reach the marker states),
    /// word embeddings `N(0, 1)` (a LayerNorm follows), position embeddings `N(0, 0.1²)` (at the
    /// words' scale, a state would mostly encode where its token sits), token types 0, biases 0,
    /// LayerNorms 1/0.
    ///
    /// # Panics
    /// If `hidden_size` is not divisible by `num_attention_heads`.
    #[track_caller]
    pub fn new(cfg: BertConfig, store: &mut ParamStore, init: &mut SeededInit) -> Result<Self> {
        let (d, ff) = (cfg.hidden_size, cfg.intermediate_size);
        assert!(
            cfg.num_attention_heads > 0 && d.is_multiple_of(cfg.num_attention_heads),
            "hidden size {d} is not divisible by {} heads",
            cfg.num_attention_heads
        );
        let dev = Device::Cpu;
        let var = |name: String, t: Tensor, store: &mut ParamStore| -> Result<Tensor> {
            Ok(store.add(name, t, true)?.as_tensor().clone())
        };
        let norm = |p: &str, store: &mut ParamStore| -> Result<Norm> {
            Ok(Norm {
                weight: var(
                    format!("{p}.LayerNorm.weight"),
                    Tensor::ones(d, DType::F32, &dev)?,
                    store,
                )?,
                bias: var(
                    format!("{p}.LayerNorm.bias"),
                    Tensor::zeros(d, DType::F32, &dev)?,
                    store,
                )?,
            })
        };
        let dense = |p: String,
                     i: usize,
                     o: usize,
                     store: &mut ParamStore,
                     init: &mut SeededInit|
         -> Result<Dense> {
            let lin = Linear::new(&p, i, o, (i as f32).powf(-0.5), store, init)?;
            let bias = store
                .add(
                    format!("{p}.bias"),
                    Tensor::zeros(o, DType::F32, &dev)?,
                    true,
                )?
                .as_tensor()
                .clone();
            Ok(Dense { lin, bias })
        };
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            layers.push(BertLayer {
                q: dense(format!("{p}.attention.self.query"), d, d, store, init)?,
                k: dense(format!("{p}.attention.self.key"), d, d, store, init)?,
                v: dense(format!("{p}.attention.self.value"), d, d, store, init)?,
                o: dense(format!("{p}.attention.output.dense"), d, d, store, init)?,
                attn_norm: norm(&format!("{p}.attention.output"), store)?,
                up: dense(format!("{p}.intermediate.dense"), d, ff, store, init)?,
                down: dense(format!("{p}.output.dense"), ff, d, store, init)?,
                out_norm: norm(&format!("{p}.output"), store)?,
            });
        }
        let emb = |name: &str,
                   rows: usize,
                   std: f32,
                   store: &mut ParamStore,
                   init: &mut SeededInit|
         -> Result<Tensor> {
            let t = init.normal(&[rows, d], std, &dev)?;
            Ok(store
                .add(format!("embeddings.{name}.weight"), t, true)?
                .as_tensor()
                .clone())
        };
        Ok(Self {
            word: emb("word_embeddings", cfg.vocab_size, 1.0, store, init)?,
            position: emb(
                "position_embeddings",
                cfg.max_position_embeddings,
                0.1,
                store,
                init,
            )?,
            token_type: emb(
                "token_type_embeddings",
                cfg.type_vocab_size,
                0.0,
                store,
                init,
            )?,
            embed_norm: norm("embeddings", store)?,
            layers,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }

    /// Hidden states `[batch, seq, hidden]` for token ids `[batch, seq]` (u32) and an attention
    /// mask `[batch, seq]` (1 = token, 0 = padding; f32). Token types are all 0.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor, train: bool) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let d = self.cfg.hidden_size;
        if t > self.cfg.max_position_embeddings {
            return Err(MlError::InvalidInput(format!(
                "sequence of {t} tokens exceeds the {} positions of the model",
                self.cfg.max_position_embeddings
            )));
        }
        let words = self.word.index_select(&ids.flatten_all()?, 0)?;
        let x = words
            .reshape((b, t, d))?
            .broadcast_add(&self.position.narrow(0, 0, t)?)?
            .broadcast_add(&self.token_type.narrow(0, 0, 1)?)?;
        let eps = self.cfg.layer_norm_eps;
        let mut x = norm(&x, &self.embed_norm, eps)?;
        // Additive mask [b, 1, 1, t]: 0 for tokens, -1e9 for padding.
        let add_mask = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((b, 1, 1, t))?;
        for layer in &self.layers {
            let a = self.attention(layer, &x, &add_mask, train)?;
            let h = norm(&(x + a)?, &layer.attn_norm, eps)?;
            let m = layer
                .down
                .forward(&layer.up.forward(&h, train)?.gelu_erf()?, train)?;
            x = norm(&(h + m)?, &layer.out_norm, eps)?;
        }
        Ok(x)
    }

    fn attention(&self, l: &BertLayer, x: &Tensor, mask: &Tensor, train: bool) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let nh = self.cfg.num_attention_heads;
        let hd = d / nh;
        let heads = |y: Tensor| -> Result<Tensor> {
            Ok(y.reshape((b, t, nh, hd))?.transpose(1, 2)?.contiguous()?)
        };
        let q = heads(l.q.forward(x, train)?)?;
        let k = heads(l.k.forward(x, train)?)?;
        let v = heads(l.v.forward(x, train)?)?;
        let att = (q.matmul(&k.t()?.contiguous()?)? / (hd as f64).sqrt())?;
        let att = softmax(&att.broadcast_add(mask)?)?;
        let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))?;
        l.o.forward(&y, train)
    }

    /// Sentence embeddings `[batch, hidden]`: the mask-weighted mean of the hidden states, as
    /// sentence-transformers' pooling layer of all-MiniLM-L6-v2 (before its L2 normalisation).
    pub fn mean_pool(hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let m = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?;
        let sum = hidden.broadcast_mul(&m)?.sum(1)?;
        let count = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        Ok(sum.broadcast_div(&count)?)
    }

    /// Turns the encoder into a LoRA/QLoRA model: every projection's base is stored as
    /// `cfg.base` (e.g. NF4) and adapters are attached where `cfg` says (kinds Q, K, V, O, Up =
    /// `intermediate.dense`, Down = `output.dense`; `Gate` does not occur in BERT). Embeddings,
    /// biases and norms stay frozen f32.
    pub fn apply_lora(
        &mut self,
        cfg: &LoraConfig,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<()> {
        cfg.apply_to_blocks(
            self.layers.iter_mut().map(BertLayer::linears_mut),
            store,
            init,
        )
    }

    /// Fine-tuning of the top of a loaded encoder: the last `n` layers' projections, biases
    /// and LayerNorms become trainable parameters in `store` under their checkpoint names
    /// (`encoder.layer.<l>.attention.self.query.weight`, ...); the embeddings and the layers
    /// below stay frozen, so the forward pass builds an autograd graph only from layer
    /// `L − n` on.
    ///
    /// All or nothing: every layer is checked, and the new parameters are built in a staging
    /// store, before the encoder or `store` changes; on an error both are as before.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when `n` exceeds the depth; [`MlError::NotFineTunable`] when a
    /// projection among the last `n` layers is not a frozen f32 weight without adapter (NF4,
    /// int8 or bf16 bases from [`Bert::apply_lora`], a LoRA adapter the dense update would
    /// drop, a layer already trainable) or one of the names is already in `store`.
    pub fn unfreeze_last(&mut self, n: usize, store: &mut ParamStore) -> Result<()> {
        let depth = self.layers.len();
        if n > depth {
            return Err(MlError::InvalidInput(format!(
                "cannot fine-tune the last {n} layers of a {depth}-layer encoder"
            )));
        }
        let first = depth - n;
        // Check everything first.
        for (l, layer) in self.layers.iter().enumerate().skip(first) {
            for dense in layer.denses() {
                let name = dense.lin.name();
                let refuse = |reason: String| MlError::NotFineTunable {
                    layer: name.to_string(),
                    reason,
                };
                match dense.lin.base() {
                    Base::Frozen(w) if w.dtype() == DType::F32 => {}
                    Base::Frozen(w) => {
                        return Err(refuse(format!(
                            "its weight is stored as {:?}; only f32 weights fine-tune",
                            w.dtype()
                        )))
                    }
                    Base::Quantized(_) => {
                        return Err(refuse(
                            "its weight is block-quantized; only f32 weights fine-tune".into(),
                        ))
                    }
                    Base::Dense(_) => return Err(refuse("it is already trainable".into())),
                }
                if dense.lin.adapter().is_some() {
                    return Err(refuse(
                        "it has a LoRA adapter, which fine-tuning its weight would drop".into(),
                    ));
                }
                for p in [format!("{name}.weight"), format!("{name}.bias")] {
                    if store.get(&p).is_some() {
                        return Err(refuse(format!("parameter `{p}` is already in the store")));
                    }
                }
            }
            for prefix in layer_norm_prefixes(l) {
                for p in [
                    format!("{prefix}.LayerNorm.weight"),
                    format!("{prefix}.LayerNorm.bias"),
                ] {
                    if store.get(&p).is_some() {
                        return Err(MlError::NotFineTunable {
                            layer: prefix.clone(),
                            reason: format!("parameter `{p}` is already in the store"),
                        });
                    }
                }
            }
        }
        // Build the trainable layers in a staging store; nothing of `self` changes yet.
        let mut staged = ParamStore::new();
        let var = |name: String, t: &Tensor, store: &mut ParamStore| -> Result<Tensor> {
            Ok(store.add(name, t.detach(), true)?.as_tensor().clone())
        };
        let mut new_layers = Vec::with_capacity(n);
        for (l, layer) in self.layers.iter().enumerate().skip(first) {
            let mut denses = Vec::with_capacity(6);
            for dense in layer.denses() {
                let name = dense.lin.name().to_string();
                let Base::Frozen(weight) = dense.lin.base() else {
                    unreachable!("checked above: `{name}` has a frozen f32 weight");
                };
                let lin = Linear::trainable(&name, weight.clone(), &mut staged)?;
                let bias = var(format!("{name}.bias"), &dense.bias, &mut staged)?;
                denses.push(Dense { lin, bias });
            }
            let mut norms = Vec::with_capacity(2);
            for (norm, prefix) in [&layer.attn_norm, &layer.out_norm]
                .into_iter()
                .zip(layer_norm_prefixes(l))
            {
                norms.push(Norm {
                    weight: var(
                        format!("{prefix}.LayerNorm.weight"),
                        &norm.weight,
                        &mut staged,
                    )?,
                    bias: var(format!("{prefix}.LayerNorm.bias"), &norm.bias, &mut staged)?,
                });
            }
            new_layers.push((denses, norms));
        }
        // Commit: infallible from here on.
        for (layer, (denses, norms)) in self.layers[first..].iter_mut().zip(new_layers) {
            let mut denses = denses.into_iter();
            for slot in layer.denses_mut() {
                *slot = denses.next().expect("six projections per layer");
            }
            let mut norms = norms.into_iter();
            layer.attn_norm = norms.next().expect("two norms per layer");
            layer.out_norm = norms.next().expect("two norms per layer");
        }
        store.append(staged);
        Ok(())
    }

    /// An evaluation view sharing the weights (no copy) whose forward pass builds no autograd
    /// graph (adapters through [`Linear::detached`], trainable weights of [`Bert::new`] through
    /// `Tensor::detach`).
    pub fn detached(&self) -> Bert {
        let dense = |d: &Dense| Dense {
            lin: d.lin.detached(),
            bias: d.bias.detach(),
        };
        Bert {
            cfg: self.cfg,
            word: self.word.detach(),
            position: self.position.detach(),
            token_type: self.token_type.detach(),
            embed_norm: self.embed_norm.detached(),
            layers: self
                .layers
                .iter()
                .map(|l| BertLayer {
                    q: dense(&l.q),
                    k: dense(&l.k),
                    v: dense(&l.v),
                    o: dense(&l.o),
                    attn_norm: l.attn_norm.detached(),
                    up: dense(&l.up),
                    down: dense(&l.down),
                    out_norm: l.out_norm.detached(),
                })
                .collect(),
        }
    }

    /// Bytes of the projection weights at their storage size (f32, NF4, ...).
    pub fn linear_base_bytes(&self) -> usize {
        self.layers
            .iter()
            .flat_map(BertLayer::denses)
            .map(|dense| base_bytes(dense.lin.base()))
            .sum()
    }
}

/// Entity-marker features `[b, 2d]` of hidden states `[b, t, d]`: the states at each example's
/// opening head and tail markers, concatenated (positions past the sequence clamp to its end).
pub fn marker_states(hidden: &Tensor, batch: &[&crate::data::RelationExample]) -> Result<Tensor> {
    let (b, t, d) = hidden.dims3()?;
    if b != batch.len() || t == 0 {
        return Err(MlError::InvalidInput(format!(
            "{b} hidden sequences of length {t} for {} examples",
            batch.len()
        )));
    }
    let flat = hidden.reshape((b * t, d))?;
    let pick = |f: fn(&crate::data::RelationExample) -> usize| -> Result<Tensor> {
        let idx: Vec<u32> = batch
            .iter()
            .enumerate()
            .map(|(i, e)| (i * t + f(e).min(t - 1)) as u32)
            .collect();
        Ok(flat.index_select(&Tensor::new(idx, hidden.device())?, 0)?)
    };
    Ok(Tensor::cat(&[pick(|e| e.head)?, pick(|e| e.tail)?], 1)?)
}

fn norm(x: &Tensor, n: &Norm, eps: f64) -> Result<Tensor> {
    layer_norm(x, &n.weight, &n.bias, eps)
}
