//! The measurement behind the collectives' `copy` module: copy bandwidth of a plain `copy_from_slice`
//! and of the collectives' `copy_slice` per block size and per distance `dst - src` modulo
//! 4096 (the source page-aligned, the destination 2 MiB + `distance` after it, best of 3
//! samples of ≥ 128 MiB each). On AMD Zen with glibc ≥ 2.33 the plain copy collapses at
//! distances 1–31 for blocks between about 2 KiB and the L2 size.
//!
//! `cargo run --release -p collectives-bench --example copy_distance -- [SIZES] [DISTANCES]`
//! (defaults `4096,16384,65536,262144,1048576,16777216` and `0,16,32,64`).

use collectives::__private::copy_slice;
use std::time::Instant;

fn rate(bytes: usize, distance: usize, piecewise: bool) -> f64 {
    const FAR: usize = 2 << 20;
    let mut buf = vec![1u8; 4096 + FAR + 4096 + bytes];
    let src_at = buf.as_ptr().align_offset(4096);
    let dst_at = src_at + FAR.max(bytes.next_multiple_of(4096)) + distance;
    if buf.len() < dst_at + bytes {
        buf.resize(dst_at + bytes, 1);
    }
    let reps = ((128usize << 20) / bytes.max(1)).max(4);
    let mut best = 0f64;
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..reps {
            let (head, tail) = buf.split_at_mut(dst_at);
            let (dst, src) = (&mut tail[..bytes], &head[src_at..src_at + bytes]);
            if piecewise {
                copy_slice(dst, std::hint::black_box(src));
            } else {
                dst.copy_from_slice(std::hint::black_box(src));
            }
            std::hint::black_box(&mut buf);
        }
        best = best.max((bytes * reps) as f64 / start.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// A comma-separated list of whole numbers up to `max`, or `default`.
fn list(arg: Option<String>, default: &str, what: &str, max: usize) -> Result<Vec<usize>, String> {
    arg.as_deref()
        .unwrap_or(default)
        .split(',')
        .map(|s| match s.trim().parse::<usize>() {
            Ok(x) if x <= max => Ok(x),
            _ => Err(format!(
                "{what}: a comma-separated list of numbers up to {max}, not `{s}`"
            )),
        })
        .collect()
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let lists = list(
        args.next(),
        "4096,16384,65536,262144,1048576,16777216",
        "SIZES (bytes)",
        1 << 30,
    )
    .and_then(|s| {
        Ok((
            s,
            list(args.next(), "0,16,32,64", "DISTANCES (bytes)", 4095)?,
        ))
    });
    let (sizes, distances) = match lists {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}\nusage: copy_distance [SIZES] [DISTANCES]");
            return std::process::ExitCode::from(2);
        }
    };
    println!("copy GB/s, best of 3; plain = copy_from_slice, pieces = collectives' copy_slice");
    println!(
        "{:>10} {:>8} {:>8} {:>8} {:>8}",
        "bytes", "distance", "plain", "pieces", "ratio"
    );
    for &bytes in &sizes {
        for &distance in &distances {
            let plain = rate(bytes, distance, false);
            let pieces = rate(bytes, distance, true);
            println!(
                "{bytes:>10} {distance:>8} {plain:>8.1} {pieces:>8.1} {:>7.2}x",
                pieces / plain
            );
        }
    }
    std::process::ExitCode::SUCCESS
}
