//! Data-parallel training over the `collectives` crate: every rank computes gradients on its
//! shard of the global batch, an all-reduce averages them, and every rank applies the same
//! update, so n ranks follow the loss curve of one rank with the whole batch.

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use collectives::{Communicator, ReduceOp};

use crate::train::trainer::GradSync;
use crate::Result;

/// Averages gradients over the ranks of a communicator with one fused all-reduce per step.
#[derive(Debug)]
pub struct DataParallel {
    comm: Communicator,
}

impl DataParallel {
    /// Synchronisation over `comm` (every rank must train the same model in the same order).
    pub fn new(comm: Communicator) -> Self {
        Self { comm }
    }
}

impl GradSync for DataParallel {
    fn sync(&mut self, vars: &[(String, Var)], grads: &mut GradStore) -> Result<()> {
        let mut flat: Vec<f32> = Vec::new();
        for (_, v) in vars {
            match grads.get(v.as_tensor()) {
                Some(g) => flat.extend(g.flatten_all()?.to_vec1::<f32>()?),
                None => flat.extend(std::iter::repeat_n(0.0, v.elem_count())),
            }
        }
        let summed = self.comm.all_reduce(flat, ReduceOp::Sum)?;
        let inv = 1.0 / self.comm.world_size() as f32;
        let mut off = 0;
        for (_, v) in vars {
            let n = v.elem_count();
            let avg: Vec<f32> = summed[off..off + n].iter().map(|x| x * inv).collect();
            grads.insert(v.as_tensor(), Tensor::from_vec(avg, v.dims(), v.device())?);
            off += n;
        }
        Ok(())
    }
}
