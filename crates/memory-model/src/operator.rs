//! Operator-level view of a transformer: every operator of one layer and of the embedding/head,
//! with the shapes of the tensors it holds, in named dimensions.
//!
//! The saved activations follow Korthikanti et al., "Reducing Activation Recomputation in Large
//! Transformer Models" (MLSys 2023, arXiv:2205.05198), §4.1: per layer `34·sbh + 5·as²b` bytes
//! with 16-bit activations and dropout (norm inputs `4sbh`, attention `11sbh + 5as²b`, MLP `19sbh`).
//! LayerNorm statistics, rotary tables and random-number state are ignored, as in the paper.

use serde::Serialize;

/// A named tensor dimension; a sharding says how many ways each one is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    /// Micro-batch `b`.
    Batch,
    /// Sequence `s` (query side).
    Seq,
    /// Key side of the `s×s` attention scores (kept whole by sequence/context parallelism).
    KvSeq,
    /// Hidden `h`.
    Hidden,
    /// Query heads `a`.
    Heads,
    /// Key/value heads `g`.
    KvHeads,
    /// Head size `d`.
    HeadDim,
    /// Feed-forward hidden `f` (of one expert in MoE blocks).
    Ffn,
    /// (Padded) vocabulary `V`.
    Vocab,
    /// Routed experts `E`.
    Experts,
    /// Experts per token `k` (routed copies of a token).
    TopK,
    /// Rows of a learned position table (or of a token-type table).
    Positions,
    /// LoRA rank `r`.
    LoraRank,
    /// Output side of a square `h×h` weight (BERT's pooler), so that its two sides are distinct
    /// dimensions that shard independently.
    HiddenOut,
}

impl Dim {
    /// Number of dimensions (length of [`Dim::ALL`]).
    pub const COUNT: usize = 14;
    /// All dimensions, in declaration order (`Dim::ALL[d as usize] == d`).
    pub const ALL: [Dim; Dim::COUNT] = [
        Dim::Batch,
        Dim::Seq,
        Dim::KvSeq,
        Dim::Hidden,
        Dim::Heads,
        Dim::KvHeads,
        Dim::HeadDim,
        Dim::Ffn,
        Dim::Vocab,
        Dim::Experts,
        Dim::TopK,
        Dim::Positions,
        Dim::LoraRank,
        Dim::HiddenOut,
    ];
}

/// A tensor shape: an ordered list of named dimensions with their sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shape(pub Vec<(Dim, u64)>);

impl Shape {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.0.iter().map(|&(_, n)| n).product()
    }

    /// Size of dimension `dim`, if the shape has it.
    pub fn size(&self, dim: Dim) -> Option<u64> {
        self.0.iter().find(|&&(d, _)| d == dim).map(|&(_, n)| n)
    }
}

/// What kind of parameter a tensor is (decides quantization and trainability under PEFT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// Weight matrix of a linear layer inside a transformer layer (quantizable under QLoRA).
    Weight,
    /// Bias or norm vector.
    Vector,
    /// Embedding table or output head (kept in 16 bits under QLoRA, as in the paper).
    Embedding,
    /// LoRA adapter matrix (always trainable).
    Adapter,
}

/// A parameter tensor of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParamTensor {
    /// Name, e.g. `q_weight`.
    pub name: &'static str,
    /// Shape.
    pub shape: Shape,
    /// Kind.
    pub kind: ParamKind,
    /// A copy of a tensor owned by another operator (tied output head on the last pipeline
    /// stage): held and updated, but contributes no unique bytes.
    pub tied_copy: bool,
    /// Input features of a [`ParamKind::Weight`] (rows of the int8 scale vector are
    /// `elements / fan_in`); 0 for other kinds.
    pub fan_in: u64,
}

/// Element type of a saved activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActDtype {
    /// The activation precision of the setup (2 bytes in 16-bit training, 4 in fp32).
    Act,
    /// A 1-byte dropout mask.
    Mask,
    /// Always fp32 (softmax log-sum-exp, router probabilities, logits for the loss).
    Fp32,
    /// 8-byte integers (token ids).
    Int64,
}

