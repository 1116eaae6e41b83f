//! How a container's process is chosen from the image config and the pod spec.
//!
//! Kubernetes rules: `command` replaces the image's Entrypoint (and drops its Cmd);
//! `args` replaces the image's Cmd; with neither, the image's Entrypoint + Cmd run.

/// Merges the image's Entrypoint/Cmd with the container's command/args.
///
/// `None` means the field is absent; an explicitly empty list counts as absent too, as the
/// kubelet treats `len == 0`.
pub fn merge_command(
    image_entrypoint: &[String],
    image_cmd: &[String],
    command: Option<&[String]>,
    args: Option<&[String]>,
) -> Vec<String> {
    let command = command.filter(|c| !c.is_empty());
    let args = args.filter(|a| !a.is_empty());
    match (command, args) {
        (Some(c), Some(a)) => c.iter().chain(a).cloned().collect(),
        (Some(c), None) => c.to_vec(),
        (None, Some(a)) => image_entrypoint.iter().chain(a).cloned().collect(),
        (None, None) => image_entrypoint.iter().chain(image_cmd).cloned().collect(),
    }
}

/// Expands `$(VAR)` references in command and args from the container's env, as the
/// kubelet does; `$$(VAR)` escapes to a literal `$(VAR)`, unknown references stay as written.
pub fn expand_env_refs(input: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            if bytes[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if bytes[i + 1] == b'('
                && let Some(end) = input[i + 2..].find(')')
            {
                let name = &input[i + 2..i + 2 + end];
                if let Some((_, v)) = env.iter().rev().find(|(k, _)| k == name) {
                    out.push_str(v);
                    i += end + 3;
                    continue;
                }
            }
        }
        let ch = input[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_four_kubernetes_cases() {
        let ep = v(&["/ep"]);
        let cmd = v(&["cmd1"]);
        assert_eq!(merge_command(&ep, &cmd, None, None), v(&["/ep", "cmd1"]));
        assert_eq!(
            merge_command(&ep, &cmd, Some(&v(&["/c"])), None),
            v(&["/c"])
        );
        assert_eq!(
            merge_command(&ep, &cmd, None, Some(&v(&["a"]))),
            v(&["/ep", "a"])
        );
        assert_eq!(
            merge_command(&ep, &cmd, Some(&v(&["/c"])), Some(&v(&["a"]))),
            v(&["/c", "a"])
        );
    }

    #[test]
    fn empty_lists_count_as_absent() {
        let cmd = v(&["sh"]);
        assert_eq!(merge_command(&[], &cmd, Some(&[]), Some(&[])), v(&["sh"]));
    }

    #[test]
    fn env_references() {
        let env = vec![("A".to_string(), "1".to_string())];
        assert_eq!(expand_env_refs("x$(A)y", &env), "x1y");
        assert_eq!(expand_env_refs("$$(A)", &env), "$(A)");
        assert_eq!(expand_env_refs("$(B)", &env), "$(B)");
        assert_eq!(expand_env_refs("é$", &env), "é$");
    }
}
