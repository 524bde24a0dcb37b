//! Construction of the operator lists of a layer, of the embedding and of the head.
//!
//! The saved activations follow Korthikanti et al., "Reducing Activation Recomputation in Large
//! Transformer Models" (MLSys 2023, arXiv:2205.05198), §4.1: per layer `34·sbh + 5·as²b` bytes
//! with 16-bit activations and dropout (norm inputs `4sbh`, attention `11sbh + 5as²b`, MLP `19sbh`).

mod attention;
mod mlp;

use crate::model::{ModelConfig, NormKind, PositionKind};
use crate::operator::{
    ActDtype, ActTensor, Dim, LoraRanks, OpKind, Operator, ParamKind, ParamTensor, SaveClass,
    Shape, Workload,
};

/// A weight of a linear layer: weight name, bias name, output dimensions.
type WeightSpec = (&'static str, &'static str, Vec<(Dim, u64)>);

/// Shorthand for building shapes.
fn sh(dims: &[(Dim, u64)]) -> Shape {
    Shape(dims.to_vec())
}

fn act(name: &'static str, shape: Shape, dtype: ActDtype, class: SaveClass) -> ActTensor {
    ActTensor {
        name,
        shape,
        dtype,
        class,
    }
}

fn param(name: &'static str, shape: Shape, kind: ParamKind) -> ParamTensor {
    ParamTensor {
        name,
        shape,
        kind,
        tied_copy: false,
        fan_in: 0,
    }
}

/// Builder state shared by the operator constructors.
struct Ctx<'a> {
    m: &'a ModelConfig,
    w: &'a Workload,
}

impl Ctx<'_> {
    fn bsh(&self) -> Shape {
        sh(&[
            (Dim::Batch, self.w.micro_batch),
            (Dim::Seq, self.w.seq_len),
            (Dim::Hidden, self.m.hidden),
        ])
    }

    fn bs(&self, last: &[(Dim, u64)]) -> Shape {
        let mut v = vec![(Dim::Batch, self.w.micro_batch), (Dim::Seq, self.w.seq_len)];
        v.extend_from_slice(last);
        Shape(v)
    }

    fn op(
        &self,
        name: &'static str,
        kind: OpKind,
        params: Vec<ParamTensor>,
        saved: Vec<ActTensor>,
    ) -> Operator {
        Operator {
            name,
            kind,
            params,
            saved,
            inputs: vec![self.bsh()],
            outputs: vec![self.bsh()],
        }
    }

    fn norm(&self, name: &'static str, checkpoint: bool) -> Operator {
        let h = [(Dim::Hidden, self.m.hidden)];
        let mut params = vec![param("norm_weight", sh(&h), ParamKind::Vector)];
        if self.m.norm == NormKind::LayerNorm {
            params.push(param("norm_bias", sh(&h), ParamKind::Vector));
        }
        let mut saved = vec![act(
            "norm_input",
            self.bsh(),
            ActDtype::Act,
            SaveClass::Layer,
        )];
        if checkpoint {
            saved.push(act(
                "layer_input",
                self.bsh(),
                ActDtype::Act,
                SaveClass::Checkpoint,
            ));
        }
        self.op(name, OpKind::Norm, params, saved)
    }

    fn dropout(&self, name: &'static str, shape: Shape, class: SaveClass) -> Option<Operator> {
        self.m.dropout.then(|| {
            let mut op = self.op(
                name,
                OpKind::Dropout,
                vec![],
                vec![act("dropout_mask", shape.clone(), ActDtype::Mask, class)],
            );
            op.inputs = vec![shape.clone()];
            op.outputs = vec![shape];
            op
        })
    }

    /// A linear layer `input_dims → output_dims` (optionally batched over `prefix` dims such as
    /// experts), with weight names, optional biases and LoRA adapters of rank `lora`.
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &self,
        name: &'static str,
        weights: &[WeightSpec],
        prefix: &[(Dim, u64)],
        input: &[(Dim, u64)],
        bias: bool,
        lora: u64,
        token_dims: &[(Dim, u64)],
    ) -> Operator {
        let mut params = Vec::new();
        let mut saved = vec![act(
            "input",
            {
                let mut t = token_dims.to_vec();
                t.extend_from_slice(input);
                Shape(t)
            },
            ActDtype::Act,
            SaveClass::Layer,
        )];
        let mut outputs = Vec::new();
        for (wname, bname, out) in weights {
            let mut w = prefix.to_vec();
            w.extend_from_slice(input);
            w.extend_from_slice(out);
            let mut weight = param(wname, Shape(w), ParamKind::Weight);
            weight.fan_in = input.iter().map(|&(_, n)| n).product();
            params.push(weight);
            if bias {
                let mut b = prefix.to_vec();
                b.extend_from_slice(out);
                params.push(param(bname, Shape(b), ParamKind::Vector));
            }
            if lora > 0 {
                let r = [(Dim::LoraRank, lora)];
                let mut a = prefix.to_vec();
                a.extend_from_slice(input);
                a.extend_from_slice(&r);
                let mut bm = prefix.to_vec();
                bm.extend_from_slice(&r);
                bm.extend_from_slice(out);
                params.push(param("lora_a", Shape(a), ParamKind::Adapter));
                params.push(param("lora_b", Shape(bm), ParamKind::Adapter));
                let mut mid = token_dims.to_vec();
                mid.extend_from_slice(&r);
                saved.push(act("lora_mid", Shape(mid), ActDtype::Act, SaveClass::Layer));
            }
            let mut o = token_dims.to_vec();
            o.extend_from_slice(out);
            outputs.push(Shape(o));
        }
        let mut inp = token_dims.to_vec();
        inp.extend_from_slice(input);
        Operator {
            name,
            kind: OpKind::Linear,
            params,
            saved,
            inputs: vec![Shape(inp)],
            outputs,
        }
    }

    fn lora(&self, pick: fn(&LoraRanks) -> u64) -> u64 {
        self.w.lora.as_ref().map_or(0, pick)
    }
}

