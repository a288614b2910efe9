//! Memory that may not be initialized yet, written once before it is read: result columns and
//! tile buffers filled by decoders, copies and reads with no zeroing pass before them. The
//! places that turn such bytes into initialized ones ([`assume_written`] here, `finish_fixed` for
//! a dense read's result columns) state why every byte was written.

use std::mem::MaybeUninit;

/// Bytes a decoder or copy is to fill, not necessarily initialized yet.
pub(crate) type OutBytes<'a> = &'a mut [MaybeUninit<u8>];

/// `bytes` seen as bytes that may be uninitialized, for the decoders that write into such.
/// The callers write only initialized bytes through it, so `bytes` stays initialized.
pub(crate) fn as_uninit(bytes: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; every write through the result is of
    // an initialized byte (the decoders' contract), so no byte of `bytes` becomes uninitialized.
    #[allow(unsafe_code)]
    unsafe {
        &mut *(std::ptr::from_mut::<[u8]>(bytes) as *mut [MaybeUninit<u8>])
    }
}

/// Copies `src` into `dst`, of the same length (one `memcpy`).
///
/// # Panics
/// When the lengths differ (a caller's bug).
#[inline]
pub(crate) fn write_bytes(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "write_bytes: lengths differ");
    // SAFETY: both are valid for `src.len()` bytes and cannot overlap (one is borrowed
    // mutably, the other shared).
    #[allow(unsafe_code)]
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len());
    }
}

/// `bytes`, every one of which has been written, as initialized bytes.
///
/// # Safety
/// Every byte of `bytes` must have been written.
#[allow(unsafe_code)]
pub(crate) unsafe fn assume_written(bytes: &[MaybeUninit<u8>]) -> &[u8] {
    // SAFETY: the caller's promise; `MaybeUninit<u8>` has the layout of `u8`.
    unsafe { &*(std::ptr::from_ref::<[MaybeUninit<u8>]>(bytes) as *const [u8]) }
}
