//! Attention operators: projections, the attention core (or fused flash attention), output.

use super::{act, sh, Ctx};
use crate::operator::{ActDtype, ActTensor, Dim, OpKind, Operator, SaveClass, Shape};

impl Ctx<'_> {
    pub(super) fn attention(&self, ops: &mut Vec<Operator>) {
        let (a, g, d) = (self.m.num_heads, self.m.num_kv_heads, self.m.head_dim);
        let tok = [(Dim::Batch, self.w.micro_batch), (Dim::Seq, self.w.seq_len)];
        let hid = [(Dim::Hidden, self.m.hidden)];
        let qd = vec![(Dim::Heads, a), (Dim::HeadDim, d)];
        let kd = vec![(Dim::KvHeads, g), (Dim::HeadDim, d)];
        // q, k, v are separate weights so that LoRA ranks can differ; saved input is shared.
        let mut qkv = self.linear(
            "qkv_proj",
            &[("q_weight", "q_bias", qd.clone())],
            &[],
            &hid,
            self.m.qkv_bias,
            self.lora(|l| l.q),
            &tok,
        );
        for (wn, bn, rank) in [
            ("k_weight", "k_bias", self.lora(|l| l.k)),
            ("v_weight", "v_bias", self.lora(|l| l.v)),
        ] {
            let extra = self.linear(
                "qkv_proj",
                &[(wn, bn, kd.clone())],
                &[],
                &hid,
                self.m.qkv_bias,
                rank,
                &tok,
            );
            qkv.params.extend(extra.params);
            qkv.saved.extend(extra.saved.into_iter().skip(1));
            qkv.outputs.extend(extra.outputs);
        }
        ops.push(qkv);
        let q = self.bs(&qd);
        let kv = self.bs(&kd);
        let scores = sh(&[
            (Dim::Batch, self.w.micro_batch),
            (Dim::Heads, a),
            (Dim::Seq, self.w.seq_len),
            (Dim::KvSeq, self.w.seq_len),
        ]);
        let save = |n, s: &Shape| act(n, s.clone(), ActDtype::Act, SaveClass::Layer);
        let core =
            |name, kind, saved: Vec<ActTensor>, inputs: Vec<Shape>, outputs: Vec<Shape>| Operator {
                name,
                kind,
                params: vec![],
                saved,
                inputs,
                outputs,
            };
        if self.w.flash_attention {
            let lse = sh(&[
                (Dim::Batch, self.w.micro_batch),
                (Dim::Heads, a),
                (Dim::Seq, self.w.seq_len),
            ]);
            let saved = vec![
                save("q", &q),
                save("k", &kv),
                save("v", &kv),
                act("logsumexp", lse, ActDtype::Fp32, SaveClass::Layer),
            ];
            ops.push(core(
                "flash_attention",
                OpKind::AttentionScores,
                saved,
                vec![q.clone(), kv.clone(), kv.clone()],
                vec![q.clone()],
            ));
        } else {
            ops.push(core(
                "attention_scores",
                OpKind::AttentionScores,
                vec![save("q", &q), save("k", &kv)],
                vec![q.clone(), kv.clone()],
                vec![scores.clone()],
            ));
            let probs = act(
                "softmax_output",
                scores.clone(),
                ActDtype::Act,
                SaveClass::AttentionCore,
            );
            ops.push(core(
                "softmax",
                OpKind::Softmax,
                vec![probs],
                vec![scores.clone()],
                vec![scores.clone()],
            ));
            let mut ctx_saved = vec![save("v", &kv)];
            if let Some(d) = self.dropout(
                "attention_dropout",
                scores.clone(),
                SaveClass::AttentionCore,
            ) {
                ops.push(d);
                ctx_saved.push(act(
                    "dropout_output",
                    scores.clone(),
                    ActDtype::Act,
                    SaveClass::AttentionCore,
                ));
            }
            ops.push(core(
                "attention_context",
                OpKind::AttentionContext,
                ctx_saved,
                vec![scores, kv],
                vec![q.clone()],
            ));
        }
        ops.push(self.linear(
            "out_proj",
            &[("o_weight", "o_bias", hid.to_vec())],
            &[],
            &qd,
            self.m.dense_bias,
            self.lora(|l| l.o),
            &tok,
        ));
        ops.extend(self.dropout("attention_out_dropout", self.bsh(), SaveClass::Layer));
        ops.push(self.op("attention_residual", OpKind::ResidualAdd, vec![], vec![]));
    }
}