/// The operators of one transformer layer, in execution order.
///
/// Dense layer: `input_norm, qkv_proj, attention_scores, softmax, [attention_dropout],
/// attention_context, out_proj, [attention_out_dropout], attention_residual, mlp_norm,
/// mlp_up, mlp_act, mlp_down, [mlp_dropout], mlp_residual` (flash attention fuses the attention
/// core into `flash_attention`; MoE replaces the MLP by `router, expert_up, expert_act,
/// expert_down` plus `shared_up, shared_act, shared_down` when there are shared experts).
pub fn layer_operators(model: &ModelConfig, workload: &Workload) -> Vec<Operator> {
    let c = Ctx {
        m: model,
        w: workload,
    };
    let mut ops = vec![c.norm("input_norm", true)];
    c.attention(&mut ops);
    ops.push(c.norm("mlp_norm", false));
    match &model.moe {
        None => c.mlp(
            &mut ops,
            ["mlp_up", "mlp_act", "mlp_down"],
            model.ffn_hidden,
            &[],
            &[],
        ),
        Some(moe) => {
            let e = [(Dim::Experts, moe.num_experts)];
            let mut router = c.linear(
                "router",
                &[("router_weight", "router_bias", e.to_vec())],
                &[],
                &[(Dim::Hidden, model.hidden)],
                false,
                0,
                &[
                    (Dim::Batch, workload.micro_batch),
                    (Dim::Seq, workload.seq_len),
                ],
            );
            router.kind = OpKind::Router;
            router.params[0].kind = ParamKind::Vector;
            router.saved.push(act(
                "router_probs",
                c.bs(&e),
                ActDtype::Fp32,
                SaveClass::Layer,
            ));
            ops.push(router);
            c.mlp(
                &mut ops,
                ["expert_up", "expert_act", "expert_down"],
                moe.expert_ffn_hidden,
                &e,
                &[(Dim::TopK, moe.top_k)],
            );
            if moe.shared_experts > 0 {
                c.mlp(
                    &mut ops,
                    ["shared_up", "shared_act", "shared_down"],
                    moe.shared_experts * moe.expert_ffn_hidden,
                    &[],
                    &[],
                );
            }
        }
    }
    ops.extend(c.dropout("mlp_dropout", c.bsh(), SaveClass::Layer));
    ops.push(c.op("mlp_residual", OpKind::ResidualAdd, vec![], vec![]));
    mark_pointwise_outputs(&mut ops);
    ops
}

/// Marks the saved input of every linear layer that directly follows a norm or an activation
/// function (its producer in the layer's chain) as [`SaveClass::PointwiseOutput`]: the producer
/// keeps its own input, so pointwise recomputation can drop the linear's copy.
fn mark_pointwise_outputs(ops: &mut [Operator]) {
    for i in 1..ops.len() {
        let producer = ops[i - 1].kind;
        if ops[i].kind == OpKind::Linear && matches!(producer, OpKind::Norm | OpKind::Activation) {
            for a in ops[i].saved.iter_mut() {
                if a.name == "input" && a.class == SaveClass::Layer {
                    a.class = SaveClass::PointwiseOutput;
                }
            }
        }
    }
}

