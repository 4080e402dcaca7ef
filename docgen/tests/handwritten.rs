//! The hand-written sections' Markdown subset: what it parses to, and what it refuses (with
//! the line).

use mco_docgen::handwritten::{Block, parse};
use mco_docgen::manpage::inlines;
use roff::{bold, roman};

#[test]
fn paragraphs_items_and_literal_blocks() {
    let text = "# mco-x(8)\n\n## FILES\n\nOne paragraph\nover two lines.\n\n\
                - `/etc/x`: the file,\n  described on two lines.\n- `/run/y`, `/run/z`: more.\n\
                After the items.\n\n## EXAMPLES\n\n```\nmco-x --flag\n  indented\n\n```\n";
    let hand = parse(text).unwrap();
    assert_eq!(hand.title, "mco-x(8)");
    assert_eq!(
        hand.section("FILES").unwrap().blocks,
        vec![
            Block::Paragraph("One paragraph over two lines.".into()),
            Block::Item {
                term: "`/etc/x`".into(),
                text: "the file, described on two lines.".into()
            },
            Block::Item {
                term: "`/run/y`, `/run/z`".into(),
                text: "more.".into()
            },
            Block::Paragraph("After the items.".into()),
        ]
    );
    assert_eq!(
        hand.section("EXAMPLES").unwrap().blocks,
        vec![Block::Literal(vec![
            "mco-x --flag".into(),
            "  indented".into(),
            String::new()
        ])]
    );
}

#[test]
fn what_the_subset_refuses_names_the_line() {
    let cases = [
        ("## FILES\n", 1, "the first line must be"),
        (
            "# p(8)\nearly text\n",
            2,
            "text before the first `## SECTION`",
        ),
        ("# p(8)\n## BUGS\nx\n", 2, "unknown section `BUGS`"),
        ("# p(8)\n## FILES\nx\n## FILES\ny\n", 4, "appears twice"),
        (
            "# p(8)\n## FILES\n\n## NOTES\nx\n",
            2,
            "section `FILES` is empty",
        ),
        ("# p(8)\n## FILES\na `code\n", 3, "code span is not closed"),
        ("# p(8)\n## FILES\n- plain: text\n", 3, "an item is"),
        (
            "# p(8)\n## FILES\n* star\n",
            3,
            "not in the man-page subset",
        ),
        (
            "# p(8)\n## FILES\nsee [x](y.md)\n",
            3,
            "not in the man-page subset",
        ),
        (
            "# p(8)\n## FILES\n### deeper\n",
            3,
            "not in the man-page subset",
        ),
        (
            "# p(8)\n## FILES\n| a | b |\n",
            3,
            "not in the man-page subset",
        ),
        (
            "# p(8)\n## EXAMPLES\n```\nnever closed\n",
            3,
            "not closed with ```",
        ),
    ];
    for (text, line, message) in cases {
        let err = parse(text).expect_err(text);
        assert_eq!(err.line, line, "{text:?}: {err}");
        assert!(err.message.contains(message), "{text:?}: {err}");
    }
}

#[test]
fn code_spans_are_bold_and_page_references_have_a_bold_name() {
    assert_eq!(
        inlines("run `mco-agent status`, see mco-agent-start(8) and rpm-ostree(1)."),
        vec![
            roman("run "),
            bold("mco-agent status"),
            roman(", see "),
            bold("mco-agent-start"),
            roman("(8) and "),
            bold("rpm-ostree"),
            roman("(1)."),
        ]
    );
    // parentheses that are not a section number stay as they are
    assert_eq!(
        inlines("a list (one) and f(x)"),
        vec![roman("a list (one) and f(x)")]
    );
}
