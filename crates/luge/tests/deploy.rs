//! The deploy files against the code they deploy, so that neither drifts from the other:
//! `Dockerfile`, `.dockerignore`, `deploy/k8s/` and the metric names of `docs/operations.md`.
//!
//! The Kubernetes manifest `deploy/k8s/luge.toml` is the ConfigMap's verbatim and a manifest
//! `luge serve` accepts and serves; the DaemonSet's probes ask the function listener for paths
//! it answers 200; ports agree with the manifest's listen addresses everywhere and the admin
//! port is published nowhere; the image and the pod run as the same non-root user on a
//! read-only root with the AoT cache (`$XDG_CACHE_HOME/luge`, where `luge serve` is shown to
//! write it) on a writable volume; every flag they pass is one `luge serve --help` lists;
//! `workers` is the container's whole CPUs, the pool fits its memory, and the termination grace
//! outlasts the shutdown. No Docker engine or cluster is needed: the files are read as text
//! (the YAML is block-style, read by the small reader below) and the binary is the one built
//! for these tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{LUGE, Server};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A directory of this test process's own (removed first if a previous run left it).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("luge-deploy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `deploy/k8s/luge.toml` as TOML.
fn manifest() -> toml::Table {
    toml::from_str(&read("deploy/k8s/luge.toml")).unwrap()
}

fn server_key<'a>(manifest: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    manifest["server"].as_table().unwrap().get(key)
}

/// A `[server]` listen address of the manifest.
fn listen(manifest: &toml::Table, key: &str) -> SocketAddr {
    server_key(manifest, key).unwrap().as_str().unwrap().parse().unwrap()
}

fn integer(manifest: &toml::Table, key: &str) -> u64 {
    u64::try_from(server_key(manifest, key).unwrap().as_integer().unwrap()).unwrap()
}

// ---- a reader for the block-style YAML of deploy/k8s (mappings, lists, scalars)

/// Non-blank lines without full-line comments.
fn yaml_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Where a line's key starts (after the indentation and a list item's `- `).
fn key_column(line: &str) -> usize {
    let indent = line.len() - line.trim_start().len();
    if line.trim_start().starts_with("- ") { indent + 2 } else { indent }
}

/// The line's `key: value` content, without a list item's `- `.
fn content(line: &str) -> &str {
    let t = line.trim_start();
    t.strip_prefix("- ").unwrap_or(t)
}

/// Where the lines nested under the first `key:` of `lines` are.
fn block_range(lines: &[String], key: &str) -> std::ops::Range<usize> {
    let at = lines
        .iter()
        .position(|l| content(l) == format!("{key}:"))
        .unwrap_or_else(|| panic!("no `{key}:` in\n{}", lines.join("\n")));
    let column = key_column(&lines[at]);
    let len = lines[at + 1..].iter().take_while(|l| key_column(l) > column).count();
    at + 1..at + 1 + len
}

/// The lines nested under the first `key:` of `lines`.
fn block(lines: &[String], key: &str) -> Vec<String> {
    lines[block_range(lines, key)].to_vec()
}

/// The scalar of the first `key: value` of `lines`, unquoted.
fn value(lines: &[String], key: &str) -> Option<String> {
    lines.iter().find_map(|l| {
        let v = content(l).strip_prefix(&format!("{key}:"))?.trim();
        (!v.is_empty()).then(|| v.trim_matches('"').to_owned())
    })
}

fn must(lines: &[String], key: &str) -> String {
    value(lines, key).unwrap_or_else(|| panic!("no `{key}` in\n{}", lines.join("\n")))
}

/// The items of a block list, each as its own lines (the `- ` turned into indentation).
fn items(list: &[String]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let column = list.first().map_or(0, |l| l.len() - l.trim_start().len());
    for line in list {
        let indent = line.len() - line.trim_start().len();
        if indent == column && line.trim_start().starts_with("- ") {
            out.push(vec![format!("{}  {}", " ".repeat(indent), content(line))]);
        } else {
            out.last_mut().expect("a list starts with `- `").push(line.clone());
        }
    }
    out
}

