//! An exec request's query: `command` (repeated, one argument each), which streams
//! (the API server's `input`/`output`/`error`, or `stdin`/`stdout`/`stderr` from a
//! direct caller) and `tty`.

use crate::query::percent_decode;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

fn truthy(value: &str) -> bool {
    matches!(value, "1" | "true" | "True" | "")
}

impl ExecRequest {
    /// `None` without a command (the kubelet's "you must specify at least 1 command").
    pub fn parse(query: Option<&str>) -> Option<Self> {
        let mut request = Self::default();
        for pair in query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            let on = truthy(&value);
            match percent_decode(key).as_str() {
                "command" => request.command.push(value),
                "input" | "stdin" => request.stdin = on,
                "output" | "stdout" => request.stdout = on,
                "error" | "stderr" => request.stderr = on,
                "tty" => request.tty = on,
                _ => {}
            }
        }
        (!request.command.is_empty()).then_some(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_parameters() {
        let r = ExecRequest::parse(Some(
            "command=sh&command=-c&command=echo+a%20b&input=1&output=1&error=1",
        ))
        .unwrap();
        assert_eq!(r.command, vec!["sh", "-c", "echo a b"]);
        assert!(r.stdin && r.stdout && r.stderr && !r.tty);
        let direct = ExecRequest::parse(Some("command=cat&stdout=true&tty=false")).unwrap();
        assert!(direct.stdout && !direct.stdin && !direct.tty);
        assert_eq!(ExecRequest::parse(Some("input=1")), None);
        assert_eq!(ExecRequest::parse(None), None);
    }
}
