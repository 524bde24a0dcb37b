# pardis plan -> torchtitan torchtitan_tp_plan.py (parallelize_module plan, torch.distributed.tensor.parallel): nearest expressible (tp2 pp2 dp4 sp zero2 b2)
# this configuration: 18.57 GiB per device (memory-model, peak stage), 10.341 s per step (cost model); the pardis plan: 23.72 GiB, 9.722 s
# gave up: TP per stage 2/1 → 2 on every stage
# gave up: ZeRO per operator (token_embedding:2 input_norm:1 qkv_proj:1 out_proj:2 mlp_norm:1 mlp_up:1 mlp_down:1 final_norm:1 lm_head:1) → one stage 2
# gave up: sequence parallel false → true
# gave up: token_embedding batch×2 vocab×4 zero2 → batch×4 vocab×2 zero2
# gave up: input_norm batch×8 zero1 → batch×4 seq×2 zero2
# gave up: attention_residual batch×8 → batch×4 seq×2
# gave up: mlp_norm batch×8 zero1 → batch×4 seq×2 zero2
# gave up: mlp_residual batch×8 → batch×4 seq×2
# gave up: qkv_proj batch×8 zero1 → batch×4 heads×2 zero2
# gave up: flash_attention batch×8 → batch×4 heads×2
# gave up: out_proj batch×8 zero1 → batch×4 heads×2 zero2
# gave up: mlp_up batch×8 zero1 → batch×4 ffn×2 zero2
# gave up: mlp_act batch×8 → batch×4 ffn×2
# gave up: mlp_down batch×8 zero1 → batch×4 ffn×2 zero2
# gave up: final_norm batch×8 zero1 → batch×4 seq×2 zero2
# gave up: lm_head batch×8 zero1 → batch×4 vocab×2 zero2
# gave up: cross_entropy batch×8 → batch×4 vocab×2
# Module names are torchtitan's Llama; a GPT-style model needs the same names.
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

TENSOR_PARALLEL_DEGREE = 2
SEQUENCE_PARALLEL = True

TOP_PLAN = {
    "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
    "norm": SequenceParallel(),
    "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),
}

LAYER_PLAN = {
    "attention_norm": SequenceParallel(),
    "attention": PrepareModuleInput(input_layouts=(Shard(1), None, None, None), desired_input_layouts=(Replicate(), None, None, None)),
    "attention.wq": ColwiseParallel(),
    "attention.wk": ColwiseParallel(),
    "attention.wv": ColwiseParallel(),
    "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
    "ffn_norm": SequenceParallel(),
    "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "feed_forward.w1": ColwiseParallel(),
    "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    "feed_forward.w3": ColwiseParallel(),
}


def apply_pardis_tp(model, tp_mesh):
    """Applies the plan to a model (or one pipeline stage of it) on `tp_mesh`."""
    if not LAYER_PLAN:
        return model
    present = {k: v for k, v in TOP_PLAN.items() if getattr(model, k, None) is not None}
    parallelize_module(model, tp_mesh, present)
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, LAYER_PLAN)
    return model
