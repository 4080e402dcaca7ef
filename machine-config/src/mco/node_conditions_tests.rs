use super::*;

const NOW: &str = "2026-01-01T00:00:00Z";
const LATER: &str = "2026-01-01T00:05:00Z";

fn facts() -> NodeFacts<'static> {
    NodeFacts {
        name: "worker-0",
        last_applied_drain: "uncordon-rendered-a",
    }
}

/// (type, status, reason, message) of one condition.
type Row<'a> = (&'a str, Status, &'a str, &'a str);
/// A parent condition and maybe a child.
type Want<'a> = (&'a str, Status, &'a str, &'a str, Option<Row<'a>>);

fn s(change: &Change) -> Want<'_> {
    let p = &change.parent;
    (
        p.kind,
        p.status,
        p.reason.as_str(),
        p.message.as_str(),
        change
            .child
            .as_ref()
            .map(|c| (c.kind, c.status, c.reason.as_str(), c.message.as_str())),
    )
}

/// Every step against the condition, reason and message the MCD (or the MCO's drain
/// controller) writes at that point.
#[test]
fn each_step_sets_the_mcd_conditions() {
    use Status::*;
    let cfg = || "rendered-b".to_string();
    let table: Vec<(Progress, Want)> = vec![
        (
            Progress::NeedsUpdate,
            (
                UPDATED,
                False,
                UPDATED,
                "Node worker-0 needs an update",
                None,
            ),
        ),
        (
            // update.go `update`: `actions` is the legacy list, calculated on first boot only
            Progress::Prepared { drain: true },
            (
                UPDATE_PREPARED,
                True,
                UPDATE_PREPARED,
                "Update Compatible. Post Cfg Actions: [] Drain Required: true",
                None,
            ),
        ),
        (
            // update.go `update`: calculatePostConfigChangeNodeDisruptionAction failed
            Progress::ActionsUnavailable {
                from: "rendered-a".into(),
                to: cfg(),
                error: "NodeDisruptionPolicyStatus was not ready: NodeDisruptionPolicyStatus is not up to date".into(),
            },
            (
                UPDATE_PREPARED,
                Unknown,
                UPDATE_PREPARED,
                "Update Failed compatibility validation. MachineConfigs rendered-a and rendered-b are not available for update. Error calculating post config change actions: NodeDisruptionPolicyStatus was not ready: NodeDisruptionPolicyStatus is not up to date",
                None,
            ),
        ),
        (
            Progress::Unreconcilable {
                from: "rendered-a".into(),
                to: cfg(),
                error: "ignition kernelArguments changed".into(),
            },
            (
                UPDATE_PREPARED,
                Unknown,
                UPDATE_PREPARED,
                "Update Failed compatibility validation. MachineConfigs rendered-a and rendered-b are not compatible. Err: ignition kernelArguments changed",
                None,
            ),
        ),
        (
            Progress::DrainNotRequired,
            (
                UPDATE_EXECUTED,
                Unknown,
                DRAINED,
                "Node Drain Not required for this update.",
                Some((
                    DRAINED,
                    False,
                    "UpdateExecutedDrained",
                    "Node Drain Not required for this update.",
                )),
            ),
        ),
        (
            Progress::Draining { config: cfg() },
            (
                UPDATE_EXECUTED,
                Unknown,
                DRAINED,
                "Draining Node as part of update executed phase",
                Some((
                    DRAINED,
                    Unknown,
                    "UpdateExecutedDrained",
                    "Draining node. The drain will not be complete until desired drainer drain-rendered-b matches current drainer uncordon-rendered-a",
                )),
            ),
        ),
        (
            Progress::Cordoned,
            (
                UPDATE_EXECUTED,
                Unknown,
                CORDONED,
                "Cordoned Node as part of update executed phase",
                Some((
                    CORDONED,
                    True,
                    "UpdateExecutedCordoned",
                    "Cordoned node. The node is reporting Unschedulable = true",
                )),
            ),
        ),
        (
            Progress::Drained { config: cfg() },
            (
                UPDATE_EXECUTED,
                Unknown,
                DRAINED,
                "Drained Node as part of update executed phase",
                Some((
                    DRAINED,
                    True,
                    "UpdateExecutedDrained",
                    "Drained node. The drain is complete as the desired drainer matches current drainer: drain-rendered-b",
                )),
            ),
        ),
        (
            Progress::DrainFailed {
                config: cfg(),
                error: "pod p blocked".into(),
            },
            (
                UPDATE_EXECUTED,
                Unknown,
                DRAINED,
                "Node Drain has not succeeded",
                Some((
                    DRAINED,
                    Unknown,
                    "UpdateExecutedDrained",
                    "Error: Node Drain has not succeeded. Error is: pod p blocked The drain will not be complete until desired drainer drain-rendered-b matches current drainer uncordon-rendered-a",
                )),
            ),
        ),
        (
            Progress::ApplyingFilesAndOs {
                os: false,
                files: true,
            },
            (
                UPDATE_EXECUTED,
                Unknown,
                APPLIED_FILES_AND_OS,
                "Updating the Files and OS on disk as a part of the in progress phase",
                Some((
                    APPLIED_FILES_AND_OS,
                    Unknown,
                    "UpdateExecutedAppliedFilesAndOS",
                    "Applying files and new OS config to node. OS will not need an update. SSH Keys will  need an update",
                )),
            ),
        ),
        (
            Progress::AppliedFilesAndOs {
                os: true,
                files: false,
            },
            (
                UPDATE_EXECUTED,
                True,
                APPLIED_FILES_AND_OS,
                "Updated the Files and OS on disk as a part of the in progress phase",
                Some((
                    APPLIED_FILES_AND_OS,
                    True,
                    "UpdateExecutedAppliedFilesAndOS",
                    "Applied files and new OS config to node. OS did  need an update. SSH Keys did not need an update",
                )),
            ),
        ),
        (
            Progress::RebootRequired,
            (
                REBOOTED_NODE,
                Unknown,
                REBOOTED_NODE,
                "Upgrade requires a reboot.",
                None,
            ),
        ),
        (
            Progress::NoRebootRequired,
            (
                UPDATE_POST_ACTION_COMPLETE,
                True,
                "None",
                "Changes do not require a reboot",
                None,
            ),
        ),
        (
            Progress::ServiceReloaded {
                unit: "crio.service".into(),
            },
            (
                UPDATE_POST_ACTION_COMPLETE,
                True,
                UPDATE_POST_ACTION_COMPLETE,
                "Node has reloaded service crio.service",
                None,
            ),
        ),
        // `Special` reloads crio, named as the MCD names it
        // (`executeReloadServiceNodeDisruptionAction` with `constants.CRIOServiceName`).
        (
            Progress::ServiceReloaded {
                unit: "crio".into(),
            },
            (
                UPDATE_POST_ACTION_COMPLETE,
                True,
                UPDATE_POST_ACTION_COMPLETE,
                "Node has reloaded service crio",
                None,
            ),
        ),
        (
            Progress::Rebooted,
            (
                REBOOTED_NODE,
                True,
                REBOOTED_NODE,
                "Node has rebooted",
                None,
            ),
        ),
        (
            Progress::Resumed {
                config: cfg(),
                applying: true,
            },
            (
                RESUMED,
                True,
                RESUMED,
                "In desired config rendered-b. Resumed normal operations. Applying proper annotations.",
                None,
            ),
        ),
        (
            Progress::Resumed {
                config: cfg(),
                applying: false,
            },
            (
                RESUMED,
                True,
                RESUMED,
                "In desired config rendered-b. Resumed normal operations.",
                None,
            ),
        ),
        (
            Progress::Uncordoned,
            (
                UPDATE_COMPLETE,
                True,
                UNCORDONED,
                "Uncordoned Node as part of completing upgrade phase",
                Some((
                    UNCORDONED,
                    True,
                    "UpdateCompleteUncordoned",
                    "UnCordoned node. The node is reporting Unschedulable = false",
                )),
            ),
        ),
        (
            Progress::UncordonFailed {
                error: "timed out".into(),
            },
            (
                UPDATE_COMPLETE,
                Unknown,
                UNCORDONED,
                "Failed to Uncordon Node as part of completing upgrade phase",
                Some((
                    UNCORDONED,
                    Unknown,
                    "UpdateCompleteUncordoned",
                    "Error: Failed to UnCordon node. Error is: timed out The node is reporting Unschedulable = true",
                )),
            ),
        ),
        (
            Progress::Updated,
            (UPDATED, True, UPDATED, "Node worker-0 Updated", None),
        ),
        (
            Progress::Degraded { error: None },
            (
                NODE_DEGRADED,
                False,
                NODE_DEGRADED,
                "Node worker-0 upgrade succeeded",
                None,
            ),
        ),
        (
            Progress::Degraded {
                error: Some("disk full".into()),
            },
            (
                NODE_DEGRADED,
                True,
                NODE_DEGRADED,
                "Node worker-0 upgrade failure. disk full",
                None,
            ),
        ),
    ];
    for (progress, want) in table {
        let change = progress.change(&facts());
        assert_eq!(s(&change), want, "{progress:?}");
    }
}

