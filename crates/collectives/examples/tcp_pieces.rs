//! Tuning data for [`Config::ring_piece_bytes`] and [`Config::direct_receive`] on TCP: busbw of
//! the loopback TCP ring all-reduce for several piece sizes, with and without direct receive,
//! next to the per-stream rate of n loopback sockets streaming in a ring at once (`ring-n`, the
//! like-for-like limit; also from message-sized buffers in memory). Every round measures all variants and the reference back to back, so
//! they share the load; prints medians over the rounds and each variant's median ratio to
//! `ring-n`.
//!
//! `cargo run --release -p collectives --example tcp_pieces -- [RANKS,..] [BYTES,..] [PIECES,..] [ROUNDS]`

use collectives::bench::{
    all_reduce_busbw, loopback_ring_bandwidth, loopback_ring_bandwidth_in_memory, median,
    BenchTransport,
};
use collectives::{AllReduceAlgorithm, Config, Result};

fn busbw(n: usize, bytes: usize, piece: usize, direct: bool) -> Result<f64> {
    let engine = Config {
        all_reduce: AllReduceAlgorithm::Ring,
        ring_piece_bytes: piece,
        direct_receive: direct,
        ..Config::default()
    };
    all_reduce_busbw(BenchTransport::Tcp, n, bytes, engine)
}

fn list(arg: Option<&String>, default: &[usize]) -> Vec<usize> {
    arg.map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ranks = list(args.first(), &[2, 4]);
    let sizes = list(args.get(1), &[4 << 20, 16 << 20, 64 << 20]);
    let pieces = list(args.get(2), &[256 << 10, 1 << 20, 4 << 20]);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5).max(1);
    let variants: Vec<(usize, bool)> = pieces
        .iter()
        .map(|&p| (p, true))
        .chain([(collectives::DEFAULT_RING_PIECE_BYTES, false)])
        .collect();
    println!("TCP (loopback, ranks as threads) ring all-reduce busbw GB/s, f32 sum; median of {rounds} rounds");
    println!("variant: piece size, `d` direct receive, `s` staged; ratio = median of variant / ring-n per round");
    for &n in &ranks {
        for &bytes in &sizes {
            let mut got = vec![Vec::new(); variants.len()];
            let mut ratio = vec![Vec::new(); variants.len()];
            let (mut reference, mut in_memory) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                let ring = loopback_ring_bandwidth(bytes, n, 3)?.best;
                reference.push(ring);
                in_memory.push(loopback_ring_bandwidth_in_memory(bytes, n, 3)?.best);
                for (i, &(piece, direct)) in variants.iter().enumerate() {
                    let b = busbw(n, bytes, piece, direct)?;
                    got[i].push(b);
                    ratio[i].push(b / ring);
                }
            }
            println!(
                "ranks {n}, {bytes} bytes: ring-n {:.3}, ring-n from memory {:.3}",
                median(reference),
                median(in_memory)
            );
            for (i, &(piece, direct)) in variants.iter().enumerate() {
                println!(
                    "  {:>8} {} {:>8.3} {:>6.0}%",
                    piece,
                    if direct { "d" } else { "s" },
                    median(got[i].clone()),
                    100.0 * median(ratio[i].clone())
                );
            }
        }
    }
    Ok(())
}
