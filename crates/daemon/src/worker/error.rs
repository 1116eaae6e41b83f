//! Errors of the pod worker: what could not be done for which pod or container.

use podhost_image::ImageError;
use podhost_image::pull::PullError;

/// Why a worker step failed. The message is what a user sees in events and status.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The image is not in the store and its pull policy (or a `localhost/` name) forbids
    /// pulling it: load it (`podhost load`) or change the policy.
    #[error("Container image \"{image}\" is not present with pull policy of {policy}")]
    ImageNotPresent { image: String, policy: String },
    /// A `localhost/` image is local only and is not in the store.
    #[error("Container image is not present: {hint}")]
    LocalImageNotPresent { hint: String },
    /// The registry pull failed (the status shows ErrImagePull, then ImagePullBackOff).
    #[error("Failed to pull image \"{image}\": {source}")]
    Pull {
        image: String,
        #[source]
        source: PullError,
    },
    /// An image pull secret of the pod cannot be read: the pull fails (ErrImagePull),
    /// as the kubelet's does when its keyring cannot be made.
    #[error("Failed to pull image \"{image}\": {source}")]
    PullSecret {
        image: String,
        #[source]
        source: podhost_model::pull_secrets::PullSecretError,
    },
    /// The store cannot resolve an image it should hold.
    #[error("image \"{image}\" cannot be used: {source}")]
    Resolve {
        image: String,
        #[source]
        source: ImageError,
    },
    /// A blocking task (image lookup, bundle preparation) panicked or was cancelled.
    #[error("{what} for container {container} did not finish: {source}")]
    Task {
        what: &'static str,
        container: String,
        #[source]
        source: tokio::task::JoinError,
    },
    /// The sandbox helper (`podhost sandbox`) could not be run or failed.
    #[error("the sandbox helper failed for pod {pod}: {message}")]
    Sandbox { pod: String, message: String },
    /// The pod's emptyDir or content volumes could not be made.
    #[error("MountVolume.SetUp failed for pod {pod}: {source}")]
    Volumes {
        pod: String,
        #[source]
        source: podhost_volume::VolumeError,
    },
    /// The pod's hostname cannot be made (setHostnameAsFQDN with too long an FQDN).
    #[error("pod {pod}: {source}")]
    Dns {
        pod: String,
        #[source]
        source: podhost_model::dns::DnsError,
    },
    /// A host file the pod's /etc/hosts or /etc/resolv.conf is made from is unreadable.
    #[error("cannot read the host's {what} {path} for pod {pod}: {source}; {hint}")]
    HostFile {
        pod: String,
        path: std::path::PathBuf,
        what: &'static str,
        hint: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The pod's /etc/hosts, /etc/resolv.conf or /etc/hostname could not be written.
    #[error("cannot write the DNS files of pod {pod}: {source}")]
    DnsFiles {
        pod: String,
        #[source]
        source: podhost_rooted::RootedError,
    },
    /// The pod's network could not be set up (the backend's error says why).
    #[error("{stage}: {source}")]
    Network {
        pod: String,
        stage: &'static str,
        #[source]
        source: podhost_network::NetworkError,
    },
    /// The sandbox helper could not be spawned.
    #[error("cannot run the sandbox helper for pod {pod}: {source}")]
    SandboxSpawn {
        pod: String,
        #[source]
        source: std::io::Error,
    },
}

/// Why a container cannot be configured: shown as its `CreateContainerConfigError`, in
/// the kubelet's words where the kubelet has them.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The securityContext cannot be honoured (e.g. runAsNonRoot with a root image user),
    /// or is invalid for this container.
    #[error(transparent)]
    Security(#[from] podhost_model::security::SecurityError),
    /// The image's user cannot be resolved from its /etc/passwd and /etc/group.
    #[error(transparent)]
    User(#[from] podhost_image::UserError),
    /// A capability name oci-spec does not know.
    #[error("capability {name}: {reason}")]
    Capability { name: String, reason: String },
    /// A `Localhost` AppArmor profile that the host has not loaded.
    #[error(
        "AppArmor profile {name:?} is not loaded on this host (appArmorProfile.localhostProfile); load it with apparmor_parser first"
    )]
    AppArmorNotLoaded { name: String },
    /// podhost's default AppArmor profile could not be loaded.
    #[error(transparent)]
    AppArmor(#[from] podhost_runtime::apparmor::AppArmorError),
    /// A `hostUsers: false` container's user or group lies outside the pod's ID block.
    #[error(
        "user or group ID {id} is outside the pod's user namespace (hostUsers: false maps IDs 0-65535 to host IDs {base}-{last}); use IDs below 65536"
    )]
    OutsideUserNamespace { id: u32, base: u32, last: u32 },
    /// The seccomp profile cannot be read or turned into a filter.
    #[error(transparent)]
    Seccomp(#[from] podhost_runtime::seccomp::SeccompError),
    /// A configMap/secret/downwardAPI/projected volume's files cannot be written (the
    /// object or key is missing and not optional); the kubelet's words.
    #[error("MountVolume.SetUp failed for volume \"{volume}\": {source}")]
    ContentVolume {
        volume: String,
        #[source]
        source: Box<podhost_volume::content::ContentError>,
    },
}

/// Why a container's kernel settings (cgroup resources, rlimits) cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// The cgroup resources do not make a valid OCI section.
    #[error("cgroup resources: {0}")]
    Resources(#[from] oci_spec::OciSpecError),
    /// The rlimits annotation of the container cannot be parsed.
    #[error("annotation {key}: {message}")]
    RlimitAnnotation { key: String, message: String },
    /// An rlimit name the OCI runtime spec does not have.
    #[error("unknown rlimit {name}")]
    UnknownRlimit { name: String },
}
