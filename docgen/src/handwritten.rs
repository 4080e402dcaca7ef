//! The hand-written sections of a man page (`docs/man/<page>.md`): a small, strict subset of
//! Markdown that reads well on its own and turns into roff without guessing.
//!
//! ```text
//! # mco-agent-start(8)          the page it belongs to, first line
//! ## FILES                      a section (one of SECTIONS)
//! Text lines form a paragraph; a blank line ends it.
//! - `TERM`: text                a tagged item (.TP), continued by lines indented two spaces
//! ```                           a literal block (examples), kept line by line
//! ```
//!
//! Inline: `code` is bold, `name(8)` (a page reference) has a bold name. Anything else that
//! Markdown would format (headings below `##`, links, emphasis, tables, other lists) is refused
//! with the file and line, so that nothing renders differently from what was written.

use std::fmt;

/// The sections a hand-written file may have, in the order the page shows them (man-pages(7)).
pub const SECTIONS: &[&str] = &[
    "DESCRIPTION",
    "EXIT STATUS",
    "ENVIRONMENT",
    "FILES",
    "NOTES",
    "EXAMPLES",
    "SEE ALSO",
];

/// The sections every page must have.
pub const REQUIRED: &[&str] = &["FILES", "ENVIRONMENT", "EXIT STATUS", "EXAMPLES"];

/// One parsed file: the page title and its sections in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandWritten {
    /// `mco-agent-start(8)`
    pub title: String,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// The lines of a paragraph joined by spaces.
    Paragraph(String),
    /// `- TERM: text`
    Item { term: String, text: String },
    /// The lines of a fenced block, verbatim.
    Literal(Vec<String>),
}

/// A parse error: the file's line (1-based) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

impl HandWritten {
    /// The section named `name`, if the file has it.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }
}

/// Parses one file's text.
pub fn parse(text: &str) -> Result<HandWritten, ParseError> {
    let err = |line: usize, message: String| ParseError { line, message };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).peekable();
    let title = match lines.next() {
        Some((_, l)) if l.starts_with("# ") => l[2..].trim().to_owned(),
        _ => return Err(err(1, "the first line must be `# PAGE(SECTION)`".into())),
    };
    let mut sections: Vec<Section> = Vec::new();
    // the paragraph or item being collected
    let mut open: Option<Block> = None;
    while let Some((number, line)) = lines.next() {
        let continues_item = matches!(open, Some(Block::Item { .. }))
            && line.starts_with("  ")
            && !line.trim().is_empty();
        if continues_item || (matches!(open, Some(Block::Paragraph(_))) && is_text(line)) {
            if line.matches('`').count() % 2 == 1 {
                return Err(err(number, "a code span is not closed on its line".into()));
            }
            if let Some(Block::Item { text, .. } | Block::Paragraph(text)) = &mut open {
                text.push(' ');
                text.push_str(line.trim());
            }
            continue;
        }
        // anything else ends the open block (opened only inside a section)
        if let Some(block) = open.take() {
            push(&mut sections, block);
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("## ") {
            let name = name.trim();
            if !SECTIONS.contains(&name) {
                return Err(err(
                    number,
                    format!("unknown section `{name}` (one of: {})", SECTIONS.join(", ")),
                ));
            }
            if sections.iter().any(|s| s.name == name) {
                return Err(err(number, format!("section `{name}` appears twice")));
            }
            sections.push(Section {
                name: name.to_owned(),
                blocks: Vec::new(),
            });
            continue;
        }
        if sections.is_empty() {
            return Err(err(number, "text before the first `## SECTION`".into()));
        }
        if line.starts_with("```") {
            let mut literal = Vec::new();
            loop {
                match lines.next() {
                    Some((_, l)) if l.starts_with("```") => break,
                    Some((_, l)) => literal.push(l.to_owned()),
                    None => return Err(err(number, "code block not closed with ```".into())),
                }
            }
            push(&mut sections, Block::Literal(literal));
            continue;
        }
        if line.matches('`').count() % 2 == 1 {
            return Err(err(number, "a code span is not closed on its line".into()));
        }
        if let Some(rest) = line.strip_prefix("- ") {
            let (term, text) = split_item(rest).ok_or_else(|| {
                err(
                    number,
                    "an item is `- `TERM`: text` (a code span, then a colon)".into(),
                )
            })?;
            open = Some(Block::Item { term, text });
            continue;
        }
        if !is_text(line) {
            return Err(err(
                number,
                format!("not in the man-page subset of Markdown: `{}`", line.trim()),
            ));
        }
        open = Some(Block::Paragraph(line.trim().to_owned()));
    }
    if let Some(block) = open {
        push(&mut sections, block);
    }
    if let Some(empty) = sections.iter().find(|s| s.blocks.is_empty()) {
        return Err(err(
            text.lines()
                .position(|l| l.strip_prefix("## ").map(str::trim) == Some(&empty.name))
                .map_or(1, |i| i + 1),
            format!("section `{}` is empty", empty.name),
        ));
    }
    Ok(HandWritten { title, sections })
}

fn push(sections: &mut [Section], block: Block) {
    if let Some(s) = sections.last_mut() {
        s.blocks.push(block);
    }
}

/// A line of paragraph text: nothing Markdown would turn into a structure or a link.
fn is_text(line: &str) -> bool {
    let t = line.trim_start();
    !(t.is_empty()
        || t.starts_with('#')
        || t.starts_with("- ")
        || t.starts_with("* ")
        || t.starts_with("```")
        || t.starts_with('|')
        || t.starts_with('>')
        || line.starts_with("    ")
        || t.contains("](")
        || t.contains("**")
        || t.chars().next().is_some_and(|c| c.is_ascii_digit()) && t.contains(". "))
}

/// `` `TERM`: text `` → (TERM with its backticks, text); TERM may be several code spans.
fn split_item(rest: &str) -> Option<(String, String)> {
    if !rest.starts_with('`') {
        return None;
    }
    let at = rest.find("`: ")?;
    let (term, text) = rest.split_at(at + 1);
    Some((term.to_owned(), text[2..].trim().to_owned()))
}
