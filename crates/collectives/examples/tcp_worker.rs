//! One rank of a multi-process job over TCP. Start one process per rank:
//!
//! ```sh
//! for r in 0 1 2; do
//!   PARDIS_RANK=$r PARDIS_WORLD_SIZE=3 PARDIS_MASTER_ADDR=127.0.0.1:29500 \
//!     cargo run -p collectives --example tcp_worker &
//! done; wait
//! ```

use collectives::{tcp, ReduceOp};

fn main() -> Result<(), collectives::CollectiveError> {
    let comm = tcp::from_env()?;
    let sum = comm.all_reduce(vec![comm.rank() as i64 + 1; 4], ReduceOp::Sum)?;
    let n = comm.world_size() as i64;
    assert_eq!(sum[0], n * (n + 1) / 2);
    let sub = comm.split((comm.rank() % 2) as u64, 0)?;
    let evens_or_odds = sub.all_gather(vec![comm.rank() as i32])?;
    println!(
        "rank {}: all-reduce {sum:?}, my half {evens_or_odds:?}",
        comm.rank()
    );
    Ok(())
}
