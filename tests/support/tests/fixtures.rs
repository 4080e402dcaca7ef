//! The shared fixtures work on their own: a private bus answers, a test sysroot deploys and reads
//! back, and both clean up after themselves.

use mco_test_support::dbus::{PrivateBus, socket_path};
use mco_test_support::sysroot::TestSysroot;

#[test]
fn sysroot_deploys_and_reads_back() {
    let s = TestSysroot::builder()
        .kargs(&["root=LABEL=root", "rw", "quoted=\"a b\""])
        .build()
        .unwrap();
    let deps = s.deployments().unwrap();
    assert_eq!(deps.len(), 1);
    let d = &deps[0];
    assert_eq!(d.osname, "fakeos");
    assert_eq!(d.checksum, s.rev_parse("fakeos/stable").unwrap());
    assert!(!d.booted && !d.staged);
    assert_eq!(
        d.origin_value("origin", "refspec").as_deref(),
        Some("fakeos/stable")
    );
    assert!(
        d.options
            .starts_with("root=LABEL=root rw quoted=\"a b\" ostree=/ostree/boot.")
    );

    let bls = s.bls_entries().unwrap();
    assert_eq!(bls.len(), 1);
    assert_eq!(bls[0].ostree_index(), Some(0));
    assert_eq!(bls[0].options, d.options);
    assert!(bls[0].title.contains("FakeOS 1.0"), "{}", bls[0].title);

    // A second commit deployed on top becomes the default, the first one the rollback.
    let v2 = s.commit("fakeos/v2", "2.0").unwrap();
    s.deploy("fakeos/v2", &["root=LABEL=root", "mco=1"])
        .unwrap();
    let deps = s.deployments().unwrap();
    assert_eq!(deps.len(), 2);
    assert_eq!(deps[0].checksum, v2);
    assert_eq!(deps[0].kargs()[..2], ["root=LABEL=root", "mco=1"]);
    assert!(s.admin_status().unwrap().contains(&v2));

    let root = s.path().parent().unwrap().to_path_buf();
    drop(s);
    assert!(!root.exists(), "{} left behind", root.display());
}

#[test]
fn sysroot_without_mutable_deployments_still_cleans_up() {
    let s = TestSysroot::builder().build().unwrap();
    s.commit("fakeos/v2", "2.0").unwrap();
    // Deployed without OSTREE_SYSROOT_DEBUG: the deployment directory becomes immutable.
    let st = std::process::Command::new("ostree")
        .args(["admin", "deploy", "--os=fakeos"])
        .arg(format!("--sysroot={}", s.path().display()))
        .arg("fakeos/v2")
        .env_remove("OSTREE_SYSROOT_DEBUG")
        .status()
        .unwrap();
    assert!(st.success());
    let root = s.path().parent().unwrap().to_path_buf();
    drop(s);
    assert!(!root.exists(), "{} left behind", root.display());
}

#[tokio::test]
async fn private_bus_answers_and_goes_away() {
    let bus = PrivateBus::start().unwrap();
    let sock = socket_path(bus.address()).unwrap();
    assert!(sock.starts_with(bus.dir()));
    let conn = bus.connect().await.unwrap();
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
    let names = dbus.list_names().await.unwrap();
    assert!(names.iter().any(|n| n.as_str() == "org.freedesktop.DBus"));
    let pid = bus.pid();
    let dir = bus.dir().to_path_buf();
    drop(conn);
    drop(bus);
    assert!(!dir.exists());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}
