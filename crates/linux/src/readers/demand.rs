//! A process's demand for pages, for readiness inference
//! (`appflow_core::detect::demand_pages`): the bytes it read and its page
//! faults (`minflt` + `majflt` of /proc/PID/stat). Bytes read are the
//! larger of two /proc/PID/io counters: `rchar` (bytes passed to read
//! calls, served from storage or from the page cache) and `read_bytes`
//! (bytes the kernel brought in from storage for it, mmap readahead
//! included). `read_bytes` alone would make a launch whose files the
//! preloader already brought in look idle while it still reads them:
//! measured on this machine, a preloaded launch still reading its 48 MiB
//! asset was found ready 183 ms after its exec, before it had read half of
//! it (409 ms). Reading /proc/PID/io of another user's process needs
//! ptrace-read access (root, or `CAP_SYS_PTRACE`).

use super::{parse_err, parse_u64, pid_path, read_text, ReadError};
use appflow_core::detect::DemandCounters;
use std::path::Path;

fn io_field(text: &str, name: &str) -> Result<u64, ReadError> {
    const FILE: &str = "io";
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .ok_or_else(|| parse_err(FILE, format!("field {name} is missing")))?;
    parse_u64(FILE, name, v.trim())
}

/// Bytes read, from /proc/PID/io text: max(`rchar`, `read_bytes`).
pub fn parse_io_read_bytes(text: &str) -> Result<u64, ReadError> {
    Ok(io_field(text, "rchar")?.max(io_field(text, "read_bytes")?))
}

/// Reads a process's demand counters under `proc_root`.
pub fn read_demand(proc_root: &Path, pid: u32) -> Result<DemandCounters, ReadError> {
    let io = pid_path(proc_root, pid, "io");
    let read_bytes = parse_io_read_bytes(&read_text(&io)?).map_err(|e| e.at(&io))?;
    let stat = super::read_stat(proc_root, pid)?;
    Ok(DemandCounters {
        read_bytes,
        faults: stat.minflt.saturating_add(stat.majflt),
        cpu_ms: ticks_to_ms(stat.cpu_ticks, clock_ticks_per_sec()),
    })
}

/// Clock ticks to ms (`ticks_per_sec` from `sysconf(_SC_CLK_TCK)`).
pub fn ticks_to_ms(ticks: u64, ticks_per_sec: u64) -> u64 {
    ticks.saturating_mul(1000) / ticks_per_sec.max(1)
}

/// The kernel's clock ticks per second as /proc counts CPU time
/// (`sysconf(_SC_CLK_TCK)`; 100 where it cannot be read, the value on
/// every Linux architecture in use).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on this machine (Linux 6.18): `cat /proc/self/io` and `cat
    // /proc/self/stat`, with read_bytes (was 0) and majflt (was 0) set to
    // 40960 and 7 so that both fields are exercised.
    const IO: &str = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 40960\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
    const STAT: &str = "30566 (cat) R 30559 30559 7299 0 -1 4194304 98 0 7 0 0 0 0 0 20 0 1 0 495057 3133440 359 18446744073709551615 94496990740480 94496990760361 140731078738336 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94496990776368 94496990777984 94497917177856 140731078740659 140731078740679 140731078740679 140731078741995 0\n";

    #[test]
    fn parses_io_and_stat() {
        assert_eq!(parse_io_read_bytes(IO).unwrap(), 40960);
        let s = super::super::parse_stat(STAT).unwrap();
        assert_eq!((s.minflt, s.majflt), (98, 7));
        // Reads served from the page cache count too (rchar).
        let cached = IO.replace("rchar: 6976", "rchar: 9000000");
        assert_eq!(parse_io_read_bytes(&cached).unwrap(), 9_000_000);
        assert!(parse_io_read_bytes("read_bytes: 1\n").is_err());
        assert!(parse_io_read_bytes("rchar: 1\n").is_err());
    }

    #[test]
    fn reads_a_fixture_tree_and_this_process() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("30566")).unwrap();
        std::fs::write(t.path().join("30566/io"), IO).unwrap();
        std::fs::write(t.path().join("30566/stat"), STAT).unwrap();
        let d = read_demand(t.path(), 30566).unwrap();
        assert_eq!((d.read_bytes, d.faults), (40960, 105));
        let e = read_demand(t.path(), 1).unwrap_err();
        assert!(e.to_string().contains("1/io"), "{e}");
        // Our own process: faults grow when we touch new memory.
        let me = std::process::id();
        if let Ok(a) = read_demand(Path::new("/proc"), me) {
            let v = std::hint::black_box(vec![1u8; 8 << 20]);
            let b = read_demand(Path::new("/proc"), me).unwrap();
            assert!(b.faults > a.faults, "{a:?} -> {b:?}");
            drop(v);
        }
    }
}
