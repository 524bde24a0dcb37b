//! The QLoRA study's pretrained-checkpoint cache: a divergence after loading it names the file.

use ml_models::candle::Tensor;
use ml_models::models::Gpt;
use ml_models::train::{ParamStore, SeededInit};
use ml_studies::study::{run_study, NoHooks, StudyConfig, StudyData};
use ml_studies::StudyError;

#[test]
fn divergence_after_a_cached_checkpoint_names_the_file() {
    let source = "the quick brown fox jumps over the lazy dog. ".repeat(40);
    let target: Vec<String> = (0..40)
        .map(|i| format!("sentence number {i} about dogs and foxes."))
        .collect();
    let data = StudyData::new(&source, &target);
    let dir = std::env::temp_dir().join(format!("ml-studies-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ckpt = dir.join("pretrained.safetensors");
    let cfg = StudyConfig {
        seq_len: 16,
        batch: 2,
        pretrain_steps: 1,
        finetune_steps: 2,
        eval_windows: 2,
        ranks: vec![1],
        ref_rank: 1,
        alpha_rank: 1,
        pretrained_path: Some(ckpt.clone()),
        ..StudyConfig::quick()
    };

    // A checkpoint of the right shapes whose weights are NaN: loading succeeds, training
    // cannot.
    let mcfg = cfg.model(data.tokenizer.vocab_size()).unwrap();
    let mut store = ParamStore::new();
    Gpt::new(mcfg, &mut store, &mut SeededInit::new(1)).unwrap();
    for p in store.params() {
        let nan = Tensor::full(f32::NAN, p.var.shape(), p.var.device()).unwrap();
        p.var.set(&nan).unwrap();
    }
    store.save(&ckpt, &[]).unwrap();

    let err = run_study(&cfg, &data, &mut NoHooks).unwrap_err();
    match &err {
        StudyError::DivergedFromCache { path, .. } => assert_eq!(path, &ckpt),
        other => panic!("expected DivergedFromCache, got {other:?}"),
    }
    assert!(err.to_string().contains("pretrained.safetensors"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
