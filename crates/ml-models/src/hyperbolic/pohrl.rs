//! PO-HRL: partial-order-centred hyperbolic representation learning for few-shot relation
//! extraction (Hu, Huang, Hu, Yang, Qiao, Dou, Wang; COLING 2025), and its baselines in the same
//! harness with the same encoder and projection head.
//!
//! Every method reads instance features `[h_E1; h_E2]` and relation features
//! `[h_CLS; mean]` from a [`FewShotEncoder`], maps both through one trainable linear head to
//! width `p`, and classifies the queries of an N-way K-shot episode by distance to one prototype
//! per class:
//!
//! - [`Method::Proto`]: Euclidean prototypical network (Snell et al., 2017): prototype = mean of
//!   the support, logits `−‖q − c‖²`.
//! - [`Method::ProtoDesc`]: prototypes plus relation information in Euclidean space (as in
//!   SimpleFSRE, Liu et al., ACL 2022): prototype = mean of the support + relation feature.
//! - [`Method::Pohrl`]: support `s = u + α·r` (α = 1 at 1-shot, 0 otherwise, as in the paper;
//!   [`PohrlConfig::alpha`] overrides), every vector mapped to the hyperboloid by
//!   `expmap0(x/√p)`; prototype = Lorentz centroid of the support weighted by
//!   `softmax(cos_L(s, r))` over the shots (the paper's Eq. 5, no temperature; see
//!   [`lorentz::centroid`]); logits `−d_L(q, c)²/τ` (the issue asks for classification by Lorentz
//!   distance; the paper's Eq. 6 uses `softmax(cos_L(c, q))` instead. Hyperbolic distances of
//!   `expmap0(x/√p)` are O(1), so without the scale the softmax stays nearly uniform).
//!   Loss `L = L_cls + λ₁·L_align + λ₂·L_cone` where `L_align` is the supervised contrastive
//!   loss (Khosla et al., 2020) over the episode's instances and relations with Lorentzian
//!   cosine similarity and temperature τ, and `L_cone` ([`cone_loss`], the paper's Eq. 3)
//!   draws every instance into the entailment cone of its own relation (`E = φ − γ`, φ the
//!   exterior angle, γ the half-aperture with constant C; not clamped at 0, as in the paper)
//!   and keeps it a margin `m` outside the cones of the other relations
//!   (`1/(N−1)·Σ max(0, m − E)`).
//!   Where this differs from the paper: the paper's `L_align` (Eq. 2) is anchored at the
//!   relations and contrasts them with the support representations only, and its `L_cone`
//!   reads the support representations `u + α·r`; here both losses read the instance
//!   representations `u` of the support *and* the queries (the relation is not mixed in, so
//!   at 1-shot the cone term is not satisfied by construction), and `L_align` is the
//!   symmetric supervised contrastive loss over instances and relations.
//!   [`PohrlConfig::paper_losses`] switches to the paper's points and Eq. 2
//!   ([`relation_alignment`]).
//! - [`Method::PohrlNoCone`]: the same without `L_cone` (λ₂ = 0).
//!
//! Training samples episodes of the meta-training relations ([`train`]); evaluation encodes
//! every test instance once and classifies seeded test episodes ([`evaluate`]). The tiny encoder
//! trains with the method; MiniLM either stays frozen (only the head trains, on cached
//! features) or fine-tunes its last layers at their own learning rate
//! ([`EncoderChoice::MiniLm`], [`TrainSettings::encoder_lr`]).

use std::time::Instant;

use candle_core::{Device, Tensor, D};

use crate::fewshot::{
    accuracy_ci, Accuracy, EncodedRelation, Episode, EpisodeConfig, EpisodeSampler, FewShotEncoder,
};
use crate::hyperbolic::lorentz;
use crate::qlora::Linear;
use crate::train::ops::{cross_entropy, log_softmax, softmax};
use crate::train::{ParamStore, SeededInit, TrainCallback, TrainConfig, Trainer};
use crate::{MlError, Result};

/// A few-shot relation classifier of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Method {
    /// Euclidean prototypical network.
    Proto,
    /// Euclidean prototypes plus relation features.
    ProtoDesc,
    /// PO-HRL without the entailment-cone loss.
    PohrlNoCone,
    /// Full PO-HRL.
    Pohrl,
}

impl Method {
    /// Every method, baselines first.
    pub const ALL: [Method; 4] = [
        Method::Proto,
        Method::ProtoDesc,
        Method::PohrlNoCone,
        Method::Pohrl,
    ];

    /// The command-line name (`proto`, `proto-desc`, `pohrl-no-cone`, `pohrl`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Proto => "proto",
            Method::ProtoDesc => "proto-desc",
            Method::PohrlNoCone => "pohrl-no-cone",
            Method::Pohrl => "pohrl",
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Result<Method> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                MlError::InvalidInput(format!(
                    "unknown method `{s}` (proto, proto-desc, pohrl-no-cone, pohrl)"
                ))
            })
    }

    fn hyperbolic(self) -> bool {
        matches!(self, Method::Pohrl | Method::PohrlNoCone)
    }
}

/// Hyper-parameters of the methods (defaults: the paper's values where it gives them).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PohrlConfig {
    /// Curvature magnitude `c` (fixed), default 1.
    pub c: f64,
    /// Cone constant `C` of the half-aperture `asin(C/(√c‖r‖))`, default 0.2.
    pub cone_k: f64,
    /// Margin `m` of the other-relation cone term, default 0.2.
    pub margin: f64,
    /// Temperature τ, default 0.1: divides the Lorentzian cosines of the alignment (contrastive)
    /// loss and scales the hyperbolic methods' logits `−d_L(q, c)²/τ`. The prototype weights
    /// `softmax(cos_L(s, r))` (the paper's Eq. 5) use no temperature.
    pub tau: f64,
    /// λ₁, weight of the alignment (contrastive) loss, default 1.
    pub lambda_align: f64,
    /// λ₂, weight of the cone loss, default 1.
    pub lambda_cone: f64,
    /// α of `support = instance + α·relation`; `None`: 1 at 1-shot, 0 otherwise.
    pub alpha: Option<f64>,
    /// Width `p` of the projection head, default 128.
    pub proj_dim: usize,
    /// `true`: the alignment and cone losses read the points the paper's Eqs. 2–3 read — the
    /// support representations `u + α·r` only, with `L_align` anchored at the relations
    /// ([`relation_alignment`]); `false` (default): the instance representations `u` of support
    /// and queries, with the symmetric supervised contrastive loss.
    pub paper_losses: bool,
}

impl Default for PohrlConfig {
    fn default() -> Self {
        Self {
            c: 1.0,
            cone_k: 0.2,
            margin: 0.2,
            tau: 0.1,
            lambda_align: 1.0,
            lambda_cone: 1.0,
            alpha: None,
            proj_dim: 128,
            paper_losses: false,
        }
    }
}

