//! A GPT-style decoder-only transformer: pre-RMSNorm blocks, rotary position embeddings (Su et
//! al., RoFormer 2021), SwiGLU MLP (Shazeer 2020), causal attention, tied input/output
//! embeddings. Every linear layer is a [`Linear`] so LoRA/QLoRA can be applied per layer kind and
//! depth.

use candle_core::{Device, Tensor, D};

use crate::qlora::lora::{base_bytes, Base, LayerKind, Linear, LoraConfig};
use crate::train::ops::{cross_entropy, rms_norm, silu, softmax};
use crate::train::{ParamStore, SeededInit};
use crate::Result;

/// Model dimensions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GptConfig {
    /// Vocabulary size.
    pub vocab: usize,
    /// Residual width.
    pub d_model: usize,
    /// Number of blocks.
    pub n_layers: usize,
    /// Attention heads (`d_model` must be divisible by it, head size even).
    pub n_heads: usize,
    /// SwiGLU hidden width.
    pub d_ff: usize,
    /// Longest sequence (rotary table size).
    pub max_seq: usize,
    /// Rotary base, default 10000.
    pub rope_theta: f64,
    /// RMSNorm epsilon, default 1e-5.
    pub norm_eps: f64,
}

impl GptConfig {
    /// Micro preset for tests: d = 32, 2 blocks, 2 heads, ~20k parameters (+ embeddings).
    pub fn micro(vocab: usize) -> Self {
        Self::sized(vocab, 32, 2, 2, 64, 32)
    }

    /// Mini preset for the `--quick` study: d = 128, 4 blocks, 4 heads, SwiGLU 384, ~0.85M
    /// parameters (+ embeddings).
    pub fn mini(vocab: usize) -> Self {
        Self::sized(vocab, 128, 4, 4, 384, 128)
    }

    /// Tiny preset: d = 256, 6 blocks, 8 heads, SwiGLU 704, ~4.8M parameters (+ embeddings).
    pub fn tiny(vocab: usize) -> Self {
        Self::sized(vocab, 256, 6, 8, 704, 256)
    }

    /// A configuration with the default rotary base and epsilon.
    pub fn sized(
        vocab: usize,
        d_model: usize,
        n_layers: usize,
        n_heads: usize,
        d_ff: usize,
        max_seq: usize,
    ) -> Self {
        Self {
            vocab,
            d_model,
            n_layers,
            n_heads,
            d_ff,
            max_seq,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
        }
    }
}

#[derive(Debug)]
struct Block {
    norm1: Tensor,
    norm2: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    gate: Linear,
    up: Linear,
    down: Linear,
}

impl Block {
    fn linears_mut(&mut self) -> [(LayerKind, &mut Linear); 7] {
        [
            (LayerKind::Q, &mut self.q),
            (LayerKind::K, &mut self.k),
            (LayerKind::V, &mut self.v),
            (LayerKind::O, &mut self.o),
            (LayerKind::Gate, &mut self.gate),
            (LayerKind::Up, &mut self.up),
            (LayerKind::Down, &mut self.down),
        ]
    }

    fn detached(&self) -> Block {
        Block {
            norm1: self.norm1.detach(),
            norm2: self.norm2.detach(),
            q: self.q.detached(),
            k: self.k.detached(),
            v: self.v.detached(),
            o: self.o.detached(),
            gate: self.gate.detached(),
            up: self.up.detached(),
            down: self.down.detached(),
        }
    }

    fn linears(&self) -> [&Linear; 7] {
        [
            &self.q, &self.k, &self.v, &self.o, &self.gate, &self.up, &self.down,
        ]
    }
}

/// The decoder.
#[derive(Debug)]
pub struct Gpt {
    cfg: GptConfig,
    embed: Tensor,
    final_norm: Tensor,
    blocks: Vec<Block>,
    cos: Tensor,
    sin: Tensor,
}

