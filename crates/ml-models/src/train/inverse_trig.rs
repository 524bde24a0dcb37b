//! `asin`, `acos` and `acosh` with a backward pass (candle 0.9 has none of them), for the
//! hyperbolic (Lorentz-model) geometry where `d(x, y) = acosh(-⟨x, y⟩_L)`.
//!
//! Each is a candle `CustomOp1`: the forward maps the standard library function over the
//! elements; the backward is built from candle primitives:
//! `asin' = 1/√(1-x²)`, `acos' = -1/√(1-x²)`, `acosh' = 1/√(x²-1)`.
//! Outside the domain the forward gives NaN, like the scalar functions; at the domain edges
//! (|x| = 1 for asin/acos, x = 1 for acosh) the derivative is infinite — callers that need
//! finite gradients there clamp their input first (e.g. `acosh(max(x, 1 + ε))`).

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InverseFn {
    Asin,
    Acos,
    Acosh,
}

impl InverseFn {
    fn f64(self, x: f64) -> f64 {
        match self {
            InverseFn::Asin => x.asin(),
            InverseFn::Acos => x.acos(),
            InverseFn::Acosh => x.acosh(),
        }
    }
}

fn map_storage(
    s: &CpuStorage,
    l: &Layout,
    f: impl Fn(f64) -> f64,
) -> candle_core::Result<CpuStorage> {
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("inverse trigonometric op expects a contiguous input");
    };
    Ok(match s {
        CpuStorage::F32(v) => {
            CpuStorage::F32(v[a..b].iter().map(|&x| f(x as f64) as f32).collect())
        }
        CpuStorage::F64(v) => CpuStorage::F64(v[a..b].iter().map(|&x| f(x)).collect()),
        _ => candle_core::bail!("inverse trigonometric ops support f32 and f64"),
    })
}

impl CustomOp1 for InverseFn {
    fn name(&self) -> &'static str {
        match self {
            InverseFn::Asin => "asin",
            InverseFn::Acos => "acos",
            InverseFn::Acosh => "acosh",
        }
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Ok((map_storage(s, l, |x| self.f64(x))?, l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let x2 = x.sqr()?;
        let dfdx = match self {
            InverseFn::Asin => x2.affine(-1.0, 1.0)?.sqrt()?.recip()?,
            InverseFn::Acos => x2.affine(-1.0, 1.0)?.sqrt()?.recip()?.neg()?,
            InverseFn::Acosh => x2.affine(1.0, -1.0)?.sqrt()?.recip()?,
        };
        Ok(Some(grad.mul(&dfdx)?))
    }
}

fn apply(x: &Tensor, f: InverseFn) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1(f)?)
}

/// Element-wise arcsine (domain [-1, 1]), differentiable.
pub fn asin(x: &Tensor) -> Result<Tensor> {
    apply(x, InverseFn::Asin)
}

/// Element-wise arccosine (domain [-1, 1]), differentiable.
pub fn acos(x: &Tensor) -> Result<Tensor> {
    apply(x, InverseFn::Acos)
}

/// Element-wise inverse hyperbolic cosine (domain [1, ∞)), differentiable.
pub fn acosh(x: &Tensor) -> Result<Tensor> {
    apply(x, InverseFn::Acosh)
}
