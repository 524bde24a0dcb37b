#!/usr/bin/env bash
# pardis plan -> Megatron-LM megatron_args.sh (pretrain_gpt.py arguments): nearest expressible (tp2 pp2 dp4 dist-opt b2)
# this configuration: 22.96 GiB per device (memory-model, peak stage), 10.092 s per step (cost model); the pardis plan: 23.72 GiB, 9.722 s
# gave up: TP per stage 2/1 → 2 on every stage
# gave up: ZeRO per operator (token_embedding:2 input_norm:1 qkv_proj:1 out_proj:2 mlp_norm:1 mlp_up:1 mlp_down:1 final_norm:1 lm_head:1) → one stage 1
# gave up: token_embedding batch×2 vocab×4 zero2 → batch×4 vocab×2 zero1
# gave up: input_norm batch×8 zero1 → batch×4 zero1
# gave up: attention_residual batch×8 → batch×4
# gave up: mlp_norm batch×8 zero1 → batch×4 zero1
# gave up: mlp_residual batch×8 → batch×4
# gave up: qkv_proj batch×8 zero1 → batch×4 heads×2 zero1
# gave up: flash_attention batch×8 → batch×4 heads×2
# gave up: out_proj batch×8 zero1 → batch×4 heads×2 zero1
# gave up: mlp_up batch×8 zero1 → batch×4 ffn×2 zero1
# gave up: mlp_act batch×8 → batch×4 ffn×2
# gave up: mlp_down batch×8 zero1 → batch×4 ffn×2 zero1
# gave up: final_norm batch×8 zero1 → batch×4 zero1
# gave up: lm_head batch×8 zero1 → batch×4 vocab×2 zero1
# gave up: cross_entropy batch×8 → batch×4 vocab×2
# Megatron's theoretical_memory_usage on these arguments: weights+optimizer 14.13 GiB, activations 11.58 GiB
# Data, tokenizer, optimizer and checkpoint arguments are yours.
PARDIS_MEGATRON_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --context-parallel-size 1
  --use-distributed-optimizer
  --micro-batch-size 2
  --global-batch-size 256
  --num-layers 32
  --hidden-size 4096
  --num-attention-heads 32
  --ffn-hidden-size 11008
  --seq-length 2048
  --max-position-embeddings 2048
  --make-vocab-size-divisible-by 512
  --normalization RMSNorm
  --swiglu
  --position-embedding-type rope
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --attention-dropout 0
  --hidden-dropout 0
  --bf16
  --use-flash-attn
)
# torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py "${PARDIS_MEGATRON_ARGS[@]}" ...
