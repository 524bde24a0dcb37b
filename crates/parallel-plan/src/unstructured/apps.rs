//! Applications written against the API from their equations, with no line about ranks,
//! halos or partitions: they run unchanged on every [`Backend`](super::Backend).

mod airfoil;
mod jacobi;

pub use airfoil::{airfoil, qinf, AirfoilConfig, AirfoilOutcome};
pub use jacobi::{jacobi, JacobiConfig, JacobiOutcome};
