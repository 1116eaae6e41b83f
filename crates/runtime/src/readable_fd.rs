//! A file registered with the tokio reactor for readability: the kernel log reader's
//! (oom/) non-blocking reads of /dev/kmsg and FIFOs.

use std::fs::File;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Registers `file` with the current tokio reactor, interested in readability only.
/// Must run inside a tokio runtime (tokio panics otherwise).
pub fn register_readable(file: File) -> std::io::Result<AsyncFd<File>> {
    // SAFETY: tokio requires the fd to stay open and to mean the same open file
    // description for the AsyncFd's whole life. A `File` owns its fd: it closes it only
    // when dropped, and its `as_raw_fd()` never changes. The File moves into the
    // AsyncFd, and AsyncFd<File> hands out only shared or mutable references to it
    // (never a way to swap the fd) until `into_inner` gives the File back, which ends
    // the registration first.
    unsafe { AsyncFd::register_with_interest(file, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A pipe's read end becomes readable once something is written to it.
    #[tokio::test]
    async fn a_pipe_becomes_readable() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let fd = register_readable(File::from(read)).unwrap();
        let mut writer = File::from(write);
        writer.write_all(b"x").unwrap();
        let mut guard = fd.readable().await.unwrap();
        let mut buf = [0u8; 1];
        let n = guard
            .try_io(|f| std::io::Read::read(&mut f.get_ref(), &mut buf))
            .unwrap()
            .unwrap();
        assert_eq!((n, buf), (1, *b"x"));
    }
}
