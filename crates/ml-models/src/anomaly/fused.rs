//! Fused CPU kernels for the deep detectors' most frequent element-wise steps: leaky ReLU,
//! row-wise L2 normalisation and the bias of a linear layer.
//!
//! Built from candle's primitives, `x.maximum(&(x * 0.01))` is two graph nodes whose backward
//! pass takes about fifteen full passes over the activations (equality masks, dtype casts,
//! products, quotients and the zero-initialised gradient sums), and `x / sqrt(|x|² + ε)` is five
//! nodes; `broadcast_add` of a bias is a strided broadcast forward and a strided reduction
//! backward. On the detectors' small MLPs these passes and their allocations, not the matrix
//! products, dominated training time. Each kernel here is one node whose backward is one pass.
//!
//! Both compute what the compositions compute: [`leaky_relu`] reproduces
//! [`crate::train::ops::leaky_relu`] bit for bit, forward and backward (including candle's
//! split of the gradient between the two arguments of `maximum` where they tie, at 0);
//! [`l2_normalise`] equals the composition's value and gradient up to float rounding (the
//! gradient is the analytic one, `(g − x (x·g)/n²) / n`, in another order of operations). The
//! [`add_bias`] gives `broadcast_add`'s values and input gradient exactly, and its bias gradient
//! up to float rounding. The tests compare all three against candle's ops. CPU, f32, only (the deep
//! detectors run there); another device or dtype is an error.

use candle_core::{
    backend::BackendStorage, CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor,
};

use crate::Result;

/// The slope of leaky ReLU on negative inputs, as in [`crate::train::ops::leaky_relu`].
const SLOPE: f32 = 0.01;

/// The contiguous f32 elements of a CPU storage under `layout`.
fn f32_slice<'a>(s: &'a CpuStorage, layout: &Layout, op: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op}: f32 input expected, got {:?}", s.dtype());
    };
    match layout.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{op}: contiguous input expected"),
    }
}

/// `max(x, 0.01·x)` in candle's arithmetic: `x · 0.01 + 0` (its affine map) and `maximum`'s
/// comparison `x < y`.
#[inline]
fn leaky(x: f32) -> f32 {
    let y = x * SLOPE + 0.0;
    if x < y {
        y
    } else {
        x
    }
}

/// Leaky ReLU, one graph node.
struct LeakyRelu;

impl CustomOp1 for LeakyRelu {
    fn name(&self) -> &'static str {
        "anomaly-leaky-relu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l, self.name())?;
        Ok((
            CpuStorage::F32(x.iter().map(|&v| leaky(v)).collect()),
            l.shape().clone(),
        ))
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(
            arg.contiguous()?
                .apply_op2_no_bwd(&grad.contiguous()?, &LeakyReluGrad)?,
        ))
    }
}

/// The gradient of [`LeakyRelu`] with respect to its input, given `(x, upstream gradient)`.
struct LeakyReluGrad;

impl CustomOp2 for LeakyReluGrad {
    fn name(&self) -> &'static str {
        "anomaly-leaky-relu-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, self.name())?;
        let g = f32_slice(s2, l2, self.name())?;
        if x.len() != g.len() {
            candle_core::bail!("{}: {} inputs, {} gradients", self.name(), x.len(), g.len());
        }
        // candle's backward of `maximum(x, y)`, y = 0.01·x: with masks `out == x`, `out == y`
        // (1 or 0), x receives `m_x·g / (m_y + 1)` and y receives `m_y·g / (m_x + 1)`, which the
        // affine node passes on as `· 0.01 + 0`; x's gradient sums the two, from zero.
        let out = x
            .iter()
            .zip(g)
            .map(|(&x, &g)| {
                let y = x * SLOPE + 0.0;
                let o = if x < y { y } else { x };
                let mx = f32::from(u8::from(o == x));
                let my = f32::from(u8::from(o == y));
                let gx = mx * g / (my + 1.0);
                let gy = my * g / (mx + 1.0);
                (0.0 + gx) + (gy * SLOPE + 0.0)
            })
            .collect();
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// Leaky ReLU with slope 0.01 as one graph node: the same values and gradients as
/// [`crate::train::ops::leaky_relu`] (f32 on the CPU).
///
/// # Errors
/// A tensor that is not f32 on the CPU.
pub(super) fn leaky_relu(x: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1(LeakyRelu)?)
}

/// The ε under the square root of [`l2_normalise`].
const EPS: f32 = 1e-12;

/// Rows of the last dimension scaled to unit norm, one graph node.
struct L2Normalise;

