#!/usr/bin/env bash
# pardis plan -> Megatron-LM megatron_args.sh (pretrain_gpt.py arguments): nearest expressible (tp1 pp1 dp16 mfsdp-zero2 b4)
# this configuration: 54.20 GiB per device (memory-model, peak stage), 6.732 s per step (cost model); the pardis plan: 53.98 GiB, 6.715 s
# gave up: token_embedding batch×2 vocab×8 zero2 → batch×16 zero2
# Megatron's theoretical_memory_usage on these arguments: weights+optimizer 42.40 GiB, activations 36.32 GiB (it does not model Megatron-FSDP's sharding of gradients and parameters)
# Data, tokenizer, optimizer and checkpoint arguments are yours (but --ckpt-format, which Megatron-FSDP requires).
PARDIS_MEGATRON_ARGS=(
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads
  --no-gradient-accumulation-fusion
  --use-distributed-optimizer
  --ckpt-format fsdp_dtensor
  --micro-batch-size 4
  --global-batch-size 256
  --num-layers 32
  --hidden-size 4096
  --num-attention-heads 32
  --ffn-hidden-size 11008
  --seq-length 2048
  --max-position-embeddings 2048
  --make-vocab-size-divisible-by 1024
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