/// The scalars of a list of scalars (`- a`).
fn scalars(list: &[String]) -> Vec<String> {
    items(list).iter().map(|item| item[0].trim().trim_matches('"').to_owned()).collect()
}

/// The one container of the DaemonSet.
fn container() -> Vec<String> {
    let containers = items(&block(&yaml_lines(&read("deploy/k8s/daemonset.yaml")), "containers"));
    assert_eq!(containers.len(), 1, "one container: luge");
    containers.into_iter().next().unwrap()
}

/// The DaemonSet's pod spec, without its containers.
fn pod_spec() -> Vec<String> {
    let lines = yaml_lines(&read("deploy/k8s/daemonset.yaml"));
    let mut spec = block(&block(&lines, "template"), "spec");
    spec.drain(block_range(&spec, "containers"));
    spec
}

/// `(name, containerPort, hostPort, protocol)` of the container's ports.
fn container_ports() -> Vec<(String, u16, Option<u16>, String)> {
    items(&block(&container(), "ports"))
        .iter()
        .map(|p| {
            (
                must(p, "name"),
                must(p, "containerPort").parse().unwrap(),
                value(p, "hostPort").map(|h| h.parse().unwrap()),
                must(p, "protocol"),
            )
        })
        .collect()
}

/// A quantity of memory (`3Gi`, `512Mi`) in bytes.
fn bytes(quantity: &str) -> u64 {
    let (n, unit) = quantity.split_at(quantity.find(|c: char| !c.is_ascii_digit()).unwrap());
    let scale = match unit {
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => panic!("unit `{other}` of {quantity}"),
    };
    n.parse::<u64>().unwrap() * scale
}

// ---- the Dockerfile

/// The instructions of the Dockerfile's last stage (the image), continuation lines joined:
/// `(INSTRUCTION, arguments)`.
fn runtime_stage() -> Vec<(String, String)> {
    let text = read("Dockerfile").replace("\\\n", " ");
    let instructions: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            let (op, args) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
            (op.to_uppercase(), args.trim().to_owned())
        })
        .collect();
    let last = instructions.iter().rposition(|(op, _)| op == "FROM").expect("a FROM");
    instructions[last..].to_vec()
}

fn instruction(stage: &[(String, String)], op: &str) -> Vec<String> {
    stage.iter().filter(|(o, _)| o == op).map(|(_, a)| a.clone()).collect()
}

/// The image's command line: ENTRYPOINT then CMD, both exec (JSON) form.
fn image_command() -> Vec<String> {
    let stage = runtime_stage();
    let mut argv = Vec::new();
    for op in ["ENTRYPOINT", "CMD"] {
        let form = instruction(&stage, op);
        assert_eq!(form.len(), 1, "one {op} in the image");
        let words: Vec<String> = serde_json::from_str(&form[0]).expect("exec form: a JSON array");
        argv.extend(words);
    }
    argv
}

/// The value after `flag` in `argv`.
fn flag<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter().position(|a| a == flag).and_then(|i| argv.get(i + 1)).map(String::as_str)
}

// ---- HTTP

