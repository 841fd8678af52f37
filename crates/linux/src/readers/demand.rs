//! A process's demand for pages, for readiness inference
//! (`appflow_core::detect::demand_pages`): bytes it made the kernel read
//! from storage (`read_bytes` of /proc/PID/io) and its page faults
//! (`minflt` + `majflt` of /proc/PID/stat). Reading /proc/PID/io of another
//! user's process needs ptrace-read access (root, or `CAP_SYS_PTRACE`).

use super::{parse_err, parse_u64, pid_path, read_text, ReadError};
use appflow_core::detect::DemandCounters;
use std::path::Path;

/// `read_bytes` of /proc/PID/io text.
pub fn parse_io_read_bytes(text: &str) -> Result<u64, ReadError> {
    const FILE: &str = "io";
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .ok_or_else(|| parse_err(FILE, "field read_bytes is missing"))?;
    parse_u64(FILE, "read_bytes", v.trim())
}

/// Reads a process's demand counters under `proc_root`.
pub fn read_demand(proc_root: &Path, pid: u32) -> Result<DemandCounters, ReadError> {
    let io = pid_path(proc_root, pid, "io");
    let read_bytes = parse_io_read_bytes(&read_text(&io)?).map_err(|e| e.at(&io))?;
    let stat = super::read_stat(proc_root, pid)?;
    Ok(DemandCounters {
        read_bytes,
        faults: stat.minflt.saturating_add(stat.majflt),
    })
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
