//! Leaving image mode, for the cuts of [`Phase::LeavingImageMode`](crate::powercut::Phase): the
//! node on side a first follows a built image (`desiredImage`: [`OS_IMAGE_B`], side b's commit,
//! which the guest's stand-in resolves), then the pool leaves image mode with the next config of
//! side a (`desiredConfig` set and `desiredImage` removed in one write, as the node controller
//! does). The agent rebases back to side a's image and reboots; in that boot it writes the
//! config's files again (`RewritingFiles`) and reboots once more. The guest's commits carry no
//! files in `/usr/etc`, so ostree's `/etc` merge drops nothing here: what a cut in that boot
//! proves is that the rewrite and its second reboot survive the power loss.

use anyhow::{Result, ensure};
use serde_json::Value;

use super::{CONVERGE, PowercutNode, REACH};
use crate::agent::OS_IMAGE_B;
use crate::powercut::Point;
use crate::powercut::configs::{Side, Version};
use crate::powercut::guest::{self, HOLD_KARG, STATUS_FILE};

impl PowercutNode {
    /// Points the node at the built image and waits until it is Done on it (one reboot).
    pub(super) fn enter_image_mode(&mut self) -> Result<String> {
        ensure!(
            self.current.side == Side::A,
            "image mode is entered from side a (the built image is side b's commit)"
        );
        guest::set_failpoints(&mut self.vm, None)?;
        self.cluster
            .set_annotations(&[("desiredImage", Some(OS_IMAGE_B))])?;
        let cluster = &self.cluster;
        let reboots = self
            .vm
            .wait_following_reboots(self.budget(CONVERGE), |vm| {
                if cluster.annotation("state").as_deref() != Some("Done")
                    || cluster.annotation("currentImage").as_deref() != Some(OS_IMAGE_B)
                {
                    return Ok(false);
                }
                let status = vm.run(&format!("cat {STATUS_FILE} 2>/dev/null || true"))?;
                let status: Value = serde_json::from_str(&status).unwrap_or_default();
                Ok(status["state"] == "Done" && status["pending_step"].is_null())
            })?;
        ensure!(
            reboots == 1,
            "{reboots} reboot(s) into the built image, not 1"
        );
        Ok("in image mode after 1 reboot".to_string())
    }

    /// Leaves image mode for `to`; in the boot after the first reboot (held, then released
    /// with `point` armed), cuts when the agent pauses there.
    pub(super) fn pause_leaving_image_mode(&mut self, point: Point, to: Version) -> Result<String> {
        let name = to.name();
        self.cluster
            .set_annotations(&[("desiredConfig", Some(&name)), ("desiredImage", None)])?;
        self.vm.next_boot_kargs(&[HOLD_KARG]);
        self.vm.wait_for_reboot(self.budget(REACH))?;
        guest::set_failpoints(&mut self.vm, Some(&point.spec()))?;
        guest::release_agent(&mut self.vm)?;
        self.cut_when_paused(point)
    }
}
