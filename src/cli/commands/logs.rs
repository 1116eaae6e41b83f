//! `podhost logs POD [-c C | --all-containers] [--prefix] [-f] [--tail N] …`: the
//! daemon streams, this prints. Several containers print one after another, or with
//! `-f` all at once, a whole line at a time.

use std::io::Write;
use std::sync::Mutex;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;

use crate::api::client::Client;
use crate::cli::logs_query::{LogsFlags, log_query_path};
use crate::cli::pod_containers::{all_containers, default_container};
use crate::cli::pod_ref::{NamespaceFlag, PodRef};

pub fn run(
    client: &Client,
    pod: &str,
    flags: &LogsFlags,
    namespace: &NamespaceFlag,
) -> Result<i32> {
    let pod: Pod = client.get_json(&PodRef::parse(pod, namespace)?.path())?;
    let at = PodRef::of(&pod);
    let containers = if flags.all_containers {
        all_containers(&pod)
    } else if let Some(c) = &flags.container {
        vec![c.clone()]
    } else {
        let (container, notice) = default_container(&pod);
        if let Some(notice) = notice {
            eprintln!("{notice}");
        }
        container.into_iter().collect()
    };
    let paths = containers
        .iter()
        .map(|c| {
            let mut one = flags.clone();
            one.container = Some(c.clone());
            log_query_path(&at, &one).map(|path| (c.clone(), path))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stdout = Mutex::new(std::io::stdout());
    // Streams printed at once share stdout a whole line at a time; one stream alone
    // passes its bytes on as they come (a prompt without a newline shows at once).
    let concurrent = flags.follow && paths.len() > 1;
    let stream = |(container, path): &(String, String)| -> Result<()> {
        let prefix = flags
            .prefix
            .then(|| format!("[pod/{}/{container}] ", at.name).into_bytes());
        let mut lines = LineWriter::new(prefix, concurrent, &stdout);
        client.request_streaming("GET", path, None, &mut |chunk| lines.write(chunk))?;
        lines.finish()?;
        Ok(())
    };
    let stream = &stream;
    if concurrent {
        std::thread::scope(|s| {
            let running: Vec<_> = paths.iter().map(|p| s.spawn(move || stream(p))).collect();
            running
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a log stream panicked")))
                })
                .collect::<Result<Vec<()>>>()
        })?;
    } else {
        for p in &paths {
            stream(p)?;
        }
    }
    Ok(0)
}

/// Writes a stream to the shared stdout: whole lines under its lock when a prefix
/// starts each or streams run at once (so that they never interleave within a line),
/// else the bytes as they come.
struct LineWriter<'a> {
    prefix: Option<Vec<u8>>,
    whole_lines: bool,
    pending: Vec<u8>,
    out: &'a Mutex<std::io::Stdout>,
}

impl<'a> LineWriter<'a> {
    fn new(prefix: Option<Vec<u8>>, concurrent: bool, out: &'a Mutex<std::io::Stdout>) -> Self {
        LineWriter {
            whole_lines: concurrent || prefix.is_some(),
            prefix,
            pending: Vec::new(),
            out,
        }
    }

    fn write(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        if !self.whole_lines {
            return self.emit(chunk);
        }
        self.pending.extend_from_slice(chunk);
        let Some(last) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Ok(());
        };
        let complete: Vec<u8> = self.pending.drain(..=last).collect();
        self.emit(&complete)
    }

    /// The last line, when the log does not end in a newline.
    fn finish(mut self) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() {
            return Ok(());
        }
        self.emit(&rest)
    }

    fn emit(&self, lines: &[u8]) -> std::io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match &self.prefix {
            None => out.write_all(lines)?,
            Some(prefix) => {
                for line in lines.split_inclusive(|b| *b == b'\n') {
                    out.write_all(prefix)?;
                    out.write_all(line)?;
                }
            }
        }
        out.flush()
    }
}