/// `GET path` on `base` (`http://IP:PORT`): status and body.
fn get(base: &str, path: &str) -> (u16, String) {
    let addr = base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

// ---- the tests

/// The ConfigMap holds `deploy/k8s/luge.toml` verbatim, `luge serve` accepts it and serves
/// its functions, every probe of the DaemonSet is answered 200 on the function listener (the
/// port the probes name), the admin API is not on that listener, and the AoT cache is written
/// where the image's `XDG_CACHE_HOME` puts it.
#[test]
fn the_kubernetes_manifest_is_served_and_answers_the_probes() {
    let file = read("deploy/k8s/luge.toml");
    let configmap = read("deploy/k8s/configmap.yaml");
    let (_, embedded) = configmap.split_once("\n  luge.toml: |\n").expect("data.luge.toml: |");
    let embedded: String = embedded
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    assert_eq!(embedded.trim_end(), file.trim_end(), "configmap.yaml and luge.toml differ");

    let cache = scratch("k8s-cache");
    let path = root().join("deploy/k8s/luge.toml");
    let server = Server::start(&["--manifest", path.to_str().unwrap()], &cache);
    let out = server.invoke(&["hello", "--data", "k8s"]);
    assert_eq!(out.stdout, b"Hello, k8s!\n", "{}", String::from_utf8_lossy(&out.stderr));
    let http_port = listen(&manifest(), "http").port();
    let ports = container_ports();
    let container = container();
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get_action = block(&block(&container, probe), "httpGet");
        let port = must(&get_action, "port");
        let port =
            ports.iter().find(|p| p.0 == port).map_or_else(|| port.parse().unwrap(), |p| p.1);
        assert_eq!(port, http_port, "{probe} must ask the function listener");
        let path = must(&get_action, "path");
        let (status, body) = get(&server.http, &path);
        assert_eq!(status, 200, "{probe} {path}: {body}");
        // A Service must not take a loaded node out (docs/deploy.md, "Probes").
        if probe == "readinessProbe" {
            assert_eq!(path, "/readyz?load=ignore", "readiness leaves load out");
        }
    }
    // With the host's network, cluster DNS (an OTLP collector's name) needs this policy.
    assert_eq!(must(&pod_spec(), "hostNetwork"), "true");
    assert_eq!(must(&pod_spec(), "dnsPolicy"), "ClusterFirstWithHostNet");
    let (status, _) = get(&server.http, "/admin/functions");
    assert_eq!(status, 404, "the function listener serves no admin API");
    assert_eq!(server.stop(), 0);

    // `luge serve` wrote its artifacts to $XDG_CACHE_HOME/luge, owner-only, and nowhere else
    // under it.
    let dir = cache.join("luge");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());
    let artifacts = std::fs::read_dir(&dir).unwrap().count();
    assert!(artifacts >= 5, "one artifact per built-in module, got {artifacts}");
    let top: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(top, ["luge"]);
    std::fs::remove_dir_all(&cache).unwrap();
}

/// HTTP and UDP-RPC listen on every interface on the manifest's ports, which the DaemonSet,
/// the Service and the image publish under the right protocols; the admin listener stays on
/// loopback and its port is published by none of them.
#[test]
fn ports_agree_and_the_admin_port_is_published_nowhere() {
    let m = manifest();
    let (http, rpc) = (listen(&m, "http"), listen(&m, "rpc"));
    let admin = listen(&m, "admin");
    assert!(http.ip().is_unspecified() && rpc.ip().is_unspecified(), "bind every interface");
    assert!(admin.ip().is_loopback(), "the admin listener stays on loopback");
    let want = [("http", http.port(), "TCP"), ("rpc", rpc.port(), "UDP")];

    let ports = container_ports();
    let got: Vec<_> = ports.iter().map(|(n, c, _, p)| (n.as_str(), *c, p.as_str())).collect();
    assert_eq!(got, want, "the DaemonSet's container ports");
    // On the host's network a host port is the container port.
    assert_eq!(must(&pod_spec(), "hostNetwork"), "true");
    for (name, port, host, _) in &ports {
        assert_eq!(host.unwrap_or(*port), *port, "{name}: hostPort = containerPort");
    }

    let service = yaml_lines(&read("deploy/k8s/service.yaml"));
    let service_ports: Vec<_> = items(&block(&block(&service, "spec"), "ports"))
        .iter()
        .map(|p| {
            let target = must(p, "targetPort");
            let target = ports.iter().find(|c| c.0 == target).expect("a named container port");
            (must(p, "port").parse::<u16>().unwrap(), target.1, must(p, "protocol"))
        })
        .collect();
    let want_service: Vec<_> =
        want.iter().map(|(_, p, proto)| (*p, *p, proto.to_string())).collect();
    assert_eq!(service_ports, want_service, "the Service's ports");

    let exposed = instruction(&runtime_stage(), "EXPOSE").join(" ");
    let exposed: BTreeSet<&str> = exposed.split_whitespace().collect();
    let want_exposed: BTreeSet<String> =
        want.iter().map(|(_, p, proto)| format!("{p}/{}", proto.to_lowercase())).collect();
    assert_eq!(exposed, want_exposed.iter().map(String::as_str).collect::<BTreeSet<_>>(), "EXPOSE");
    let argv = image_command();
    for (name, addr) in [("--http", http), ("--rpc", rpc)] {
        assert_eq!(flag(&argv, name), Some(addr.to_string().as_str()), "the image's {name}");
    }
    let image_admin: SocketAddr = flag(&argv, "--admin").unwrap().parse().unwrap();
    assert!(image_admin.ip().is_loopback(), "the image's admin listener stays on loopback");
    assert!(!exposed.iter().any(|e| e.starts_with(&format!("{}/", admin.port()))));
    assert!(ports.iter().all(|p| p.1 != admin.port() && p.2 != Some(admin.port())));
    assert!(service_ports.iter().all(|p| p.0 != admin.port()));
}