impl Gpt {
    /// A model with fresh weights from `init` (embeddings and projections `N(0, 0.02²)`, output
    /// projections scaled by `1/√(2L)` as in GPT-2), registered in `store`.
    ///
    /// # Panics
    /// If `d_model` is not divisible by `n_heads` or the head size is odd.
    #[track_caller]
    pub fn new(cfg: GptConfig, store: &mut ParamStore, init: &mut SeededInit) -> Result<Self> {
        let hd = cfg.d_model / cfg.n_heads;
        assert!(
            hd * cfg.n_heads == cfg.d_model && hd.is_multiple_of(2),
            "bad head size"
        );
        let dev = Device::Cpu;
        let d = cfg.d_model;
        let std = 0.02f32;
        let out_std = std / (2.0 * cfg.n_layers as f32).sqrt();
        let embed = store.add("embed", init.normal(&[cfg.vocab, d], std, &dev)?, true)?;
        let ones = || Tensor::ones(d, candle_core::DType::F32, &dev);
        let mut blocks = Vec::with_capacity(cfg.n_layers);
        for l in 0..cfg.n_layers {
            let p = format!("layers.{l}");
            let mut lin = |n: &str, i: usize, o: usize, s: f32| {
                Linear::new(&format!("{p}.{n}"), i, o, s, store, init)
            };
            let (q, k, v, o) = (
                lin("attn.q", d, d, std)?,
                lin("attn.k", d, d, std)?,
                lin("attn.v", d, d, std)?,
                lin("attn.o", d, d, out_std)?,
            );
            let (gate, up, down) = (
                lin("mlp.gate", d, cfg.d_ff, std)?,
                lin("mlp.up", d, cfg.d_ff, std)?,
                lin("mlp.down", cfg.d_ff, d, out_std)?,
            );
            let norm1 = store.add(format!("{p}.norm1"), ones()?, true)?;
            let norm2 = store.add(format!("{p}.norm2"), ones()?, true)?;
            blocks.push(Block {
                norm1: norm1.as_tensor().clone(),
                norm2: norm2.as_tensor().clone(),
                q,
                k,
                v,
                o,
                gate,
                up,
                down,
            });
        }
        let final_norm = store.add("final_norm", ones()?, true)?;
        let (cos, sin) = rotary_tables(hd, cfg.max_seq, cfg.rope_theta, &dev)?;
        Ok(Self {
            cfg,
            embed: embed.as_tensor().clone(),
            final_norm: final_norm.as_tensor().clone(),
            blocks,
            cos,
            sin,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GptConfig {
        &self.cfg
    }

    /// Logits `[batch, seq, vocab]` for token ids `[batch, seq]` (u32).
    pub fn forward(&self, ids: &Tensor, train: bool) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let d = self.cfg.d_model;
        let mut x = self
            .embed
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((b, t, d))?;
        let mask = causal_mask(t, ids.device())?;
        let (cos, sin) = (self.cos.narrow(0, 0, t)?, self.sin.narrow(0, 0, t)?);
        for blk in &self.blocks {
            let h = rms_norm(&x, &blk.norm1, self.cfg.norm_eps)?;
            let a = self.attention(blk, &h, &mask, &cos, &sin, train)?;
            x = (x + a)?;
            let h = rms_norm(&x, &blk.norm2, self.cfg.norm_eps)?;
            let g = silu(&blk.gate.forward(&h, train)?)?;
            let m = blk
                .down
                .forward(&(g * blk.up.forward(&h, train)?)?, train)?;
            x = (x + m)?;
        }
        let h = rms_norm(&x, &self.final_norm, self.cfg.norm_eps)?;
        Ok(h.reshape((b * t, d))?
            .matmul(&self.embed.t()?)?
            .reshape((b, t, self.cfg.vocab))?)
    }

    fn attention(
        &self,
        blk: &Block,
        h: &Tensor,
        mask: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        train: bool,
    ) -> Result<Tensor> {
        let (b, t, d) = h.dims3()?;
        let nh = self.cfg.n_heads;
        let hd = d / nh;
        let heads = |x: Tensor| -> Result<Tensor> {
            Ok(x.reshape((b, t, nh, hd))?.transpose(1, 2)?.contiguous()?)
        };
        let q = rope(&heads(blk.q.forward(h, train)?)?, cos, sin)?;
        let k = rope(&heads(blk.k.forward(h, train)?)?, cos, sin)?;
        let v = heads(blk.v.forward(h, train)?)?;
        let att = (q.matmul(&k.t()?.contiguous()?)? / (hd as f64).sqrt())?;
        let att = softmax(&att.broadcast_add(mask)?)?;
        let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))?;
        blk.o.forward(&y, train)
    }

