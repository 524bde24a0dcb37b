//! Every parser survives its committed corpus and a few thousand seeded mutations of it (the
//! bounded CI run, `pardis-fuzz --seconds 50`, goes further). A target without a corpus would
//! only be fuzzed from the empty input: each must have one.

use std::path::PathBuf;

const MUTATIONS: u64 = 1500;

#[test]
fn every_parser_survives_its_corpus_and_mutations() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    std::panic::set_hook(Box::new(|_| {}));
    let mut report = Vec::new();
    for t in pardis_fuzz::targets() {
        let corpus = pardis_fuzz::corpus(&dir, &t);
        assert!(!corpus.is_empty(), "no corpus for {}", t.name);
        let out = pardis_fuzz::fuzz(&t, &corpus, MUTATIONS, 0x5eed);
        if let Some(f) = out.failure {
            let _ = std::panic::take_hook();
            panic!(
                "{} panicked ({}) on {:?}",
                t.name,
                f.message,
                String::from_utf8_lossy(&f.input)
            );
        }
        report.push(format!("{} {}", t.name, out.inputs));
    }
    let _ = std::panic::take_hook();
    pardis_fuzz::remove_scratch();
    eprintln!("inputs per target: {}", report.join(", "));
}
