//! Test support for curate's integration tests: a run that reads its output back, and a mock
//! relevant-file model. The inputs come from `swerve_tests::curation`.

use std::path::Path;

use swerve_curate::output::{Funnel, Rejected, Task, read_funnel, read_jsonl};
use swerve_curate::{Config, Inputs, Output};

/// The three output files of a run, parsed.
pub(crate) struct Written {
    pub tasks: Vec<Task>,
    pub rejected: Vec<Rejected>,
    pub funnel: Funnel,
}

/// Runs curate into `out` and reads the files back.
pub(crate) fn run(inputs: &Inputs, config: &Config, out: &Path) -> Written {
    let funnel = swerve_curate::run(
        inputs,
        config,
        &Output {
            dir: out.to_owned(),
            parquet: false,
        },
        &(),
    )
    .unwrap();
    let written = read_output(out);
    assert_eq!(written.funnel, funnel);
    assert!(
        std::fs::read_dir(out).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".curate-")),
        "the spill folder is removed"
    );
    written
}

pub(crate) fn read_output(dir: &Path) -> Written {
    Written {
        tasks: read_jsonl(&dir.join("tasks.jsonl")).unwrap(),
        rejected: read_jsonl(&dir.join("rejected.jsonl")).unwrap(),
        funnel: read_funnel(&dir.join("funnel.json")).unwrap(),
    }
}

/// A one-answer OpenAI-compatible chat server on 127.0.0.1: every request to it gets a reply
/// whose `choices[0].message.content` is `content`. Returns the base URL (`http://…/v1`) and a
/// counter of requests served.
pub(crate) fn mock_chat_server(
    content: &str,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let content = content.to_owned();
    mock_chat_server_with(move |_| content.clone())
}

/// An OpenAI-compatible chat server on 127.0.0.1 whose answer to each request (its JSON body)
/// is `answer`'s. Returns the base URL (`http://…/v1`) and a counter of requests served.
pub(crate) fn mock_chat_server_with(
    answer: impl Fn(&serde_json::Value) -> String + Send + 'static,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut request = vec![0; length];
            reader.read_exact(&mut request).unwrap();
            assert!(first.starts_with("POST /v1/chat/completions"), "{first}");
            let request: serde_json::Value = serde_json::from_slice(&request).unwrap();
            assert_eq!(request["temperature"], 0);
            counter.fetch_add(1, Ordering::SeqCst);
            let content = answer(&request);
            let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}]})
                .to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
        }
    });
    (url, served)
}
