#!/usr/bin/env bash
# pardis plan -> Megatron-LM megatron_args.sh (pretrain_gpt.py arguments): nearest expressible (tp1 pp1 dp8 mfsdp-zero3 b16)
# this configuration: 67.73 GiB per device (memory-model, peak stage), 2.994 s per step (cost model); the pardis plan: 68.07 GiB, 2.991 s
# gave up: ZeRO per operator (token_embedding:1 position_embedding:3 input_norm:3 qkv_proj:3 out_proj:3 mlp_norm:3 mlp_up:3 mlp_down:3 final_norm:3) → one stage 3
# Megatron's theoretical_memory_usage on these arguments: weights+optimizer 9.17 GiB, activations 57.03 GiB (it does not model Megatron-FSDP's sharding of gradients and parameters)
# Data, tokenizer, optimizer and checkpoint arguments are yours (but --ckpt-format, which Megatron-FSDP requires).
PARDIS_MEGATRON_ARGS=(
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads_params
  --no-gradient-accumulation-fusion
  --use-distributed-optimizer
  --ckpt-format fsdp_dtensor
  --micro-batch-size 16
  --global-batch-size 256
  --num-layers 24
  --hidden-size 2048
  --num-attention-heads 16
  --ffn-hidden-size 8192
  --seq-length 2048
  --max-position-embeddings 2048
  --make-vocab-size-divisible-by 1024
  --bf16
  --use-flash-attn
)
# torchrun --nproc-per-node 8 --nnodes 1 pretrain_gpt.py "${PARDIS_MEGATRON_ARGS[@]}" ...
