//! The text of an error as the CLI prints it: the error, then each cause that adds
//! something. Many errors say their cause in their own message too (so that `{}` alone
//! is complete); printing the whole chain (`{:#}`) would then say it twice.

/// `error` and its causes, joined by ": ", without a cause whose text the line already
/// holds.
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach the daemon at /s: {source} (see --socket)")]
    struct SaysItsCause {
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read /x")]
    struct LeavesItsCause {
        #[source]
        source: std::io::Error,
    }

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let e = anyhow::Error::new(SaysItsCause {
            source: not_found(),
        });
        assert_eq!(
            error_text(&e),
            "cannot reach the daemon at /s: entity not found (see --socket)"
        );
    }

    #[test]
    fn a_cause_the_message_leaves_out_is_added() {
        let e = anyhow::Error::new(LeavesItsCause {
            source: not_found(),
        })
        .context("loading the layout");
        assert_eq!(
            error_text(&e),
            "loading the layout: cannot read /x: entity not found"
        );
    }
}
