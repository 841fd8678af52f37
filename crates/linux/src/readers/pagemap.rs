//! `/proc/PID/pagemap`: one 64-bit little-endian entry per virtual page of
//! the process, at offset `address / page_size * 8` (the kernel's
//! Documentation/admin-guide/mm/pagemap.rst): bit 63 "page present", bit 62
//! "page swapped" (the entry then holds the swap type in bits 0-4 and the
//! offset in bits 5-54), bit 61 file-page or shared-anon, bit 56 exclusively
//! mapped, bit 55 soft-dirty. A page never touched (or whose mapping has
//! none) reads as zero.
//!
//! A page read back into the swap cache by `MADV_WILLNEED` keeps its swap
//! entry in the page table (the kernel's `madvise_willneed` only reads it
//! into the cache) until the process touches it: pagemap shows such a page
//! swapped until it is used, then present. ASAP's window tracker
//! (`crate::actuators::switching`) relies on that.

use super::{parse_err, ReadError};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bit 63: the page is present in RAM.
pub const PM_PRESENT: u64 = 1 << 63;
/// Bit 62: the page is swapped out (its PTE holds a swap entry).
pub const PM_SWAPPED: u64 = 1 << 62;

/// Where one virtual page is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    /// Mapped to RAM.
    Present,
    /// In swap (zram, a swap file or partition), or in the swap cache but
    /// not mapped yet.
    Swapped,
    /// Neither (never touched, or dropped).
    Absent,
}

/// The state an entry describes.
pub fn page_state(entry: u64) -> PageState {
    if entry & PM_PRESENT != 0 {
        PageState::Present
    } else if entry & PM_SWAPPED != 0 {
        PageState::Swapped
    } else {
        PageState::Absent
    }
}

/// Parses pagemap bytes (a whole number of 8-byte entries) into page states.
pub fn parse_pagemap(bytes: &[u8]) -> Result<Vec<PageState>, ReadError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(parse_err(
            "pagemap",
            format!(
                "{} bytes is not a whole number of 8-byte entries",
                bytes.len()
            ),
        ));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| page_state(u64::from_le_bytes(c.try_into().expect("8 bytes"))))
        .collect())
}

/// An open `/proc/PID/pagemap`.
#[derive(Debug)]
pub struct Pagemap {
    file: std::fs::File,
    path: std::path::PathBuf,
    page_bytes: u64,
    buf: Vec<u8>,
}

/// Entries read per `pread` (2 MiB of pagemap: 1 GiB of address space).
const ENTRIES_PER_READ: usize = 256 * 1024;

impl Pagemap {
    /// Opens `<proc_root>/<pid>/pagemap` for pages of `page_bytes`.
    pub fn open(proc_root: &Path, pid: u32, page_bytes: u64) -> Result<Self, ReadError> {
        let path = proc_root.join(pid.to_string()).join("pagemap");
        let file = std::fs::File::open(&path).map_err(|source| ReadError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            file,
            path,
            page_bytes: page_bytes.max(1),
            buf: Vec::new(),
        })
    }

    /// Calls `f(address, state)` for every page of `[start, start + len)`
    /// (page-aligned by the caller; a partial last page counts as a page).
    /// A range the file ends before reads as absent pages.
    pub fn for_each(
        &mut self,
        start: u64,
        len: u64,
        mut f: impl FnMut(u64, PageState),
    ) -> Result<(), ReadError> {
        let page = self.page_bytes;
        let first = start / page;
        let n = len.div_ceil(page);
        let mut done = 0u64;
        while done < n {
            let k = ((n - done) as usize).min(ENTRIES_PER_READ);
            self.buf.resize(k * 8, 0);
            let mut got = 0usize;
            while got < self.buf.len() {
                let off = (first + done) * 8 + got as u64;
                match self.file.read_at(&mut self.buf[got..], off) {
                    Ok(0) => break,
                    Ok(m) => got += m,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(source) => {
                        return Err(ReadError::Io {
                            path: self.path.clone(),
                            source,
                        })
                    }
                }
            }
            self.buf[got..].fill(0);
            let states = parse_pagemap(&self.buf).map_err(|e| e.at(&self.path))?;
            for (i, s) in states.into_iter().enumerate() {
                f((first + done + i as u64) * page, s);
            }
            done += k as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/pagemap_anon/proc"
    );

    #[test]
    fn entries_of_this_kernel_parse_to_present_swapped_and_absent() {
        let bytes = std::fs::read(Path::new(ROOT).join("5151/pagemap")).unwrap();
        let s = parse_pagemap(&bytes[128..]).unwrap();
        assert_eq!(s.len(), 16);
        assert!(s[..8].iter().all(|&x| x == PageState::Present));
        assert!(s[8..12].iter().all(|&x| x == PageState::Swapped));
        assert!(s[12..].iter().all(|&x| x == PageState::Absent));
        assert!(parse_pagemap(&bytes[..7]).is_err());
    }

    #[test]
    fn the_reader_walks_a_mapping_by_address_under_its_root() {
        let mut pm = Pagemap::open(Path::new(ROOT), 5151, 4096).unwrap();
        let mut seen = Vec::new();
        pm.for_each(0x10000, 16 * 4096, |a, s| seen.push((a, s)))
            .unwrap();
        assert_eq!(seen.len(), 16);
        assert_eq!(seen[0], (0x10000, PageState::Present));
        assert_eq!(seen[8], (0x18000, PageState::Swapped));
        assert_eq!(seen[15], (0x1f000, PageState::Absent));
        // Past the end of the file: absent, not an error.
        let mut past = Vec::new();
        pm.for_each(0x40000, 2 * 4096, |_, s| past.push(s)).unwrap();
        assert_eq!(past, vec![PageState::Absent; 2]);
        assert!(Pagemap::open(Path::new(ROOT), 1, 4096).is_err());
    }
}
