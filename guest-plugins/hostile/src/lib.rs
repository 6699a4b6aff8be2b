//! A hostile reward plugin for the host's tests. Each sample's `attack` metadata picks what it
//! does; a sample without one is scored 1.0 like a well-behaved plugin would. Probes that look
//! outside the sandbox (files, environment, network, clock, randomness) report what they saw as
//! metrics, so a test can assert that they saw nothing.

use std::hint::black_box;
use std::io::Write;

use swerve_plugin_kit::reward::{PluginInfo, Sample, Score};

struct Hostile;

impl swerve_plugin_kit::RewardPlugin for Hostile {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Attacks the host on demand (test fixture)".into(),
        }
    }

    fn score(sample: &Sample) -> Result<Score, String> {
        match sample.meta("attack").unwrap_or("none") {
            "none" => Ok(Score::reward(1.0)),
            "loop" => {
                let mut x = 0u64;
                loop {
                    x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            "alloc-4g" => {
                // 64 MiB at a time up to 4 GiB, touching every chunk so that it is really used.
                let mut chunks = Vec::new();
                for _ in 0..64 {
                    let mut chunk = vec![0u8; 64 << 20];
                    chunk[12345] = 1;
                    chunks.push(black_box(chunk));
                }
                Ok(Score::reward(chunks.len() as f64))
            }
            "alloc-huge" => {
                let v = black_box(vec![1u8; (2usize << 30) - 1]);
                Ok(Score::reward(v[v.len() - 1] as f64))
            }
            "recurse" => Ok(Score::reward(recurse(black_box(1)) as f64)),
            "panic" => panic!(
                "hostile plugin panicked on purpose for sample {}",
                sample.id
            ),
            "exit" => std::process::exit(3),
            "error" => Err(format!("sample {} is not scorable", sample.id)),
            "nan" => Ok(Score::reward(f64::NAN)),
            // Results as large as the memory budget allows: the host caps what it passes on.
            "huge-error" => Err("e".repeat(40 << 20)),
            "huge-score" => {
                let mut score = Score::reward(0.25);
                score.message = Some("m".repeat(8 << 20));
                let long = "n".repeat(1000);
                for i in 0..1_000 {
                    score = score.with_metric(format!("{i:04}{long}"), i as f64);
                }
                Ok(score)
            }
            // Whatever result the completion's bytes spell (`echo_result`): the fuzz target of
            // the host's lifting of plugin results drives this.
            "echo" => echo_result(&sample.completion),
            "output" => {
                // 64 MiB of output: the host keeps only a bounded tail.
                let line = [b'x'; 1023];
                let mut err = std::io::stderr();
                for _ in 0..(64 << 10) {
                    let _ = err.write_all(&line);
                    let _ = err.write_all(b"\n");
                }
                let _ = err.write_all(b"the end of the hostile output\n");
                Ok(Score::reward(0.5))
            }
            "files" => {
                let mut seen = 0.0;
                for path in ["/", ".", "/etc/passwd", "/proc/self/environ"] {
                    if std::fs::read_dir(path).is_ok() || std::fs::read(path).is_ok() {
                        seen += 1.0;
                    }
                }
                Ok(Score::reward(0.0).with_metric("paths_readable", seen))
            }
            "env" => Ok(Score::reward(0.0)
                .with_metric("env_vars", std::env::vars_os().count() as f64)
                .with_metric("args", std::env::args_os().count() as f64)),
            "network" => {
                let mut opened = 0.0;
                for addr in ["127.0.0.1:80", "1.1.1.1:53", "[::1]:80"] {
                    if std::net::TcpStream::connect(addr).is_ok() {
                        opened += 1.0;
                    }
                }
                if std::net::UdpSocket::bind("0.0.0.0:0")
                    .is_ok_and(|s| s.send_to(b"x", "8.8.8.8:53").is_ok())
                {
                    opened += 1.0;
                }
                let resolved = std::net::ToSocketAddrs::to_socket_addrs("example.com:80").is_ok();
                Ok(Score::reward(0.0)
                    .with_metric("connections", opened)
                    .with_metric("dns", resolved as u8 as f64))
            }
            "clock" => {
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(-1.0, |d| d.as_secs_f64());
                let start = std::time::Instant::now();
                let mut x = 0u64;
                for i in 0..1_000_000u64 {
                    x = black_box(x ^ i);
                }
                Ok(Score::reward(0.0)
                    .with_metric("wall_clock_secs", wall)
                    .with_metric("elapsed_nanos", start.elapsed().as_nanos() as f64)
                    .with_metric("x", (x & 1) as f64))
            }
            "sleep" => {
                // An hour, then (almost) forever: blocking host calls that neither fuel nor the
                // epoch deadline can interrupt unless the host makes time stand still.
                let start = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_secs(3600));
                std::thread::sleep(std::time::Duration::MAX);
                Ok(Score::reward(1.0)
                    .with_metric("elapsed_nanos", start.elapsed().as_nanos() as f64))
            }
            "random" => {
                use std::hash::{BuildHasher, Hasher};
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(42);
                Ok(Score::reward(0.0)
                    .with_metric("hash_low_bits", (h.finish() & 0xffff_ffff) as f64))
            }
            other => Err(format!("unknown attack `{other}`")),
        }
    }
}

/// Reads a result out of `recipe`'s bytes, so that a fuzzer can make the plugin return any
/// shape of result: `err` or `ok`, any reward bits (NaN, infinities, subnormals), up to 1023
/// metrics with any names and values, and strings from empty to several MiB made of the
/// recipe's own characters. Bytes past the end read as zero.
fn echo_result(recipe: &str) -> Result<Score, String> {
    let mut r = Recipe {
        bytes: recipe.as_bytes(),
        at: 0,
    };
    // Text of a length the recipe picks, cycling through the recipe's own characters.
    let text = |len: usize| -> String {
        if recipe.is_empty() {
            return String::new();
        }
        let mut out = recipe.repeat(len / recipe.len() + 1);
        let mut end = len.min(out.len());
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out
    };
    let kind = r.byte();
    if kind & 1 == 1 {
        return Err(text(r.long_len()));
    }
    let mut score = Score {
        reward: (kind & 2 != 0).then(|| f64::from_bits(r.uint(8))),
        metrics: Vec::new(),
        message: None,
    };
    for _ in 0..r.uint(2) % 1024 {
        let len = usize::from(r.byte()) * usize::from(r.byte() % 4 + 1);
        score = score.with_metric(text(len), f64::from_bits(r.uint(8)));
    }
    if kind & 4 != 0 {
        score.message = Some(text(r.long_len()));
    }
    Ok(score)
}

/// The recipe of [`echo_result`], read front to back.
struct Recipe<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Recipe<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A big-endian number of `n` bytes.
    fn uint(&mut self, n: usize) -> u64 {
        (0..n).fold(0, |acc, _| acc << 8 | u64::from(self.byte()))
    }

    /// A string length up to 65,535 × 64 bytes.
    fn long_len(&mut self) -> usize {
        self.uint(2) as usize * (1 + usize::from(self.byte() % 64))
    }
}

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 16]);
    if black_box(depth) == 0 {
        frame[3]
    } else {
        recurse(depth + 1) + frame[7]
    }
}

swerve_plugin_kit::export_reward!(Hostile);