fn status_of<'a>(conditions: &'a [Condition], kind: &str) -> (&'a str, Status, &'a str) {
    let c = conditions
        .iter()
        .find(|c| c.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} condition in {conditions:?}"));
    (c.reason.as_str(), c.status, c.message.as_str())
}

#[test]
fn a_new_object_gets_every_condition() {
    let change = Progress::NeedsUpdate.change(&facts());
    let all = merge(&[], &change, "rendered-b", NOW).unwrap();
    assert_eq!(all.len(), CONDITION_TYPES.len());
    assert_eq!(all[0].kind, UPDATED);
    assert_eq!(
        status_of(&all, DRAINED),
        (
            NOT_YET_OCCURRED,
            Status::False,
            "This node has not yet entered the Drained phase"
        )
    );
    assert!(all.iter().all(|c| c.last_transition_time == NOW));
}

#[test]
fn an_unchanged_parent_writes_nothing() {
    let change = Progress::Rebooted.change(&facts());
    let all = merge(&[], &change, "rendered-b", NOW).unwrap();
    assert_eq!(merge(&all, &change, "rendered-b", LATER), None);
    // A new message is a change.
    let resumed = |applying| {
        Progress::Resumed {
            config: "rendered-b".into(),
            applying,
        }
        .change(&facts())
    };
    let all = merge(&all, &resumed(true), "rendered-b", NOW).unwrap();
    assert!(merge(&all, &resumed(false), "rendered-b", LATER).is_some());
}

