//! One row per rule: a manifest fragment and the exact errors it must produce.

use k8s_openapi::api::core::v1::Pod;

use super::validate_pod;

/// A valid pod with `spec_extra` and `container_extra` (YAML, indented as the spec's
/// and the container's fields) spliced in.
fn pod(spec_extra: &str, container_extra: &str) -> Pod {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n{spec_extra}  containers:\n  - name: main\n    image: busybox\n{container_extra}"
    );
    let value: serde_json::Value =
        serde_yaml_ng::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn errors(spec_extra: &str, container_extra: &str) -> Vec<String> {
    validate_pod(&pod(spec_extra, container_extra))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_plain_pod_is_valid() {
    assert_eq!(errors("", ""), Vec::<String>::new());
}

#[test]
fn each_rule_reports_its_field_and_reason() {
    // (spec extra, container extra, the exact errors)
    let table: &[(&str, &str, &[&str])] = &[
        // names
        (
            "",
            "  - name: Main\n    image: x\n",
            &[
                "spec.containers[1].name: invalid value \"Main\": must be a DNS-1123 label: at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit",
            ],
        ),
        (
            "  initContainers:\n  - name: main\n    image: x\n",
            "",
            &[
                "spec.containers[0].name: duplicate container name \"main\" (also used by spec.initContainers[0]); give every container a unique name",
            ],
        ),
        (
            "  ephemeralContainers:\n  - name: main\n    image: x\n",
            "",
            &[
                "spec.ephemeralContainers[0].name: duplicate container name \"main\" (also used by spec.containers[0]); give every container a unique name",
            ],
        ),
        // env
        (
            "",
            "    env:\n    - name: A=B\n      value: x\n",
            &[
                "spec.containers[0].env[0].name: invalid value \"A=B\": must be printable ASCII characters other than '=' (and not empty)",
            ],
        ),
        (
            "",
            "    env:\n    - name: A\n      value: x\n      valueFrom: {fieldRef: {fieldPath: metadata.name}}\n",
            &[
                "spec.containers[0].env[0].valueFrom: may not be set together with a non-empty value; keep one of them",
            ],
        ),
        (
            "",
            "    env:\n    - name: A\n      valueFrom: {}\n",
            &[
                "spec.containers[0].env[0].valueFrom: must specify one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef, fileKeyRef",
            ],
        ),
        (
            "",
            "    env:\n    - name: A\n      valueFrom: {fieldRef: {fieldPath: metadata.labels}}\n",
            &[
                "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: invalid value \"metadata.labels\": must be one of metadata.name, metadata.namespace, metadata.uid, metadata.labels['<KEY>'], metadata.annotations['<KEY>'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP, status.podIPs",
            ],
        ),
        (
            "",
            "    env:\n    - name: A\n      valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}\n    - name: B\n      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}\n",
            &[],
        ),
        (
            "",
            "    env:\n    - name: A\n      valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1Mi}}\n",
            &[
                "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: invalid value \"1Mi\": must be one of 1m, 1",
            ],
        ),
        (
            "",
            "    envFrom:\n    - prefix: X_\n    - configMapRef: {name: a}\n      secretRef: {name: b}\n",
            &[
                "spec.containers[0].envFrom[0]: must specify one of configMapRef, secretRef",
                "spec.containers[0].envFrom[1]: may specify only one of these, found configMapRef, secretRef; keep one",
            ],
        ),
        // ports
        (
            "",
            "    ports:\n    - {containerPort: 80, name: http}\n    - {containerPort: 81, name: http}\n    - {containerPort: 82, name: metrics-endpoint-1}\n",
            &[
                "spec.containers[0].ports[1].name: duplicate port name \"http\" (also used by spec.containers[0].ports[0]); give every port a unique name",
                "spec.containers[0].ports[2].name: invalid value \"metrics-endpoint-1\": must be an IANA_SVC_NAME: at most 15 lowercase letters, digits or '-', with at least one letter, no '--', starting and ending with a letter or digit",
            ],
        ),
        (
            "  hostNetwork: true\n",
            "    ports:\n    - {containerPort: 80, hostPort: 8080}\n",
            &[
                "spec.containers[0].ports[0].hostPort: invalid value \"8080\": must match containerPort when hostNetwork is true",
            ],
        ),
        // probes and hooks
        (
            "",
            "    livenessProbe:\n      httpGet: {port: 0}\n",
            &[
                "spec.containers[0].livenessProbe.httpGet.port: invalid value \"0\": must be between 1 and 65535, inclusive",
            ],
        ),
        (
            "",
            "    livenessProbe: {periodSeconds: 5}\n",
            &[
                "spec.containers[0].livenessProbe: must specify one of exec, httpGet, tcpSocket, grpc",
            ],
        ),
        (
            "",
            "    readinessProbe:\n      exec: {command: [\"true\"]}\n      tcpSocket: {port: http}\n",
            &[
                "spec.containers[0].readinessProbe: may specify only one of these, found exec, tcpSocket; keep one",
            ],
        ),
        (
            "",
            "    startupProbe:\n      tcpSocket: {port: 80}\n      successThreshold: 2\n      periodSeconds: -1\n",
            &[
                "spec.containers[0].startupProbe.periodSeconds: invalid value \"-1\": must be greater than or equal to 0",
                "spec.containers[0].startupProbe.successThreshold: invalid value \"2\": must be 1 for liveness and startup probes (leave it out)",
            ],
        ),
        (
            "",
            "    readinessProbe:\n      grpc: {port: 70000}\n      terminationGracePeriodSeconds: 5\n",
            &[
                "spec.containers[0].readinessProbe.grpc.port: invalid value \"70000\": must be between 1 and 65535, inclusive",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: may not be set on a readinessProbe (a failed readiness probe kills nothing); remove it",
            ],
        ),
        (
            "",
            "    livenessProbe:\n      exec: {command: []}\n      terminationGracePeriodSeconds: 0\n",
            &[
                "spec.containers[0].livenessProbe.exec.command: field is required; give the command to run, e.g. [cat, /tmp/healthy]",
                "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: invalid value \"0\": must be greater than 0",
            ],
        ),
        (
            "",
            "    livenessProbe:\n      httpGet: {port: 80, scheme: FTP, httpHeaders: [{name: \"Bad Header\", value: x}]}\n",
            &[
                "spec.containers[0].livenessProbe.httpGet.scheme: invalid value \"FTP\": must be one of HTTP, HTTPS",
                "spec.containers[0].livenessProbe.httpGet.httpHeaders[0].name: invalid value \"Bad Header\": must be a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
            ],
        ),
        (
            "",
            "    lifecycle:\n      postStart: {}\n      preStop: {sleep: {seconds: -1}}\n",
            &[
                "spec.containers[0].lifecycle.postStart: must specify one of exec, httpGet, tcpSocket, sleep",
                "spec.containers[0].lifecycle.preStop.sleep.seconds: invalid value \"-1\": must be greater than or equal to 0",
            ],
        ),
        // restartPolicy
        (
            "  restartPolicy: Sometimes\n",
            "    restartPolicy: Always\n",
            &[
                "spec.restartPolicy: invalid value \"Sometimes\": must be one of Always, OnFailure, Never",
                "spec.containers[0].restartPolicy: invalid value \"Always\": may not be set on a regular container; only init containers take restartPolicy (Always, for a sidecar), the pod's spec.restartPolicy applies here",
            ],
        ),
        (
            "  initContainers:\n  - name: init\n    image: x\n    restartPolicy: Never\n  - name: once\n    image: x\n    readinessProbe: {exec: {command: [\"true\"]}}\n  - name: sidecar\n    image: x\n    restartPolicy: Always\n    readinessProbe: {exec: {command: [\"true\"]}}\n",
            "",
            &[
                "spec.initContainers[0].restartPolicy: invalid value \"Never\": must be one of Always",
                "spec.initContainers[1].readinessProbe: may not be set on an init container that runs to completion; give it restartPolicy: Always to make it a sidecar, or remove the field",
            ],
        ),
        // pod-level numbers and enums
        (
            "  activeDeadlineSeconds: 0\n  terminationGracePeriodSeconds: -1\n",
            "",
            &[
                "spec.terminationGracePeriodSeconds: invalid value \"-1\": must be 0 or more seconds",
                "spec.activeDeadlineSeconds: invalid value \"0\": must be between 1 and 2147483647, inclusive",
            ],
        ),
        (
            "  dnsPolicy: None\n  securityContext: {fsGroupChangePolicy: Sometimes}\n",
            "",
            &[
                "spec.dnsConfig: field is required; dnsPolicy None takes its nameservers from dnsConfig",
                "spec.securityContext.fsGroupChangePolicy: invalid value \"Sometimes\": must be one of OnRootMismatch, Always",
            ],
        ),
        (
            "",
            "    securityContext: {capabilities: {add: [NET_FLY]}}\n",
            &[
                "spec.containers[0].securityContext.capabilities.add: unknown capability \"NET_FLY\"",
            ],
        ),
        // sysctls
        (
            "  securityContext:\n    sysctls:\n    - {name: net.ipv4/../../kernel.core_pattern, value: x}\n    - {name: /net.ipv4.x, value: \"1\"}\n    - {name: Net.x, value: \"1\"}\n    - {name: \"\", value: \"1\"}\n    - {name: net.core.somaxconn, value: \"1\\nkernel.x=1\"}\n    - {name: net/core/somaxconn, value: \"1\"}\n    - {name: net.core.somaxconn, value: \"2\"}\n    - {name: \"net.x\\ny\", value: \"1\"}\n",
            "",
            &[
                "spec.securityContext.sysctls[0].name: invalid value \"net.ipv4/../../kernel.core_pattern\": must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?",
                "spec.securityContext.sysctls[1].name: invalid value \"/net.ipv4.x\": must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?",
                "spec.securityContext.sysctls[2].name: invalid value \"Net.x\": must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?",
                "spec.securityContext.sysctls[3].name: field is required; name the sysctl, e.g. net.ipv4.ip_local_port_range",
                "spec.securityContext.sysctls[4].value: invalid value \"1\\nkernel.x=1\": must not contain a newline, carriage return or NUL character",
                "spec.securityContext.sysctls[5].name: duplicate sysctl name \"net/core/somaxconn\" (also used by spec.securityContext.sysctls[4]); give every sysctl a unique name",
                "spec.securityContext.sysctls[6].name: duplicate sysctl name \"net.core.somaxconn\" (also used by spec.securityContext.sysctls[4]); give every sysctl a unique name",
                "spec.securityContext.sysctls[7].name: invalid value \"net.x\\ny\": must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?",
            ],
        ),
        // resources
        (
            "",
            "    resources:\n      requests: {cpu: 1 core, memory: 512MB}\n      limits: {cpu: 1e400, memory: 1Gi, example.com/gpu: 1}\n",
            &[
                "spec.containers[0].resources.requests.cpu: invalid value \"1 core\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 500m, 0.5, 128Mi, 1G)",
                "spec.containers[0].resources.requests.memory: invalid value \"512MB\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 500m, 0.5, 128Mi, 1G)",
                "spec.containers[0].resources.limits.cpu: invalid value \"1e400\": is too large: at most 9223372036854775807 thousandths (e.g. 500m, 0.5, 128Mi, 1G)",
            ],
        ),
        (
            "",
            "    resources:\n      requests: {cpu: 2, example.com/gpu: 1, gpu: 1}\n      limits: {cpu: 1500m, example.com/gpu: 2, hugepages-2Mi: 1.5}\n",
            &[
                "spec.containers[0].resources.requests.gpu: invalid value \"gpu\": must be cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource with a domain (example.com/gpu)",
                "spec.containers[0].resources.limits.hugepages-2Mi: invalid value \"1.5\": must be an integer",
                "spec.containers[0].resources.requests.cpu: invalid value \"2\": must be less than or equal to cpu limit of 1500m",
                "spec.containers[0].resources.requests.example.com/gpu: invalid value \"1\": must be equal to example.com/gpu limit of 2 (extended resources cannot be overcommitted)",
            ],
        ),
        // volumes and mounts
        (
            "  volumes:\n  - name: data\n  - name: data\n    emptyDir: {medium: Disk, sizeLimit: -1Gi}\n  - name: both\n    emptyDir: {}\n    hostPath: {path: /x}\n",
            "",
            &[
                "spec.volumes[0]: must specify one of emptyDir, hostPath, configMap, secret, downwardAPI, projected, (or another volume type)",
                "spec.volumes[1].name: duplicate volume name \"data\" (also used by spec.volumes[0]); give every volume a unique name",
                "spec.volumes[1].emptyDir.medium: invalid value \"Disk\": must be one of \"\" (disk), Memory, HugePages, HugePages-<size>",
                "spec.volumes[1].emptyDir.sizeLimit: invalid value \"-1Gi\": must be greater than or equal to 0",
                "spec.volumes[2]: may specify only one of these, found emptyDir, hostPath; keep one",
            ],
        ),
        (
            "  volumes:\n  - name: etc\n    hostPath: {path: etc/x, type: Dir}\n  - name: up\n    hostPath: {path: /var/../etc}\n",
            "",
            &[
                "spec.volumes[0].hostPath.path: invalid value \"etc/x\": must be an absolute path",
                "spec.volumes[0].hostPath.type: invalid value \"Dir\": must be one of , DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice",
                "spec.volumes[1].hostPath.path: invalid value \"/var/../etc\": must be a relative path without '..' elements",
            ],
        ),
        (
            "  volumes:\n  - name: cm\n    configMap:\n      name: ''\n      defaultMode: 1000\n      items: [{key: a, path: ../x}]\n  - name: dapi\n    downwardAPI:\n      items:\n      - path: cpu\n        resourceFieldRef: {resource: limits.cpu}\n      - path: n\n        fieldRef: {fieldPath: spec.nodeName}\n",
            "",
            &[
                "spec.volumes[0].configMap.name: field is required; name the ConfigMap or Secret",
                "spec.volumes[0].configMap.defaultMode: invalid value \"1000\": must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[0].configMap.items[0].path: invalid value \"../x\": must be a relative path without '..' elements",
                "spec.volumes[1].downwardAPI.items[0].resourceFieldRef.containerName: field is required; a volume belongs to no container: name the one whose resources to use",
                "spec.volumes[1].downwardAPI.items[1].fieldRef.fieldPath: invalid value \"spec.nodeName\": must be one of metadata.name, metadata.namespace, metadata.uid, metadata.labels, metadata.annotations, metadata.labels['<KEY>'], metadata.annotations['<KEY>']",
            ],
        ),
        (
            "  volumes:\n  - name: p\n    projected:\n      sources:\n      - configMap: {name: a, items: [{key: k, path: same}]}\n      - secret: {name: b, items: [{key: k, path: same}]}\n      - {}\n",
            "",
            &[
                "spec.volumes[0].projected.sources[1].secret.items[0].path: invalid value \"same\": must be unique (also used by spec.volumes[0].projected.sources[0].configMap.items[0].path)",
                "spec.volumes[0].projected.sources[2]: must specify one of secret, configMap, downwardAPI, serviceAccountToken, clusterTrustBundle, podCertificate",
            ],
        ),
        (
            "  volumes:\n  - name: data\n    emptyDir: {}\n",
            "    volumeMounts:\n    - {name: data, mountPath: /data, subPath: ../x}\n    - {name: nope, mountPath: data}\n    - {name: data, mountPath: /data, subPath: a, subPathExpr: $(POD)}\n    - {name: data, mountPath: /b, mountPropagation: Bidirectional}\n    - {name: data, mountPath: /c, mountPropagation: Shared, recursiveReadOnly: Enabled}\n",
            &[
                "spec.containers[0].volumeMounts[0].subPath: invalid value \"../x\": must be a relative path without '..' elements",
                "spec.containers[0].volumeMounts[1].name: invalid value \"nope\": no volume of this name in spec.volumes; declare the volume or fix the name",
                "spec.containers[0].volumeMounts[1].mountPath: invalid value \"data\": must be an absolute path",
                "spec.containers[0].volumeMounts[2].mountPath: invalid value \"/data\": must be unique (also used by spec.containers[0].volumeMounts[0].mountPath)",
                "spec.containers[0].volumeMounts[2].subPathExpr: may not be set together with subPath; keep one of them",
                "spec.containers[0].volumeMounts[3].mountPropagation: invalid value \"Bidirectional\": may not be set unless the container is privileged (securityContext.privileged: true); use HostToContainer",
                "spec.containers[0].volumeMounts[4].mountPropagation: invalid value \"Shared\": must be one of None, HostToContainer, Bidirectional",
                "spec.containers[0].volumeMounts[4].recursiveReadOnly: invalid value \"Enabled\": may not be set unless readOnly is true",
            ],
        ),
        // metadata
        ("", "", &[]),
    ];
    let mut wrong = Vec::new();
    for (i, (spec, container, want)) in table.iter().enumerate() {
        let got = errors(spec, container);
        if got != *want {
            wrong.push(format!("row {i}:\n  want {want:#?}\n  got  {got:#?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn labels_and_annotations() {
    let mut p = pod("", "");
    p.metadata.labels = Some(
        [
            ("app".into(), "web".into()),
            ("bad key".into(), "-x".into()),
        ]
        .into_iter()
        .collect(),
    );
    p.metadata.annotations = Some(
        [("big".into(), "x".repeat(300 * 1024))]
            .into_iter()
            .collect(),
    );
    let got: Vec<String> = validate_pod(&p).iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "metadata.labels.bad key: invalid value \"bad key\": must be a qualified name: an optional DNS-1123 subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            "metadata.labels.bad key: invalid value \"-x\": must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)",
            "metadata.annotations: may not be set above 262144 bytes in total (keys and values); move large data into a file",
        ]
    );
}
