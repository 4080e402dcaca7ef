//! The secure metrics listener against the API test server (which answers TokenReview and
//! SubjectAccessReview as kube-apiserver does, with RBAC on), asked with the real `curl`: no,
//! bad and unknown tokens get 401, a user without the permission 403, a user bound to
//! `get /metrics` or to this node's `nodes/metrics` the metrics; the agent reviews with the
//! node's own credentials.

use std::path::Path;
use std::sync::Arc;

use mco_test_support::apiserver::{ServerOptions, TestApiServer, fixtures};
use mco_test_support::tls::TestCa;

use super::Metrics;
use super::secure::{Reviews, SecureOptions, start, tls_config};

const NODE: &str = "worker-0";

const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-url}
rules:
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: prometheus-metrics-url}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-url}
subjects:
- {kind: User, name: prometheus, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: worker-0-metrics}
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  resourceNames: [worker-0]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: node-scraper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: worker-0-metrics}
subjects:
- {kind: User, name: node-scraper, apiGroup: rbac.authorization.k8s.io}
"#;

/// `curl` of `url` trusting `ca`, with `token` as bearer: the status and the body.
async fn curl(url: &str, ca: &Path, token: Option<&str>) -> (u16, String) {
    let mut args = vec![
        "-sS".to_string(),
        "--noproxy".into(),
        "*".into(),
        "--cacert".into(),
        ca.display().to_string(),
        "-w".into(),
        "\n%{http_code}".into(),
        url.to_string(),
    ];
    if let Some(token) = token {
        args.extend(["-H".into(), format!("Authorization: Bearer {token}")]);
    }
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(&args)
            .output()
            .expect("running curl (tests/setup.sh installs it)")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_reviewed_by_the_api_server_as_kube_rbac_proxy_does() {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    server.seed(fixtures::node(NODE)).unwrap();
    server.seed_manifests(RBAC).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubelet.kubeconfig");
    server.write_node_kubeconfig(&kubeconfig, NODE).unwrap();
    let client = mco_kube::client_from_kubeconfig(&kubeconfig).await.unwrap();

    let ca = TestCa::new("metrics-ca").unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let (cert, key) = ca
        .issue_server_cert(&["127.0.0.1".to_string()])
        .unwrap()
        .write_to(dir.path(), "metrics")
        .unwrap();
    let metrics = Arc::new(Metrics::new());
    metrics.set_kubelet_failures(2);
    let options = SecureOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert,
        key,
        node: NODE.to_string(),
    };
    let (addr, _task) = start(&options, Arc::new(Reviews::new(client, NODE)), metrics)
        .await
        .unwrap();
    let url = format!("https://{addr}/metrics");

    let prometheus = server.token_for("prometheus");
    let scraper = server.token_for("node-scraper");
    let stranger = server.token_for("someone");
    let cases: &[(&str, Option<&str>, u16, &str)] = &[
        ("no token", None, 401, "Unauthorized"),
        (
            "a token the API server never issued",
            Some("not-a-token"),
            401,
            "Unauthorized",
        ),
        ("an empty token", Some(""), 401, "Unauthorized"),
        (
            "a user without the permission",
            Some(&stranger),
            403,
            "Forbidden (user=someone, verb=get, resource=nodes, subresource=metrics)",
        ),
        (
            "get /metrics",
            Some(&prometheus),
            200,
            "mcd_kubelet_state 2",
        ),
        (
            "get nodes/metrics of this node",
            Some(&scraper),
            200,
            "mcd_kubelet_state 2",
        ),
        // allowed answers are reused: the same token again
        ("get /metrics again", Some(&prometheus), 200, "# EOF"),
    ];
    for (what, token, status, body) in cases {
        let (got, text) = curl(&url, &ca_file, *token).await;
        assert_eq!(got, *status, "{what}: {text}");
        assert!(text.contains(body), "{what}: {text:?} lacks {body:?}");
    }

    // A path other than /metrics, once authorized: 404 as on loopback.
    let (got, _) = curl(
        &format!("https://{addr}/other"),
        &ca_file,
        Some(&prometheus),
    )
    .await;
    assert_eq!(got, 404);

    // The reviews were made with the node's credentials.
    let users: Vec<String> = server
        .audit()
        .iter()
        .filter(|e| e.resource == "tokenreviews" || e.resource == "subjectaccessreviews")
        .map(|e| e.user.clone())
        .collect();
    assert!(!users.is_empty());
    assert!(
        users.iter().all(|u| u == &format!("system:node:{NODE}")),
        "{users:?}"
    );
}

#[test]
fn a_bad_certificate_or_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("metrics-ca").unwrap();
    let (cert, key) = ca
        .issue_server_cert(&["127.0.0.1".to_string()])
        .unwrap()
        .write_to(dir.path(), "metrics")
        .unwrap();
    let (other_cert, _) = ca
        .issue_server_cert(&["127.0.0.1".to_string()])
        .unwrap()
        .write_to(dir.path(), "other")
        .unwrap();
    let missing = dir.path().join("missing.crt");
    let garbage = dir.path().join("garbage.crt");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let cases = [
        (&missing, &key, format!("reading {}", missing.display())),
        (
            &garbage,
            &key,
            format!("{} holds no PEM certificate", garbage.display()),
        ),
        (
            &other_cert,
            &key,
            format!(
                "the key {} does not go with the certificate {}",
                key.display(),
                other_cert.display()
            ),
        ),
        (
            &cert,
            &cert,
            format!("{} holds no PEM private key", cert.display()),
        ),
    ];
    for (cert, key, want) in cases {
        let err = format!("{:#}", tls_config(cert, key).unwrap_err());
        assert!(err.contains(&want), "{err} lacks {want}");
    }
    tls_config(&cert, &key).unwrap();
}