/// The operators before the first layer (first pipeline stage): token embedding, learned
/// positions, embedding dropout.
pub fn embedding_operators(model: &ModelConfig, workload: &Workload) -> Vec<Operator> {
    let c = Ctx {
        m: model,
        w: workload,
    };
    let table = sh(&[
        (Dim::Vocab, model.padded_vocab()),
        (Dim::Hidden, model.hidden),
    ]);
    let ids = c.bs(&[]);
    let mut ops = vec![Operator {
        name: "token_embedding",
        kind: OpKind::Embedding,
        params: vec![param("word_embeddings", table, ParamKind::Embedding)],
        saved: vec![act(
            "token_ids",
            ids.clone(),
            ActDtype::Int64,
            SaveClass::Always,
        )],
        inputs: vec![ids],
        outputs: vec![c.bsh()],
    }];
    if model.position == PositionKind::Learned {
        let pos = sh(&[
            (Dim::Positions, model.max_positions),
            (Dim::Hidden, model.hidden),
        ]);
        ops.push(c.op(
            "position_embedding",
            OpKind::PositionEmbedding,
            vec![param("position_embeddings", pos, ParamKind::Embedding)],
            vec![],
        ));
    }
    if model.token_types > 0 {
        let types = sh(&[
            (Dim::Positions, model.token_types),
            (Dim::Hidden, model.hidden),
        ]);
        ops.push(c.op(
            "token_type_embedding",
            OpKind::PositionEmbedding,
            vec![param("token_type_embeddings", types, ParamKind::Embedding)],
            vec![],
        ));
    }
    ops.extend(c.dropout("embedding_dropout", c.bsh(), SaveClass::Always));
    ops
}

/// The operators after the last layer (last pipeline stage): final norm, output head,
/// cross-entropy on fp32 logits.
///
/// With tied embeddings the head owns no weight when it sits on the same device as the
/// embedding (`pp = 1`); otherwise (`tied_copy_on_other_stage`) it holds a copy marked
/// [`ParamTensor::tied_copy`], as Megatron-LM does on the last stage.
pub fn head_operators(
    model: &ModelConfig,
    workload: &Workload,
    tied_copy_on_other_stage: bool,
) -> Vec<Operator> {
    let c = Ctx {
        m: model,
        w: workload,
    };
    let v = model.padded_vocab();
    let tok = [
        (Dim::Batch, workload.micro_batch),
        (Dim::Seq, workload.seq_len),
    ];
    let mut head = c.linear(
        "lm_head",
        &[("output_weight", "", vec![(Dim::Vocab, v)])],
        &[],
        &[(Dim::Hidden, model.hidden)],
        false,
        0,
        &tok,
    );
    head.params[0].kind = ParamKind::Embedding;
    if model.tied_embeddings {
        if tied_copy_on_other_stage {
            head.params[0].tied_copy = true;
        } else {
            head.params.clear();
        }
    }
    let logits = c.bs(&[(Dim::Vocab, v)]);
    let loss = Operator {
        name: "cross_entropy",
        kind: OpKind::CrossEntropy,
        params: vec![],
        saved: vec![act(
            "logits_fp32",
            logits.clone(),
            ActDtype::Fp32,
            SaveClass::Always,
        )],
        inputs: vec![logits],
        outputs: vec![sh(&[])],
    };
    let mut ops = vec![c.norm("final_norm", false)];
    if model.pooler {
        // tanh(W·h_[CLS] + b) on the first token of each sequence.
        let pooler = c.linear(
            "pooler",
            &[(
                "pooler_weight",
                "pooler_bias",
                vec![(Dim::HiddenOut, model.hidden)],
            )],
            &[],
            &[(Dim::Hidden, model.hidden)],
            true,
            0,
            &[(Dim::Batch, workload.micro_batch)],
        );
        ops.push(pooler);
    }
    ops.extend([head, loss]);
    for t in ops.iter_mut().flat_map(|op| op.saved.iter_mut()) {
        t.class = SaveClass::Always;
    }
    ops
}

/// Parameter counts, computed from the operator lists (the same code path as every memory
/// number); here rather than in `model` so that the model configuration does not depend on the
/// operators built from it.
impl ModelConfig {
    /// Parameters of one transformer layer (sum over [`layer_operators`]).
    pub fn layer_parameters(&self) -> u64 {
        layer_operators(self, &Workload::UNIT)
            .iter()
            .map(|op| op.parameter_elements())
            .sum()
    }

    /// Parameters of the embeddings, final norm and output head (a tied head counts once).
    pub fn embedding_parameters(&self) -> u64 {
        embedding_operators(self, &Workload::UNIT)
            .iter()
            .chain(head_operators(self, &Workload::UNIT, false).iter())
            .map(|op| op.parameter_elements())
            .sum()
    }

    /// Total parameters: `L ·` [`Self::layer_parameters`] `+` [`Self::embedding_parameters`].
    ///
    /// Computed from the operator list, the same code path as all memory numbers.
    pub fn num_parameters(&self) -> u64 {
        self.num_layers * self.layer_parameters() + self.embedding_parameters()
    }
}