/// One episode's projected features.
#[derive(Debug, Clone)]
pub struct EpisodeTensors {
    /// Support `[n, k, p]`.
    pub support: Tensor,
    /// Queries `[m, p]`.
    pub query: Tensor,
    /// Relations `[n, p]`.
    pub relations: Tensor,
}

/// Query logits `[m, n]` of an episode and, when the query labels `[m]` (u32) are given, the
/// method's training loss.
pub fn forward(
    method: Method,
    cfg: &PohrlConfig,
    ep: &EpisodeTensors,
    labels: Option<&[u32]>,
) -> Result<(Tensor, Option<Tensor>)> {
    let (n, k, p) = ep.support.dims3()?;
    if !method.hyperbolic() {
        let mut protos = ep.support.mean(1)?;
        if method == Method::ProtoDesc {
            protos = (protos + &ep.relations)?;
        }
        let diff = ep
            .query
            .unsqueeze(1)?
            .broadcast_sub(&protos.unsqueeze(0)?)?;
        let logits = diff.sqr()?.sum(D::Minus1)?.neg()?;
        let loss = match labels {
            Some(l) => Some(cross_entropy(&logits, &Tensor::new(l, &Device::Cpu)?)?),
            None => None,
        };
        return Ok((logits, loss));
    }
    let c = cfg.c;
    let scale = 1.0 / (p as f64).sqrt();
    let alpha = cfg.alpha.unwrap_or(if k == 1 { 1.0 } else { 0.0 });
    let mixed = (&ep.support + (ep.relations.unsqueeze(1)? * alpha)?.broadcast_as((n, k, p))?)?;
    let hs = lorentz::expmap0(&(mixed * scale)?, c)?;
    let hq = lorentz::expmap0(&(&ep.query * scale)?, c)?;
    let hr = lorentz::expmap0(&(&ep.relations * scale)?, c)?;
    // Eq. (5) of the paper: ω = softmax(sim(z_rel, z_s)) over the shots, no temperature.
    let w = softmax(&lorentz::cosine(&hs, &hr.unsqueeze(1)?)?)?;
    let protos = lorentz::centroid(&hs, &w, c)?;
    let d = lorentz::distance(&hq.unsqueeze(1)?, &protos.unsqueeze(0)?, c)?;
    let logits = (d.sqr()?.neg()? / cfg.tau)?;
    let Some(labels) = labels else {
        return Ok((logits, None));
    };
    let mut loss = cross_entropy(&logits, &Tensor::new(labels, &Device::Cpu)?)?;
    let mut ys: Vec<u32> = (0..n as u32)
        .flat_map(|c| std::iter::repeat_n(c, k))
        .collect();
    if cfg.paper_losses {
        // The paper's Eqs. 2 and 3: support representations z_s = expmap0((u + α·r)/√p) only.
        let zs = hs.reshape((n * k, p))?;
        if cfg.lambda_align > 0.0 {
            let l = relation_alignment(&hr, &zs, k, cfg.tau)?;
            loss = (loss + (l * cfg.lambda_align)?)?;
        }
        if method == Method::Pohrl && cfg.lambda_cone > 0.0 {
            let l = cone_loss(&hr, &zs, &ys, cfg)?;
            loss = (loss + (l * cfg.lambda_cone)?)?;
        }
        return Ok((logits, Some(loss)));
    }
    // Instances: the support (without the relation mixed in) and the queries.
    let hu = lorentz::expmap0(&(ep.support.reshape((n * k, p))? * scale)?, c)?;
    let inst = Tensor::cat(&[hu, hq], 0)?;
    ys.extend_from_slice(labels);
    if cfg.lambda_align > 0.0 {
        let pts = Tensor::cat(&[inst.clone(), hr.clone()], 0)?;
        let mut all = ys.clone();
        all.extend(0..n as u32);
        let l = supcon(&pts, &all, cfg.tau)?;
        loss = (loss + (l * cfg.lambda_align)?)?;
    }
    if method == Method::Pohrl && cfg.lambda_cone > 0.0 {
        let l = cone_loss(&hr, &inst, &ys, cfg)?;
        loss = (loss + (l * cfg.lambda_cone)?)?;
    }
    Ok((logits, Some(loss)))
}

/// The paper's alignment loss (Eq. 2), averaged over the relations: for each relation `r_i`
/// `[n, p]`, `−log(Σ_k e^{cos_L(r_i, s_ik)/τ} / Σ_j Σ_k e^{cos_L(r_i, s_jk)/τ})` over the support
/// points `[n·k, p]` (class after class, `k` each).
pub fn relation_alignment(rel: &Tensor, support: &Tensor, k: usize, tau: f64) -> Result<Tensor> {
    let n = rel.dim(0)?;
    if k == 0 || support.dim(0)? != n * k {
        return Err(MlError::InvalidInput(format!(
            "relation alignment: {} support points for {n} relations × {k} shots",
            support.dim(0)?
        )));
    }
    let sim = (lorentz::cosine(&rel.unsqueeze(1)?, &support.unsqueeze(0)?)? / tau)?; // [n, n·k]
    let all = log_sum_exp(&sim)?; // [n]
    let own = sim.reshape((n, n, k))?; // [n, j, k]
                                       // Row i's own block: own[i, i, :], row i·(n + 1) of the [n·n, k] view.
    let idx: Vec<u32> = (0..n).map(|i| (i * (n + 1)) as u32).collect();
    let diag = own
        .reshape((n * n, k))?
        .index_select(&Tensor::new(idx, &Device::Cpu)?, 0)?;
    let pos = log_sum_exp(&diag)?;
    Ok((all - pos)?.mean_all()?)
}

/// `log Σ exp` over the last dimension, stable.
fn log_sum_exp(x: &Tensor) -> Result<Tensor> {
    let m = x.max_keepdim(D::Minus1)?.detach();
    Ok((x.broadcast_sub(&m)?.exp()?.sum_keepdim(D::Minus1)?.log()? + m)?.squeeze(D::Minus1)?)
}

/// Supervised contrastive loss over points `[M, p]` with labels: for each anchor, the mean over
/// its positives (same label, not itself) of `−log softmax_j≠i(cos_L(i, j)/τ)`.
fn supcon(pts: &Tensor, labels: &[u32], tau: f64) -> Result<Tensor> {
    let m = labels.len();
    let sim = (lorentz::cosine(&pts.unsqueeze(1)?, &pts.unsqueeze(0)?)? / tau)?;
    let mut self_mask = vec![0f32; m * m];
    let mut pos = vec![0f32; m * m];
    for i in 0..m {
        self_mask[i * m + i] = -1e9;
        let mut count = 0.0;
        for j in 0..m {
            if i != j && labels[i] == labels[j] {
                count += 1.0;
            }
        }
        for j in 0..m {
            if i != j && labels[i] == labels[j] {
                pos[i * m + j] = 1.0 / count;
            }
        }
    }
    let dev = Device::Cpu;
    let lp = log_softmax(&(sim + Tensor::from_vec(self_mask, (m, m), &dev)?)?)?;
    let pos = Tensor::from_vec(pos, (m, m), &dev)?;
    // Self entries hold -1e9·0 after masking by `pos` (0 there).
    let per_anchor = (lp * pos)?.sum(1)?.neg()?;
    Ok(per_anchor.mean_all()?)
}