/// When a saved activation is kept, by activation-recomputation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SaveClass {
    /// Kept unless the whole layer is recomputed.
    Layer,
    /// Attention-core tensors (`s×s` scores): dropped by selective recomputation too.
    AttentionCore,
    /// A linear layer's input that a pointwise operator (norm or activation function) just
    /// produced from a tensor that stays saved: dropped by pointwise recomputation, which reruns
    /// that operator in the backward pass.
    PointwiseOutput,
    /// The layer input: the only tensor kept by full recomputation (and not counted otherwise,
    /// since it is the first norm's saved input then).
    Checkpoint,
    /// Outside the transformer layers (embedding, head, loss): kept in every mode.
    Always,
}

/// An activation saved for the backward pass, per micro-batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActTensor {
    /// Name, e.g. `softmax_output`.
    pub name: &'static str,
    /// Shape.
    pub shape: Shape,
    /// Element type.
    pub dtype: ActDtype,
    /// Recomputation class.
    pub class: SaveClass,
}

/// Kind of an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Token embedding lookup.
    Embedding,
    /// Learned position embedding.
    PositionEmbedding,
    /// LayerNorm or RMSNorm.
    Norm,
    /// Linear layer (matrix multiply, with optional bias and LoRA adapters).
    Linear,
    /// `QKᵀ`, or the fused flash-attention kernel.
    AttentionScores,
    /// Softmax over the scores.
    Softmax,
    /// Dropout.
    Dropout,
    /// Scores × values.
    AttentionContext,
    /// GeLU or SwiGLU non-linearity.
    Activation,
    /// Residual addition.
    ResidualAdd,
    /// MoE router (gate linear + top-k).
    Router,
    /// Softmax cross-entropy loss on the logits.
    CrossEntropy,
}

/// One operator with the tensors it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Operator {
    /// Name, unique within a layer (e.g. `qkv_proj`).
    pub name: &'static str,
    /// Kind.
    pub kind: OpKind,
    /// Parameter tensors.
    pub params: Vec<ParamTensor>,
    /// Activations saved for backward (per micro-batch).
    pub saved: Vec<ActTensor>,
    /// Input shapes.
    pub inputs: Vec<Shape>,
    /// Output shapes.
    pub outputs: Vec<Shape>,
}

impl Operator {
    /// Parameter elements of this operator, not counting tied copies.
    pub fn parameter_elements(&self) -> u64 {
        self.params
            .iter()
            .filter(|p| !p.tied_copy)
            .map(|p| p.shape.elements())
            .sum()
    }
}

/// LoRA ranks per layer type; 0 leaves that type without an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub struct LoraRanks {
    /// Query projection.
    pub q: u64,
    /// Key projection.
    pub k: u64,
    /// Value projection.
    pub v: u64,
    /// Attention output projection.
    pub o: u64,
    /// Every MLP matrix (gate, up, down / fc1, fc2).
    pub mlp: u64,
}

impl LoraRanks {
    /// The same rank on every linear layer (QLoRA's setting).
    pub fn all(rank: u64) -> Self {
        LoraRanks {
            q: rank,
            k: rank,
            v: rank,
            o: rank,
            mlp: rank,
        }
    }
}

/// The per-micro-batch workload that shapes the activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Micro-batch size `b` (sequences per device per micro-batch).
    pub micro_batch: u64,
    /// Sequence length `s`.
    pub seq_len: u64,
    /// Flash attention: no `s×s` tensors are saved (only `Q, K, V` and the log-sum-exp).
    pub flash_attention: bool,
    /// LoRA adapters, when fine-tuning with PEFT.
    pub lora: Option<LoraRanks>,
}

impl Workload {
    /// `b = s = 1`, no flash attention, no LoRA: the shapes that count parameters.
    pub const UNIT: Workload = Workload {
        micro_batch: 1,
        seq_len: 1,
        flash_attention: false,
        lora: None,
    };
}
