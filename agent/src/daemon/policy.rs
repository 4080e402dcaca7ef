//! The engine's [`PolicySource`] with a cluster: the node disruption policies of
//! `MachineConfiguration/cluster` (`status.nodeDisruptionPolicyStatus.clusterPolicies`), as
//! the watch last delivered them when the plan is made, once their status is current (the
//! MCD's wait and messages, [`PolicyWatch::ready`]). Its `spec.irreconcilableValidationOverrides`
//! count only on a cluster with the `IrreconcilableMachineConfig` feature gate, as in the MCD.

use anyhow::Result;
use async_trait::async_trait;
use machine_config::machineconfiguration::CLUSTER_NAME;

use crate::cluster::policy_watch::{PolicyWait, PolicyWatch};
use crate::engine::{ActivePolicy, PolicySource};

/// The cluster's policies.
pub struct ClusterPolicySource {
    pub watch: PolicyWatch,
    pub wait: PolicyWait,
    /// The cluster has the `IrreconcilableMachineConfig` gate: the overrides are honoured.
    pub irreconcilable_overrides: bool,
}

#[async_trait]
impl PolicySource for ClusterPolicySource {
    async fn current(&self) -> Result<ActivePolicy> {
        let mc = self.watch.ready(self.wait).await?;
        Ok(ActivePolicy {
            policies: mc.status_policies(),
            overrides: if self.irreconcilable_overrides {
                mc.spec.irreconcilable_validation_overrides.clone()
            } else {
                Default::default()
            },
            source: format!(
                "MachineConfiguration/{CLUSTER_NAME} generation {}",
                mc.generation()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use machine_config::MachineConfiguration;
    use machine_config::mco::NodeState;
    use machine_config::mco::node_conditions::Status;

    use super::*;
    use crate::cluster::{FakeNodeApi, NodeApi};
    use crate::daemon::tests::DaemonHarness;
    use crate::engine::tests::{IMAGE, mc};

    const FOO: &str = "/etc/foo.conf";

    fn cluster_object(generation: i64, policy: &str) -> MachineConfiguration {
        let mut mc = MachineConfiguration::from_slice(
            format!(
                "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\n\
                 metadata: {{name: cluster}}\nspec:\n  nodeDisruptionPolicy:\n{policy}"
            )
            .as_bytes(),
        )
        .unwrap();
        mc.metadata.generation = Some(generation);
        mc.status = mc.computed_policy_status();
        mc
    }

    /// A change the cluster's policy makes rebootless is applied without a reboot, the plan
    /// naming the entry; the policy of a later plan is the one current then.
    #[tokio::test]
    async fn the_cluster_policy_current_when_the_plan_is_made_decides() {
        let api = Arc::new(FakeNodeApi::new("node-0"));
        let a = mc("rendered-a", &[(FOO, "1\n")], &[], IMAGE);
        let b = mc("rendered-b", &[(FOO, "2\n")], &[], IMAGE);
        let c = mc("rendered-c", &[(FOO, "3\n")], &[], IMAGE);
        for m in [&a, &b, &c] {
            api.add_machine_config(m.clone());
        }
        api.set_machine_configuration(Some(cluster_object(
            1,
            "    files:\n    - path: /etc/foo.conf\n      actions: [{type: None}]\n",
        )));
        let h = DaemonHarness::over_api(&a, &api).await;
        let policy = Arc::new(ClusterPolicySource {
            watch: PolicyWatch::spawn(api.machine_configuration()),
            wait: PolicyWait {
                poll: Duration::from_millis(10),
                timeout: Duration::from_secs(5),
            },
            irreconcilable_overrides: false,
        });
        let mut d = h
            .daemon_with_policy(crate::daemon::DesiredFeed::Cluster(api.desired()), policy)
            .await;
        d.desired_name = Some("rendered-b".into());
        d.sync(false).await;
        assert_eq!(h.node.current().as_deref(), Some("rendered-b"));
        assert!(h.node.rebooter.reasons().is_empty());
        assert!(h.node.recorded_step().is_none());

        // The admin removes the policy: the next change reboots.
        api.set_machine_configuration(Some(cluster_object(2, "    files: []\n")));
        tokio::time::sleep(Duration::from_millis(50)).await;
        d.desired_name = Some("rendered-c".into());
        d.sync(false).await;
        assert_eq!(h.node.rebooter.reasons().len(), 1);
        assert_eq!(
            h.node.recorded_step().as_deref(),
            Some("RebootRequested"),
            "the reboot update waits for its reboot"
        );
    }

    /// Without a current status the update does not start: Degraded with the MCD's message.
    #[tokio::test]
    async fn a_status_that_is_not_current_stops_the_update() {
        let api = Arc::new(FakeNodeApi::new("node-0"));
        let a = mc("rendered-a", &[(FOO, "1\n")], &[], IMAGE);
        let b = mc("rendered-b", &[(FOO, "2\n")], &[], IMAGE);
        api.add_machine_config(a.clone());
        api.add_machine_config(b.clone());
        let mut stale = cluster_object(3, "    files: []\n");
        stale.status.observed_generation = 2;
        api.set_machine_configuration(Some(stale));
        let h = DaemonHarness::over_api(&a, &api).await;
        let policy = Arc::new(ClusterPolicySource {
            watch: PolicyWatch::spawn(api.machine_configuration()),
            wait: PolicyWait {
                poll: Duration::from_millis(10),
                timeout: Duration::from_millis(100),
            },
            irreconcilable_overrides: false,
        });
        let mut d = h
            .daemon_with_policy(crate::daemon::DesiredFeed::Cluster(api.desired()), policy)
            .await;
        d.desired_name = Some("rendered-b".into());
        d.sync(false).await;
        assert_eq!(h.node.current().as_deref(), Some("rendered-a"));
        assert_eq!(h.node.read(FOO).as_deref(), Some("1\n"));
        assert!(h.node.recorded_step().is_none());
        let status = d.engine().reporter().status();
        assert_eq!(status.state, NodeState::Degraded);
        assert_eq!(
            status.reason,
            "NodeDisruptionPolicyStatus was not ready: NodeDisruptionPolicyStatus is not up to date"
        );
        assert!(d.retry_at.is_some());
        // The MachineConfigNode says so as the MCD's does (update.go `update`), written by the
        // reporter's task.
        let prepared = || {
            let mcn = api.machine_config_node_object()?;
            crate::cluster::mcn::conditions(&mcn)
                .into_iter()
                .find(|c| c.kind == "UpdatePrepared" && c.status == Status::Unknown)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let condition = loop {
            if let Some(c) = prepared() {
                break c;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no UpdatePrepared Unknown within 10 s: {:?}",
                api.machine_config_node_object()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(
            condition.message,
            "Update Failed compatibility validation. MachineConfigs rendered-a and rendered-b are not available for update. Error calculating post config change actions: NodeDisruptionPolicyStatus was not ready: NodeDisruptionPolicyStatus is not up to date"
        );
    }

    /// `spec.irreconcilableValidationOverrides` count under the IrreconcilableMachineConfig
    /// gate only.
    #[tokio::test]
    async fn overrides_follow_the_irreconcilable_machine_config_gate() {
        let api = FakeNodeApi::new("node-0");
        let mut object = cluster_object(1, "    files: []\n");
        object.spec.irreconcilable_validation_overrides.storage = vec!["Disks".into()];
        api.set_machine_configuration(Some(object));
        for gate in [false, true] {
            let source = ClusterPolicySource {
                watch: PolicyWatch::spawn(api.machine_configuration()),
                wait: PolicyWait {
                    poll: Duration::from_millis(10),
                    timeout: Duration::from_secs(5),
                },
                irreconcilable_overrides: gate,
            };
            let policy = source.current().await.unwrap();
            let expected: Vec<String> = if gate { vec!["Disks".into()] } else { vec![] };
            assert_eq!(policy.overrides.storage, expected, "gate {gate}");
        }
    }
}