/// The entailment-cone loss (the paper's Eq. 3) of instances `[M, p]` with labels (`< n`)
/// against relations `[n, p]`, both points of [`lorentz`] with curvature `cfg.c`: with
/// `E(r, x) = φ(r, x) − γ(r)` (exterior angle minus half-aperture with constant `cfg.cone_k`),
/// the mean over instances `x` of `E(r_y, x) + 1/(N−1)·Σ_{c≠y} max(0, m − E(r_c, x))`
/// (`m = cfg.margin`). The own-relation term is not clamped: it is negative inside the cone.
pub fn cone_loss(rel: &Tensor, inst: &Tensor, labels: &[u32], cfg: &PohrlConfig) -> Result<Tensor> {
    let n = rel.dim(0)?;
    let m = labels.len();
    if inst.dim(0)? != m || m == 0 || labels.iter().any(|&y| y as usize >= n) {
        return Err(MlError::InvalidInput(format!(
            "cone loss: {} instances with {m} labels against {n} relations",
            inst.dim(0)?
        )));
    }
    let phi = lorentz::exterior_angle(&rel.unsqueeze(1)?, &inst.unsqueeze(0)?, cfg.c)?;
    let gamma = lorentz::half_aperture(rel, cfg.c, cfg.cone_k)?;
    let viol = phi.broadcast_sub(&gamma.unsqueeze(1)?)?; // [n, M]
    let mut own = vec![0f32; n * m];
    let mut other = vec![0f32; n * m];
    let per_other = 1.0 / (n.saturating_sub(1).max(1) as f32);
    for (i, &y) in labels.iter().enumerate() {
        for c in 0..n {
            if c == y as usize {
                own[c * m + i] = 1.0;
            } else {
                other[c * m + i] = per_other;
            }
        }
    }
    let dev = Device::Cpu;
    let own = Tensor::from_vec(own, (n, m), &dev)?;
    let other = Tensor::from_vec(other, (n, m), &dev)?;
    // Eq. (3): the own-relation term is E = φ − γ itself (not clamped at 0), so instances
    // inside their cone are still drawn towards its axis.
    let inside = (&viol * own)?.sum_all()?;
    let outside = (viol.affine(-1.0, cfg.margin)?.relu()? * other)?.sum_all()?;
    Ok(((inside + outside)? / m as f64)?)
}

/// Instance and relation features of a set of relations, computed once without autograd
/// (evaluation, or training on a frozen encoder).
#[derive(Debug, Clone)]
pub struct FeatureTable {
    /// Every instance, relation after relation, `[total, 2d]`.
    pub instances: Tensor,
    /// Offset of each relation's first instance in `instances`.
    pub offsets: Vec<usize>,
    /// Instances per relation.
    pub sizes: Vec<usize>,
    /// Relation features `[R, 2d]`.
    pub relations: Tensor,
}

impl FeatureTable {
    /// Encodes every instance and relation text of `rels` with `enc` (batches of 64).
    pub fn build(enc: &FewShotEncoder, rels: &[EncodedRelation]) -> Result<Self> {
        let all: Vec<_> = rels.iter().flat_map(|r| r.instances.iter()).collect();
        if all.is_empty() {
            return Err(MlError::InvalidInput("no instances to encode".into()));
        }
        let instances = enc.instance_features_eval(&all, 64)?;
        let texts: Vec<&[u32]> = rels.iter().map(|r| r.text.as_slice()).collect();
        let relations = enc.relation_features(&texts, false)?;
        let sizes: Vec<usize> = rels.iter().map(|r| r.instances.len()).collect();
        Self::from_parts(instances, sizes, relations)
    }

    /// [`FeatureTable::build`] through a cache directory for the instance features (the
    /// expensive part): they are read from `<dir>/instances-<hash>.safetensors` when present
    /// (hash: FNV-1a of `weights`, the tokenised instances and the feature width) and written
    /// there otherwise; the relation features (one short text per relation) are always
    /// computed, so the with- and without-description settings share one instance cache.
    /// `weights` identifies the encoder's weights (for MiniLM,
    /// [`FewShotEncoder::minilm_fingerprint`]): features another set of weights computed are
    /// never read back. Without `dir`, builds.
    pub fn cached(
        enc: &FewShotEncoder,
        rels: &[EncodedRelation],
        dir: Option<&std::path::Path>,
        weights: &str,
    ) -> Result<Self> {
        let Some(dir) = dir else {
            return Self::build(enc, rels);
        };
        let path = dir.join(format!(
            "instances-{:016x}.safetensors",
            instance_hash(rels, enc.feature_dim(), weights)
        ));
        let sizes: Vec<usize> = rels.iter().map(|r| r.instances.len()).collect();
        let texts: Vec<&[u32]> = rels.iter().map(|r| r.text.as_slice()).collect();
        if path.is_file() {
            let map = crate::train::params::read_checkpoint(&path, &Device::Cpu)?;
            let instances =
                map.get("instances")
                    .cloned()
                    .ok_or_else(|| MlError::MissingTensor {
                        path: path.clone(),
                        name: "instances".into(),
                    })?;
            let relations = enc.relation_features(&texts, false)?;
            return Self::from_parts(instances, sizes, relations);
        }
        let table = Self::build(enc, rels)?;
        std::fs::create_dir_all(dir).map_err(|e| MlError::io(dir, e))?;
        let map: std::collections::HashMap<String, Tensor> =
            [("instances".to_string(), table.instances.clone())].into();
        // Atomic: a crash never leaves a partial cache file to be read back.
        crate::train::params::write_atomically(
            &path,
            crate::train::params::Publish::Replace,
            |tmp| crate::train::params::save_tensors(&map, tmp),
        )?;
        Ok(table)
    }

    fn from_parts(instances: Tensor, sizes: Vec<usize>, relations: Tensor) -> Result<Self> {
        let total: usize = sizes.iter().sum();
        if instances.dim(0)? != total || relations.dim(0)? != sizes.len() {
            return Err(MlError::InvalidInput(format!(
                "feature table of {} instances and {} relations for {total} and {}",
                instances.dim(0)?,
                relations.dim(0)?,
                sizes.len()
            )));
        }
        let offsets = sizes
            .iter()
            .scan(0, |acc, &s| {
                let o = *acc;
                *acc += s;
                Some(o)
            })
            .collect();
        Ok(Self {
            instances: instances.contiguous()?,
            offsets,
            sizes,
            relations: relations.contiguous()?,
        })
    }

