//! The page itself: the fleet as `kubectl mco status` shows it, as one self-contained HTML
//! document (inline style, no script, no external asset) that reloads itself every
//! [`REFRESH_SECONDS`] with `<meta http-equiv="refresh">`.
//!
//! Everything that comes from the API (pool and node names, configs, reasons, event messages)
//! goes through [`esc`]; a node's state picks its CSS class from a fixed list, never by
//! pasting the annotation into an attribute.

use std::fmt::Write;

use mco_kube::fleet::{FleetStatus, NodeSummary, PoolSummary};

/// How often the page reloads itself, in seconds.
pub const REFRESH_SECONDS: u32 = 10;

/// Where a node is in its pool's rollout, for the pool's bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Updated,
    Updating,
    Degraded,
}

/// A node's place in the bar: Degraded (or Unreconcilable), updated (Done on the pool's target
/// config), or still updating.
pub fn progress(pool: &PoolSummary, node: &NodeSummary) -> Progress {
    let target = if pool.target_config.is_empty() {
        &pool.config
    } else {
        &pool.target_config
    };
    match node.state.as_str() {
        "Degraded" | "Unreconcilable" => Progress::Degraded,
        "Done" if node.current_config == *target => Progress::Updated,
        _ => Progress::Updating,
    }
}

/// The CSS class of a node state: one of a fixed set, whatever the annotation holds.
fn state_class(state: &str) -> &'static str {
    match state {
        "Done" => "s-done",
        "Working" | "Rebooting" => "s-working",
        "Degraded" | "Unreconcilable" => "s-degraded",
        _ => "s-other",
    }
}

/// HTML-escapes text for an element's content or a quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:.25em .7em;text-align:left;font-size:.9em}td:not(:last-child){white-space:nowrap}\
.bar{display:flex;width:36em;max-width:100%;height:1.1em;border:1px solid #999;background:#eee}\
.updated{background:#3a3}.updating{background:#e90}.degraded{background:#d33}\
.s-done{color:#282}.s-degraded{color:#c22;font-weight:bold}.s-working{color:#b70}\
.legend span{margin-right:1em}.note{color:#666;font-size:.85em}.error{color:#c22}";

/// The document around `body`: the refresh, the style, the title.
fn document(body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>MachineConfigPools</title><style>{STYLE}</style></head><body>\n\
         <h1>MachineConfigPools</h1>\n{body}</body></html>\n"
    )
}

/// The footer: who served the page, when the fleet was read, where the same data is.
fn footer(replica: &str, read_at: &str) -> String {
    format!(
        "<p class=\"note\">Read at {} by replica {} (every replica reads the API itself and \
         serves the same page); reloads every {REFRESH_SECONDS} s. The same data: \
         <a href=\"status.json\">status.json</a>, <code>kubectl mco status -o json</code>.</p>\n",
        esc(read_at),
        esc(replica)
    )
}

/// The page for `status`, read at `read_at` (RFC 3339) by replica `replica`.
pub fn page(status: &FleetStatus, replica: &str, read_at: &str) -> String {
    let mut out = String::new();
    if status.pools.is_empty() {
        out.push_str("<p>No MachineConfigPools.</p>\n");
    }
    for pool in &status.pools {
        pool_section(&mut out, pool);
    }
    if !status.unmanaged_nodes.is_empty() {
        let names: Vec<String> = status.unmanaged_nodes.iter().map(|n| esc(n)).collect();
        let _ = writeln!(
            out,
            "<h2>Nodes in no pool</h2>\n<p>{}</p>",
            names.join(", ")
        );
    }
    out.push_str("<h2>Last events</h2>\n");
    if status.events.is_empty() {
        out.push_str("<p>None.</p>\n");
    } else {
        out.push_str(
            "<table><tr><th>Time</th><th>Node</th><th>Type</th><th>Reason</th><th>Message</th></tr>\n",
        );
        for e in &status.events {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&e.time),
                esc(&e.node),
                esc(&e.kind),
                esc(&e.reason),
                esc(&e.message)
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str(&footer(replica, read_at));
    document(&out)
}

/// The page when the fleet could not be read: the error, and the page keeps reloading.
pub fn error_page(error: &str, replica: &str, read_at: &str) -> String {
    document(&format!(
        "<p class=\"error\">The fleet could not be read from the API: {}</p>\n{}",
        esc(error),
        footer(replica, read_at)
    ))
}

fn pool_section(out: &mut String, pool: &PoolSummary) {
    let mut counts = [0usize; 3];
    for node in &pool.nodes {
        counts[progress(pool, node) as usize] += 1;
    }
    let total = pool.nodes.len().max(1);
    let target = if pool.target_config != pool.config && !pool.target_config.is_empty() {
        format!(" &rarr; {}", esc(&pool.target_config))
    } else {
        String::new()
    };
    let mut flags = Vec::new();
    if pool.paused {
        flags.push("paused");
    }
    if pool.updating {
        flags.push("updating");
    }
    if pool.degraded.is_some() {
        flags.push("degraded");
    }
    let _ = writeln!(
        out,
        "<h2 id=\"pool-{name}\">Pool {name}</h2>\n<p>{config}{target}; {machines} machines, \
         {ready} ready, {updated} updated, {degraded} degraded{flags}</p>",
        name = esc(&pool.name),
        config = esc(&pool.config),
        machines = pool.machine_count,
        ready = pool.ready_machine_count,
        updated = pool.updated_machine_count,
        degraded = pool.degraded_machine_count,
        flags = if flags.is_empty() {
            String::new()
        } else {
            format!(" ({})", flags.join(", "))
        },
    );
    if let Some(why) = &pool.degraded {
        let _ = writeln!(out, "<p class=\"s-degraded\">{}</p>", esc(why));
    }
    out.push_str("<div class=\"bar\">");
    for (class, count) in ["updated", "updating", "degraded"].iter().zip(counts) {
        if count > 0 {
            let _ = write!(
                out,
                "<div class=\"{class}\" style=\"width:{:.2}%\" title=\"{count} {class}\"></div>",
                count as f64 * 100.0 / total as f64
            );
        }
    }
    let _ = writeln!(
        out,
        "</div>\n<p class=\"legend\"><span class=\"s-done\">{} updated</span>\
         <span class=\"s-working\">{} updating</span><span class=\"s-degraded\">{} degraded</span></p>",
        counts[0], counts[1], counts[2]
    );
    if pool.nodes.is_empty() {
        out.push_str("<p>No nodes.</p>\n");
        return;
    }
    out.push_str(
        "<table><tr><th>Node</th><th>State</th><th>Current</th><th>Desired</th><th>Step</th><th>Reason</th></tr>\n",
    );
    for node in &pool.nodes {
        let step = node
            .step
            .as_ref()
            .map(|s| format!("{}={}", s.kind, s.status))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&node.name),
            state_class(&node.state),
            esc(&node.state),
            esc(&node.current_config),
            esc(&node.desired_config),
            esc(&step),
            esc(&node.why())
        );
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests;