/// The image and the pod run as the same non-root user, the pod on a read-only root without
/// capabilities, and the AoT cache directory (`XDG_CACHE_HOME`, as `luge serve` reads it) is
/// a writable volume in both: an emptyDir larger than `cache_max_bytes` in the pod, a directory
/// owned by that user in the image.
#[test]
fn containers_run_unprivileged_on_a_read_only_root_with_the_cache_on_a_volume() {
    let stage = runtime_stage();
    let user = instruction(&stage, "USER");
    assert_eq!(user.len(), 1, "the image sets its USER");
    let (uid, gid) = user[0].split_once(':').unwrap_or((user[0].as_str(), user[0].as_str()));
    let uid: u32 = uid.parse().expect("a numeric uid (runAsNonRoot can check only a number)");
    assert_ne!(uid, 0, "the image's user is not root");
    let env = instruction(&stage, "ENV");
    let cache = env
        .iter()
        .find_map(|e| e.strip_prefix("XDG_CACHE_HOME="))
        .expect("ENV XDG_CACHE_HOME=… (luge serve caches in $XDG_CACHE_HOME/luge)");
    let chown = format!("--chown={uid}:{gid}");
    let owned = instruction(&stage, "COPY").iter().any(|c| {
        c.contains(&chown) && c.split_whitespace().last().unwrap().trim_end_matches('/') == cache
    });
    assert!(owned, "the image creates {cache} owned by {uid}:{gid}");

    let pod = block(&pod_spec(), "securityContext");
    assert_eq!(must(&pod, "runAsNonRoot"), "true");
    assert_eq!(must(&pod, "runAsUser"), uid.to_string(), "the pod runs as the image's user");
    let container = container();
    let security = block(&container, "securityContext");
    assert_eq!(must(&security, "readOnlyRootFilesystem"), "true");
    assert_eq!(must(&security, "allowPrivilegeEscalation"), "false");
    assert_eq!(must(&security, "runAsNonRoot"), "true");
    assert_eq!(scalars(&block(&block(&security, "capabilities"), "drop")), ["ALL"]);

    let env = items(&block(&container, "env"));
    let xdg = env.iter().find(|e| must(e, "name") == "XDG_CACHE_HOME").expect("XDG_CACHE_HOME");
    assert_eq!(must(xdg, "value"), cache, "the pod's cache directory is the image's");
    let mounts = items(&block(&container, "volumeMounts"));
    let mount = mounts.iter().find(|m| must(m, "mountPath") == cache).expect("a volume on it");
    assert_ne!(value(mount, "readOnly").as_deref(), Some("true"));
    let volumes = items(&block(&pod_spec(), "volumes"));
    let volume = volumes.iter().find(|v| must(v, "name") == must(mount, "name")).unwrap();
    let size = bytes(&must(&block(volume, "emptyDir"), "sizeLimit"));
    // The kubelet evicts a pod whose emptyDir outgrows its limit.
    let bound = integer(&manifest(), "cache_max_bytes");
    assert!(size >= 2 * bound, "sizeLimit {size} must leave room above cache_max_bytes {bound}");
    // The manifest is mounted from the ConfigMap where the DaemonSet's --manifest reads it.
    let args = scalars(&block(&container, "args"));
    let path = flag(&args, "--manifest").expect("--manifest");
    let config = mounts.iter().find(|m| must(m, "name") == "config").unwrap();
    assert_eq!(Path::new(path).parent().unwrap(), Path::new(&must(config, "mountPath")));
    assert_eq!(Path::new(path).file_name().unwrap(), "luge.toml");
}

