use mco_kube::fleet::{DrainBlock, EventSummary, Step};

use super::*;

fn node(name: &str, state: &str, current: &str) -> NodeSummary {
    NodeSummary {
        name: name.into(),
        state: state.into(),
        current_config: current.into(),
        desired_config: "rendered-worker-2".into(),
        ..NodeSummary::default()
    }
}

fn worker(nodes: Vec<NodeSummary>) -> PoolSummary {
    PoolSummary {
        name: "worker".into(),
        config: "rendered-worker-1".into(),
        target_config: "rendered-worker-2".into(),
        machine_count: nodes.len() as i64,
        updating: true,
        nodes,
        ..PoolSummary::default()
    }
}

/// The tags the page is made of: any other `<` in it would be markup that came from the API.
const TAGS: [&str; 18] = [
    "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "tr",
    "th", "td", "div", "span", "a", "code",
];

fn tags_of(page: &str) -> Vec<&str> {
    page.match_indices('<')
        .map(|(i, _)| {
            let rest = page[i + 1..].trim_start_matches('/');
            let end = rest.find([' ', '>']).unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

#[test]
fn pages_of_fleets() {
    let rollout = FleetStatus {
        pools: vec![
            PoolSummary {
                name: "master".into(),
                config: "rendered-master-1".into(),
                target_config: "rendered-master-1".into(),
                updated: true,
                nodes: vec![NodeSummary {
                    desired_config: "rendered-master-1".into(),
                    ..node("master-0", "Done", "rendered-master-1")
                }],
                ..PoolSummary::default()
            },
            worker(vec![
                node("worker-0", "Done", "rendered-worker-2"),
                NodeSummary {
                    step: Some(Step {
                        kind: "Drained".into(),
                        status: "Unknown".into(),
                        ..Step::default()
                    }),
                    drain_blocked_by: Some(DrainBlock {
                        pod: "app/db-0".into(),
                        budget: Some("db".into()),
                    }),
                    ..node("worker-1", "Working", "rendered-worker-1")
                },
                node("worker-2", "Done", "rendered-worker-1"),
            ]),
        ],
        unmanaged_nodes: vec!["infra-0".into()],
        events: vec![EventSummary {
            time: "2026-01-01 10:00:02 UTC".into(),
            node: "worker-1".into(),
            kind: "Normal".into(),
            reason: "Drain".into(),
            message: "Draining node to update config.".into(),
        }],
    };
    let hostile = FleetStatus {
        pools: vec![PoolSummary {
            degraded: Some("Node worker-0 is reporting: <b>bold</b>".into()),
            ..worker(vec![NodeSummary {
                reason: Some("<script>alert('reason')</script>".into()),
                ..node("worker-0", "Degraded", "rendered-worker-1")
            }])
        }],
        events: vec![EventSummary {
            node: "worker-0".into(),
            kind: "Warning\" onmouseover=\"alert(1)".into(),
            reason: "NodeDegraded".into(),
            message: "\"><img src=x onerror=alert(1)> & more".into(),
            ..EventSummary::default()
        }],
        ..FleetStatus::default()
    };
    let odd_state = FleetStatus {
        pools: vec![worker(vec![node(
            "worker-0",
            "Done\" class=\"x",
            "rendered-worker-2",
        )])],
        ..FleetStatus::default()
    };
    // (case, fleet, what the page holds, what it must not)
    let cases: [(&str, FleetStatus, &[&str], &[&str]); 4] = [
        (
            "empty fleet",
            FleetStatus::default(),
            &[
                "<p>No MachineConfigPools.</p>",
                "<h2>Last events</h2>\n<p>None.</p>",
            ],
            &["<table", "class=\"bar\"", "Nodes in no pool"],
        ),
        (
            "rollout in progress",
            rollout,
            &[
                "<h2 id=\"pool-master\">Pool master</h2>",
                "<h2 id=\"pool-worker\">Pool worker</h2>",
                "<p>rendered-worker-1 &rarr; rendered-worker-2; 3 machines, 0 ready, 0 updated, 0 degraded (updating)</p>",
                "<div class=\"updated\" style=\"width:33.33%\" title=\"1 updated\"></div>\
                 <div class=\"updating\" style=\"width:66.67%\" title=\"2 updating\"></div></div>",
                "<span class=\"s-done\">1 updated</span><span class=\"s-working\">2 updating</span>\
                 <span class=\"s-degraded\">0 degraded</span>",
                "<div class=\"updated\" style=\"width:100.00%\" title=\"1 updated\">",
                "<tr><td>worker-1</td><td class=\"s-working\">Working</td><td>rendered-worker-1</td>\
                 <td>rendered-worker-2</td><td>Drained=Unknown</td>\
                 <td>drain blocked by pod app/db-0 (budget db)</td></tr>",
                "<tr><td>master-0</td><td class=\"s-done\">Done</td>",
                "<h2>Nodes in no pool</h2>\n<p>infra-0</p>",
                "<tr><td>2026-01-01 10:00:02 UTC</td><td>worker-1</td><td>Normal</td><td>Drain</td>\
                 <td>Draining node to update config.</td></tr>",
            ],
            &["class=\"degraded\"", "<p>None.</p>"],
        ),
        (
            "degraded node with a hostile reason",
            hostile,
            &[
                "<p class=\"s-degraded\">Node worker-0 is reporting: &lt;b&gt;bold&lt;/b&gt;</p>",
                "<div class=\"degraded\" style=\"width:100.00%\" title=\"1 degraded\">",
                "<td class=\"s-degraded\">Degraded</td>",
                "<td>&lt;script&gt;alert(&#39;reason&#39;)&lt;/script&gt;</td>",
                "<td>Warning&quot; onmouseover=&quot;alert(1)</td>",
                "<td>&quot;&gt;&lt;img src=x onerror=alert(1)&gt; &amp; more</td>",
            ],
            &["<b>", "<img", "alert('reason')"],
        ),
        (
            "a state the page does not know",
            odd_state,
            &["<td class=\"s-other\">Done&quot; class=&quot;x</td>"],
            &["class=\"x\""],
        ),
    ];
    for (case, fleet, holds, lacks) in cases {
        let page = page(&fleet, "companion-0", "2026-01-01T10:00:05Z");
        assert!(page.starts_with("<!DOCTYPE html>\n"), "{case}: {page}");
        assert!(
            page.contains(&format!(
                "<meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">"
            )),
            "{case}: no refresh"
        );
        assert!(
            page.contains("Read at 2026-01-01T10:00:05Z by replica companion-0"),
            "{case}: {page}"
        );
        for tag in tags_of(&page) {
            assert!(TAGS.contains(&tag), "{case}: markup <{tag}> in\n{page}");
        }
        // no script and nothing fetched from elsewhere
        for banned in [
            "<script", "src=\"", "http://", "https://", "@import", "url(",
        ] {
            assert!(!page.contains(banned), "{case}: {banned} in\n{page}");
        }
        for text in holds {
            assert!(page.contains(text), "{case}: no {text:?} in\n{page}");
        }
        for text in lacks {
            assert!(!page.contains(text), "{case}: {text:?} in\n{page}");
        }
    }
}

#[test]
fn progress_of_nodes() {
    let pool = worker(Vec::new());
    let cases = [
        ("Done", "rendered-worker-2", Progress::Updated),
        ("Done", "rendered-worker-1", Progress::Updating),
        ("Working", "rendered-worker-1", Progress::Updating),
        ("Degraded", "rendered-worker-1", Progress::Degraded),
        ("Unreconcilable", "rendered-worker-2", Progress::Degraded),
    ];
    for (state, current, want) in cases {
        assert_eq!(
            progress(&pool, &node("n", state, current)),
            want,
            "{state} {current}"
        );
    }
    // a pool with no target yet: its status config is the target
    let untargeted = PoolSummary {
        target_config: String::new(),
        ..pool
    };
    assert_eq!(
        progress(&untargeted, &node("n", "Done", "rendered-worker-1")),
        Progress::Updated
    );
}

#[test]
fn the_error_page_names_the_error_escaped_and_reloads() {
    let page = error_page(
        "listing nodes: <forbidden>",
        "companion-1",
        "2026-01-01T10:00:05Z",
    );
    assert!(page.contains("could not be read from the API: listing nodes: &lt;forbidden&gt;"));
    assert!(page.contains("http-equiv=\"refresh\""));
    assert!(page.contains("replica companion-1"));
}
