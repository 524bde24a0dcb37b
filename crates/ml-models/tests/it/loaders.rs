//! Loaders on hand-made bytes and on the real files.

use std::io::Write;
use std::path::Path;

use ml_models::data::*;
use ml_models::MlError;

use crate::common::{data_file, npy_bytes, scratch};

#[test]
fn npy_c_and_fortran_order() {
    let vals: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let c = parse_npy(&npy_bytes("<f4", false, "(2, 3)", &vals), Path::new("c")).unwrap();
    assert_eq!(c.shape, vec![2, 3]);
    assert_eq!(c.data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let f = parse_npy(&npy_bytes("<f4", true, "(2, 3)", &vals), Path::new("f")).unwrap();
    assert_eq!(f.data, vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    let i: Vec<u8> = [7i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
    let a = parse_npy(&npy_bytes("<i8", false, "(2,)", &i), Path::new("i")).unwrap();
    assert_eq!(a.data, vec![7.0, -1.0]);
    assert!(matches!(
        parse_npy(&npy_bytes("<f4", false, "(3, 3)", &vals), Path::new("t")),
        Err(MlError::Format { .. })
    ));
    assert!(matches!(
        parse_npy(b"PK garbage", Path::new("g")),
        Err(MlError::Format { .. })
    ));
    assert!(matches!(
        parse_npy(&npy_bytes("<c16", false, "(1,)", &[0; 16]), Path::new("x")),
        Err(MlError::Format { .. })
    ));
}

#[test]
fn npz_real_adbench_glass() {
    let Some(p) = data_file("tabular-ad/adbench/14_glass.npz") else {
        return;
    };
    let z = read_npz(&p).unwrap();
    let x = &z["X"];
    assert_eq!(x.shape, vec![214, 7]);
    // Reference values read from the raw Fortran-ordered bytes with Python's struct module.
    assert_eq!(&x.data[..3], &[0.467651, 0.321584, 0.76888]);
    assert_eq!(x.data[7], 0.496412);
    assert!((x.data.iter().sum::<f64>() - 643.788_764).abs() < 1e-6);
    assert_eq!(z["y"].data.iter().sum::<f64>(), 9.0);
}

#[test]
fn csv_real_digits_and_errors() {
    let t = parse_csv("a,b\n1,2\n\n3,4\n", Path::new("m")).unwrap();
    assert_eq!(
        (t.rows, t.cols, t.header.clone().unwrap()[1].as_str()),
        (2, 2, "b")
    );
    assert_eq!(t.column(1), vec![2.0, 4.0]);
    assert!(matches!(
        parse_csv("1,2\n3\n", Path::new("m")),
        Err(MlError::Format { .. })
    ));
    assert!(matches!(
        parse_csv("1,2\n3,x\n", Path::new("m")),
        Err(MlError::Format { .. })
    ));
    let Some(p) = data_file("images/digits.csv") else {
        return;
    };
    let d = read_csv(&p).unwrap();
    assert_eq!((d.rows, d.cols), (1797, 65));
    assert!(d
        .column(64)
        .iter()
        .all(|&l| (0.0..=9.0).contains(&l) && l.fract() == 0.0));
}

#[test]
fn idx_gzip_roundtrip_and_errors() {
    let mut raw = vec![0u8, 0, 0x08, 3];
    for d in [2u32, 2, 3] {
        raw.extend(d.to_be_bytes());
    }
    raw.extend(0u8..12);
    let dir = scratch("idx");
    let p = dir.join("a.idx.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    std::fs::write(&p, gz.finish().unwrap()).unwrap();
    let a = read_idx(&p).unwrap();
    assert_eq!(a.shape, vec![2, 2, 3]);
    assert_eq!(a.data, IdxData::U8((0u8..12).collect()));
    assert!(matches!(
        parse_idx(&raw[..20], Path::new("t")),
        Err(MlError::Format { .. })
    ));
    let mut f = vec![0u8, 0, 0x0D, 1, 0, 0, 0, 1];
    f.extend(1.5f32.to_be_bytes());
    assert_eq!(
        parse_idx(&f, Path::new("f")).unwrap().data,
        IdxData::F64(vec![1.5])
    );
    let fm = Path::new("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
    if fm.is_file() {
        assert_eq!(read_idx(fm).unwrap().shape, vec![10_000]);
    }
}

#[test]
fn fewrel_real_files() {
    if let Some(p) = data_file("relation-extraction/fewrel/val_wiki.json") {
        let f = read_fewrel(&p).unwrap();
        assert_eq!(f.relations.len(), 16);
        assert!(f.relations.iter().all(|(_, v)| v.len() == 700));
        let inst = &f.relations[0].1[0];
        assert!(inst.h.2[0].iter().all(|&i| i < inst.tokens.len()));
    }
    if let Some(p) = data_file("relation-extraction/fewrel/pubmed_unsupervised.json") {
        let v = read_fewrel_unlabelled(&p).unwrap();
        assert_eq!(v.len(), 2500);
        assert!(v[0]
            .sentence()
            .starts_with("the contribution of brush border"));
    }
    let dir = scratch("fewrel");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"P1\": [{\"tokens\": 3}]}").unwrap();
    assert!(matches!(read_fewrel(&bad), Err(MlError::Format { .. })));
}

#[test]
fn char_tokenizer_and_batches() {
    let tok = CharTokenizer::fit("hello world");
    assert_eq!(tok.vocab_size(), 9);
    let ids = tok.encode("hello!");
    assert_eq!(ids[5], 0);
    assert_eq!(tok.decode(&ids), "hello?");
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
    let stream: Vec<u32> = (0..100).collect();
    let (x, y) = lm_batch(&stream, 3, 8, &mut rng, &candle_core::Device::Cpu).unwrap();
    let (x, y) = (x.to_vec2::<u32>().unwrap(), y.to_vec2::<u32>().unwrap());
    assert!(x
        .iter()
        .zip(&y)
        .all(|(a, b)| a.iter().zip(b).all(|(p, q)| q == &(p + 1))));
    assert!(lm_batch(&stream[..5], 1, 8, &mut rng, &candle_core::Device::Cpu).is_err());
    let ev = lm_eval_batches(&stream, 4, 10, 100, &candle_core::Device::Cpu).unwrap();
    assert_eq!(ev.len(), 3);
}
