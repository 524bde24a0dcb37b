//! Threads in one process: a send is a push into the destination's mailbox.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Transport;
use crate::frame::Frame;
use crate::inbox::Inbox;
use crate::shm::ShmRegistry;
use crate::Result;

/// Shared state of all ranks of one local world.
#[derive(Debug)]
pub(crate) struct LocalWorld {
    inboxes: Vec<Arc<Inbox>>,
    lost: Vec<AtomicBool>,
    shm: Arc<ShmRegistry>,
}

impl LocalWorld {
    pub(crate) fn new(n: usize) -> Arc<Self> {
        let inboxes: Vec<Arc<Inbox>> = (0..n).map(|_| Arc::new(Inbox::default())).collect();
        Arc::new(Self {
            shm: Arc::new(ShmRegistry::new(inboxes.clone())),
            inboxes,
            lost: (0..n).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// Marks `rank` dead and wakes every engine so that waiters notice.
    pub(crate) fn mark_lost(&self, rank: usize) {
        self.lost[rank].store(true, Ordering::SeqCst);
        self.inboxes.iter().for_each(|i| i.wake_always());
    }
}

/// One rank's view of a [`LocalWorld`].
#[derive(Debug)]
pub(crate) struct LocalTransport {
    world: Arc<LocalWorld>,
    rank: usize,
}

impl LocalTransport {
    pub(crate) fn new(world: Arc<LocalWorld>, rank: usize) -> Self {
        Self { world, rank }
    }
}

impl Transport for LocalTransport {
    fn world_rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world.inboxes.len()
    }

    fn send(&self, dst: usize, frame: Frame) -> Result<()> {
        // The payload buffer changes owner: the receiver returns it to its own pool.
        self.world.inboxes[dst].deliver(frame);
        Ok(())
    }

    fn is_lost(&self, rank: usize) -> bool {
        self.world.lost[rank].load(Ordering::SeqCst)
    }

    fn mark_self_lost(&self) {
        self.world.mark_lost(self.rank);
    }

    fn inbox(&self) -> &Arc<Inbox> {
        &self.world.inboxes[self.rank]
    }

    fn shared_memory(&self) -> Option<&Arc<ShmRegistry>> {
        Some(&self.world.shm)
    }
}