/// A running Prometheus, stopped when dropped.
struct Prometheus(std::process::Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real Prometheus (Debian's `prometheus`) runs the shipped scrape job
/// (`manifests/monitoring/prometheus-scrape.yaml`) with the token and CA files written in and
/// the agent's port (the shipped job's 8798, here a free one); the node discovery, which
/// Debian's build leaves out, is replaced by the labels it gives a node. Prometheus scrapes the
/// agent over TLS with the token of OpenShift's Prometheus service account, which the shipped
/// `prometheus-rbac.yaml` lets read the metrics (the agent has the API test server review it),
/// and the agent's series arrive with the job's labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_the_agent_through_the_shipped_job() {
    let manifests = mco_test_support::shipped::manifests_dir().join("monitoring");
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    let mut node = fixtures::node(NODE);
    node["status"]["addresses"] = serde_json::json!([
        {"type": "InternalIP", "address": "127.0.0.1"},
        {"type": "Hostname", "address": NODE},
    ]);
    server.seed(node).unwrap();
    let rbac = std::fs::read_to_string(manifests.join("prometheus-rbac.yaml")).unwrap();
    server.seed_manifests(&rbac).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubelet.kubeconfig");
    server.write_node_kubeconfig(&kubeconfig, NODE).unwrap();
    let client = mco_kube::client_from_kubeconfig(&kubeconfig).await.unwrap();

    // The agent, with a serving certificate for the node's address (cert and key in one
    // file, as the kubelet's).
    let ca = TestCa::new("kubelet-serving-ca").unwrap();
    let ca_file = dir.path().join("kubelet-serving-ca.crt");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let serving = ca.issue_server_cert(&["127.0.0.1".to_string()]).unwrap();
    let pem = dir.path().join("kubelet-server-current.pem");
    std::fs::write(&pem, format!("{}{}", serving.cert_pem, serving.key_pem)).unwrap();
    let metrics = Arc::new(Metrics::new());
    metrics.set_kubelet_failures(2);
    let port = free_port();
    let options = SecureOptions {
        listen: format!("127.0.0.1:{port}").parse().unwrap(),
        cert: pem.clone(),
        key: pem,
        node: NODE.to_string(),
    };
    let (_, _task) = start(&options, Arc::new(Reviews::new(client, NODE)), metrics)
        .await
        .unwrap();

    // The shipped job, with a pod's defaults written in.
    let token_file = dir.path().join("token");
    std::fs::write(
        &token_file,
        server.token_for("system:serviceaccount:openshift-monitoring:prometheus-k8s"),
    )
    .unwrap();
    let job = std::fs::read_to_string(manifests.join("prometheus-scrape.yaml")).unwrap();
    let replace = |text: &str, from: &str, to: &str| {
        assert!(text.contains(from), "the shipped job has no {from:?}");
        text.replace(from, to)
    };
    let job = replace(&job, "${1}:8798", &format!("${{1}}:{port}"));
    let job = replace(
        &job,
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        &token_file.display().to_string(),
    );
    let job = replace(
        &job,
        "/etc/prometheus/configmaps/kubelet-serving-ca-bundle/ca-bundle.crt",
        &ca_file.display().to_string(),
    );
    // Debian's Prometheus is built without Kubernetes discovery: the node is given as the
    // discovery would give it (its target labels), and the job's relabelling does the rest.
    let job = replace(
        &job,
        "kubernetes_sd_configs:\n- role: node\n",
        &format!(
            "static_configs:\n- targets: ['discovered:0']\n  labels: {{__meta_kubernetes_node_address_InternalIP: 127.0.0.1, __meta_kubernetes_node_name: {NODE}}}\n"
        ),
    );
    let indented: String = job
        .lines()
        .filter(|l| !l.starts_with('#'))
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                format!("- {l}\n")
            } else {
                format!("  {l}\n")
            }
        })
        .collect();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n{indented}"),
    )
    .unwrap();
    let web = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let mut prometheus = Prometheus(
        std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("running prometheus (Debian package prometheus; tests/setup.sh installs it)"),
    );

    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let query = format!("http://127.0.0.1:{web}/api/v1/query?query=mcd_kubelet_state");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
    let sample = loop {
        if let Some(status) = prometheus.0.try_wait().unwrap() {
            panic!(
                "prometheus exited ({status}):\n{}",
                std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
            );
        }
        let answer: Option<serde_json::Value> = match http.get(&query).send().await {
            Ok(r) => r.json().await.ok(),
            Err(_) => None,
        };
        let first = answer
            .as_ref()
            .and_then(|a| a.pointer("/data/result/0"))
            .cloned();
        if let Some(first) = first {
            break first;
        }
        if tokio::time::Instant::now() > deadline {
            let targets = http
                .get(format!("http://127.0.0.1:{web}/api/v1/targets"))
                .send()
                .await
                .map(|r| r.status().to_string())
                .unwrap_or_default();
            panic!(
                "waiting for Prometheus to scrape mcd_kubelet_state: last answer {answer:?}, targets {targets}, log:\n{}",
                std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!(sample["value"][1], "2", "{sample}");
    let labels = &sample["metric"];
    assert_eq!(labels["job"], "mco-agent", "{sample}");
    assert_eq!(labels["node"], NODE, "{sample}");
    assert_eq!(labels["namespace"], "mco-companion", "{sample}");
    assert_eq!(labels["instance"], format!("127.0.0.1:{port}"), "{sample}");
}
