//! The stream protocol of `kubectl exec` (`v4.channel.k8s.io`, `v5.channel.k8s.io`):
//! each message's first byte is its stream (0 stdin, 1 stdout, 2 stderr, 3 the final
//! status, 4 terminal resize); v5 adds 255, "this stream is closed" (stdin's end).
//! The status on stream 3 is a `metav1.Status`: Success, or Failure with reason
//! NonZeroExitCode and the code as an ExitCode cause, which kubectl exits with.

use serde_json::json;

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// v5: the payload's first byte names a stream the peer closed.
pub const CLOSE: u8 = 255;

/// `data` on `stream`, as one message.
pub fn frame(stream: u8, data: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(data.len() + 1);
    message.push(stream);
    message.extend_from_slice(data);
    message
}

/// What a message from the client means.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    Stdin(&'a [u8]),
    /// The client will send nothing more on this stream (v5).
    Closed(u8),
    Resize(&'a [u8]),
    /// An empty message, or one on a stream the client does not write.
    Ignored,
}

pub fn parse(message: &[u8]) -> Incoming<'_> {
    match message.split_first() {
        Some((&STDIN, data)) => Incoming::Stdin(data),
        Some((&CLOSE, [stream, ..])) => Incoming::Closed(*stream),
        Some((&RESIZE, data)) => Incoming::Resize(data),
        _ => Incoming::Ignored,
    }
}

/// The final status of a command that exited with `code`; `command` is only for the
/// message.
pub fn exit_status(command: &[String], code: i32) -> serde_json::Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// The final status of an exec that could not run at all.
pub fn failure_status(message: &str) -> serde_json::Value {
    json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_stream_first() {
        assert_eq!(frame(STDOUT, b"hi"), vec![1, b'h', b'i']);
        assert_eq!(frame(ERROR, b""), vec![3]);
    }

    #[test]
    fn client_messages() {
        assert_eq!(parse(&[0, b'x']), Incoming::Stdin(b"x"));
        assert_eq!(parse(&[0]), Incoming::Stdin(b""));
        assert_eq!(parse(&[255, 0]), Incoming::Closed(STDIN));
        assert_eq!(parse(&[255]), Incoming::Ignored);
        assert_eq!(parse(&[4, b'{']), Incoming::Resize(b"{"));
        assert_eq!(parse(&[]), Incoming::Ignored);
        assert_eq!(parse(&[1, b'x']), Incoming::Ignored);
    }

    #[test]
    fn exit_codes_become_kubectls_status() {
        assert_eq!(exit_status(&[], 0)["status"], "Success");
        let s = exit_status(&["sh".into(), "-c".into(), "exit 7".into()], 7);
        assert_eq!(s["status"], "Failure");
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "7");
        assert!(s["message"].as_str().unwrap().contains("exit code 7"));
    }
}
