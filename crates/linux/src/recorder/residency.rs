//! Page-cache residency of one file: `mincore` over a read-only shared
//! mapping (no page is faulted in by asking), and `posix_fadvise(DONTNEED)`
//! to make a file cold.
//!
//! The `cachestat` syscall (Linux 6.5, nr 451) only returns counts, not
//! which pages, so it cannot give ranges; mincore does.

use appflow_core::profile::ByteRange;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The kernel's page size in bytes.
pub fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// One flag per page of the file's first `size_bytes`: 1 when resident in the page cache.
pub fn residency(fd: BorrowedFd<'_>, size_bytes: u64) -> io::Result<Vec<u8>> {
    residency_of(fd, 0, size_bytes)
}

/// One flag per page of `[offset, offset+len)` of the file (`offset` a
/// multiple of the page size): 1 when resident in the page cache. Asking
/// brings nothing in and moves no page on the LRU.
pub fn residency_of(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let page = page_bytes() as usize;
    if !offset.is_multiple_of(page as u64) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "residency offset not page-aligned",
        ));
    }
    let (len, offset) = (
        usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large to map"))?,
        libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?,
    );
    // SAFETY: a fresh PROT_READ shared mapping of a valid fd; checked for MAP_FAILED.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            offset,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: addr..addr+len is our mapping; vec holds one byte per page of it.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmapping exactly what was mapped above.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    for v in &mut vec {
        *v &= 1;
    }
    Ok(vec)
}

/// Pages of `[offset, offset+len)` of the file in the page cache
/// (`cachestat`, syscall 451, Linux 6.5; `len` 0 means to the end of the
/// file): a count, no I/O and no mapping. ENOSYS on older kernels.
pub fn cached_pages(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<u64> {
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = [offset, len];
    // nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted.
    let mut stat = [0u64; 5];
    // SAFETY: a valid fd and pointers to buffers of the kernel's struct sizes.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            range.as_ptr(),
            stat.as_mut_ptr(),
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat[0])
}

/// Drops the file's clean, unmapped pages from the page cache
/// (`POSIX_FADV_DONTNEED`; dirty and mapped pages stay).
pub fn drop_from_cache(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a valid fd.
    let rc = unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Ranges of resident pages, clamped to `size_bytes`.
pub fn resident_ranges(pages: &[u8], page_bytes: u64, size_bytes: u64) -> Vec<ByteRange> {
    newly_resident_ranges(&[], pages, page_bytes, size_bytes)
}

/// Ranges of pages resident in `after` but not in `before` (the pages a
/// launch brought into the page cache), clamped to `size_bytes`. A page
/// beyond the end of `before` counts as not resident before.
pub fn newly_resident_ranges(
    before: &[u8],
    after: &[u8],
    page_bytes: u64,
    size_bytes: u64,
) -> Vec<ByteRange> {
    let mut out: Vec<ByteRange> = Vec::new();
    for (i, &a) in after.iter().enumerate() {
        let was = before.get(i).copied().unwrap_or(0) & 1 == 1;
        if a & 1 == 0 || was {
            continue;
        }
        let start = i as u64 * page_bytes;
        if start >= size_bytes {
            break;
        }
        let end = (start + page_bytes).min(size_bytes);
        match out.last_mut() {
            Some(last) if last.end == start => last.end = end,
            _ => out.push(ByteRange { start, end }),
        }
    }
    out
}

/// Intersection of sorted, disjoint `a` with sorted, disjoint `b`.
pub fn intersect(a: &[ByteRange], b: &[ByteRange]) -> Vec<ByteRange> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let start = a[i].start.max(b[j].start);
        let end = a[i].end.min(b[j].end);
        if start < end {
            out.push(ByteRange { start, end });
        }
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn diff_of_bitmaps() {
        let before = [1, 0, 0, 1, 0];
        let after = [1, 1, 1, 1, 1];
        assert_eq!(
            newly_resident_ranges(&before, &after, 10, 45),
            vec![r(10, 30), r(40, 45)]
        );
        assert_eq!(
            newly_resident_ranges(&[], &[1, 1, 0, 1], 10, 100),
            vec![r(0, 20), r(30, 40)]
        );
        assert_eq!(resident_ranges(&[0, 0], 10, 20), vec![]);
        // Residency flags carry other bits in the kernel's vector; only bit 0 counts.
        assert_eq!(resident_ranges(&[2, 3], 10, 20), vec![r(10, 20)]);
    }

    #[test]
    fn intersection() {
        assert_eq!(
            intersect(&[r(0, 10), r(20, 30)], &[r(5, 25)]),
            vec![r(5, 10), r(20, 25)]
        );
        assert_eq!(intersect(&[r(0, 10)], &[r(10, 20)]), vec![]);
    }

    #[test]
    fn live_residency_of_a_file() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(&vec![7u8; 64 * 1024]).unwrap();
        f.sync_all().unwrap();
        let f = std::fs::File::open(&p).unwrap();
        use std::os::fd::AsFd;
        drop_from_cache(f.as_fd()).unwrap();
        let cold = residency(f.as_fd(), 64 * 1024).unwrap();
        assert_eq!(cold.len() as u64, 64 * 1024 / page_bytes());
        let _ = std::fs::read(&p).unwrap();
        let warm = residency(f.as_fd(), 64 * 1024).unwrap();
        assert!(warm.iter().all(|&v| v == 1), "read file not resident");
        let new = newly_resident_ranges(&cold, &warm, page_bytes(), 64 * 1024);
        assert_eq!(
            new.iter().map(ByteRange::len).sum::<u64>()
                + cold.iter().filter(|&&v| v == 1).count() as u64 * page_bytes(),
            64 * 1024
        );
    }
}