    fn gather(&self, ep: &Episode) -> Result<(Tensor, Tensor, Tensor)> {
        let flat = |sets: &[Vec<usize>]| -> Vec<u32> {
            ep.classes
                .iter()
                .zip(sets)
                .flat_map(|(&c, idx)| idx.iter().map(move |&i| (self.offsets[c] + i) as u32))
                .collect()
        };
        let dev = Device::Cpu;
        let s = self
            .instances
            .index_select(&Tensor::new(flat(&ep.support), &dev)?, 0)?;
        let q = self
            .instances
            .index_select(&Tensor::new(flat(&ep.query), &dev)?, 0)?;
        let cls: Vec<u32> = ep.classes.iter().map(|&c| c as u32).collect();
        let r = self.relations.index_select(&Tensor::new(cls, &dev)?, 0)?;
        Ok((s, q, r))
    }
}

/// FNV-1a, 64 bits, fed with length-prefixed words (cache keys and checkpoint identities).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn eat(&mut self, x: u64) {
        for b in x.to_le_bytes() {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }

    fn eat_str(&mut self, s: &str) {
        self.eat(s.len() as u64);
        for b in s.bytes() {
            self.eat(b as u64);
        }
    }
}

/// FNV-1a over the encoder's weights identity, the tokenised instances (ids, marker positions)
/// and the feature width.
pub fn instance_hash(rels: &[EncodedRelation], width: usize, weights: &str) -> u64 {
    let mut h = Fnv::new();
    h.eat_str(weights);
    h.eat(width as u64);
    for r in rels {
        h.eat(r.instances.len() as u64);
        for e in &r.instances {
            h.eat(e.ids.len() as u64);
            e.ids.iter().for_each(|&t| h.eat(t as u64));
            h.eat(e.head as u64);
            h.eat(e.tail as u64);
        }
    }
    h.0
}

/// Query labels of an episode: class `i` for each of its queries.
fn query_labels(ep: &Episode) -> Vec<u32> {
    ep.query
        .iter()
        .enumerate()
        .flat_map(|(i, q)| std::iter::repeat_n(i as u32, q.len()))
        .collect()
}

/// A trained model: the projection head (and, for the tiny encoder, the encoder's trained
/// weights, shared with the encoder the caller passed).
#[derive(Debug)]
pub struct FewShotModel {
    /// The method.
    pub method: Method,
    /// Its hyper-parameters.
    pub cfg: PohrlConfig,
    head: Linear,
    /// Optimiser steps taken.
    pub steps: usize,
    /// Training loss per step.
    pub losses: Vec<f32>,
    /// Wall-clock seconds of training (encoder caching excluded).
    pub train_seconds: f64,
}

/// How to train.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TrainSettings {
    /// Training episodes (one optimiser step each).
    pub steps: usize,
    /// AdamW learning rate (10 % linear warm-up), default 1e-3.
    pub lr: f64,
    /// Shape of training episodes.
    pub episode: EpisodeConfig,
    /// Seed of the head initialisation and of the training episodes.
    pub seed: u64,
    /// Learning rate of the encoder's trainable weights (every parameter but the head);
    /// `None`: `lr`. A pretrained encoder fine-tunes at a small fraction of the new head's rate.
    pub encoder_lr: Option<f64>,
}

/// Trains `method` on the meta-training relations. With a tiny encoder (its parameters in
/// `store`) every step encodes the episode's sentences and trains encoder and head; with a
/// frozen one, `frozen` must hold the cached features of `train` and only the head trains.
///
/// Errors: [`MlError::InvalidInput`] beyond [`MAX_TRAIN_STEPS`] steps, for a frozen encoder
/// without `frozen`, or for an episode shape the training relations cannot fill.
#[allow(clippy::too_many_arguments)]
pub fn train(
    method: Method,
    cfg: &PohrlConfig,
    settings: &TrainSettings,
    enc: &FewShotEncoder,
    store: &mut ParamStore,
    train: &[EncodedRelation],
    frozen: Option<&FeatureTable>,
    cb: &mut dyn TrainCallback,
) -> Result<FewShotModel> {
    if !enc.fine_tuned() && frozen.is_none() {
        return Err(MlError::InvalidInput(
            "a frozen encoder trains on cached features; pass the feature table".into(),
        ));
    }
    check_counts(0, settings.steps)?;
    let head = new_head(cfg, enc, store, settings.seed)?;
    let sizes: Vec<usize> = train.iter().map(|r| r.instances.len()).collect();
    let ids: Vec<String> = (0..train.len())
        .map(|i| format!("train relation #{i}"))
        .collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut sampler = EpisodeSampler::new(&sizes, &id_refs, settings.episode, settings.seed)?;
    let tcfg = TrainConfig {
        lr: settings.lr,
        warmup_steps: settings.steps / 10,
        max_steps: settings.steps,
        steps_per_epoch: settings.steps.max(1),
        grad_clip: Some(1.0),
        restore_best: false,
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(tcfg, store)?;
    if let Some(elr) = settings.encoder_lr {
        if !(elr.is_finite() && elr >= 0.0 && settings.lr > 0.0) {
            return Err(MlError::InvalidInput(format!(
                "encoder learning rate {elr} with head learning rate {}",
                settings.lr
            )));
        }
        trainer.scale_lr(elr / settings.lr, |name| !name.starts_with("fewshot.head"))?;
    }
    let (n, k) = (settings.episode.n, settings.episode.k);
    let rep = trainer.fit(
        store,
        &mut |_| {
            let ep = sampler.sample();
            let (s, q, r) = match frozen {
                Some(table) => table.gather(&ep)?,
                None => live_features(enc, train, &ep)?,
            };
            let t = EpisodeTensors {
                support: head.forward(&s, true)?.reshape((n, k, cfg.proj_dim))?,
                query: head.forward(&q, true)?,
                relations: head.forward(&r, true)?,
            };
            let labels = query_labels(&ep);
            let (_, loss) = forward(method, cfg, &t, Some(&labels))?;
            loss.ok_or_else(|| MlError::InvalidInput("no loss without labels".into()))
        },
        None,
        cb,
    )?;
    Ok(FewShotModel {
        method,
        cfg: *cfg,
        head,
        steps: rep.steps,
        losses: rep.losses,
        train_seconds: rep.seconds,
    })
}

/// The projection head `2d → p`, weights `N(0, 1/(2d))`, registered in `store`.
fn new_head(
    cfg: &PohrlConfig,
    enc: &FewShotEncoder,
    store: &mut ParamStore,
    seed: u64,
) -> Result<Linear> {
    let mut init = SeededInit::new(seed ^ 0x9e37_79b9);
    let f = enc.feature_dim();
    let std = (1.0 / f as f64).sqrt() as f32;
    Linear::new("fewshot.head", f, cfg.proj_dim, std, store, &mut init)
}

/// Encodes one episode with autograd (tiny encoder training).
fn live_features(
    enc: &FewShotEncoder,
    rels: &[EncodedRelation],
    ep: &Episode,
) -> Result<(Tensor, Tensor, Tensor)> {
    let pick = |sets: &[Vec<usize>]| -> Vec<&crate::data::RelationExample> {
        ep.classes
            .iter()
            .zip(sets)
            .flat_map(|(&c, idx)| idx.iter().map(move |&i| &rels[c].instances[i]))
            .collect()
    };
    let s = pick(&ep.support);
    let q = pick(&ep.query);
    let ns = s.len();
    let both: Vec<_> = s.into_iter().chain(q).collect();
    let feats = enc.instance_features(&both, true)?;
    let texts: Vec<&[u32]> = ep
        .classes
        .iter()
        .map(|&c| rels[c].text.as_slice())
        .collect();
    let r = enc.relation_features(&texts, true)?;
    Ok((
        feats.narrow(0, 0, ns)?,
        feats.narrow(0, ns, both.len() - ns)?,
        r,
    ))
}

/// The most test episodes [`evaluate`] and [`run_benchmark`] accept per method and shape,
/// 10⁶ (the paper's tables use 10⁴; the 95 % interval is then about ±0.1 point).
pub const MAX_EPISODES: usize = 1_000_000;

/// The most training episodes (optimiser steps) [`train`] and [`run_benchmark`] accept,
/// 10⁷ (the paper trains for 3·10⁴).
pub const MAX_TRAIN_STEPS: usize = 10_000_000;

/// [`MlError::InvalidInput`] unless `episodes` test episodes and `steps` training steps are
/// within [`MAX_EPISODES`] and [`MAX_TRAIN_STEPS`]: the check [`train`], [`evaluate`] and
/// [`run_benchmark`] make, for a caller that wants it before it loads any data.
///
/// ```
/// use ml_models::hyperbolic::pohrl::{check_counts, MAX_EPISODES};
/// assert!(check_counts(MAX_EPISODES, 30_000).is_ok());
/// assert!(check_counts(MAX_EPISODES + 1, 30_000).is_err());
/// ```
pub fn check_counts(episodes: usize, steps: usize) -> Result<()> {
    if episodes > MAX_EPISODES {
        return Err(MlError::InvalidInput(format!(
            "{episodes} test episodes, more than the {MAX_EPISODES} allowed"
        )));
    }
    if steps > MAX_TRAIN_STEPS {
        return Err(MlError::InvalidInput(format!(
            "{steps} training steps, more than the {MAX_TRAIN_STEPS} allowed"
        )));
    }
    Ok(())
}

/// Outcome of [`evaluate`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EvalReport {
    /// Accuracy over the episodes with its 95 % confidence interval.
    pub accuracy: Accuracy,
    /// Seconds spent classifying the episodes (features already cached).
    pub seconds: f64,
}

