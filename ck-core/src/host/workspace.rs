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
    /// there is none or it is smaller. `None` on a device queueing on a borrowed stream
    /// ([`Device::on_cuda_stream`]): kernels there run in the other library's order, which a
    /// shared workspace cannot follow.
    ///
    /// A workspace is taken out of the device until it is kept again, so two launches never
    /// share one; on the device's own stream, launches follow each other, so one kept right
    /// after a launch is queued may be taken by the next launch at once.
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
        let Some(workspaces) = self.workspaces() else {
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
            // A smaller one is freed in stream order, after the launches that used it.
            _ => DeviceBuffer::zeros(self, len).map(Some),
        }
    }

    /// Keeps `workspace` as this device's workspace `name` for the next
    /// [`Device::take_workspace`]; the kernels that use it must leave it as the next launch
    /// expects to find it. Dropped on a borrowed stream.
    pub fn keep_workspace<T: Element>(&self, name: &'static str, workspace: DeviceBuffer<T>) {
        if let Some(workspaces) = self.workspaces() {
            let bytes = workspace.len * T::BYTES as usize;
            let mut kept = workspaces.0.lock().unwrap_or_else(|e| e.into_inner());
            kept.insert(name, (workspace.into_storage(), bytes));
        }
    }

    /// Whether this device keeps workspaces ([`Device::take_workspace`] gives one): not on a
    /// borrowed stream.
    pub fn keeps_workspaces(&self) -> bool {
        self.workspaces().is_some()
    }

    /// Where this device keeps workspaces: the CUDA device's own (for its own stream), or the
    /// emulator's, which every emulated device shares (a launch takes a workspace out, so
    /// launches at once never share one).
    fn workspaces(&self) -> Option<&Workspaces> {
        static EMULATOR: LazyLock<Workspaces> = LazyLock::new(Workspaces::default);
        match self {
            Device::Emulator { .. } => Some(&EMULATOR),
            Device::Cuda(d) => d.workspaces.as_deref(),
        }
    }
}

impl<T> DeviceBuffer<T> {
    /// The memory, without its element type.
    fn into_storage(self) -> Storage {
        self.storage
    }
}