impl CustomOp1 for L2Normalise {
    fn name(&self) -> &'static str {
        "anomaly-l2-normalise"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l, self.name())?;
        let e = l.shape().dims().last().copied().unwrap_or(1).max(1);
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks(e) {
            let mut sq = 0.0f32;
            for &v in row {
                sq += v * v;
            }
            let n = (sq + EPS).sqrt();
            out.extend(row.iter().map(|&v| v / n));
        }
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(
            arg.contiguous()?
                .apply_op2_no_bwd(&grad.contiguous()?, &L2NormaliseGrad)?,
        ))
    }
}

/// The gradient of [`L2Normalise`] with respect to its input, given `(x, upstream gradient)`:
/// per row, `g/n − x (g·x)/n³` with `n = sqrt(|x|² + ε)`.
struct L2NormaliseGrad;

impl CustomOp2 for L2NormaliseGrad {
    fn name(&self) -> &'static str {
        "anomaly-l2-normalise-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, self.name())?;
        let g = f32_slice(s2, l2, self.name())?;
        if x.len() != g.len() {
            candle_core::bail!("{}: {} inputs, {} gradients", self.name(), x.len(), g.len());
        }
        let e = l1.shape().dims().last().copied().unwrap_or(1).max(1);
        let mut out = Vec::with_capacity(x.len());
        for (xr, gr) in x.chunks(e).zip(g.chunks(e)) {
            let (mut sq, mut dot) = (0.0f32, 0.0f32);
            for (&v, &w) in xr.iter().zip(gr) {
                sq += v * v;
                dot += v * w;
            }
            let n = (sq + EPS).sqrt();
            // (Divided in two steps: `n³` alone overflows f32 for row norms above ~7e12.)
            let c = dot / (n * n) / n;
            out.extend(xr.iter().zip(gr).map(|(&v, &w)| w / n - v * c));
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// Rows of the last dimension scaled to unit L2 norm, `x / sqrt(|x|² + 1e-12)`, as one graph
/// node (f32 on the CPU). The epsilon sits inside the square root so that an all-zero row
/// (common without biases: a window of features that are 0 after min-max scaling) maps to 0
/// with a finite gradient; a clamp of the norm would still send the gradient through `sqrt` at
/// 0, which is NaN.
///
/// # Errors
/// A tensor that is not f32 on the CPU.
pub(super) fn l2_normalise(x: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1(L2Normalise)?)
}

/// `x + b` for `x` of shape `[rows, n]` and a bias `b` of shape `[n]`, one graph node.
struct AddBias;

impl CustomOp2 for AddBias {
    fn name(&self) -> &'static str {
        "anomaly-add-bias"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, self.name())?;
        let b = f32_slice(s2, l2, self.name())?;
        let n = l1.shape().dims().last().copied().unwrap_or(1);
        if b.len() != n || n == 0 {
            candle_core::bail!("{}: {} bias values for rows of {n}", self.name(), b.len());
        }
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks(n) {
            out.extend(row.iter().zip(b).map(|(&v, &c)| v + c));
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        _x: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let gb = grad.contiguous()?.apply_op1_no_bwd(&ColumnSums)?;
        Ok((Some(grad.clone()), Some(gb.reshape(b.shape())?)))
    }
}

/// The sums over the rows of `[rows, n]`: `[n]`, each column summed from the first row to the
/// last (the order of candle's `sum` over dimension 0).
struct ColumnSums;

impl CustomOp1 for ColumnSums {
    fn name(&self) -> &'static str {
        "anomaly-column-sums"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let g = f32_slice(s, l, self.name())?;
        let n = l.shape().dims().last().copied().unwrap_or(1).max(1);
        let mut out = vec![0.0f32; n];
        for row in g.chunks(n) {
            for (o, &v) in out.iter_mut().zip(row) {
                *o += v;
            }
        }
        Ok((CpuStorage::F32(out), Shape::from(n)))
    }
}

