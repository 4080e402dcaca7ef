//! Text tables in kubectl's style: upper-case headers, columns padded to their widest cell,
//! three spaces between. On a terminal, states are coloured (green done, yellow under way,
//! red degraded); colour codes are added after padding so the columns stay aligned.

use mco_kube::fleet::{FleetStatus, NodeSummary};

const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// A cell: its text and the colour it takes on a terminal.
struct Cell(String, Option<&'static str>);

fn plain(text: impl Into<String>) -> Cell {
    Cell(text.into(), None)
}

fn layout(header: &[&str], rows: Vec<Vec<Cell>>, colour: bool) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.0.chars().count());
        }
    }
    let line = |cells: Vec<Cell>| {
        let last = cells.len() - 1;
        let mut out = String::new();
        for (i, Cell(text, paint)) in cells.into_iter().enumerate() {
            let padded = if i == last {
                text
            } else {
                format!("{text:<w$}   ", w = widths[i])
            };
            match paint.filter(|_| colour) {
                Some(code) => {
                    let (word, pad) = padded.split_at(padded.trim_end().len());
                    out.push_str(&format!("{code}{word}{RESET}{pad}"));
                }
                None => out.push_str(&padded),
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| plain(*h)).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

fn state_colour(state: &str) -> Option<&'static str> {
    match state {
        "Done" => Some(GREEN),
        "Degraded" | "Unreconcilable" => Some(RED),
        _ => Some(YELLOW),
    }
}

fn yes_no(value: bool, paint: &'static str) -> Cell {
    if value {
        Cell("True".into(), Some(paint))
    } else {
        plain("False")
    }
}

/// `kubectl mco status`: the pools as `oc get machineconfigpool` lists them (and PAUSED), then
/// each pool's nodes.
pub fn status(status: &FleetStatus, colour: bool) -> String {
    let header = [
        "NAME",
        "CONFIG",
        "UPDATED",
        "UPDATING",
        "DEGRADED",
        "MACHINECOUNT",
        "READYMACHINECOUNT",
        "UPDATEDMACHINECOUNT",
        "DEGRADEDMACHINECOUNT",
        "PAUSED",
    ];
    let rows = status
        .pools
        .iter()
        .map(|p| {
            vec![
                plain(&p.name),
                plain(&p.config),
                yes_no(p.updated, GREEN),
                yes_no(p.updating, YELLOW),
                yes_no(p.degraded.is_some(), RED),
                plain(p.machine_count.to_string()),
                plain(p.ready_machine_count.to_string()),
                plain(p.updated_machine_count.to_string()),
                plain(p.degraded_machine_count.to_string()),
                yes_no(p.paused, YELLOW),
            ]
        })
        .collect();
    let mut out = layout(&header, rows, colour);
    for pool in &status.pools {
        out.push('\n');
        let target = if pool.target_config != pool.config && !pool.target_config.is_empty() {
            format!(" -> {}", pool.target_config)
        } else {
            String::new()
        };
        out.push_str(&format!("Pool {}: {}{target}\n", pool.name, pool.config));
        if let Some(why) = &pool.degraded {
            out.push_str(&format!("  Degraded: {why}\n"));
        }
        if pool.nodes.is_empty() {
            out.push_str("  No nodes.\n");
        } else {
            out.push_str(&nodes(&pool.nodes, colour));
        }
    }
    if !status.unmanaged_nodes.is_empty() {
        out.push_str(&format!(
            "\nNodes in no pool: {}\n",
            status.unmanaged_nodes.join(", ")
        ));
    }
    out
}

/// `kubectl mco nodes POOL`: one line per node.
pub fn nodes(nodes: &[NodeSummary], colour: bool) -> String {
    let header = ["NODE", "STATE", "CURRENT", "DESIRED", "STEP", "REASON"];
    let rows = nodes
        .iter()
        .map(|n| {
            let step = n
                .step
                .as_ref()
                .map(|s| format!("{}={}", s.kind, s.status))
                .unwrap_or_else(|| "-".into());
            let reason = n.why();
            vec![
                plain(&n.name),
                Cell(n.state.clone(), state_colour(&n.state)),
                plain(&n.current_config),
                plain(&n.desired_config),
                plain(step),
                plain(reason),
            ]
        })
        .collect();
    layout(&header, rows, colour)
}

#[cfg(test)]
mod tests {
    use mco_kube::fleet::{DrainBlock, PoolSummary};

    use super::*;

    fn fleet() -> FleetStatus {
        let node = |name: &str, state: &str| NodeSummary {
            name: name.into(),
            state: state.into(),
            current_config: "rendered-worker-1".into(),
            desired_config: "rendered-worker-2".into(),
            ..NodeSummary::default()
        };
        let mut blocked = node("worker-1", "Working");
        blocked.drain_blocked_by = Some(DrainBlock {
            pod: "app/db-0".into(),
            budget: Some("db".into()),
        });
        FleetStatus {
            pools: vec![PoolSummary {
                name: "worker".into(),
                config: "rendered-worker-1".into(),
                target_config: "rendered-worker-2".into(),
                machine_count: 2,
                updating: true,
                nodes: vec![node("worker-0", "Done"), blocked],
                ..PoolSummary::default()
            }],
            ..FleetStatus::default()
        }
    }

    #[test]
    fn plain_tables_align_and_carry_no_colour() {
        let text = status(&fleet(), false);
        assert!(!text.contains('\x1b'), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME     CONFIG              UPDATED"));
        assert!(text.contains("Pool worker: rendered-worker-1 -> rendered-worker-2\n"));
        let node_header = lines.iter().position(|l| l.starts_with("NODE")).unwrap();
        let state_col = lines[node_header].find("STATE").unwrap();
        assert_eq!(lines[node_header + 1].find("Done"), Some(state_col));
        assert_eq!(lines[node_header + 2].find("Working"), Some(state_col));
        assert!(lines[node_header + 2].ends_with("drain blocked by pod app/db-0 (budget db)"));
    }

    #[test]
    fn terminal_tables_colour_states_only() {
        let text = nodes(&fleet().pools[0].nodes, true);
        assert!(text.contains(&format!("{GREEN}Done{RESET}")), "{text}");
        assert!(text.contains(&format!("{YELLOW}Working{RESET}")), "{text}");
        let stripped = text
            .replace(GREEN, "")
            .replace(YELLOW, "")
            .replace(RESET, "");
        assert_eq!(stripped, nodes(&fleet().pools[0].nodes, false));
    }
}
