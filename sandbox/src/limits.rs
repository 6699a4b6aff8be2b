//! Resource and network limits of a container, each a typed field with a documented default.
//!
//! The defaults are swerve's own profile: no network, 2 CPUs, 4 GiB of memory without swap and
//! 1024 processes. [`Limits::unlimited`] is the SWE-bench compatibility profile (bridge network,
//! no limits), which reproduces the reference harness's results and is what its reports assume.

use serde::{Deserialize, Serialize};

/// Which network a container is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No network at all: the container sees only the loopback interface (`network_mode: none`).
    #[default]
    None,
    /// Docker's default bridge network, with outbound access to wherever the host reaches.
    Bridge,
}

impl Network {
    pub(crate) fn mode(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Bridge => "bridge",
        }
    }
}

/// Limits applied to a container when it is created; they hold for every command run in it.
///
/// `None` in a numeric field means "no limit". What is not covered: disk use (the container's
/// writable layer can grow until the host disk is full), wall-clock time (that is per command, see
/// [`crate::ExecRequest::timeout`]) and I/O bandwidth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Network attachment. Default: [`Network::None`].
    pub network: Network,
    /// CPU quota in billionths of a CPU (Docker's `nano_cpus`; `1_000_000_000` is one CPU).
    /// Default: `Some(2_000_000_000)`, two CPUs.
    pub nano_cpus: Option<u64>,
    /// Memory limit in bytes; swap is limited to the same value, so no swap is used and a process
    /// that goes past it is killed by the kernel (exit status 137). Default: `Some(4 GiB)`.
    pub memory_bytes: Option<u64>,
    /// Most processes and threads alive at once in the container (Docker's `pids_limit`).
    /// Default: `Some(1024)`.
    pub pids: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            network: Network::None,
            nano_cpus: Some(2_000_000_000),
            memory_bytes: Some(4 << 30),
            pids: Some(1024),
        }
    }
}

impl Limits {
    /// The SWE-bench compatibility profile: bridge network and no CPU, memory or pid limits.
    pub fn unlimited() -> Self {
        Self {
            network: Network::Bridge,
            nano_cpus: None,
            memory_bytes: None,
            pids: None,
        }
    }

    /// The engine's host configuration for these limits.
    pub(crate) fn host_config(&self) -> bollard::models::HostConfig {
        // Docker's API takes signed integers; clamp instead of wrapping on absurd values.
        let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        bollard::models::HostConfig {
            network_mode: Some(self.network.mode().to_owned()),
            nano_cpus: self.nano_cpus.map(signed),
            memory: self.memory_bytes.map(signed),
            memory_swap: self.memory_bytes.map(signed),
            pids_limit: self.pids.map(signed),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_locked_down() {
        let hc = Limits::default().host_config();
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.nano_cpus, Some(2_000_000_000));
        assert_eq!(hc.memory, Some(4 << 30));
        assert_eq!(hc.memory_swap, hc.memory);
        assert_eq!(hc.pids_limit, Some(1024));
    }

    #[test]
    fn unlimited_sets_nothing_but_bridge() {
        let hc = Limits::unlimited().host_config();
        assert_eq!(hc.network_mode.as_deref(), Some("bridge"));
        assert_eq!((hc.nano_cpus, hc.memory, hc.pids_limit), (None, None, None));
    }
}
