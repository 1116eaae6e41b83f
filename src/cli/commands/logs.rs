//! `podhost logs POD [-c C] [-f] [--tail N] …`: the daemon streams, this prints.

use std::io::Write;

use anyhow::Result;

use crate::api::client::Client;
use crate::cli::logs_query::{LogsFlags, log_query_path};

pub fn run(client: &Client, pod: &str, flags: &LogsFlags) -> Result<i32> {
    let path = log_query_path(pod, flags)?;
    let mut stdout = std::io::stdout();
    client.request_streaming("GET", &path, None, &mut |chunk| {
        stdout.write_all(chunk)?;
        stdout.flush()
    })?;
    Ok(0)
}
