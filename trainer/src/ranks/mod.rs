//! Data-parallel ranks: which of N cooperating processes this one is, and the few collectives
//! the training loops need (sum, gather, broadcast), behind one small trait.
//!
//! `mpirun -np N trainer grpo …` or `srun -n N trainer grpo …` starts N processes of the same
//! command; [`Ranks::from_env`] tells them apart. Each rank trains on its share of every batch
//! and the loops ([`crate::train`]) exchange what makes the run equal to one process with the
//! same global batch: gathered completions and rewards, summed metric counts, and gradients
//! summed before clipping and AdamW. A single process is world size 1, where every collective is
//! the identity and nothing else is linked or started.
//!
//! Transports: MPI for host buffers (feature `mpi`, the `mpi` crate over the system's library:
//! `ranks/mpi.rs`), and NCCL for CUDA gradient buffers (feature `nccl`: its communicator is
//! created from a unique id broadcast over MPI, `Collective::nccl`). There is no socket protocol of
//! swerve's own: the launcher (Slurm or `mpirun`) places and wires the processes.
//!
//! Not here: what is exchanged and when (the loops decide), and which device a rank uses
//! ([`crate::device::DeviceSpec::for_local_rank`]).

#[cfg(feature = "mpi")]
mod mpi;

use std::ops::Range;
use std::rc::Rc;

use dfdx::prelude::{Gradients, Shape, Tensor};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::model::{Kernels, ModelParams, Param};

/// The collectives of one group of ranks. Every rank must call the same collectives in the same
/// order; host buffers only (device buffers go through `Collective::nccl`, feature `nccl`, where
/// there is one).
pub trait Collective {
    /// This process's rank, `0..world_size`.
    fn rank(&self) -> usize;
    /// How many ranks there are.
    fn world_size(&self) -> usize;
    /// This process's rank among the ranks of its node (which GPU it takes).
    fn local_rank(&self) -> usize;
    /// Element-wise sum over all ranks, in place.
    fn all_reduce_f32(&self, buf: &mut [f32]) -> Result<()>;
    /// Element-wise sum over all ranks, in place.
    fn all_reduce_f64(&self, buf: &mut [f64]) -> Result<()>;
    /// Every rank's bytes, in rank order.
    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Ends every rank of the job now, with `code` (MPI_Abort): what a failed rank does so that
    /// the others do not wait for it forever.
    fn abort(&self, code: i32) -> !;
    /// The NCCL communicator for `device`'s ranks, created on first use; `None` where gradients
    /// go through the host.
    #[cfg(feature = "nccl")]
    fn nccl(
        &self,
        device: std::sync::Arc<cudarc::driver::CudaDevice>,
    ) -> Result<Option<Rc<cudarc::nccl::Comm>>>;
}

/// One process alone: every collective is the identity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Single;

impl Collective for Single {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn local_rank(&self) -> usize {
        0
    }
    fn all_reduce_f32(&self, _buf: &mut [f32]) -> Result<()> {
        Ok(())
    }
    fn all_reduce_f64(&self, _buf: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        Ok(vec![mine.to_vec()])
    }
    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
    #[cfg(feature = "nccl")]
    fn nccl(
        &self,
        _device: std::sync::Arc<cudarc::driver::CudaDevice>,
    ) -> Result<Option<Rc<cudarc::nccl::Comm>>> {
        Ok(None)
    }
}

/// A handle on this process's group of ranks (cheap to clone; single-threaded, as MPI is used
/// from the main thread only).
#[derive(Clone)]
pub struct Ranks {
    inner: Rc<dyn Collective>,
}

impl std::fmt::Debug for Ranks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {}", self.rank(), self.world_size())
    }
}

impl Default for Ranks {
    fn default() -> Self {
        Self::single()
    }
}

/// How many processes the launcher started, as its environment says, and which variable said
/// so: Open MPI's `mpirun`, a PMI launcher (MPICH's, Slurm's), or an `srun` job step.
fn launched_tasks() -> Option<(usize, &'static str)> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"]
        .into_iter()
        .find_map(|var| {
            let n = std::env::var(var).ok()?.trim().parse::<usize>().ok()?;
            (n > 1).then_some((n, var))
        })
}

impl Ranks {
    /// One process alone.
    pub fn single() -> Self {
        Self::new(Rc::new(Single))
    }

    /// A handle on `collective`.
    pub fn new(collective: Rc<dyn Collective>) -> Self {
        Self { inner: collective }
    }

