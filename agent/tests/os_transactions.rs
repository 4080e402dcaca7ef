//! rpm-ostree's transaction model through `DbusOsUpdater` and the stand-in: a failing
//! transaction, a second one while one runs, re-attaching after the client restarts, and the
//! cancellation of a transaction whose client leaves before `Start()`.

mod os_env;

use std::time::{Duration, Instant};

use mco_agent::os::dbus::proxies::{Options, OsProxy, SysrootProxy};
use mco_agent::os::dbus::transaction::TRANSACTION_IFACE;
use mco_agent::os::{
    Backoff, ClientConfig, GIO_ERROR_BUSY, KargsChange, OsError, OsImage, OsUpdater,
};
use os_env::{Env, EnvOptions, eventually};
use zbus::names::BusName;
use zbus::proxy::CacheProperties;

const IMAGE: &str =
    "quay.io/example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// A bare client, to do what `DbusOsUpdater` never does (stop half-way).
struct Raw {
    conn: zbus::Connection,
    sysroot: SysrootProxy<'static>,
    os: OsProxy<'static>,
}

impl Raw {
    async fn new(env: &Env) -> Raw {
        let conn = env.bus.connect().await.unwrap();
        let sysroot = SysrootProxy::builder(&conn)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .unwrap();
        let os = OsProxy::builder(&conn)
            .path("/org/projectatomic/rpmostree1/fakeos")
            .unwrap()
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .unwrap();
        Raw { conn, sysroot, os }
    }

    async fn add_karg(&self, arg: &str) -> zbus::Result<String> {
        let existing = self.os.get_deployment_boot_config("", true).await?;
        let existing = String::try_from(existing["options"].try_clone().unwrap()).unwrap();
        self.os
            .kernel_args(&existing, &[arg], &[], &[], Options::new())
            .await
    }

