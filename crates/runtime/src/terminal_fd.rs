//! The raw calls a terminal handed over a console socket needs (`exec -t`, the kubelet
//! API's and the CLI's): taking the master out of an SCM_RIGHTS message, and reading
//! and setting a window size. Kept here, where `unsafe` is allowed, behind safe
//! functions.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

/// The first fd passed with SCM_RIGHTS in one message read from the socket `socket`
/// (close-on-exec; the message's bytes, the pty's name, are not needed).
pub fn receive_fd(socket: RawFd) -> std::io::Result<OwnedFd> {
    let mut name = [0u8; 4096];
    let mut iov = [IoSliceMut::new(&mut name)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        socket,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg
            && let Some(&first) = fds.first()
        {
            // SAFETY: the kernel just installed `first` in this process for this
            // message; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(first) });
        }
    }
    Err(std::io::Error::other(
        "the console socket's message carried no terminal",
    ))
}

/// TIOCSWINSZ on the terminal `fd`: its program sees the new size (and SIGWINCH).
pub fn set_window_size(fd: BorrowedFd<'_>, rows: u16, cols: u16) -> std::io::Result<()> {
    let winsize = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which outlives the call;
    // `fd` is an open descriptor borrowed for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &winsize) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// TIOCGWINSZ on the terminal `fd`: its rows and columns.
pub fn window_size(fd: BorrowedFd<'_>) -> std::io::Result<(u16, u16)> {
    let mut winsize = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer, which outlives the
    // call; `fd` is an open descriptor borrowed for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut winsize) };
    if rc == 0 {
        Ok((winsize.ws_row, winsize.ws_col))
    } else {
        Err(std::io::Error::last_os_error())
    }
}
