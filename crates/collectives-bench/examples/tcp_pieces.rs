//! Tuning data for [`Config::ring_piece_bytes`] and [`Config::direct_receive`] on TCP: busbw of
//! the loopback TCP ring all-reduce for several piece sizes, with and without direct receive,
//! next to the per-stream rate of n loopback sockets streaming in a ring at once (`ring-n`, the
//! like-for-like limit; also from message-sized buffers in memory) and the same ring
//! all-reduce written directly on raw sockets (`ar-n`, its speed of light). Every figure is the
//! median of samples of at least 32 MiB per link ([`all_reduce_rate`] for pardis); every round
//! measures all variants and references back to back, so they share the load; prints medians
//! over the rounds and each variant's median ratio to `ring-n` and to `ar-n`.
//!
//! `cargo run --release -p collectives-bench --example tcp_pieces -- [RANKS,..] [BYTES,..] [PIECES,..] [ROUNDS]`

use bench_timing::median;
use collectives::{AllReduceAlgorithm, Config, Result};
use collectives_bench::{
    all_reduce_rate, loopback_ring_all_reduce, loopback_ring_bandwidth,
    loopback_ring_bandwidth_in_memory, BenchTransport,
};

/// Timed samples per figure and round.
const SAMPLES: usize = 3;

fn busbw(n: usize, bytes: usize, piece: usize, direct: bool) -> Result<f64> {
    let engine = Config {
        all_reduce: AllReduceAlgorithm::Ring,
        ring_piece_bytes: piece,
        direct_receive: direct,
        ..Config::default()
    };
    Ok(all_reduce_rate(BenchTransport::Tcp, n, bytes, engine, SAMPLES)?.median)
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
    println!("TCP (loopback, ranks as threads) ring all-reduce busbw GB/s, f32 sum; median of {rounds} rounds,");
    println!("each figure the median of {SAMPLES} samples of >= 32 MiB per link");
    println!("variant: piece size, `d` direct receive, `s` staged; ratios: medians over the rounds of variant / ring-n and / ar-n");
    for &n in &ranks {
        for &bytes in &sizes {
            let mut got = vec![Vec::new(); variants.len()];
            let mut to_ring = vec![Vec::new(); variants.len()];
            let mut to_ar = vec![Vec::new(); variants.len()];
            let (mut reference, mut in_memory, mut ideal) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..rounds {
                let ring = loopback_ring_bandwidth(bytes, n, SAMPLES)?.median;
                let ar = loopback_ring_all_reduce(bytes, n, SAMPLES)?.median;
                reference.push(ring);
                ideal.push(ar);
                in_memory.push(loopback_ring_bandwidth_in_memory(bytes, n, SAMPLES)?.median);
                for (i, &(piece, direct)) in variants.iter().enumerate() {
                    let b = busbw(n, bytes, piece, direct)?;
                    got[i].push(b);
                    to_ring[i].push(b / ring);
                    to_ar[i].push(b / ar);
                }
            }
            println!(
                "ranks {n}, {bytes} bytes: ring-n {:.3}, ring-n from memory {:.3}, ar-n {:.3}",
                median(reference),
                median(in_memory),
                median(ideal)
            );
            for (i, &(piece, direct)) in variants.iter().enumerate() {
                println!(
                    "  {:>8} {} {:>8.3} {:>6.0}% of ring-n {:>6.0}% of ar-n",
                    piece,
                    if direct { "d" } else { "s" },
                    median(got[i].clone()),
                    100.0 * median(to_ring[i].clone()),
                    100.0 * median(to_ar[i].clone())
                );
            }
        }
    }
    Ok(())
}
