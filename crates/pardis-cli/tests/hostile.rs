//! Hostile input to the CLI: inputs that never end, unknown names, closed pipes, full disks and
//! output files that already exist. Each case must end at once with a clear error and exit
//! status 1 (or quietly with 0 on a closed pipe), never a panic, a huge allocation or a
//! replaced file.

use std::io::Read;
use std::process::{Command, Stdio};

mod common;
use common::fails_with;

#[test]
fn endless_inputs_are_capped() {
    if !std::path::Path::new("/dev/zero").exists() {
        eprintln!("skipped: no /dev/zero");
        return;
    }
    fails_with(&["plan", "--graph", "/dev/zero"], "longer than");
    fails_with(&["plan", "--mesh-json", "/dev/zero"], "longer than");
    fails_with(&["plan", "--hf-config", "/dev/zero"], "longer than");
    fails_with(&["memory", "--hf-config", "/dev/zero"], "longer than");
}

#[test]
fn unknown_names_and_oversized_meshes_are_errors() {
    fails_with(
        &["datasets", "list", "--kind", "bogus"],
        "unknown kind `bogus`",
    );
    fails_with(&["plan", "--nodes", "100000"], "more than 65536 devices");
}

#[test]
fn a_full_disk_is_reported_and_a_closed_pipe_ends_quietly() {
    if std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .is_ok()
    {
        let out = Command::new(env!("CARGO_BIN_EXE_pardis"))
            .args(["datasets", "list"])
            .stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .output()
            .expect("run pardis");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("writing to standard output"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    } else {
        eprintln!("skipped the full-disk case: no /dev/full");
    }
    // The reader goes away before pardis writes: its first write meets a closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_pardis"))
        .args(["datasets", "list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pardis");
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
}

#[cfg(feature = "ml")]
#[test]
fn study_outputs_are_never_replaced_unasked() {
    let dir = std::env::temp_dir().join(format!("pardis-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("not-a-dir");
    std::fs::write(&file, b"mine").unwrap();
    fails_with(
        &[
            "ml",
            "qlora-study",
            "--quick",
            "--out",
            file.to_str().unwrap(),
        ],
        "is not a directory",
    );
    let png = dir.join("qlora-rank-sweep.png");
    std::fs::write(&png, b"my plot").unwrap();
    fails_with(
        &[
            "ml",
            "qlora-study",
            "--quick",
            "--out",
            dir.to_str().unwrap(),
        ],
        "pass --force",
    );
    assert_eq!(std::fs::read(&png).unwrap(), b"my plot");
    assert_eq!(std::fs::read(&file).unwrap(), b"mine");
    std::fs::remove_dir_all(&dir).unwrap();
}
