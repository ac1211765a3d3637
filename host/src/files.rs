//! Writing large files: in pieces, not in one call.
//!
//! The kernel caches a long write's pages in folios of up to 2 MiB, and a
//! fresh block of memory that large is slow to hand out on virtual
//! machines whose host reclaims the guest's free memory. On the benchmark
//! machines a write in pieces of 2 MiB or more cost about 10 ms of CPU per
//! MiB, one in pieces of 256 KiB about 0.3 ms: a checkpoint's changelogs
//! over ten million keys (tens of MiB) took 6 % of a running sum's CPU,
//! a restore downloads table files of as much, and a Python function's
//! compiled code (tens of MiB) is written once per upload. Depends on
//! nothing else of the crate.

use std::io::Write;
use std::path::Path;

/// The most one write call is given.
pub const WRITE_PIECE_BYTES: usize = 256 << 10;

/// Write all of `bytes` to `out`, [`WRITE_PIECE_BYTES`] at a time.
pub fn write_in_pieces(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    bytes.chunks(WRITE_PIECE_BYTES).try_for_each(|piece| out.write_all(piece))
}

/// [`std::fs::write`], in pieces: `bytes` as the whole of the file at
/// `path`, created or truncated.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_in_pieces(&mut std::fs::File::create(path)?, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_written_once_in_pieces() {
        let bytes: Vec<u8> =
            (0..(5 * WRITE_PIECE_BYTES + 7) as u32).map(|i| (i % 251) as u8).collect();
        let mut calls = Vec::new();
        struct Recording<'a>(&'a mut Vec<usize>, Vec<u8>);
        impl Write for Recording<'_> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.push(buf.len());
                self.1.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut out = Recording(&mut calls, Vec::new());
        write_in_pieces(&mut out, &bytes).unwrap();
        assert_eq!(out.1, bytes);
        assert_eq!(calls, [vec![WRITE_PIECE_BYTES; 5], vec![7]].concat());
        let mut empty = Recording(&mut Vec::new(), Vec::new());
        write_in_pieces(&mut empty, b"").unwrap();
        assert!(empty.0.is_empty() && empty.1.is_empty());
    }

    #[test]
    fn a_file_written_in_pieces_is_all_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pieces");
        std::fs::write(&path, vec![b'x'; 3 * WRITE_PIECE_BYTES]).unwrap();
        let bytes: Vec<u8> = (0..(2 * WRITE_PIECE_BYTES + 3) as u32).map(|i| i as u8).collect();
        write(&path, &bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        write(&path, b"").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        assert!(write(&dir.path().join("absent/file"), b"x").is_err());
    }
}
