//! Workspaces: device memory a kernel keeps from one launch to the next (a scratch buffer and
//! counters that the kernel itself returns to zero), so that a launch neither allocates nor
//! clears memory. The stream-K GEMMs keep their partial tiles and tickets in one.

use super::{byte_size, Device, DeviceBuffer, Storage};
use crate::device::Element;
use crate::host::LaunchError;
use std::collections::HashMap;
use std::prelude::rust_2021::*;
use std::sync::{LazyLock, Mutex};

/// A device's workspaces by name: the memory and its bytes.
#[derive(Default)]
pub(crate) struct Workspaces(Mutex<HashMap<&'static str, (Storage, usize)>>);

impl Device {
    /// Takes this device's workspace `name` of at least `len` elements of `T`: the one kept by
    /// [`Device::keep_workspace`] (as the last kernel left it), or a new one, zeroed, where
    /// there is none or it is smaller.
    ///
    /// A workspace is taken out of the device until it is kept again, so two launches never
    /// share one; launches on one stream follow each other, so one kept right after a launch
    /// is queued may be taken by the next launch on that stream at once. Each stream has its
    /// own: the device's, and each borrowed stream's ([`Device::on_cuda_stream`]; every view
    /// on one stream shares them). A borrowed stream's are allocated on the device's own
    /// stream, which outlives it, and complete before they are returned; one replaced by a
    /// larger one is freed after that stream has run what was queued with it. `None` while
    /// the stream is being captured into a CUDA graph: a graph may be replayed on any stream,
    /// beside launches that use the same workspace.
    ///
    /// ```
    /// use ck_core::host::Device;
    /// # fn main() -> Result<(), ck_core::host::LaunchError> {
    /// let device = Device::emulator();
    /// let tickets = device.take_workspace::<u32>("my-kernel tickets", 64)?.expect("own stream");
    /// assert!(tickets.len() >= 64 && tickets.to_vec()?.iter().all(|&t| t == 0));
    /// device.keep_workspace("my-kernel tickets", tickets);
    /// # Ok(()) }
    /// ```
    pub fn take_workspace<T: Element>(
        &self,
        name: &'static str,
        len: usize,
    ) -> Result<Option<DeviceBuffer<T>>, LaunchError> {
        let bytes = byte_size::<T>(len)?;
        let Some(workspaces) = self.workspaces()? else {
            return Ok(None);
        };
        let kept = workspaces
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        match kept {
            Some((storage, kept_bytes)) if kept_bytes >= bytes => Ok(Some(DeviceBuffer {
                storage,
                len: kept_bytes / T::BYTES as usize,
                _t: std::marker::PhantomData,
            })),
            smaller => {
                if let Some((storage, _)) = smaller {
                    self.retire(storage)?;
                }
                match self {
                    Device::Cuda(d) if d.borrows_stream() => Ok(Some(DeviceBuffer {
                        storage: Storage::Cuda {
                            slice: std::mem::ManuallyDrop::new(d.alloc_on_own_stream(bytes)?),
                            device: d.clone(),
                            borrowed: false,
                        },
                        len,
                        _t: std::marker::PhantomData,
                    })),
                    _ => DeviceBuffer::zeros(self, len).map(Some),
                }
            }
        }
    }

    /// Keeps `workspace` as this device's workspace `name` for the next
    /// [`Device::take_workspace`] on its stream; the kernels that use it must leave it as the
    /// next launch expects to find it. Where the stream already keeps one of that name (two
    /// threads' launches at once), the other is freed after the launches that used it.
    pub fn keep_workspace<T: Element>(&self, name: &'static str, workspace: DeviceBuffer<T>) {
        // A stream captured since the take: the workspace is simply kept.
        let Some(workspaces) = self.workspaces_ignoring_capture() else {
            return;
        };
        let bytes = workspace.len * T::BYTES as usize;
        let replaced = workspaces
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, (workspace.into_storage(), bytes));
        if let Some((storage, _)) = replaced {
            // A failed wait keeps the memory; the stream's next launch reports the failure.
            let _ = self.retire(storage);
        }
    }

    /// Whether a launch now would get a workspace ([`Device::take_workspace`]): not while the
    /// stream is being captured into a CUDA graph.
    pub fn keeps_workspaces(&self) -> bool {
        matches!(self.workspaces(), Ok(Some(_)))
    }

    /// Where this device keeps workspaces: its stream's (the CUDA device's own, or a borrowed
    /// stream's), none while the stream is being captured; or the emulator's, which every
    /// emulated device shares (a launch takes a workspace out, so launches at once never share
    /// one).
    fn workspaces(&self) -> Result<Option<&Workspaces>, LaunchError> {
        if let Device::Cuda(d) = self {
            if d.capturing()? {
                return Ok(None);
            }
        }
        Ok(self.workspaces_ignoring_capture())
    }

    fn workspaces_ignoring_capture(&self) -> Option<&Workspaces> {
        static EMULATOR: LazyLock<Workspaces> = LazyLock::new(Workspaces::default);
        match self {
            Device::Emulator { .. } => Some(&EMULATOR),
            Device::Cuda(d) => d.workspaces.as_deref(),
        }
    }

    /// Frees a workspace after the launches that used it: in stream order on the device's own
    /// stream (where it was allocated and the launches ran); on a borrowed stream, whose
    /// launches the own stream does not follow, once that stream has run them — or, where
    /// waiting for it fails, never (kept rather than freed while a launch may use it).
    fn retire(&self, storage: Storage) -> Result<(), LaunchError> {
        if let Device::Cuda(d) = self {
            if d.borrows_stream() {
                if let Err(e) = d.synchronize() {
                    std::mem::forget(storage);
                    return Err(e);
                }
            }
        }
        drop(storage);
        Ok(())
    }
}

impl<T> DeviceBuffer<T> {
    /// The memory, without its element type.
    fn into_storage(self) -> Storage {
        self.storage
    }
}
