//! `OsUpdater::kernel_args` against the rpm-ostree stand-in over a real ostree sysroot: the
//! plan's `rpm-ostree kargs` argv cases, checked in the BLS entries libostree wrote.

mod os_env;

use mco_agent::os::{KargsChange, KargsTarget, OsError, OsUpdater};
use os_env::{Env, EnvOptions, without_ostree};

struct Case {
    name: &'static str,
    initial: &'static [&'static str],
    argv: &'static [&'static str],
    want: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "add",
        initial: &["root=LABEL=root", "rw"],
        argv: &["--append=nosmt", "--append=mitigations=auto,nosmt"],
        want: &["root=LABEL=root", "rw", "nosmt", "mitigations=auto,nosmt"],
    },
    Case {
        // Several deletions in one call: the ostree CLI would apply only the last one.
        name: "remove",
        initial: &["root=LABEL=root", "rw", "nosmt", "foo=bar", "hugepages=2"],
        argv: &[
            "--delete-if-present=nosmt",
            "--delete-if-present=foo=bar",
            "--delete-if-present=hugepages=2",
        ],
        want: &["root=LABEL=root", "rw"],
    },
    Case {
        name: "replace a value the MCD way",
        initial: &["root=LABEL=root", "rw", "hugepages=2"],
        argv: &["--delete-if-present=hugepages=2", "--append=hugepages=4"],
        want: &["root=LABEL=root", "rw", "hugepages=4"],
    },
    Case {
        name: "replace with --replace",
        initial: &["root=LABEL=root", "rw", "loglevel=3"],
        argv: &["--replace=loglevel=7"],
        want: &["root=LABEL=root", "rw", "loglevel=7"],
    },
    Case {
        name: "quoted",
        initial: &["root=LABEL=root", "rw"],
        argv: &["--append=quoted=\"a b\""],
        want: &["root=LABEL=root", "rw", "quoted=\"a", "b\""],
    },
    Case {
        // Old [a=1 a=1], new [a=1 a=1 b]: every old one deleted once, every new one appended.
        name: "duplicates with values",
        initial: &["root=LABEL=root", "rw", "a=1", "a=1"],
        argv: &[
            "--delete-if-present=a=1",
            "--delete-if-present=a=1",
            "--append=a=1",
            "--append=a=1",
            "--append=b",
        ],
        want: &["root=LABEL=root", "rw", "a=1", "a=1", "b"],
    },
    Case {
        name: "duplicates without values",
        initial: &["root=LABEL=root", "foo", "foo"],
        argv: &[
            "--delete-if-present=foo",
            "--delete-if-present=foo",
            "--append=foo",
            "--append=foo",
            "--append=bar",
        ],
        want: &["root=LABEL=root", "foo", "foo", "bar"],
    },
    Case {
        name: "delete-if-present of an absent argument (drift)",
        initial: &["root=LABEL=root", "rw"],
        argv: &["--delete-if-present=gone=1", "--append=new=1"],
        want: &["root=LABEL=root", "rw", "new=1"],
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kargs_argv_cases_land_in_the_bls_entries() {
    for case in CASES {
        let env = Env::start(EnvOptions {
            kargs: case.initial,
            ..Default::default()
        })
        .await;
        let os = env.client().await;
        let change = KargsChange::from_argv(case.argv).unwrap();
        let outcome = os.kernel_args(None, &change).await.unwrap_or_else(|e| {
            panic!("{}: {e}", case.name);
        });
        assert_eq!(outcome.method, "KernelArgs");
        assert!(outcome.started_here);

        // libostree's view: a new default deployment, not booted, same commit.
        let deps = env.deployments();
        assert_eq!(deps.len(), 2, "{}: {deps:?}", case.name);
        assert_eq!(deps[0].checksum, deps[1].checksum);
        assert_eq!(without_ostree(&deps[0].options), case.want, "{}", case.name);
        assert_eq!(
            without_ostree(&deps[1].options),
            case.initial,
            "{}",
            case.name
        );
        // The BLS file of the new entry, read directly.
        let bls = env.sysroot.bls_entries().unwrap();
        assert_eq!(bls[0].ostree_index(), Some(0));
        assert_eq!(bls[0].options, deps[0].options, "{}", case.name);
        // And rpm-ostree's view of it.
        let pending = os.kargs(KargsTarget::Pending).await.unwrap();
        assert_eq!(pending.options, deps[0].options);
        assert!(
            !pending.staged,
            "not booted: written as pending, not staged"
        );
        os.close().await.unwrap();
        env.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_and_conflicting_kargs() {
    let env = Env::start(EnvOptions::default()).await;
    let os = env.client().await;
    // append-if-missing of something present: rpm-ostree says so and deploys nothing.
    let present = KargsChange::from_argv(&["--append-if-missing=rw"]).unwrap();
    let outcome = os.kernel_args(None, &present).await.unwrap();
    assert_eq!(outcome.messages, ["No changes."]);
    assert_eq!(env.deployments().len(), 1);
    // An empty change does not even call rpm-ostree.
    let outcome = os.kernel_args(None, &KargsChange::default()).await.unwrap();
    assert!(!outcome.started_here);

    // The existing string as an optimistic-concurrency token.
    let current = os.kargs(KargsTarget::Pending).await.unwrap().options;
    let add = KargsChange::from_argv(&["--append=x=1"]).unwrap();
    os.kernel_args(Some(&current), &add).await.unwrap();
    let err = os.kernel_args(Some(&current), &add).await.unwrap_err();
    assert!(matches!(err, OsError::KargsConflict { .. }), "{err}");
    assert_eq!(env.default_kargs(), ["root=LABEL=root", "rw", "x=1"]);
    env.stop().await;
}
