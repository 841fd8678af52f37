//! How large the device's requests are for each way of reading a file
//! through the page cache, on the testbed's flash device (the `phone-6gb`
//! preset's FUSE file system, 128 KiB readahead). The preload worker's
//! choice of `MADV_POPULATE_READ` on a huge-page mapping comes from this
//! (docs/daemon.md, "On the testbed's device").
//!
//! Run as root (it mounts FUSE): `cargo run --release -p appflow-bench
//! --example read_methods`. Files live in a temporary directory under
//! /var/tmp and are removed at the end.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const FILE_BYTES: usize = 64 << 20;
const READ_BYTES: usize = 32 << 20;

fn main() -> std::io::Result<()> {
    let dir = std::env::temp_dir().join(format!("appflow-read-methods-{}", std::process::id()));
    let result = run(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("backing"))?;
    std::fs::create_dir_all(dir.join("mnt"))?;
    let flash = appflow_bench::device::preset("phone-6gb")
        .expect("preset")
        .flash;
    type Method = fn(&std::fs::File);
    let methods: [(&str, Method); 7] = [
        ("pread, 2 MiB buffer", |f| pread_all(f)),
        ("POSIX_FADV_SEQUENTIAL, then pread 2 MiB", |f| {
            // SAFETY: advice on an open descriptor.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
            pread_all(f)
        }),
        (
            "POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM, then pread 2 MiB",
            |f| {
                // SAFETY: advice on an open descriptor.
                unsafe {
                    libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
                    libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
                }
                pread_all(f)
            },
        ),
        ("POSIX_FADV_WILLNEED over 32 MiB", |f| {
            // SAFETY: advice on an open descriptor.
            unsafe {
                libc::posix_fadvise(
                    f.as_raw_fd(),
                    0,
                    READ_BYTES as i64,
                    libc::POSIX_FADV_WILLNEED,
                )
            };
            std::thread::sleep(Duration::from_millis(200));
        }),
        ("readahead(2), 2 MiB per call", |f| {
            for off in (0..READ_BYTES).step_by(2 << 20) {
                // SAFETY: readahead on an open descriptor.
                unsafe { libc::readahead(f.as_raw_fd(), off as i64, 2 << 20) };
            }
            std::thread::sleep(Duration::from_millis(200));
        }),
        ("mmap, MADV_SEQUENTIAL, MADV_POPULATE_READ", |f| {
            populate(f, libc::MADV_SEQUENTIAL)
        }),
        ("mmap, MADV_HUGEPAGE, MADV_POPULATE_READ", |f| {
            populate(f, libc::MADV_HUGEPAGE)
        }),
    ];
    for i in 0..methods.len() {
        std::fs::write(dir.join(format!("backing/f{i}")), vec![7u8; FILE_BYTES])?;
    }
    let mount =
        appflow_bench::fusefs::mount(&dir.join("backing"), &dir.join("mnt"), flash, 128 << 10)?;
    let path = |i: usize| dir.join(format!("mnt/f{i}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path(0).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("method | device bytes | requests | mean request | time | throughput");
    for (i, (name, read)) in methods.iter().enumerate() {
        let f = std::fs::File::open(path(i))?;
        let (b0, r0) = (mount.stats.bytes(), mount.stats.requests.load(Relaxed));
        let t = Instant::now();
        read(&f);
        let s = t.elapsed().as_secs_f64();
        let (b, r) = (
            mount.stats.bytes() - b0,
            mount.stats.requests.load(Relaxed) - r0,
        );
        println!(
            "{name} | {:.1} MB | {r} | {:.0} KiB | {:.0} ms | {:.0} MB/s",
            b as f64 / 1e6,
            b as f64 / r.max(1) as f64 / 1024.0,
            s * 1e3,
            b as f64 / s / 1e6
        );
    }
    Ok(())
}

fn pread_all(f: &std::fs::File) {
    let mut buf = vec![0u8; 2 << 20];
    let mut off = 0;
    while off < READ_BYTES {
        match f.read_at(&mut buf, off as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => off += n,
        }
    }
}

fn populate(f: &std::fs::File, advice: libc::c_int) {
    // SAFETY: a read-only shared mapping of an open file, advised, populated
    // and unmapped here; nothing else sees it.
    unsafe {
        let a = libc::mmap(
            std::ptr::null_mut(),
            READ_BYTES,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        if a == libc::MAP_FAILED {
            return;
        }
        libc::madvise(a, READ_BYTES, advice);
        libc::madvise(a, READ_BYTES, libc::MADV_POPULATE_READ);
        libc::munmap(a, READ_BYTES);
    }
}
