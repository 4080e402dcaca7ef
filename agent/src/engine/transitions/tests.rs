//! The table and the diagram of the update state machine in `docs/architecture.md` are the
//! engine's [`TRANSITIONS`], which the engine checks every change of the recorded step against.

use std::collections::BTreeSet;

use super::*;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/architecture.md");

/// Every step. The match makes a new variant fail to compile until it is listed here too.
fn all_steps() -> Vec<Step> {
    let all = [
        Draining,
        Writing,
        Os,
        PostActions,
        RebootRequested,
        Verifying,
        RewritingFiles,
        NotTaken,
        RollingBack,
        BootFailed,
        RebootingBack,
    ];
    for step in all {
        match step {
            Draining | Writing | Os | PostActions | RebootRequested | Verifying
            | RewritingFiles | NotTaken | RollingBack | BootFailed | RebootingBack => {}
        }
    }
    all.to_vec()
}

/// A step as the doc writes it: `` `Writing` `` in the table, `Writing` in the diagram;
/// `(none)` and `[*]` are no record.
fn parse_step(cell: &str) -> Result<Option<Step>, String> {
    let cell = cell.trim().trim_matches('`');
    if cell == "(none)" || cell == "[*]" {
        return Ok(None);
    }
    all_steps()
        .into_iter()
        .find(|s| s.as_str() == cell)
        .map(Some)
        .ok_or_else(|| format!("{cell:?} is not a step"))
}

/// The lines of the doc between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn section(doc: &str, name: &str) -> Vec<String> {
    let (begin, end) = (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    );
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("{DOC}: no {begin} marker"));
    let rest = &doc[start + begin.len()..];
    let stop = rest
        .find(&end)
        .unwrap_or_else(|| panic!("{DOC}: no {end} marker"));
    rest[..stop].lines().map(str::to_string).collect()
}

fn doc() -> String {
    std::fs::read_to_string(DOC).unwrap_or_else(|e| panic!("reading {DOC}: {e}"))
}

/// The table's rows: `| from | to | when |`.
fn table_rows(doc: &str) -> Vec<(Option<Step>, Option<Step>, String)> {
    section(doc, "state-machine-table")
        .iter()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its separator
        .map(|line| {
            let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").collect();
            let [from, to, when] = cells[..] else {
                panic!(
                    "{DOC}: a row of the state machine table is not | from | to | when |: {line}"
                );
            };
            let step = |c: &str| parse_step(c).unwrap_or_else(|e| panic!("{DOC}: {line}: {e}"));
            (step(from), step(to), when.trim().to_string())
        })
        .collect()
}

/// The diagram's edges: `From --> To` (with an optional `: label`), as `From --> To` with the
/// table's names.
fn diagram_edges(doc: &str) -> BTreeSet<String> {
    section(doc, "state-machine-diagram")
        .iter()
        .filter_map(|line| line.split_once("-->").map(|edge| (line, edge)))
        .map(|(line, (from, to))| {
            let to = to.split(':').next().unwrap_or(to);
            let step = |c: &str| parse_step(c).unwrap_or_else(|e| panic!("{DOC}: {line}: {e}"));
            edge(step(from), step(to))
        })
        .collect()
}

fn edge(from: Option<Step>, to: Option<Step>) -> String {
    format!("{} --> {}", name(from), name(to))
}

/// The table as Markdown rows, to paste into the doc when the engine changes.
fn markdown_rows() -> String {
    TRANSITIONS
        .iter()
        .map(|t| {
            let cell = |s: Option<Step>| s.map_or("(none)".to_string(), |s| format!("`{s}`"));
            format!("| {} | {} | {} |\n", cell(t.from), cell(t.to), t.when)
        })
        .collect()
}

#[test]
fn the_docs_table_is_the_engines_transition_table() {
    let rows = table_rows(&doc());
    let code: Vec<_> = TRANSITIONS
        .iter()
        .map(|t| (t.from, t.to, t.when.to_string()))
        .collect();
    assert_eq!(
        rows,
        code,
        "the state machine table in {DOC} differs from engine::transitions::TRANSITIONS; the rows should be:\n{}",
        markdown_rows()
    );
}

#[test]
fn the_docs_diagram_has_exactly_the_engines_transitions() {
    let edges = diagram_edges(&doc());
    let code: BTreeSet<_> = TRANSITIONS.iter().map(|t| edge(t.from, t.to)).collect();
    let missing: Vec<_> = code.difference(&edges).collect();
    let extra: Vec<_> = edges.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the state machine diagram in {DOC}: missing {missing:?}, not in the engine {extra:?}"
    );
}

#[test]
fn every_step_is_entered_and_left_and_every_update_can_end() {
    for step in all_steps() {
        assert!(
            TRANSITIONS.iter().any(|t| t.to == Some(step)),
            "{step} is never entered"
        );
        assert!(
            TRANSITIONS
                .iter()
                .any(|t| t.from == Some(step) && t.to != Some(step)),
            "{step} is never left"
        );
    }
    assert!(TRANSITIONS.iter().any(|t| t.to.is_none()));
    let pairs: BTreeSet<_> = TRANSITIONS.iter().map(|t| edge(t.from, t.to)).collect();
    assert_eq!(
        pairs.len(),
        TRANSITIONS.len(),
        "a transition is listed twice"
    );
}

#[test]
fn a_transition_outside_the_table_is_refused_naming_both_steps() {
    check(Some(Writing), Some(Os)).unwrap();
    check(None, Some(Writing)).unwrap();
    let err = check(Some(Writing), None).unwrap_err().to_string();
    assert_eq!(
        err,
        "bug: the update state machine has no transition from Writing to (none)"
    );
    let err = check(None, Some(Verifying)).unwrap_err().to_string();
    assert!(err.ends_with("from (none) to Verifying"), "{err}");
}