/// `x + b`, the bias `b` (`[n]`) added to every row of `x` (`[rows, n]`), as one graph node
/// (candle's `broadcast_add` is a strided broadcast forward and a strided reduction backward).
/// f32 on the CPU.
///
/// # Errors
/// A tensor that is not f32 on the CPU, or a bias whose length is not `x`'s last dimension.
pub(super) fn add_bias(x: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op2(&b.contiguous()?, AddBias)?)
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor, Var, D};
    use proptest::prelude::*;

    use super::*;

    /// The candle composition [`l2_normalise`] replaces.
    fn l2_reference(x: &Tensor) -> Tensor {
        let n = (x.sqr().unwrap().sum_keepdim(D::Minus1).unwrap() + 1e-12)
            .unwrap()
            .sqrt()
            .unwrap();
        x.broadcast_div(&n).unwrap()
    }

    /// Value and gradient (of `Σ w ⊙ f(x)`) of `f` at `x`.
    fn value_and_grad(
        x: &[f32],
        w: &[f32],
        shape: (usize, usize),
        f: impl Fn(&Tensor) -> Tensor,
    ) -> (Vec<f32>, Vec<f32>) {
        let v = Var::from_vec(x.to_vec(), shape, &Device::Cpu).unwrap();
        let wt = Tensor::from_vec(w.to_vec(), shape, &Device::Cpu).unwrap();
        let y = f(v.as_tensor());
        let grads = (&y * &wt).unwrap().sum_all().unwrap().backward().unwrap();
        (
            y.flatten_all().unwrap().to_vec1().unwrap(),
            grads
                .get(v.as_tensor())
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap(),
        )
    }

    /// Inputs with exact zeros and ties mixed in (leaky ReLU's gradient differs there).
    fn inputs() -> impl Strategy<Value = (usize, usize, Vec<f32>, Vec<f32>)> {
        (1usize..6, 1usize..9).prop_flat_map(|(r, c)| {
            let value = prop_oneof![3 => -5.0f32..5.0, 1 => Just(0.0f32), 1 => Just(-0.0f32)];
            (
                Just(r),
                Just(c),
                proptest::collection::vec(value, r * c),
                proptest::collection::vec(-3.0f32..3.0, r * c),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn leaky_relu_matches_the_composition_bit_for_bit((r, c, x, w) in inputs()) {
            let (y, g) = value_and_grad(&x, &w, (r, c), |t| leaky_relu(t).unwrap());
            let (yr, gr) =
                value_and_grad(&x, &w, (r, c), |t| crate::train::ops::leaky_relu(t).unwrap());
            let bits = |v: &[f32]| v.iter().map(|f| (f + 0.0).to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&y), bits(&yr));
            prop_assert_eq!(bits(&g), bits(&gr));
        }

        #[test]
        fn l2_normalise_matches_the_composition((r, c, x, w) in inputs()) {
            let (y, g) = value_and_grad(&x, &w, (r, c), |t| l2_normalise(t).unwrap());
            let (yr, gr) = value_and_grad(&x, &w, (r, c), l2_reference);
            for (a, b) in y.iter().zip(&yr) {
                prop_assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "value {a} vs {b}");
            }
            for (a, b) in g.iter().zip(&gr) {
                prop_assert!(a.is_finite(), "gradient {a}");
                prop_assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "gradient {a} vs {b}");
            }
        }
    }

    #[test]
    fn add_bias_matches_broadcast_add_value_and_gradients() {
        let (r, c) = (37, 5);
        let x: Vec<f32> = (0..r * c)
            .map(|i| ((i * 7919) % 113) as f32 / 17.0 - 3.0)
            .collect();
        let w: Vec<f32> = (0..r * c)
            .map(|i| ((i * 104_729) % 97) as f32 / 13.0 - 3.5)
            .collect();
        let bias = [0.25f32, -1.5, 3.0, 0.0, -0.125];
        let run = |fused: bool| {
            let xv = Var::from_vec(x.clone(), (r, c), &Device::Cpu).unwrap();
            let bv = Var::from_vec(bias.to_vec(), c, &Device::Cpu).unwrap();
            let wt = Tensor::from_vec(w.clone(), (r, c), &Device::Cpu).unwrap();
            let y = if fused {
                add_bias(xv.as_tensor(), bv.as_tensor()).unwrap()
            } else {
                xv.as_tensor().broadcast_add(bv.as_tensor()).unwrap()
            };
            let g = (&y * &wt).unwrap().sum_all().unwrap().backward().unwrap();
            let v = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            (
                v(&y),
                v(g.get(xv.as_tensor()).unwrap()),
                v(g.get(bv.as_tensor()).unwrap()),
            )
        };
        let (fused, reference) = (run(true), run(false));
        assert_eq!(fused.0, reference.0);
        assert_eq!(fused.1, reference.1);
        for (a, b) in fused.2.iter().zip(&reference.2) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let x = Tensor::zeros((2, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
        let short = Tensor::zeros(2, candle_core::DType::F32, &Device::Cpu).unwrap();
        assert!(add_bias(&x, &short).is_err());
    }

    #[test]
    fn l2_normalise_of_a_zero_row_is_zero_with_a_finite_gradient() {
        let (y, g) = value_and_grad(&[0.0; 4], &[1.0, -2.0, 0.5, 3.0], (1, 4), |t| {
            l2_normalise(t).unwrap()
        });
        assert_eq!(y, vec![0.0; 4]);
        assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
    }

    #[test]
    fn non_f32_input_is_an_error_not_a_panic() {
        let x = Tensor::new(&[1.0f64, -2.0], &Device::Cpu).unwrap();
        assert!(leaky_relu(&x).is_err());
        assert!(l2_normalise(&x).is_err());
    }
}
