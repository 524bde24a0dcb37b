//! Four ranks (threads) all-reduce a gradient-like vector, then gather one number each.
//!
//! `cargo run -p collectives --example all_reduce`

use collectives::{run_local, ReduceOp};

fn main() -> Result<(), collectives::CollectiveError> {
    let out = run_local(4, |comm| -> collectives::Result<(usize, f32, Vec<u8>)> {
        let grad: Vec<f32> = (0..1000).map(|i| (comm.rank() * i) as f32).collect();
        let sum = comm.all_reduce(grad, ReduceOp::Sum)?;
        let ranks = comm.all_gather(vec![comm.rank() as u8])?;
        Ok((comm.rank(), sum[999], ranks))
    })?;
    for r in out {
        let (rank, last, ranks) = r?;
        println!(
            "rank {rank}: sum[999] = {last} (0+1+2+3)*999 = {}, gathered {ranks:?}",
            6 * 999
        );
    }
    Ok(())
}
