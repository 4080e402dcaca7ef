//! The MCO's default node disruption policies (the table its operator merges user policies over
//! into `status.nodeDisruptionPolicyStatus.clusterPolicies`), in the MCO's order.

use crate::machineconfiguration::{
    FilePolicy, NodeDisruptionPolicy, PolicyAction, ServiceRef, SshKeyPolicy, UnitPolicy,
};

/// One policy action; `svc` is the service of a Reload or Restart.
pub(crate) fn action(type_: &str, svc: Option<&str>) -> PolicyAction {
    let service = svc.map(|s| ServiceRef {
        service_name: s.to_string(),
    });
    PolicyAction {
        type_: type_.to_string(),
        reload: if type_ == "Reload" {
            service.clone()
        } else {
            None
        },
        restart: if type_ == "Restart" { service } else { None },
    }
}

/// Where mco-agent's update hooks live on a node (`/etc/mco-agent/hooks.d/<phase>/`).
pub const HOOKS_DIR: &str = "/etc/mco-agent/hooks.d";

/// The default cluster policies: the MCO's table, then mco-agent's own entry for its hooks.
pub fn default_policy() -> NodeDisruptionPolicy {
    let file = |path: &str, actions: Vec<PolicyAction>| FilePolicy {
        path: path.to_string(),
        actions,
    };
    let reload_crio = || vec![action("Reload", Some("crio.service"))];
    NodeDisruptionPolicy {
        files: vec![
            file("/var/lib/kubelet/config.json", vec![action("None", None)]),
            file(
                "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
                reload_crio(),
            ),
            file("/etc/containers/policy.json", reload_crio()),
            file(
                "/etc/containers/registries.conf",
                vec![action("Special", None)],
            ),
            file("/etc/containers/registries.d", reload_crio()),
            file("/etc/crio/policies", reload_crio()),
            file("/etc/nmstate/openshift", vec![action("None", None)]),
            file(
                "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                vec![
                    action("Restart", Some("coreos-update-ca-trust.service")),
                    action("Restart", Some("crio.service")),
                ],
            ),
            file(
                "/etc/kubernetes/credential-providers",
                vec![action("Restart", Some("kubelet.service"))],
            ),
            file(
                "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                vec![
                    action("DaemonReload", None),
                    action("Restart", Some("kubelet.service")),
                ],
            ),
            file(
                "/etc/iri-registry",
                vec![action("Restart", Some("iri-registry.service"))],
            ),
            file(
                "/usr/local/bin/load-registry-image.sh",
                vec![action("Restart", Some("iri-registry.service"))],
            ),
            file(
                "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
                vec![action("Restart", Some("coreos-update-ca-trust.service"))],
            ),
            // Ours, not the MCO's: the agent's update hooks are read when an update runs, so
            // delivering or changing one disrupts nothing (a hook is not a reason to reboot).
            file(HOOKS_DIR, vec![action("None", None)]),
        ],
        units: vec![UnitPolicy {
            name: "iri-registry.service".to_string(),
            actions: vec![
                action("DaemonReload", None),
                action("Restart", Some("iri-registry.service")),
            ],
        }],
        sshkey: Some(SshKeyPolicy {
            actions: vec![action("None", None)],
        }),
    }
}
