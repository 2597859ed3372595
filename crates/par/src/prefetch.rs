//! Cache hints: asking for memory a few steps before it is read, so that the misses of
//! independent reads overlap instead of waiting one after another. A hint changes no result
//! (it never faults and reads nothing architecturally); on targets without one it does nothing.

/// Bytes per cache line on the targets the node runs on.
const LINE_BYTES: usize = 64;

/// Asks for the cache line holding `address`, which may be any address at all: the pointer
/// is never dereferenced (the lint below cannot see that a prefetch does not read).
#[inline(always)]
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn prefetch(address: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; it never faults or reads memory architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Asks for every cache line that `items` lie in.
#[inline]
pub fn prefetch_slice<T>(items: &[T]) {
    let start = items.as_ptr() as usize;
    let end = start + std::mem::size_of_val(items);
    let mut line = start & !(LINE_BYTES - 1);
    while line < end {
        prefetch(line as *const i8);
        line += LINE_BYTES;
    }
}
