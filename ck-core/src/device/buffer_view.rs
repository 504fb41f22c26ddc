//! Buffer views (spec §3.1) with the NVIDIA mapping of spec §15: there is no buffer-resource
//! hardware, so validity is applied in software — an invalid `get` returns zeros (or a custom
//! invalid value), an invalid `set` is dropped. `linear_offset` is added to the element index
//! (CK's newer API: a compile-time immediate next to the per-thread index).

use super::{Element, Global, GlobalMut, SharedArray};

/// Where a view's elements live and how a vector of `N` of them is read.
pub trait Memory<T: Element> {
    /// Number of elements.
    fn size(&self) -> u32;
    /// `N` elements from `i` (out of bounds: the memory's own rule — an emulator error, a
    /// trap on the GPU).
    fn read<const N: usize>(&self, i: u32) -> [T; N];
    /// [`Memory::read`] where the caller has checked the bounds (a global buffer on the GPU
    /// then skips its own check).
    ///
    /// # Safety
    /// `i + N ≤ self.size()`, and `i` a multiple of `N` when the vector is 4, 8 or 16 bytes.
    #[inline(always)]
    unsafe fn read_unchecked<const N: usize>(&self, i: u32) -> [T; N] {
        self.read(i)
    }
}

/// Memory a view may also write (everything but a read-only [`Global`]): storing through a
/// view of a `Global` is a compile error, not a fault at run time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is read-only: a view or tile window over it cannot be stored to",
    label = "read-only memory",
    note = "pass the buffer as a `GlobalMut<T>` kernel argument to write it"
)]
pub trait MemoryMut<T: Element>: Memory<T> {
    /// Writes `N` elements from `i`.
    fn write<const N: usize>(&self, i: u32, v: [T; N]);
    /// [`MemoryMut::write`] where the caller has checked the bounds.
    ///
    /// # Safety
    /// `i + N ≤ self.size()`, and `i` a multiple of `N` when the vector is 4, 8 or 16 bytes.
    #[inline(always)]
    unsafe fn write_unchecked<const N: usize>(&self, i: u32, v: [T; N]) {
        self.write(i, v)
    }
}

macro_rules! global_memory {
    ($h:ident) => {
        impl<T: Element> Memory<T> for $h<T> {
            #[inline(always)]
            fn size(&self) -> u32 {
                self.len()
            }
            #[track_caller]
            #[inline(always)]
            fn read<const N: usize>(&self, i: u32) -> [T; N] {
                self.load_vec(i)
            }
            /// # Safety
            /// As [`Memory::read_unchecked`].
            #[track_caller]
            #[inline(always)]
            unsafe fn read_unchecked<const N: usize>(&self, i: u32) -> [T; N] {
                // SAFETY: the caller's promise is the handle's.
                unsafe { self.load_vec_unchecked(i) }
            }
        }
    };
}

global_memory!(Global);
global_memory!(GlobalMut);

impl<T: Element> MemoryMut<T> for GlobalMut<T> {
    #[track_caller]
    #[inline(always)]
    fn write<const N: usize>(&self, i: u32, v: [T; N]) {
        self.store_vec(i, v)
    }
    /// # Safety
    /// As [`MemoryMut::write_unchecked`].
    #[track_caller]
    #[inline(always)]
    unsafe fn write_unchecked<const N: usize>(&self, i: u32, v: [T; N]) {
        // SAFETY: the caller's promise is the handle's.
        unsafe { self.store_vec_unchecked(i, v) }
    }
}

impl<T: Element, const L: usize> Memory<T> for SharedArray<T, L> {
    fn size(&self) -> u32 {
        L as u32
    }
    #[track_caller]
    fn read<const N: usize>(&self, i: u32) -> [T; N] {
        self.load_vec(i)
    }
}

impl<T: Element, const L: usize> MemoryMut<T> for SharedArray<T, L> {
    #[track_caller]
    fn write<const N: usize>(&self, i: u32, v: [T; N]) {
        self.store_vec(i, v)
    }
}

/// Registers (CK's `vgpr` address space): a thread-private array viewed through cells.
impl<T: Element> Memory<T> for &[core::cell::Cell<T>] {
    fn size(&self) -> u32 {
        self.len() as u32
    }
    #[track_caller]
    fn read<const N: usize>(&self, i: u32) -> [T; N] {
        core::array::from_fn(|k| self[i as usize + k].get())
    }
}

impl<T: Element> MemoryMut<T> for &[core::cell::Cell<T>] {
    #[track_caller]
    fn write<const N: usize>(&self, i: u32, v: [T; N]) {
        for (k, x) in v.into_iter().enumerate() {
            self[i as usize + k].set(x);
        }
    }
}

