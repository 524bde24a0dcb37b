//! Hostile input to the file readers: archives and headers that lie about sizes, zip and gzip
//! bombs, files past the size limit, FIFOs. Each is a typed error, returned promptly, with
//! memory sized by the bytes actually there.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};
use ml_models::data::{
    parse_npy, read_csv, read_fewrel, read_idx, read_npy, read_npz, read_pid2name,
    SubwordTokenizer, MAX_DIMS, MAX_FILE_BYTES, MAX_VALUES,
};
use ml_models::fewshot::FewShotEncoder;
use ml_models::models::{Bert, BertConfig};
use ml_models::train::params::read_checkpoint;
use ml_models::MlError;

use crate::common::{npy_bytes, scratch};

/// A `.npy` file of `n` unsigned bytes `0, 1, 2, ...` (mod 256).
fn npy_u8(n: usize) -> Vec<u8> {
    let body: Vec<u8> = (0..n).map(|i| i as u8).collect();
    npy_bytes("|u1", false, &format!("({n},)"), &body)
}

/// One entry of a hand-built zip archive: what the central directory declares may lie.
struct Entry {
    name: &'static str,
    /// Uncompressed content.
    content: Vec<u8>,
    /// Deflate (method 8) instead of stored (method 0).
    deflate: bool,
    /// The uncompressed size the archive declares; at or above `u32::MAX` it goes into a ZIP64
    /// extra field.
    declared: u64,
}

/// A zip archive of `entries` (CRCs right, sizes as declared), built by hand so that the
/// declared sizes can lie.
fn zip_bytes(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let data = if e.deflate {
            let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            d.write_all(&e.content).unwrap();
            d.finish().unwrap()
        } else {
            e.content.clone()
        };
        let mut crc = flate2::Crc::new();
        crc.update(&e.content);
        let (size32, extra) = if e.declared >= u64::from(u32::MAX) {
            let mut x = vec![1, 0, 8, 0];
            x.extend(e.declared.to_le_bytes());
            (u32::MAX, x)
        } else {
            (e.declared as u32, Vec::new())
        };
        let offset = out.len() as u32;
        let method: u16 = if e.deflate { 8 } else { 0 };
        // The fields local and central headers share, from "version needed" on.
        let common = |v: &mut Vec<u8>| {
            v.extend(45u16.to_le_bytes()); // version needed
            v.extend(0u16.to_le_bytes()); // flags
            v.extend(method.to_le_bytes());
            v.extend([0, 0, 0x21, 0]); // time, date
            v.extend(crc.sum().to_le_bytes());
            v.extend((data.len() as u32).to_le_bytes());
            v.extend(size32.to_le_bytes());
            v.extend((e.name.len() as u16).to_le_bytes());
            v.extend((extra.len() as u16).to_le_bytes());
        };
        out.extend(0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend(e.name.as_bytes());
        out.extend(&extra);
        out.extend(&data);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend(0x032Du16.to_le_bytes()); // made by: Unix, 4.5
        common(&mut central);
        central.extend([0; 6]); // comment length, disk, internal attributes
        central.extend([0; 4]); // external attributes
        central.extend(offset.to_le_bytes());
        central.extend(e.name.as_bytes());
        central.extend(&extra);
    }
    let cd_offset = out.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0; 4]); // disk numbers
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(cd_offset.to_le_bytes());
    out.extend([0; 2]); // comment length
    out
}

/// `read_npz` of the archive of `entries` written to `dir/name`.
fn npz(dir: &Path, name: &str, entries: &[Entry]) -> ml_models::Result<Vec<String>> {
    let p = dir.join(name);
    std::fs::write(&p, zip_bytes(entries)).unwrap();
    read_npz(&p).map(|m| m.into_keys().collect())
}

/// The reason of an [`MlError::Format`] of `format`, or a panic naming what came instead.
fn format_reason<T: std::fmt::Debug>(r: ml_models::Result<T>, format: &str) -> String {
    match r {
        Err(MlError::Format {
            format: f, reason, ..
        }) if f == format => reason,
        other => panic!("expected a {format} format error, got {other:?}"),
    }
}

