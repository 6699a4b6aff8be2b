//! The WASI context plugins run with: nothing granted, deterministic clocks and randomness, and
//! stdout/stderr captured into a bounded buffer that keeps the tail.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// The instant every plugin sees as "now": 2023-11-14T22:13:20Z (1.7e9 s after the epoch).
pub const FIXED_WALL_CLOCK: Duration = Duration::from_secs(1_700_000_000);

/// Builds the context of one store: no files (no preopens), no environment, no arguments, no
/// sockets or name lookups, stdin closed, a fixed wall clock, a monotonic clock that never
/// advances, fixed-pattern "random" bytes, and stdout and stderr sent to `output`.
pub(crate) fn deterministic_ctx(output: &TailPipe) -> WasiCtx {
    let mut b = WasiCtxBuilder::new();
    b.stdout(output.clone())
        .stderr(output.clone())
        .wall_clock(FixedWallClock)
        .monotonic_clock(FrozenMonotonicClock)
        .secure_random(Deterministic::new(vec![0x5e, 0x12, 0x7e, 0x00]))
        .insecure_random(Deterministic::new(vec![0x2a, 0x17, 0x99, 0x01]))
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    b.build()
}

struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        FIXED_WALL_CLOCK
    }
}

struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A write-only pipe that accepts everything and keeps only the last `capacity` bytes. A plugin
/// that prints without end is never blocked or failed by it; its memory stays bounded.
#[derive(Clone)]
pub(crate) struct TailPipe {
    inner: Arc<Mutex<Tail>>,
}

struct Tail {
    buf: Vec<u8>,
    capacity: usize,
    dropped: u64,
}

impl TailPipe {
    pub(crate) fn new(capacity: usize) -> TailPipe {
        TailPipe {
            inner: Arc::new(Mutex::new(Tail {
                buf: Vec::new(),
                capacity,
                dropped: 0,
            })),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut t = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let capacity = t.capacity;
        if bytes.len() >= capacity {
            t.dropped += (t.buf.len() + bytes.len() - capacity) as u64;
            t.buf.clear();
            t.buf.extend_from_slice(&bytes[bytes.len() - capacity..]);
            return;
        }
        t.buf.extend_from_slice(bytes);
        if t.buf.len() > capacity {
            let excess = t.buf.len() - capacity;
            t.buf.drain(..excess);
            t.dropped += excess as u64;
        }
    }

    /// The kept tail as text (lossy UTF-8), prefixed with a note when output was dropped.
    pub(crate) fn tail(&self) -> String {
        let t = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let text = String::from_utf8_lossy(&t.buf);
        if t.dropped > 0 {
            format!("[{} earlier bytes dropped]\n{text}", t.dropped)
        } else {
            text.into_owned()
        }
    }
}

impl IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TailPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for TailPipe {
    async fn ready(&mut self) {}
}

/// How much a guest may write in one call; the pipe is always ready for this much more.
const WRITE_PERMIT: usize = 64 << 10;

impl OutputStream for TailPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl tokio::io::AsyncWrite for TailPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The monotonic-clock interface whose sleeps [`link_timeless_sleeps`] replaces; the version
/// wasmtime-wasi links (a plugin's older 0.2 import resolves to it).
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Time does not pass inside a plugin (its monotonic clock is frozen), so a sleep or a timed
/// poll completes at once instead of blocking the host thread, where neither fuel nor the epoch
/// deadline could stop it: `subscribe-duration` and `subscribe-instant` return pollables that
/// are already ready. wasmtime-wasi's own versions sleep in real time.
pub(crate) fn link_timeless_sleeps(
    linker: &mut wasmtime::component::Linker<crate::store::PluginState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::{DynPollable, subscribe};

    fn elapsed(
        table: &mut wasmtime::component::ResourceTable,
    ) -> wasmtime::Result<(Resource<DynPollable>,)> {
        let r = table.push(Elapsed)?;
        Ok((subscribe(table, r)?,))
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap("subscribe-duration", |mut cx, (_nanos,): (u64,)| {
        elapsed(cx.data_mut().table())
    })?;
    clock.func_wrap("subscribe-instant", |mut cx, (_instant,): (u64,)| {
        elapsed(cx.data_mut().table())
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A deadline that has already passed.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl Pollable for Elapsed {
    async fn ready(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_pipe_keeps_the_last_bytes() {
        let p = TailPipe::new(8);
        p.push(b"hello ");
        assert_eq!(p.tail(), "hello ");
        p.push(b"world!");
        assert_eq!(p.tail(), "[4 earlier bytes dropped]\no world!");
        p.push(&[b'x'; 100]);
        assert_eq!(
            p.tail(),
            format!("[104 earlier bytes dropped]\n{}", "x".repeat(8))
        );
    }
}