/// Every flag the image and the DaemonSet pass is one `luge serve --help` lists (with its
/// value among the possible ones where it lists them), and both run `serve`.
#[test]
fn every_flag_the_deploy_files_pass_is_one_luge_serve_takes() {
    let help = Command::new(LUGE).args(["serve", "--help"]).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let image = image_command();
    assert_eq!(image[0], "/usr/local/bin/luge");
    let daemonset = scalars(&block(&container(), "args"));
    for (who, argv) in [("the image", &image[1..]), ("the DaemonSet", &daemonset[..])] {
        assert_eq!(argv[0], "serve", "{who} runs `luge serve`");
        for (i, arg) in argv.iter().enumerate().filter(|(_, a)| a.starts_with("--")) {
            assert!(help.contains(&format!("{arg} <")), "{who}: `{arg}` is not a serve flag");
            if arg == "--log-format" {
                let format = &argv[i + 1];
                assert!(help.contains(&format!("- {format}: ")), "{who}: log format {format}");
            }
        }
    }
    // The Dockerfile builds what it copies: the functions with their Makefile, the binary
    // with Cargo, the toolchain with the script the development machines use.
    let dockerfile = read("Dockerfile");
    for step in ["./scripts/install-deps.sh", "make -C functions", "cargo build --release"] {
        assert!(dockerfile.contains(step), "the builder runs `{step}`");
    }
    assert!(dockerfile.contains("FROM rust:1.95-bookworm AS builder"));
}

/// The image keeps `examples/edge.toml` beside the modules it names, so `luge serve --manifest
/// /opt/luge/examples/edge.toml` finds them; the build context leaves out the host's build
/// output and nothing the builder needs.
#[test]
fn the_image_keeps_the_edge_manifest_beside_its_modules() {
    let copies = instruction(&runtime_stage(), "COPY");
    let destination = |source: &str| {
        let c = copies.iter().find(|c| c.split_whitespace().any(|w| w == source)).unwrap();
        PathBuf::from(c.split_whitespace().last().unwrap())
    };
    let manifest_dir = destination("/src/examples/edge.toml").parent().unwrap().to_owned();
    let modules = destination("/src/functions/build/wasm/");
    let edge: toml::Table = toml::from_str(&read("examples/edge.toml")).unwrap();
    let functions = edge["function"].as_array().unwrap();
    assert!(functions.len() >= 10);
    // What `make -C functions` builds into build/wasm/: the Makefile's FUNCTIONS.
    let makefile = read("functions/Makefile").replace("\\\n", " ");
    let built: Vec<&str> = makefile
        .lines()
        .find_map(|l| l.strip_prefix("FUNCTIONS :="))
        .expect("FUNCTIONS := in functions/Makefile")
        .split_whitespace()
        .collect();
    assert!(makefile.contains("\nB := build\n") && makefile.contains("$(B)/wasm/$(1).wasm:"));
    for f in functions {
        let module = Path::new(f["module"].as_str().unwrap());
        // Resolve `..` as the kernel would in the image.
        let mut at = manifest_dir.clone();
        for part in module.components() {
            match part {
                std::path::Component::ParentDir => assert!(at.pop()),
                other => at.push(other),
            }
        }
        assert_eq!(at.parent().unwrap(), modules.as_path(), "{}", module.display());
        let stem = module.file_stem().unwrap().to_str().unwrap();
        assert!(built.contains(&stem), "{stem}: not a module `make -C functions` builds");
    }
    let ignored: Vec<String> = yaml_lines(&read(".dockerignore"));
    for output in ["target", "functions/build"] {
        assert!(ignored.iter().any(|l| l == output), ".dockerignore leaves out {output}");
    }
    for needed in ["Cargo.toml", "Cargo.lock", "crates", "functions", "examples", "scripts"] {
        assert!(!ignored.iter().any(|l| l == needed), ".dockerignore must keep {needed}");
    }
}