    async fn active_path(&self) -> String {
        self.sysroot.active_transaction_path().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_transactions_name_the_method_and_rpm_ostree_message() {
    let env = Env::start(EnvOptions::default()).await;
    let os = env.client().await;
    let err = os
        .rebase(&OsImage::Registry(IMAGE.into()))
        .await
        .unwrap_err();
    match &err {
        OsError::Transaction { method, message } => {
            assert_eq!(method, "Rebase");
            assert!(message.contains(IMAGE), "{message}");
        }
        other => panic!("unexpected: {other}"),
    }
    assert!(
        err.to_string()
            .starts_with("rpm-ostree Rebase transaction failed: ")
    );

    // libostree refuses to delete an argument that is not there.
    let err = os
        .kernel_args(None, &KargsChange::from_argv(&["--delete=absent"]).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OsError::Transaction { method, message }
            if method == "KernelArgs" && message.contains("absent")),
        "{err}"
    );
    assert_eq!(env.deployments().len(), 1, "nothing deployed");
    // The failed transactions are closed; the next one runs.
    os.kernel_args(None, &KargsChange::from_argv(&["--append=ok=1"]).unwrap())
        .await
        .unwrap();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_transaction_waits_for_the_first() {
    let env = Env::start(EnvOptions {
        txn_delay: Duration::from_millis(1500),
        ..Default::default()
    })
    .await;
    let v2 = env.sysroot.commit("fakeos/v2", "2.0").unwrap();
    env.map_image(IMAGE, "fakeos/v2");
    let first = env.client().await;
    let second = env.client().await;
    let raw = Raw::new(&env).await;

    let rebase = tokio::spawn(async move {
        let r = first.rebase(&OsImage::Registry(IMAGE.into())).await;
        (r, Instant::now())
    });
    eventually("the rebase transaction", async || {
        !raw.active_path().await.is_empty()
    })
    .await;

    // rpm-ostreed's refusal, word for word.
    match raw.add_karg("raw=1").await.unwrap_err() {
        zbus::Error::MethodError(name, Some(msg), _) => {
            assert_eq!(name.as_str(), GIO_ERROR_BUSY);
            assert_eq!(
                msg,
                "Transaction in progress: new-deployment\n You can cancel the current transaction with `rpm-ostree cancel`"
            );
        }
        other => panic!("unexpected: {other}"),
    }

    // The agent's client retries until the rebase is done, then builds on it.
    let out = second
        .kernel_args(
            None,
            &KargsChange::from_argv(&["--append=after=1"]).unwrap(),
        )
        .await
        .unwrap();
    let kargs_done = Instant::now();
    let (rebased, rebase_done) = rebase.await.unwrap();
    rebased.unwrap();
    assert!(out.started_here);
    assert!(rebase_done <= kargs_done);
    let deps = env.deployments();
    assert_eq!(
        deps[0].checksum, v2,
        "the kargs change was made on top of the rebase"
    );
    assert_eq!(env.default_kargs(), ["root=LABEL=root", "rw", "after=1"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_client_reattaches_and_waits_for_finished() {
    let env = Env::start(EnvOptions {
        txn_delay: Duration::from_millis(1500),
        ..Default::default()
    })
    .await;
    let raw = Raw::new(&env).await;
    let address = raw.add_karg("reattach=1").await.unwrap();
    let peer = zbus::connection::Builder::address(address.as_str())
        .unwrap()
        .p2p()
        .build()
        .await
        .unwrap();
    let reply = peer
        .call_method(
            None::<BusName<'_>>,
            "/",
            Some(TRANSACTION_IFACE),
            "Start",
            &(),
        )
        .await
        .unwrap();
    assert!(reply.body().deserialize::<bool>().unwrap());
    // The client goes away right after Start: the transaction carries on.
    drop(peer);
    drop(raw);

    let os = env.client().await;
    let outcome = os.resume().await.unwrap().expect("an active transaction");
    assert_eq!(outcome.method, "KernelArgs");
    assert!(!outcome.started_here, "attached, not started");
    assert_eq!(env.default_kargs(), ["root=LABEL=root", "rw", "reattach=1"]);
    // Nothing left to resume.
    assert_eq!(os.resume().await.unwrap(), None);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_cancelled_when_its_client_leaves_before_start() {
    let env = Env::start(EnvOptions::default()).await;
    let watcher = Raw::new(&env).await;
    let raw = Raw::new(&env).await;
    let address = raw.add_karg("never=1").await.unwrap();
    assert_eq!(watcher.active_path().await, address);
    let socket = mco_test_support::dbus::socket_path(&address).unwrap();
    assert!(socket.exists());

    let Raw { conn, sysroot, os } = raw;
    drop((sysroot, os));
    conn.close().await.unwrap();

    eventually("the transaction to be cancelled", async || {
        watcher.active_path().await.is_empty()
    })
    .await;
    assert!(!socket.exists());
    assert_eq!(env.deployments().len(), 1, "nothing deployed");

    // The sysroot lock was released: the next transaction runs.
    let os = env.client().await;
    os.kernel_args(None, &KargsChange::from_argv(&["--append=next=1"]).unwrap())
        .await
        .unwrap();
    assert_eq!(env.default_kargs(), ["root=LABEL=root", "rw", "next=1"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_retries_give_up_at_the_deadline() {
    let env = Env::start(EnvOptions {
        txn_delay: Duration::from_secs(3),
        ..Default::default()
    })
    .await;
    let raw = Raw::new(&env).await;
    let first = env.client().await;
    let running = tokio::spawn(async move {
        first
            .kernel_args(None, &KargsChange::from_argv(&["--append=slow=1"]).unwrap())
            .await
    });
    eventually("the first transaction", async || {
        !raw.active_path().await.is_empty()
    })
    .await;
    let impatient = env
        .client_with(ClientConfig {
            busy_retry: Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_millis(100),
                give_up_after: Duration::from_millis(350),
            },
            ..Default::default()
        })
        .await;
    let err = impatient
        .cleanup(&[mco_agent::os::CleanupTarget::Rollback])
        .await
        .unwrap_err();
    match &err {
        OsError::Busy {
            method, message, ..
        } => {
            assert_eq!(method, "Cleanup");
            assert!(
                message.contains("Transaction in progress: mco-agent kargs"),
                "{message}"
            );
        }
        other => panic!("unexpected: {other}"),
    }
    running.await.unwrap().unwrap();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_register_and_unregister() {
    let env = Env::start(EnvOptions::default()).await;
    let daemon = env.daemon.as_ref().unwrap();
    let a = env.client().await;
    let b = env
        .client_with(ClientConfig {
            client_id: "other-agent".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(daemon.registered_clients(), ["mco-agent", "other-agent"]);
    a.close().await.unwrap();
    assert_eq!(daemon.registered_clients(), ["other-agent"]);
    drop(b);
    eventually("unregistering on drop", async || {
        daemon.registered_clients().is_empty()
    })
    .await;
    env.stop().await;
}

/// `Rollback` through the stand-in's real sysroot: the deployment after the default one moves
/// to the front; with a single deployment it is refused with rpm-ostree's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_makes_the_previous_deployment_the_default() {
    let env = Env::start(EnvOptions::default()).await;
    let os = env.client().await;
    let err = os.rollback().await.unwrap_err();
    assert!(
        matches!(&err, OsError::Transaction { method, message }
            if method == "Rollback" && message.contains("No rollback deployment found")),
        "{err}"
    );
    os.kernel_args(
        None,
        &KargsChange::from_argv(&["--append=mco.new=1"]).unwrap(),
    )
    .await
    .unwrap();
    assert!(env.default_kargs().contains(&"mco.new=1".to_string()));
    let before = os.status().await.unwrap();
    assert_eq!(before.deployments.len(), 2);
    os.rollback().await.unwrap();
    let after = os.status().await.unwrap();
    assert_eq!(after.deployments[0].id, before.deployments[1].id);
    assert_eq!(after.deployments[1].id, before.deployments[0].id);
    assert!(!env.default_kargs().contains(&"mco.new=1".to_string()));
    env.stop().await;
}

/// The stand-in's task that accepts a client's connection to a transaction can be descheduled
/// (a loaded machine) between the handshake and adding the client as a peer, while the client
/// calls `Start()` and a short job finishes: `Finished` must still reach that client. Before the
/// stand-in added the caller of `Start()` as a peer, it went to no one and the client waited
/// until its timeout (`os_kargs` hung so under load); pinned with `peer_setup_delay`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_reaches_a_client_that_starts_before_it_is_registered() {
    let env = Env::start(EnvOptions {
        peer_setup_delay: Duration::from_secs(3),
        ..Default::default()
    })
    .await;
    let os = env
        .client_with(ClientConfig {
            transaction_timeout: Duration::from_secs(30),
            ..Default::default()
        })
        .await;
    let change = KargsChange::from_argv(&["--append=nosmt"]).unwrap();
    let outcome = os
        .kernel_args(None, &change)
        .await
        .expect("KernelArgs: the transaction's Finished signal");
    assert!(outcome.started_here);
    assert!(
        env.default_kargs().iter().any(|a| a == "nosmt"),
        "{:?}",
        env.default_kargs()
    );
    os.close().await.unwrap();
    env.stop().await;
}
