//! Seeded weight initialisation.
//!
//! candle's CPU random number generator cannot be seeded (candle issue #2651), so runs that draw
//! weights from `Tensor::randn` are not reproducible. Every initialiser here draws from a
//! [`ChaCha8Rng`] owned by the caller and builds the tensor from the drawn values.

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal, Uniform};

use crate::Result;

/// A seeded generator of initial weights (ChaCha8, platform-independent stream).
#[derive(Debug, Clone)]
pub struct SeededInit {
    rng: ChaCha8Rng,
}

impl SeededInit {
    /// A generator whose stream is fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The underlying generator, for callers that need raw draws (shuffles, dropout masks).
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }

    /// Values drawn i.i.d. from `U(lo, hi)`.
    pub fn uniform_vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        if lo == hi {
            return vec![lo; n];
        }
        let d = Uniform::new(lo, hi).expect("lo < hi");
        (0..n).map(|_| d.sample(&mut self.rng)).collect()
    }

    /// A tensor of `shape` drawn from `U(lo, hi)`.
    pub fn uniform(&mut self, shape: &[usize], lo: f32, hi: f32, dev: &Device) -> Result<Tensor> {
        let n = shape.iter().product();
        Ok(Tensor::from_vec(self.uniform_vec(n, lo, hi), shape, dev)?)
    }

    /// A tensor of `shape` drawn from `N(0, std²)`.
    pub fn normal(&mut self, shape: &[usize], std: f32, dev: &Device) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let d = Normal::new(0.0f32, std).expect("std is finite and >= 0");
        let v: Vec<f32> = (0..n).map(|_| d.sample(&mut self.rng)).collect();
        Ok(Tensor::from_vec(v, shape, dev)?)
    }

    /// Kaiming-uniform with `a = √5` as in PyTorch's `nn.Linear` and PEFT's LoRA A matrix:
    /// `U(-1/√fan_in, 1/√fan_in)` for a weight of shape `[fan_out, fan_in]`.
    pub fn kaiming_uniform(&mut self, shape: &[usize], dev: &Device) -> Result<Tensor> {
        let fan_in = *shape.last().expect("weight has at least one dimension");
        let bound = 1.0 / (fan_in as f32).sqrt();
        self.uniform(shape, -bound, bound, dev)
    }

    /// A Bernoulli keep-mask scaled by `1/(1-p)` (inverted dropout), as a tensor of `shape`.
    pub fn dropout_mask(&mut self, shape: &[usize], p: f32, dev: &Device) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let keep = 1.0 / (1.0 - p);
        let v: Vec<f32> = (0..n)
            .map(|_| {
                if self.rng.random::<f32>() < p {
                    0.0
                } else {
                    keep
                }
            })
            .collect();
        Ok(Tensor::from_vec(v, shape, dev)?)
    }
}
