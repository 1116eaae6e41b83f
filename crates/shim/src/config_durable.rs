//! The wait for the daemon's word that the shim config is durable.
//!
//! The daemon writes the config, spawns the shim and fsyncs the config while the shim
//! execs, links and reads it: the fsyncs are off the start's path. Nothing the next
//! daemon would have to find through the config after a power loss (the rootfs mount,
//! libcontainer's state) exists before the byte arrives.

use std::fs::File;
use std::io::Read;

use super::error::ShimError;
use podhost_runtime::shim_config::CONFIG_DURABLE;

/// Reads the daemon's byte from stdin, then puts /dev/null there (the monitor inherits
/// fd 0, and the daemon's end of the pipe is closed).
pub fn wait_for_durable_config() -> Result<(), ShimError> {
    let mut byte = [0u8; 1];
    let read = loop {
        match std::io::stdin().lock().read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    if let Ok(null) = File::open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
    }
    match read {
        Ok(1) if byte[0] == CONFIG_DURABLE => Ok(()),
        Ok(0) => Err(ShimError::ConfigNotDurable(
            "stdin closed without the byte".into(),
        )),
        Ok(_) => Err(ShimError::ConfigNotDurable(format!(
            "unexpected byte {:#04x} on stdin",
            byte[0]
        ))),
        Err(e) => Err(ShimError::ConfigNotDurable(format!("reading stdin: {e}"))),
    }
}