    /// The ranks this process belongs to. A process that no launcher started as one of several
    /// (no `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE` or `SLURM_STEP_NUM_TASKS` above 1) is
    /// [`Ranks::single`] and starts no MPI; otherwise MPI is initialised and must agree with the
    /// launcher on the number of tasks (an `srun` whose MPI plugin does not wire the tasks
    /// together leaves each alone: an error that says which flag is missing).
    pub fn from_env() -> Result<Self> {
        let Some((tasks, var)) = launched_tasks() else {
            return Ok(Self::single());
        };
        #[cfg(feature = "mpi")]
        {
            let world = mpi::MpiRanks::init()?;
            if world.world_size() != tasks {
                return Err(Error::Ranks {
                    reason: format!(
                        "{var}={tasks} but MPI sees {} rank(s): the launcher did not connect the \
                         tasks (with Slurm, run `srun --mpi=pmix …`; `srun --mpi=list` shows the \
                         cluster's MPI plugins)",
                        world.world_size()
                    ),
                });
            }
            Ok(Self::new(Rc::new(world)))
        }
        #[cfg(not(feature = "mpi"))]
        Err(Error::Ranks {
            reason: format!(
                "{var}={tasks}: started as one of {tasks} tasks, but this trainer was built \
                 without the `mpi` feature; build it with `cargo install --path trainer \
                 --features mpi` (needs an MPI library, docs/cluster.md) or start one process"
            ),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// How many ranks there are.
    pub fn world_size(&self) -> usize {
        self.inner.world_size()
    }

    /// This process's rank on its node.
    pub fn local_rank(&self) -> usize {
        self.inner.local_rank()
    }

    /// Whether this is rank 0, the one that writes the run's files.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// The collective itself.
    pub fn collective(&self) -> &dyn Collective {
        &*self.inner
    }

    /// This rank's share of `n` items dealt in contiguous blocks: the first `n % world` ranks
    /// take one more.
    pub fn share(&self, n: usize) -> Range<usize> {
        share(n, self.rank(), self.world_size())
    }

    /// Sums `values` over all ranks, in place.
    pub fn sum(&self, values: &mut [f64]) -> Result<()> {
        if self.world_size() > 1 {
            self.inner.all_reduce_f64(values)?;
        }
        Ok(())
    }

    /// Every rank's `value`, in rank order.
    pub fn gather<T: Serialize + DeserializeOwned>(&self, value: T) -> Result<Vec<T>> {
        if self.world_size() == 1 {
            return Ok(vec![value]);
        }
        let bytes = postcard::to_stdvec(&value).map_err(|e| Error::Ranks {
            reason: format!("encoding what rank {} sends: {e}", self.rank()),
        })?;
        self.inner
            .all_gather_bytes(&bytes)?
            .iter()
            .enumerate()
            .map(|(rank, b)| {
                postcard::from_bytes(b).map_err(|e| Error::Ranks {
                    reason: format!("decoding what rank {rank} sent: {e}"),
                })
            })
            .collect()
    }

    /// Whether every rank holds the same bytes (a check that parameters agree, say).
    pub fn agree(&self, bytes: &[u8]) -> Result<bool> {
        if self.world_size() == 1 {
            return Ok(true);
        }
        let all = self.inner.all_gather_bytes(bytes)?;
        Ok(all.iter().all(|b| b == bytes))
    }

    /// Sums the gradient of every parameter of `params` over all ranks, in place.
    pub(crate) fn all_reduce_grads<D: Kernels<f32>>(
        &self,
        params: &ModelParams<f32, D>,
        grads: &mut Gradients<f32, D>,
    ) -> Result<()> {
        if self.world_size() == 1 {
            return Ok(());
        }
        for (_, p) in params.named() {
            match p {
                Param::Vector(t) => D::all_reduce_grad(grads, t, self)?,
                Param::Matrix(t) => D::all_reduce_grad(grads, t, self)?,
            }
        }
        Ok(())
    }

    /// Checks that every rank holds the same parameters (bit for bit), as summed gradients
    /// guarantee; an error naming the step otherwise (different model files on two nodes,
    /// say). Every rank must call it at the same step.
    pub(crate) fn check_same_params<D: Kernels<f32>>(
        &self,
        params: &ModelParams<f32, D>,
        step: u64,
    ) -> Result<()> {
        if self.world_size() == 1 {
            return Ok(());
        }
        // FNV-1a over the parameters' bits, tensor by tensor.
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        for (_, p) in params.named() {
            let values = match p {
                Param::Vector(t) => t.as_vec(),
                Param::Matrix(t) => t.as_vec(),
            };
            for v in values {
                digest = (digest ^ u64::from(v.to_bits())).wrapping_mul(0x100_0000_01b3);
            }
        }
        let digests = self.gather(digest)?;
        match digests.iter().position(|&d| d != digests[0]) {
            None => Ok(()),
            Some(rank) => Err(Error::Ranks {
                reason: format!(
                    "after step {step}, rank {rank}'s parameters differ from rank 0's (the \
                     ranks did not start from the same weights, or a gradient sum failed)"
                ),
            }),
        }
    }

    /// Ends the whole job after this rank's `error`: prints it naming the rank, then aborts
    /// every rank (a single process just exits with `code`).
    pub fn fail(&self, error: &dyn std::fmt::Display, code: i32) -> ! {
        if self.world_size() > 1 {
            eprintln!(
                "error: rank {} of {}: {error}",
                self.rank(),
                self.world_size()
            );
        } else {
            eprintln!("error: {error}");
        }
        self.inner.abort(code)
    }
}

/// Rank `rank`'s block of `n` items dealt to `world` ranks.
pub fn share(n: usize, rank: usize, world: usize) -> Range<usize> {
    let (base, extra) = (n / world, n % world);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

/// Element types whose host buffers the collectives sum.
pub(crate) trait HostSum: Sized {
    /// Sums `buf` over all ranks, in place.
    fn all_reduce(ranks: &Ranks, buf: &mut [Self]) -> Result<()>;
}

impl HostSum for f32 {
    fn all_reduce(ranks: &Ranks, buf: &mut [f32]) -> Result<()> {
        ranks.collective().all_reduce_f32(buf)
    }
}

impl HostSum for f64 {
    fn all_reduce(ranks: &Ranks, buf: &mut [f64]) -> Result<()> {
        ranks.collective().all_reduce_f64(buf)
    }
}

/// The CPU's gradient buffers are host memory: summed in place.
pub(crate) fn all_reduce_cpu_grad<S: Shape, E: dfdx::prelude::Dtype + HostSum>(
    grads: &mut Gradients<E, dfdx::prelude::Cpu>,
    t: &Tensor<S, E, dfdx::prelude::Cpu>,
    ranks: &Ranks,
) -> Result<()> {
    let buf = grads.get_or_alloc_mut(t).map_err(|e| Error::Ranks {
        reason: format!("allocating a gradient: {e:?}"),
    })?;
    E::all_reduce(ranks, buf)
}

/// A CUDA gradient: through NCCL on the device when the build has it, else copied to the host,
/// summed over MPI and copied back.
#[cfg(feature = "cuda")]
pub(crate) fn all_reduce_cuda_grad<S: Shape, E>(
    grads: &mut Gradients<E, dfdx::prelude::Cuda>,
    t: &Tensor<S, E, dfdx::prelude::Cuda>,
    ranks: &Ranks,
) -> Result<()>
where
    E: dfdx::prelude::Dtype + HostSum + cudarc::driver::DeviceRepr + CudaSum,
{
    let cuda = |e: &dyn std::fmt::Debug| Error::Ranks {
        reason: format!("a CUDA gradient: {e:?}"),
    };
    let buf = grads.get_or_alloc_mut(t).map_err(|e| cuda(&e))?;
    let slice: &mut cudarc::driver::CudaSlice<E> = buf;
    let device = slice.device();
    #[cfg(feature = "nccl")]
    if let Some(comm) = ranks.collective().nccl(device.clone())? {
        return E::nccl_sum(&comm, slice);
    }
    let mut host = device.dtoh_sync_copy(slice).map_err(|e| cuda(&e))?;
    E::all_reduce(ranks, &mut host)?;
    device
        .htod_sync_copy_into(&host, slice)
        .map_err(|e| cuda(&e))
}

/// Element types NCCL sums on the device (only with the `nccl` feature does it do anything).
#[cfg(feature = "cuda")]
pub trait CudaSum: Sized {
    /// Sums `slice` over the communicator's ranks, in place.
    #[cfg(feature = "nccl")]
    fn nccl_sum(
        comm: &cudarc::nccl::Comm,
        slice: &mut cudarc::driver::CudaSlice<Self>,
    ) -> Result<()>;
}

#[cfg(feature = "cuda")]
macro_rules! cuda_sum {
    ($($t:ty),*) => {$(
        impl CudaSum for $t {
            #[cfg(feature = "nccl")]
            fn nccl_sum(
                comm: &cudarc::nccl::Comm,
                slice: &mut cudarc::driver::CudaSlice<Self>,
            ) -> Result<()> {
                use cudarc::driver::DeviceSlice;
                let fail = |e: &dyn std::fmt::Debug| Error::Ranks {
                    reason: format!("NCCL all-reduce: {e:?}"),
                };
                // NCCL sums from one buffer into another; the sum lands in a fresh one that then
                // takes the gradient's place.
                let device = slice.device();
                let mut sum = device.alloc_zeros::<$t>(slice.len()).map_err(|e| fail(&e))?;
                comm.all_reduce(slice, &mut sum, &cudarc::nccl::ReduceOp::Sum)
                    .map_err(|e| fail(&e))?;
                std::mem::swap(slice, &mut sum);
                Ok(())
            }
        }
    )*};
}
#[cfg(feature = "cuda")]
cuda_sum!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once_in_order() {
        for n in 0..20 {
            for world in 1..6 {
                let blocks: Vec<Range<usize>> = (0..world).map(|r| share(n, r, world)).collect();
                let flat: Vec<usize> = blocks.iter().cloned().flatten().collect();
                assert_eq!(flat, (0..n).collect::<Vec<_>>(), "n={n} world={world}");
                let sizes: Vec<usize> = blocks.iter().map(|b| b.len()).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn a_single_process_gathers_and_sums_its_own_values() {
        let ranks = Ranks::single();
        assert_eq!(ranks.gather(vec![1u32, 2]).unwrap(), vec![vec![1, 2]]);
        let mut v = [1.5, f64::NAN];
        ranks.sum(&mut v).unwrap();
        assert_eq!(v[0], 1.5);
        assert!(v[1].is_nan());
        assert!(ranks.agree(b"x").unwrap());
        assert_eq!(ranks.share(7), 0..7);
    }
}
