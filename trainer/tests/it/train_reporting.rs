//! What a training run reports while and after it runs, through the `trainer` binary on the
//! tiny fixture model: TensorBoard event files that hold exactly `metrics.jsonl` (read back here
//! by a decoder of their own, and by the `tensorboard` Python package when it is installed),
//! `--report-to jsonl`, and plain progress lines when stderr is not a terminal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use swerve_trainer::report::metrics_log;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2")
}

/// Runs the trainer with stderr piped (not a terminal) and progress lines at every update.
fn trainer(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .args(args)
        .current_dir(dir)
        .env("SWERVE_PROGRESS_INTERVAL", "0")
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("trainer runs");
    assert!(
        out.status.success(),
        "trainer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// CRC-32C, bit by bit (independent of the trainer's table).
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn masked(data: &[u8]) -> u32 {
    ((crc32c(data) >> 15) | (crc32c(data) << 17)).wrapping_add(0xA282_EAD8)
}

/// A protobuf field's value.
#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
}

fn varint(data: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = data[*at];
        *at += 1;
        value |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return value;
        }
    }
    panic!("varint longer than 10 bytes");
}

fn fields(data: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < data.len() {
        let key = varint(data, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(data, &mut at)),
            1 => {
                at += 8;
                Field::Fixed64(data[at - 8..at].try_into().unwrap())
            }
            2 => {
                let len = varint(data, &mut at) as usize;
                at += len;
                Field::Bytes(&data[at - len..at])
            }
            5 => {
                at += 4;
                Field::Fixed32(data[at - 4..at].try_into().unwrap())
            }
            wire => panic!("wire type {wire}"),
        };
        out.push((key >> 3, field));
    }
    out
}

/// A decoded event: step, file_version, tag → value.
#[derive(Debug, Default)]
struct Event {
    wall_time: f64,
    step: u64,
    file_version: Option<String>,
    values: BTreeMap<String, f32>,
}

/// Reads an event file: checks each record's framing and both CRCs, decodes each `Event`.
fn read_events(path: &Path) -> Vec<Event> {
    let bytes = fs_err::read(path).unwrap();
    let mut at = 0;
    let mut events = Vec::new();
    while at < bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
        let len_crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        assert_eq!(
            len_crc,
            masked(len_bytes),
            "length CRC of the record at {at}"
        );
        let data = &bytes[at + 12..at + 12 + len];
        let data_crc = u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap());
        assert_eq!(data_crc, masked(data), "data CRC of the record at {at}");
        at += 16 + len;
        let mut event = Event::default();
        for (number, field) in fields(data) {
            match (number, field) {
                (1, Field::Fixed64(b)) => event.wall_time = f64::from_le_bytes(b),
                (2, Field::Varint(v)) => event.step = v,
                (3, Field::Bytes(b)) => {
                    event.file_version = Some(String::from_utf8(b.to_vec()).unwrap());
                }
                (5, Field::Bytes(summary)) => {
                    for (number, value) in fields(summary) {
                        let (1, Field::Bytes(value)) = (number, value) else {
                            panic!("Summary field {number}");
                        };
                        let (mut tag, mut simple) = (String::new(), None);
                        for (number, field) in fields(value) {
                            match (number, field) {
                                (1, Field::Bytes(b)) => {
                                    tag = String::from_utf8(b.to_vec()).unwrap()
                                }
                                (2, Field::Fixed32(b)) => simple = Some(f32::from_le_bytes(b)),
                                other => panic!("Summary.Value field {other:?}"),
                            }
                        }
                        event.values.insert(tag, simple.expect("simple_value"));
                    }
                }
                other => panic!("Event field {other:?}"),
            }
        }
        events.push(event);
    }
    events
}

/// The run folder holds one event file: a `brain.Event:2` header, then one event per line of
/// `metrics.jsonl` with its step and every metric as `train/<name>`, NaN for `null`.
fn assert_events_mirror_metrics(run: &Path) {
    let files: Vec<PathBuf> = fs_err::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("events.out.tfevents.")
        })
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let parts: Vec<&str> = name.splitn(5, '.').collect();
    assert!(
        parts[3].parse::<u64>().is_ok() && !parts[4].is_empty(),
        "{name}"
    );

    let events = read_events(&files[0]);
    let metrics = metrics_log::read(&run.join("metrics.jsonl")).unwrap();
    assert!(!metrics.is_empty());
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    assert!(events[0].wall_time > 1.6e9);
    assert_eq!(events.len(), metrics.len() + 1);
    for (event, m) in events[1..].iter().zip(&metrics) {
        assert_eq!(event.step, m.step);
        assert!(event.wall_time >= events[0].wall_time);
        let expected: BTreeMap<String, f32> = m
            .values
            .iter()
            .map(|(k, v)| (format!("train/{k}"), *v as f32))
            .collect();
        assert_eq!(
            event.values.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        for (tag, value) in &event.values {
            let want = expected[tag];
            assert!(
                value.to_bits() == want.to_bits() || (value.is_nan() && want.is_nan()),
                "{tag} at step {}: {value} != {want}",
                m.step
            );
        }
    }
}

