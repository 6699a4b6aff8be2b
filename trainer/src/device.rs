//! Which device a command runs on: `--device cpu|cuda[:N]`, and
//! [`on_device!`](crate::on_device), which runs a device-generic body on the device a
//! [`DeviceSpec`] names.
//!
//! Every command's body is generic over the dfdx device (`D: Kernels<f32>`); this module is the
//! one place that turns a flag into a concrete device. A build without the `cuda` feature
//! parses `cuda` (so that a config or script stays valid) and refuses it with an error that
//! says how to build one with it.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A device as `--device` names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The CPU (fused kernels, all cores).
    #[default]
    Cpu,
    /// A CUDA GPU by ordinal (`cuda` is `cuda:0`).
    Cuda(usize),
}

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| format!("unknown device `{s}` (cpu, cuda or cuda:N)")),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceSpec {
    /// Whether this binary can run on the device at all (CUDA needs the `cuda` feature).
    pub fn check_available(self) -> Result<()> {
        match self {
            Self::Cpu => Ok(()),
            Self::Cuda(_) if cfg!(feature = "cuda") => Ok(()),
            Self::Cuda(_) => Err(Error::Device {
                device: self.to_string(),
                reason: "this trainer was built without the `cuda` feature; build it with \
                         `cargo install --path trainer --features cuda` (docs/gpu.md)"
                    .into(),
            }),
        }
    }

    /// The device of the rank that is `local_rank` on its node: the CPU stays the CPU; `cuda` (any
    /// ordinal) becomes `cuda:<local rank>`, or `cuda:0` when the rank sees a single GPU (Slurm's
    /// `--gpus-per-task=1` leaves each task one visible device). A single process
    /// (`local_rank` 0 of one) keeps what it was given.
    pub fn for_local_rank(self, local_rank: usize, ranks: usize) -> Self {
        match self {
            Self::Cuda(_) if ranks > 1 => Self::Cuda(match visible_cuda_devices() {
                Some(1) => 0,
                _ => local_rank,
            }),
            other => other,
        }
    }

    /// The CUDA device, opened with `seed` for dfdx's random numbers.
    #[cfg(feature = "cuda")]
    pub fn open_cuda(ordinal: usize, seed: u64) -> Result<dfdx::prelude::Cuda> {
        dfdx::prelude::Cuda::try_build(ordinal, seed).map_err(|e| Error::Device {
            device: format!("cuda:{ordinal}"),
            reason: format!("{e:?}"),
        })
    }
}

/// How many CUDA devices this process sees (`None` without the `cuda` feature or a driver).
fn visible_cuda_devices() -> Option<usize> {
    #[cfg(feature = "cuda")]
    {
        cudarc::driver::CudaDevice::count()
            .ok()
            .and_then(|n| usize::try_from(n).ok())
    }
    #[cfg(not(feature = "cuda"))]
    None
}

/// Runs `$body` with `$dev` bound to a reference to the device `$spec` names (a
/// [`DeviceSpec`]), where `$body` is generic code over `D: Kernels<f32>`; evaluates to the
/// body's value, which must be a [`Result`](crate::error::Result). A `cuda` spec in a build
/// without the feature is the error of [`DeviceSpec::check_available`]. The expansion tests
/// `feature = "cuda"` in the calling crate, so it is meant for this package (the library and
/// the `trainer` binary), whose features are the same.
#[macro_export]
macro_rules! on_device {
    ($spec:expr, |$dev:ident| $body:expr) => {{
        let spec: $crate::device::DeviceSpec = $spec;
        match spec {
            $crate::device::DeviceSpec::Cpu => {
                let device = ::dfdx::prelude::Cpu::default();
                let $dev = &device;
                $body
            }
            #[cfg(feature = "cuda")]
            $crate::device::DeviceSpec::Cuda(ordinal) => {
                let device = $crate::device::DeviceSpec::open_cuda(ordinal, 0)?;
                let $dev = &device;
                $body
            }
            #[cfg(not(feature = "cuda"))]
            other @ $crate::device::DeviceSpec::Cuda(_) => {
                other.check_available()?;
                unreachable!("check_available refuses cuda without the feature")
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_devices() {
        assert_eq!("cpu".parse(), Ok(DeviceSpec::Cpu));
        assert_eq!("cuda".parse(), Ok(DeviceSpec::Cuda(0)));
        assert_eq!("cuda:3".parse(), Ok(DeviceSpec::Cuda(3)));
        assert_eq!(DeviceSpec::Cuda(3).to_string(), "cuda:3");
        let err = "gpu".parse::<DeviceSpec>().unwrap_err();
        assert!(err.contains("unknown device `gpu`"), "{err}");
        assert!("cuda:x".parse::<DeviceSpec>().is_err());
    }

    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        let result: Result<()> = (|| on_device!(DeviceSpec::Cuda(0), |_dev| Ok(())))();
        if cfg!(feature = "cuda") {
            return;
        }
        let err = result.unwrap_err().to_string();
        assert!(
            err.contains("cuda:0") && err.contains("`cuda` feature"),
            "{err}"
        );
        let ok: Result<usize> = (|| on_device!(DeviceSpec::Cpu, |_dev| Ok(1)))();
        assert_eq!(ok.unwrap(), 1);
    }
}
