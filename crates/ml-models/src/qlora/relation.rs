//! Supervised relation classification on FewRel (Han et al., EMNLP 2018) with a QLoRA-adapted
//! BERT encoder (all-MiniLM-L6-v2): the "real pretrained model" half of the key-variables study.
//!
//! Instances are marked and encoded by [`crate::data::encode_fewrel`] (typed entity markers,
//! Zhou & Chen, AACL 2022); the encoder states at the two opening markers are concatenated and
//! classified by a trainable linear head. Instances of every relation are shuffled with a seed
//! and split 80/20 into train and test.

use candle_core::{DType, Device, Tensor, Var};
use rand::seq::SliceRandom;

use crate::data::{pad_batch, RelationExample};
use crate::models::bert::{marker_states, Bert};
use crate::qlora::lora::LoraConfig;
use crate::train::ops::{accuracy, cross_entropy};
use crate::train::{ParamStore, SeededInit, TrainCallback, TrainConfig, Trainer};
use crate::{MlError, Result};

/// Settings of a fine-tuning run.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationConfig {
    /// Training instances used per relation (from its 80 % share), default 560 (all).
    pub train_per_class: usize,
    /// Test instances used per relation (from its 20 % share), default 140 (all).
    pub test_per_class: usize,
    /// Passes over the training instances, default 1.
    pub epochs: usize,
    /// Batch size, default 16.
    pub batch_size: usize,
    /// Adapters and base format, default r = 8, α = 16 on all projections over NF4 + DQ.
    pub lora: LoraConfig,
    /// Learning rate of adapters and head (10 % warm-up), default 1e-3.
    pub lr: f64,
    /// Seed of split, shuffling and initialisation, default 0.
    pub seed: u64,
    /// Also measure the test accuracy before training (random head), default `true`.
    pub eval_before: bool,
}

impl Default for RelationConfig {
    fn default() -> Self {
        Self {
            train_per_class: 560,
            test_per_class: 140,
            epochs: 1,
            batch_size: 16,
            lora: LoraConfig::uniform(
                &crate::qlora::LayerKind::ALL,
                8,
                16.0,
                crate::qlora::BaseFormat::Nf4 { double_quant: true },
            ),
            lr: 1e-3,
            seed: 0,
            eval_before: true,
        }
    }
}

/// Outcome of [`fine_tune_relations`].
#[derive(Debug, Clone, PartialEq)]
pub struct RelationReport {
    /// Test accuracy before training (adapters at zero, random head), if measured.
    pub accuracy_before: Option<f32>,
    /// Test accuracy after fine-tuning.
    pub accuracy: f32,
    /// Trainable parameters (adapters + head).
    pub trainable: usize,
    /// Bytes of the encoder's projection weights at storage size.
    pub base_bytes: usize,
    /// Training instances used.
    pub n_train: usize,
    /// Test instances used.
    pub n_test: usize,
    /// Optimiser steps taken.
    pub steps: usize,
    /// Wall-clock seconds of training.
    pub seconds: f64,
    /// Training loss per step.
    pub losses: Vec<f32>,
}

/// The seeded 80/20 split of every relation's instances, cut to the configured sizes.
pub fn split_examples(
    per_class: &[Vec<RelationExample>],
    cfg: &RelationConfig,
) -> (Vec<RelationExample>, Vec<RelationExample>) {
    let mut rng = SeededInit::new(cfg.seed ^ 0x5eed);
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for rel in per_class {
        let mut idx: Vec<usize> = (0..rel.len()).collect();
        idx.shuffle(rng.rng());
        let cut = rel.len() * 4 / 5;
        train.extend(
            idx[..cut]
                .iter()
                .take(cfg.train_per_class)
                .map(|&i| rel[i].clone()),
        );
        test.extend(
            idx[cut..]
                .iter()
                .take(cfg.test_per_class)
                .map(|&i| rel[i].clone()),
        );
    }
    train.shuffle(rng.rng());
    (train, test)
}

/// Encoder + linear head over the two marker states.
#[derive(Debug)]
struct Classifier<'a> {
    bert: &'a Bert,
    w: Var,
    b: Var,
    pad: u32,
    /// `false` in the evaluation view of [`Classifier::accuracy`]: no autograd graph.
    track: bool,
}

