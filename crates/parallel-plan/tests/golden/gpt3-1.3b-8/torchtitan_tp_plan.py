# pardis plan -> torchtitan torchtitan_tp_plan.py (parallelize_module plan, torch.distributed.tensor.parallel): nearest expressible (tp1 pp1 dp8 fsdp b16)
# this configuration: 67.73 GiB per device (memory-model, peak stage), 2.994 s per step (cost model); the pardis plan: 68.07 GiB, 2.991 s
# gave up: ZeRO per operator (token_embedding:1 position_embedding:3 input_norm:3 qkv_proj:3 out_proj:3 mlp_norm:3 mlp_up:3 mlp_down:3 final_norm:3) → one stage 3
# Module names are torchtitan's Llama; a GPT-style model needs the same names.
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

TENSOR_PARALLEL_DEGREE = 1
SEQUENCE_PARALLEL = False

# No tensor parallelism: nothing to parallelize.
TOP_PLAN = {}
LAYER_PLAN = {}


def apply_pardis_tp(model, tp_mesh):
    """Applies the plan to a model (or one pipeline stage of it) on `tp_mesh`."""
    if not LAYER_PLAN:
        return model
    present = {k: v for k, v in TOP_PLAN.items() if getattr(model, k, None) is not None}
    parallelize_module(model, tp_mesh, present)
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, LAYER_PLAN)
    return model