/// Accuracy of `model` on `episodes` seeded test episodes of shape `cfg` drawn from the
/// relations of `table` (features of the trained encoder, see [`FeatureTable::build`]).
///
/// Errors: [`MlError::InvalidInput`] beyond [`MAX_EPISODES`] episodes or for a shape the
/// relations cannot fill.
pub fn evaluate(
    model: &FewShotModel,
    table: &FeatureTable,
    cfg: EpisodeConfig,
    episodes: usize,
    seed: u64,
) -> Result<EvalReport> {
    let ids: Vec<String> = (0..table.sizes.len())
        .map(|i| format!("test relation #{i}"))
        .collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    check_counts(episodes, 0)?;
    let mut sampler = EpisodeSampler::new(&table.sizes, &id_refs, cfg, seed)?;
    let head = model.head.detached();
    let start = Instant::now();
    let mut accs = Vec::with_capacity(episodes);
    for _ in 0..episodes {
        let ep = sampler.sample();
        let (s, q, r) = table.gather(&ep)?;
        let t = EpisodeTensors {
            support: head
                .forward(&s, false)?
                .reshape((cfg.n, cfg.k, model.cfg.proj_dim))?,
            query: head.forward(&q, false)?,
            relations: head.forward(&r, false)?,
        };
        let (logits, _) = forward(model.method, &model.cfg, &t, None)?;
        let pred = logits.argmax(D::Minus1)?.to_vec1::<u32>()?;
        let labels = query_labels(&ep);
        let hits = pred.iter().zip(&labels).filter(|(a, b)| a == b).count();
        accs.push(hits as f64 / labels.len() as f64);
    }
    Ok(EvalReport {
        accuracy: accuracy_ci(&accs),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// A model that never trained (the head at its initial values), for chance-level checks and
/// encoder-only baselines.
pub fn untrained(
    method: Method,
    cfg: &PohrlConfig,
    enc: &FewShotEncoder,
    seed: u64,
) -> Result<FewShotModel> {
    let head = new_head(cfg, enc, &mut ParamStore::new(), seed)?;
    Ok(FewShotModel {
        method,
        cfg: *cfg,
        head,
        steps: 0,
        losses: Vec::new(),
        train_seconds: 0.0,
    })
}

/// Which encoder a benchmark uses.
#[derive(Debug, Clone)]
pub enum EncoderChoice {
    /// The tiny encoder trained from scratch with each method; `Some(shape)` overrides
    /// [`crate::fewshot::tiny_bert`].
    Tiny(Option<fn(usize) -> crate::models::BertConfig>),
    /// All-MiniLM-L6-v2 from `dir` (`scripts/fetch-minilm`). Frozen (`fine_tune_layers = 0`):
    /// its features are cached in `cache` (a directory, created if needed) when given, keyed
    /// by a hash of the tokenised input, so reruns skip the encoder, and only the head trains.
    /// Otherwise its last `fine_tune_layers` layers train with each method (every step encodes
    /// the episode; the test set is encoded again after training, no cache).
    MiniLm {
        /// The model directory.
        dir: std::path::PathBuf,
        /// The feature-cache directory (frozen encoder only).
        cache: Option<std::path::PathBuf>,
        /// Transformer layers fine-tuned from the top (0: frozen).
        fine_tune_layers: usize,
    },
}

/// Trained models on disk, one safetensors file per trained model: the head, the tiny
/// encoder's or the fine-tuned MiniLM layers' weights, and the model's training identity —
/// every option of the [`BenchmarkConfig`] that changes training (encoder and fine-tuned
/// layers, method, episode shape, steps, learning rates, descriptions, seed, [`PohrlConfig`]
/// including `paper_losses`, instance cap), a fingerprint of the training relations and, for
/// MiniLM, one of the pretrained files it loads (sizes and CRC-32s,
/// [`FewShotEncoder::minilm_fingerprint`]: other weights give another identity), as JSON in
/// the tensor `fewshot.identity`. The file is
/// `<dir>/<tiny|minilm|minilm-ftN>-<method>-<N>x<K>-<hash>.safetensors`, `<hash>` the FNV-1a
/// of the identity, so runs with different options never share a file; loading refuses a file
/// whose stored identity differs from the run's (a renamed file, or one written before
/// checkpoints carried their identity) with [`MlError::CheckpointMismatch`] naming the
/// differing options. A missing file is an [`MlError::Io`] of kind `NotFound` naming the
/// expected path, or a [`MlError::CheckpointMismatch`] naming it when a readable file of the
/// same encoder, method and shape says which options differ. Files are written atomically
/// and never replace one that exists ([`ParamStore::save_new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkpoints {
    /// Write every trained model into this directory.
    Save(std::path::PathBuf),
    /// Skip training: read every model from this directory (typed errors when a file is
    /// missing or does not fit the model).
    Load(std::path::PathBuf),
}

/// A benchmark: methods × episode shapes on one split.
#[derive(Debug, Clone)]
pub struct BenchmarkConfig {
    /// The encoder.
    pub encoder: EncoderChoice,
    /// Methods to train and evaluate.
    pub methods: Vec<Method>,
    /// Episode shapes (N, K, Q); training uses the same shape.
    pub shapes: Vec<EpisodeConfig>,
    /// Test episodes per method and shape.
    pub episodes: usize,
    /// Training episodes (optimiser steps) per method and shape.
    pub train_steps: usize,
    /// Learning rate.
    pub lr: f64,
    /// Learning rate of the encoder's trainable weights (see [`TrainSettings::encoder_lr`]).
    pub encoder_lr: Option<f64>,
    /// Relation texts with descriptions (`false`: names only).
    pub descriptions: bool,
    /// Seed of initialisation, training and test episodes.
    pub seed: u64,
    /// Method hyper-parameters.
    pub pohrl: PohrlConfig,
    /// Use at most this many instances of each training relation (the first in file order;
    /// `None`: all).
    pub max_train_instances: Option<usize>,
    /// Use at most this many instances of each test relation (`None`: all).
    pub max_test_instances: Option<usize>,
    /// Save trained models, or load them instead of training.
    pub checkpoints: Option<Checkpoints>,
}

/// One cell of a benchmark.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchmarkRow {
    /// Method name.
    pub method: &'static str,
    /// Episode shape.
    pub shape: EpisodeConfig,
    /// Test accuracy with its 95 % interval.
    pub accuracy: Accuracy,
    /// Optimiser steps.
    pub train_steps: usize,
    /// Seconds of training.
    pub train_seconds: f64,
    /// Seconds to encode the test instances with the trained encoder (0 when shared and
    /// cached, see [`BenchmarkReport::cache_seconds`]).
    pub encode_seconds: f64,
    /// Seconds to classify the test episodes.
    pub eval_seconds: f64,
    /// Whether the encoder trained with the method (tiny, MiniLM with fine-tuned layers) or
    /// stayed frozen (MiniLM).
    pub fine_tuned_encoder: bool,
    /// Mean training loss over the last 10 % of the steps.
    pub final_loss: f32,
}

/// Outcome of [`run_benchmark`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchmarkReport {
    /// One row per method × shape.
    pub rows: Vec<BenchmarkRow>,
    /// Seconds spent caching the frozen encoder's features of train and test instances (0 for
    /// the tiny encoder).
    pub cache_seconds: f64,
    /// Training and test relations.
    pub relations: (usize, usize),
}

