# pardis plan -> torchtitan torchtitan_tp_plan.py (parallelize_module plan, torch.distributed.tensor.parallel): nearest expressible (tp1 pp1 dp8 zero2 b1)
# this configuration: 10.46 GiB per device (memory-model, peak stage), 4.466 s per step (cost model); the pardis plan: 12.60 GiB, 4.068 s
# gave up: ZeRO-1 → ZeRO-2
# Module names are torchtitan's Llama; a GPT-style model needs the same names.
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
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
