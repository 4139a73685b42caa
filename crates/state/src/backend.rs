//! The storage backend under redb: the file, with every byte written counted (the journal's
//! `bytes_written`) and, for tests, a write budget that fails like a full disk.

use std::fs::File;
use std::io;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

#[derive(Debug)]
pub(crate) struct CountingBackend {
    inner: FileBackend,
    written: Arc<AtomicU64>,
    /// Writes past this many bytes fail with `StorageFull`, as a full disk would.
    budget: Option<u64>,
}

impl CountingBackend {
    pub(crate) fn new(
        file: File,
        written: Arc<AtomicU64>,
        budget: Option<u64>,
    ) -> io::Result<Self> {
        let inner = FileBackend::new(file).map_err(io::Error::other)?;
        Ok(Self {
            inner,
            written,
            budget,
        })
    }
}

impl StorageBackend for CountingBackend {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let len = data.len() as u64;
        if let Some(budget) = self.budget {
            let before = self.written.load(Ordering::Relaxed);
            if before + len > budget {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    "no space left on device (test write budget spent)",
                ));
            }
        }
        self.inner.write(offset, data)?;
        self.written.fetch_add(len, Ordering::Relaxed);
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}
