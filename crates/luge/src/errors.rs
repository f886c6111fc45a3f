//! How the binary prints an error: its chain of causes, each said once.
//!
//! The libraries' errors spell their cause in their own message (`cannot listen on …: Address
//! already in use`) *and* mark it as their `source`, so a reader of the message alone loses
//! nothing; printing the chain with `{:#}` would then say every cause twice. Here a cause whose
//! text the message so far already holds is left out.

/// `e` and its causes, `: `-separated, without the causes its messages already spell.
pub(crate) fn chain_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot listen on 0.0.0.0:8080: {source}")]
    struct Bind {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_cause_the_message_already_spells_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        let e = anyhow::Error::new(Bind { source: io }).context("cannot start the node");
        assert_eq!(
            chain_text(&e),
            "cannot start the node: cannot listen on 0.0.0.0:8080: Address already in use"
        );
    }

    #[test]
    fn a_cause_the_message_does_not_spell_is_kept() {
        let e = anyhow::anyhow!("No such file or directory").context("cannot read luge.toml");
        assert_eq!(chain_text(&e), "cannot read luge.toml: No such file or directory");
    }
}