/// A whole rebootless update, step by step: at the end Updated is True and every condition the
/// update set True or Unknown is False again, saying what it was during the update.
#[test]
fn updated_resets_the_steps_of_the_update() {
    let steps = [
        Progress::NeedsUpdate,
        Progress::Prepared { drain: false },
        Progress::DrainNotRequired,
        Progress::ApplyingFilesAndOs {
            os: false,
            files: true,
        },
        Progress::AppliedFilesAndOs {
            os: false,
            files: true,
        },
        Progress::NoRebootRequired,
        Progress::Resumed {
            config: "rendered-b".into(),
            applying: true,
        },
        Progress::Uncordoned,
    ];
    let mut all = Vec::new();
    for p in &steps {
        all = merge(&all, &p.change(&facts()), "rendered-b", NOW).unwrap();
    }
    assert_eq!(status_of(&all, UPDATE_EXECUTED).1, Status::True);
    assert_eq!(status_of(&all, UNCORDONED).1, Status::True);
    assert_eq!(status_of(&all, DRAINED).1, Status::False);
    assert_eq!(status_of(&all, UPDATED).1, Status::False);
    all = merge(
        &all,
        &Progress::Updated.change(&facts()),
        "rendered-b",
        LATER,
    )
    .unwrap();
    assert_eq!(
        status_of(&all, UPDATED),
        (UPDATED, Status::True, "Node worker-0 Updated")
    );
    assert_eq!(
        status_of(&all, UPDATE_COMPLETE),
        (
            UNCORDONED,
            Status::False,
            "Action during update to rendered-b: Uncordoned Node as part of completing upgrade phase"
        )
    );
    let still: Vec<&str> = all
        .iter()
        .filter(|c| c.status != Status::False)
        .map(|c| c.kind.as_str())
        .collect();
    assert_eq!(still, [UPDATED]);
    // Placeholders that were never touched keep their message and time.
    let pinned = all
        .iter()
        .find(|c| c.kind == PINNED_IMAGE_SETS_DEGRADED)
        .unwrap();
    assert_eq!(
        (pinned.reason.as_str(), pinned.last_transition_time.as_str()),
        (NOT_YET_OCCURRED, NOW)
    );
    // The pinned-image conditions tell of the pinned image sets alone: an update leaves them.
    let mut with_pinned = all.clone();
    for c in with_pinned.iter_mut() {
        if c.kind == PINNED_IMAGE_SETS_DEGRADED {
            c.status = Status::True;
            c.message = "One or more PinnedImageSet is experiencing an error.".into();
        }
        if c.kind == UPDATED {
            c.status = Status::False;
        }
    }
    let again = merge(
        &with_pinned,
        &Progress::Updated.change(&facts()),
        "rendered-c",
        LATER,
    )
    .unwrap();
    assert_eq!(
        status_of(&again, PINNED_IMAGE_SETS_DEGRADED).1,
        Status::True,
        "an update does not clear PinnedImageSetsDegraded"
    );
    // The next update's first step sees Updated=True: it turns False.
    let next = merge(
        &all,
        &Progress::Prepared { drain: true }.change(&facts()),
        "rendered-c",
        LATER,
    )
    .unwrap();
    assert_eq!(
        status_of(&next, UPDATED),
        (
            UPDATED,
            Status::False,
            "This node is not updated, sensed disruption via a manual update."
        )
    );
}

#[test]
fn desired_version_waits_for_a_compatible_update() {
    let unreconcilable = Progress::Unreconcilable {
        from: "a".into(),
        to: "b".into(),
        error: "e".into(),
    }
    .change(&facts());
    assert_eq!(
        status_desired(&unreconcilable, Some("rendered-b")),
        NOT_YET_SET
    );
    let prepared = Progress::Prepared { drain: false }.change(&facts());
    assert_eq!(status_desired(&prepared, Some("rendered-b")), "rendered-b");
    let updated = Progress::Updated.change(&facts());
    assert_eq!(status_desired(&updated, Some("rendered-b")), "rendered-b");
    assert_eq!(status_desired(&updated, None), NOT_YET_SET);
}

#[test]
fn conditions_read_and_write_as_the_api_spells_them() {
    let c: Condition = serde_json::from_value(serde_json::json!({
        "type": "Updated", "status": "True", "reason": "Updated",
        "message": "m", "lastTransitionTime": NOW
    }))
    .unwrap();
    assert_eq!((c.kind.as_str(), c.status), (UPDATED, Status::True));
    let back = serde_json::to_value(&c).unwrap();
    assert_eq!(back["lastTransitionTime"], NOW);
    assert_eq!(back["type"], "Updated");
}
