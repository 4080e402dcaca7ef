//! MachineConfigs and MachineConfigPools (YAML 1.1 or JSON): parsing, the update plan between the
//! example worker config and the input, both ways (diff, the MCD's reconcile rules, node
//! disruption actions, content decoding, the registries.conf analysis, the kernel-argument argv,
//! which the agent must accept), rendering a pool from both, and the body the config server
//! builds from the render for every spec, which must parse back as that spec (3.x).
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use machine_config::render::{RenderOptions, render_pool};
use machine_config::{
    MachineConfig, MachineConfigPool, ParsedConfig, Plan, PolicyOptions, SpecVersion,
};
use mco_agent::os::KargsChange;
use mco_companion::served;

static BASE: LazyLock<MachineConfig> = LazyLock::new(|| {
    MachineConfig::from_slice(include_bytes!("../../examples/00-worker-base.yaml"))
        .expect("examples/00-worker-base.yaml parses")
});
static POOL: LazyLock<MachineConfigPool> = LazyLock::new(|| {
    MachineConfigPool::from_slice(include_bytes!("../../examples/pool-worker.yaml"))
        .expect("examples/pool-worker.yaml parses")
});

fuzz_target!(|data: &[u8]| {
    if let Ok(pool) = MachineConfigPool::from_slice(data) {
        for total in 0..8 {
            let n = pool.max_unavailable(total);
            assert!(
                n >= 1,
                "maxUnavailable {n} of {total} nodes: a pool must always progress"
            );
        }
        let _ = pool.selects_machine_config(&BASE.metadata.labels.clone().unwrap_or_default());
    }
    let Ok(mc) = MachineConfig::from_slice(data) else {
        return;
    };
    let options = PolicyOptions {
        arch: "x86_64".to_string(),
        ..PolicyOptions::default()
    };
    for (old, new) in [(&*BASE, &mc), (&mc, &*BASE)] {
        if let Ok(plan) = Plan::new(old, new, &options) {
            let _ = plan.to_json();
            if let Err(e) = KargsChange::from_argv(&plan.kargs) {
                panic!(
                    "the agent refuses the plan's kernel arguments {:?}: {e}",
                    plan.kargs
                );
            }
        }
    }
    let again = MachineConfig::from_slice(mc.to_json().as_bytes())
        .unwrap_or_else(|e| panic!("a parsed MachineConfig does not parse back: {e}"));
    assert_eq!(again, mc, "the JSON round trip changed the MachineConfig");

    let configs = [BASE.clone(), mc];
    let Ok(rendered) = render_pool(&POOL, &configs, &RenderOptions::default()) else {
        return;
    };
    for spec in SpecVersion::ALL {
        if let Ok(body) = served::build(&rendered.config, spec) {
            let parsed = match ParsedConfig::parse(&body) {
                Ok(parsed) => parsed,
                // Reading 2.2 back is the MCO's 2→3 translation, stricter (only core, only the
                // "root" filesystem) than the Ignition 0.x a 2.2 body is served to.
                Err(_) if spec == SpecVersion::V2_2 => continue,
                Err(e) => panic!("the body served as {spec} does not parse: {e}"),
            };
            assert_eq!(parsed.source_version, spec, "served with the wrong version");
        }
    }
});
