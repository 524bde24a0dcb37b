//! Feed-forward operators: dense GeLU/SwiGLU MLP, routed experts, shared experts.

use super::{act, Ctx, WeightSpec};
use crate::model::MlpKind;
use crate::operator::{ActDtype, ActTensor, Dim, OpKind, Operator, SaveClass, Shape};

impl Ctx<'_> {
    /// MLP operators: dense (`prefix` empty, `topk` empty) or routed experts.
    pub(super) fn mlp(
        &self,
        ops: &mut Vec<Operator>,
        names: [&'static str; 3],
        ffn: u64,
        prefix: &[(Dim, u64)],
        topk: &[(Dim, u64)],
    ) {
        let mut tok = vec![(Dim::Batch, self.w.micro_batch), (Dim::Seq, self.w.seq_len)];
        tok.extend_from_slice(topk);
        let hid = [(Dim::Hidden, self.m.hidden)];
        let f = vec![(Dim::Ffn, ffn)];
        let rank = self.lora(|l| l.mlp);
        let up: &[WeightSpec] = match self.m.mlp {
            MlpKind::Gelu => &[("fc1_weight", "fc1_bias", f.clone())],
            MlpKind::SwiGlu => &[
                ("gate_weight", "gate_bias", f.clone()),
                ("up_weight", "up_bias", f.clone()),
            ],
        };
        ops.push(self.linear(names[0], up, prefix, &hid, self.m.dense_bias, rank, &tok));
        let mut ffn_shape = tok.clone();
        ffn_shape.extend_from_slice(&f);
        let ffn_shape = Shape(ffn_shape);
        let saved: Vec<ActTensor> = match self.m.mlp {
            MlpKind::Gelu => vec![act(
                "gelu_input",
                ffn_shape.clone(),
                ActDtype::Act,
                SaveClass::Layer,
            )],
            MlpKind::SwiGlu => vec![
                act(
                    "gate_output",
                    ffn_shape.clone(),
                    ActDtype::Act,
                    SaveClass::Layer,
                ),
                act(
                    "up_output",
                    ffn_shape.clone(),
                    ActDtype::Act,
                    SaveClass::Layer,
                ),
            ],
        };
        ops.push(Operator {
            name: names[1],
            kind: OpKind::Activation,
            params: vec![],
            saved,
            inputs: vec![ffn_shape.clone()],
            outputs: vec![ffn_shape],
        });
        ops.push(self.linear(
            names[2],
            &[("down_weight", "down_bias", hid.to_vec())],
            prefix,
            &f,
            self.m.dense_bias,
            rank,
            &tok,
        ));
    }
}
