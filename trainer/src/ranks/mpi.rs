//! MPI as the ranks' transport (feature `mpi`): the `mpi` crate over the system's library,
//! initialised for calls from the main thread only (`MPI_THREAD_FUNNELED`; the kernels' rayon
//! threads never call MPI). MPI's default error handler ends the job on a failed call, so the
//! collectives here return errors only for what happens around them.

#[cfg(feature = "nccl")]
use std::rc::Rc;

use mpi::Rank;
#[cfg(feature = "nccl")]
use mpi::collective::Root;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::Collective;
use crate::error::{Error, Result};

/// Elements per MPI call: counts are C `int`s.
const CHUNK: usize = 1 << 30;

/// The world communicator of an MPI job.
pub(super) struct MpiRanks {
    world: SimpleCommunicator,
    local_rank: usize,
    #[cfg(feature = "nccl")]
    nccl: std::cell::OnceCell<Rc<cudarc::nccl::Comm>>,
    /// Finalises MPI when dropped, after everything above.
    _universe: Universe,
}

impl MpiRanks {
    /// Initialises MPI (once per process).
    pub(super) fn init() -> Result<Self> {
        let (universe, _threading) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| Error::Ranks {
                reason: "MPI was already initialised in this process".into(),
            })?;
        let world = universe.world();
        // The ranks that share this node's memory: this rank's place among them picks its GPU.
        let node = world.split_shared(world.rank());
        let local_rank = usize::try_from(node.rank()).expect("ranks are non-negative");
        Ok(Self {
            world,
            local_rank,
            #[cfg(feature = "nccl")]
            nccl: std::cell::OnceCell::new(),
            _universe: universe,
        })
    }

    fn sum_chunks<T: mpi::datatype::Equivalence + Copy>(&self, buf: &mut [T]) {
        for chunk in buf.chunks_mut(CHUNK) {
            let send = chunk.to_vec();
            self.world
                .all_reduce_into(&send[..], chunk, SystemOperation::sum());
        }
    }
}

impl Collective for MpiRanks {
    fn rank(&self) -> usize {
        usize::try_from(self.world.rank()).expect("ranks are non-negative")
    }

    fn world_size(&self) -> usize {
        usize::try_from(self.world.size()).expect("sizes are positive")
    }

    fn local_rank(&self) -> usize {
        self.local_rank
    }

    fn all_reduce_f32(&self, buf: &mut [f32]) -> Result<()> {
        self.sum_chunks(buf);
        Ok(())
    }

    fn all_reduce_f64(&self, buf: &mut [f64]) -> Result<()> {
        self.sum_chunks(buf);
        Ok(())
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let too_big = || Error::Ranks {
            reason: format!(
                "rank {} sends {} bytes, more than one MPI call carries",
                self.rank(),
                mine.len()
            ),
        };
        let len = Rank::try_from(mine.len()).map_err(|_| too_big())?;
        let mut lens = vec![0 as Rank; self.world_size()];
        self.world.all_gather_into(&len, &mut lens[..]);
        let displs: Vec<Rank> = lens
            .iter()
            .scan(0 as Rank, |at, &n| {
                let start = *at;
                *at = at.checked_add(n)?;
                Some(start)
            })
            .collect();
        if displs.len() != lens.len() {
            return Err(too_big());
        }
        let total: usize = lens.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut partition = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut partition);
        }
        Ok(lens
            .iter()
            .zip(&displs)
            .map(|(&n, &at)| all[at as usize..(at + n) as usize].to_vec())
            .collect())
    }

    fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    #[cfg(feature = "nccl")]
    fn nccl(
        &self,
        device: std::sync::Arc<cudarc::driver::CudaDevice>,
    ) -> Result<Option<Rc<cudarc::nccl::Comm>>> {
        if let Some(comm) = self.nccl.get() {
            return Ok(Some(comm.clone()));
        }
        let fail = |e: cudarc::nccl::result::NcclError| Error::Ranks {
            reason: format!("NCCL: {e:?}"),
        };
        // Rank 0 makes the unique id; MPI carries it to the others.
        let mut id = [0 as std::ffi::c_char; 128];
        if self.rank() == 0 {
            id = *cudarc::nccl::Id::new().map_err(fail)?.internal();
        }
        let mut bytes: Vec<u8> = id.iter().map(|&c| c as u8).collect();
        self.world.process_at_rank(0).broadcast_into(&mut bytes[..]);
        for (c, b) in id.iter_mut().zip(&bytes) {
            *c = *b as std::ffi::c_char;
        }
        let comm = cudarc::nccl::Comm::from_rank(
            device,
            self.rank(),
            self.world_size(),
            cudarc::nccl::Id::uninit(id),
        )
        .map_err(fail)?;
        let comm = Rc::new(comm);
        let _ = self.nccl.set(comm.clone());
        Ok(Some(comm))
    }
}
