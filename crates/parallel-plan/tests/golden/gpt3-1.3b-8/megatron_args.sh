#!/usr/bin/env bash
# pardis plan -> Megatron-LM megatron_args.sh (pretrain_gpt.py arguments): exact (tp1 pp1 dp8 dist-opt b1)
# this configuration: 12.60 GiB per device (memory-model, peak stage), 4.068 s per step (cost model); the pardis plan: 12.60 GiB, 4.068 s
# Megatron's theoretical_memory_usage on these arguments: weights+optimizer 9.17 GiB, activations 3.56 GiB
# Data, tokenizer, optimizer and checkpoint arguments are yours.
PARDIS_MEGATRON_ARGS=(
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --use-distributed-optimizer
  --micro-batch-size 1
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