/// Runs the `tensorboard` package's EventAccumulator over the runs, or prints why not.
fn check_with_tensorboard_package(runs: &[&Path]) {
    let probe = Command::new("python3")
        .args(["-c", "import tensorboard"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        swerve_tests::skip(
            "reading the event files with the tensorboard package",
            "the tensorboard Python package is not installed (scripts/setup.sh)",
        );
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tensorboard/check_events.py");
    let out = Command::new("python3")
        .arg(script)
        .args(runs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("scalars match metrics.jsonl").count(),
        runs.len(),
        "{stdout}"
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn sft_and_grpo_write_tensorboard_events_and_progress_lines() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let model = fixture();
    let model = model.to_str().unwrap();
    let pairs: String = (0..4)
        .map(|i| {
            format!(
                "{{\"prompt\": \"w{i} w{}\", \"completion\": \"w7 w7 w{}\"}}\n",
                i + 10,
                i + 20
            )
        })
        .collect();
    fs_err::write(work.join("pairs.jsonl"), pairs).unwrap();
    let tasks: String = (0..2)
        .map(|i| {
            serde_json::json!({
                "instance_id": format!("t__t-{i}"),
                "problem_statement": format!("w{i} w{}", i + 10),
                "code_context": {"a.py": "w1\n"},
                "oracle_new_content": {"a.py": "w2\n"},
            })
            .to_string()
                + "\n"
        })
        .collect();
    fs_err::write(work.join("tasks.jsonl"), tasks).unwrap();

    // SFT: six steps, a checkpoint every three; then resumed from step 3 to the end.
    let sft_args = |extra: &[&'static str]| {
        let mut args = vec![
            "sft",
            "--model",
            model,
            "--data",
            "pairs.jsonl",
            "--output",
            "sft",
            "--save-steps",
            "3",
            "--set",
            "max_steps=6",
            "--set",
            "per_device_train_batch_size=2",
        ];
        args.extend_from_slice(extra);
        args
    };
    let out = trainer(work, &sft_args(&[]));
    let log = stderr(&out);
    for step in 1..=6 {
        assert!(log.contains(&format!("sft step {step}/6 loss ")), "{log}");
    }
    assert!(log.contains("eta "), "{log}");
    assert_events_mirror_metrics(&work.join("sft"));
    let first = metrics_log::read(&work.join("sft/metrics.jsonl")).unwrap();
    trainer(work, &sft_args(&["--resume", "sft/checkpoint-3"]));
    assert_events_mirror_metrics(&work.join("sft"));
    let resumed = metrics_log::read(&work.join("sft/metrics.jsonl")).unwrap();
    assert_eq!(
        first.iter().map(|m| m.get("loss")).collect::<Vec<_>>(),
        resumed.iter().map(|m| m.get("loss")).collect::<Vec<_>>()
    );

    // The folder now holds this run: a new run there is refused, and so is continuing its
    // checkpoint with other data, each naming the flag that allows it.
    fs_err::write(
        work.join("other.jsonl"),
        "{\"prompt\": \"w1\", \"completion\": \"w2\"}\n",
    )
    .unwrap();
    let refused = |args: &[&str], says: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_trainer"))
            .args(args)
            .current_dir(work)
            .output()
            .expect("trainer runs");
        let log = stderr(&out);
        assert!(
            !out.status.success() && log.contains(says),
            "{args:?}: {log}"
        );
    };
    refused(&sft_args(&[]), "--overwrite-output-dir");
    let mut other = sft_args(&["--resume", "sft/checkpoint-3"]);
    other[4] = "other.jsonl";
    refused(&other, "--allow-other-run");
    // Metrics without a checkpoint: nothing to continue, and said so.
    fs_err::create_dir_all(work.join("metrics-only")).unwrap();
    fs_err::write(work.join("metrics-only/metrics.jsonl"), "{\"step\": 1}\n").unwrap();
    let mut metrics_only = sft_args(&[]);
    metrics_only[6] = "metrics-only";
    refused(&metrics_only, "it has no checkpoint to continue");
    assert_eq!(
        metrics_log::read(&work.join("sft/metrics.jsonl"))
            .unwrap()
            .len(),
        resumed.len(),
        "a refused run leaves the folder as it was"
    );

    // --report-to jsonl: no event file.
    trainer(work, &{
        let mut args = sft_args(&["--report-to", "jsonl"]);
        args[6] = "sft-jsonl";
        args
    });
    assert!(work.join("sft-jsonl/metrics.jsonl").is_file());
    assert!(fs_err::read_dir(work.join("sft-jsonl")).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("events.")
    }));

    // GRPO with the bundled format reward: reward metrics per function, NaN std of one group.
    let out = trainer(
        work,
        &[
            "grpo",
            "--model",
            model,
            "--dataset",
            "tasks.jsonl",
            "--plugin",
            "format",
            "--prompt-format",
            "bare",
            "--output",
            "grpo",
            "--set",
            "max_steps=2",
            "--set",
            "num_generations=2",
            "--set",
            "per_device_train_batch_size=2",
            "--set",
            "max_completion_length=4",
            "--reward-jobs",
            "1",
        ],
    );
    let log = stderr(&out);
    assert!(log.contains("grpo step 1/2 reward "), "{log}");
    assert!(log.contains("grpo step 2/2 reward "), "{log}");
    assert_events_mirror_metrics(&work.join("grpo"));
    let grpo = metrics_log::read(&work.join("grpo/metrics.jsonl")).unwrap();
    assert!(
        grpo[0].values.contains_key("rewards/format/mean"),
        "{:?}",
        grpo[0]
    );

    // Generation in predict: a line per batch.
    let out = trainer(
        work,
        &[
            "predict",
            "--model",
            "sft/checkpoint-6",
            "--dataset",
            "tasks.jsonl",
            "--output",
            "predictions.jsonl",
            "--prompt-format",
            "bare",
            "--batch",
            "1",
            "--max-new-tokens",
            "4",
        ],
    );
    let log = stderr(&out);
    assert!(log.contains("predict task 1/2 elapsed "), "{log}");
    assert!(log.contains("predict task 2/2 elapsed "), "{log}");

    check_with_tensorboard_package(&[&work.join("sft"), &work.join("grpo")]);
}