/// CK's `buffer_view` over global, shared or register memory.
///
/// Accesses are `N`-element vectors starting at `i + linear_offset`; `is_valid` decides for the
/// whole vector (CK: "validity is evaluated only at the first element"). Invalid reads give
/// `invalid_value` (zero by default), invalid writes are dropped. A valid access goes through
/// the memory's own checked access: outside the memory, or a vector not aligned to its size,
/// it is the memory's error (the emulator's `out-of-bounds` or `misaligned-access`, a trap on
/// the GPU; shared memory is bounded by the hardware) — never a read of memory the buffer does
/// not own.
#[derive(Clone, Copy)]
pub struct BufferView<M, T> {
    memory: M,
    invalid_value: T,
}

impl<T: Element, M: Memory<T>> BufferView<M, T> {
    /// A view whose invalid elements read as zero (`make_buffer_view(p, n)`).
    pub fn new(memory: M) -> Self {
        BufferView {
            memory,
            invalid_value: T::default(),
        }
    }

    /// A view whose invalid elements read as `value` (`make_buffer_view(p, n, v)`).
    pub fn with_invalid_value(memory: M, value: T) -> Self {
        BufferView {
            memory,
            invalid_value: value,
        }
    }

    /// The memory under the view.
    #[inline(always)]
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// Number of elements (`buffer_size`).
    pub fn size(&self) -> u32 {
        self.memory.size()
    }

    /// `get<N>(i, linear_offset, is_valid)`.
    #[track_caller]
    #[inline(always)]
    pub fn get<const N: usize>(&self, i: u32, linear_offset: u32, is_valid: bool) -> [T; N] {
        if is_valid {
            self.memory.read(i.wrapping_add(linear_offset))
        } else {
            [self.invalid_value; N]
        }
    }

    /// [`BufferView::get`] without the memory's own bounds and alignment check, for views that
    /// prove their valid accesses inside the memory.
    ///
    /// # Safety
    /// When `is_valid`: `i + N ≤ size`, and `i` a multiple of `N` for 4-, 8- and 16-byte
    /// vectors.
    #[inline(always)]
    pub(crate) unsafe fn get_in_bounds<const N: usize>(&self, i: u32, is_valid: bool) -> [T; N] {
        if is_valid {
            // SAFETY: the caller's promise.
            unsafe { self.memory.read_unchecked(i) }
        } else {
            [self.invalid_value; N]
        }
    }

    /// [`BufferView::set`] without the memory's own check.
    ///
    /// # Safety
    /// As for [`BufferView::get_in_bounds`].
    #[inline(always)]
    pub(crate) unsafe fn set_in_bounds<const N: usize>(&self, i: u32, is_valid: bool, v: [T; N])
    where
        M: MemoryMut<T>,
    {
        if is_valid {
            // SAFETY: the caller's promise.
            unsafe { self.memory.write_unchecked(i, v) }
        }
    }

    /// `set<N>(i, linear_offset, is_valid, v)`.
    #[track_caller]
    #[inline(always)]
    pub fn set<const N: usize>(&self, i: u32, linear_offset: u32, is_valid: bool, v: [T; N])
    where
        M: MemoryMut<T>,
    {
        if is_valid {
            self.memory.write(i.wrapping_add(linear_offset), v)
        }
    }
}

impl<T: super::Atomic> BufferView<GlobalMut<T>, T> {
    /// `update<op, N>(i, linear_offset, is_valid, v)`.
    #[track_caller]
    #[inline(always)]
    pub fn update<const N: usize>(
        &self,
        op: MemoryOp,
        i: u32,
        linear_offset: u32,
        is_valid: bool,
        v: [T; N],
    ) {
        if !is_valid {
            return;
        }
        let at = i.wrapping_add(linear_offset);
        match op {
            MemoryOp::Set => self.memory.store_vec(at, v),
            MemoryOp::Add => {
                let old: [T; N] = self.memory.load_vec(at);
                let mut new = old;
                for k in 0..N {
                    new[k] = T::add(old[k], v[k]);
                }
                self.memory.store_vec(at, new)
            }
            MemoryOp::AtomicAdd => {
                for (k, &x) in v.iter().enumerate() {
                    self.memory.atomic_add(at + k as u32, x);
                }
            }
            MemoryOp::AtomicMax => {
                for (k, &x) in v.iter().enumerate() {
                    self.memory.atomic_max(at + k as u32, x);
                }
            }
        }
    }
}

/// How `update` combines with memory (CK's `memory_operation_enum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryOp {
    /// Overwrite.
    Set,
    /// Non-atomic read-modify-write add.
    Add,
    /// Per-element atomic add.
    AtomicAdd,
    /// Per-element atomic max.
    AtomicMax,
}
