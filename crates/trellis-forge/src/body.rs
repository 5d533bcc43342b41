//! The pull request body section Trellis owns: between `<!-- trellis:begin -->` and
//! `<!-- trellis:end -->`. Everything outside the markers is the humans' and is kept byte for
//! byte; the section is replaced in place, or appended when the body has none.

/// The line that opens the section Trellis owns.
pub const BODY_BEGIN: &str = "<!-- trellis:begin -->";
/// The line that closes it.
pub const BODY_END: &str = "<!-- trellis:end -->";

/// The section as it appears in a body.
fn section(content: &str) -> String {
    format!(
        "{BODY_BEGIN}\n{}\n{BODY_END}",
        content.trim_end_matches('\n')
    )
}

/// `existing` (a pull request body, `None` or empty for a new one) with its Trellis section
/// holding `content`. The last begin marker that a later end marker closes delimits the
/// section; text before and after it is kept exactly. Without such a pair, the section is
/// appended after a blank line (a stray marker stays human text).
pub fn with_owned_section(existing: Option<&str>, content: &str) -> String {
    let existing = existing.unwrap_or_default();
    if existing.trim().is_empty() {
        return section(content);
    }
    if let Some(begin) = existing.rfind(BODY_BEGIN)
        && let Some(end) = existing[begin..].find(BODY_END)
    {
        let end = begin + end + BODY_END.len();
        return format!(
            "{}{}{}",
            &existing[..begin],
            section(content),
            &existing[end..]
        );
    }
    let separator = if existing.ends_with("\n\n") {
        ""
    } else if existing.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    format!("{existing}{separator}{}", section(content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_is_replaced_in_place_and_human_text_kept() {
        let first = with_owned_section(None, "v1");
        assert_eq!(first, "<!-- trellis:begin -->\nv1\n<!-- trellis:end -->");
        let human = format!("Intro by a person.\r\n\n{first}\n\n  Trailing notes ✓ ");
        let second = with_owned_section(Some(&human), "v2\n");
        assert_eq!(
            second,
            "Intro by a person.\r\n\n<!-- trellis:begin -->\nv2\n<!-- trellis:end -->\n\n  Trailing notes ✓ "
        );
    }

    #[test]
    fn a_body_without_markers_gets_the_section_appended() {
        assert_eq!(
            with_owned_section(Some("Hand written"), "v1"),
            "Hand written\n\n<!-- trellis:begin -->\nv1\n<!-- trellis:end -->"
        );
        // A stray begin marker without an end stays; the new section follows it.
        let stray = format!("{BODY_BEGIN} oops");
        let once = with_owned_section(Some(&stray), "v1");
        assert!(once.starts_with(&stray) && once.ends_with("v1\n<!-- trellis:end -->"));
        assert_eq!(
            with_owned_section(Some(&once), "v2"),
            once.replace("v1", "v2")
        );
    }
}
