//! Process-level measurements reported by `weir run` (and, later, the
//! metrics endpoint).

/// The process's peak resident set size in bytes (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_rss_is_plausible_on_linux() {
        if cfg!(target_os = "linux") {
            let rss = super::peak_rss_bytes().unwrap();
            assert!(rss > 1 << 20 && rss < 64 << 30, "{rss}");
        }
    }
}
