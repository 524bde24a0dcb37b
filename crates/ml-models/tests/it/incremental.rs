//! Class-incremental learning on the real data sets (skipped with a message when absent).

use ml_models::incremental::{
    load_fashion_mnist, run_method, Arch, CilConfig, ClassData, Method, StreamConfig, TaskStream,
};

use crate::common::data_file;

#[test]
fn digits_stream_joint_beats_fine_tuning() {
    let Some(p) = data_file("images/digits.csv") else {
        return;
    };
    let data = ClassData::from_csv_label_last(&p, Some((8, 8))).unwrap();
    assert_eq!((data.len(), data.dim, data.classes), (1797, 64, 10));
    let (train, test) = data.stratified_split(0.3, 0).unwrap();
    let stream = TaskStream::new(train, test, &StreamConfig::default()).unwrap();
    assert_eq!(stream.tasks.len(), 5);
    let cfg = CilConfig {
        arch: Arch::Mlp { hidden: vec![64] },
        steps_per_task: 60,
        memory: 100,
        ..CilConfig::default()
    };
    let ft = run_method(&stream, &Method::FineTune, &cfg).unwrap();
    let joint = run_method(&stream, &Method::Joint, &cfg).unwrap();
    let (f, j) = (ft.metrics.final_accuracy(), joint.metrics.final_accuracy());
    assert!(f < 0.35, "fine-tuning keeps only the last task: {f}");
    assert!(j > f + 0.3, "joint {j} vs fine-tuning {f}");
}

#[test]
fn fashion_mnist_from_the_debian_package() {
    let Some(p) = data_file("fashion-mnist/train-labels-idx1-ubyte.gz") else {
        return;
    };
    let (train, test) = load_fashion_mnist(p.parent().unwrap()).unwrap();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    assert_eq!(
        (train.dim, train.image, train.classes),
        (784, Some((28, 28)), 10)
    );
    assert!(train.x.iter().all(|v| (0.0..=1.0).contains(v)));
    // 5 tasks × 2 classes, 10% labels; every class has 6 000 training and 1 000 test rows.
    let s = TaskStream::new(train, test, &StreamConfig::default()).unwrap();
    for t in &s.tasks {
        assert_eq!(t.classes.len(), 2);
        assert_eq!(
            (t.labeled.len(), t.unlabeled.len(), t.test.len()),
            (1200, 10_800, 2000)
        );
    }
}