/// Tensor holding a checkpoint's training identity (UTF-8 JSON as u8).
const IDENTITY_KEY: &str = "fewshot.identity";

/// Everything a trained model of [`run_benchmark`] depends on (see [`Checkpoints`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct CheckpointIdentity {
    encoder: String,
    method: &'static str,
    shape: EpisodeConfig,
    train_steps: usize,
    lr: f64,
    encoder_lr: Option<f64>,
    descriptions: bool,
    seed: u64,
    pohrl: PohrlConfig,
    max_train_instances: Option<usize>,
    /// FNV-1a of the (capped) training relations: ids, the relation texts used, tokens and
    /// entity positions, as 16 hex digits.
    train_data: String,
    /// The pretrained encoder's files ([`FewShotEncoder::minilm_fingerprint`]); absent for the
    /// tiny encoder (so its identities, hence file names, are as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    encoder_files: Option<String>,
}

impl CheckpointIdentity {
    fn new(
        cfg: &BenchmarkConfig,
        method: Method,
        shape: EpisodeConfig,
        train_data: u64,
        encoder_files: Option<&str>,
    ) -> Self {
        let encoder = match &cfg.encoder {
            EncoderChoice::Tiny(None) => "tiny".to_string(),
            EncoderChoice::Tiny(Some(f)) => {
                let b = f(0);
                format!(
                    "tiny(hidden {}, layers {}, heads {}, mlp {}, positions {})",
                    b.hidden_size,
                    b.num_hidden_layers,
                    b.num_attention_heads,
                    b.intermediate_size,
                    b.max_position_embeddings
                )
            }
            EncoderChoice::MiniLm {
                fine_tune_layers, ..
            } => format!("minilm, {fine_tune_layers} layers fine-tuned"),
        };
        Self {
            encoder,
            method: method.name(),
            shape,
            train_steps: cfg.train_steps,
            lr: cfg.lr,
            encoder_lr: cfg.encoder_lr,
            descriptions: cfg.descriptions,
            seed: cfg.seed,
            pohrl: cfg.pohrl,
            max_train_instances: cfg.max_train_instances,
            train_data: format!("{train_data:016x}"),
            encoder_files: encoder_files.map(str::to_string),
        }
    }

    fn json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| MlError::InvalidInput(e.to_string()))
    }

    /// `<encoder>-<method>-<N>x<K>`, the readable part of the file name.
    fn prefix(encoder: &EncoderChoice, method: Method, shape: EpisodeConfig) -> String {
        let encoder = match encoder {
            EncoderChoice::Tiny(_) => "tiny".to_string(),
            EncoderChoice::MiniLm {
                fine_tune_layers: 0,
                ..
            } => "minilm".to_string(),
            EncoderChoice::MiniLm {
                fine_tune_layers, ..
            } => format!("minilm-ft{fine_tune_layers}"),
        };
        format!("{encoder}-{}-{}x{}", method.name(), shape.n, shape.k)
    }

    /// The checkpoint file name: the readable prefix and the hash of the identity.
    fn file(&self, cfg: &BenchmarkConfig, method: Method) -> Result<String> {
        let mut h = Fnv::new();
        h.eat_str(&self.json()?);
        Ok(format!(
            "{}-{:016x}.safetensors",
            Self::prefix(&cfg.encoder, method, self.shape),
            h.0
        ))
    }
}

