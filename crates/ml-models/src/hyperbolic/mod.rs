//! Hyperbolic representation learning: the Lorentz-model geometry ([`lorentz`]) and PO-HRL,
//! partial-order-centred hyperbolic representation learning for few-shot relation extraction
//! (Hu et al., COLING 2025), with its Euclidean baselines ([`pohrl`]).

pub mod lorentz;
pub mod pohrl;