/// Guaranteed QoS with whole CPUs and `workers` = CPUs; the pool at its worst fits the memory
/// limit; the termination grace outlasts the preStop sleep and the shutdown's worst case.
#[test]
fn resources_and_grace_fit_the_manifest() {
    let m = manifest();
    let container = container();
    let resources = block(&container, "resources");
    let (requests, limits) = (block(&resources, "requests"), block(&resources, "limits"));
    for key in ["cpu", "memory"] {
        assert_eq!(value(&requests, key), value(&limits, key), "{key}: requests = limits");
    }
    let cpus: u64 = must(&limits, "cpu").parse().expect("a whole number of CPUs");
    assert_eq!(integer(&m, "workers"), cpus, "one worker per CPU");
    assert!(server_key(&m, "cpus").is_none(), "the kubelet picks the CPUs: no `cpus` list");
    let memory = bytes(&must(&limits, "memory"));
    let pool = integer(&m, "max_sandboxes") * integer(&m, "max_memory_bytes");
    // What else is bounded and may all be held at once: HTTP bodies, the UDP duplicate cache.
    let bodies = integer(&m, "max_buffered_body_bytes");
    let dedup = luge_server::UdpConfig::default().dedup_bytes as u64;
    let held = pool + bodies + dedup;
    assert!(
        memory >= held + (512 << 20),
        "pool {pool} + bodies {bodies} + dedup cache {dedup} + 512 MiB must fit the limit {memory}"
    );

    let sleep: u64 =
        must(&block(&block(&container, "preStop"), "sleep"), "seconds").parse().unwrap();
    let grace_ms = integer(&m, "shutdown_grace_ms");
    // One grace for the whole node (front ends and runtime), plus the HTTP front end's 200 ms
    // to flush its last 503s and some slack.
    let worst_ms = sleep * 1000 + grace_ms + 400;
    let termination: u64 = must(&pod_spec(), "terminationGracePeriodSeconds").parse().unwrap();
    assert!(termination * 1000 > worst_ms + 5000, "{termination} s against {worst_ms} ms");
}

/// `docs/operations.md` names every metric family a node renders (tenants and UDP-RPC
/// included), and no family it does not render.
#[test]
fn the_operations_guide_names_every_metric_family() {
    let dir = scratch("metrics");
    let path = dir.join("luge.toml");
    std::fs::write(
        &path,
        "[[tenant]]\nid = 1\nmax_concurrent = 8\n\n[[function]]\nname = \"hello\"\n\
         module = \"builtin:hello\"\ntenant = 1\n",
    )
    .unwrap();
    let server = Server::start(&["--manifest", path.to_str().unwrap()], &dir.join("cache"));
    assert!(server.invoke(&["hello", "--data", "x"]).status.success());
    let (status, metrics) = get(&server.http, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(server.stop(), 0);
    let rendered: BTreeSet<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(rendered.len() > 20, "{metrics}");
    let doc = read("docs/operations.md");
    let missing: Vec<_> = rendered.iter().filter(|f| !doc.contains(&format!("`{f}"))).collect();
    assert!(missing.is_empty(), "docs/operations.md does not name {missing:?}");
    let named: BTreeSet<&str> = doc
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("luge_"))
        .map(|w| {
            ["_bucket", "_sum", "_count"].iter().fold(w, |w, s| w.strip_suffix(s).unwrap_or(w))
        })
        .collect();
    let unknown: Vec<_> = named.difference(&rendered).collect();
    assert!(unknown.is_empty(), "docs/operations.md names metrics no node renders: {unknown:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