/// FNV-1a of the training relations as a model sees them (see [`CheckpointIdentity`]).
fn training_fingerprint(rels: &[crate::fewshot::RelationSet], descriptions: bool) -> u64 {
    let mut h = Fnv::new();
    h.eat(rels.len() as u64);
    for r in rels {
        h.eat_str(&r.id);
        h.eat_str(&r.text(descriptions));
        h.eat(r.instances.len() as u64);
        for inst in &r.instances {
            h.eat(inst.tokens.len() as u64);
            inst.tokens.iter().for_each(|t| h.eat_str(t));
            for e in [&inst.h, &inst.t] {
                h.eat_str(&e.0);
                h.eat(e.2.len() as u64);
                for occ in &e.2 {
                    h.eat(occ.len() as u64);
                    occ.iter().for_each(|&p| h.eat(p as u64));
                }
            }
        }
    }
    h.0
}

/// The stored identity of a checkpoint file, if it has one.
fn stored_identity(path: &std::path::Path) -> Result<Option<serde_json::Value>> {
    let map = crate::train::params::read_checkpoint(path, &Device::Cpu)?;
    let Some(t) = map.get(IDENTITY_KEY) else {
        return Ok(None);
    };
    let bytes = t.flatten_all()?.to_vec1::<u8>()?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| MlError::CorruptCheckpoint {
            path: path.to_path_buf(),
            reason: format!("`{IDENTITY_KEY}` is not JSON: {e}"),
        })
}

/// Which options of `want` differ in `found` (top-level fields, then `pohrl.<field>`).
fn identity_diff(want: &serde_json::Value, found: &serde_json::Value) -> Vec<String> {
    let (Some(w), Some(f)) = (want.as_object(), found.as_object()) else {
        return vec!["(not an object)".into()];
    };
    let mut out = Vec::new();
    for (k, wv) in w {
        match (wv.as_object(), f.get(k)) {
            (Some(_), Some(fv)) if fv.is_object() => out.extend(
                identity_diff(wv, fv)
                    .into_iter()
                    .map(|d| format!("{k}.{d}")),
            ),
            (_, Some(fv)) if fv == wv => {}
            (_, Some(fv)) => out.push(format!("{k} ({fv} there, {wv} here)")),
            (_, None) => out.push(format!("{k} (absent there)")),
        }
    }
    out
}

/// Loads the checkpoint of `identity` from `dir` into `store` after checking that the file
/// was written by the same training options.
fn load_checkpoint(
    store: &ParamStore,
    dir: &std::path::Path,
    file: &str,
    prefix: &str,
    identity: &CheckpointIdentity,
) -> Result<()> {
    let want: serde_json::Value = serde_json::from_str(&identity.json()?)
        .map_err(|e| MlError::InvalidInput(e.to_string()))?;
    let path = dir.join(file);
    let mismatch = |path: &std::path::Path, found: Option<serde_json::Value>| {
        let why = match found {
            None => "it records no training options (written before checkpoints carried \
                     them); train again"
                .to_string(),
            Some(v) => format!(
                "trained with other options: {}",
                identity_diff(&want, &v).join(", ")
            ),
        };
        MlError::CheckpointMismatch {
            path: path.to_path_buf(),
            reason: why,
        }
    };
    if !path.is_file() {
        // Say why: a checkpoint of the same encoder, method and shape with other options.
        // (An unreadable or absent directory has none: the error names the expected file.)
        let mut others: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.ends_with(".safetensors")
                        && (n.starts_with(&format!("{prefix}-"))
                            || n.starts_with(&format!("{prefix}.")))
                })
            })
            .collect();
        others.sort();
        // The first sibling whose options can be read says why; one that cannot be read is
        // not this run's problem (the run's own file is what is missing).
        let mut unreadable = Vec::new();
        for other in &others {
            match stored_identity(other) {
                Ok(found) => {
                    let e = mismatch(other, found);
                    return Err(MlError::CheckpointMismatch {
                        path,
                        reason: format!("not found; {e}"),
                    });
                }
                Err(e) => unreadable.push(format!("{} is unreadable ({e})", other.display())),
            }
        }
        let mut why = "no checkpoint of this name".to_string();
        if !unreadable.is_empty() {
            why = format!("{why}; {}", unreadable.join("; "));
        }
        return Err(MlError::io(
            &path,
            std::io::Error::new(std::io::ErrorKind::NotFound, why),
        ));
    }
    match stored_identity(&path)? {
        Some(found) if found == want => {
            store.load(&path)?;
            Ok(())
        }
        found => Err(mismatch(&path, found)),
    }
}

/// Saves `store` with `identity` as `dir/file`; never replaces an existing file, and never
/// leaves a partial file under that name ([`ParamStore::save_new`]).
fn save_checkpoint(
    store: &ParamStore,
    dir: &std::path::Path,
    file: &str,
    identity: &CheckpointIdentity,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| MlError::io(dir, e))?;
    let path = dir.join(file);
    let id = Tensor::new(identity.json()?.as_bytes(), &Device::Cpu)?;
    // A file that appeared since the check before training (another run writing into the same
    // directory) is not replaced.
    store
        .save_new(&path, &[(IDENTITY_KEY.to_string(), id)])
        .map_err(|e| match e {
            MlError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
                MlError::InvalidInput(format!(
                    "{} exists; choose another checkpoint directory or remove it",
                    path.display()
                ))
            }
            other => other,
        })
}

