use super::*;
use crate::mco::node_conditions::{APPLIED_FILES_AND_OS, merge_with};

const IMG: &str = "registry.example/ocl/worker@sha256:2";
const NOW: &str = "2026-01-01T00:00:00Z";

fn facts() -> NodeFacts<'static> {
    NodeFacts {
        name: "worker-0",
        last_applied_drain: "",
    }
}

const ON: Gates = Gates {
    image_mode_status_reporting: true,
};
const OFF: Gates = Gates {
    image_mode_status_reporting: false,
};

/// (parent type, parent status, parent reason, parent message, child: (type, status, reason,
/// message)) of each change.
type Row = (
    &'static str,
    Status,
    String,
    String,
    Option<(&'static str, Status, String, String)>,
);

fn rows(changes: Vec<Change>) -> Vec<Row> {
    changes
        .into_iter()
        .map(|c| {
            (
                c.parent.kind,
                c.parent.status,
                c.parent.reason,
                c.parent.message,
                c.child
                    .map(|ch| (ch.kind, ch.status, ch.reason, ch.message)),
            )
        })
        .collect()
}

fn row(
    parent: (&'static str, Status, &str, &str),
    child: Option<(&'static str, Status, &str, &str)>,
) -> Row {
    (
        parent.0,
        parent.1,
        parent.2.into(),
        parent.3.into(),
        child.map(|c| (c.0, c.1, c.2.into(), c.3.into())),
    )
}

/// Each step with and without the gate against what the MCD writes then.
#[test]
fn each_step_writes_what_the_mcd_writes_with_and_without_the_gate() {
    use Status::*;
    let pulling = Progress::PullingImage { image: IMG.into() };
    let pulled = Progress::ImagePulled { image: IMG.into() };
    let failed = Progress::ImagePullFailed {
        image: IMG.into(),
        error: "unauthorized".into(),
    };
    let both = Progress::ApplyingFilesAndOs {
        os: true,
        files: true,
    };
    let os_applied = Progress::AppliedFilesAndOs {
        os: true,
        files: false,
    };
    let files_applied = Progress::AppliedFilesAndOs {
        os: false,
        files: true,
    };
    let nothing_applied = Progress::AppliedFilesAndOs {
        os: false,
        files: false,
    };
    let pull = "ImagePulledFromRegistry";
    let table: Vec<(&str, Gates, &Progress, Vec<Row>)> = vec![
        ("no pull reported without the gate", OFF, &pulling, vec![]),
        ("no pull reported without the gate", OFF, &pulled, vec![]),
        ("no pull reported without the gate", OFF, &failed, vec![]),
        (
            "pulling",
            ON,
            &pulling,
            vec![row(
                (
                    pull,
                    Unknown,
                    pull,
                    &format!("Pulling OS image {IMG} from registry"),
                ),
                None,
            )],
        ),
        (
            "pulled",
            ON,
            &pulled,
            vec![row(
                (
                    pull,
                    True,
                    pull,
                    &format!("Successfully pulled OS image {IMG} from registry"),
                ),
                None,
            )],
        ),
        (
            "pull failed",
            ON,
            &failed,
            vec![row(
                (
                    pull,
                    False,
                    pull,
                    &format!("Failed to pull OS image {IMG} from registry: unauthorized"),
                ),
                None,
            )],
        ),
        (
            "files and OS in one condition without the gate",
            OFF,
            &both,
            vec![row(
                (
                    UPDATE_EXECUTED,
                    Unknown,
                    APPLIED_FILES_AND_OS,
                    "Updating the Files and OS on disk as a part of the in progress phase",
                ),
                Some((
                    APPLIED_FILES_AND_OS,
                    Unknown,
                    "UpdateExecutedAppliedFilesAndOS",
                    "Applying files and new OS config to node. OS will  need an update. SSH Keys will  need an update",
                )),
            )],
        ),
        (
            "files then OS with the gate",
            ON,
            &both,
            vec![
                row(
                    (
                        UPDATE_EXECUTED,
                        Unknown,
                        APPLIED_FILES,
                        "Updating the Files on disk as a part of the in progress phase",
                    ),
                    Some((
                        APPLIED_FILES,
                        Unknown,
                        "UpdateExecutedAppliedFiles",
                        "Applying files to node.",
                    )),
                ),
                row(
                    (
                        UPDATE_EXECUTED,
                        Unknown,
                        APPLIED_OS_IMAGE,
                        "Updating the OS on disk as a part of the in progress phase",
                    ),
                    Some((
                        APPLIED_OS_IMAGE,
                        Unknown,
                        "UpdateExecutedAppliedOSImage",
                        "Applying new OS config to node.",
                    )),
                ),
            ],
        ),
        (
            "OS applied with the gate",
            ON,
            &os_applied,
            vec![row(
                (
                    UPDATE_EXECUTED,
                    True,
                    APPLIED_OS_IMAGE,
                    "Updated the OS on disk as a part of the in progress phase",
                ),
                Some((
                    APPLIED_OS_IMAGE,
                    True,
                    "UpdateExecutedAppliedOSImage",
                    "Applied new OS config to node.",
                )),
            )],
        ),
        (
            "files applied with the gate",
            ON,
            &files_applied,
            vec![row(
                (
                    UPDATE_EXECUTED,
                    True,
                    APPLIED_FILES,
                    "Updated the Files on disk as a part of the in progress phase",
                ),
                Some((
                    APPLIED_FILES,
                    True,
                    "UpdateExecutedAppliedFiles",
                    "Applied files. SSH Keys did need an update",
                )),
            )],
        ),
        (
            "neither files nor OS: nothing with the gate",
            ON,
            &nothing_applied,
            vec![],
        ),
        (
            "other steps are the same with the gate",
            ON,
            &Progress::Rebooted,
            vec![row(
                (REBOOTED_NODE, True, REBOOTED_NODE, "Node has rebooted"),
                None,
            )],
        ),
    ];
    for (name, gates, progress, want) in table {
        assert_eq!(rows(gates.changes(progress, &facts())), want, "{name}");
    }
}

#[test]
fn a_new_object_gets_the_gates_condition_types() {
    let change = &ON.changes(&Progress::PullingImage { image: IMG.into() }, &facts())[0];
    let made = merge_with(&[], change, "rendered-b", NOW, ON.condition_types()).unwrap();
    let kinds: Vec<&str> = made.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds.len(), 16, "{kinds:?}");
    assert_eq!(kinds[0], IMAGE_PULLED_FROM_REGISTRY);
    for kind in IMAGE_MODE_CONDITION_TYPES {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    assert!(!kinds.contains(&APPLIED_FILES_AND_OS));
    let plain = OFF.changes(&Progress::Rebooted, &facts());
    let made = merge_with(&[], &plain[0], "rendered-b", NOW, OFF.condition_types()).unwrap();
    assert_eq!(made.len(), CONDITION_TYPES.len());
    assert!(!made.iter().any(|c| c.kind == IMAGE_PULLED_FROM_REGISTRY));
}

#[test]
fn updated_names_the_image_an_update_went_to() {
    let cases = [
        ("config only", None, None, "rendered-b"),
        ("same image", Some(IMG), Some(IMG), "rendered-b"),
        ("into an image", Some(IMG), None, IMG),
        (
            "to another image",
            Some(IMG),
            Some("registry.example/old@sha256:1"),
            IMG,
        ),
        ("out of image mode", None, Some(IMG), "disable image mode"),
        (
            "an empty desired image",
            Some(""),
            Some(IMG),
            "disable image mode",
        ),
    ];
    for (name, desired, current, want) in cases {
        assert_eq!(
            update_target("rendered-b", desired, current),
            want,
            "{name}"
        );
    }
    // The reset messages name it.
    let pulled = &ON.changes(&Progress::ImagePulled { image: IMG.into() }, &facts())[0];
    let before = merge_with(&[], pulled, "rendered-b", NOW, ON.condition_types()).unwrap();
    let updated = &ON.changes(&Progress::Updated, &facts())[0];
    let target = update_target("rendered-b", Some(IMG), None);
    let after = merge_with(&before, updated, &target, NOW, ON.condition_types()).unwrap();
    let pull = after
        .iter()
        .find(|c| c.kind == IMAGE_PULLED_FROM_REGISTRY)
        .unwrap();
    assert_eq!(pull.status, Status::False);
    assert_eq!(
        pull.message,
        format!("Action during update to {IMG}: Successfully pulled OS image {IMG} from registry")
    );
}
