//! Every parser of /proc, /sys and cgroup text, on the same input.
#![no_main]
use appflow_linux::readers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = readers::parse_meminfo(text);
    if let Ok(v) = readers::parse_vmstat(text) {
        let _ = (v.pgalloc_total(), v.refaults(), v.allocstalls());
        let _ = (v.pswpin(), v.pswpout());
    }
    let _ = readers::parse_psi(text);
    if let Ok(s) = readers::parse_smaps_rollup(text) {
        let _ = s.footprint_bytes();
    }
    let _ = readers::parse_stat(text);
    let _ = readers::parse_maps(text);
    let _ = readers::parse_mountinfo(text);
    let _ = readers::parse_memcg_stat_v1(text);
    let _ = readers::parse_memcg_stat_v2(text);
    let _ = readers::parse_smaps_vmas(text);
    if let (Ok(swaps), Ok(zram)) = (readers::parse_swaps(text), readers::parse_zram_mm_stat(text)) {
        let _ = zram.room_bytes();
        let _ = readers::swap_capacity(&swaps, |_| Some(zram));
    }
});