/// The hand-built archives are real zip files: honest ones read back.
#[test]
fn npz_hand_built_archive_reads() {
    let dir = scratch("hostile-npz-ok");
    let a = npy_u8(300);
    let entries = [
        Entry {
            name: "a.npy",
            declared: a.len() as u64,
            content: a.clone(),
            deflate: true,
        },
        Entry {
            name: "b.npy",
            declared: a.len() as u64,
            content: a,
            deflate: false,
        },
    ];
    assert_eq!(npz(&dir, "ok.npz", &entries).unwrap(), ["a", "b"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An entry's declared size is a claim: a huge one is refused, not allocated (it used to be
/// `Vec::with_capacity(declared)`, a capacity-overflow panic), and an entry holding more (a zip
/// bomb) or fewer bytes than it declares is refused, naming the entry.
#[test]
fn npz_entries_that_lie_about_their_size_are_refused() {
    let dir = scratch("hostile-npz");
    let a = npy_u8(1 << 20);
    for declared in [u64::MAX, MAX_FILE_BYTES + 1] {
        let why = format_reason(
            npz(
                &dir,
                "huge.npz",
                &[Entry {
                    name: "x.npy",
                    content: a.clone(),
                    deflate: true,
                    declared,
                }],
            ),
            "npz",
        );
        assert!(
            why.contains(&format!("entry x.npy declares {declared} bytes, more than")),
            "{why}"
        );
    }
    // A bomb: 1 MiB of array behind a declared 100 bytes (1 KiB compressed).
    let why = format_reason(
        npz(
            &dir,
            "bomb.npz",
            &[Entry {
                name: "x.npy",
                content: a.clone(),
                deflate: true,
                declared: 100,
            }],
        ),
        "npz",
    );
    assert!(
        why.contains("entry x.npy holds more than the 100 bytes it declares"),
        "{why}"
    );
    // Fewer bytes than declared (stored and deflated).
    for deflate in [false, true] {
        let small = npy_u8(10);
        let declared = small.len() as u64 + 10;
        let why = format_reason(
            npz(
                &dir,
                "short.npz",
                &[Entry {
                    name: "y.npy",
                    content: small,
                    deflate,
                    declared,
                }],
            ),
            "npz",
        );
        assert!(
            why.contains(&format!(
                "entry y.npy holds {} bytes, it declares {declared}",
                declared - 10
            )),
            "{why}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two entries that name the same array (`a` and `a.npy`, or `X.npy` twice) are refused, not
/// one silently kept; a bad array inside an archive is named by its entry.
#[test]
fn npz_duplicate_and_bad_entries_are_named() {
    let dir = scratch("hostile-npz-dup");
    let a = npy_u8(4);
    let entry = |name| Entry {
        name,
        declared: a.len() as u64,
        content: a.clone(),
        deflate: false,
    };
    let why = format_reason(npz(&dir, "dup.npz", &[entry("a"), entry("a.npy")]), "npz");
    assert!(why.contains("two entries hold the array a"), "{why}");
    // The same entry name twice: the zip crate keeps one (keyed by name); the directory's count
    // tells.
    let why = format_reason(
        npz(
            &dir,
            "same.npz",
            &[entry("X.npy"), entry("b"), entry("X.npy")],
        ),
        "npz",
    );
    assert!(
        why.contains("the central directory lists 3 entries, 2 distinct names"),
        "{why}"
    );
    let why = format_reason(
        npz(
            &dir,
            "bad.npz",
            &[Entry {
                name: "z.npy",
                content: b"not npy".to_vec(),
                deflate: false,
                declared: 7,
            }],
        ),
        "npz",
    );
    assert!(why.contains("entry z.npy: missing"), "{why}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An IDX file `dims` of unsigned bytes followed by `body`.
fn idx_bytes(dims: &[u32], body: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        b.extend(d.to_be_bytes());
    }
    b.extend(body);
    b
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// IDX headers that claim more or less than the body holds, plain and gzip-compressed: a
/// short body, trailing bytes (a gzip bomb behind a small header is not decompressed), a shape
/// past the limit.
#[test]
fn idx_headers_that_disagree_with_the_body_are_refused() {
    let dir = scratch("hostile-idx");
    let p = dir.join("x.idx");
    let read = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        format_reason(read_idx(&p), "idx")
    };
    for gz in [false, true] {
        let maybe_gz = |b: Vec<u8>| if gz { gzip(&b) } else { b };
        // Dimensions beyond the body.
        let why = read(&maybe_gz(idx_bytes(&[2, 3], &[1; 5])));
        assert!(
            why.contains("body has 5 bytes, shape [2, 3] needs 6"),
            "{why}"
        );
        // Dimensions whose product overflows.
        let why = read(&maybe_gz(idx_bytes(&[u32::MAX; 4], &[1; 5])));
        assert!(why.contains("needs more than"), "{why}");
    }
    // Trailing bytes after the body.
    let why = read(&idx_bytes(&[2, 3], &[1; 7]));
    assert!(
        why.contains("body has 7 bytes, shape [2, 3] needs 6"),
        "{why}"
    );
    // A gzip bomb behind a 4-byte array: 16 MiB of zeros that are not decompressed.
    let mut bomb = idx_bytes(&[4], &[1; 4]);
    bomb.resize(bomb.len() + (16 << 20), 0);
    let why = read(&gzip(&bomb));
    assert!(
        why.contains("the decompressed stream holds more than the 12 bytes shape [4] needs"),
        "{why}"
    );
    // A compressed header whose shape needs more than the limit (4 GiB).
    let why = read(&gzip(&idx_bytes(&[1 << 16, 1 << 16], &[1; 8])));
    assert!(
        why.contains(&format!(
            "shape [65536, 65536] needs more than the {MAX_FILE_BYTES} bytes"
        )),
        "{why}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file one byte over the limit (sparse: no disk space) is refused by every data reader
/// before it is read.
#[test]
fn files_past_the_limit_are_refused_unread() {
    let dir = scratch("hostile-huge");
    let huge = dir.join("huge");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(MAX_FILE_BYTES + 1).unwrap();
    drop(f);
    let limit = format!("more than the {MAX_FILE_BYTES} bytes this reader accepts");
    let results: [(&str, ml_models::Result<()>); 6] = [
        ("npy", read_npy(&huge).map(drop)),
        ("npz", read_npz(&huge).map(drop)),
        ("idx", read_idx(&huge).map(drop)),
        ("csv", read_csv(&huge).map(drop)),
        ("bert config", BertConfig::from_file(&huge).map(drop)),
        (
            "tokenizer.json",
            SubwordTokenizer::from_file(&huge, 8).map(drop),
        ),
    ];
    for (format, r) in results {
        let why = format_reason(r, format);
        assert!(why.contains(&limit), "{format}: {why}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Makes a FIFO at `p` with `mkfifo`; false when there is no `mkfifo` to run.
fn mkfifo(p: &Path) -> bool {
    std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success())
}

/// Releases a reader blocked in open(2) on the FIFO `p` by opening it for writing (the reader
/// then sees end of file at once). Non-blocking, so this never waits itself: with no reader
/// there, the open fails (ENXIO), which is ignored.
fn release(p: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        const O_NONBLOCK: i32 = 0o4000;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        const O_NONBLOCK: i32 = 0x4; // macOS and the BSDs
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(O_NONBLOCK)
                .open(p),
        );
    }
}

type Reader = fn(&Path) -> ml_models::Result<()>;

/// Every reader of a whole file refuses a FIFO at once (opening one waits for a writer; reading
/// one may never end). A reader still blocked after the deadline fails the test, and is released
/// by opening the FIFO for writing without blocking, so the test cannot hang.
#[test]
fn fifos_are_refused_promptly() {
    let dir = scratch("hostile-fifo");
    let readers: [(&str, Reader); 12] = [
        ("npy", |p| read_npy(p).map(drop)),
        ("npz", |p| read_npz(p).map(drop)),
        ("idx", |p| read_idx(p).map(drop)),
        ("csv", |p| read_csv(p).map(drop)),
        ("fewrel", |p| read_fewrel(p).map(drop)),
        ("pid2name", |p| read_pid2name(p).map(drop)),
        ("bert config", |p| BertConfig::from_file(p).map(drop)),
        ("tokenizer", |p| SubwordTokenizer::from_file(p, 8).map(drop)),
        ("bert weights", |p| {
            Bert::load(BertConfig::new(10, 4, 1, 1, 8, 8), p).map(drop)
        }),
        ("checkpoint", |p| read_checkpoint(p, &Device::Cpu).map(drop)),
        ("minilm fingerprint config", |p| {
            FewShotEncoder::minilm_fingerprint(p.parent().unwrap()).map(drop)
        }),
        ("minilm fingerprint weights", |p| {
            FewShotEncoder::minilm_fingerprint(p.parent().unwrap()).map(drop)
        }),
    ];
    let (tx, rx) = mpsc::channel();
    let mut fifos: Vec<PathBuf> = Vec::new();
    for (i, (what, read)) in readers.into_iter().enumerate() {
        let sub = dir.join(i.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        // The fingerprint reads config.json, tokenizer.json, model.safetensors in turn.
        let name = match what {
            "minilm fingerprint config" => "config.json",
            "minilm fingerprint weights" => {
                std::fs::write(sub.join("config.json"), "{}").unwrap();
                std::fs::write(sub.join("tokenizer.json"), "{}").unwrap();
                "model.safetensors"
            }
            _ => "f",
        };
        let fifo = sub.join(name);
        if !mkfifo(&fifo) {
            println!("skipping: no mkfifo");
            return;
        }
        fifos.push(fifo.clone());
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((i, what, read(&fifo)));
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut done = vec![false; fifos.len()];
    let mut failures = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok((i, what, r)) = rx.recv_timeout(left) else {
            break;
        };
        done[i] = true;
        match r {
            Err(MlError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::InvalidInput
                    && source.to_string().contains("a FIFO, not a regular file") => {}
            other => failures.push(format!("{what}: {other:?}")),
        }
        if done.iter().all(|&d| d) {
            break;
        }
    }
    for (i, fifo) in fifos.iter().enumerate() {
        if !done[i] {
            failures.push(format!("{} blocked on the FIFO", fifo.display()));
            release(fifo);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A BERT `config.json` the encoder cannot run (heads that do not divide the width, a size of
/// zero) is refused when read, and by `Bert::load`; the number of layers it
/// claims does not size an allocation (it used to be `Vec::with_capacity(num_hidden_layers)`,
/// a capacity-overflow panic before the weights were looked at).
#[test]
fn bert_config_claims_are_checked() {
    let dir = scratch("hostile-bert");
    let cfg_path = dir.join("config.json");
    let json = |heads: usize, layers: usize| {
        format!(
            r#"{{"vocab_size": 10, "hidden_size": 4, "num_hidden_layers": {layers},
                "num_attention_heads": {heads}, "intermediate_size": 8,
                "max_position_embeddings": 8, "type_vocab_size": 2, "layer_norm_eps": 1e-12}}"#
        )
    };
    for heads in [0, 3] {
        std::fs::write(&cfg_path, json(heads, 1)).unwrap();
        let why = format_reason(BertConfig::from_file(&cfg_path), "bert config");
        assert!(
            why.contains(&format!("hidden size 4 is not divisible by {heads} heads")),
            "{why}"
        );
    }
    // An empty vocabulary, width or table: an encoder of empty or NaN outputs.
    let sizes = [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "type_vocab_size",
        "max_position_embeddings",
    ];
    for field in sizes {
        let mut v: serde_json::Value = serde_json::from_str(&json(2, 1)).unwrap();
        v[field] = 0.into();
        std::fs::write(&cfg_path, v.to_string()).unwrap();
        let why = format_reason(BertConfig::from_file(&cfg_path), "bert config");
        assert!(why.contains(&format!("{field} is 0")), "{why}");
    }
    std::fs::write(&cfg_path, json(2, usize::MAX / 2)).unwrap();
    let cfg = BertConfig::from_file(&cfg_path).unwrap();
    let weights = dir.join("model.safetensors");
    let mut m = HashMap::new();
    m.insert(
        "embeddings.word_embeddings.weight".to_string(),
        Tensor::zeros((10, 4), candle_core::DType::F32, &Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&m, &weights).unwrap();
    assert!(
        matches!(
            Bert::load(cfg, &weights),
            Err(MlError::MissingTensor { ref name, .. }) if name.starts_with("encoder.layer.0.")
        ),
        "{:?}",
        Bert::load(cfg, &weights).err()
    );
    let empty = BertConfig::new(0, 4, 1, 1, 8, 8);
    assert!(
        matches!(
            Bert::load(empty, &weights),
            Err(MlError::InvalidInput(ref why)) if why.contains("vocab_size is 0")
        ),
        "{:?}",
        Bert::load(empty, &weights).err()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A ZIP64 end record claiming more entries than its central directory can hold (46 bytes
/// each at least): the zip crate (1.3) reserves room for the claimed count before reading one
/// (hundreds of bytes each, an abort when that is more than memory); the reader refuses the
/// claim first, as a typed error. Claims of nearly one entry a byte of the archive, and of one
/// entry per 46 bytes of the archive (more than the 178 bytes of its directory hold), are both
/// refused.
#[test]
fn npz_claiming_more_entries_than_fit_is_refused() {
    let dir = scratch("hostile-npz-count");
    let p = dir.join("count.npz");
    let len: u64 = 8 << 20;
    for (counts32, claimed) in [(1, len - 200), (1, len / 46), (u16::MAX, 1)] {
        // The ZIP64 end record, its locator and the end record, at the end of a sparse file;
        // the central directory starts 200 bytes before the end.
        let mut tail = Vec::new();
        let zip64_end = len - 22 - 20 - 56;
        tail.extend(0x0606_4b50u32.to_le_bytes());
        tail.extend(44u64.to_le_bytes()); // size of the rest of the record
        tail.extend(45u16.to_le_bytes()); // made by
        tail.extend(45u16.to_le_bytes()); // needed
        tail.extend([0; 8]); // disk numbers
        tail.extend(claimed.to_le_bytes()); // entries on this disk
        tail.extend(claimed.to_le_bytes()); // entries
        tail.extend(100u64.to_le_bytes()); // central directory size
        tail.extend((len - 200).to_le_bytes()); // central directory offset
        tail.extend(0x0706_4b50u32.to_le_bytes());
        tail.extend(0u32.to_le_bytes());
        tail.extend(zip64_end.to_le_bytes());
        tail.extend(1u32.to_le_bytes());
        tail.extend(0x0605_4b50u32.to_le_bytes());
        tail.extend([0; 4]);
        tail.extend(counts32.to_le_bytes()); // entries on this disk (0xFFFF: in ZIP64)
        tail.extend(counts32.to_le_bytes()); // entries
        tail.extend([0xff; 8]); // central directory size and offset: in ZIP64
        tail.extend([0; 2]);
        assert_eq!(tail.len(), 98);
        let mut f = std::fs::File::create(&p).unwrap();
        f.set_len(len - tail.len() as u64).unwrap();
        std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)).unwrap();
        f.write_all(&tail).unwrap();
        drop(f);
        let why = format_reason(read_npz(&p), "npz");
        let want = if counts32 == u16::MAX {
            "the end record claims 65535 or more entries (ZIP64 counts are not accepted)"
                .to_string()
        } else {
            format!(
                "the archive claims {claimed} entries, more than the 178 bytes of its central \
                 directory hold (at most 3)"
            )
        };
        assert!(why.contains(&want), "{why}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `.npy` header of more dimensions than NumPy allows (64) is refused: reordering a
/// Fortran-order array cost a division per element and dimension (a 1 MB file of a
/// 100 000-dimension shape was minutes of CPU). At 64 dimensions it reads, in order.
#[test]
fn npy_dimensions_are_capped() {
    let p = Path::new("dims.npy");
    let ones = |k: usize| "1, ".repeat(k);
    let why = format_reason(
        parse_npy(
            &npy_bytes("|u1", true, &format!("({}10)", ones(100_000)), &[7; 10]),
            p,
        )
        .map(|a| a.shape.len()),
        "npy",
    );
    assert!(
        why.contains(&format!(
            "shape has more than the {MAX_DIMS} dimensions this reader accepts"
        )),
        "{why}"
    );
    assert!(parse_npy(
        &npy_bytes("|u1", false, &format!("({}2)", ones(MAX_DIMS)), &[7; 2]),
        p
    )
    .is_err());
    // 64 dimensions, Fortran order: (2, 1, ..., 1, 3) holds [[0, 1, 2], [3, 4, 5]] as 0 3 1 4 2 5.
    let a = parse_npy(
        &npy_bytes(
            "|u1",
            true,
            &format!("(2, {}3)", ones(MAX_DIMS - 2)),
            &[0, 3, 1, 4, 2, 5],
        ),
        p,
    )
    .unwrap();
    assert_eq!(a.shape.len(), MAX_DIMS);
    assert_eq!(a.data, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

/// One-byte values become 8-byte `f64`s: a shape of more than [`MAX_VALUES`] elements
/// (`MAX_FILE_BYTES` of values) is refused before its body is looked at, in `.npy`, `.npz`
/// and IDX files of values other than unsigned bytes (plain and gzip: a small compressed file
/// could otherwise ask for 8 GiB). The bodies here are tiny: nothing large is allocated.
#[test]
fn shapes_of_more_values_than_the_limit_are_refused() {
    let dir = scratch("hostile-values");
    let over = MAX_VALUES + 1;
    let claim = |descr| npy_bytes(descr, false, &format!("({over},)"), &[1; 16]);
    let expected = format!("shape [{over}] has {over} elements, more than the {MAX_VALUES}");
    for descr in ["|u1", "|i1", "|b1", "<f8"] {
        let why = format_reason(parse_npy(&claim(descr), Path::new("v.npy")), "npy");
        assert!(why.contains(&expected), "{descr}: {why}");
    }
    let x = claim("|u1");
    let why = format_reason(
        npz(
            &dir,
            "values.npz",
            &[Entry {
                name: "x.npy",
                declared: x.len() as u64,
                content: x,
                deflate: true,
            }],
        ),
        "npz",
    );
    assert!(why.contains(&format!("entry x.npy: {expected}")), "{why}");
    // IDX of signed bytes (type 0x09), 2^28 of them: 256 MiB of file, 2 GiB of values.
    let p = dir.join("values.idx");
    let mut idx = idx_bytes(&[1 << 14, 1 << 13, 2], &[1; 16]);
    idx[2] = 0x09;
    for bytes in [idx.clone(), gzip(&idx)] {
        std::fs::write(&p, bytes).unwrap();
        let why = format_reason(read_idx(&p), "idx");
        assert!(
            why.contains(&format!(
                "shape [16384, 8192, 2] has more than the {MAX_VALUES} elements"
            )),
            "{why}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A Fortran-order array with a zero dimension is empty, whatever its other dimensions (their
/// strides would overflow): read as an empty array, no panic.
#[test]
fn fortran_arrays_with_a_zero_dimension_are_empty() {
    let p = Path::new("empty.npy");
    let a = parse_npy(
        &npy_bytes("<f8", true, "(0, 4294967296, 4294967296)", &[]),
        p,
    )
    .expect("an empty array");
    assert_eq!(a.shape, vec![0, 1 << 32, 1 << 32]);
    assert!(a.data.is_empty());
}

/// Bytes after a `.npy` body are an error, as after an IDX body (in a file and in an archive).
#[test]
fn npy_trailing_bytes_are_refused() {
    let dir = scratch("hostile-npy-trailing");
    let mut a = npy_u8(6);
    a.push(0);
    let p = dir.join("t.npy");
    std::fs::write(&p, &a).unwrap();
    let expected = "body has 7 bytes, shape [6] needs 6 elements of 1 bytes";
    let why = format_reason(read_npy(&p), "npy");
    assert!(why.contains(expected), "{why}");
    let why = format_reason(
        npz(
            &dir,
            "t.npz",
            &[Entry {
                name: "t.npy",
                declared: a.len() as u64,
                content: a,
                deflate: false,
            }],
        ),
        "npz",
    );
    assert!(why.contains(&format!("entry t.npy: {expected}")), "{why}");
    std::fs::remove_dir_all(&dir).unwrap();
}