    /// Mean next-token cross-entropy of `ids` against `targets` (both `[batch, seq]`).
    pub fn loss(&self, ids: &Tensor, targets: &Tensor, train: bool) -> Result<Tensor> {
        let logits = self.forward(ids, train)?;
        let (b, t, v) = logits.dims3()?;
        cross_entropy(&logits.reshape((b * t, v))?, &targets.flatten_all()?)
    }

    /// Turns the model into a LoRA/QLoRA model: every parameter is frozen, every linear layer's
    /// base is stored as `cfg.base`, and adapters are attached where `cfg` says.
    pub fn apply_lora(
        &mut self,
        cfg: &LoraConfig,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<()> {
        store.set_trainable(false, |_| true);
        // Frozen embeddings and norms leave the autograd graph too.
        self.embed = self.embed.detach();
        self.final_norm = self.final_norm.detach();
        for blk in &mut self.blocks {
            blk.norm1 = blk.norm1.detach();
            blk.norm2 = blk.norm2.detach();
        }
        cfg.apply_to_blocks(self.blocks.iter_mut().map(Block::linears_mut), store, init)
    }

    /// An evaluation view sharing the weights (no copy) whose forward pass builds no autograd
    /// graph (see [`Linear::detached`]); use it for perplexity so evaluation does not hold every
    /// intermediate of its batches.
    pub fn detached(&self) -> Gpt {
        Gpt {
            cfg: self.cfg,
            embed: self.embed.detach(),
            final_norm: self.final_norm.detach(),
            blocks: self.blocks.iter().map(Block::detached).collect(),
            cos: self.cos.clone(),
            sin: self.sin.clone(),
        }
    }

    /// Merges (`true`) or unmerges (`false`) every adapter into its base.
    pub fn set_merged(&mut self, merged: bool) -> Result<()> {
        for blk in &mut self.blocks {
            for (_, lin) in blk.linears_mut() {
                if merged {
                    lin.merge()?;
                } else {
                    lin.unmerge()?;
                }
            }
        }
        Ok(())
    }

    /// Bytes of the frozen linear-layer bases held outside the parameter store (bf16 tensors and
    /// quantized matrices); dense bases are store parameters and are counted there.
    pub fn frozen_base_bytes(&self) -> usize {
        self.blocks
            .iter()
            .flat_map(|b| b.linears())
            .filter(|l| !matches!(l.base(), Base::Dense(_)))
            .map(|l| base_bytes(l.base()))
            .sum()
    }
}

/// `cos`/`sin` tables `[max_seq, head_dim]` (each half repeated) for rotary embeddings.
fn rotary_tables(hd: usize, max_seq: usize, theta: f64, dev: &Device) -> Result<(Tensor, Tensor)> {
    let half = hd / 2;
    let mut c = Vec::with_capacity(max_seq * hd);
    let mut s = Vec::with_capacity(max_seq * hd);
    for p in 0..max_seq {
        for rep in 0..2 {
            let _ = rep;
            for i in 0..half {
                let ang = p as f64 / theta.powf(2.0 * i as f64 / hd as f64);
                c.push(ang.cos() as f32);
                s.push(ang.sin() as f32);
            }
        }
    }
    Ok((
        Tensor::from_vec(c, (max_seq, hd), dev)?,
        Tensor::from_vec(s, (max_seq, hd), dev)?,
    ))
}

/// Rotary embedding of `x` `[b, h, t, hd]`: `x·cos + rotate_half(x)·sin` (differentiable).
fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let hd = x.dim(D::Minus1)?;
    let x1 = x.narrow(D::Minus1, 0, hd / 2)?;
    let x2 = x.narrow(D::Minus1, hd / 2, hd / 2)?;
    let rot = Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)?;
    Ok((x.broadcast_mul(cos)? + rot.broadcast_mul(sin)?)?)
}

/// Additive causal mask `[t, t]`: 0 on and below the diagonal, -1e9 above.
fn causal_mask(t: usize, dev: &Device) -> Result<Tensor> {
    let v: Vec<f32> = (0..t * t)
        .map(|i| if i % t > i / t { -1e9 } else { 0.0 })
        .collect();
    Ok(Tensor::from_vec(v, (t, t), dev)?)
}
