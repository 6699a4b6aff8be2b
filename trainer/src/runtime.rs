//! Process-wide settings that the CPU kernels need to run at full speed, applied once at the
//! start of a program that trains or generates (the `trainer` binary, the benchmark), and the
//! name of the CPU they run on, which benchmark output prints beside its figures
//! ([`cpu_label`]).
//!
//! - **The allocator keeps its memory.** A training step allocates and frees buffers of
//!   megabytes to hundreds of megabytes, hundreds of times. glibc's defaults return such
//!   buffers to the kernel (`mmap` above 32 MiB, heap trimming, one arena per thread), so
//!   every step faults the same pages in again and the kernel zeroes them: a quarter of a
//!   step's time in the profile. One arena, no `mmap` below 1 GiB and no trimming keep them.
//! - **The calling thread works.** The global rayon pool is built with the calling thread as
//!   one of its workers, as OpenMP does, so that a parallel kernel called from it runs in
//!   place instead of being handed to another thread and waited for (a wake-up per kernel).
//!   `RAYON_NUM_THREADS` still sets the total; with a total of one the pool keeps its own
//!   worker, since work handed to the pool from other threads (wasmtime compiles plugins on
//!   rayon) needs a worker that is not the caller.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The process's resident memory when [`init`] ran (the memory plan's "runtime" item).
static BASELINE: OnceLock<u64> = OnceLock::new();

/// The resident memory of this process when [`init`] ran: the binary, its libraries and the
/// thread pool, before any model is loaded. `None` before `init` or off Linux.
pub(crate) fn baseline_rss() -> Option<u64> {
    BASELINE.get().copied()
}

/// This process's resident memory now (`VmRSS`), in bytes; `None` off Linux.
pub(crate) fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// The CPU this process runs on, as benchmark output names it beside its figures: the brand
/// string, CPUID's family, model and stepping, and the widest vector instructions the CPU
/// kernels use on it (`Intel(R) Xeon(R) Processor, family 6, model 207, stepping 2,
/// AVX-512`). Off x86-64, the architecture alone.
pub fn cpu_label() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let id = raw_cpuid::CpuId::new();
        let brand = id
            .get_processor_brand_string()
            .map(|b| b.as_str().trim().to_owned())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "an unnamed x86-64 CPU".to_owned());
        let vector = crate::model::kernels::cpu::math::SimdLevel::detect().name();
        match id.get_feature_info() {
            Some(f) => format!(
                "{brand}, family {}, model {}, stepping {}, {vector}",
                f.family_id(),
                f.model_id(),
                f.stepping_id()
            ),
            None => format!("{brand}, {vector}"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH.to_owned()
    }
}

/// Applies the settings above. Call it before any other thread or parallel work starts; a
/// second call fails, since the rayon pool exists by then.
pub fn init() -> Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; no other thread is allocating
        // yet (the caller's contract), and a rejected value leaves the default in place.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        }
    }
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1);
    let builder = rayon::ThreadPoolBuilder::new();
    // The calling thread only runs rayon work it starts itself, so work handed to the pool
    // from other threads (wasmtime compiles plugins on rayon) needs at least one other worker.
    let builder = if threads >= 2 {
        builder.use_current_thread()
    } else {
        builder
    };
    builder
        .build_global()
        .map_err(|source| Error::ThreadPool { source })?;
    if let Some(rss) = resident_bytes() {
        let _ = BASELINE.set(rss);
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    /// The label's family, model and stepping are the kernel's, as `/proc/cpuinfo` gives them.
    #[test]
    fn cpu_label_names_the_family_model_and_stepping_linux_reports() {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("read /proc/cpuinfo");
        let field = |name: &str| {
            info.lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == name).then(|| v.trim().to_owned())
                })
                .unwrap_or_else(|| panic!("/proc/cpuinfo has no {name:?}"))
        };
        let label = cpu_label();
        let expected = format!(
            "family {}, model {}, stepping {}",
            field("cpu family"),
            field("model"),
            field("stepping")
        );
        assert!(label.contains(&expected), "{label:?} lacks {expected:?}");
        assert!(
            label.starts_with(field("model name").as_str()),
            "{label:?} does not start with the model name"
        );
    }
}