impl Classifier<'_> {
    fn logits(&self, batch: &[&RelationExample], train: bool) -> Result<Tensor> {
        let dev = Device::Cpu;
        let seqs: Vec<&[u32]> = batch.iter().map(|e| e.ids.as_slice()).collect();
        let (ids, mask) = pad_batch(&seqs, self.pad, &dev)?;
        let h = self.bert.forward(&ids, &mask, train)?;
        let feat = marker_states(&h, batch)?;
        let (w, b) = (self.w.as_tensor(), self.b.as_tensor());
        let (w, b) = if self.track {
            (w.clone(), b.clone())
        } else {
            (w.detach(), b.detach())
        };
        Ok(feat.matmul(&w.t()?)?.broadcast_add(&b)?)
    }

    /// Accuracy on `data`, evaluated through views that build no autograd graph.
    fn accuracy(&self, data: &[RelationExample]) -> Result<f32> {
        let bert = self.bert.detached();
        let view = Classifier {
            bert: &bert,
            w: self.w.clone(),
            b: self.b.clone(),
            pad: self.pad,
            track: false,
        };
        let mut hits = 0.0f32;
        for chunk in data.chunks(64) {
            let refs: Vec<&RelationExample> = chunk.iter().collect();
            let logits = view.logits(&refs, false)?;
            hits += accuracy(&logits, &labels(&refs)?)? * chunk.len() as f32;
        }
        Ok(hits / data.len().max(1) as f32)
    }
}

fn labels(batch: &[&RelationExample]) -> Result<Tensor> {
    let l: Vec<u32> = batch.iter().map(|e| e.label).collect();
    Ok(Tensor::new(l, &Device::Cpu)?)
}

/// QLoRA fine-tuning of `bert` (modified in place: quantized and adapted per `cfg.lora`) for
/// the relations of `per_class` (from [`encode_fewrel`](crate::data::encode_fewrel)); accuracy on the held-out 20 %.
pub fn fine_tune_relations(
    bert: &mut Bert,
    per_class: &[Vec<RelationExample>],
    pad_id: u32,
    cfg: &RelationConfig,
    cb: &mut dyn TrainCallback,
) -> Result<RelationReport> {
    let (train, test) = split_examples(per_class, cfg);
    if train.is_empty() || test.is_empty() {
        return Err(MlError::InvalidInput("relation split is empty".into()));
    }
    let mut store = ParamStore::new();
    let mut init = SeededInit::new(cfg.seed);
    bert.apply_lora(&cfg.lora, &mut store, &mut init)?;
    let d = bert.config().hidden_size;
    let classes = per_class.len();
    let w = init.normal(&[classes, 2 * d], 0.02, &Device::Cpu)?;
    let clf = Classifier {
        w: store.add("classifier.weight", w, true)?,
        b: store.add(
            "classifier.bias",
            Tensor::zeros(classes, DType::F32, &Device::Cpu)?,
            true,
        )?,
        bert,
        pad: pad_id,
        track: true,
    };
    let accuracy_before = if cfg.eval_before {
        Some(clf.accuracy(&test)?)
    } else {
        None
    };
    let bs = cfg.batch_size.max(1);
    let spe = train.len().div_ceil(bs);
    let steps = spe * cfg.epochs.max(1);
    let tcfg = TrainConfig {
        lr: cfg.lr,
        warmup_steps: steps / 10,
        max_steps: steps,
        steps_per_epoch: spe,
        grad_clip: Some(1.0),
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(tcfg, &store)?;
    let rep = trainer.fit(
        &store,
        &mut |step| {
            let lo = (step % spe) * bs;
            let batch: Vec<&RelationExample> =
                train[lo..(lo + bs).min(train.len())].iter().collect();
            cross_entropy(&clf.logits(&batch, true)?, &labels(&batch)?)
        },
        None,
        cb,
    )?;
    Ok(RelationReport {
        accuracy_before,
        accuracy: clf.accuracy(&test)?,
        trainable: store.count(true),
        base_bytes: clf.bert.linear_base_bytes(),
        n_train: train.len(),
        n_test: test.len(),
        steps: rep.steps,
        seconds: rep.seconds,
        losses: rep.losses,
    })
}
