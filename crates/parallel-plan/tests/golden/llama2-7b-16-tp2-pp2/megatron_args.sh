#!/usr/bin/env bash
# pardis plan -> Megatron-LM megatron_args.sh (pretrain_gpt.py arguments): exact (tp2 pp2 dp4 sp dist-opt rc-selective b1)
# this configuration: 16.89 GiB per device (memory-model, peak stage), 7.445 s per step (cost model); the pardis plan: 16.89 GiB, 7.445 s
# Megatron's theoretical_memory_usage on these arguments: weights+optimizer 14.13 GiB, activations 3.60 GiB
# Data, tokenizer, optimizer and checkpoint arguments are yours.
PARDIS_MEGATRON_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --context-parallel-size 1
  --sequence-parallel
  --use-distributed-optimizer
  --recompute-granularity selective
  --micro-batch-size 1
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
