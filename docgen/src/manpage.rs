//! One man page in roff: what clap_mangen makes of the command line (NAME, DESCRIPTION,
//! OPTIONS, SUBCOMMANDS, VERSION), the SYNOPSIS with placeholders ([`crate::synopsis`]), the
//! hand-written sections in between, in man-pages(7) order, and SEE ALSO naming the pages above
//! and below.

use anyhow::{Context, Result};
use clap_mangen::Man;
use roff::{Inline, Roff, bold, roman};

use crate::SECTION;
use crate::handwritten::{Block, HandWritten, SECTIONS};
use crate::pages::Page;

/// The page's roff text.
pub fn render(page: &Page, hand: &HandWritten) -> Result<String> {
    let version = page.command.get_version().unwrap_or_default();
    let man = Man::new(page.command.clone())
        .section(SECTION)
        .source(format!("{} {version}", page.program))
        .manual("mco-agent");
    let mut out = Vec::new();
    let mut clap_part = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| -> Result<()> {
        let mut text = Vec::new();
        render(&mut text).with_context(|| format!("rendering {}", page.name))?;
        // every part starts with roff's definition of the apostrophe string: keep the first
        let text = String::from_utf8_lossy(&text).into_owned();
        let text = match out.is_empty() {
            true => text.as_str(),
            false => text.strip_prefix(PREAMBLE).unwrap_or(&text),
        };
        out.extend_from_slice(text.as_bytes());
        Ok(())
    };
    clap_part(&|w| man.render_title(w))?;
    clap_part(&|w| man.render_name_section(w))?;
    // clap_mangen's synopsis leaves out the values' placeholders
    clap_part(&|w| {
        w.extend_from_slice(crate::synopsis::render(&page.command).to_roff().as_bytes());
        Ok(())
    })?;
    clap_part(&|w| man.render_description_section(w))?;
    let mut more = Roff::new();
    if let Some(extra) = hand.section("DESCRIPTION") {
        blocks(&mut more, &extra.blocks);
    }
    clap_part(&|w| {
        w.extend_from_slice(more.to_roff().as_bytes());
        Ok(())
    })?;
    if page.command.get_arguments().any(|a| !a.is_hide_set()) {
        clap_part(&|w| man.render_options_section(w))?;
    }
    if !page.children.is_empty() {
        clap_part(&|w| man.render_subcommands_section(w))?;
    }
    let mut roff = Roff::new();
    for name in SECTIONS {
        if matches!(*name, "DESCRIPTION" | "SEE ALSO") {
            continue;
        }
        if let Some(section) = hand.section(name) {
            roff.control("SH", [*name]);
            blocks(&mut roff, &section.blocks);
        }
    }
    see_also(&mut roff, page, hand);
    clap_part(&|w| {
        w.extend_from_slice(roff.to_roff().as_bytes());
        Ok(())
    })?;
    if page.command.get_version().is_some() {
        clap_part(&|w| man.render_version_section(w))?;
    }
    String::from_utf8(out).context("the page is not UTF-8")
}

/// What roff's writer puts before every part (`Roff::to_writer`).
const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// SEE ALSO: the page above, the pages below, then what the hand-written section adds.
fn see_also(roff: &mut Roff, page: &Page, hand: &HandWritten) {
    let related: Vec<&String> = page.parent.iter().chain(&page.children).collect();
    let extra = hand.section("SEE ALSO");
    if related.is_empty() && extra.is_none() {
        return;
    }
    roff.control("SH", ["SEE ALSO"]);
    if !related.is_empty() {
        let mut line = Vec::new();
        for (i, name) in related.iter().enumerate() {
            if i > 0 {
                line.push(roman(", "));
            }
            line.push(bold(name.as_str()));
            line.push(roman(format!("({SECTION})")));
        }
        roff.text(line);
    }
    if let Some(extra) = extra {
        blocks(roff, &extra.blocks);
    }
}

fn blocks(roff: &mut Roff, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Paragraph(text) => {
                roff.control("PP", []);
                roff.text(inlines(text));
            }
            Block::Item { term, text } => {
                roff.control("TP", []);
                roff.text(inlines(term));
                roff.text(inlines(text));
            }
            Block::Literal(lines) => {
                roff.control("PP", []);
                roff.control("RS", ["4"]);
                roff.control("nf", []);
                for line in lines {
                    roff.text([roman(line.as_str())]);
                }
                roff.control("fi", []);
                roff.control("RE", []);
            }
        }
    }
}

/// `code` in bold, a page reference `name(8)` with its name in bold, the rest roman.
pub fn inlines(text: &str) -> Vec<Inline> {
    let mut out = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if part.is_empty() {
            continue;
        }
        if i % 2 == 1 {
            out.push(bold(part));
        } else {
            page_references(part, &mut out);
        }
    }
    out
}

fn page_references(text: &str, out: &mut Vec<Inline>) {
    let mut rest = text;
    while let Some((before, name, after)) = next_reference(rest) {
        if !before.is_empty() {
            out.push(roman(before));
        }
        out.push(bold(name));
        rest = after;
    }
    if !rest.is_empty() {
        out.push(roman(rest));
    }
}

/// The first `name(N)` in `text`: (text before, name, `(N)` and the rest).
fn next_reference(text: &str) -> Option<(&str, &str, &str)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find('(').map(|i| i + from) {
        let is_section = bytes.get(at + 1).is_some_and(|b| (b'1'..=b'9').contains(b))
            && bytes.get(at + 2) == Some(&b')');
        let start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
            .map_or(0, |i| i + 1);
        if is_section && start < at && bytes[start].is_ascii_alphabetic() {
            return Some((&text[..start], &text[start..at], &text[at..]));
        }
        from = at + 1;
    }
    None
}