/// Trains and evaluates every method × shape of `cfg` on `split`; `phase` hears what starts
/// next, `cb` sees every training step.
pub fn run_benchmark(
    split: &crate::fewshot::MetaSplit,
    cfg: &BenchmarkConfig,
    phase: &mut dyn FnMut(&str),
    cb: &mut dyn TrainCallback,
) -> Result<BenchmarkReport> {
    split.check_disjoint()?;
    if cfg.episodes == 0 {
        // An accuracy over no episodes is NaN, not a result.
        return Err(MlError::InvalidInput(
            "at least one test episode is needed (episodes = 0)".into(),
        ));
    }
    check_counts(cfg.episodes, cfg.train_steps)?;
    // A method or shape listed twice would train the same cell twice (and, saving checkpoints,
    // fail on the second save after all that training).
    for (i, m) in cfg.methods.iter().enumerate() {
        if cfg.methods[..i].contains(m) {
            return Err(MlError::InvalidInput(format!(
                "method {m:?} is listed twice"
            )));
        }
    }
    for (i, s) in cfg.shapes.iter().enumerate() {
        if cfg.shapes[..i].contains(s) {
            return Err(MlError::InvalidInput(format!(
                "episode shape {}-way {}-shot is listed twice",
                s.n, s.k
            )));
        }
    }
    let cap = |rels: &[crate::fewshot::RelationSet], max: Option<usize>| {
        let mut rels = rels.to_vec();
        for r in &mut rels {
            r.instances.truncate(max.unwrap_or(usize::MAX));
        }
        rels
    };
    let split = &crate::fewshot::MetaSplit {
        train: cap(&split.train, cfg.max_train_instances),
        test: cap(&split.test, cfg.max_test_instances),
    };
    let train_data = training_fingerprint(&split.train, cfg.descriptions);
    // The pretrained weights are part of a checkpoint's identity (read only when checkpoints
    // are used: the whole files are read once).
    let encoder_files = match (&cfg.encoder, &cfg.checkpoints) {
        (EncoderChoice::MiniLm { dir, .. }, Some(_)) => {
            phase("fingerprinting the all-MiniLM-L6-v2 files");
            Some(FewShotEncoder::minilm_fingerprint(dir)?)
        }
        _ => None,
    };
    let identity = |method: Method, shape: EpisodeConfig| -> Result<(CheckpointIdentity, String)> {
        let id = CheckpointIdentity::new(cfg, method, shape, train_data, encoder_files.as_deref());
        let file = id.file(cfg, method)?;
        Ok((id, file))
    };
    // Never replace a file in the checkpoint directory: found before any training.
    if let Some(Checkpoints::Save(dir)) = &cfg.checkpoints {
        for &shape in &cfg.shapes {
            for &method in &cfg.methods {
                let path = dir.join(identity(method, shape)?.1);
                if path.exists() {
                    return Err(MlError::InvalidInput(format!(
                        "{} exists (a model trained with the same options); choose another \
                         checkpoint directory or remove it",
                        path.display()
                    )));
                }
            }
        }
    }
    // Every shape must fit both sides before anything trains.
    for &shape in &cfg.shapes {
        for (side, rels) in [("training", &split.train), ("test", &split.test)] {
            let sizes: Vec<usize> = rels.iter().map(|r| r.instances.len()).collect();
            let ids: Vec<&str> = rels.iter().map(|r| r.id.as_str()).collect();
            EpisodeSampler::new(&sizes, &ids, shape, 0).map_err(|e| match e {
                MlError::InvalidInput(m) => MlError::InvalidInput(format!("{side} set: {m}")),
                other => other,
            })?;
        }
    }
    let mut rows = Vec::new();
    let mut cache_seconds = 0.0;
    let frozen = match &cfg.encoder {
        EncoderChoice::MiniLm {
            dir,
            cache,
            fine_tune_layers: 0,
        } => {
            phase("loading all-MiniLM-L6-v2");
            let enc = FewShotEncoder::minilm(dir)?;
            let start = Instant::now();
            // Cached features belong to the weights that computed them.
            let weights = match (&encoder_files, cache) {
                (Some(files), _) => files.clone(),
                (None, Some(_)) => FewShotEncoder::minilm_fingerprint(dir)?,
                (None, None) => String::new(),
            };
            phase("MiniLM features of the training relations");
            let train_rels = enc.encode(&split.train, cfg.descriptions)?;
            let train_table = FeatureTable::cached(&enc, &train_rels, cache.as_deref(), &weights)?;
            phase("MiniLM features of the test relations");
            let test_rels = enc.encode(&split.test, cfg.descriptions)?;
            let test_table = FeatureTable::cached(&enc, &test_rels, cache.as_deref(), &weights)?;
            cache_seconds = start.elapsed().as_secs_f64();
            Some((enc, train_rels, train_table, test_table))
        }
        _ => None,
    };
    for &shape in &cfg.shapes {
        for &method in &cfg.methods {
            let (id, file) = identity(method, shape)?;
            let loading = matches!(cfg.checkpoints, Some(Checkpoints::Load(_)));
            // Loads the trained model, or saves it when asked to.
            let checkpoint = |store: &ParamStore| -> Result<()> {
                match &cfg.checkpoints {
                    Some(Checkpoints::Load(dir)) => load_checkpoint(
                        store,
                        dir,
                        &file,
                        &CheckpointIdentity::prefix(&cfg.encoder, method, shape),
                        &id,
                    ),
                    Some(Checkpoints::Save(dir)) => save_checkpoint(store, dir, &file, &id),
                    None => Ok(()),
                }
            };
            let settings = TrainSettings {
                steps: if loading { 0 } else { cfg.train_steps },
                lr: cfg.lr,
                episode: shape,
                seed: cfg.seed,
                encoder_lr: cfg.encoder_lr,
            };
            let mut store = ParamStore::new();
            phase(&format!(
                "{} {}-way {}-shot: training",
                method.name(),
                shape.n,
                shape.k
            ));
            let (model, encode_seconds, eval) = match &frozen {
                Some((enc, train_rels, train_table, test_table)) => {
                    let model = train(
                        method,
                        &cfg.pohrl,
                        &settings,
                        enc,
                        &mut store,
                        train_rels,
                        Some(train_table),
                        cb,
                    )?;
                    checkpoint(&store)?;
                    phase(&format!(
                        "{} {}-way {}-shot: testing",
                        method.name(),
                        shape.n,
                        shape.k
                    ));
                    let eval =
                        evaluate(&model, test_table, shape, cfg.episodes, cfg.seed ^ 0x7e57)?;
                    (model, 0.0, eval)
                }
                None => {
                    let enc = match &cfg.encoder {
                        EncoderChoice::Tiny(shape) => {
                            let mut init = SeededInit::new(cfg.seed);
                            FewShotEncoder::tiny(&split.train, *shape, &mut store, &mut init)?
                        }
                        EncoderChoice::MiniLm {
                            dir,
                            fine_tune_layers,
                            ..
                        } => {
                            phase("loading all-MiniLM-L6-v2");
                            FewShotEncoder::minilm_tuned(dir, *fine_tune_layers, &mut store)?
                        }
                    };
                    let train_rels = enc.encode(&split.train, cfg.descriptions)?;
                    let model = train(
                        method,
                        &cfg.pohrl,
                        &settings,
                        &enc,
                        &mut store,
                        &train_rels,
                        None,
                        cb,
                    )?;
                    checkpoint(&store)?;
                    phase(&format!(
                        "{} {}-way {}-shot: testing",
                        method.name(),
                        shape.n,
                        shape.k
                    ));
                    let start = Instant::now();
                    let test_rels = enc.encode(&split.test, cfg.descriptions)?;
                    let table = FeatureTable::build(&enc, &test_rels)?;
                    let encode_seconds = start.elapsed().as_secs_f64();
                    let eval = evaluate(&model, &table, shape, cfg.episodes, cfg.seed ^ 0x7e57)?;
                    (model, encode_seconds, eval)
                }
            };
            let tail = (model.losses.len() / 10).max(1).min(model.losses.len());
            let final_loss = if tail == 0 {
                f32::NAN
            } else {
                model.losses[model.losses.len() - tail..]
                    .iter()
                    .sum::<f32>()
                    / tail as f32
            };
            rows.push(BenchmarkRow {
                method: method.name(),
                shape,
                accuracy: eval.accuracy,
                train_steps: model.steps,
                train_seconds: model.train_seconds,
                encode_seconds,
                eval_seconds: eval.seconds,
                fine_tuned_encoder: frozen.is_none(),
                final_loss,
            });
        }
    }
    Ok(BenchmarkReport {
        rows,
        cache_seconds,
        relations: (split.train.len(), split.test.len()),
    })
}
